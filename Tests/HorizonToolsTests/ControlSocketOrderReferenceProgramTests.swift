import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport
import HorizonTestSupport
import HorizonUnixSocket
import Testing

/// `pay AMOUNT --reference REF` and `status REF` on `serve`'s register socket: the merchant's
/// order reference travels with the sale into the journal, the answer and `transactions`, finds
/// the sale again, and cannot start a second sale of the same order.
@Suite("Order references on the register socket", .offTheCooperativePool)
struct ControlSocketOrderReferenceProgramTests {
    /// Every line the service answers `request` with.
    private func answer(_ request: String, at control: String) throws -> [String] {
        try answer(bytes: Array((request + "\n").utf8), at: control)
    }

    private func answer(bytes: [UInt8], at control: String) throws -> [String] {
        let connection = try LineConnection.connect(to: control)
        connection.setReadTimeout(seconds: 20)
        _ = UnixSocket.writeAll(bytes, to: connection.descriptor)
        var lines: [String] = []
        while let line = connection.readLine() { lines.append(line) }
        return lines
    }

    @Test func aReferencedSaleIsJournaledListedFoundByItsReferenceAndNotSoldTwice() async throws {
        let sandbox = try Sandbox()
        let (terminalDir, walletDir, socket) = try sandbox.initializeTerminalAndWallet()
        let control = sandbox.path("control.sock")
        let service = try startService(terminalDir: terminalDir, socket: socket, control: control)
        defer { stop(service) }
        #expect(await eventually { paymentState(at: control) == "idle" }, "the service answers")
        func walletPays() throws {
            let wallet = try Programs.run(
                "horizon-wallet",
                ["pay", "--yes", "--data-dir", walletDir, "--radio-socket", socket, "--timeout", "30"])
            #expect(wallet.status == 0, "\(wallet.standardError)")
        }

        // Bad references: one line each, and no sale starts.
        let overLong = String(repeating: "x", count: 101)
        for request in [
            "pay 5 --reference", "pay 5 --reference \(overLong)", "pay 5 --reference A --reference B",
            "pay 5 --reference ORD\u{7}ER", "pay 5 --reference ORD\u{202E}ER",
        ] {
            let lines = try answer(request, at: control)
            #expect(lines.count == 1 && lines.first?.hasPrefix("failed ") == true, "\(request): \(lines)")
            #expect(paymentState(at: control) == "idle", "\(request) started a sale")
        }
        // Bytes that are not UTF-8 are not taken for a reference.
        let badBytes = try answer(bytes: Array("pay 5 --reference ORD".utf8) + [0xFF, 0xFE] + [10], at: control)
        #expect(badBytes == ["failed not an order reference: \(OrderReferenceRule.text)"], "\(badBytes)")
        #expect(paymentState(at: control) == "idle")

        // A sale with a reference, through `pay --control-socket`: the reference comes back.
        let register = try Programs.start(
            "horizon-terminal",
            ["pay", "7.25", "--reference", "ORDER-1", "--register", "Ana", "--control-socket", control, "--json"])
        defer { stop(register) }
        #expect(await eventually { paymentState(at: control) == "waiting for a wallet" })
        // The same order again while its sale runs: refused, saying why.
        #expect(
            try answer("pay 7.25 --reference ORDER-1", at: control) == [
                "failed a sale with reference ORDER-1 is already in progress (status ORDER-1)"
            ])
        try walletPays()
        let paid = register.finish(timeout: 30)
        #expect(paid.status == 0, "\(paid.standardError)")
        let summary = try JSONSerialization.jsonObject(with: Data(paid.standardOutput.utf8)) as? [String: Any]
        let id = try #require(summary?["paymentId"] as? String, "\(paid.standardOutput)")
        #expect(summary?["orderReference"] as? String == "ORDER-1", "\(paid.standardOutput)")

