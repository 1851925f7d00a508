import Dispatch
import HorizonCore
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonRadio
import HorizonTestSupport
import Logging
import Testing

@testable import HorizonRoles

#if canImport(Glibc)
    import Glibc
#endif

/// The reference API's synchronous commands on a real-time radio (BlueZ, the radio server's
/// clients): whatever thread calls them, each changes the role's state on its one serial context,
/// the radio's scheduler.
@Suite("Synchronous commands run on the role's scheduler")
struct SerialContextTests {
    /// Each state the role publishes, marked when it was published off the scheduler's queue.
    static func record(_ state: some CustomStringConvertible, on radio: QueueRadio, into recorder: Recorder<String>) {
        recorder.append(radio.realTime.isCurrent ? "\(state)" : "\(state) (off the scheduler)")
    }

    @Test func theHostsCommandsChangeItsStateOnTheScheduler() async throws {
        let world = try World()
        let radio = QueueRadio()
        let host = try world.terminal(radio: radio).host
        let published = Recorder<String>()
        host.observeState { Self.record($0, on: radio, into: published) }

        #expect(host.start(amount: euros(300)))
        // The radio registers the advertisement without holding the scheduler.
        let waiting = await within(.seconds(10)) { await host.states().first { $0 == .waitingForWallet } }
        try #require(waiting != nil)
        host.cancel()
        #expect(host.stop())

        #expect(published.values == ["waiting for a wallet", "completed with error", "idle"])
        #expect(radio.callsOffTheScheduler == [])
    }

    @Test func aCommandFromTheSchedulersOwnContextRunsAtOnce() async throws {
        let world = try World()
        let radio = QueueRadio()
        let host = try world.terminal(radio: radio).host
        // Observers run on the scheduler: a cancel issued there must run there and then, not
        // wait for the scheduler (which would be waiting for itself).
        host.observeState { [weak host] state in
            if state == .waitingForWallet { host?.cancel() }
        }

        #expect(host.start(amount: euros(300)))

        let finished = await within(.seconds(10)) { await host.states().first(where: \.isFinished) }
        #expect(finished == .completedWithError)
        #expect(host.isCancelled)
        #expect(radio.liveAdvertisementCount == 0)
    }

    @Test func commandsFromManyThreadsLeaveTheHostConsistent() async throws {
        let world = try World()
        let radio = QueueRadio()
        // A slow log between a step's decision and its publication, so that another thread's
        // step would get in between, were the steps not serialised.
        var logger = Logger(label: "horizon.test.dawdling") { _ in DawdlingLogHandler() }
        logger.logLevel = .trace
        let host = try world.terminal(radio: radio, logger: logger).host
        // Whenever a state is published, the session advertises exactly while it waits for a
        // wallet; a step split by another thread's would publish a state the session has left.
        // (An opening stopped before its advertisement was up withdraws that advertisement when
        // it is: only the current session's counts.)
        let inconsistencies = Recorder<String>()
        let offTheScheduler = Recorder<HostState>()
        host.observeState { [weak host] state in
            let live = host?.sessionID.map { radio.liveSessions.contains($0) } ?? false
            if live != (state == .waitingForWallet) {
                inconsistencies.append("\(state) published with its advertisement \(live ? "live" : "gone")")
            }
            if !radio.realTime.isCurrent { offTheScheduler.append(state) }
        }
        let started = Recorder<Bool>()

        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for round in 0..<1000 {
                switch (worker + round) % 3 {
                case 0: if host.start(amount: euros(Int64(100 + round))) { started.append(true) }
                case 1: host.cancel()
                default: host.stop()
                }
            }
        }

