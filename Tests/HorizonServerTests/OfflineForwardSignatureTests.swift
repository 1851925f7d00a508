import Crypto
import Foundation
import HTTPTypes
import HorizonAPI
import HorizonCore
import HorizonProtocol
import HorizonRoles
import HorizonSecureChannel
import HorizonServer
import HorizonServerClient
import HorizonServiceClients
import HorizonSettlement
import HorizonStores
import HorizonTestSupport
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Testing

/// A man in the middle answers the terminal's offline forward: "settled" or a final refusal, for
/// a payment the server never received. The terminal must keep the payment owed unless the
/// server's anchor signed the answer, and settle it on the real server on the next forward.
@Suite("Offline forward answers are signed", .serialized)
struct OfflineForwardSignatureTests {
    /// How the fake server answers a forward.
    enum Forgery: Sendable, CustomStringConvertible {
        case settledUnsigned, settledByAnotherKey, settledForAnotherPayment, refusedUnsigned, refusedByAnotherKey

        var description: String {
            switch self {
            case .settledUnsigned: "settled, unsigned"
            case .settledByAnotherKey: "settled, signed by another key"
            case .settledForAnotherPayment: "settled, the anchor's answer for another payment"
            case .refusedUnsigned: "refused, unsigned"
            case .refusedByAnotherKey: "refused, signed by another key"
            }
        }
    }

