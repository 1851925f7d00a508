import Crypto
import Foundation
import HorizonBlueZ
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonRadio
import HorizonRoles
import HorizonSecureChannel
import HorizonStores
import Synchronization

/// Payments on the BlueZ radios.
struct BlueZPaymentsResult: Codable {
    let payments: Int
    let warmUpPayments: Int
    /// Attempts that did not complete, with why (they are retried and not counted).
    let failures: [String]
    let walletStore: String
    let dataFileSystem: String
    /// From the wallet's acceptance (`decideForCandidate()`: the decider turns `accepted`) to the
    /// verified receipt (the client turns `completed`), wall time: the budget's number.
    let acceptanceToReceiptMilliseconds: Summary
    /// From `onHostConnected` (where the app calls `setOrderConfirmedByUser`) to the receipt.
    let confirmToReceiptMilliseconds: Summary
    /// From the client's `CentralRadio.connect` to the link (connect, GATT discovery, subscribe,
    /// register; the BlueZ layer's own retries included).
    let connectMilliseconds: Summary
    let linkUpToReceiptMilliseconds: Summary
    /// From `PaymentHost.start` (advertising) to the receipt: discovery, three sightings, the
    /// decision, the connect, the handshake, the offer, the confirmation.
    let startToReceiptMilliseconds: Summary
    /// From `PaymentHost.start` to the wallet's decider offering the candidate.
    let startToCandidateMilliseconds: Summary
    /// Start → receipt in consecutive parts (nil in results written before they were measured).
    let tap: BlueZTapBreakdown?
    let breakdown: BlueZBreakdown
    let trafficFromAcceptance: BlueZTraffic
    let trafficWholeLink: BlueZTraffic
    let walletAttMTU: Summary
    /// Raw round trips on each payment's own link right after its receipt (the terminal no
    /// longer advertising, both adapters still discovering).
    let rawRoundTripOnPaymentLink: BlueZRoundTripResult?
    /// Per payment: acceptance → receipt / the median of its own link's raw round trips.
    let pairedRatio: Summary?
}

/// Start → receipt in six consecutive parts, each payment's own; medians.
struct BlueZTapBreakdown: Codable {
    /// `PaymentHost.start` → it returns: the session opened, the advertisement registered.
    let advertiseMilliseconds: Summary
    /// → the wallet's radio first reports this session (bluetoothd's discovery, D-Bus).
    let firstSightingMilliseconds: Summary
    /// → the tracker offers it as the candidate (the sightings it needs, its evaluation).
    let candidateMilliseconds: Summary
    /// → the client asks the radio to connect (the decision, automatic here).
    let decideMilliseconds: Summary
    /// → the link is up: connect, services resolved, subscribed, registered.
    let connectMilliseconds: Summary
    /// → the verified receipt: handshake, offer, confirmation, receipt.
    let linkUpToReceiptMilliseconds: Summary

    init?(_ parts: [BlueZPaymentRecord.TapParts]) {
        guard !parts.isEmpty else { return nil }
        advertiseMilliseconds = Summary(parts.map(\.advertise))
        firstSightingMilliseconds = Summary(parts.map(\.firstSighting))
        candidateMilliseconds = Summary(parts.map(\.candidate))
        decideMilliseconds = Summary(parts.map(\.decide))
        connectMilliseconds = Summary(parts.map(\.connect))
        linkUpToReceiptMilliseconds = Summary(parts.map(\.linkUpToReceipt))
    }
}