        // Advertisements of abandoned openings are withdrawn as they come up.
        let settled = await within(.seconds(10)) { () async -> Bool? in
            while !Task.isCancelled {
                let (state, live) = radio.realTime.performSynchronously { (host.state, radio.liveAdvertisementCount) }
                if live == (state == .waitingForWallet ? 1 : 0) { return true }
                try? await Task.sleep(for: .milliseconds(10))
            }
            return nil
        }
        #expect(settled == true)
        #expect(inconsistencies.values.prefix(5) == [])
        #expect(offTheScheduler.values.prefix(5) == [])
        #expect(started.count > 0)
    }

    @Test func theWalletsCommandsChangeItsStateOnTheScheduler() async throws {
        let world = try World()
        let radio = QueueRadio()
        let client = PaymentClient(
            radio: radio, identity: WalletIdentity(), trustAnchors: world.anchors,
            configuration: PaymentClientConfiguration(
                // One sighting, heard once: it must not fade while a loaded machine gets to startDeciding.
                tracker: FusionTrackerConfiguration(
                    fadeTimeout: .seconds(120), minimumSightings: 1, evaluationInterval: .milliseconds(5))))
        let decider = client.manualConnectionDecider
        let published = Recorder<String>()
        client.observeState { Self.record("client \($0)", on: radio, into: published) }
        decider.observeState { Self.record("decider \($0)", on: radio, into: published) }

        try client.start()
        var random = SystemRandomNumberGenerator()
        try radio.hear(
            HorizonAdvertisement(
                transactionType: .payment, sessionID: .random(using: &random),
                terminalKeyID: TerminalKeyID(bytes: Array(repeating: 7, count: TerminalKeyID.byteCount))),
            from: PeerAddress("5E:1A:00:00:00:07"), rssi: -40)
        let candidate = await within(.seconds(10)) { await decider.availableCandidate.first { $0 != nil } }
        try #require(candidate != nil)

        #expect(decider.startDeciding())
        // Nobody answers the connection: the attempt ends without an offer.
        let finished = await within(.seconds(10)) { await client.states().first(where: \.isFinished) }
        try #require(finished != nil)
        client.restart()
        decider.restart()
        client.stop()

        #expect(radio.connectAttempts >= 1)
        #expect(published.values.contains("client connecting"))
        #expect(published.values.contains("decider deciding"))
        #expect(published.values.filter { $0.hasSuffix("(off the scheduler)") } == [])
        #expect(radio.callsOffTheScheduler == [])
    }

    @Test func decisionsFromManyThreadsTakeACandidateOnceOnTheScheduler() throws {
        let scheduler = RealTimeScheduler(label: "horizon.test.decider")
        let decider = ManualConnectionDecider(scheduler: scheduler)
        let offTheScheduler = Recorder<ManualConnectionDeciderState>()
        decider.observeState { state in if !scheduler.isCurrent { offTheScheduler.append(state) } }
        var random = SystemRandomNumberGenerator()
        let tracking = PeripheralTracking(
            peripheralMetaData: PeripheralMetaData(
                address: PeerAddress("5E:1A:00:00:00:08"), transactionType: .payment,
                sessionID: .random(using: &random),
                terminalKeyID: try TerminalKeyID(bytes: Array(repeating: 8, count: TerminalKeyID.byteCount))),
            smoothedRSSI: -40, lastRSSI: -40, sightings: 3, firstSeen: .zero, lastSeen: .zero)
        scheduler.performSynchronously { decider.offer(tracking) }
        // How many of the threads that asked at once were told they took the candidate, per round.
        var takers: [Int] = []
        for _ in 0..<100 {
            decider.restart()
            let taken = Recorder<Bool>()
            DispatchQueue.concurrentPerform(iterations: 4) { _ in
                if decider.startDeciding() { taken.append(true) }
            }
            takers.append(taken.count)
        }
        #expect(takers.filter { $0 != 1 } == [])
        #expect(decider.state == .deciding)
        #expect(offTheScheduler.values == [])
    }
}

/// Logs nothing, slowly: each line takes a tenth of a millisecond.
struct DawdlingLogHandler: LogHandler {
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) { usleep(100) }
}

/// `operation`'s result, or nil if `timeout` passes first (the operation is then cancelled).
func within<T: Sendable>(_ timeout: Duration, _ operation: @escaping @Sendable () async -> T?) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask { await operation() }
        group.addTask {
            try? await Task.sleep(for: timeout)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}
