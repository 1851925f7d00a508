import Foundation
import HorizonCore
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonRoles
import HorizonSimulatedRadio
import HorizonStores
import HorizonTestSupport
import Testing

@Suite("Payment flow on the simulated radio", .offTheCooperativePool)
struct PaymentFlowTests {
    @Test func acceptWithTipCompletesOnBothSidesAndMovesExactlyAmountPlusTip() throws {
        let world = try World()
        let terminal = try world.terminal()
        let wallet = try world.wallet()
        let app = ScriptedWalletApp(wallet, decision: .accept(tip: 150))
        _ = app
        #expect(terminal.host.start(amount: euros(1250), registerUser: RegisterUser(name: "Ana")))
        #expect(terminal.host.state == .waitingForWallet)

        #expect(world.run(until: { wallet.client.state == .completed && terminal.host.state == .completed }))

        let offer = try #require(wallet.client.offer)
        #expect(offer.merchantName == "Café Horizon")
        #expect(offer.amount == euros(1250))
        #expect(offer.registerUser == "Ana")
        let receipt = try #require(wallet.client.receipt)
        #expect(receipt.amount == euros(1250))
        #expect(receipt.tip == euros(150))
        #expect(receipt.total == euros(1400))
        #expect(receipt.bonusPointsEarned == 12)
        #expect(wallet.client.bonusProgramMembership?.points == 12)
        let order = try #require(terminal.host.finalPaymentState?.paymentOrder)
        #expect(order.tip == euros(150))
        #expect(order.amount == euros(1250))
        #expect(order.currency == .eur)
        #expect(order.paymentID == receipt.paymentID)
        #expect(order.reference == receipt.reference)

        let account = try #require(try terminal.ledger.account(for: wallet.identity.publicKey))
        #expect(account.balance == euros(100_00 - 1400))
        #expect(try terminal.ledger.merchantBalance() == euros(1400))
        #expect(try terminal.ledger.executionCount(of: receipt.paymentID) == 1)
        #expect(try terminal.ledger.transactions().count == 1)
        #expect(wallet.client.pendingPayment == nil)
        #expect(!terminal.device.isAdvertising)

    }

    /// A decline ends the wallet's attempt, not the sale: any central could send one,
    /// so the register hears of it (with the wallet's confirmation code) and the session stays
    /// open for the customer's wallet until the cashier stops it or the decision time runs out.
    @Test func decidingAgainstIsReportedLeavesTheSessionOpenAndIgnoresItButNotTheNextOne() throws {
        let world = try World()
        let terminal = try world.terminal()
        let wallet = try world.wallet()
        let app = ScriptedWalletApp(wallet, decision: .decline)
        _ = app
        let notices = Recorder<WalletNotice>()
        terminal.host.observeWallets { notices.append($0) }
        #expect(terminal.host.start(amount: euros(500)))
        let firstSession = try #require(terminal.host.sessionID)
        #expect(world.run(until: { notices.count == 2 }))
        let code = try #require(wallet.client.offer?.confirmationCode)
        #expect(notices.values == [.offered(code), .declined(code)])
        world.run(for: .seconds(1))
        #expect(terminal.host.state == .waitingForWallet)
        #expect(terminal.host.error == nil)
        #expect(wallet.decider.state == .rejected)
        #expect(try terminal.ledger.transactions().isEmpty)

        // The same session is ignored even while it is still being heard.
        wallet.client.restart()
        wallet.decider.restart()
        world.run(for: .seconds(1))
        #expect(wallet.decider.candidate?.peripheralMetaData.sessionID != firstSession)

        // The cashier gives up on this sale; a new session from the same terminal is offered again.
        #expect(terminal.host.stop())
        #expect(terminal.host.start(amount: euros(700)))
        let secondSession = try #require(terminal.host.sessionID)
        #expect(world.run(until: { wallet.decider.candidate?.peripheralMetaData.sessionID == secondSession }))
    }