/// Acceptance to receipt cut at the moments both ends of the link saw (one process, one clock);
/// the five parts add up to the whole.
struct BlueZBreakdown: Codable {
    /// Acceptance → the wallet's first `send`: signing the confirmation, storing it (SQLite, synced).
    let walletBeforeSendMilliseconds: Summary
    /// The wallet's first `send` → the terminal's handler has the confirmation's last frame.
    let writeLegMilliseconds: Summary
    /// The terminal's last frame in → its first `send` of the answer: decrypt, verify, settle in
    /// the ledger (synced), sign and encrypt the receipt.
    let terminalMilliseconds: Summary
    /// The terminal's first `send` → the wallet's handler has the receipt's last frame.
    let notificationLegMilliseconds: Summary
    /// The receipt's last frame in → `completed`: decrypt, verify, resolve the pending entry (synced).
    let walletAfterReceiveMilliseconds: Summary
}

/// Link frames as the wallet's `ByteLink` saw them (payloads without the BlueZ layer's tag).
struct BlueZTraffic: Codable {
    let walletFrames: Summary
    let terminalFrames: Summary
    let walletBytes: Summary
    let terminalBytes: Summary
    /// A wallet flight answered by a terminal flight.
    let roundTrips: Summary
}

/// One terminal and one wallet, each on its own BlueZ adapter, in this process: the set-up of
/// `Shop`/`Pair` (ledger, `TerminalRadioService`, `PaymentHost`, conflict observer; a wallet with
/// a SQLite pending store whose app accepts at once), on real radios and real time. `pause()`
/// takes both off the air (no discovery, no session) so the raw round trip can be measured in
/// between, `resume()` puts them back.
final class BlueZShop {
    let terminalRadio: BlueZRadio
    let walletRadio: BlueZRadio
    let directory: URL
    let terminalTap: TappedBlueZPeripheral
    let ledger: InProcessLedger
    let service: TerminalRadioService
    let host: PaymentHost
    let terminalHub: SightingHub
    let conflicts: BluetoothConflictObserver
    let walletHub: SightingHub
    let client: PaymentClient
    let probe = BlueZProbe()
    private(set) var failures: [String] = []
    private var successes = 0
    /// Raw round trips on each payment's link right after its receipt (0: none).
    var echoRoundTrips = 0
    var echoPayloadBytes = 20

    /// How long one payment may take before it counts as failed (the VM is slow).
    static let paymentTimeout: Duration = .seconds(90)

    init(terminal: BlueZRadio, wallet: BlueZRadio, directory: URL) throws {
        terminalRadio = terminal
        walletRadio = wallet
        self.directory = directory
        let anchor = P256.Signing.PrivateKey()
        let key = P256.Signing.PrivateKey()
        let now = terminal.scheduler.wallClock
        let identity = try TerminalIdentity(
            signingKey: key,
            credential: TerminalCredential.issue(
                by: anchor, merchantID: "m-bluez", merchantName: "Benchmark Café (BlueZ)", terminalKey: key.publicKey,
                notBefore: now - 86_400, expiresAt: now + 365 * 86_400))
        ledger = try Pair.openLedger(at: directory.appendingPathComponent("ledger-bluez.sqlite").path)
        terminalTap = TappedBlueZPeripheral(radio: terminal, probe: probe)
        service = TerminalRadioService(
            radio: terminalTap, identity: identity, processor: ledger,
            journal: try SQLiteTerminalJournal(path: directory.appendingPathComponent("journal-bluez.sqlite").path))
        host = PaymentHost(service: service, processor: ledger)
        terminalHub = SightingHub(radio: terminal)
        conflicts = BluetoothConflictObserver(scanner: terminalHub, ownTerminalKeyID: service.terminalKeyID)
        let store = try WalletStore(path: directory.appendingPathComponent("wallet-bluez.sqlite").path)
        // The probe times each connect and logs the link it opens.
        let probe = probe
        let walletRadio = TappedCentralRadio(
            radio: wallet, connectRequested: { probe.connectRequested() }, sighted: { probe.sighted($0) },
            linkOpened: { link in
                let log = LinkLog()
                probe.walletLinkOpened(log, attMTU: link.attMTU)
                return LoggedLink(link, log: log, side: .wallet, echo: probe.echo)
            })
        walletHub = SightingHub(radio: walletRadio)
        client = PaymentClient(
            radio: walletRadio, identity: WalletIdentity(), trustAnchors: [TrustAnchor(publicKey: anchor.publicKey)],
            pendingStore: SQLitePendingPaymentStore(store: store), scanner: walletHub,
            logger: BlueZ.bluezLogger("wallet.client"))
        Self.script(client, probe: probe)
    }

