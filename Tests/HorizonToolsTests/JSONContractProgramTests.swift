import Foundation
import HorizonCLISupport
import HorizonTestSupport
import Testing

/// Every `--json` of the three programs read with the types they print with: money only as
/// `JSONMoney`, ids only in the API's spelling (`paymentId`, 32 hex digits), failures only as
/// the API's error envelope with a code of its vocabulary. Any other shape fails.
@Suite("One JSON contract for every --json", .serialized, .offTheCooperativePool)
struct JSONContractProgramTests {
    @Test func theSandboxTerminalAndWalletPrintTheOneContract() throws {
        let sandbox = try Sandbox()
        let (terminalDir, walletDir, socket) = try sandbox.initializeTerminalAndWallet()
        try Contract.expectObject(
            try Programs.run("horizon-terminal", ["init", "--json", "--data-dir", sandbox.path("t2")]), "terminal init")
        try Contract.expectObject(
            try Programs.run(
                "horizon-wallet",
                ["init", "--json", "--data-dir", sandbox.path("w2"), "--trust", terminalDir + "/anchor.pub"]),
            "wallet init")
        func terminal(_ arguments: [String]) throws -> ProgramResult {
            try Programs.run("horizon-terminal", arguments + ["--data-dir", terminalDir])
        }

        let register = try Programs.start(
            "horizon-terminal",
            ["pay", "12.50", "--json", "--data-dir", terminalDir, "--radio-socket", socket, "--wait-for-wallet", "30"])
        let wallet = try Programs.run(
            "horizon-wallet",
            [
                "pay", "--tip", "1.50", "--yes", "--json", "--data-dir", walletDir, "--radio-socket", socket,
                "--timeout", "30",
            ])
        let sale = try Contract.expectObject(register.finish(), "terminal pay")
        let receipt = try Contract.expectObject(wallet, "wallet pay")
        #expect(Contract.money(sale["total"]) == JSONMoney(minorUnits: 14_00, currency: "EUR", formatted: "14.00 EUR"))
        #expect(Contract.money(receipt["tip"])?.formatted == "1.50 EUR")
        let paymentID = try #require(sale["paymentId"] as? String)
        #expect(receipt["paymentId"] as? String == paymentID)

        let refund = try Contract.expectObject(
            try terminal(["refund", paymentID, "--amount", "1.00", "--json"]), "refund")
        #expect(Contract.money(refund["amount"])?.minorUnits == 1_00)
        let page = try Contract.expectObject(try terminal(["transactions", "--json"]), "transactions")
        #expect((page["transactions"] as? [[String: Any]])?.first?["paymentId"] as? String == paymentID)
        try Contract.expectArray(try terminal(["journal", "--json"]), "journal")
        try Contract.expectObject(
            try terminal(["status", "--json", "--seconds", "1", "--radio-socket", socket]), "status")
        try Contract.expectArray(try terminal(["register-users", "list", "--json"]), "register-users list")
        try Contract.expectObject(
            try terminal(["programs", "show", "--json", "--wallet-dir", walletDir]), "programs show")
        try Contract.expectObject(
            try Programs.run("horizon-wallet", ["history", "--json", "--data-dir", walletDir]), "wallet history")

        // Failures: the error object on standard output, the exit code kept.
        let badAmount = try Contract.expectError(try terminal(["pay", "abc", "--json"]), "pay abc")
        #expect(badAmount.status != 0)
        let unknown = try Contract.expectError(
            try terminal(["refund", String(repeating: "ab", count: 16), "--json"]), "refund of an unknown payment")
        #expect(unknown.status == 1 && unknown.envelope.error.code == JSONErrorCode.commandFailed)
        let usage = try Contract.expectError(
            try terminal(["transactions", "--limit", "0", "--json"]), "transactions --limit 0")
        #expect(usage.status == 2 && usage.envelope.error.code == JSONErrorCode.invalidRequest)
        try Contract.expectError(
            try Programs.run("horizon-wallet", ["balance", "--json", "--data-dir", walletDir]), "sandbox wallet balance"
        )
    }

