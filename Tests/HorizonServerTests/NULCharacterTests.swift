import Foundation
import HTTPTypes
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonServer
import HummingbirdTesting
import Testing

/// A NUL character in any string a request carries (path ids, e-mails, register users, filters,
/// sign-in forms) is refused with 400 before the database: PostgreSQL would answer it with an
/// error (500), SQLite would store it. The same on both stores.
@Suite("NUL characters are refused")
struct NULCharacterTests {
    static let stores: [StoreKind] = TestStores.postgresConfigured ? [.sqlite, .postgres] : [.sqlite]

    func expectNULRefused(_ response: TestResponse, sourceLocation: SourceLocation = #_sourceLocation) throws {
        try expectError(
            response, .badRequest, "invalid_request", "NUL character (U+0000)", sourceLocation: sourceLocation)
    }

    @Test(arguments: stores)
    func everyKindOfStringWithANULIsABadRequestOnEveryStore(_ kind: StoreKind) async throws {
        try await TestStores.withStores(kind) { _, another in
            let server = try await withoutActuallyEscaping(another) { another in
                try await TestServer(store: { _ in try another() })
            }
            let merchant = try await server.addMerchant()
            let till = TerminalKey()
            _ = try await server.activate(till)
            let now = server.clock.now
            try await server.withClient { client in
                // A path id, raw and percent-encoded.
                try expectNULRefused(
                    try await client.sendSigned(
                        .get, "/v1/payments/%00" + String(repeating: "a", count: 30), by: till.key, time: now))
                try expectNULRefused(
                    try await client.sendSigned(.delete, "/v1/merchant/register-users/a%00b", by: till.key, time: now))
                // A filter.
                try expectNULRefused(
                    try await client.sendSigned(
                        .get, "/v1/merchant/transactions?registerUser=a%00b", by: till.key, time: now))
                // Register users: id and name.
                for json in [#"{"id": "a\u0000b", "name": "Ann"}"#, #"{"id": "042", "name": "An\u0000n"}"#] {
                    try expectNULRefused(
                        try await client.sendSigned(
                            .post, "/v1/merchant/register-users", json: json, by: till.key, time: now))
                }
                // E-mails: activation, the admin's sign-in, a wallet registration.
                try expectNULRefused(
                    try await client.send(
                        .post, "/v1/terminals/activate",
                        json: TerminalKey().activation(email: "owner\u{0}@bakery.example")))
                try expectNULRefused(
                    try await client.send(
                        .post, "/v1/merchant/sessions",
                        json: #"{"email": "owner@bakery.example\u0000", "password": "\#(TestServer.password)"}"#))
                try expectNULRefused(
                    try await client.send(
                        .post, "/v1/wallets/registrations",
                        json: try WalletDevice().registration(email: "alex\u{0}@example.com")))
                // The dashboard's sign-in form.
                let form = "email=owner%00%40bakery.example&password=x&csrf=x"
                try expectNULRefused(
                    try await client.send(
                        .post, "/dashboard/sign-in", json: form,
                        headers: [.contentType: "application/x-www-form-urlencoded"]))

                // A backslash before "u0000" is text, not a NUL: that name is stored as written.
                let literal = try await client.sendSigned(
                    .post, "/v1/merchant/register-users", json: #"{"id": "043", "name": "A\\u0000"}"#, by: till.key,
                    time: now)
                #expect(literal.status == .created, "\(literal.text)")
            }
            #expect(try await server.ledger.registerUsers(of: merchant.id).map(\.name) == [#"A\u0000"#])
            #expect(try await server.ledger.merchants().count == 1)
            await server.ledger.close()
        }
    }
}