    /// The app of `Pair.script` (the library's `WalletAutopilot`), with the probe's marks.
    private static func script(_ client: PaymentClient, probe: BlueZProbe) {
        let hooks = WalletAutopilot.Hooks(
            candidateTaken: { _ in probe.mark(\.candidateAt) }, accepted: { _ in probe.mark(\.acceptedAt) },
            confirming: { _ in probe.mark(\.confirmedAt) })
        _ = WalletAutopilot(client: client, hooks: hooks) { _ in .pay(tip: Shop.tip) }
        client.observeState { state in
            if state.isFinished { probe.mark(\.finishedAt) }
        }
    }

    /// The terminal's conflict observer and the wallet's tracker scanning, as in a shop.
    func resume() throws {
        do {
            try conflicts.restart()
            try client.start()
        } catch {
            throw BenchmarkError("starting discovery for the payments: \(error)")
        }
    }

    /// Both radios quiet: no discovery (the raw round trip is measured in between).
    func pause() {
        client.stop()
        walletHub.stop()
        conflicts.stop()
        terminalHub.stop()
    }

    func close() {
        pause()
        _ = host.stop()
    }

    /// Runs payments until `count` succeeded after `warmUp` successes that are not returned. A
    /// failed attempt is noted in `failures` and another made; more than `limit` failures in all
    /// (over every call) and this throws.
    func pay(count: Int, warmUp: Int = 0, limit: Int) throws -> [BlueZPaymentRecord] {
        var records: [BlueZPaymentRecord] = []
        var warmed = 0
        while records.count < count {
            let label = warmed < warmUp ? "warm-up \(warmed + 1) of \(warmUp)" : "\(successes + 1)"
            do {
                let record = try payOnce()
                if warmed < warmUp {
                    warmed += 1
                } else {
                    records.append(record)
                    successes += 1
                }
                Progress.note(
                    "bluez: payment \(label): acceptance → receipt \(record.acceptanceToReceipt.formatted(1)) ms, connect \(record.connect.formatted(0)) ms, start → receipt \(record.startToReceipt.formatted(0)) ms"
                )
            } catch {
                failures.append("payment \(label): \(error)")
                Progress.note("bluez: payment \(label) failed: \(error)")
                guard failures.count <= limit else {
                    throw BenchmarkError("\(failures.count) payments failed; the last: \(error)")
                }
                // Let the radios settle: links closed, the next session advertised afresh.
                _ = waitUntil(timeout: .seconds(10)) {
                    service.connectionCount == 0 && terminalRadio.connectedWalletCount == 0
                }
                // A session the wallet failed to connect to stays worth another try to it, but
                // the terminal has ended it: scanning starts afresh, so that the wallet does not
                // take the ended session (still in bluetoothd's cache) for the next attempt's.
                pause()
                try resume()
            }
        }
        return records
    }