    @Test func theProgramsAtAServerPrintTheOneContractAndTheServerListsRefunds() throws {
        let rig = try RemoteLedgerRig()
        let paid = try rig.pay("5.00", walletTimeout: 30)
        paid.expectPaid()
        let sale = try Contract.object(String(paid.terminal.standardOutput.drop(while: { $0 != "{" })), "terminal pay")
        let paymentID = try #require(sale["paymentId"] as? String)
        if let wallet = paid.wallet {
            try Contract.object(String(wallet.standardOutput.drop(while: { $0 != "{" })), "wallet pay")
        }
        func terminal(_ arguments: [String]) throws -> ProgramResult {
            try Programs.run("horizon-terminal", arguments + ["--data-dir", rig.terminalDir])
        }
        func wallet(_ arguments: [String]) throws -> ProgramResult {
            try Programs.run("horizon-wallet", arguments + ["--data-dir", rig.walletDir])
        }
        func server(_ arguments: [String]) throws -> ProgramResult {
            try Programs.run("horizon-server", arguments + ["--data-dir", rig.serverDir])
        }

        let admin = ["--admin-email", RemoteLedgerRig.email, "--password-file", rig.sandbox.path("password")]
        try Contract.expectObject(try terminal(["refund", paymentID, "--amount", "1.50", "--json"] + admin), "refund")
        try Contract.expectObject(try terminal(["transactions", "--json"]), "transactions at the server")
        let details = try Contract.expectObject(try terminal(["transactions", paymentID, "--json"]), "one transaction")
        #expect(Contract.money(details["refundable"])?.formatted == "3.50 EUR")
        try Contract.expectObject(try terminal(["programs", "--json"]), "programs")
        try Contract.expectObject(try wallet(["balance", "--json"]), "wallet balance")
        try Contract.expectObject(try wallet(["token", "--json"]), "wallet token")
        try Contract.expectObject(try wallet(["history", "--json"]), "wallet history")
        try Contract.expectArray(try server(["wallets", "list", "--json"]), "server wallets list")
        for command in ["account", "points", "coupons", "memberships"] {
            try Contract.expectObject(try wallet([command, "--json"]), "wallet \(command)")
        }
        try Contract.expectObject(try server(["anchor", "--json"]), "server anchor")
        try Contract.expectArray(try server(["outbox", "--json"]), "server outbox")
        try Contract.expectArray(try server(["messages", "list", "--json"]), "server messages list")
        try Contract.expectArray(try server(["merchants", "list", "--json"]), "server merchants list")
        try Contract.expectArray(try server(["terminals", "list", "--json"]), "server terminals list")

        // The server's list shows the refund with its payment, in JSON and in text.
        let listed = try Contract.expectObject(try server(["transactions", "--json"]), "server transactions")
        let row = try #require(
            (listed["transactions"] as? [[String: Any]])?.first { $0["paymentId"] as? String == paymentID })
        #expect(Contract.money(row["refunded"])?.formatted == "1.50 EUR")
        let refunds = try #require(row["refunds"] as? [[String: Any]])
        #expect(refunds.compactMap { Contract.money($0["amount"])?.minorUnits } == [1_50])
        let text = try server(["transactions"])
        #expect(text.standardOutput.contains("    refunded 1.50 EUR on "), "\(text.standardOutput)")

        // The server's refusal reaches the cashier with the API's own code.
        let tooMuch = try Contract.expectError(
            try terminal(["refund", paymentID, "--amount", "9.00", "--json"] + admin), "refund beyond the payment")
        #expect(tooMuch.status == 1 && tooMuch.envelope.error.code == "refund_exceeds_remaining")
    }
}

/// The contract's checks, over the objects `JSONSerialization` reads.
enum Contract {
    /// Keys whose values are money: one `JSONMoney`, or an array of them.
    static let moneyKeys: Set<String> = [
        "amount", "tip", "total", "refunded", "refundable", "balances", "allowance", "remaining", "offlineAllowance",
        "storedTotals", "sandboxStartingBalance",
    ]
    /// The id keys and the form of their values.
    static let hexIDKeys: Set<String> = ["paymentId"]

    /// The error codes a `--json` failure may carry: the HTTP API's (its source, read here so
    /// that a new API code is known at once) and the programs' own.
    static let errorCodes: Set<String> = {
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/HorizonServer/HTTP/APIError.swift")
        let text = (try? String(contentsOf: source, encoding: .utf8)) ?? ""
        var codes: Set<String> = [
            JSONErrorCode.invalidRequest, JSONErrorCode.commandFailed, JSONErrorCode.radioUnavailable,
            JSONErrorCode.transactionFailed,
        ]
        for line in text.split(separator: "\n") where line.contains("case ") && line.contains(" = \"") {
            if let code = line.split(separator: "\"").dropFirst().first { codes.insert(String(code)) }
        }
        return codes
    }()

