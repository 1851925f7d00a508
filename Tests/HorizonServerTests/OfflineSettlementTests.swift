import Crypto
import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonSecureChannel
import HorizonServer
import HorizonServerClient
import HorizonSettlement
import HorizonStores
import Testing

/// Offline settlement's server side: `HorizonServerClient.submitOfflinePayment` against the
/// server listening on a loopback port. A terminal forwards what it accepted offline; the server
/// checks the daily token, settles once per payment id, applies the over-the-allowance policy,
/// and the merchant's transactions show the payment as offline.
@Suite("Offline settlement against a live server", .serialized)
struct OfflineSettlementTests {
    /// A bakery with two tills, a registered wallet with its daily token from the server, and
    /// the live server's URL.
    struct Bakery: Sendable {
        let server: TestServer
        let url: URL
        let tills: [TerminalKey]
        let wallet: P256.Signing.PrivateKey
        let walletID: WalletID

        static func make(server: TestServer, url: URL, balance: Int64) async throws -> Bakery {
            _ = try await server.addMerchant()
            let tills = [TerminalKey(), TerminalKey()]
            for (index, till) in tills.enumerated() { _ = try await server.activate(till, label: "Till \(index + 1)") }
            let funded = try await server.fundedWallet(balance)
            return Bakery(server: server, url: url, tills: tills, wallet: funded.key, walletID: funded.id)
        }

        /// The server client signed by `key`, on the server's clock.
        func client(_ key: P256.Signing.PrivateKey) -> HorizonServerClient {
            let clock = server.clock
            return HorizonServerClient(serverURL: url, signingKey: key, clock: { clock.now })
        }

        /// The wallet's daily token, as the server issues it (`refresh` signs a new one if the
        /// balance changed).
        func token(of wallet: P256.Signing.PrivateKey? = nil, refresh: Bool = false) async throws -> [UInt8] {
            let answer = try await client(wallet ?? self.wallet).dailyToken(currency: "EUR", refresh: refresh)
            return Array(try #require(Data(base64Encoded: answer.token)))
        }

        /// A payment the wallet signed for `till`, forwarded by it as accepted offline at `acceptedAt`.
        func forward(
            _ confirm: Confirm, by till: TerminalKey, token: [UInt8], acceptedAt: Int64? = nil,
            registerUser: String = "anna"
        ) async throws(ServerClientError) -> OfflinePaymentSettlement {
            try await client(till.key).submitOfflinePayment(
                paymentID: confirm.paymentID, confirmation: SessionMessage.confirm(confirm).encoded(),
                amount: confirm.amount, tip: confirm.tip, registerUser: registerUser, dailyToken: token,
                acceptedAt: acceptedAt ?? server.clock.now - 60, anchor: server.issuer.signingKey.publicKey)
        }

        /// A payment the wallet signs at `signedAt` (the server's time unless given): its
        /// confirmation expires 120 s later, as a wallet's does by default.
        func confirm(
            _ amount: Int64, tip: Int64 = 0, for till: TerminalKey, by wallet: P256.Signing.PrivateKey? = nil,
            signedAt: Int64? = nil
        ) throws -> Confirm {
            try WalletSigned.confirm(
                by: wallet ?? self.wallet, for: till.key.publicKey, amount: amount, tip: tip,
                expiresAt: (signedAt ?? server.clock.now) + 120)
        }

        func balance() async throws -> Money { try await server.ledger.balance(of: walletID, in: .eur) }
    }

    func withBakery(
        balance: Int64, configuration: ServerConfiguration = .testing(),
        _ body: @Sendable (Bakery) async throws -> Void
    ) async throws {
        let server = try await TestServer(configuration: configuration)
        try await server.withLiveServer { http in
            let port = try #require(http.port)
            let url = try #require(URL(string: "http://127.0.0.1:\(port)"))
            try await body(try await Bakery.make(server: server, url: url, balance: balance))
        }
    }