    /// One payment to its end: both sides finished and the link gone; then both reset.
    private func payOnce() throws -> BlueZPaymentRecord {
        probe.reset()
        probe.echo.prepare(hold: echoRoundTrips > 0)
        guard host.start(amount: Shop.amount, registerUser: RegisterUser(name: "Ana")) else {
            throw BenchmarkError("the terminal did not start: \(host.humanizedError ?? "no reason given")")
        }
        probe.mark(\.advertisedAt)
        defer {
            _ = host.stop()
            client.restart()
            client.fusionTracker.manualConnectionDecider.restart()
        }
        defer { probe.echo.finish() }
        let finished = waitUntil(timeout: Self.paymentTimeout) { host.state.isFinished && client.state.isFinished }
        // Raw round trips on this payment's link, right after its receipt (the client has closed
        // the link; its wrapper kept it open), then the link goes.
        var paired: [RoundTripTimes] = []
        if finished, client.state == .completed, let held = probe.echo.heldLink {
            // The wallet acknowledges the receipt just before it closes the link: that frame must
            // reach the terminal's service first, or the echo would send it back as the first
            // round trip's reply.
            _ = waitUntil(timeout: .seconds(5)) { probe.everyWalletFrameArrived }
            paired = try echoRoundTrips(on: held)
        }
        probe.echo.finish()
        // The wallet closes the link after the receipt; the terminal sees it go (or closes it
        // itself after its linger).
        let linger = PaymentHostConfiguration().lingerAfterReceipt
        let closed = waitUntil(timeout: linger + .seconds(10)) {
            service.connectionCount == 0 && terminalRadio.connectedWalletCount == 0
        }
        guard finished, host.state == .completed, client.state == .completed, client.receipt != nil else {
            throw BenchmarkError(
                "terminal \(host.state) (\(host.humanizedError ?? "no error")), wallet \(client.state) (\(client.humanizedError ?? "no error"))"
            )
        }
        guard closed else { throw BenchmarkError("the link was still up \(linger) + 10 s after the receipt") }
        var record = try probe.record()
        record.paired = paired
        return record
    }

    /// `echoRoundTrips` (after one not counted) raw round trips of `echoPayloadBytes` on `link`,
    /// the terminal's side echoing.
    private func echoRoundTrips(on link: any ByteLink) throws -> [RoundTripTimes] {
        guard echoRoundTrips > 0 else { return [] }
        let echo = probe.echo
        echo.setEchoing(true)
        defer { echo.setEchoing(false) }
        let size = max(2, min(echoPayloadBytes, link.maximumPayloadSize, link.attMTU - 7))
        var times: [RoundTripTimes] = []
        for index in 0...echoRoundTrips {
            var payload = [UInt8](repeating: 0xE0, count: size)
            payload[0] = UInt8(truncatingIfNeeded: index)
            let sent = Clocks.wall()
            do {
                try link.send(payload)
            } catch {
                throw BenchmarkError("round trip \(index) on the payment's link: send failed: \(error)")
            }
            guard let (back, reply) = echo.replies.take(timeout: BlueZRoundTrip.replyTimeout) else {
                throw BenchmarkError("round trip \(index) on the payment's link: no echo")
            }
            guard reply == payload else {
                throw BenchmarkError("round trip \(index) on the payment's link: the echo differs")
            }
            let atTerminal = echo.arrivals.take(timeout: .seconds(1)) ?? back
            if index > 0 { times.append(RoundTripTimes(sent: sent, atTerminal: atTerminal, back: back)) }
        }
        return times
    }

