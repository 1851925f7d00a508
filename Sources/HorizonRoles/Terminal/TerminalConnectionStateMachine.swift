import HorizonCore
import HorizonProtocol
import HorizonSecureChannel
import HorizonStores
import Logging

/// Why the terminal closes a wallet's connection on its own; the driver counts and logs each.
enum TerminalConnectionClosure: Equatable, Sendable {
    /// More messages than `maximumMessagesPerWindow` within one `messageRateWindow`.
    case overMessageRate
    /// A message that does not decode (the wallet was told why).
    case undecodable(String)
    /// A Hello for another session, with a key off the curve, or with a proof that does not
    /// verify (the wallet was told why).
    case helloRefused(String)
    /// Nothing went either way for `idleTimeout` while the session did not wait on the wallet.
    case idle
}

/// What a connection's state machine asks its driver (`TerminalRadioService`) to do, in order.
enum TerminalConnectionAction: Equatable, Sendable {
    case send(SessionMessage)
    case close(TerminalConnectionClosure)
    /// Hand the message to the host of the session the connection named (or say there is none).
    case route(SessionMessage)
    /// The Hello is proven: ask the session rate whether its key may open the session, and report
    /// with `sessionRate(admitted:for:)`.
    case admitSession(Hello)
    /// Read the journal's record of this request id and report it with `journalRead` or
    /// `journalUnreadable`, with the message it is for.
    case readJournal(PaymentID, for: SessionMessage)
    /// Journal that the wallet stored the answer to this request (its last step).
    case acknowledge(PaymentID)
    /// Hand the proxy request to the relay (or say there is none).
    case relay(ProxyEnvelope)
    /// Schedule `idleTimerFired` after this long, replacing any timer armed before.
    case armIdleTimer(after: Duration)
}

/// The rules of one wallet's established connection to the terminal as a value: the message
/// rate, the one Hello and its verification, answers to retries and status queries from the
/// journal, which requests the connection may acknowledge, and the idle timeout. Events go in
/// (bytes received, a message sent, a journal read, a timer), actions come out for the driver to
/// carry out. No I/O, no clock: time comes with the events.
///
/// A connection is established when the machine starts (the handshake and the limit on pending
/// handshakes are the service's, across connections) and closed once the machine decided to
/// close it or the link ended: a closed connection's later input is ignored.
struct TerminalConnectionStateMachine: Sendable {
    struct Configuration: Equatable, Sendable {
        var idleTimeout: Duration
        var maximumMessagesPerWindow: Int
        var messageRateWindow: Duration
        var maximumSessionsPerWallet: Int
        var sessionRateWindow: Duration

        init(_ configuration: TerminalServiceConfiguration) {
            idleTimeout = configuration.idleTimeout
            maximumMessagesPerWindow = configuration.maximumMessagesPerWindow
            messageRateWindow = configuration.messageRateWindow
            maximumSessionsPerWallet = configuration.maximumSessionsPerWallet
            sessionRateWindow = configuration.sessionRateWindow
        }
    }

    /// One Hello per connection.
    enum HelloPhase: Equatable, Sendable {
        case awaited
        /// The Hello's session key is on the curve and its proof signs this connection's
        /// transcript: the key the wallet's sessions and relay budget are counted by.
        case proven(PublicKeyBytes)
    }

    struct Open: Equatable, Sendable {
        /// When a message last went either way; the idle timeout is measured from it.
        var lastActivity: Instant
        /// When the current message-rate window began, and the messages received in it.
        var windowStart: Instant
        var messagesInWindow = 0
        var hello = HelloPhase.awaited
        /// Request ids this connection proved it may ask about (it sent the signed request, or a
        /// status query signed by the request's wallet key): only these can be acknowledged.
        var provenRequests: Set<PaymentID> = []
    }

    enum State: Equatable, Sendable {
        case open(Open)
        case closed
    }

    /// The session the wallet bound into its handshake (nil: none, e.g. a status query).
    let sessionID: SessionID?
    /// The handshake transcript: Hello and status proofs sign it, so neither can be replayed on
    /// another connection.
    let transcriptHash: [UInt8]
    let configuration: Configuration
    private(set) var state: State

    /// A connection whose handshake completed at `now`: its idle timer starts.
    init(sessionID: SessionID?, transcriptHash: [UInt8], configuration: Configuration, now: Instant) {
        self.sessionID = sessionID
        self.transcriptHash = transcriptHash
        self.configuration = configuration
        state = .open(Open(lastActivity: now, windowStart: now))
    }

    /// What the driver does first: arm the idle timer.
    var startActions: [TerminalConnectionAction] { [.armIdleTimer(after: configuration.idleTimeout)] }

    /// The session key the connection's Hello proved, if it said one.
    var sessionKey: PublicKeyBytes? {
        guard case .open(let open) = state, case .proven(let key) = open.hello else { return nil }
        return key
    }

