import Foundation
import HorizonCore
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonRadio
import HorizonRoles
import HorizonSimulatedRadio
import HorizonTestSupport
import Synchronization
import Testing

@Suite("Announcements, state streams and the decider collection")
struct ObservationTests {
    @Test func finishedPaymentsAreAnnouncedOnStreamsAndAsNotifications() async throws {
        let world = try World()
        let terminal = try world.terminal()
        let wallet = try world.wallet()
        let hostEvents = terminal.host.finishedPayments()
        let walletEvents = wallet.client.finishedPayments()
        let hostStates = terminal.host.states()
        let clientStates = wallet.client.states()
        let notified = Recorder<String>()
        let observers = [
            NotificationCenter.default.addObserver(forName: .paymentHostFinishedAPayment, object: nil, queue: nil) {
                note in
                if note.userInfo?["finishedPayment"] is FinishedPayment { notified.append("host") }
            },
            NotificationCenter.default.addObserver(forName: .paymentClientFinishedAPayment, object: nil, queue: nil) {
                note in
                if note.userInfo?["finishedPayment"] is WalletFinishedPayment { notified.append("client") }
            },
        ]
        defer { for observer in observers { NotificationCenter.default.removeObserver(observer) } }
        let app = ScriptedWalletApp(wallet, decision: .accept(tip: 25))
        _ = app
        #expect(terminal.host.start(amount: euros(400)))
        // Awaiting the streams below is safe only once both sides have completed.
        try #require(world.run(until: { wallet.client.state == .completed && terminal.host.state == .completed }))

        var hostIterator = hostEvents.makeAsyncIterator()
        let hostEvent = try #require(await hostIterator.next())
        #expect(hostEvent.order?.tip == euros(25))
        #expect(hostEvent.error == nil)
        var walletIterator = walletEvents.makeAsyncIterator()
        let walletEvent = try #require(await walletIterator.next())
        #expect(walletEvent.receipt?.total == euros(425))
        #expect(notified.values.sorted().filter { $0 == "host" || $0 == "client" }.count >= 2)

        // The state streams replay the current state, then every change, in order.
        var seenHost: [PaymentHostState] = []
        for await state in hostStates {
            seenHost.append(state)
            if state == .completed { break }
        }
        #expect(
            seenHost == [
                .idle, .waitingForWallet, .walletConnected, .awaitingUserDecision, .acquiringPaymentExecution,
                .completed,
            ])
        var seenClient: [PaymentClientState] = []
        for await state in clientStates {
            seenClient.append(state)
            if state == .completed { break }
        }
        #expect(
            seenClient == [
                .idle, .connecting, .fetchingOffer, .offerReceived, .hostConnected, .acquiringPaymentExecution,
                .completed,
            ])
    }

    @Test func deciderStreamFollowsTheCandidate() async throws {
        let world = try World()
        let terminal = try world.terminal()
        let wallet = try world.wallet()
        let states = wallet.decider.states()
        #expect(terminal.host.start(amount: euros(100)))
        #expect(world.run(until: { wallet.decider.state == .candidateAvailable }))
        let candidate = try #require(wallet.decider.candidate)
        #expect(candidate.peripheralMetaData.transactionType == .payment)
        #expect(candidate.peripheralMetaData.sessionID == terminal.host.sessionID)
        #expect(
            candidate.peripheralMetaData.additionalIdentifier == String(candidate.peripheralMetaData.sessionID.rawValue)
        )
        #expect((candidate.smoothedRSSI ?? 0) > -70)
        #expect(wallet.decider.startDeciding())
        #expect(!wallet.decider.startDeciding())
        #expect(wallet.decider.decideForCandidate())
        #expect(!wallet.decider.decideAgainstCandidate())
        wallet.decider.restart()
        var seen: [ManualConnectionDeciderState] = []
        for await state in states {
            seen.append(state)
            if seen.count == 5 { break }
        }
        #expect(seen == [.waitingForCandidate, .candidateAvailable, .deciding, .accepted, .candidateAvailable])
    }

    @Test func collectionOffersTheNearestCandidateAndForwardsDecisions() throws {
        let world = try World()
        let near = try world.terminal("near", at: Position(x: 0.2, y: 0))
        let far = try world.terminal("far", at: Position(x: 3, y: 0))
        // Two wallets' deciders stand in for the payment and a redemption decider.
        let walletA = try world.wallet("a", at: .origin)
        let walletB = try world.wallet("b", at: Position(x: 2.9, y: 0))
        let collection = ManualConnectionDeciderCollection.collection(with: [walletA.decider, walletB.decider])
        #expect(collection.state == .waitingForCandidate)
        #expect(near.host.start(amount: euros(100)))
        #expect(far.host.start(amount: euros(200)))
        #expect(
            world.run(until: {
                walletA.decider.state == .candidateAvailable && walletB.decider.state == .candidateAvailable
            }))
        // Each decider has a candidate near its own wallet; the collection shows the strongest.
        #expect(collection.state == .candidateAvailable)
        let shown = try #require(collection.candidate)
        let strongest = [walletA.decider.candidate, walletB.decider.candidate].compactMap { $0 }
            .max { ($0.smoothedRSSI ?? -200) < ($1.smoothedRSSI ?? -200) }
        #expect(shown == strongest)
        #expect(collection.startDeciding())
        #expect(collection.state == .deciding)
        let owner = walletA.decider.state == .deciding ? walletA.decider : walletB.decider
        let other = owner === walletA.decider ? walletB.decider : walletA.decider
        #expect(other.state == .candidateAvailable)
        #expect(collection.decideAgainstCandidate())
        #expect(owner.state == .rejected)
        #expect(collection.state == .rejected)
        collection.restart()
        #expect(owner.state != .rejected)
        // After the rejection the other candidate is shown.
        #expect(world.run(until: { collection.state == .candidateAvailable }))
    }
}
