import Crypto
import Foundation
import HorizonAPI
import HorizonLedger
import HorizonTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// After cards are added to a real `horizon-server` process logging at trace
/// level, neither the SQLite database file, its WAL, nor the server's log holds a card number
/// or a CVC.
@Suite("Card numbers at rest", .serialized, .offTheCooperativePool)
struct CardsAtRestTests {
    static let cards: [(number: String, spaced: String, expiry: String, cvc: String)] = [
        ("4242424242424242", "4242 4242 4242 4242", "12/30", "987"),
        ("378282246310005", "3782 822463 10005", "11/31", "6543"),
        ("4000000000003220", "4000 0000 0000 3220", "10/32", "321"),
    ]

    @Test func noCardNumberOrCVCInTheDatabaseItsWALOrTheLog() async throws {
        let sandbox = try ServerSandbox()
        let data = sandbox.path("server")
        let initialised = try ServerProcess.run(["init", "--data-dir", data])
        #expect(initialised.status == 0, "\(initialised.errors)")
        // A registered wallet, written before the server starts (as registration would).
        let device = WalletDevice()
        let database = data + "/horizon.sqlite"
        let ledger = try await Ledger.sqlite(path: database)
        _ = try await ledger.createWallet(name: "Alice", publicKey: device.publicKeyBytes)
        await ledger.close()

        let server = try ServerProcess(["serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--log-level", "trace"])
        defer { server.kill() }
        let line = try #require(server.waitForOutput(prefix: "listening on http://127.0.0.1:", timeout: 20))
        let port = try #require(Int(line.dropFirst("listening on http://127.0.0.1:".count)), "\(line)")

        for card in Self.cards {
            let body = String(
                decoding: try JSONEncoder().encode([
                    "cardholder": "Alice Smith", "cardNumber": card.spaced, "expiry": card.expiry, "cvc": card.cvc,
                ]), as: UTF8.self)
            let authorization = try signedAuthorization(
                device.key, method: .post, path: "/v1/wallet/cards", body: body,
                time: Int64(Date().timeIntervalSince1970))
            let request =
                "POST /v1/wallet/cards HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
                + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n"
                + "Authorization: \(authorization)\r\n\r\n\(body)"
            let response = try await RawHTTP.exchange(port: port, Array(request.utf8))
            #expect(response.status == 201 || response.status == 202, "\(response.body)")
        }
        // Read while the server still runs, so the WAL holds what it wrote.
        let files = [database, database + "-wal"].filter { FileManager.default.fileExists(atPath: $0) }
        #expect(files.contains(database + "-wal"), "no WAL: the test would not look where recent writes are")
        var places: [(String, String)] = try files.map { path in
            (path, String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self))
        }
        server.signal(SIGTERM)
        #expect(server.wait(timeout: 10) == 0, "\(server.errors)")
        places.append(("the server's log", server.errors + server.output))
        #expect(server.errors.contains("POST /v1/wallet/cards 201"), "the log was not captured: \(server.errors)")
        #expect(server.errors.contains("trace"), "not logging at trace level")

        for (place, text) in places {
            for card in Self.cards {
                #expect(!text.contains(card.number), "\(place) holds the card number \(card.number)")
                #expect(!text.contains(card.spaced), "\(place) holds the card number \(card.spaced)")
                // A CVC is a few digits that random ids can contain by chance: look for it where
                // a leak would put it: next to its field name, as a JSON string, or on its own.
                for pattern in [
                    "cvc\\W{0,6}\(card.cvc)", "\"\(card.cvc)\"", "(?<![0-9A-Za-z])\(card.cvc)(?![0-9A-Za-z])",
                ] {
                    #expect(
                        text.range(of: pattern, options: [.regularExpression, .caseInsensitive]) == nil,
                        "\(place) holds the CVC \(card.cvc) (\(pattern))")
                }
            }
        }
        // Every stored value, read through SQL: none is a card number or a CVC.
        let reopened = try await Ledger.sqlite(path: database)
        let values = try await reopened.store.transaction { db in
            var values: [String] = []
            let tables = try await db.query("SELECT name FROM sqlite_master WHERE type = 'table'").map {
                try $0.text("name")
            }
            for table in tables {
                for row in try await db.query("SELECT * FROM \(table)") {
                    for column in row.columns {
                        if let text = try? row.optionalText(column) { values.append(text) }
                    }
                }
            }
            return values
        }
        await reopened.close()
        #expect(values.contains("Alice Smith"), "the cards were not stored at all")
        for card in Self.cards {
            #expect(!values.contains { $0.filter(\.isNumber).contains(card.number) }, "\(card.number) is stored")
            #expect(!values.contains(card.cvc), "the CVC \(card.cvc) is stored")
        }
    }
}
