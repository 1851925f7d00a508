import Foundation
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonRoles
import HorizonStores
import HorizonTestSupport
import Testing

@Suite("Refusals: nothing charged, clear errors", .offTheCooperativePool)
struct RefusalTests {
    @Test func insufficientBalanceIsDeclinedAndChargesNothing() throws {
        let world = try World()
        let terminal = try world.terminal()
        let wallet = try world.wallet()
        try terminal.ledger.setBalance(1000, for: wallet.identity.publicKey)
        let app = ScriptedWalletApp(wallet, decision: .accept(tip: 100))
        _ = app
        #expect(terminal.host.start(amount: euros(950)))
        #expect(
            world.run(until: { wallet.client.state.isFinished && requestDecline(terminal.host.lastWalletNotice) != nil }
            ))
        #expect(wallet.client.state == .completedWithError)
        guard case .declined(let code, _) = wallet.client.error else {
            Issue.record("expected a decline, got \(String(describing: wallet.client.error))")
            return
        }
        #expect(code == .insufficientFunds)
        // The register hears of it with the wallet's code; the sale stays open (anyone in range
        // can get a decline, so it must not end the customer's sale).
        guard let (hostCode, reason) = requestDecline(terminal.host.lastWalletNotice) else {
            Issue.record("expected a decline on the terminal")
            return
        }
        #expect(hostCode == .insufficientFunds)
        #expect(reason == "insufficient funds: 10.50 EUR needed, 10.00 EUR available")
        #expect(terminal.host.state == .waitingForWallet)
        #expect(terminal.host.error == nil)
        #expect(try terminal.ledger.account(for: wallet.identity.publicKey)?.balance == euros(1000))
        #expect(try terminal.ledger.merchantBalance() == euros(0))
    }

    @Test func unknownWalletIsDeclinedWhenTheLedgerRefusesEnrolment() throws {
        let world = try World()
        let terminal = try world.terminal(ledger: InProcessLedgerConfiguration(enrollment: .refuseUnknown))
        let wallet = try world.wallet()
        let app = ScriptedWalletApp(wallet, decision: .accept(tip: 0))
        _ = app
        #expect(terminal.host.start(amount: euros(100)))
        #expect(world.run(until: { wallet.client.state.isFinished }))
        #expect(
            wallet.client.error == .declined(code: .unknownWallet, reason: "the wallet is not known to this merchant"))
        #expect(try terminal.ledger.account(for: wallet.identity.publicKey) == nil)
        #expect(try terminal.ledger.merchantBalance() == euros(0))
    }

    @Test func zeroAmountAndForeignCurrencyCannotStartASession() throws {
        let world = try World()
        let terminal = try world.terminal()
        #expect(!terminal.host.start(amount: euros(0)))
        #expect(terminal.host.error == .invalidAmount)
        #expect(terminal.host.humanizedError == "The amount must be greater than zero.")
        #expect(terminal.host.state == .idle)
        #expect(!terminal.host.start(amount: try Money(minorUnits: 500, currency: .usd)))
        #expect(terminal.host.error == .unsupportedCurrency("USD"))
        #expect(!terminal.device.isAdvertising)
        // A negative amount cannot even be formed.
        #expect(throws: WireError.negativeAmount(field: "amount")) { try Money(minorUnits: -1, currency: .eur) }
        // A second start while one runs is refused.
        #expect(terminal.host.start(amount: euros(100)))
        #expect(!terminal.host.start(amount: euros(200)))
        #expect(terminal.host.error == .alreadyRunning)
    }

    @Test func aTipInAnotherCurrencyIsRefusedLocally() throws {
        let world = try World()
        let terminal = try world.terminal()
        let wallet = try world.wallet()
        let app = ScriptedWalletApp(wallet, decision: .ignore)
        _ = app
        #expect(terminal.host.start(amount: euros(100)))
        #expect(world.run(until: { wallet.client.state == .offerReceived }))
        wallet.decider.decideForCandidate()
        #expect(wallet.client.connectToPaymentSession())
        #expect(wallet.client.state == .hostConnected)
        #expect(!wallet.client.setOrderConfirmedByUser(true, tip: try Money(minorUnits: 1, currency: .usd)))
        #expect(wallet.client.error == .invalidTip("the tip must be in EUR"))
        #expect(wallet.client.pendingPayment == nil)
        #expect(wallet.client.setOrderConfirmedByUser(true, tip: euros(1)))
        #expect(world.run(until: { wallet.client.state == .completed }))
    }
}

/// The decline a register notice reports: a wallet's request declined or refused, which ends only
/// that wallet's attempt.
func requestDecline(_ notice: WalletNotice?) -> (code: ErrorCode, reason: String)? {
    guard case .requestDeclined(_, let code, let reason)? = notice else { return nil }
    return (code, reason)
}