    @Test func anOfflinePaymentSettlesOnceAndTheMerchantSeesItAsOffline() async throws {
        try await withBakery(balance: 80_00) { bakery in
            let token = try await bakery.token()
            let tokenID = try DailyToken.decode(token).tokenIDHex
            bakery.server.clock.advance(600)
            let confirm = try bakery.confirm(20_00, tip: 2_00, for: bakery.tills[0])
            let acceptedAt = bakery.server.clock.now - 300
            let settled = try await bakery.forward(confirm, by: bakery.tills[0], token: token, acceptedAt: acceptedAt)
            guard case .settled(let reference, let earned, _) = settled.outcome else {
                Issue.record("expected a settlement, got \(settled.outcome)")
                return
            }
            #expect(earned == 20)
            #expect(settled.offline == .init(tokenID: tokenID, acceptedAt: acceptedAt, guaranteed: true))
            #expect(try await bakery.balance() == (try Money(minorUnits: 58_00, currency: .eur)))

            // Forwarded again (a crash before the terminal recorded the answer): the same result.
            let again = try await bakery.forward(confirm, by: bakery.tills[0], token: token, acceptedAt: acceptedAt)
            #expect(again == settled)
            #expect(try await bakery.server.ledger.executionCount(of: confirm.paymentID) == 1)
            #expect(try await bakery.balance() == (try Money(minorUnits: 58_00, currency: .eur)))
            // Another confirmation stated under the settled payment id: refused, nothing moved.
            let otherTerms = try bakery.confirm(21_00, for: bakery.tills[0])
            do {
                _ = try await bakery.client(bakery.tills[0].key).submitOfflinePayment(
                    paymentID: confirm.paymentID, confirmation: SessionMessage.confirm(otherTerms).encoded(),
                    amount: otherTerms.amount, tip: otherTerms.tip, dailyToken: token, acceptedAt: acceptedAt,
                    anchor: bakery.server.issuer.signingKey.publicKey)
                Issue.record("another confirmation under a settled payment id was accepted")
            } catch let error as ServerClientError {
                // The stated id is not the one the wallet signed: refused before anything runs.
                #expect(error.code == "terms_mismatch", "\(error)")
            }

            // The merchant's transactions show it as offline, with its token and acceptance time;
            // the terminal reads the stored result back with the offline part.
            let page = try await bakery.client(bakery.tills[1].key).merchantTransactions()
            let listed = try #require(page.transactions.first { $0.paymentId == confirm.paymentID.bytes.hexString })
            #expect(listed.reference == reference && listed.outcome == .approved)
            #expect(listed.offline == .init(tokenId: tokenID, acceptedAt: acceptedAt, guaranteed: true))
            let stored = try #require(try await bakery.client(bakery.tills[0].key).payment(id: listed.paymentId))
            #expect(stored.offline?.tokenId == tokenID)
            #expect(try await LedgerAudit.violations(in: bakery.server.ledger.store) == [])
        }
    }

