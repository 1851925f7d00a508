import ArgumentParser
import HorizonCLISupport
import HorizonLedger

struct Outbox: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the messages the server sent or would have sent by SMS or mail, newest first.",
        discussion: """
            One-time codes for wallet registration and restoration land here instead of a phone or a mailbox. \
            A code is shown only while it can be used: once its registration is completed or locked the message \
            says the code was removed, and once the code expires the message is deleted. With mail or SMS delivery \
            configured (`serve --mail-from`, `--sms-gateway`), each message also says whether it was delivered, \
            when the next attempt is due and why the last one failed; a delivered code is removed too.
            """)

    @OptionGroup var options: ServerOptions

    @Option(help: "Only messages to this phone number or e-mail address.")
    var to: String?

    @Option(help: "At most this many messages (1 to 1000).")
    var limit = 20

    @Flag(help: "Print them as JSON.")
    var json = false

    func run() async throws {
        guard (1...1000).contains(limit) else { throw ValidationError("--limit must be 1 to 1000") }
        let messages = try await withLedger(options) { ledger, _ in
            try await ledger.purgeExpiredOutbox()
            return try await ledger.outbox(recipient: to, limit: limit)
        }
        let console = Console()
        if json {
            try console.json(
                messages.map {
                    MessageJSON(
                        messageId: $0.id, channel: $0.channel.rawValue, to: $0.recipient, subject: $0.subject,
                        body: $0.body,
                        createdAt: $0.createdAt, delivery: Self.state($0.delivery),
                        deliveredAt: $0.delivery.deliveredAt, deliveryAttempts: $0.delivery.attempts,
                        nextAttemptAt: $0.delivery.dueAt, deliveryError: $0.delivery.lastError)
                })
            return
        }
        if messages.isEmpty { console.line("The outbox is empty.") }
        for message in messages {
            console.line(
                "#\(message.id) \(dateText(message.createdAt)) \(message.channel.rawValue) to \(message.recipient): \(message.subject)"
            )
            console.line("    \(message.body)")
            let delivery = message.delivery
            switch Self.state(delivery) {
            case "delivered": console.line("    delivered \(dateText(delivery.deliveredAt ?? 0))")
            case "pending":
                console.line(
                    "    not delivered yet (attempt \(delivery.attempts + 1) due \(dateText(delivery.dueAt ?? 0)))"
                        + (delivery.lastError.map { "; last attempt: \($0)" } ?? ""))
            case "failed": console.line("    not delivered, given up: \(delivery.lastError ?? "no reason recorded")")
            default: break
            }
        }
    }

    /// `outbox` (the sandbox: the outbox is the delivery), `pending`, `delivered` or `failed` (given up).
    static func state(_ delivery: OutboxDelivery) -> String {
        if delivery.deliveredAt != nil { return "delivered" }
        if delivery.dueAt != nil { return "pending" }
        return delivery.attempts > 0 ? "failed" : "outbox"
    }

    struct MessageJSON: Encodable {
        let messageId: Int64
        let channel: String
        let to: String
        let subject: String
        let body: String
        let createdAt: Int64
        let delivery: String
        let deliveredAt: Int64?
        let deliveryAttempts: Int64
        let nextAttemptAt: Int64?
        let deliveryError: String?
    }
}
