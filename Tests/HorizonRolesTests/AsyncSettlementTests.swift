import Dispatch
import Foundation
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonRoles
import HorizonSettlement
import HorizonSimulatedRadio
import HorizonStores
import HorizonTestSupport
import Synchronization
import Testing

/// Settlement is awaited off the radio's scheduler: a slow (remote) processor holds up only its
/// own session, every step still journaled before the answer leaves; a simulation stays exact.
@Suite("Async settlement", .offTheCooperativePool)
struct AsyncSettlementTests {
    @Test func whileAPaymentSettlesTheTerminalServesOthersThenJournalsAndAnswers() throws {
        let world = try World()
        // The processor's work takes 5 s of virtual time; whatever it does in real time, its
        // answer comes in at that instant, so the run replays exactly.
        let processingTime = Duration.seconds(5)
        world.simulation.externalWorkDuration = processingTime
        let rig = try world.terminal()
        let slow = SlowProcessor(ledger: rig.ledger)
        let host = PaymentHost(service: rig.service, processor: slow)
        let wallet = try world.wallet()
        let app = ScriptedWalletApp(wallet, decision: .accept(tip: 50))
        let journal = rig.journal
        // When the wallet holds its receipt, the journal already had the answer.
        let journaledFirst = Mutex<Bool?>(nil)
        wallet.client.observeState { state in
            guard state == .completed, let id = slow.requests.first?.paymentID else { return }
            let answered = (try? journal.record(for: id))?.answer != nil
            journaledFirst.withLock { $0 = answered }
        }

        #expect(host.start(amount: euros(20_00)))
        // Not until the processor was asked: it runs on a thread of its own, in real time, and the
        // simulation must not reach the answer's instant before the test releases it.
        #expect(world.run(until: { host.state == .acquiringPaymentExecution }))
        let settleStarted = world.simulation.now

        // Meanwhile: another session opens and a wallet gets its offer; another wallet's Hello
        // for the payment is answered (with the offer: the executing request may yet be
        // declined); nothing waits for the processor.
        let coupon = try #require(
            RedemptionHost.redemptionHost(
                transactionType: .couponRedemption, service: rig.service, processor: rig.ledger))
        #expect(coupon.start(RedemptionOffer(item: "any coupon", value: euros(0))))
        let couponSession = try #require(coupon.sessionID)
        let paymentSession = try #require(host.sessionID)
        let redeemer = try ScriptedCentral(
            world: world, name: "redeemer", terminal: rig.device.address, session: couponSession
        ) { connection in connection.send(.hello(connection.hello(type: .couponRedemption))) }
        let latecomer = try ScriptedCentral(
            world: world, name: "latecomer", at: Position(x: 0.1, y: 0.3), terminal: rig.device.address,
            session: paymentSession
        ) { connection in connection.send(.hello(connection.hello())) }
        #expect(world.run(until: { redeemer.offers.count == 1 && latecomer.offers.count == 1 }, timeout: .seconds(3)))
        #expect(world.simulation.now < settleStarted + processingTime)
        // The processor was asked (its task runs in real time: a loaded machine may take a
        // moment to start it); confirmed and submitted were on record before that, and there is
        // no answer yet.
        let askedBy = ContinuousClock.now + .seconds(20)
        while slow.requests.count == 0, ContinuousClock.now < askedBy { Thread.sleep(forTimeInterval: 0.01) }
        #expect(slow.requests.count == 1)
        let paymentID = try #require(slow.requests.first?.paymentID)
        let pending = try #require(try journal.record(for: paymentID))
        #expect(pending.answer == nil)
        #expect(latecomer.errors.isEmpty)
        #expect(coupon.state == .awaitingUserDecision)
        #expect(host.state == .acquiringPaymentExecution)
        #expect(wallet.client.receipt == nil)
        // A cancel at the register now must not report "not charged": it is ignored.
        host.cancel()
        #expect(host.state == .acquiringPaymentExecution)