    func hasProved(_ id: PaymentID) -> Bool {
        guard case .open(let open) = state else { return false }
        return open.provenRequests.contains(id)
    }

    private mutating func update(_ body: (inout Open) -> Void) {
        guard case .open(var open) = state else { return }
        body(&open)
        state = .open(open)
    }

    // MARK: Events

    /// A message went to the wallet: activity.
    mutating func sent(now: Instant) { update { $0.lastActivity = now } }

    /// The connection may ask about (and acknowledge) this request id from now on.
    mutating func proved(_ id: PaymentID) { update { _ = $0.provenRequests.insert(id) } }

    /// The link ended.
    mutating func ended() { state = .closed }

    /// A message arrived (authenticated by the secure link): it counts against the message rate,
    /// then it is decoded and answered, routed, or checked against the journal.
    mutating func received(_ bytes: [UInt8], now: Instant) -> [TerminalConnectionAction] {
        guard case .open(var open) = state else { return [] }
        if now - open.windowStart >= configuration.messageRateWindow {
            open.windowStart = now
            open.messagesInWindow = 0
        }
        open.messagesInWindow += 1
        open.lastActivity = now
        guard open.messagesInWindow <= configuration.maximumMessagesPerWindow else {
            state = .closed
            return [.close(.overMessageRate)]
        }
        state = .open(open)
        let message: SessionMessage
        do {
            message = try SessionMessage.decode(bytes)
        } catch {
            state = .closed
            return [
                .send(.error(ErrorMessage(code: .protocolViolation, message: "undecodable message: \(error)"))),
                .close(.undecodable("\(error)")),
            ]
        }
        switch message {
        case .hello(let hello):
            return receiveHello(hello, open)
        case .receiptAcknowledgement(let acknowledgement):
            // Only a connection that proved it made the request (see `journalRead`, and the live
            // request in the session) can acknowledge it; anything else is ignored.
            return open.provenRequests.contains(acknowledgement.paymentID)
                ? [.acknowledge(acknowledgement.paymentID)] : []
        case .proxyRequest(let envelope):
            // Any established connection may ask, session or not: the relay's own limits apply.
            return [.relay(envelope)]
        default:
            // A retry of a request already confirmed is answered from the journal, whichever
            // session the wallet reached us through; a status query only from the journal.
            guard let id = Self.journaledID(of: message) else { return [.route(message)] }
            return [.readJournal(id, for: message)]
        }
    }

    /// The request id the journal may know an answer for: a request's, or a status query's.
    static func journaledID(of message: SessionMessage) -> PaymentID? {
        switch message {
        case .confirm(let confirm): confirm.paymentID
        case .redeem(let redeem): redeem.redemptionID
        case .paymentStatusQuery(let query): query.paymentID
        default: nil
        }
    }

    /// One Hello per connection: its session key must be a point on the curve and the proof
    /// must sign this connection's transcript. Only then is the session rate asked. Repeats are
    /// ignored: they cost no journal row and no second offer.
    private mutating func receiveHello(_ hello: Hello, _ open: Open) -> [TerminalConnectionAction] {
        guard open.hello == .awaited else { return [] }
        func refuse(_ code: ErrorCode, _ text: String) -> [TerminalConnectionAction] {
            state = .closed
            return [.send(.error(ErrorMessage(code: code, message: text))), .close(.helloRefused(text))]
        }
        guard hello.sessionID == sessionID else { return refuse(.protocolViolation, "hello for another session") }
        guard let key = validatedKey(hello.sessionKey) else {
            return refuse(.badSignature, "the session key is not a P-256 point")
        }
        guard verifySignature(hello.proof.bytes, over: hello.proofBytes(transcriptHash: transcriptHash), with: key)
        else { return refuse(.badSignature, "the hello's proof of key possession does not verify") }
        update { $0.hello = .proven(hello.sessionKey) }
        return [.admitSession(hello)]
    }

    /// The session rate's verdict on a proven Hello: it reaches the session, or the wallet is told
    /// to come back later (the connection stays open: it may still ask about its requests).
    mutating func sessionRate(admitted: Bool, for hello: Hello) -> [TerminalConnectionAction] {
        guard case .open = state else { return [] }
        guard admitted else {
            return [
                .send(
                    .error(
                        ErrorMessage(
                            code: .rateLimited,
                            message:
                                "this wallet opened \(configuration.maximumSessionsPerWallet) sessions in the last \(configuration.sessionRateWindow); try again later"
                        )))
            ]
        }
        return [.route(.hello(hello))]
    }

    /// The journal could not be read for `message` (a retried request or a status query).
    mutating func journalUnreadable(for message: SessionMessage) -> [TerminalConnectionAction] {
        guard case .open = state else { return [] }
        return [.send(.error(ErrorMessage(code: .internalError, message: "the terminal cannot read its journal now")))]
    }