    /// The measured payments, summarised.
    static func summarise(
        _ records: [BlueZPaymentRecord], warmUp: Int, failures: [String], directory: URL, echoPayloadBytes: Int
    ) -> BlueZPaymentsResult {
        let breakdowns = records.compactMap(\.breakdown)
        return BlueZPaymentsResult(
            payments: records.count, warmUpPayments: warmUp, failures: failures, walletStore: "sqlite",
            dataFileSystem: fileSystemName(of: directory.path),
            acceptanceToReceiptMilliseconds: Summary(records.map(\.acceptanceToReceipt)),
            confirmToReceiptMilliseconds: Summary(records.map(\.confirmToReceipt)),
            connectMilliseconds: Summary(records.map(\.connect)),
            linkUpToReceiptMilliseconds: Summary(records.map(\.linkUpToReceipt)),
            startToReceiptMilliseconds: Summary(records.map(\.startToReceipt)),
            startToCandidateMilliseconds: Summary(records.map(\.startToCandidate)),
            tap: BlueZTapBreakdown(records.compactMap(\.tap)),
            breakdown: BlueZBreakdown(
                walletBeforeSendMilliseconds: Summary(breakdowns.map(\.walletBeforeSend)),
                writeLegMilliseconds: Summary(breakdowns.map(\.writeLeg)),
                terminalMilliseconds: Summary(breakdowns.map(\.terminal)),
                notificationLegMilliseconds: Summary(breakdowns.map(\.notificationLeg)),
                walletAfterReceiveMilliseconds: Summary(breakdowns.map(\.walletAfterReceive))),
            trafficFromAcceptance: BlueZTraffic(records.map(\.fromAcceptance)),
            trafficWholeLink: BlueZTraffic(records.map(\.wholeLink)),
            walletAttMTU: Summary(records.map(\.attMTU)),
            rawRoundTripOnPaymentLink: BlueZRoundTrip.summarise(
                records.flatMap(\.paired),
                conditions:
                    "on each payment's own link right after its receipt (the terminal no longer advertising, both adapters discovering)",
                payloadBytes: echoPayloadBytes, warmUp: 1, series: records.filter { !$0.paired.isEmpty }.count),
            pairedRatio: records.contains { $0.pairedRatio != nil } ? Summary(records.compactMap(\.pairedRatio)) : nil)
    }
}

/// What one BlueZ payment took, milliseconds.
struct BlueZPaymentRecord {
    struct Parts {
        let walletBeforeSend: Double
        let writeLeg: Double
        let terminal: Double
        let notificationLeg: Double
        let walletAfterReceive: Double
    }

    struct TapParts {
        let advertise: Double
        let firstSighting: Double
        let candidate: Double
        let decide: Double
        let connect: Double
        let linkUpToReceipt: Double
    }

    struct Traffic {
        var walletFrames = 0
        var terminalFrames = 0
        var walletBytes = 0
        var terminalBytes = 0
        var turns = 0
        var roundTrips: Int { (turns + 1) / 2 }
    }

    let acceptanceToReceipt: Double
    let confirmToReceipt: Double
    let connect: Double
    let linkUpToReceipt: Double
    let startToReceipt: Double
    let startToCandidate: Double
    let tap: TapParts?
    let breakdown: Parts?
    let fromAcceptance: Traffic
    let wholeLink: Traffic
    let attMTU: Int
    /// Raw round trips on the same link right after the receipt.
    var paired: [RoundTripTimes] = []

    /// acceptance → receipt / the median of this payment's own raw round trips.
    var pairedRatio: Double? {
        paired.isEmpty ? nil : acceptanceToReceipt / Summary(paired.map(\.total)).median
    }
}

extension BlueZTraffic {
    init(_ traffic: [BlueZPaymentRecord.Traffic]) {
        walletFrames = Summary(traffic.map(\.walletFrames))
        terminalFrames = Summary(traffic.map(\.terminalFrames))
        walletBytes = Summary(traffic.map(\.walletBytes))
        terminalBytes = Summary(traffic.map(\.terminalBytes))
        roundTrips = Summary(traffic.map(\.roundTrips))
    }
}

/// Every frame a link carried, with the moment its end saw it (monotonic nanoseconds).
final class LinkLog: Sendable {
    struct Event: Sendable {
        let at: Int64
        let outgoing: Bool
        let bytes: Int
    }

    private let events = Mutex<[Event]>([])

    func note(outgoing: Bool, bytes: Int) {
        let event = Event(at: Clocks.wall(), outgoing: outgoing, bytes: bytes)
        events.withLock { $0.append(event) }
    }

    var all: [Event] { events.withLock { $0 } }
}

/// A link passed through, its frames logged: sends when `send` is called, receipts when the
/// radio hands them to the owner's handler (before the owner acts on them). With an `EchoControl`
/// it also lends itself to raw round trips after the payment: the wallet's side keeps the link
/// open when its owner closes it (and hands it to the benchmark), and while echoing, the
/// terminal's side sends every payload straight back instead of passing it to the service.
final class LoggedLink: ByteLink, Sendable {
    enum Side: Sendable {
        case wallet
        case terminal
    }