    /// A wallet spends its allowance at two terminals offline; one pays online meanwhile. The
    /// first arrivals are guaranteed, the excess is declined when the balance does not cover it
    /// (and paid by the balance when it does, below); the debt zeroes the next token.
    @Test func theExcessBeyondOneAllowanceIsDeclinedWithoutBalance() async throws {
        try await withBakery(balance: 80_00) { bakery in
            let token = try await bakery.token()
            #expect(try DailyToken.decode(token).allowance.minorUnits == 50_00)
            // Online, the wallet spends 60.00 of its 80.00; the tills do not know.
            let online = try bakery.confirm(60_00, for: bakery.tills[0])
            let paid = try await bakery.client(bakery.tills[0].key).submitPayment(
                try JSONDecoder().decode(
                    Components.Schemas.PaymentSubmission.self,
                    from: Data(try SubmissionFields(payment: online).json().utf8)))
            #expect(paid.outcome == .approved)
            bakery.server.clock.advance(120)
            let atFirst = try bakery.confirm(40_00, for: bakery.tills[0])
            let atSecond = try bakery.confirm(30_00, for: bakery.tills[1])

            let first = try await bakery.forward(atFirst, by: bakery.tills[0], token: token)
            #expect(first.offline?.guaranteed == true)
            guard case .settled = first.outcome else {
                Issue.record("the first arrival is guaranteed: \(first.outcome)")
                return
            }
            let second = try await bakery.forward(atSecond, by: bakery.tills[1], token: token)
            guard case .declined(let code, let reason) = second.outcome else {
                Issue.record("beyond the guarantee without balance: declined, not \(second.outcome)")
                return
            }
            #expect(code == .offlineAllowanceExceeded)
            #expect(reason.contains("goes beyond the wallet's offline guarantee"), "\(reason)")
            #expect(second.offline?.guaranteed == false)
            // The wallet owes what the server fronted: 40.00 less the 20.00 it had.
            #expect(try await bakery.balance() == (try Money(minorUnits: 0, currency: .eur)))
            #expect(
                try await bakery.server.ledger.offlineDebt(of: bakery.walletID, in: .eur)
                    == (try Money(minorUnits: 20_00, currency: .eur)))
            // The decline is listed with the merchant's transactions, as offline.
            let page = try await bakery.client(bakery.tills[0].key).merchantTransactions()
            let declined = try #require(
                page.transactions.first { $0.paymentId == atSecond.paymentID.bytes.hexString })
            #expect(
                declined.outcome == .declined && declined.declineCode == 20 && declined.offline?.guaranteed == false)

