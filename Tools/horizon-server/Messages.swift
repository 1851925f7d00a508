import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonLedger

/// `messages add|list|remove`: what the operator asks every wallet app to show (an outage, a
/// maintenance window), served by `GET /v1/status-messages` to the apps' `CustomStatusMessageManager`.
struct Messages: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Messages every wallet app shows (its CustomStatusMessageManager): add, list, remove.",
        subcommands: [Add.self, List.self, Remove.self])

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a message for every wallet app, shown from now (or --starts) until --ends or removal.")

        @OptionGroup var options: ServerOptions
        @Argument(help: "The title, 1 to 200 bytes (\"Payments are slow tonight\").") var title: String
        @Option(help: "The text under the title, at most 2000 bytes.") var body = ""
        @Option(help: "info, warning or critical.") var severity = "info"
        @Option(help: "Show it from this time (ISO 8601, e.g. 2026-12-01T22:00:00Z); default now.") var starts: String?
        @Option(help: "Stop showing it at this time (ISO 8601); default: until removed.") var ends: String?
        @Flag(help: "Print the message as JSON.") var json = false

        func validate() throws {
            guard StatusMessage.Severity(rawValue: severity) != nil else {
                throw ValidationError("--severity must be info, warning or critical, not \(severity)")
            }
            _ = try starts.map { try parseTime($0, option: "--starts") }
            _ = try ends.map { try parseTime($0, option: "--ends") }
        }

        func run() async throws {
            let severity = StatusMessage.Severity(rawValue: severity) ?? .info
            let startsAt = try starts.map { try parseTime($0, option: "--starts") }
            let endsAt = try ends.map { try parseTime($0, option: "--ends") }
            let message = try await withLedger(options) { ledger, _ in
                do {
                    return try await ledger.addStatusMessage(
                        severity: severity, title: title, body: body, startsAt: startsAt, endsAt: endsAt)
                } catch LedgerError.invalidArgument(let reason) {
                    throw CLIError(reason)
                }
            }
            if json { return try Console().json(MessageJSON(message)) }
            Console().line("Added message #\(message.id); wallet apps show it from \(dateText(message.startsAt)).")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List every stored message, oldest first, and whether apps show it now.")

        @OptionGroup var options: ServerOptions
        @Flag(help: "Print them as JSON.") var json = false

        func run() async throws {
            let messages = try await withLedger(options) { ledger, _ in try await ledger.statusMessages() }
            let now = Int64(Date().timeIntervalSince1970)
            let console = Console()
            if json { return try console.json(messages.map(MessageJSON.init)) }
            if messages.isEmpty { console.line("No messages: horizon-server messages add TITLE …") }
            for message in messages {
                let window =
                    "from \(dateText(message.startsAt))" + (message.endsAt.map { " until \(dateText($0))" } ?? "")
                console.line(
                    "#\(message.id) [\(message.severity.rawValue)] \(message.title)  \(window)\(message.isShown(at: now) ? "  (shown now)" : "")"
                )
                if !message.body.isEmpty { console.line("    \(message.body)") }
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a message: apps stop showing it.")

        @OptionGroup var options: ServerOptions
        @Argument(help: "The message's number, as `messages list` shows it.") var id: Int64

        func run() async throws {
            guard try await withLedger(options, { ledger, _ in try await ledger.removeStatusMessage(id) }) else {
                throw CLIError("there is no message #\(id); `horizon-server messages list` shows them")
            }
            Console().line("Removed message #\(id).")
        }
    }

    struct MessageJSON: Encodable {
        let messageId: Int64
        let severity: String
        let title: String
        let body: String
        let startsAt: Int64
        let endsAt: Int64?
        let createdAt: Int64

        init(_ message: StatusMessage) {
            messageId = message.id
            severity = message.severity.rawValue
            title = message.title
            body = message.body
            startsAt = message.startsAt
            endsAt = message.endsAt
            createdAt = message.createdAt
        }
    }
}

/// An ISO 8601 time as Unix seconds.
private func parseTime(_ text: String, option: String) throws -> Int64 {
    guard let date = ISO8601DateFormatter().date(from: text) else {
        throw ValidationError("\(option) must be an ISO 8601 time such as 2026-12-01T22:00:00Z, not \(text)")
    }
    return Int64(date.timeIntervalSince1970)
}