    let inner: any ByteLink
    let log: LinkLog
    let side: Side
    let echo: EchoControl?

    init(_ inner: any ByteLink, log: LinkLog, side: Side, echo: EchoControl? = nil) {
        self.inner = inner
        self.log = log
        self.side = side
        self.echo = echo
    }

    var peer: PeerAddress { inner.peer }
    var attMTU: Int { inner.attMTU }

    func setHandler(_ handler: ByteLinkHandler) {
        let (log, side, echo, inner) = (log, side, echo, inner)
        inner.setHandler(
            ByteLinkHandler(
                onReceive: { [weak inner] payload in
                    if let echo, echo.isEchoing {
                        let now = Clocks.wall()
                        switch side {
                        case .wallet: echo.replies.put((now, payload))
                        case .terminal:
                            echo.arrivals.put(now)
                            try? inner?.send(payload)
                        }
                        return
                    }
                    log.note(outgoing: false, bytes: payload.count)
                    handler.onReceive(payload)
                }, onClose: handler.onClose))
    }

    func send(_ payload: [UInt8]) throws(RadioError) {
        log.note(outgoing: true, bytes: payload.count)
        try inner.send(payload)
    }

    func close() {
        if side == .wallet, let echo, echo.hold(inner) { return }
        inner.close()
    }
}

/// Raw round trips on a payment's own link, right after its receipt: the wallet's link is held
/// open when the client closes it, and the terminal's side echoes while `isEchoing`.
final class EchoControl: Sendable {
    private struct State {
        var holdOnClose = false
        var echoing = false
        var held: (any ByteLink)?
    }

    private let state = Mutex(State())
    let replies = Handoff<(Int64, [UInt8])>()
    let arrivals = Handoff<Int64>()

    var isEchoing: Bool { state.withLock { $0.echoing } }

    /// Before a payment: hold the wallet's link when it is closed (or not).
    func prepare(hold: Bool) {
        state.withLock {
            $0.holdOnClose = hold
            $0.echoing = false
            $0.held = nil
        }
        replies.drain()
        arrivals.drain()
    }

    /// The wallet's link being closed by its owner: true if kept for the echo instead.
    func hold(_ link: any ByteLink) -> Bool {
        state.withLock { state in
            guard state.holdOnClose else { return false }
            state.holdOnClose = false
            state.held = link
            return true
        }
    }

    var heldLink: (any ByteLink)? { state.withLock { $0.held } }

    func setEchoing(_ on: Bool) { state.withLock { $0.echoing = on } }

    /// After the payment: stop echoing, stop holding, and close what is held.
    func finish() {
        let held = state.withLock { state -> (any ByteLink)? in
            defer {
                state.held = nil
                state.holdOnClose = false
                state.echoing = false
            }
            return state.held
        }
        held?.close()
    }
}

/// The terminal's BlueZ radio, passed through, except that each wallet's link is logged, and
/// that links can be diverted away from the terminal service (to the raw round trip's echo).
final class TappedBlueZPeripheral: PeripheralRadio {
    let radio: BlueZRadio
    let probe: BlueZProbe
    private struct Routes {
        var service: (@Sendable (any ByteLink) -> Void)?
        var diverted: (@Sendable (any ByteLink) -> Void)?
    }
    private let routes = Mutex(Routes())

    init(radio: BlueZRadio, probe: BlueZProbe) {
        self.radio = radio
        self.probe = probe
        radio.setConnectionHandler { [weak self, probe] link in
            guard let (service, diverted) = self?.routes.withLock({ ($0.service, $0.diverted) }) else {
                link.close()
                return
            }
            if let diverted {
                diverted(link)
            } else if let service {
                let log = LinkLog()
                probe.terminalLinkOpened(log)
                service(LoggedLink(link, log: log, side: .terminal, echo: probe.echo))
            } else {
                link.close()
            }
        }
    }

