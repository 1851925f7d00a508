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

    /// The newest message `horizon-server outbox` shows for `recipient`.
    static func outboxBody(serverDir: String, to recipient: String) throws -> String {
        let outbox = try run("horizon-server", ["outbox", "--data-dir", serverDir, "--to", recipient, "--json"])
        let messages = try JSONSerialization.jsonObject(with: Data(outbox.standardOutput.utf8)) as? [[String: Any]]
        guard outbox.status == 0, let body = messages?.first?["body"] as? String else {
            throw OutboxCodeError(text: "nothing for \(recipient): \(outbox.standardOutput)\(outbox.standardError)")
        }
        return body
    }

    /// The activation link of the newest mail to `email`.
    static func outboxLink(serverDir: String, to email: String) throws -> String {
        let body = try outboxBody(serverDir: serverDir, to: email)
        guard
            let link = body.split(whereSeparator: \.isWhitespace).first(where: {
                $0.contains("/v1/wallets/activation?")
            })
        else { throw OutboxCodeError(text: "no activation link for \(email): \(body)") }
        return String(link)
    }

    /// The reactivation token of the newest mail to `email` (its 43 characters).
    static func outboxToken(serverDir: String, to email: String) throws -> String {
        let body = try outboxBody(serverDir: serverDir, to: email)
        guard let token = body.split(whereSeparator: \.isWhitespace).first(where: { $0.count == 43 }) else {
            throw OutboxCodeError(text: "no reactivation token for \(email): \(body)")
        }
        return String(token)
    }

    /// A person's wallet registration, as far as what was sent: `horizon-wallet register` in
    /// `walletDir` with the server at `url`, then the PUK texted and the activation link mailed,
    /// read from the server's outbox in `serverDir`.
    static func startWalletRegistration(
        walletDir: String, serverDir: String, url: String, name: String = "Alice", email: String = "alice@example.com"
    ) throws -> (puk: String, link: String) {
        let register = try run(
            "horizon-wallet",
            [
                "register", "--server", url, "--name", name, "--email", email, "--phone", "+49 151 12345678",
                "--data-dir", walletDir,
            ])
        guard register.status == 0 else { throw OutboxCodeError(text: "register failed: \(register.standardError)") }
        return (
            try outboxCode(serverDir: serverDir, to: "+4915112345678"), try outboxLink(serverDir: serverDir, to: email)
        )
    }

    /// A wallet registered and active, the server's anchor pinned by the fingerprint
    /// `horizon-server anchor` prints: what a person does with `register`, `verify PUK`, the
    /// mailed link, then `activation-status`.
    static func registerWallet(
        walletDir: String, serverDir: String, url: String, name: String = "Alice", email: String = "alice@example.com"
    ) throws {
        let sent = try startWalletRegistration(
            walletDir: walletDir, serverDir: serverDir, url: url, name: name, email: email)
        let verify = try run("horizon-wallet", ["verify", sent.puk, "--data-dir", walletDir])
        guard verify.status == 0 else { throw OutboxCodeError(text: "verify failed: \(verify.standardError)") }
        let status = try run(
            "horizon-wallet",
            [
                "activation-status", "--confirm-link", sent.link, "--anchor-fingerprint",
                try anchorFingerprint(serverDir: serverDir), "--data-dir", walletDir,
            ])
        guard status.status == 0, status.standardOutput.contains("Wallet registered") else {
            throw OutboxCodeError(text: "activation-status failed: \(status.standardOutput)\(status.standardError)")
        }
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
