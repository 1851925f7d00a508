import Foundation

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
}

struct OutboxCodeError: Error { let text: String }
