import HorizonCore
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonRoles
import HorizonSimulatedRadio
import HorizonTestSupport
import Testing

/// The autopilot's policy beyond a plain answer: when to take a candidate, and a last tap that
/// comes after a pause once the terminal is connected (what the fault simulation's customers do).
@Suite("Wallet autopilot: candidates and the last tap", .offTheCooperativePool)
struct WalletAutopilotTests {
    @Test func aHesitantPersonPaysWithTheTipAfterThePause() throws {
        let world = try World()
        let terminal = try world.terminal()
        let wallet = try world.wallet()
        let connectedAt = Recorder<Instant>()
        let confirmedAt = Recorder<Instant>()
        wallet.client.observeState { state in
            if state == .hostConnected { connectedAt.append(world.simulation.now) }
        }
        let autopilot = WalletAutopilot(
            client: wallet.client,
            hooks: WalletAutopilot.Hooks(confirming: { _ in confirmedAt.append(world.simulation.now) })
        ) { _ in .decideWhenConnected { _ in .pay(tip: euros(75), after: .seconds(2)) } }
        _ = autopilot
        #expect(terminal.host.start(amount: euros(500)))

        #expect(world.run(until: { wallet.client.state == .completed && terminal.host.state == .completed }))

        #expect(wallet.client.receipt?.tip == euros(75))
        let connected = try #require(connectedAt.values.first)
        let confirmed = try #require(confirmedAt.values.first)
        #expect(confirmed - connected == .seconds(2))
        #expect(try terminal.ledger.transactions().count == 1)
    }

    @Test func aNoAtTheLastTapIsDeclinedAndNothingIsCharged() throws {
        let world = try World()
        let terminal = try world.terminal()
        let wallet = try world.wallet()
        let declines = Recorder<PaymentOffer>()
        let notices = Recorder<WalletNotice>()
        terminal.host.observeWallets { notices.append($0) }
        let autopilot = WalletAutopilot(
            client: wallet.client, hooks: WalletAutopilot.Hooks(declining: { declines.append($0) })
        ) { _ in .decideWhenConnected { _ in .decline(after: .milliseconds(500)) } }
        _ = autopilot
        #expect(terminal.host.start(amount: euros(500)))

        #expect(world.run(until: { wallet.client.state.isFinished && notices.count == 2 }))

        #expect(wallet.client.error == .declinedByUser)
        let code = try #require(wallet.client.offer?.confirmationCode)
        #expect(notices.values == [.offered(code), .declined(code)])
        #expect(declines.values == [wallet.client.offer].compactMap { $0 })
        #expect(terminal.host.state == .waitingForWallet)
        #expect(try terminal.ledger.transactions().isEmpty)
    }

    @Test func noTapComesOnceTheSessionEndedDuringThePause() throws {
        let world = try World()
        let terminal = try world.terminal()
        let wallet = try world.wallet()
        let taps = Recorder<String>()
        let autopilot = WalletAutopilot(
            client: wallet.client,
            hooks: WalletAutopilot.Hooks(
                confirming: { _ in taps.append("confirm") }, declining: { _ in taps.append("decline") })
        ) { _ in .decideWhenConnected { _ in .pay(tip: euros(10), after: .seconds(5)) } }
        _ = autopilot
        #expect(terminal.host.start(amount: euros(500)))
        #expect(world.run(until: { wallet.client.state == .hostConnected }))

        // The cashier cancels while the customer hesitates.
        terminal.host.cancel()
        world.run(for: .seconds(10))

        #expect(wallet.client.error == .cancelledByTerminal)
        #expect(taps.values == [])
        #expect(try terminal.ledger.transactions().isEmpty)
    }

    @Test func aCandidateIsTakenOnlyWhenThePersonWantsIt() throws {
        let world = try World()
        let terminal = try world.terminal()
        let wallet = try world.wallet()
        let shopping = Shared(false)
        let autopilot = WalletAutopilot(
            clients: [wallet.client], decider: wallet.decider, takesCandidate: { _ in shopping.value },
            answer: { _, _ in .pay(tip: euros(0)) })
        #expect(terminal.host.start(amount: euros(300)))
        #expect(world.run(until: { wallet.decider.state == .candidateAvailable }))
        world.run(for: .seconds(2))
        #expect(wallet.decider.state == .candidateAvailable)
        #expect(wallet.client.state == .idle)

        shopping.value = true
        autopilot.takeCandidateIfAvailable()

        #expect(world.run(until: { wallet.client.state == .completed && terminal.host.state == .completed }))
    }
}
