import Crypto
import Foundation
import HTTPTypes
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonServer
import HummingbirdTesting
import Testing

/// Bad input for POST /v1/payments and POST /v1/redemptions: every malformed
/// submission of an activated till gets its exact error, and nothing moves in the ledger.
@Suite("Bad input: payments and redemptions")
struct SubmissionBadInputTests {
    /// A bakery with an activated till and a registered wallet with money and bonus points.
    final class Shop: Sendable {
        let server: TestServer
        let till = TerminalKey()
        let wallet: P256.Signing.PrivateKey
        let walletID: WalletID

        init() async throws {
            server = try await TestServer()
            let merchant = try await server.addMerchant()
            _ = try await server.activate(till)
            let funded = try await server.fundedWallet(100_00)
            (wallet, walletID) = (funded.key, funded.id)
            try await server.ledger.addBonusPoints(500, to: walletID, at: merchant.id)
        }

        func confirm(amount: Int64 = 12_50, tip: Int64 = 1_00, currency: Currency = .eur) throws -> Confirm {
            try WalletSigned.confirm(by: wallet, for: till.key.publicKey, amount: amount, tip: tip, currency: currency)
        }

        func redeem(points: Int64 = 100) throws -> Redeem {
            try WalletSigned.redeem(by: wallet, for: till.key.publicKey, points: points)
        }

        /// Sends `body` signed by the till, expects the refusal, and that no table but the spent
        /// nonces changed.
        func expectRefused(
            _ path: String, _ body: String, contentType: String = "application/json", _ status: HTTPResponse.Status,
            _ code: String, _ message: String, sourceLocation: SourceLocation = #_sourceLocation
        ) async throws {
            let before = try await tableSnapshot(server.ledger, excluding: ["request_nonces"])
            let response = try await server.withClient { [server, till] client in
                try await client.send(
                    .post, path, json: body,
                    headers: [
                        .contentType: contentType,
                        .authorization: try signedAuthorization(
                            till.key, method: .post, path: path, body: body, time: server.clock.now),
                    ])
            }
            try expectError(response, status, code, message, sourceLocation: sourceLocation)
            #expect(
                try await tableSnapshot(server.ledger, excluding: ["request_nonces"]) == before,
                "the ledger changed", sourceLocation: sourceLocation)
        }

