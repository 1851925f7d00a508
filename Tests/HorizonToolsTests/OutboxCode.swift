import Foundation
import Testing

extension Programs {
    /// The newest one-time code `horizon-server outbox` shows for `recipient` (a phone number
    /// or an e-mail address): a registration sends one to each.
    static func outboxCode(serverDir: String, to recipient: String) throws -> String {
        let outbox = try run("horizon-server", ["outbox", "--data-dir", serverDir, "--to", recipient, "--json"])
        let messages = try JSONSerialization.jsonObject(with: Data(outbox.standardOutput.utf8)) as? [[String: Any]]
        guard outbox.status == 0, let body = messages?.first?["body"] as? String,
            let code = body.split(whereSeparator: { !$0.isNumber }).first(where: { $0.count == 8 })
        else {
            throw OutboxCodeError(text: "no code for \(recipient): \(outbox.standardOutput)\(outbox.standardError)")
        }
        return String(code)
    }

    /// A person's wallet registration, as far as the codes: `horizon-wallet register` in
    /// `walletDir` with the server at `url`, then the code sent to each channel, read from the
    /// server's outbox in `serverDir`.
    static func startWalletRegistration(
        walletDir: String, serverDir: String, url: String, name: String = "Alice", email: String = "alice@example.com"
    ) throws -> (sms: String, email: String) {
        let register = try run(
            "horizon-wallet",
            [
                "register", "--server", url, "--name", name, "--email", email, "--phone", "+49 151 12345678",
                "--data-dir", walletDir,
            ])
        guard register.status == 0 else { throw OutboxCodeError(text: "register failed: \(register.standardError)") }
        return (
            try outboxCode(serverDir: serverDir, to: "+4915112345678"), try outboxCode(serverDir: serverDir, to: email)
        )
    }

    /// A wallet registered and verified, the server's anchor pinned by the fingerprint
    /// `horizon-server anchor` prints: what a person does with `register` then `verify`.
    static func registerWallet(
        walletDir: String, serverDir: String, url: String, name: String = "Alice", email: String = "alice@example.com"
    ) throws {
        let codes = try startWalletRegistration(
            walletDir: walletDir, serverDir: serverDir, url: url, name: name, email: email)
        let verify = try run(
            "horizon-wallet",
            [
                "verify", codes.sms, codes.email, "--anchor-fingerprint", try anchorFingerprint(serverDir: serverDir),
                "--data-dir", walletDir,
            ])
        guard verify.status == 0 else { throw OutboxCodeError(text: "verify failed: \(verify.standardError)") }
    }
}

struct OutboxCodeError: Error, CustomStringConvertible {
    let text: String
    var description: String { text }
}

/// `horizon-server serve` on a free loopback port, as the programs under test reach it; `stop`
/// ends it with Ctrl-C, as an operator would (once; later calls do nothing).
final class ServedServer {
    let port: Int
    var url: String { "http://127.0.0.1:\(port)" }
    private let program: RunningProgram
    private var stopped = false

    init(dataDir: String) throws {
        port = try freeLoopbackPort()
        program = try Programs.start(
            "horizon-server",
            ["serve", "--data-dir", dataDir, "--listen", "127.0.0.1:\(port)", "--log-level", "warning"])
        #expect(waitUntilListening(port: port), "the server did not start listening")
    }

    func stop() {
        guard !stopped else { return }
        stopped = true
        program.interrupt()
        _ = program.finish(timeout: 10)
    }
}
