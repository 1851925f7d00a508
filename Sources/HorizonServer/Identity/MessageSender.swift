import HorizonLedger

/// Where the server's one-time codes go (registration, restoration): SMS and mail in a real
/// deployment. The sandbox sender keeps them in the database's outbox, which
/// `horizon-server outbox` and the tests read.
public protocol MessageSender: Sendable {
    func send(_ channel: OutboxMessage.Channel, to recipient: String, subject: String, body: String) async throws
}

/// The sandbox: every message lands in the outbox table, shared by all server processes.
public struct OutboxMessageSender: MessageSender {
    let ledger: Ledger
    public init(ledger: Ledger) { self.ledger = ledger }

    public func send(_ channel: OutboxMessage.Channel, to recipient: String, subject: String, body: String) async throws
    {
        try await ledger.enqueue(channel, to: recipient, subject: subject, body: body)
    }
}