    /// The decision time is the wallet's own: running out ends that wallet's attempt (it is told,
    /// and its late confirmation is refused, nothing charged), never the sale, which waits for a
    /// wallet as it did before this one came.
    @Test func noDecisionWithinTheTimeoutEndsTheAttemptAndALateConfirmationChargesNothing() throws {
        let world = try World()
        let terminal = try world.terminal(host: PaymentHostConfiguration(userDecisionTimeout: .seconds(5)))
        // 200 ms one way: a confirmation sent before the deadline arrives after it.
        let wallet = try world.wallet(link: LinkParameters(latency: .milliseconds(200)))
        let app = ScriptedWalletApp(wallet, decision: .ignore)
        _ = app
        #expect(terminal.host.start(amount: euros(900)))
        #expect(world.run(until: { terminal.host.state == .awaitingUserDecision }))
        let offerSentAt = world.simulation.now
        #expect(world.run(until: { wallet.client.state == .offerReceived }))
        // The person accepts 100 ms before the terminal gives up.
        world.run(until: { world.simulation.now >= offerSentAt + .milliseconds(4_900) }, timeout: .seconds(6))
        #expect(terminal.host.state == .awaitingUserDecision)
        #expect(wallet.client.state == .offerReceived)
        wallet.decider.decideForCandidate()
        wallet.client.connectToPaymentSession()
        #expect(wallet.client.setOrderConfirmedByUser(true, tip: euros(0)))
        #expect(world.run(until: { wallet.client.state.isFinished }))
        #expect(terminal.host.state == .waitingForWallet)
        #expect(terminal.host.error == nil)
        #expect(
            terminal.host.lastWalletNotice == .decisionTimedOut(try #require(wallet.client.offer?.confirmationCode)))
        #expect(wallet.client.state == .completedWithError)
        guard case .declined(let code, _) = wallet.client.error else {
            Issue.record("expected a definitive refusal, got \(String(describing: wallet.client.error))")
            return
        }
        #expect(code == .timedOut)
        #expect(try terminal.ledger.transactions().isEmpty)
        #expect(try terminal.ledger.merchantBalance() == euros(0))
    }

    @Test func timeoutWithoutAnyConfirmationEndsTheAttemptAndTheSaleWaits() throws {
        let world = try World()
        let terminal = try world.terminal(host: PaymentHostConfiguration(userDecisionTimeout: .seconds(3)))
        let wallet = try world.wallet()
        let app = ScriptedWalletApp(wallet, decision: .ignore)
        _ = app
        #expect(terminal.host.start(amount: euros(900)))
        #expect(world.run(until: { wallet.client.state.isFinished }))
        #expect(terminal.host.state == .waitingForWallet)
        #expect(terminal.host.error == nil)
        #expect(wallet.client.error == .terminalTimedOut)
        guard case .decisionTimedOut? = terminal.host.lastWalletNotice else {
            Issue.record("the register was told \(String(describing: terminal.host.lastWalletNotice))")
            return
        }
    }

    @Test func cancelAtTheRegisterWhileThePersonDecidesEndsBothSidesCancelled() throws {
        let world = try World()
        let terminal = try world.terminal()
        let wallet = try world.wallet()
        let app = ScriptedWalletApp(wallet, decision: .ignore)
        _ = app
        #expect(terminal.host.start(amount: euros(2000)))
        #expect(
            world.run(until: { terminal.host.state == .awaitingUserDecision && wallet.client.state == .offerReceived }))
        terminal.host.cancel()
        #expect(terminal.host.state == .completedWithError)
        #expect(terminal.host.isCancelled)
        #expect(terminal.host.error == .cancelled)
        #expect(world.run(until: { wallet.client.state.isFinished }))
        #expect(wallet.client.error == .cancelledByTerminal)
        // Confirming now is refused locally; nothing was charged.
        #expect(!wallet.client.setOrderConfirmedByUser(true, tip: euros(0)))
        #expect(try terminal.ledger.transactions().isEmpty)
        #expect(terminal.host.stop())
        #expect(terminal.host.state == .idle)
        #expect(!terminal.host.stop())
    }
}
