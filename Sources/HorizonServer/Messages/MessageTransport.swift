import HorizonCore
import HorizonLedger

/// Why a message did not reach its mail or SMS system. Each reads as one sentence for the log
/// and `horizon-server outbox`.
public enum MessageDeliveryError: Error, Equatable, CustomStringConvertible {
    /// The message cannot be sent as it is (an unsafe header, an address that is none): never retried.
    case refused(String)
    /// The sendmail-style command could not be started.
    case commandNotRunnable(command: String, reason: String)
    /// It exited with a non-zero status; `stderr` is what it said, on one line.
    case commandFailed(command: String, status: Int32, stderr: String)
    /// It did not finish within the timeout and was stopped.
    case commandTimedOut(command: String, seconds: Int64)
    /// The SMS gateway answered with a status outside 2xx; `body` is the start of its answer.
    case gatewayRejected(status: Int, body: String)
    /// The SMS gateway could not be reached, or did not answer within the timeout.
    case gatewayUnreachable(String)

    /// A refusal stays one: trying again sends nothing.
    public var isPermanent: Bool { if case .refused = self { true } else { false } }

    public var description: String {
        switch self {
        case .refused(let reason): "the message was refused before sending: \(reason)"
        case .commandNotRunnable(let command, let reason): "the mail command \(command) could not be started: \(reason)"
        case .commandFailed(let command, let status, let stderr):
            "the mail command \(command) exited with status \(status)"
                + (stderr.isEmpty ? " and said nothing on standard error" : ": \(stderr)")
        case .commandTimedOut(let command, let seconds):
            "the mail command \(command) did not finish within \(seconds) s and was stopped"
        case .gatewayRejected(let status, let body):
            "the SMS gateway answered HTTP \(status)" + (body.isEmpty ? "" : ": \(body)")
        case .gatewayUnreachable(let reason): "the SMS gateway could not be reached: \(reason)"
        }
    }

    /// Text from a program or a server, on one line and short: it goes into a log line.
    static func oneLine(_ text: String, limit: Int = 500) -> String {
        let line = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }.joined(separator: "; ")
        let printable = String(line.unicodeScalars.filter { !MailAddress.isControl($0) })
        return printable.count > limit ? String(printable.prefix(limit)) + "…" : printable
    }
}

/// Hands one message to a mail or SMS system. The outbox delivery calls it after the message
/// was committed to the outbox, never inside a request's transaction.
public protocol MessageTransport: Sendable {
    func deliver(to recipient: String, subject: String, body: String, at time: UnixTime)
        async throws(MessageDeliveryError)
}

/// The transports the server delivers through, by channel; a channel without one stays in the
/// sandbox (its messages are read from the outbox, as in tests and demos).
public struct MessageTransports: Sendable {
    public var email: (any MessageTransport)?
    public var sms: (any MessageTransport)?

    public init(email: (any MessageTransport)? = nil, sms: (any MessageTransport)? = nil) {
        self.email = email
        self.sms = sms
    }

    public func transport(for channel: OutboxMessage.Channel) -> (any MessageTransport)? {
        switch channel {
        case .email: email
        case .sms: sms
        }
    }

    public var isEmpty: Bool { email == nil && sms == nil }
}