    /// The journal's record (nil: none) of the request `message` names. A request's answer goes
    /// only to the wallet that signed it: a retried Confirm or Redeem must carry a valid signature
    /// of the same terms (the same id with other terms is a conflict, never the old receipt), and
    /// a status query must be signed over this connection's transcript by the request's wallet
    /// key. A request the journal does not know goes to the session.
    mutating func journalRead(_ record: JournalRecord?, for message: SessionMessage) -> [TerminalConnectionAction] {
        guard case .open = state, let paymentID = Self.journaledID(of: message) else { return [] }
        if case .paymentStatusQuery(let query) = message {
            guard let key = validatedKey(query.walletKey),
                verifySignature(query.proof.bytes, over: query.proofBytes(transcriptHash: transcriptHash), with: key)
            else {
                return [
                    .send(
                        .error(ErrorMessage(code: .badSignature, message: "the status query's proof does not verify")))
                ]
            }
            // Not here, or not this wallet's: the same answer, so a stranger learns nothing.
            guard let record, record.request.walletKey == query.walletKey else {
                return [
                    .send(
                        .error(
                            ErrorMessage(
                                code: .notFound, message: "no payment with this id was made here by this wallet",
                                paymentID: paymentID)))
                ]
            }
            proved(paymentID)
            return [.send(record.answer ?? Self.stillSettling)]
        }
        guard let record else { return [.route(message)] }
        guard let signed = SignedRequest(message), signed.verifies else {
            return [
                .send(.error(ErrorMessage(code: .badSignature, message: "the request's signature does not verify")))
            ]
        }
        guard signed.walletKey == record.request.walletKey, signed.contentDigest == record.request.contentDigest else {
            return [
                .send(
                    .error(
                        ErrorMessage(
                            code: .duplicatePaymentConflict,
                            message: "this id was already used with other terms; these terms were not executed",
                            paymentID: paymentID)))
            ]
        }
        proved(paymentID)
        return [.send(record.answer ?? Self.stillSettling)]
    }

    /// Confirmed and owed an execution that is under way or was interrupted: no answer naming
    /// the id (that would be final); the wallet asks again.
    static let stillSettling = SessionMessage.error(
        ErrorMessage(code: .internalError, message: "this request is still being settled; ask again"))

    /// The idle timer ran out at `now`. While the session waits on this wallet (the person
    /// deciding, or its request executing) silence is expected: the count starts afresh, so the
    /// wallet has the full idle timeout after the session stops waiting on it.
    mutating func idleTimerFired(now: Instant, sessionAwaitsWallet: Bool) -> [TerminalConnectionAction] {
        guard case .open(let open) = state else { return [] }
        let timeout = configuration.idleTimeout
        if sessionAwaitsWallet {
            update { $0.lastActivity = now }
            return [.armIdleTimer(after: timeout)]
        }
        let idleFor = now - open.lastActivity
        guard idleFor >= timeout else { return [.armIdleTimer(after: timeout - idleFor)] }
        state = .closed
        return [.close(.idle)]
    }
}

/// How many sessions each wallet key opened and left without a payment lately (see
/// `TerminalServiceConfiguration.maximumSessionsPerWallet`), as a value with time passed in.
struct WalletSessionRate: Equatable, Sendable {
    struct Opened: Equatable, Sendable {
        let session: SessionID
        let at: Instant
    }

    let maximumSessions: Int
    let window: Duration
    /// Sessions each wallet key opened within the window, with when.
    private(set) var opened: [PublicKeyBytes: [Opened]] = [:]

    init(maximumSessions: Int, window: Duration) {
        self.maximumSessions = maximumSessions
        self.window = window
    }

    /// Whether `walletKey` may open `sessionID` at `now`; records it if so. A session it opened
    /// already is admitted again.
    mutating func admit(_ sessionID: SessionID, for walletKey: PublicKeyBytes, now: Instant) -> Bool {
        // Forget what left the window, for every key, so the table stays as small as the wallets
        // seen within one window.
        for (key, sessions) in opened {
            let recent = sessions.filter { now - $0.at < window }
            opened[key] = recent.isEmpty ? nil : recent
        }
        var sessions = opened[walletKey] ?? []
        if sessions.contains(where: { $0.session == sessionID }) { return true }
        guard sessions.count < maximumSessions else { return false }
        sessions.append(Opened(session: sessionID, at: now))
        opened[walletKey] = sessions
        return true
    }

    /// The wallet's request in `sessionID` was executed: that session no longer counts.
    mutating func executed(_ sessionID: SessionID, by walletKey: PublicKeyBytes) {
        opened[walletKey]?.removeAll { $0.session == sessionID }
        if opened[walletKey]?.isEmpty == true { opened[walletKey] = nil }
    }
}
