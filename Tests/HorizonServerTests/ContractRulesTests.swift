import Foundation
import HTTPTypes
import HorizonServer
import HorizonTestSupport
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
                json:
                    #"{"email": "a@b.example", "password": "x", "label": "T", "publicKey": "A", "proof": "A", "x": [1, null]}"#
            )
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
        for (user, status) in [
            (String(repeating: "u", count: 65), HTTPResponse.Status.badRequest),
            (String(repeating: "é", count: 64), .ok),
        ] {
            let path =
                "/v1/merchant/transactions?registerUser="
                + (user.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
            let response = try await server.withClient { client in
                try await client.sendSigned(.get, path, by: till.key, time: server.clock.now)
            }
            #expect(response.status == status, "\(response.text)")
            if status == .badRequest {
                try expectError(response, .badRequest, "invalid_request", "registerUser must be at most 64 characters")
            }
        }
    }

    /// The contract's text patterns are the server's own rules (schemathesis generates from
    /// them): a name, e-mail or phone number the server refuses does not match its pattern, and
    /// one it takes does. Control characters past ASCII (C1) and format characters (a bidi
    /// override, a soft hyphen, a tag) matched the patterns and were refused.
    @Test func theTextPatternsAreTheServersRules() async throws {
        let document = try RepositoryFile.text("Sources/HorizonAPI/openapi.yaml")
        let printable = try Self.anchoredPattern("printable", in: document)
        let email = try Self.anchoredPattern("noControlOrFormat", in: document)
        let plausibleEmail = try Self.anchoredPattern("plausibleEmail", in: document)
        let phone = try Self.anchoredPattern("phone", in: document)
        let server = try await TestServer()
        try await server.addMerchant()
        let wallet = try await server.fundedWallet(1_00)
        let odd = ["\u{0091}", "\u{202E}", "\u{00AD}", "\u{200B}", "\u{E0041}", "\u{110BD}", "\u{0}", "\n"]
        try await server.withClient { client in
            for name in ["Zoë Ångström", "   ", "\u{3000}"] + odd.map { "An" + $0 + "n" } {
                let response = try await client.sendSigned(
                    .put, "/v1/wallet/account", json: try Self.json(["name": name]), by: wallet.key,
                    time: server.clock.now)
                #expect(
                    (response.status == .ok) == Self.matches(printable, name),
                    "\(name.debugDescription): \(response.text)")
            }
            for address in ["owner@shop.example", " Owner@Shop.example "] + odd.map { "own" + $0 + "er@shop.example" } {
                let response = try await client.send(
                    .post, "/v1/merchant/sessions", json: try Self.json(["email": address, "password": "wrong"]))
                #expect(
                    (response.status != .badRequest) == Self.matches(email, address),
                    "\(address.debugDescription): \(response.text)")
            }
            for address in ["owner@shop.example", "Zoë@shop.example"] + odd.map { "own" + $0 + "er@shop.example" } {
                let device = WalletDevice()
                let restoration = try await client.send(
                    .post, "/v1/wallets/restorations", json: device.restoration(email: address))
                #expect(
                    (restoration.status != .badRequest) == Self.matches(plausibleEmail, address),
                    "\(address.debugDescription): \(restoration.text)")
            }
            for (index, number) in [
                "+49 151 1234 5678", "+49 (151) 1234-5678", "+4915112", "+491511", "0049 151 12345678",
                "+0151 12345678",
                "+49 151 12345678 9012", "+49\t151.12345678", "+49 151 1234 567x",
            ].enumerated() {
                let device = WalletDevice()
                let response = try await client.send(
                    .post, "/v1/wallets/registrations",
                    json: try device.registration(email: "phone\(index)@example.com", phone: number))
                #expect(
                    (response.status == .accepted) == Self.matches(phone, number),
                    "\(number.debugDescription): \(response.text)")
            }
        }
    }

    /// The pattern a YAML anchor names in the contract (`&name '…'` or `&name "…"`).
    static func anchoredPattern(_ anchor: String, in document: String) throws -> NSRegularExpression {
        let quoted = try #require(document.firstRange(of: try Regex("&\(anchor) ('[^']*'|\"(?:[^\"\\\\]|\\\\.)*\")")))
        var text = String(document[quoted].dropFirst(anchor.count + 2))
        let doubleQuoted = text.hasPrefix("\"")
        text = String(text.dropFirst().dropLast())
        if doubleQuoted { text = text.replacingOccurrences(of: "\\\\", with: "\\") }
        return try NSRegularExpression(pattern: text)
    }

    /// Whether `pattern` finds a match in `text`, as JSON Schema's `pattern` (and schemathesis) reads it.
    static func matches(_ pattern: NSRegularExpression, _ text: String) -> Bool {
        pattern.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil
    }

    static func json(_ fields: [String: String]) throws -> String {
        String(decoding: try JSONEncoder().encode(fields), as: UTF8.self)
    }
}