            // In debt: a new token allows nothing, and an online payment declines.
            let renewed = try DailyToken.decode(try await bakery.token(refresh: true))
            #expect(renewed.allowance.minorUnits == 0)
            let refused = try await bakery.client(bakery.tills[0].key).submitPayment(
                try JSONDecoder().decode(
                    Components.Schemas.PaymentSubmission.self,
                    from: Data(
                        try SubmissionFields(payment: try bakery.confirm(1_00, for: bakery.tills[0])).json().utf8)))
            #expect(refused.outcome == .declined && refused.declineCode == 1, "\(refused)")
            // A top-up repays the debt first.
            try await bakery.server.ledger.deposit(try Money(minorUnits: 30_00, currency: .eur), to: bakery.walletID)
            #expect(try await bakery.balance() == (try Money(minorUnits: 10_00, currency: .eur)))
            #expect(try DailyToken.decode(try await bakery.token(refresh: true)).allowance.minorUnits == 10_00)
            #expect(try await LedgerAudit.violations(in: bakery.server.ledger.store) == [])
        }
    }

    @Test func theExcessBeyondOneAllowanceIsPaidByTheBalanceWhenItCovers() async throws {
        try await withBakery(balance: 200_00) { bakery in
            let token = try await bakery.token()
            bakery.server.clock.advance(120)
            let atFirst = try bakery.confirm(40_00, for: bakery.tills[0])
            let atSecond = try bakery.confirm(30_00, for: bakery.tills[1])
            let first = try await bakery.forward(atFirst, by: bakery.tills[0], token: token)
            let second = try await bakery.forward(atSecond, by: bakery.tills[1], token: token)
            for (result, guaranteed) in [(first, true), (second, false)] {
                guard case .settled = result.outcome else {
                    Issue.record("expected a settlement: \(result.outcome)")
                    return
                }
                #expect(result.offline?.guaranteed == guaranteed)
            }
            #expect(try await bakery.balance() == (try Money(minorUnits: 130_00, currency: .eur)))
            #expect(try await bakery.server.ledger.offlineDebt(of: bakery.walletID, in: .eur).minorUnits == 0)
        }
    }

    /// A payment that settled online (the terminal timed out on it and kept it offline) is not
    /// settled again when it is forwarded; two forwards racing execute once.
    @Test func onlineFirstAndConcurrentForwardsExecuteOnce() async throws {
        try await withBakery(balance: 80_00) { bakery in
            let token = try await bakery.token()
            let confirm = try bakery.confirm(12_00, for: bakery.tills[0])
            let online = try await bakery.client(bakery.tills[0].key).submitPayment(
                try JSONDecoder().decode(
                    Components.Schemas.PaymentSubmission.self,
                    from: Data(try SubmissionFields(payment: confirm, registerUser: "anna").json().utf8)))
            let forwarded = try await bakery.forward(confirm, by: bakery.tills[0], token: token)
            #expect(
                forwarded.outcome
                    == .settled(
                        reference: try #require(online.reference), bonusPointsEarned: 12, bonusPointsBalance: 12))
            #expect(forwarded.offline == nil, "the online result is the result")
            // Forwarded again later, even with a token that could back nothing now: the stored
            // result, not a refusal of a check the first submission never needed.
            let later = try await bakery.forward(confirm, by: bakery.tills[0], token: Array("not a token".utf8))
            #expect(later == forwarded)

            let raced = try bakery.confirm(5_00, for: bakery.tills[1])
            let results = try await withThrowingTaskGroup(of: OfflinePaymentSettlement.self) { group in
                for _ in 0..<2 { group.addTask { try await bakery.forward(raced, by: bakery.tills[1], token: token) } }
                var results: [OfflinePaymentSettlement] = []
                for try await result in group { results.append(result) }
                return results
            }
            #expect(results.count == 2 && results[0] == results[1])
            for id in [confirm.paymentID, raced.paymentID] {
                #expect(try await bakery.server.ledger.executionCount(of: id) == 1)
            }
            #expect(try await bakery.balance() == (try Money(minorUnits: 63_00, currency: .eur)))
        }
    }

    /// Every token that cannot back the payment is refused with its own code, and nothing is recorded.
    @Test func tokensThatCannotBackThePaymentAreRefusedWithExactCodes() async throws {
        try await withBakery(balance: 80_00) { bakery in
            let token = try await bakery.token()
            let decoded = try DailyToken.decode(token)
            let now = bakery.server.clock.now
            let other = try await bakery.server.fundedWallet(80_00, name: "Bea")
            let othersToken = try await bakery.token(of: other.key)
            // Signed by another issuer; signed by this one but never recorded.
            let foreign = try DailyToken.issue(
                by: P256.Signing.PrivateKey(), walletKey: bakery.wallet.publicKey,
                walletAccountID: bakery.walletID.rawValue, allowance: decoded.allowance, issuedAt: now,
                expiresAt: now + 3600, revocation: decoded.revocation
            ).encoded()
            let unrecorded = try DailyToken.issue(
                by: bakery.server.issuer.signingKey, walletKey: bakery.wallet.publicKey,
                walletAccountID: bakery.walletID.rawValue, allowance: decoded.allowance, issuedAt: now,
                expiresAt: now + 3600, revocation: decoded.revocation
            ).encoded()
            let till = bakery.tills[0]
            let cases: [(String, Confirm, [UInt8], Int64, String)] = [
                ("another issuer", try bakery.confirm(10_00, for: till), foreign, now, "daily_token_unknown"),
                ("never recorded", try bakery.confirm(10_00, for: till), unrecorded, now, "daily_token_unknown"),
                (
                    "another wallet's", try bakery.confirm(10_00, for: till), othersToken, now,
                    "daily_token_other_wallet"
                ),
                (
                    "before its issue", try bakery.confirm(10_00, for: till, signedAt: now - 3600), token, now - 3600,
                    "daily_token_not_yet_valid"
                ),
                ("in the future", try bakery.confirm(10_00, for: till), token, now + 3600, "accepted_at_in_future"),
                (
                    "beyond its allowance", try bakery.confirm(45_00, tip: 5_01, for: till), token, now,
                    "offline_amount_exceeds_token"
                ),
            ]
            for (what, confirm, token, acceptedAt, code) in cases {
                do {
                    let result = try await bakery.forward(confirm, by: till, token: token, acceptedAt: acceptedAt)
                    Issue.record("a token \(what) was accepted: \(result)")
                } catch let error as ServerClientError {
                    #expect(error.code == code, "a token \(what): \(error)")
                    if case .refused(let status, _, _, _) = error { #expect(status == 422, "\(what)") }
                }
                #expect(try await bakery.server.ledger.executionCount(of: confirm.paymentID) == 0, "\(what)")
            }
            // A token in another currency than the payment.
            let dollars = try Money(minorUnits: 50_00, currency: .usd)
            let usd = try DailyToken.issue(
                by: bakery.server.issuer.signingKey, walletKey: bakery.wallet.publicKey,
                walletAccountID: bakery.walletID.rawValue, allowance: dollars, issuedAt: now, expiresAt: now + 3600,
                revocation: decoded.revocation)
            try await bakery.server.ledger.recordDailyToken(
                DailyTokenRecord(
                    tokenID: usd.tokenID, walletID: bakery.walletID,
                    walletKey: try PublicKeyBytes(bytes: usd.walletKey), allowance: dollars, balanceAtIssue: 0,
                    revocationDigest: usd.revocation.digest, issuedAt: now, expiresAt: now + 3600,
                    token: usd.encoded()))
            let inEuros = try bakery.confirm(10_00, for: till)
            do {
                _ = try await bakery.forward(inEuros, by: till, token: usd.encoded())
                Issue.record("a token in USD backed a payment in EUR")
            } catch let error as ServerClientError { #expect(error.code == "currency_mismatch", "\(error)") }
            // A day later: the token had expired when the payment was accepted.
            bakery.server.clock.advance(86_400 + 60)
            let late = try bakery.confirm(10_00, for: till, signedAt: decoded.expiresAt - 60)
            do {
                _ = try await bakery.forward(late, by: till, token: token, acceptedAt: decoded.expiresAt)
                Issue.record("an expired token was accepted")
            } catch let error as ServerClientError { #expect(error.code == "daily_token_expired", "\(error)") }
            for id in [inEuros.paymentID, late.paymentID] {
                #expect(try await bakery.server.ledger.executionCount(of: id) == 0)
            }
            #expect(try await bakery.balance() == (try Money(minorUnits: 80_00, currency: .eur)))
        }
    }

    /// The dashboard's transactions page marks offline payments, guaranteed or not.
    @Test func theDashboardMarksOfflinePayments() async throws {
        let server = try await TestServer()
        let merchant = try await server.addMerchant()
        let shop = try await DashboardShop(server.ledger, merchant: merchant.id)
        let now = server.clock.now
        let tokenID = [UInt8](repeating: 5, count: 16)
        try await server.ledger.recordDailyToken(
            DailyTokenRecord(
                tokenID: tokenID, walletID: shop.wallet, walletKey: shop.key,
                allowance: try Money(minorUnits: 50_00, currency: .eur), balanceAtIssue: 50_00,
                revocationDigest: [UInt8](repeating: 0, count: 32), issuedAt: now, expiresAt: now + 3600,
                token: [1, 2, 3]))
        var generator = SystemRandomNumberGenerator()
        for cents in [40_00, 20_00] as [Int64] {
            let payment = SettlementRequest(
                paymentID: PaymentID.random(using: &generator), sessionID: try #require(SessionID(rawValue: 7)),
                walletKey: shop.key, terminalKeyID: try TerminalKeyID(bytes: [1, 2, 3, 4, 5, 6, 7, 8]),
                amount: try Money(minorUnits: cents, currency: .eur), tip: .zero(.eur), registerUser: "anna",
                contentDigest: [UInt8](repeating: UInt8(cents / 100), count: 32))
            let result = try await server.ledger.settleOffline(
                OfflineSettlementRequest(payment: payment, tokenID: tokenID, acceptedAt: now), merchant: merchant.id)
            #expect(result.outcome.isApproved)
        }
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            _ = try await browser.signIn()
            let page = try await browser.get("/dashboard/transactions")
            #expect(page.text.contains("payment (offline, guaranteed)"), "\(page.text)")
            #expect(page.text.contains("payment (offline)<"), "\(page.text)")
        }
    }
}
