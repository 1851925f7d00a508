import Foundation
import HorizonTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// `horizon-wallet cards add|list|update|remove` against a real `horizon-server serve`, all as
/// processes; the 3-D Secure challenge is answered with a form post while `cards add` waits.
@Suite("Cards with the programs", .serialized, .offTheCooperativePool)
struct CardsProgramTests {
    @Test func addWithAndWithout3DSecureListUpdateRemove() throws {
        let sandbox = try Sandbox()
        let serverDir = sandbox.path("server")
        let walletDir = sandbox.path("wallet")
        #expect(try Programs.run("horizon-server", ["init", "--data-dir", serverDir]).status == 0)
        let server = try ServedServer(dataDir: serverDir)
        defer { server.stop() }
        let url = server.url

        // Before registering, the wallet says where cards live.
        let unregistered = try Programs.run(
            "horizon-wallet", ["cards", "list", "--data-dir", sandbox.path("nowhere")])
        #expect(unregistered.status == 1)
        #expect(
            unregistered.standardError.contains("this wallet is not registered with a server"),
            "\(unregistered.standardError)")

        try Programs.registerWallet(walletDir: walletDir, serverDir: serverDir, url: url)
        let cvcFile = sandbox.path("cvc")
        try "123\n".write(toFile: cvcFile, atomically: true, encoding: .utf8)
        let common = [
            "--cardholder", "Alice Smith", "--expiry", "12/30", "--cvc-file", cvcFile, "--data-dir", walletDir,
        ]

        let added = try Programs.run(
            "horizon-wallet",
            ["cards", "add", "--number", "4242 4242 4242 4242", "--name", "Everyday", "--json"] + common)
        #expect(added.status == 0, "\(added.standardError)")
        let card = try json(added.standardOutput)
        let cardID = try #require(card["id"] as? String)
        #expect(card["lastFour"] as? String == "4242" && card["isReady"] as? Bool == true)

        // A bad number: the server's words, its code, and nothing added. The CVC from the environment.
        let refused = try Programs.run(
            "horizon-wallet",
            [
                "cards", "add", "--number", "4242 4242 4242 4241", "--cardholder", "A", "--expiry", "12/30",
                "--data-dir", walletDir,
            ],
            environment: ["HORIZON_WALLET_CARD_CVC": "123"])
        #expect(refused.status == 1)
        #expect(refused.standardError.contains("its check digit is wrong"), "\(refused.standardError)")
        #expect(refused.standardError.contains("card_number_invalid"), "\(refused.standardError)")

