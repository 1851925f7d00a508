import Crypto
import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonSecureChannel
import HorizonServer
import HorizonServerClient
import Testing

/// What one wallet can cost the server offline, and when a confirmation can still be submitted:
/// the attacks of a merchant who holds payments back, dates them, or forwards them late, and of a
/// terminal that submits a confirmation long after the person paid.
extension OfflineSettlementTests {
    /// Daily tokens of an hour, so that five token periods pass in one test.
    static var hourlyTokens: ServerConfiguration {
        var configuration = ServerConfiguration.testing()
        configuration.dailyTokenValidity = 3_600
        return configuration
    }

    /// A merchant collects one offline payment of 50.00 from a wallet holding 50.00 in each of
    /// five token periods (each token allows 50.00: the server does not know what was spent
    /// offline) and forwards them together. Dated into the periods of older tokens, payments
    /// signed now are refused; held back and forwarded honestly dated, they pay the merchant the
    /// balance and one allowance, and the rest is declined.
    @Test func paymentsHeldBackOverFiveTokenPeriodsPayAtMostOneAllowanceBeyondTheBalance() async throws {
        try await withBakery(balance: 50_00, configuration: Self.hourlyTokens) { bakery in
            var tokens: [[UInt8]] = []
            var held: [(Confirm, TerminalKey, Int64)] = []
            for period in 0..<5 {
                let token = try await bakery.token(refresh: true)
                #expect(try DailyToken.decode(token).allowance.minorUnits == 50_00)
                tokens.append(token)
                // After the previous token expired: each payment is in one token's period only.
                bakery.server.clock.advance(700)
                let till = bakery.tills[period % 2]
                held.append((try bakery.confirm(50_00, for: till), till, bakery.server.clock.now))
                bakery.server.clock.advance(2_300)
            }
            #expect(Set(tokens).count == 5)

            // Signed now, dated back into each older token's period: refused, nothing recorded.
            for (period, token) in tokens.enumerated() {
                let backdated = try bakery.confirm(50_00, for: bakery.tills[0])
                let acceptedAt = try DailyToken.decode(token).issuedAt + 60
                do {
                    let result = try await bakery.forward(
                        backdated, by: bakery.tills[0], token: token, acceptedAt: acceptedAt)
                    Issue.record("a payment dated into period \(period) was settled: \(result)")
                } catch let error as ServerClientError {
                    #expect(error.code == "accepted_at_outside_confirmation", "\(error)")
                    if case .refused(let status, _, _, _) = error { #expect(status == 422) }
                }
                #expect(try await bakery.server.ledger.executionCount(of: backdated.paymentID) == 0)
            }

            var outcomes: [OfflinePaymentSettlement.Outcome] = []
            for ((confirm, till, acceptedAt), token) in zip(held, tokens) {
                outcomes.append(
                    try await bakery.forward(confirm, by: till, token: token, acceptedAt: acceptedAt).outcome)
            }
            let settled = outcomes.filter { if case .settled = $0 { true } else { false } }
            #expect(settled.count == 2, "\(outcomes)")
            for outcome in outcomes.dropFirst(2) {
                guard case .declined(let code, _) = outcome else {
                    Issue.record("beyond one allowance of debt: declined, not \(outcome)")
                    continue
                }
                #expect(code == .offlineAllowanceExceeded)
            }
            #expect(
                try await bakery.server.ledger.balance(of: try #require(bakery.server.ledger.merchants().first).id)
                    == (try Money(minorUnits: 100_00, currency: .eur)))
            #expect(
                try await bakery.server.ledger.offlineDebt(of: bakery.walletID, in: .eur)
                    == (try Money(minorUnits: 50_00, currency: .eur)))
            #expect(try await LedgerAudit.violations(in: bakery.server.ledger.store) == [])
        }
    }

