import Foundation
import HTTPTypes
import HorizonServer
import HummingbirdTesting
import NIOCore
import Testing

/// The contract says what the server checks: what `openapi.yaml` forbids is refused with the one
/// error envelope (400), and changes nothing.
@Suite("Contract rules")
struct ContractRulesTests {
    /// No request field is nullable, and the generated decoder reads null as "left out": a
    /// `{"currency": null}` daily token request would otherwise be served as one that names none.
    @Test func aNullFieldIsRefusedNotTakenForALeftOutOne() async throws {
        let server = try await TestServer()
        try await server.addMerchant()
        let wallet = try await server.fundedWallet(20_00)
        let before = try await server.state()
        for body in [
            #"{"currency": null}"#, #"{"currency": "EUR", "refresh": null}"#, #"{"refresh": null}"#,
        ] {
            let response = try await server.withClient { client in
                try await client.sendSigned(
                    .post, "/v1/wallet/daily-token", json: body, by: wallet.key, time: server.clock.now)
            }
            try expectError(response, .badRequest, "malformed_json", "is null (no field of the API takes null")
        }
        // Nested too, on any operation.
        let response = try await server.withClient { client in
            try await client.send(
                .post, "/v1/terminals/activate",
                json: #"{"email": "a@b.example", "password": "x", "label": "T", "publicKey": "A", "proof": "A", "x": [1, null]}"#)
        }
        try expectError(response, .badRequest, "malformed_json", #"the field "x[1]" is null"#)
        #expect(try await server.state() == before)
        // Left out, the wallet's only currency is taken.
        let served = try await server.withClient { client in
            try await client.sendSigned(
                .post, "/v1/wallet/daily-token", json: "{}", by: wallet.key, time: server.clock.now)
        }
        #expect(served.status == .ok, "\(served.text)")
    }

    /// The merchant's transaction filter `registerUser` is at most 64 characters, as the contract
    /// says (a longer one was served as an empty page).
    @Test func anOverLongRegisterUserFilterIsRefused() async throws {
        let server = try await TestServer()
        try await server.addMerchant()
        let till = TerminalKey()
        _ = try await server.activate(till)
        for (user, status) in [(String(repeating: "u", count: 65), HTTPResponse.Status.badRequest), (String(repeating: "é", count: 64), .ok)] {
            let path = "/v1/merchant/transactions?registerUser=" + (user.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
            let response = try await server.withClient { client in
                try await client.sendSigned(.get, path, by: till.key, time: server.clock.now)
            }
            #expect(response.status == status, "\(response.text)")
            if status == .badRequest {
                try expectError(response, .badRequest, "invalid_request", "registerUser must be at most 64 characters")
            }
        }
    }
}