        slow.release()
        #expect(world.run(until: { wallet.client.state == .completed && host.state.isFinished }))
        #expect(world.simulation.now >= settleStarted + processingTime)
        #expect(host.state == .completed)
        #expect(!host.isCancelled)
        // The latecomer still looking at the offer is told the session is over.
        #expect(
            world.run(until: {
                latecomer.received.values.contains { if case .cancel = $0 { true } else { false } }
            }))
        #expect(host.finalPaymentState?.paymentOrder.paymentID == paymentID)
        #expect(wallet.client.receipt?.paymentID == paymentID)
        #expect(journaledFirst.withLock { $0 } == true)
        guard case .receipt(let receipt)? = try journal.record(for: paymentID)?.answer else {
            Issue.record("the receipt is not journaled")
            return
        }
        #expect(receipt.paymentID == paymentID)
        #expect(try rig.ledger.transactions(limit: 10).count == 1)
        coupon.cancel()
        withExtendedLifetime(app) {}
    }

    @Test func aSimulationRunsExternalWorkAtAFixedInstantOfVirtualTime() {
        let simulation = RadioSimulation(seed: 1)
        let order = Mutex<[String]>([])
        let finishedAt = Mutex<Instant?>(nil)
        simulation.schedule(after: .zero) { order.withLock { $0.append("queued before") } }
        // No duration: done before `runExternal` returns, ahead of anything queued.
        simulation.runExternal {
            "instant work"
        } then: { value in
            order.withLock { $0.append(value) }
        }
        #expect(order.withLock { $0 } == ["instant work"])

        simulation.externalWorkDuration = .milliseconds(50)
        simulation.schedule(after: .milliseconds(10)) { order.withLock { $0.append("at 10 ms") } }
        simulation.runExternal {
            // Slower in real time than the whole virtual run: the simulation waits for it.
            try? await Task.sleep(for: .milliseconds(200))
            return "slow work"
        } then: { value in
            order.withLock { $0.append(value) }
            finishedAt.withLock { $0 = simulation.now }
        }
        simulation.schedule(after: .milliseconds(60)) { order.withLock { $0.append("at 60 ms") } }
        simulation.run(for: .seconds(1))
        #expect(order.withLock { $0 } == ["instant work", "queued before", "at 10 ms", "slow work", "at 60 ms"])
        #expect(finishedAt.withLock { $0 } == Instant(nanoseconds: 50_000_000))
    }

    @Test func aRealTimeSchedulerKeepsServingWhileExternalWorkIsUnderWay() async {
        let scheduler = RealTimeScheduler(label: "horizon.test.external")
        let gate = Gate()
        let value: Int = await withCheckedContinuation { done in
            scheduler.runExternal {
                await gate.wait()
                return 42
            } then: { value in
                // The completion runs on the scheduler's queue.
                dispatchPrecondition(condition: .onQueue(scheduler.queue))
                done.resume(returning: value)
            }
            // The queue is free while the work waits: this runs, and only it opens the gate.
            scheduler.execute { gate.open() }
        }
        #expect(value == 42)
    }
}

/// A processor whose settlement waits until the test releases it (a slow remote server).
final class SlowProcessor: PaymentProcessor {
    let ledger: BlockingLedger
    private struct State {
        var requests: [SettlementRequest] = []
        var released = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    init(ledger: BlockingLedger) { self.ledger = ledger }

    /// The requests asked so far (settlement started).
    var requests: [SettlementRequest] { state.withLock { $0.requests } }

    func settle(_ request: SettlementRequest, at time: UnixTime) async throws(ProcessorError) -> SettlementResult {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                state.requests.append(request)
                if state.released { return true }
                state.waiting.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
        return try await ledger.settle(request, at: time)
    }

    func result(for paymentID: PaymentID) async throws(ProcessorError) -> SettlementResult? {
        try await ledger.result(for: paymentID)
    }

    func release() {
        let waiting = state.withLock { state in
            state.released = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }
}

/// Opens once; every waiter goes on from then.
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

    func wait() async {
        await withCheckedContinuation { continuation in
            let open = state.withLock { state -> Bool in
                if !state.open { state.waiting.append(continuation) }
                return state.open
            }
            if open { continuation.resume() }
        }
    }

    func open() {
        let waiting = state.withLock { state in
            state.open = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }
}