    static func money(_ value: Any?) -> JSONMoney? { JSONShapes.money(value) }

    @discardableResult
    static func expectObject(
        _ result: ProgramResult, _ what: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> [String: Any] {
        #expect(result.status == 0, "\(what): \(result.standardError)", sourceLocation: sourceLocation)
        return try object(result.standardOutput, what, sourceLocation: sourceLocation)
    }

    @discardableResult
    static func object(
        _ text: String, _ what: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> [String: Any] {
        let value = try JSONSerialization.jsonObject(with: Data(text.utf8))
        let object = try #require(
            value as? [String: Any], "\(what): not an object: \(text)", sourceLocation: sourceLocation)
        check(object, path: what, sourceLocation: sourceLocation)
        return object
    }

    static func expectArray(
        _ result: ProgramResult, _ what: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        #expect(result.status == 0, "\(what): \(result.standardError)", sourceLocation: sourceLocation)
        let value = try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8))
        let array = try #require(value as? [Any], "\(what): not an array", sourceLocation: sourceLocation)
        check(array, path: what, sourceLocation: sourceLocation)
    }

    /// A failed command: exit code other than 0 and exactly the error envelope on standard output.
    @discardableResult
    static func expectError(
        _ result: ProgramResult, _ what: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> (status: Int32, envelope: JSONErrorEnvelope) {
        #expect(result.status != 0, "\(what) succeeded", sourceLocation: sourceLocation)
        let data = Data(result.standardOutput.utf8)
        let envelope = try JSONDecoder().decode(JSONErrorEnvelope.self, from: data)
        let keys = (try JSONSerialization.jsonObject(with: data) as? [String: Any]).map { Set($0.keys) }
        #expect(keys == ["error"], "\(what): \(result.standardOutput)", sourceLocation: sourceLocation)
        #expect(
            errorCodes.contains(envelope.error.code), "\(what): unknown code \(envelope.error.code)",
            sourceLocation: sourceLocation)
        #expect(!envelope.error.message.isEmpty, sourceLocation: sourceLocation)
        return (result.status, envelope)
    }

    /// Walks every value: money keys hold `JSONMoney` exactly, ids use the API's spelling.
    static func check(_ value: Any, path: String, sourceLocation: SourceLocation) {
        if let array = value as? [Any] {
            for (index, element) in array.enumerated() {
                check(element, path: "\(path)[\(index)]", sourceLocation: sourceLocation)
            }
            return
        }
        guard let object = value as? [String: Any] else { return }
        for (key, element) in object {
            let here = "\(path).\(key)"
            #expect(!key.hasSuffix("ID"), "\(here): ids are spelled …Id", sourceLocation: sourceLocation)
            // A bare `id` only where the API has one (a card, a register user): a listed
            // merchant, terminal, wallet or message names its id.
            #expect(
                key != "id" || (element as? String).map { $0.hasPrefix("c_") || !$0.contains("_") } == true,
                "\(here): an id names what it identifies (merchantId, …)", sourceLocation: sourceLocation)
            #expect(!key.hasSuffix("MinorUnits"), "\(here): money is a JSONMoney", sourceLocation: sourceLocation)
            if moneyKeys.contains(key) {
                let amounts = (element as? [Any]) ?? [element]
                for amount in amounts {
                    let keys = (amount as? [String: Any]).map { Set($0.keys) }
                    let decoded = money(amount)
                    #expect(
                        keys == ["minorUnits", "currency", "formatted"] && decoded != nil,
                        "\(here): not a JSONMoney: \(amount)", sourceLocation: sourceLocation)
                    if let decoded {
                        #expect(
                            decoded.formatted.hasSuffix(" \(decoded.currency)"), "\(here): \(decoded.formatted)",
                            sourceLocation: sourceLocation)
                    }
                }
                continue
            }
            if hexIDKeys.contains(key) {
                let id = element as? String ?? ""
                #expect(
                    id.count == 32 && id.allSatisfy { "0123456789abcdef".contains($0) },
                    "\(here): \(id) is not 32 lower-case hex digits", sourceLocation: sourceLocation)
            }
            check(element, path: here, sourceLocation: sourceLocation)
        }
    }
}
