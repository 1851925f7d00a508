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

    /// Whether a message on `channel` is handed to a transport; otherwise the outbox keeps it
    /// (the sandbox). For a message queued in another transaction, such as a receipt.
    func delivers(_ channel: OutboxMessage.Channel) -> Bool

    /// A message was committed to the outbox by another transaction: deliver it now.
    func queued()
}

extension MessageSender {
    public func delivers(_ channel: OutboxMessage.Channel) -> Bool { false }
    public func queued() {}
}

/// The outbox: every message lands in the outbox table, shared by all server processes.
///
/// In the sandbox (no transport configured for the channel) that is the delivery: it
/// "delivers" a code by showing it while it can be used, to `horizon-server outbox` and the
/// tests. The body is blanked once its registration is used or locked, and the message deleted
/// once the code expires, so the database keeps no usable or used code in plain text.
///
/// With a transport for the channel (mail through sendmail, SMS through a gateway), the outbox
/// is the durable record the `OutboxDeliverer` delivers from, after this commit and apart from
/// the request: a slow or failing mail system neither holds nor fails a registration.
public struct OutboxMessageSender: MessageSender {
    let ledger: Ledger
    let deliverer: OutboxDeliverer?

    public init(ledger: Ledger, deliverer: OutboxDeliverer? = nil) {
        self.ledger = ledger
        self.deliverer = deliverer
    }

    public func send(
        _ channel: OutboxMessage.Channel, to recipient: String, subject: String, body: String,
        registration: RegistrationID, expiresAt: UnixTime, at time: UnixTime
    ) async throws {
        let deliver = deliverer?.delivers(channel) == true
        try await ledger.enqueue(
            channel, to: recipient, subject: subject, body: body, registration: registration, expiresAt: expiresAt,
            deliver: deliver, at: time)
        if deliver { deliverer?.wake() }
    }

    public func delivers(_ channel: OutboxMessage.Channel) -> Bool { deliverer?.delivers(channel) == true }

    public func queued() { deliverer?.wake() }
}