    /// A fake server answering every offline forward as `forgery` says; `anchor` is the real
    /// server's issuer key (a genuine answer for another payment, replayed).
    func withFakeServer(
        _ forgery: Forgery, anchor: P256.Signing.PrivateKey, _ body: @Sendable (URL) async throws -> Void
    ) async throws {
        let router = Router()
        router.post("/v1/payments/offline") { request, _ in
            var request = request
            let bytes = try await request.collectBody(upTo: 1 << 16)
            let submission = try JSONDecoder().decode(
                Components.Schemas.OfflinePaymentSubmission.self, from: Data(bytes.readableBytesView))
            var settled = Components.Schemas.PaymentResult(
                paymentId: submission.paymentId, outcome: .approved, reference: 42, amount: submission.amount,
                tip: submission.tip, currency: submission.currency, sessionId: submission.sessionId,
                settledAt: submission.acceptedAt, transactionType: .payment,
                offline: .init(tokenId: "00", acceptedAt: submission.acceptedAt, guaranteed: true))
            var refusal = Components.Schemas.ErrorEnvelope(
                error: .init(code: "daily_token_expired", message: "expired", requestId: "forged"))
            let forger = P256.Signing.PrivateKey()
            switch forgery {
            case .settledUnsigned: break
            case .settledByAnotherKey: settled = try SettlementSignature.signed(settled, by: forger)
            case .settledForAnotherPayment:
                settled.paymentId = String(repeating: "ab", count: 16)
                settled = try SettlementSignature.signed(settled, by: anchor)
            case .refusedUnsigned: break
            case .refusedByAnotherKey:
                refusal.error.signature = try SettlementSignature.refusalSignature(
                    paymentID: submission.paymentId, status: 422, code: refusal.error.code,
                    message: refusal.error.message, by: forger)
            }
            let refused = [Forgery.refusedUnsigned, .refusedByAnotherKey].contains(forgery)
            let json = refused ? try JSONEncoder().encode(refusal) : try JSONEncoder().encode(settled)
            return Response(
                status: refused ? .unprocessableContent : .ok, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(bytes: json)))
        }
        let application = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), logger: .quiet)
        try await application.test(.live) { client in
            let port = try #require(client.port)
            try await body(try #require(URL(string: "http://127.0.0.1:\(port)")))
        }
    }

    /// A terminal's journal holding one payment the wallet confirmed for `till`, accepted offline
    /// under the wallet's daily token.
    static func journal(
        _ bakery: OfflineSettlementTests.Bakery, till: TerminalKey, amount: Int64, token: [UInt8]
    ) throws -> (SQLiteTerminalJournal, OfflinePaymentRecord) {
        let confirm = try bakery.confirm(amount, for: till)
        let confirmation = SessionMessage.confirm(confirm).encoded()
        let terminalKeyID = try TerminalKeyID(bytes: [1, 2, 3, 4, 5, 6, 7, 8])
        let acceptedAt = bakery.server.clock.now - 60
        let record = OfflinePaymentRecord(
            paymentID: confirm.paymentID, sessionID: confirm.sessionID, walletKey: confirm.walletKey,
            terminalKeyID: terminalKeyID, amount: confirm.amount, tip: confirm.tip, registerUser: "",
            signedConfirmation: confirmation, dailyToken: token, tokenID: try DailyToken.decode(token).tokenID,
            acceptedAt: acceptedAt)
        let journal = try SQLiteTerminalJournal(path: ":memory:")
        let request = SettlementRequest(
            paymentID: confirm.paymentID, sessionID: confirm.sessionID, walletKey: confirm.walletKey,
            terminalKeyID: terminalKeyID, amount: confirm.amount, tip: confirm.tip, registerUser: "",
            contentDigest: [UInt8](repeating: 7, count: 32), signedConfirmation: confirmation)
        try journal.write([.confirmed(.payment(request)), .submitted(request.paymentID)], at: acceptedAt)
        let receipt = try Receipt(
            sessionID: confirm.sessionID, transactionType: .payment, paymentID: confirm.paymentID,
            outcome: .acceptedOffline, amount: confirm.amount, tip: confirm.tip, transactionReference: 0,
            settledAt: acceptedAt, bonusPointsEarned: 0, bonusPointsBalance: 0)
        try journal.storeOffline(record, answer: .receipt(receipt), at: acceptedAt)
        return (journal, record)
    }

    func forwarding(
        _ journal: SQLiteTerminalJournal, _ bakery: OfflineSettlementTests.Bakery, till: TerminalKey, url: URL,
        logger: Logger = .quiet
    ) -> OfflineForwarding {
        let clock = bakery.server.clock
        let forwarder = ServerOfflineForwarder(
            client: HorizonServerClient(serverURL: url, signingKey: till.key, clock: { clock.now }),
            anchor: bakery.server.issuer.signingKey.publicKey, logger: logger)
        return OfflineForwarding(store: journal, forwarder: forwarder, clock: { clock.now })
    }

    @Test(arguments: [
        Forgery.settledUnsigned, .settledByAnotherKey, .settledForAnotherPayment, .refusedUnsigned,
        .refusedByAnotherKey,
    ])
    func aForgedAnswerLeavesThePaymentOwedUntilTheServerSettlesIt(_ forgery: Forgery) async throws {
        try await OfflineSettlementTests().withBakery(balance: 80_00) { bakery in
            let till = bakery.tills[0]
            let (journal, record) = try Self.journal(bakery, till: till, amount: 12_00, token: try await bakery.token())
            let log = LogRecorder()
            try await withFakeServer(forgery, anchor: bakery.server.issuer.signingKey) { fake in
                let report = try await forwarding(
                    journal, bakery, till: till, url: fake, logger: log.logger(level: .info)
                )
                .forwardStored()
                #expect(report.settled.isEmpty && report.declined.isEmpty, "\(forgery): \(report)")
                #expect(report.outstanding == 1, "\(forgery): \(report)")
            }
            #expect(try journal.offlinePayments().map(\.state) == [.forwarding], "\(forgery)")
            let warning = try #require(
                log.first("an answer to an offline forward is not the server's; the payment stays owed"))
            #expect(warning.level == .warning)
            #expect(try await bakery.server.ledger.executionCount(of: record.paymentID) == 0)
            // The next forward reaches the server: settled there, once, and no longer owed.
            let report = try await forwarding(journal, bakery, till: till, url: bakery.url).forwardStored()
            #expect(report.settled == [record.paymentID], "\(forgery): \(report)")
            #expect(try journal.offlinePayments().map(\.state) == [.settled])
            #expect(try await bakery.server.ledger.executionCount(of: record.paymentID) == 1)
            #expect(try await bakery.balance() == (try Money(minorUnits: 68_00, currency: .eur)))
        }
    }

    /// The server's own refusal is signed, so a payment it will never settle is given up as declined.
    @Test func theServersSignedRefusalIsFinal() async throws {
        try await OfflineSettlementTests().withBakery(balance: 80_00) { bakery in
            let till = bakery.tills[0]
            let other = try await bakery.server.fundedWallet(80_00, name: "Bea")
            let othersToken = try await bakery.token(of: other.key)
            let (journal, record) = try Self.journal(bakery, till: till, amount: 12_00, token: othersToken)
            let report = try await forwarding(journal, bakery, till: till, url: bakery.url).forwardStored()
            #expect(report.declined.map(\.code) == ["daily_token_other_wallet"], "\(report)")
            #expect(try journal.offlinePayments().map(\.state) == [.declined])
            #expect(try await bakery.server.ledger.executionCount(of: record.paymentID) == 0)
        }
    }

    /// What the server answers an offline forward carries its issuer key's signature, the
    /// settlement over its offline part too, the refusal over the payment id, status, code and message.
    @Test func theServerSignsOfflineSettlementsAndRefusals() async throws {
        try await OfflineSettlementTests().withBakery(balance: 80_00) { bakery in
            let till = bakery.tills[0]
            let anchor = bakery.server.issuer.signingKey.publicKey
            let token = try await bakery.token()
            let confirm = try bakery.confirm(12_00, for: till)
            let settled = try await bakery.forward(confirm, by: till, token: token)
            guard case .settled = settled.outcome else {
                Issue.record("not settled: \(settled)")
                return
            }
            #expect(settled.offline != nil)
            // The offline part is signed: an answer without it (or with another) does not verify.
            var result = Components.Schemas.PaymentResult(
                paymentId: confirm.paymentID.bytes.hexString, outcome: .approved, reference: 1, amount: 12_00, tip: 0,
                currency: "EUR", settledAt: 1,
                offline: .init(tokenId: "aa", acceptedAt: 1, guaranteed: false))
            result = try SettlementSignature.signed(result, by: bakery.server.issuer.signingKey)
            #expect(SettlementSignature.isValid(result, anchor: anchor))
            result.offline?.guaranteed = true
            #expect(!SettlementSignature.isValid(result, anchor: anchor))
            result.offline = nil
            #expect(!SettlementSignature.isValid(result, anchor: anchor))
            // A refusal without the anchor's signature is not taken as the server's: the client
            // reports it as no answer; the server's own refusal verifies and is a refusal.
            let other = try await bakery.server.fundedWallet(80_00, name: "Bea")
            let othersToken = try await bakery.token(of: other.key)
            let foreign = try bakery.confirm(12_00, for: till)
            do {
                _ = try await bakery.forward(foreign, by: till, token: othersToken)
                Issue.record("a foreign token was accepted")
            } catch let error as ServerClientError {
                guard case .refused(let status, let code, _, _) = error else {
                    Issue.record("not a verified refusal: \(error)")
                    return
                }
                #expect(status == 422 && code == "daily_token_other_wallet")
            }
        }
    }
}