    var scheduler: any Scheduler { radio.scheduler }
    var availability: AdapterAvailability { radio.availability }

    func startAdvertising(_ advertisingData: [UInt8], interval: Duration) async throws(RadioError)
        -> any AdvertisingSet
    {
        try await radio.startAdvertising(advertisingData, interval: interval)
    }

    func setConnectionHandler(_ handler: @escaping @Sendable (any ByteLink) -> Void) {
        routes.withLock { $0.service = handler }
    }

    /// New links go to `handler` instead of the terminal service (nil: to the service again).
    func divert(_ handler: (@Sendable (any ByteLink) -> Void)?) {
        routes.withLock { $0.diverted = handler }
    }
}

/// The moments of one payment, from whichever queue saw them (monotonic nanoseconds).
final class BlueZProbe: Sendable {
    struct Moments: Sendable {
        var startedAt: Int64 = 0
        var advertisedAt: Int64?
        var firstSightingAt: Int64?
        var candidateAt: Int64?
        var connectRequestedAt: Int64?
        var linkUpAt: Int64?
        var acceptedAt: Int64?
        var confirmedAt: Int64?
        var finishedAt: Int64?
        var walletLog: LinkLog?
        var terminalLog: LinkLog?
        var attMTU = 0
    }

    private let moments = Mutex(Moments())
    /// Sessions heard before this payment's start: bluetoothd still reports the last one for a
    /// while, and it is not this payment's first sighting.
    private let earlierSessions = Mutex<(heard: Set<SessionID>, before: Set<SessionID>)>(([], []))
    let echo = EchoControl()

    func reset() {
        earlierSessions.withLock { $0.before = $0.heard }
        moments.withLock { $0 = Moments(startedAt: Clocks.wall()) }
    }

    /// The wallet's radio reports a sighting: the first of a session new since `reset` is marked.
    func sighted(_ sighting: Sighting) {
        guard case .horizon(let advertisement) = HorizonAdvertisement.parse(sighting.advertisingData) else { return }
        let new = earlierSessions.withLock { sessions in
            sessions.heard.insert(advertisement.sessionID)
            return !sessions.before.contains(advertisement.sessionID)
        }
        if new { mark(\.firstSightingAt) }
    }

    /// Notes the first time of a moment (the candidate may be offered again, for instance).
    func mark(_ field: WritableKeyPath<Moments, Int64?>) {
        let now = Clocks.wall()
        moments.withLock { moments in
            if moments[keyPath: field] == nil { moments[keyPath: field] = now }
        }
    }

    /// A connect starts (the last one before the link counts).
    func connectRequested() {
        let now = Clocks.wall()
        moments.withLock { $0.connectRequestedAt = now }
    }

    func walletLinkOpened(_ log: LinkLog, attMTU: Int) {
        let now = Clocks.wall()
        moments.withLock {
            $0.linkUpAt = now
            $0.walletLog = log
            $0.attMTU = attMTU
        }
    }

    func terminalLinkOpened(_ log: LinkLog) { moments.withLock { $0.terminalLog = log } }

