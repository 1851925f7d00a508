import Foundation
import HorizonCore
import HorizonLedger
import HorizonServer
import Testing

/// Format characters (Unicode category Cf: bidi overrides and isolates, zero-width characters)
/// are refused in every name, as in wallet names: a name must read as what is stored.
@Suite("Format characters in names")
struct FormatCharacterTests {
    static let names = ["A\u{202E}nn", "Ann\u{2066}", "A\u{200B}nn", "\u{061C}Ann"]

    @Test func registerUsersTerminalLabelsMerchantsAndWalletsRefuseThem() async throws {
        let server = try await TestServer()
        let merchant = try await server.addMerchant()
        let till = TerminalKey()
        _ = try await server.activate(till)
        let wallet = try await server.fundedWallet(1_00)
        try await server.withClient { client in
            for name in Self.names {
                let json = String(
                    decoding: try JSONEncoder().encode(["id": "till-1", "name": name]), as: UTF8.self)
                let added = try await client.sendSigned(
                    .post, "/v1/merchant/register-users", json: json, by: till.key, time: server.clock.now)
                try expectError(added, .badRequest, "register_user_name_invalid", "format characters")
                let activation = try await client.send(
                    .post, "/v1/terminals/activate", json: TerminalKey().activation(label: "Till " + name))
                try expectError(activation, .badRequest, "invalid_request", "printable text")
            }
        }
        for name in Self.names {
            await #expect(throws: LedgerError.self) {
                _ = try await server.ledger.createMerchant(name: name, currency: .eur, adminEmail: "x@shop.example")
            }
            await #expect(throws: LedgerError.self) { _ = try await server.ledger.setWalletName(name, of: wallet.id) }
        }
        #expect(try await server.ledger.registerUsers(of: merchant.id).isEmpty)
        #expect(try await server.ledger.merchants().count == 1)
    }
}
