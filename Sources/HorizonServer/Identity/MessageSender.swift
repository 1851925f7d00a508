import HorizonCore
import HorizonLedger

/// Where the server's one-time codes go (registration, restoration): SMS and mail in a real
/// deployment. The sandbox sender keeps them in the database's outbox, which
/// `horizon-server outbox` and the tests read.
public protocol MessageSender: Sendable {
    /// Sends `body`, which carries the one-time code of `registration` (valid until `expiresAt`);
    /// `time` is the server's clock.
    func send(
        _ channel: OutboxMessage.Channel, to recipient: String, subject: String, body: String,
        registration: RegistrationID, expiresAt: UnixTime, at time: UnixTime) async throws
}

/// The sandbox: every message lands in the outbox table, shared by all server processes. It
/// "delivers" a code by showing it while it can be used: the body is blanked once its
/// registration is used or locked, and the message deleted once the code expires, so the
/// database keeps no usable or used code in plain text.
public struct OutboxMessageSender: MessageSender {
    let ledger: Ledger
    public init(ledger: Ledger) { self.ledger = ledger }

    public func send(
        _ channel: OutboxMessage.Channel, to recipient: String, subject: String, body: String,
        registration: RegistrationID, expiresAt: UnixTime, at time: UnixTime
    ) async throws {
        try await ledger.enqueue(
            channel, to: recipient, subject: subject, body: body, registration: registration, expiresAt: expiresAt,
            at: time)
    }
}