    func record() throws -> BlueZPaymentRecord {
        let m = moments.withLock { $0 }
        guard let accepted = m.acceptedAt, let confirmed = m.confirmedAt, let finished = m.finishedAt,
            let linkUp = m.linkUpAt, let requested = m.connectRequestedAt, let walletLog = m.walletLog
        else {
            throw BenchmarkError("a payment finished without an acceptance, a confirmation, a link or a receipt")
        }
        let wallet = walletLog.all
        let terminal = m.terminalLog?.all ?? []
        // Traffic up to the receipt's arrival at the wallet, as the simulated sections count it:
        // the acknowledgement the wallet sends after the receipt (before it reports completed)
        // is not part of acceptance → receipt.
        let receiptIn = wallet.last(where: { !$0.outgoing && $0.at <= finished })?.at ?? finished
        return BlueZPaymentRecord(
            acceptanceToReceipt: Self.ms(finished - accepted), confirmToReceipt: Self.ms(finished - confirmed),
            connect: Self.ms(linkUp - requested), linkUpToReceipt: Self.ms(finished - linkUp),
            startToReceipt: Self.ms(finished - m.startedAt),
            startToCandidate: Self.ms((m.candidateAt ?? finished) - m.startedAt),
            tap: Self.tap(m, linkUp: linkUp, requested: requested, finished: finished),
            breakdown: Self.parts(accepted: accepted, finished: finished, wallet: wallet, terminal: terminal),
            fromAcceptance: Self.traffic(wallet.filter { $0.at >= accepted && $0.at <= receiptIn }),
            wholeLink: Self.traffic(wallet.filter { $0.at <= receiptIn }), attMTU: m.attMTU)
    }

    /// Whether the terminal's side has received every frame the wallet's side sent.
    var everyWalletFrameArrived: Bool {
        let (walletLog, terminalLog) = moments.withLock { ($0.walletLog, $0.terminalLog) }
        guard let walletLog, let terminalLog else { return true }
        return walletLog.all.count(where: \.outgoing) <= terminalLog.all.count(where: { !$0.outgoing })
    }

    private static func ms(_ nanoseconds: Int64) -> Double { Double(nanoseconds) / 1e6 }

    private static func tap(_ m: Moments, linkUp: Int64, requested: Int64, finished: Int64)
        -> BlueZPaymentRecord.TapParts?
    {
        guard let advertised = m.advertisedAt, let sighted = m.firstSightingAt, let candidate = m.candidateAt,
            m.startedAt <= sighted, sighted <= candidate, candidate <= requested
        else { return nil }
        // The wallet may hear the session before `start` has returned.
        let heard = max(sighted, advertised)
        return BlueZPaymentRecord.TapParts(
            advertise: ms(advertised - m.startedAt), firstSighting: ms(heard - advertised),
            candidate: ms(candidate - heard), decide: ms(requested - candidate), connect: ms(linkUp - requested),
            linkUpToReceipt: ms(finished - linkUp))
    }

    /// Acceptance to receipt in five consecutive parts (see `BlueZBreakdown`).
    private static func parts(accepted: Int64, finished: Int64, wallet: [LinkLog.Event], terminal: [LinkLog.Event])
        -> BlueZPaymentRecord.Parts?
    {
        guard let firstSend = wallet.first(where: { $0.outgoing && $0.at >= accepted })?.at,
            let firstAnswer = terminal.first(where: { $0.outgoing && $0.at >= firstSend })?.at,
            let lastIn = terminal.last(where: { !$0.outgoing && $0.at >= firstSend && $0.at <= firstAnswer })?.at,
            let lastBack = wallet.last(where: { !$0.outgoing && $0.at >= firstAnswer && $0.at <= finished })?.at
        else { return nil }
        return BlueZPaymentRecord.Parts(
            walletBeforeSend: ms(firstSend - accepted), writeLeg: ms(lastIn - firstSend),
            terminal: ms(firstAnswer - lastIn), notificationLeg: ms(lastBack - firstAnswer),
            walletAfterReceive: ms(finished - lastBack))
    }

    private static func traffic(_ events: [LinkLog.Event]) -> BlueZPaymentRecord.Traffic {
        var traffic = BlueZPaymentRecord.Traffic()
        var previous: Bool?
        for event in events {
            if event.outgoing {
                traffic.walletFrames += 1
                traffic.walletBytes += event.bytes
            } else {
                traffic.terminalFrames += 1
                traffic.terminalBytes += event.bytes
            }
            if event.outgoing != previous { traffic.turns += 1 }
            previous = event.outgoing
        }
        return traffic
    }
}
