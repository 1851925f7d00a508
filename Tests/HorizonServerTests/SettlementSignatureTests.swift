import Crypto
import Foundation
import HTTPTypes
import HorizonAPI
import HorizonCore
import HorizonProtocol
import HorizonServer
import HorizonServerClient
import HorizonSettlement
import HorizonStores
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// A man in the middle answers "approved" for a payment that never executed: the terminal's
/// settlement processor must not report it approved unless the server's anchor signed the answer.
@Suite("Settlement answers are signed")
struct SettlementSignatureTests {
    /// How the fake server answers.
    enum Forgery: Sendable { case unsigned, wrongKey, tampered, genuine }

    static let anchor = P256.Signing.PrivateKey()

    /// A settlement request as the terminal journals it (the fake server does not read it).
    static func request() throws -> SettlementRequest {
        var generator = SystemRandomNumberGenerator()
        return SettlementRequest(
            paymentID: PaymentID.random(using: &generator), sessionID: try #require(SessionID(rawValue: 7)),
            walletKey: try PublicKeyBytes(bytes: Array(P256.Signing.PrivateKey().publicKey.x963Representation)),
            terminalKeyID: try TerminalKeyID(bytes: [1, 2, 3, 4, 5, 6, 7, 8]),
            amount: try Money(minorUnits: 12_00, currency: .eur), tip: .zero(.eur), registerUser: "",
            contentDigest: [UInt8](repeating: 7, count: 32), signedConfirmation: [1, 2, 3])
    }

    /// The answer the fake server gives for `paymentID`.
    static func answer(_ forgery: Forgery, paymentID: String) throws -> Components.Schemas.PaymentResult {
        var result = Components.Schemas.PaymentResult(
            paymentId: paymentID, outcome: .approved, reference: 42, amount: 12_00, tip: 0, currency: "EUR",
            sessionId: 7, settledAt: 1_750_000_000, transactionType: .payment)
        switch forgery {
        case .unsigned: break
        case .wrongKey: result = try SettlementSignature.signed(result, by: P256.Signing.PrivateKey())
        case .tampered:
            // Signed for 1 cent, then the amount changed on the way.
            result.amount = 1
            result = try SettlementSignature.signed(result, by: anchor)
            result.amount = 12_00
        case .genuine: result = try SettlementSignature.signed(result, by: anchor)
        }
        return result
    }

    /// A fake server answering every payment submission and lookup "approved" as `forgery` says.
    func withFakeServer(_ forgery: Forgery, _ body: @Sendable (URL) async throws -> Void) async throws {
        let router = Router()
        @Sendable func respond(_ paymentID: String) throws -> Response {
            let json = try JSONEncoder().encode(Self.answer(forgery, paymentID: paymentID))
            return Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(bytes: json)))
        }
        router.post("/v1/payments") { request, _ in
            var request = request
            let body = try await request.collectBody(upTo: 1 << 16)
            let submission = try JSONDecoder().decode(
                Components.Schemas.PaymentSubmission.self, from: Data(body.readableBytesView))
            return try respond(submission.paymentId)
        }
        router.get("/v1/payments/:id") { _, context in try respond(context.parameters.get("id") ?? "") }
        let application = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), logger: .quiet)
        try await application.test(.live) { client in
            let port = try #require(client.port)
            try await body(try #require(URL(string: "http://127.0.0.1:\(port)")))
        }
    }

    @Test(arguments: [Forgery.unsigned, .wrongKey, .tampered])
    func anApprovalTheAnchorDidNotSignIsNoAnswer(_ forgery: Forgery) async throws {
        try await withFakeServer(forgery) { url in
            let processor = ServerPaymentProcessor(
                client: HorizonServerClient(serverURL: url, signingKey: .init()), anchor: Self.anchor.publicKey)
            let request = try Self.request()
            await #expect {
                _ = try await processor.settle(request, at: 1_750_000_000)
            } throws: { error in
                guard case .unavailable(let reason) = error as? ProcessorError else { return false }
                return reason.contains("not signed by the anchor")
            }
            // Recovery asks again: the lookup's "approved" is no answer either.
            await #expect {
                _ = try await processor.result(for: request.paymentID)
            } throws: { error in
                if case .unavailable = error as? ProcessorError { true } else { false }
            }
        }
    }

    @Test func anApprovalTheAnchorSignedIsApproved() async throws {
        try await withFakeServer(.genuine) { url in
            let processor = ServerPaymentProcessor(
                client: HorizonServerClient(serverURL: url, signingKey: .init()), anchor: Self.anchor.publicKey)
            let request = try Self.request()
            let result = try await processor.settle(request, at: 1_750_000_000)
            #expect(result.outcome.isApproved)
            #expect(try await processor.result(for: request.paymentID)?.outcome.isApproved == true)
        }
    }

    @Test func theServerSignsEveryAnswerWithItsIssuerKey() async throws {
        let server = try await TestServer()
        _ = try await server.addMerchant()
        let till = TerminalKey()
        _ = try await server.activate(till)
        let funded = try await server.fundedWallet(50_00)
        let confirm = try WalletSigned.confirm(by: funded.key, for: till.key.publicKey, amount: 10_00)
        let body = try SubmissionFields(payment: confirm).json()
        try await server.withClient { client in
            let submitted = try await client.sendSigned(
                .post, "/v1/payments", json: body, by: till.key, time: server.clock.now)
            let fetched = try await client.sendSigned(
                .get, "/v1/payments/\(confirm.paymentID.bytes.hexString)", by: till.key, time: server.clock.now)
            for response in [submitted, fetched] {
                #expect(response.status == .ok, "\(response.text)")
                let result = try JSONDecoder().decode(Components.Schemas.PaymentResult.self, from: response.data)
                #expect(result.outcome == .approved)
                #expect(SettlementSignature.isValid(result, anchor: server.issuer.signingKey.publicKey))
                #expect(!SettlementSignature.isValid(result, anchor: P256.Signing.PrivateKey().publicKey))
            }
        }
    }
}