        func submit(_ path: String, _ body: String) async throws -> TestResponse {
            try await server.withClient { [server, till] client in
                try await client.sendSigned(.post, path, json: body, by: till.key, time: server.clock.now)
            }
        }
    }

    // MARK: POST /v1/payments

    @Test func paymentMalformedJSONOrNotAnObject() async throws {
        let shop = try await Shop()
        try await shop.expectRefused(
            "/v1/payments", #"{"confirmation": "#, .badRequest, "malformed_json", "the body is not valid JSON")
        for body in ["[1, 2]", "\"pay\"", "null", "12.5"] {
            try await shop.expectRefused(
                "/v1/payments", body, .badRequest, "malformed_json", "the body must be a JSON object")
        }
        try await shop.expectRefused(
            "/v1/payments", "", .badRequest, "invalid_request", "the request needs a JSON body")
        try await shop.expectRefused(
            "/v1/payments", try SubmissionFields(payment: shop.confirm()).json(), contentType: "text/plain",
            .unsupportedMediaType, "unsupported_media_type", "the body must be JSON with Content-Type: application/json"
        )
    }

    @Test func paymentWrongTypes() async throws {
        let shop = try await Shop()
        let fields = SubmissionFields(payment: try shop.confirm())
        let cases: [(String, Any, String)] = [
            ("amount", "12.50", #"the field "amount" has the wrong type (expected an integer)"#),
            ("tip", true, #"the field "tip" has the wrong type (expected an integer)"#),
            ("sessionId", "42", #"the field "sessionId" has the wrong type (expected an integer)"#),
            ("currency", 978, #"the field "currency" has the wrong type (expected a string)"#),
            ("paymentId", ["a"], #"the field "paymentId" has the wrong type (expected a string)"#),
            ("confirmation", NSNull(), #"the field "confirmation" is null (no field of the API takes null"#),
            ("amount", 12.5, "has a number where an integer is expected (amounts are whole minor units)"),
            ("tip", 1e30, "has a number where an integer is expected (amounts are whole minor units)"),
        ]
        for (field, value, message) in cases {
            try await shop.expectRefused(
                "/v1/payments", try fields.json([field: value]), .badRequest, "malformed_json", message)
        }
    }

    @Test func paymentMissingOrExtraFields() async throws {
        let shop = try await Shop()
        let fields = SubmissionFields(payment: try shop.confirm())
        for field in fields.fields.keys.sorted() {
            try await shop.expectRefused(
                "/v1/payments", try fields.json([field: nil]), .badRequest, "malformed_json",
                "the field \"\(field)\" is missing")
        }
        try await shop.expectRefused(
            "/v1/payments", try fields.json(["merchantId": "m_other"]), .badRequest, "malformed_json",
            #"the field "merchantId" is not part of the API"#)
    }

    @Test func paymentOversizedBody() async throws {
        let shop = try await Shop()
        try await shop.expectRefused(
            "/v1/payments",
            try SubmissionFields(payment: shop.confirm()).json(["registerUser": String(repeating: "u", count: 5000)]),
            .contentTooLarge, "payload_too_large", "bytes; the limit is 4096")
    }

    @Test func paymentAmountOrTipOutOfRange() async throws {
        let shop = try await Shop()
        let fields = SubmissionFields(payment: try shop.confirm())
        for amount in [0, -1, -12_50, Int(Money.maximumMinorUnits) + 1, Int.max, Int.min] {
            try await shop.expectRefused(
                "/v1/payments", try fields.json(["amount": amount]), .badRequest, "invalid_request",
                "amount must be 1 to 1000000000000000 minor units (got \(amount))")
        }
        for tip in [-1, Int(Money.maximumMinorUnits) + 1, Int.min] {
            try await shop.expectRefused(
                "/v1/payments", try fields.json(["tip": tip]), .badRequest, "invalid_request",
                "tip must be 0 to 1000000000000000 minor units (got \(tip))")
        }
        // Signed by the wallet as 0: refused the same way, nothing stored for the id.
        let zero = try shop.confirm(amount: 0, tip: 0)
        try await shop.expectRefused(
            "/v1/payments", try SubmissionFields(payment: zero).json(), .badRequest, "invalid_request",
            "amount must be 1 to 1000000000000000 minor units (got 0)")
        #expect(try await shop.server.ledger.transaction(for: zero.paymentID) == nil)
    }

    @Test func paymentUnknownCurrency() async throws {
        let shop = try await Shop()
        let fields = SubmissionFields(payment: try shop.confirm())
        for currency in ["XYZ", "EURO", "", "€", "E1R"] {
            try await shop.expectRefused(
                "/v1/payments", try fields.json(["currency": currency]), .badRequest, "invalid_request",
                "currency must be an ISO 4217 code this server settles (got \"\(currency)\")")
        }
        // A known currency other than the signed one is a change of terms.
        try await shop.expectRefused(
            "/v1/payments", try fields.json(["currency": "USD"]), .unprocessableContent, "terms_mismatch",
            "currency differ(s) from what the wallet signed")
        // Signed in a currency the merchant does not settle: a declined result (stored), not a refusal.
        let dollars = try shop.confirm(currency: .usd)
        let declined = try await shop.submit("/v1/payments", try SubmissionFields(payment: dollars).json())
        #expect(declined.status == .ok, "\(declined.text)")
        let result = try JSONDecoder().decode(Components.Schemas.PaymentResult.self, from: declined.data)
        #expect(result.outcome == .declined)
        #expect(result.declineCode == Int32(ErrorCode.unsupportedCurrency.rawValue))
        #expect(try await shop.server.ledger.balance(of: shop.walletID, in: .eur).minorUnits == 100_00)
    }

    @Test func paymentFieldsThatAreNotWhatTheyClaim() async throws {
        let shop = try await Shop()
        let confirm = try shop.confirm()
        let fields = SubmissionFields(payment: confirm)
        try await shop.expectRefused(
            "/v1/payments", try fields.json(["confirmation": "%%% not base64"]), .badRequest, "invalid_request",
            "confirmation must be standard base64")
        try await shop.expectRefused(
            "/v1/payments", try fields.json(["confirmation": Data([1, 2, 3]).base64EncodedString()]), .badRequest,
            "invalid_request", "confirmation cannot be decoded")
        try await shop.expectRefused(
            "/v1/payments",
            try fields.json([
                "confirmation": Data(SessionMessage.redeem(try shop.redeem()).encoded()).base64EncodedString()
            ]), .badRequest, "invalid_request", "confirmation is not a Confirm message")
        for paymentID in ["not hex", "ABCDEF", String(repeating: "0", count: 33)] {
            try await shop.expectRefused(
                "/v1/payments", try fields.json(["paymentId": paymentID]), .badRequest, "invalid_request",
                "paymentId must be 32 hex digits")
        }
        try await shop.expectRefused(
            "/v1/payments", try fields.json(["registerUser": String(repeating: "u", count: 65)]), .badRequest,
            "invalid_request", "registerUser must be at most 64 bytes")
        // The genuine submission then goes through: the refusals were for the input alone.
        let response = try await shop.submit("/v1/payments", try fields.json())
        #expect(response.status == .ok, "\(response.text)")
        #expect(try await shop.server.ledger.balance(of: shop.walletID, in: .eur).minorUnits == 100_00 - 13_50)
    }

    // MARK: POST /v1/redemptions

    @Test func redemptionMalformedWrongTypesMissingFields() async throws {
        let shop = try await Shop()
        let fields = SubmissionFields(redemption: try shop.redeem())
        try await shop.expectRefused(
            "/v1/redemptions", #"{"redemption": [}"#, .badRequest, "malformed_json", "the body is not valid JSON")
        try await shop.expectRefused(
            "/v1/redemptions", "[]", .badRequest, "malformed_json", "the body must be a JSON object")
        let wrong: [(String, Any, String)] = [
            ("quantity", "100", #"the field "quantity" has the wrong type (expected an integer)"#),
            ("value", false, #"the field "value" has the wrong type (expected an integer)"#),
            ("item", 7, #"the field "item" has the wrong type (expected a string)"#),
            ("transactionType", "cash", #"the field "transactionType" is invalid"#),
        ]
        for (field, value, message) in wrong {
            try await shop.expectRefused(
                "/v1/redemptions", try fields.json([field: value]), .badRequest, "malformed_json", message)
        }
        for field in fields.fields.keys.sorted() {
            try await shop.expectRefused(
                "/v1/redemptions", try fields.json([field: nil]), .badRequest, "malformed_json",
                "the field \"\(field)\" is missing")
        }
        try await shop.expectRefused(
            "/v1/redemptions", try fields.json(["item": String(repeating: "i", count: 5000)]), .contentTooLarge,
            "payload_too_large", "the limit is 4096")
    }

    @Test func redemptionValuesOutOfRangeAndUnknownCurrency() async throws {
        let shop = try await Shop()
        let fields = SubmissionFields(redemption: try shop.redeem())
        for value in [-1, Int(Money.maximumMinorUnits) + 1, Int.min] {
            try await shop.expectRefused(
                "/v1/redemptions", try fields.json(["value": value]), .badRequest, "invalid_request",
                "value must be 0 to 1000000000000000 minor units (got \(value))")
        }
        for quantity in [-1, Int.min] {
            try await shop.expectRefused(
                "/v1/redemptions", try fields.json(["quantity": quantity]), .badRequest, "invalid_request",
                "quantity must be 0 or more (got \(quantity))")
        }
        for currency in ["XYZ", "EURO", ""] {
            try await shop.expectRefused(
                "/v1/redemptions", try fields.json(["currency": currency]), .badRequest, "invalid_request",
                "currency must be an ISO 4217 code this server settles (got \"\(currency)\")")
        }
        try await shop.expectRefused(
            "/v1/redemptions", try fields.json(["redemptionId": "zz"]), .badRequest, "invalid_request",
            "redemptionId must be 32 hex digits")
        try await shop.expectRefused(
            "/v1/redemptions", try fields.json(["redemption": "%%%"]), .badRequest, "invalid_request",
            "redemption must be standard base64")
        let response = try await shop.submit("/v1/redemptions", try fields.json())
        #expect(response.status == .ok, "\(response.text)")
        #expect(
            try await shop.server.ledger.bonusPoints(of: shop.walletID, at: shop.server.ledger.merchants()[0].id) == 400
        )
    }
}
