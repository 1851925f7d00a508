import Crypto
import HorizonCore
import HorizonLink
import HorizonRadio
import Synchronization

/// Limits and choices of a secure link.
public struct SecureLinkConfiguration: Sendable {
    public var handshakeTimeout: HandshakeTimeout
    /// 1 (the default) enforces strictly increasing counters; see `ReplayWindow`.
    public var replayWindowSize: Int
    /// Records that fail authentication or replay checks are dropped; this many end the link.
    public var maximumRejectedRecords: Int

    public init(
        handshakeTimeout: HandshakeTimeout = HandshakeTimeout(), replayWindowSize: Int = 1,
        maximumRejectedRecords: Int = 8
    ) {
        self.handshakeTimeout = handshakeTimeout
        self.replayWindowSize = replayWindowSize
        self.maximumRejectedRecords = maximumRejectedRecords
    }
}

/// How a secure link ended.
public enum SecureLinkEnd: Error, Equatable, Sendable, CustomStringConvertible {
    case closed(LinkCloseReason)
    case linkFailed(LinkError)
    /// The secure channel refused the peer (handshake) or too many of its records.
    case rejected(SecureChannelError)

    public var description: String {
        switch self {
        case .closed(let reason): "link \(reason)"
        case .linkFailed(let error): "link failed: \(error)"
        case .rejected(let error): "secure channel refused the peer: \(error)"
        }
    }
}

/// What both sides learn when the handshake completes.
public struct SecureLinkEstablished: Sendable {
    /// The routing context the wallet bound into the handshake (the session id).
    public let context: [UInt8]
    /// The terminal's verified credential; nil on the terminal's own side.
    public let terminalCredential: TerminalCredential?
    /// The anchor that vouched for the terminal; nil on the terminal's own side.
    public let vouchingAnchor: TrustAnchor?
    public let transcriptHash: [UInt8]
    /// The short code both sides show, from this connection's shared secret (see
    /// `ConfirmationCode`).
    public let confirmationCode: ConfirmationCode
}

/// Six digits the wallet and the terminal each derive from their connection's ECDH secret
/// (HKDF-SHA256, salted with the transcript, with a label of its own) and show to the person.
///
/// What it proves: the phone and the register showing the same code are the two ends of one
/// secure connection. Nobody else can compute it, not even a relay that forwards every byte of
/// the handshake (the transcript travels in clear; the secret never does), so a fake register
/// relaying a distant terminal cannot show the code the phone shows; and a relay that runs a
/// handshake with each side gets two connections with two unrelated codes. Every connection gets
/// a new code. What it does not prove: anything about a person who does not compare the codes;
/// and six digits are a check for the eye, not a key (one guess in a million).
public struct ConfirmationCode: Hashable, Sendable, CustomStringConvertible {
    /// Six decimal digits, zero-padded.
    public let digits: String

    /// The code from bytes derived for it from a connection's shared secret (the first four are
    /// used).
    public init(derivedBytes: [UInt8]) {
        let value = derivedBytes.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        let number = String(value % 1_000_000)
        digits = String(repeating: "0", count: 6 - number.count) + number
    }

    /// "123 456": two groups of three read more easily off a screen.
    public var description: String { "\(digits.prefix(3)) \(digits.suffix(3))" }
}

public struct SecureLinkHandler: Sendable {
    public var onEstablished: @Sendable (SecureLinkEstablished) -> Void
    public var onMessage: @Sendable ([UInt8]) -> Void
    public var onEnd: @Sendable (SecureLinkEnd) -> Void

    public init(
        onEstablished: @escaping @Sendable (SecureLinkEstablished) -> Void,
        onMessage: @escaping @Sendable ([UInt8]) -> Void,
        onEnd: @escaping @Sendable (SecureLinkEnd) -> Void
    ) {
        self.onEstablished = onEstablished
        self.onMessage = onMessage
        self.onEnd = onEnd
    }
}

/// Why a message could not be sent on a secure link.
public enum SecureLinkSendError: Error, Equatable, Sendable, CustomStringConvertible {
    case notEstablished
    case ended
    case channel(SecureChannelError)
    case link(LinkError)

    public var description: String {
        switch self {
        case .notEstablished: "the secure handshake has not completed"
        case .ended: "the secure link has ended"
        case .channel(let error): error.description
        case .link(let error): error.description
        }
    }
}

/// A secure channel running over a message link: the handshake (with its deadline), then
/// encrypted, authenticated, replay-checked messages. Every callback runs on the link's scheduler.
public final class SecureLink: Sendable {
    private enum Phase {
        case initiating(HandshakeInitiator)
        case responding(HandshakeResponder)
        case established(SecureChannel)
        case ended
    }

    private struct State {
        var phase: Phase
        var rejectedRecords = 0
    }

    public let link: MessageLink
    public let configuration: SecureLinkConfiguration
    private let handler: SecureLinkHandler
    private let state: Mutex<State>

    private init(link: MessageLink, phase: Phase, configuration: SecureLinkConfiguration, handler: SecureLinkHandler) {
        self.link = link
        self.configuration = configuration
        self.handler = handler
        self.state = Mutex(State(phase: phase))
    }