        // `status REF` and `status ID` name the same sale, its reference and cashier.
        let status = try answer("status ORDER-1", at: control)
        #expect(status.first == "id \(id)", "\(status)")
        #expect(status.contains("reference ORDER-1") && status.contains("register Ana"), "\(status)")
        #expect(status.contains("source journal"), "\(status)")
        #expect(status.last == "result paid 7.25 0.00 7.25", "\(status)")
        #expect(try answer("status \(id)", at: control) == status)
        // A paid order is not sold again.
        #expect(
            try answer("pay 7.25 --reference ORDER-1", at: control) == [
                "failed reference ORDER-1 was already paid (payment \(id)); see status ORDER-1"
            ])
        #expect(paymentState(at: control) == "idle")

        // Another order's sale (the register socket's own words, the reference first or last).
        let second = Task { try answer("pay 3 Ben --reference ORDER-2", at: control) }
        #expect(await eventually { paymentState(at: control) == "waiting for a wallet" })
        try walletPays()
        let secondLines = try await second.value
        let secondPaid = try #require(secondLines.last, "\(secondLines)")
        #expect(secondPaid.hasPrefix("paid ") && secondPaid.hasSuffix(" ORDER-2"), "\(secondLines)")
        let secondID = String(secondPaid.split(separator: " ")[1])
        #expect(secondID != id)
        // Each reference finds its own sale, not the other's.
        #expect(try answer("status ORDER-1", at: control).first == "id \(id)")
        let secondStatus = try answer("status ORDER-2", at: control)
        #expect(secondStatus.first == "id \(secondID)" && secondStatus.contains("register Ben"), "\(secondStatus)")
        #expect(!secondStatus.contains("reference ORDER-1"))

        // Unknown and malformed: one error line.
        #expect(
            try answer("status ORDER-404", at: control) == [
                "error unknown order reference ORDER-404: no payment with it here"
            ])
        #expect(
            try answer("status \(overLong)", at: control) == [
                "error not a payment id (32 hexadecimal digits) nor an order reference (\(OrderReferenceRule.text))"
            ])

        // `transactions` lists each sale with its order reference, as text and JSON.
        let listed = try Programs.run("horizon-terminal", ["transactions", "--json", "--data-dir", terminalDir])
        #expect(listed.status == 0, "\(listed.standardError)")
        let page = try JSONSerialization.jsonObject(with: Data(listed.standardOutput.utf8)) as? [String: Any]
        let rows = try #require(page?["transactions"] as? [[String: Any]], "\(listed.standardOutput)")
        let references = Dictionary(
            uniqueKeysWithValues: rows.compactMap { row in
                (row["paymentId"] as? String).map { ($0, row["orderReference"] as? String ?? "") }
            })
        #expect(references[id] == "ORDER-1" && references[secondID] == "ORDER-2", "\(listed.standardOutput)")
        let text = try Programs.run("horizon-terminal", ["transactions", "--data-dir", terminalDir])
        #expect(text.standardOutput.contains("payment \(id)  order ORDER-1"), "\(text.standardOutput)")

        // `status REF` as a command, text and JSON; unknown ones fail with the API's code.
        let shown = try Programs.run(
            "horizon-terminal", ["status", "ORDER-2", "--control-socket", control, "--json"])
        #expect(shown.status == 0, "\(shown.standardError)")
        let object = try JSONSerialization.jsonObject(with: Data(shown.standardOutput.utf8)) as? [String: String]
        #expect(object?["id"] == secondID && object?["registerUser"] == "Ben", "\(shown.standardOutput)")
        #expect(object?["result"] == "paid 3.00 0.00 3.00", "\(shown.standardOutput)")
        let unknown = try Programs.run(
            "horizon-terminal", ["status", "ORDER-404", "--control-socket", control, "--json"])
        #expect(
            unknown.status == 1 && unknown.standardOutput.contains("payment_not_found"), "\(unknown.standardOutput)")

        kill(service.process.processIdentifier, SIGTERM)
        #expect(await eventually(within: .seconds(30)) { !service.process.isRunning })
        // After the service, the command reads the journal itself.
        let direct = try Programs.run("horizon-terminal", ["status", "ORDER-1", "--data-dir", terminalDir])
        #expect(direct.status == 0 && direct.standardOutput.contains("id \(id)"), "\(direct.standardOutput)")
        let help = try Programs.run("horizon-terminal", ["serve", "--help"])
        #expect(help.standardOutput.contains("--reference REF"), "\(help.standardOutput)")
        #expect(help.standardOutput.contains("status ID|REF"), "\(help.standardOutput)")
        let payHelp = try Programs.run("horizon-terminal", ["pay", "--help"])
        #expect(payHelp.standardOutput.contains("--reference"), "\(payHelp.standardOutput)")
    }
}

/// The rule as the terminal states it (`OrderReference.rule`).
enum OrderReferenceRule {
    static let text = "a reference is 1 to 100 characters of printable text without spaces"
}