    /// The acceptance time must lie within 600 s before the expiry the wallet signed.
    @Test func anAcceptanceTimeOutsideTheConfirmationsWindowIsRefused() async throws {
        try await withBakery(balance: 80_00) { bakery in
            let token = try await bakery.token()
            bakery.server.clock.advance(900)
            let now = bakery.server.clock.now
            let expiresAt = now + 120
            for acceptedAt in [expiresAt + 1, expiresAt - DailyToken.offlineConfirmationWindow - 1] {
                let confirm = try bakery.confirm(10_00, for: bakery.tills[0])
                do {
                    let result = try await bakery.forward(
                        confirm, by: bakery.tills[0], token: token, acceptedAt: acceptedAt)
                    Issue.record("acceptedAt \(acceptedAt - expiresAt) s from the expiry was settled: \(result)")
                } catch let error as ServerClientError {
                    #expect(error.code == "accepted_at_outside_confirmation", "\(error)")
                    if case .refused(let status, _, _, _) = error { #expect(status == 422) }
                }
                #expect(try await bakery.server.ledger.executionCount(of: confirm.paymentID) == 0)
            }
            // Both ends of the window are within it.
            for acceptedAt in [expiresAt, expiresAt - DailyToken.offlineConfirmationWindow] {
                let confirm = try bakery.confirm(10_00, for: bakery.tills[0])
                let result = try await bakery.forward(confirm, by: bakery.tills[0], token: token, acceptedAt: acceptedAt)
                guard case .settled = result.outcome else {
                    Issue.record("acceptedAt within the window: \(result.outcome)")
                    continue
                }
            }
            #expect(try await bakery.balance() == (try Money(minorUnits: 60_00, currency: .eur)))
        }
    }

    /// A forward later than the token's expiry plus 72 h is refused; one at the deadline settles,
    /// and a settled payment forwarded again after it gets its stored result.
    @Test func aForwardLaterThanTheTokensValidityPlusTheGraceIsRefused() async throws {
        try await withBakery(balance: 80_00) { bakery in
            let token = try await bakery.token()
            let decoded = try DailyToken.decode(token)
            let inTime = try bakery.confirm(10_00, for: bakery.tills[0])
            let tooLate = try bakery.confirm(10_00, for: bakery.tills[1])
            let acceptedAt = bakery.server.clock.now
            bakery.server.clock.advance(decoded.expiresAt + DailyToken.forwardGrace - bakery.server.clock.now)
            let settled = try await bakery.forward(inTime, by: bakery.tills[0], token: token, acceptedAt: acceptedAt)
            guard case .settled = settled.outcome else {
                Issue.record("forwarded at the deadline: \(settled.outcome)")
                return
            }
            bakery.server.clock.advance(1)
            do {
                let result = try await bakery.forward(tooLate, by: bakery.tills[1], token: token, acceptedAt: acceptedAt)
                Issue.record("a forward after the deadline was settled: \(result)")
            } catch let error as ServerClientError {
                #expect(error.code == "offline_forward_too_late", "\(error)")
                if case .refused(let status, _, _, _) = error { #expect(status == 422) }
            }
            #expect(try await bakery.server.ledger.executionCount(of: tooLate.paymentID) == 0)
            #expect(
                try await bakery.forward(inTime, by: bakery.tills[0], token: token, acceptedAt: acceptedAt) == settled)
            #expect(try await bakery.balance() == (try Money(minorUnits: 70_00, currency: .eur)))
        }
    }

    /// The lost phone: the wallet is restored on a new device, which revokes the old key. What
    /// the old device paid offline before is charged; what a terminal accepted from it after the
    /// revocation is declined: the restored account is not charged, the merchant is not paid.
    @Test func aPaymentAcceptedOfflineAfterTheKeyWasRevokedIsNotCharged() async throws {
        try await withBakery(balance: 80_00) { bakery in
            let token = try await bakery.token()
            let before = try bakery.confirm(20_00, for: bakery.tills[0])
            let acceptedBefore = bakery.server.clock.now
            bakery.server.clock.advance(300)
            let restored = P256.Signing.PrivateKey()
            let ledger = bakery.server.ledger
            try await ledger.addWalletKey(
                try PublicKeyBytes(bytes: Array(restored.publicKey.x963Representation)), to: bakery.walletID,
                at: bakery.server.clock.now)
            #expect(
                try await ledger.revokeWalletKey(
                    try PublicKeyBytes(bytes: Array(bakery.wallet.publicKey.x963Representation)),
                    at: bakery.server.clock.now))
            bakery.server.clock.advance(60)
            let after = try bakery.confirm(30_00, for: bakery.tills[1])
            let declined = try await bakery.forward(after, by: bakery.tills[1], token: token)
            guard case .declined(let code, let reason) = declined.outcome else {
                Issue.record("accepted after the revocation: declined, not \(declined.outcome)")
                return
            }
            #expect(code == .unknownWallet)
            #expect(reason.contains("the wallet is not charged and the merchant is not paid"), "\(reason)")
            #expect(declined.offline?.guaranteed == false)
            #expect(try await bakery.balance() == (try Money(minorUnits: 80_00, currency: .eur)))
            // Accepted before the revocation, forwarded after it: the wallet's.
            let paid = try await bakery.forward(before, by: bakery.tills[0], token: token, acceptedAt: acceptedBefore)
            guard case .settled = paid.outcome else {
                Issue.record("accepted before the revocation: settled, not \(paid.outcome)")
                return
            }
            #expect(try await bakery.balance() == (try Money(minorUnits: 60_00, currency: .eur)))
            #expect(try await ledger.offlineDebt(of: bakery.walletID, in: .eur).minorUnits == 0)
            #expect(try await LedgerAudit.violations(in: ledger.store) == [])
        }
    }

    /// Online, a confirmation is accepted until 24 h after the expiry the wallet signed (a
    /// terminal's journal recovery resubmits it), not later; a payment executed in time is
    /// answered with its stored result however late the retry.
    @Test func anOnlineConfirmationPastItsExpiryAndTheGraceIsRefused() async throws {
        try await withBakery(balance: 80_00) { bakery in
            let till = bakery.tills[0]
            let client = bakery.client(till.key)
            func submit(_ confirm: Confirm) async throws -> Components.Schemas.PaymentResult {
                var result = try await client.submitPayment(
                    try JSONDecoder().decode(
                        Components.Schemas.PaymentSubmission.self,
                        from: Data(try SubmissionFields(payment: confirm).json().utf8)))
                // Each answer is signed anew (ECDSA is randomised): what repeats is the content.
                result.signature = nil
                return result
            }
            let now = bakery.server.clock.now
            let grace = 86_400 as Int64
            let expired = try bakery.confirm(10_00, for: till, signedAt: now - grace - 121)
            do {
                let result = try await submit(expired)
                Issue.record("a confirmation past its expiry and the grace was executed: \(result)")
            } catch let error as ServerClientError {
                #expect(error.code == "confirmation_expired", "\(error)")
                if case .refused(let status, _, _, _) = error { #expect(status == 422) }
            }
            #expect(try await bakery.server.ledger.executionCount(of: expired.paymentID) == 0)

            // At the end of the grace: executed. Retried two days later: the stored result.
            let recovered = try bakery.confirm(10_00, for: till, signedAt: now - grace - 120)
            let first = try await submit(recovered)
            #expect(first.outcome == .approved)
            bakery.server.clock.advance(2 * 86_400)
            #expect(try await submit(recovered) == first)
            #expect(try await bakery.server.ledger.executionCount(of: recovered.paymentID) == 1)
            #expect(try await bakery.balance() == (try Money(minorUnits: 70_00, currency: .eur)))
        }
    }
}