    /// The wallet's side: sends the ClientHello and waits for the terminal.
    public static func initiate(
        over link: MessageLink, trustAnchors: [TrustAnchor], expectedTerminalKeyID: [UInt8]?, context: [UInt8],
        configuration: SecureLinkConfiguration = SecureLinkConfiguration(), handler: SecureLinkHandler
    ) throws(SecureChannelError) -> SecureLink {
        let initiator = try HandshakeInitiator(
            trustAnchors: trustAnchors, expectedTerminalKeyID: expectedTerminalKeyID, context: context,
            startedAt: link.scheduler.now, timeout: configuration.handshakeTimeout)
        let secure = SecureLink(
            link: link, phase: .initiating(initiator), configuration: configuration, handler: handler)
        secure.start()
        do {
            try link.send(initiator.clientHello)
        } catch {
            secure.end(.linkFailed(error), closeLink: true)
        }
        return secure
    }

    /// The terminal's side: waits for a wallet's ClientHello.
    public static func accept(
        over link: MessageLink, identity: TerminalIdentity,
        configuration: SecureLinkConfiguration = SecureLinkConfiguration(), handler: SecureLinkHandler
    ) -> SecureLink {
        let responder = HandshakeResponder(
            identity: identity, startedAt: link.scheduler.now, timeout: configuration.handshakeTimeout)
        let secure = SecureLink(
            link: link, phase: .responding(responder), configuration: configuration, handler: handler)
        secure.start()
        return secure
    }

    public var isEstablished: Bool {
        state.withLock { state in
            if case .established = state.phase { return true }
            return false
        }
    }

    /// Records dropped so far for failing authentication or the replay check.
    public var rejectedRecordCount: Int { state.withLock { $0.rejectedRecords } }

    public func send(_ plaintext: [UInt8]) throws(SecureLinkSendError) {
        let record: [UInt8] = try state.withLock { (state) throws(SecureLinkSendError) -> [UInt8] in
            switch state.phase {
            case .initiating, .responding: throw .notEstablished
            case .ended: throw .ended
            case .established(var channel):
                do throws(SecureChannelError) {
                    let record = try channel.seal(plaintext)
                    state.phase = .established(channel)
                    return record
                } catch {
                    throw .channel(error)
                }
            }
        }
        do {
            try link.send(record)
        } catch {
            throw .link(error)
        }
    }

    /// Closes the link; the handler hears `.closed(.closedLocally)`.
    public func close() { link.close() }

    private func start() {
        link.start(
            MessageLinkHandler(
                onMessage: { [self] message in receive(message) },
                onEnd: { [self] end in
                    switch end {
                    case .closed(let reason): self.end(.closed(reason), closeLink: false)
                    case .failed(let error): self.end(.linkFailed(error), closeLink: false)
                    }
                }))
        link.scheduler.schedule(after: configuration.handshakeTimeout.duration) { [self] in
            let pending = state.withLock { state in
                switch state.phase {
                case .initiating, .responding: true
                case .established, .ended: false
                }
            }
            if pending { end(.rejected(.handshakeTimedOut), closeLink: true) }
        }
    }

    private enum Step {
        case none
        case established(SecureLinkEstablished, reply: [UInt8]?)
        case message([UInt8])
        case fail(SecureLinkEnd)
    }

    private func receive(_ message: [UInt8]) {
        let now = link.scheduler.now
        let wallClock = link.scheduler.wallClock
        let step: Step = state.withLock { state in
            do throws(SecureChannelError) {
                switch state.phase {
                case .ended:
                    return .none
                case .initiating(var initiator):
                    let channel = try initiator.receiveServerHello(message, now: now, wallClock: wallClock)
                        .withReplayWindow(size: configuration.replayWindowSize)
                    state.phase = .established(channel)
                    return .established(Self.info(channel), reply: nil)
                case .responding(var responder):
                    let (reply, channel) = try responder.receiveClientHello(message, now: now)
                    state.phase = .established(channel.withReplayWindow(size: configuration.replayWindowSize))
                    return .established(Self.info(channel), reply: reply)
                case .established(var channel):
                    do throws(SecureChannelError) {
                        let plaintext = try channel.open(message)
                        state.phase = .established(channel)
                        return .message(plaintext)
                    } catch {
                        // A bad record is dropped; only a stream of them ends the link.
                        state.rejectedRecords += 1
                        return state.rejectedRecords >= configuration.maximumRejectedRecords
                            ? .fail(.rejected(error)) : .none
                    }
                }
            } catch {
                return .fail(.rejected(error))
            }
        }
        switch step {
        case .none: break
        case .message(let plaintext): handler.onMessage(plaintext)
        case .fail(let end): self.end(end, closeLink: true)
        case .established(let info, let reply):
            if let reply {
                do {
                    try link.send(reply)
                } catch {
                    end(.linkFailed(error), closeLink: true)
                    return
                }
            }
            handler.onEstablished(info)
        }
    }

    private static func info(_ channel: SecureChannel) -> SecureLinkEstablished {
        SecureLinkEstablished(
            context: channel.context, terminalCredential: channel.terminalCredential,
            vouchingAnchor: channel.vouchingAnchor, transcriptHash: channel.transcriptHash,
            confirmationCode: channel.confirmationCode)
    }

    private func end(_ end: SecureLinkEnd, closeLink: Bool) {
        let first = state.withLock { state in
            if case .ended = state.phase { return false }
            state.phase = .ended
            return true
        }
        guard first else { return }
        if closeLink { link.close() }
        handler.onEnd(end)
    }
}