        // 3-D Secure: the link is printed while the command waits; a form post answers it.
        let output = sandbox.path("add-3ds.out")
        let waiting = try OutputToFile(
            Programs.url("horizon-wallet"),
            ["cards", "add", "--number", "4000 0000 0000 3220", "--wait", "60"] + common, output: output)
        let challengePrefix = url + "/v1/cards/3ds/challenge?MD="
        let printed = waiting.line(startingWith: challengePrefix, timeout: 30)
        let link = try #require(printed, "no link printed")
        let md = String(link.dropFirst(challengePrefix.count))
        let page = try HTTP.request(link)
        #expect(page.status == 200 && page.body.contains(#"id="approve""#), "\(page.body)")
        let answer = try HTTP.request(
            "\(url)/v1/cards/3ds/challenge/answer", form: "MD=\(md)&decision=approve")
        #expect(answer.status == 200, "\(answer.body)")
        let status = waiting.wait(timeout: 30)
        let text = waiting.text
        #expect(status == 0, "\(text) \(waiting.errors)")
        #expect(text.contains("This card needs 3-D Secure. Open this link in a browser"), "\(text)")
        #expect(
            text.contains("Added Visa •••• 3220, expires 12/30, Alice Smith (Visa •••• 3220), active; it can pay."),
            "\(text)")

        // With --json the link goes to standard error, and standard output is the card's JSON alone.
        let jsonOutput = sandbox.path("add-3ds-json.out")
        let jsonWaiting = try OutputToFile(
            Programs.url("horizon-wallet"),
            ["cards", "add", "--number", "4000 0000 0000 3220", "--wait", "60", "--json"] + common, output: jsonOutput)
        let jsonPrinted = jsonWaiting.line(startingWith: challengePrefix, timeout: 30, inErrors: true)
        let jsonLink = try #require(jsonPrinted, "no link printed on standard error: \(jsonWaiting.errors)")
        _ = try HTTP.request(
            "\(url)/v1/cards/3ds/challenge/answer",
            form: "MD=\(jsonLink.dropFirst(challengePrefix.count))&decision=approve")
        #expect(jsonWaiting.wait(timeout: 30) == 0, "\(jsonWaiting.errors)")
        let jsonCard = try json(jsonWaiting.text)
        #expect(
            jsonCard["lastFour"] as? String == "3220" && jsonCard["isReady"] as? Bool == true, "\(jsonWaiting.text)")

        let updated = try Programs.run(
            "horizon-wallet", ["cards", "update", cardID, "--active", "false", "--data-dir", walletDir])
        #expect(updated.status == 0, "\(updated.standardError)")
        #expect(updated.standardOutput.contains("(Everyday), inactive"), "\(updated.standardOutput)")
        let removed = try Programs.run("horizon-wallet", ["cards", "remove", cardID, "--data-dir", walletDir])
        #expect(
            removed.status == 0 && removed.standardOutput.contains("Removed card \(cardID)."),
            "\(removed.standardError)")
        let listed = try Programs.run("horizon-wallet", ["cards", "list", "--data-dir", walletDir, "--json"])
        let cards = try #require(
            try JSONSerialization.jsonObject(with: Data(listed.standardOutput.utf8)) as? [[String: Any]])
        #expect(cards.map { $0["lastFour"] as? String } == ["3220", "3220"])
        let again = try Programs.run("horizon-wallet", ["cards", "remove", cardID, "--data-dir", walletDir])
        #expect(again.status == 1 && again.standardError.contains("card_not_found"), "\(again.standardError)")
    }

    private func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "not JSON: \(text)")
    }
}

/// A program whose standard output and error go to files, so a test can read them while it runs.
final class OutputToFile {
    let process = Process()
    let path: String
    let errorPath: String

    init(_ executable: URL, _ arguments: [String], output: String) throws {
        path = output
        errorPath = output + ".err"
        for file in [path, errorPath] { _ = FileManager.default.createFile(atPath: file, contents: nil) }
        process.executableURL = executable
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errorPath))
        try process.runCheckingDescriptors()
    }

    var text: String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
    var errors: String { (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? "" }

    /// The first line of standard output (or, with `inErrors`, standard error) starting with `prefix`.
    func line(startingWith prefix: String, timeout: TimeInterval, inErrors: Bool = false) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let lines = (inErrors ? errors : text).split(separator: "\n")
            if let line = lines.first(where: { $0.hasPrefix(prefix) }) { return String(line) }
            if !process.isRunning { return nil }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return nil
    }

    func wait(timeout: TimeInterval) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return nil
        }
        return process.terminationStatus
    }
}

/// One HTTP request with URLSession, waited for on this (non-pool) thread.
enum HTTP {
    struct Response {
        let status: Int
        let body: String
    }

    static func request(_ url: String, form: String? = nil) throws -> Response {
        var request = URLRequest(url: try #require(URL(string: url)))
        if let form {
            request.httpMethod = "POST"
            request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(form.utf8)
        }
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var result: Response?
        URLSession.shared.dataTask(with: request) { data, response, _ in
            result = Response(
                status: (response as? HTTPURLResponse)?.statusCode ?? 0,
                body: String(decoding: data ?? Data(), as: UTF8.self))
            done.signal()
        }.resume()
        _ = done.wait(timeout: .now() + 30)
        return try #require(result, "no answer from \(url)")
    }
}
