import HorizonCore
import HorizonLink
import HorizonProtocol
import HorizonRadio
import HorizonSecureChannel
import HorizonSettlement
import HorizonStores
import Logging
import Synchronization

/// One wallet's secure connection to the terminal.
public final class TerminalConnection: Sendable {
    public let id: Int
    /// The session the wallet bound into its handshake (nil: none, e.g. a status query).
    public let sessionID: SessionID?
    /// This connection's handshake transcript: Hello and status proofs sign it, so neither can
    /// be replayed on another connection.
    let transcriptHash: [UInt8]
    /// The code the wallet shows for this connection; the terminal shows the same.
    public let confirmationCode: ConfirmationCode
    let secureLink: SecureLink

    /// What the connection's host shares with the service. A host's reference-API commands
    /// (`start`, `stop`, `cancel`) hop onto the scheduler before they send, so this lives there
    /// too, like the service's own bookkeeping for the connection (its Hello, its message rate).
    private struct State {
        /// When a message last went either way; the idle timeout is measured from it.
        var lastActivity: Instant
        /// The session key the wallet proved it holds in its Hello (one Hello per connection).
        var sessionKey: PublicKeyBytes?
        /// Request ids this connection proved it may ask about (it sent the signed request, or
        /// a status query signed by the request's wallet key): only these can be acknowledged.
        var provenRequests: Set<PaymentID> = []
    }

    /// Read and written on the link's scheduler only, as everything a connection does.
    private let state: SchedulerConfined<State>

    init(
        id: Int, sessionID: SessionID?, transcriptHash: [UInt8], confirmationCode: ConfirmationCode,
        secureLink: SecureLink
    ) {
        self.id = id
        self.sessionID = sessionID
        self.transcriptHash = transcriptHash
        self.confirmationCode = confirmationCode
        self.secureLink = secureLink
        state = SchedulerConfined(State(lastActivity: secureLink.link.scheduler.now), on: secureLink.link.scheduler)
    }

    public var peer: PeerAddress { secureLink.link.peer }

    var lastActivityAt: Instant { state.withValue { $0.lastActivity } }

    /// The proven session key from this connection's Hello, if it said one.
    var sessionKey: PublicKeyBytes? { state.withValue { $0.sessionKey } }

    func setSessionKey(_ key: PublicKeyBytes) { state.withValue { $0.sessionKey = key } }

    func proved(_ id: PaymentID) { _ = state.withValue { $0.provenRequests.insert(id) } }

    func hasProved(_ id: PaymentID) -> Bool { state.withValue { $0.provenRequests.contains(id) } }

    func noteActivity() {
        let now = secureLink.link.scheduler.now
        state.withValue { $0.lastActivity = now }
    }

    /// Sends a message; a failure means the link is gone, which its end callback reports.
    func send(_ message: SessionMessage) {
        noteActivity()
        try? secureLink.send(message.encoded())
    }

    func close() { secureLink.close() }
}

/// What a host (payment or redemption) hears about connections for its session.
protocol TerminalSessionHandler: AnyObject, Sendable {
    func connection(_ connection: TerminalConnection, received message: SessionMessage)
    func connectionEnded(_ connection: TerminalConnection)
    /// Whether the session waits on this connection's wallet (the person deciding, or the
    /// request being executed): silence is expected then, so the idle timeout does not run.
    func isAwaitingWallet(on connection: TerminalConnection) -> Bool
}

/// Limits the terminal enforces on wallets' connections, so that a crowd of idle or hostile
/// devices cannot keep an honest wallet from paying (limits against floods).
public struct TerminalServiceConfiguration: Sendable {
    /// Includes the handshake deadline (5 s by default): a connection that has not completed the
    /// handshake by then is closed.
    public var secureLink: SecureLinkConfiguration
    public var linkLimits: LinkLimits
    public var advertisingInterval: Duration
    /// Connections that have not completed the secure handshake, at most, at once (default 8).
    /// One more arriving closes the *oldest* of them at once. Evicting the oldest rather than
    /// refusing the newest keeps the terminal open to an honest wallet while squatters hold every
    /// slot: an honest handshake takes a couple of connection intervals, so it is always among the
    /// newest, and only `maximumPendingHandshakes` new arrivals during those few tens of
    /// milliseconds could push it out. Refusing new ones instead would lock an honest wallet out
    /// for a whole handshake deadline per round of squatters. Values below 1 count as 1.
    public var maximumPendingHandshakes: Int
    /// An authenticated connection on which no message went either way for this long is closed
    /// (default 30 s). It does not run while the connection's session waits on its wallet (the
    /// offer is on the person's screen, or the request is executing): the session's own
    /// `userDecisionTimeout` bounds that time instead, so a customer who takes longer than this to
    /// decide is never cut off. Forged records that fail authentication are not activity.
    public var idleTimeout: Duration
    /// Different sessions one wallet key may open *and leave without a payment* within
    /// `sessionRateWindow` (default 6 per minute); a Hello for one more is answered with a
    /// `rateLimited` error and reaches no session. The key is the session key the wallet proved
    /// in its Hello; an honest wallet makes a new one for every attempt, so this bounds only a
    /// client that keeps one key (a Hello no longer takes a session, so rotating keys gains a
    /// rogue nothing). A session in which the wallet's request was executed stops counting.
    public var maximumSessionsPerWallet: Int
    public var sessionRateWindow: Duration
    /// Messages one connection may send within `messageRateWindow` (default 20 a second, several
    /// times what an honest payment sends in its whole life); one more closes the connection, so
    /// a flood on one connection costs the terminal a bounded amount of work and nothing durable.
    public var maximumMessagesPerWindow: Int
    public var messageRateWindow: Duration

    public init(
        secureLink: SecureLinkConfiguration = SecureLinkConfiguration(), linkLimits: LinkLimits = LinkLimits(),
        advertisingInterval: Duration = .milliseconds(100), maximumPendingHandshakes: Int = 8,
        idleTimeout: Duration = .seconds(30), maximumSessionsPerWallet: Int = 6,
        sessionRateWindow: Duration = .seconds(60), maximumMessagesPerWindow: Int = 20,
        messageRateWindow: Duration = .seconds(1)
    ) {
        self.maximumMessagesPerWindow = maximumMessagesPerWindow
        self.messageRateWindow = messageRateWindow
        self.secureLink = secureLink
        self.linkLimits = linkLimits
        self.advertisingInterval = advertisingInterval
        self.maximumPendingHandshakes = maximumPendingHandshakes
        self.idleTimeout = idleTimeout
        self.maximumSessionsPerWallet = maximumSessionsPerWallet
        self.sessionRateWindow = sessionRateWindow
    }
}

/// The terminal's radio side, shared by its payment host and redemption hosts: advertises their
/// sessions, accepts wallets, runs the secure handshake, and routes each connection to the host
/// whose session the wallet named. Every step of a payment or redemption goes to its `journal`
/// before the next message leaves; a wallet that retries a request already confirmed is answered
/// from the journal, whatever session it connects through, so a receipt is never lost with a link.
public final class TerminalRadioService: Sendable {
    public let radio: any PeripheralRadio
    /// The terminal's key and its current credential. The key never changes; the credential is
    /// replaced when renewed (`replaceCredential`), and each new connection's handshake presents
    /// the current one.
    public var identity: TerminalIdentity { currentIdentity.withLock { $0 } }
    private let currentIdentity: Mutex<TerminalIdentity>
    /// Executes payments; recovery settles through it, and it answers retries of payments
    /// executed before the journal kept their answers.
    public let processor: any PaymentProcessor
    /// The durable record of each step (see `JournalStep`).
    public let journal: any TerminalJournal
    public let configuration: TerminalServiceConfiguration

    private struct State {
        var connections: [Int: ConnectionRecord] = [:]
        var nextConnectionID = 0
        /// Connections still in the handshake, oldest first.
        var pendingHandshakes: [Int] = []
        /// Sessions each wallet key opened within the rate window, with when.
        var sessionsOpened: [PublicKeyBytes: [(session: SessionID, at: Instant)]] = [:]
    }

    /// What the service knows about one open connection.
    private struct ConnectionRecord {
        /// Until the handshake completes, a placeholder without a session or a transcript.
        var connection: TerminalConnection
        var isEstablished = false
        /// One Hello per connection: a repeat is ignored.
        var saidHello = false
        var idleTimer: ScheduledAction?
        /// Messages received in the current rate window, and when that window began.
        var windowStart: Instant
        var messagesInWindow = 0
    }

    /// Lives on the radio's scheduler, the role's one serial context: every radio, secure-link and
    /// timer callback of the service runs there, so it needs no lock of its own.
    private let state: SchedulerConfined<State>
    /// The host of each open session. A host registers and unregisters from its commands, which
    /// run on the scheduler (the reference API's `start` and `stop` hop there), so this is
    /// confined like the rest; kept apart from `state` because lookups happen while `state` is
    /// being changed.
    private let handlers: SchedulerConfined<[SessionID: any TerminalSessionHandler]>
    /// Counts for tests, benchmarks and the apps, which read them from any thread; written on
    /// the scheduler.
    private let counters = Counters()
    /// Where wallets' proxy requests go (a `RequestProxyHostCoordinator`); nil: not relaying.
    /// Set from the app's thread, read on the scheduler, so behind a lock. Weak, as the
    /// reference's: the app keeps its coordinator, which holds the services it relays for.
    private let proxyHandler = Mutex(WeakProxyHandler())

    /// The connections open now, authenticated or not, as they change: what an app waits on to
    /// let the last wallet hang up before it leaves the air.
    public let openConnections = ObservableState(0)

    /// Where the terminal's events go (connections, refusals, sessions, settlements), with the
    /// session and payment ids as metadata.
    public let logger: Logger

    public init(
        radio: any PeripheralRadio, identity: TerminalIdentity, processor: any PaymentProcessor,
        journal: any TerminalJournal, configuration: TerminalServiceConfiguration = TerminalServiceConfiguration(),
        logger: Logger = .silent
    ) {
        self.logger = logger
        self.radio = radio
        currentIdentity = Mutex(identity)
        self.processor = processor
        self.journal = journal
        self.configuration = configuration
        state = SchedulerConfined(State(), on: radio.scheduler)
        handlers = SchedulerConfined([:], on: radio.scheduler)
        radio.setConnectionHandler { [weak self] link in self?.accept(link) }
    }

    var scheduler: any Scheduler { radio.scheduler }

    public var terminalKeyID: TerminalKeyID? { identity.terminalKeyID }

    /// Puts a renewed credential in use for the connections that open from now on (those open
    /// keep the handshake they made). It must be for this terminal's key.
    public func replaceCredential(_ credential: TerminalCredential) throws(SecureChannelError) {
        let renewed = try TerminalIdentity(signingKey: identity.signingKey, credential: credential)
        currentIdentity.withLock { $0 = renewed }
        logger.info("credential renewed", metadata: ["expires": "\(credential.expiresAt)"])
    }

    /// Connections open now, authenticated or not.
    public var connectionCount: Int { openConnections.value }

    /// Connections open now that have not completed the handshake.
    public var pendingHandshakeCount: Int { counters.pendingHandshakes.load(ordering: .relaxed) }

    /// Connections closed so far because a newer one needed their handshake slot.
    public var evictedHandshakeCount: Int { counters.evictedHandshakes.load(ordering: .relaxed) }

    /// Connections closed so far for saying nothing for `idleTimeout`.
    public var idleClosureCount: Int { counters.idleClosures.load(ordering: .relaxed) }

    /// Connections closed so far for sending more messages than `maximumMessagesPerWindow`.
    public var messageRateClosureCount: Int { counters.rateClosures.load(ordering: .relaxed) }

    /// Hellos refused so far for a key off the curve or a proof that does not verify.
    public var refusedHelloCount: Int { counters.refusedHellos.load(ordering: .relaxed) }

    /// Hellos refused so far because their wallet opened too many sessions.
    public var rateLimitedHelloCount: Int { counters.rateLimitedHellos.load(ordering: .relaxed) }

    func register(_ sessionID: SessionID, handler: any TerminalSessionHandler) {
        handlers.withValue { $0[sessionID] = handler }
    }

    /// The coordinator that relays this service's wallets' proxy requests (nil: none).
    func setProxyHandler(_ handler: (any TerminalProxyHandler)?) {
        proxyHandler.withLock { $0.handler = handler }
    }

    func unregister(_ sessionID: SessionID) {
        _ = handlers.withValue { $0.removeValue(forKey: sessionID) }
    }

    /// Changes the state and publishes the counts that follow from it (after the change, so an
    /// observer that calls back in finds the state free).
    private func update<Result>(_ body: (inout State) -> Result) -> Result {
        let (result, connections, pending) = state.withValue { state in
            (body(&state), state.connections.count, state.pendingHandshakes.count)
        }
        counters.pendingHandshakes.store(pending, ordering: .relaxed)
        openConnections.set(connections)
        return result
    }

    func advertise(_ advertisement: HorizonAdvertisement) throws(RadioError) -> any AdvertisingSet {
        try radio.startAdvertising(advertisement.advertisingData(), interval: configuration.advertisingInterval)
    }

    // Everything below runs on the scheduler: radio and secure-link callbacks, and timers.

    private func accept(_ link: any ByteLink) {
        guard let messageLink = try? MessageLink(link: link, scheduler: scheduler, limits: configuration.linkLimits)
        else {
            link.close()
            return
        }
        // Make room before this one counts: the oldest handshakes still pending go, so the cap
        // holds at every instant (see `maximumPendingHandshakes` for why the oldest).
        let (id, evicted, evictions) = update { state in
            let id = state.nextConnectionID
            state.nextConnectionID += 1
            var evicted: [TerminalConnection] = []
            var evictions = 0
            while state.pendingHandshakes.count >= max(1, configuration.maximumPendingHandshakes) {
                let oldest = state.pendingHandshakes.removeFirst()
                if let record = state.connections.removeValue(forKey: oldest) { evicted.append(record.connection) }
                evictions += 1
            }
            state.pendingHandshakes.append(id)
            return (id, evicted, evictions)
        }
        counters.evictedHandshakes.add(evictions, ordering: .relaxed)
        for connection in evicted { connection.close() }
        if !evicted.isEmpty {
            logger.notice("too many handshakes at once: closed the oldest", metadata: ["closed": "\(evicted.count)"])
        }
        logger.debug("connection opened", metadata: ["connection": "\(id)"])
        let secure = SecureLink.accept(
            over: messageLink, identity: identity, configuration: configuration.secureLink,
            handler: SecureLinkHandler(
                onEstablished: { [weak self] info in self?.established(id: id, info: info) },
                onMessage: { [weak self] bytes in self?.received(bytes, on: id) },
                onEnd: { [weak self] _ in self?.ended(id: id) }))
        let placeholder = TerminalConnection(
            id: id, sessionID: nil, transcriptHash: [], confirmationCode: ConfirmationCode(derivedBytes: []),
            secureLink: secure)
        let now = scheduler.now
        update { state in
            // Not if it already ended (or was evicted) while starting.
            guard state.pendingHandshakes.contains(id) else { return }
            state.connections[id] = ConnectionRecord(connection: placeholder, windowStart: now)
        }
    }

    private func established(id: Int, info: SecureLinkEstablished) {
        let sessionID = Self.sessionID(fromContext: info.context)
        let now = scheduler.now
        let connection = update { state -> TerminalConnection? in
            state.pendingHandshakes.removeAll { $0 == id }
            // Evicted while its last handshake message was on the way: it stays closed.
            guard let placeholder = state.connections[id]?.connection else { return nil }
            let connection = TerminalConnection(
                id: id, sessionID: sessionID, transcriptHash: info.transcriptHash,
                confirmationCode: info.confirmationCode, secureLink: placeholder.secureLink)
            state.connections[id] = ConnectionRecord(connection: connection, isEstablished: true, windowStart: now)
            return connection
        }
        guard let connection else { return }
        logger.with(session: sessionID).debug("secure channel established", metadata: ["connection": "\(id)"])
        armIdleTimer(for: connection, after: configuration.idleTimeout)
    }

    // MARK: Idle timeout

    private func armIdleTimer(for connection: TerminalConnection, after delay: Duration) {
        let id = connection.id
        let timer = scheduler.schedule(after: delay) { [weak self, weak connection] in
            guard let self, let connection else { return }
            self.checkIdle(connection)
        }
        let previous = state.withValue { state -> ScheduledAction? in
            // An ended connection keeps no timer (its end already ran).
            guard state.connections[id] != nil else { return timer }
            defer { state.connections[id]?.idleTimer = timer }
            return state.connections[id]?.idleTimer
        }
        previous?.cancel()
    }

    private func checkIdle(_ connection: TerminalConnection) {
        let isOpen = state.withValue { $0.connections[connection.id]?.connection === connection }
        let handler = connection.sessionID.flatMap { id in handlers.withValue { $0[id] } }
        guard isOpen else { return }
        let timeout = configuration.idleTimeout
        if let handler, handler.isAwaitingWallet(on: connection) {
            // The person is deciding: that time is not idleness. Start counting afresh from now,
            // so the wallet has the full idle timeout after the session stops waiting on it.
            connection.noteActivity()
            armIdleTimer(for: connection, after: timeout)
            return
        }
        let idleFor = scheduler.now - connection.lastActivityAt
        if idleFor >= timeout {
            counters.idleClosures.add(1, ordering: .relaxed)
            logger.with(session: connection.sessionID).info(
                "closed an idle connection", metadata: ["connection": "\(connection.id)"])
            connection.close()
        } else {
            armIdleTimer(for: connection, after: timeout - idleFor)
        }
    }

    // MARK: Session rate

    /// The wallet's request in `sessionID` was executed: that session no longer counts against
    /// its rate (see `maximumSessionsPerWallet`). A host reports it from the processor's answer,
    /// which arrives on the scheduler.
    func sessionExecuted(_ sessionID: SessionID, by walletKey: PublicKeyBytes) {
        state.withValue { state in
            state.sessionsOpened[walletKey]?.removeAll { $0.session == sessionID }
            if state.sessionsOpened[walletKey]?.isEmpty == true { state.sessionsOpened[walletKey] = nil }
        }
    }

    /// Whether `walletKey` may open `sessionID` now; records it if so.
    private func admitSession(_ sessionID: SessionID, for walletKey: PublicKeyBytes) -> Bool {
        let now = scheduler.now
        let window = configuration.sessionRateWindow
        let admitted = state.withValue { state in
            // Forget what left the window, for every key, so the table stays as small as the
            // wallets seen within one window.
            for (key, opened) in state.sessionsOpened {
                let recent = opened.filter { now - $0.at < window }
                state.sessionsOpened[key] = recent.isEmpty ? nil : recent
            }
            var opened = state.sessionsOpened[walletKey] ?? []
            if opened.contains(where: { $0.session == sessionID }) { return true }
            guard opened.count < configuration.maximumSessionsPerWallet else { return false }
            opened.append((sessionID, now))
            state.sessionsOpened[walletKey] = opened
            return true
        }
        if !admitted { counters.rateLimitedHellos.add(1, ordering: .relaxed) }
        return admitted
    }

    private func received(_ bytes: [UInt8], on id: Int) {
        guard let (connection, withinRate) = admitMessage(on: id) else { return }
        connection.noteActivity()
        guard withinRate else {
            counters.rateClosures.add(1, ordering: .relaxed)
            logger.with(session: connection.sessionID).notice(
                "closed a connection over its message rate", metadata: ["connection": "\(connection.id)"])
            connection.close()
            return
        }
        let message: SessionMessage
        do {
            message = try SessionMessage.decode(bytes)
        } catch {
            logger.with(session: connection.sessionID).notice(
                "undecodable message", metadata: ["connection": "\(connection.id)", "error": "\(error)"])
            connection.send(.error(ErrorMessage(code: .protocolViolation, message: "undecodable message: \(error)")))
            connection.close()
            return
        }
        switch message {
        case .hello(let hello):
            receiveHello(hello, on: connection)
        case .receiptAcknowledgement(let acknowledgement):
            acknowledge(acknowledgement.paymentID, from: connection)
        case .proxyRequest(let envelope):
            // Any established connection may ask, session or not: the relay's own limits apply.
            if let handler = proxyHandler.withLock({ $0.handler }) {
                handler.proxyRequest(envelope, on: connection)
            } else {
                connection.send(RequestProxyHostCoordinator.unavailable(envelope.requestID))
            }
        default:
            // A retry of a request already confirmed is answered from the journal, whichever
            // session the wallet reached us through; a status query only from the journal.
            if let answer = settledAnswer(to: message, on: connection) {
                connection.send(answer)
                return
            }
            route(message, on: connection)
        }
    }

    /// The established connection `id` and whether this message keeps it within
    /// `maximumMessagesPerWindow` (counting it); nil before the handshake completes.
    private func admitMessage(on id: Int) -> (TerminalConnection, Bool)? {
        let now = scheduler.now
        let (limit, window) = (configuration.maximumMessagesPerWindow, configuration.messageRateWindow)
        return state.withValue { state in
            guard var record = state.connections[id], record.isEstablished else { return nil }
            if now - record.windowStart >= window {
                record.windowStart = now
                record.messagesInWindow = 0
            }
            record.messagesInWindow += 1
            state.connections[id] = record
            return (record.connection, record.messagesInWindow <= limit)
        }
    }

    /// Marks the connection as having said hello; false if it already had.
    private func takeHello(on id: Int) -> Bool {
        state.withValue { state in
            guard let said = state.connections[id]?.saidHello else { return false }
            state.connections[id]?.saidHello = true
            return !said
        }
    }

    /// One Hello per connection: its session key must be a point on the curve and the proof
    /// must sign this connection's transcript. Only then does it reach the session. Repeats are
    /// ignored: they cost no journal row and no second offer.
    private func receiveHello(_ hello: Hello, on connection: TerminalConnection) {
        guard takeHello(on: connection.id) else { return }
        guard hello.sessionID == connection.sessionID else {
            refuseHello(on: connection, ErrorMessage(code: .protocolViolation, message: "hello for another session"))
            return
        }
        guard let key = validatedKey(hello.sessionKey) else {
            refuseHello(
                on: connection, ErrorMessage(code: .badSignature, message: "the session key is not a P-256 point"))
            return
        }
        guard
            verifySignature(
                hello.proof.bytes, over: hello.proofBytes(transcriptHash: connection.transcriptHash), with: key)
        else {
            refuseHello(
                on: connection,
                ErrorMessage(code: .badSignature, message: "the hello's proof of key possession does not verify"))
            return
        }
        connection.setSessionKey(hello.sessionKey)
        if !admitSession(hello.sessionID, for: hello.sessionKey) {
            logger.with(session: hello.sessionID).notice("a wallet key over its session rate was refused")
            connection.send(
                .error(
                    ErrorMessage(
                        code: .rateLimited,
                        message:
                            "this wallet opened \(configuration.maximumSessionsPerWallet) sessions in the last \(configuration.sessionRateWindow); try again later"
                    )))
            return
        }
        route(.hello(hello), on: connection)
    }

    private func refuseHello(on connection: TerminalConnection, _ error: ErrorMessage) {
        counters.refusedHellos.add(1, ordering: .relaxed)
        logger.with(session: connection.sessionID).notice(
            "hello refused", metadata: ["connection": "\(connection.id)", "reason": "\(error.message)"])
        connection.send(.error(error))
        connection.close()
    }

    /// Hands a message to the host whose session the connection named.
    private func route(_ message: SessionMessage, on connection: TerminalConnection) {
        let handler = connection.sessionID.flatMap { id in handlers.withValue { $0[id] } }
        guard let handler else {
            // Naming the payment id makes this a definitive answer for a pending confirmation:
            // its session is over, so that payment id can never be executed here.
            let paymentID = SessionHost.requestID(of: message)
            connection.send(
                .error(
                    ErrorMessage(
                        code: .sessionNotFound, message: "this terminal has no such session open; nothing was charged",
                        paymentID: paymentID)))
            return
        }
        handler.connection(connection, received: message)
    }

    /// The journaled answer for a retried request or a status query, if the terminal has one for
    /// this sender. A request's answer goes only to the wallet that signed it: a retried Confirm
    /// or Redeem must carry a valid signature of the same terms (the same id with other terms is
    /// a conflict, never the old receipt), and a status query must be signed over this
    /// connection's transcript by the request's wallet key.
    private func settledAnswer(to message: SessionMessage, on connection: TerminalConnection) -> SessionMessage? {
        let paymentID: PaymentID
        switch message {
        case .confirm(let confirm): paymentID = confirm.paymentID
        case .redeem(let redeem): paymentID = redeem.redemptionID
        case .paymentStatusQuery(let query): paymentID = query.paymentID
        default: return nil
        }
        let record: JournalRecord?
        do {
            record = try journal.record(for: paymentID)
        } catch {
            return .error(ErrorMessage(code: .internalError, message: "the terminal cannot read its journal now"))
        }
        if case .paymentStatusQuery(let query) = message {
            guard let key = validatedKey(query.walletKey),
                verifySignature(
                    query.proof.bytes, over: query.proofBytes(transcriptHash: connection.transcriptHash), with: key)
            else {
                return .error(
                    ErrorMessage(code: .badSignature, message: "the status query's proof does not verify"))
            }
            // Not here, or not this wallet's: the same answer, so a stranger learns nothing.
            guard let record, record.request.walletKey == query.walletKey else {
                return .error(
                    ErrorMessage(
                        code: .notFound, message: "no payment with this id was made here by this wallet",
                        paymentID: paymentID))
            }
            connection.proved(paymentID)
            return record.answer ?? Self.stillSettling
        }
        guard let record else { return nil }
        guard let signed = SignedRequest(message), signed.verifies else {
            return .error(ErrorMessage(code: .badSignature, message: "the request's signature does not verify"))
        }
        guard signed.walletKey == record.request.walletKey, signed.contentDigest == record.request.contentDigest else {
            return .error(
                ErrorMessage(
                    code: .duplicatePaymentConflict,
                    message: "this id was already used with other terms; these terms were not executed",
                    paymentID: paymentID))
        }
        connection.proved(paymentID)
        return record.answer ?? Self.stillSettling
    }

    /// Confirmed and owed an execution that is under way or was interrupted: no answer naming
    /// the id (that would be final); the wallet asks again.
    static let stillSettling = SessionMessage.error(
        ErrorMessage(code: .internalError, message: "this request is still being settled; ask again"))

    /// The wallet stored the answer for `paymentID`: the journal's last step for it. Only a
    /// connection that proved it made the request (see `settledAnswer`, and the live request in
    /// `SessionHost`) can acknowledge it; anything else is ignored.
    private func acknowledge(_ paymentID: PaymentID, from connection: TerminalConnection) {
        guard connection.hasProved(paymentID), let record = try? journal.record(for: paymentID) else { return }
        try? journal.write(.acknowledged(paymentID, by: record.request.walletKey), at: scheduler.wallClock)
    }

    private func ended(id: Int) {
        let record = update { state in
            state.pendingHandshakes.removeAll { $0 == id }
            return state.connections.removeValue(forKey: id)
        }
        record?.idleTimer?.cancel()
        if let record, record.isEstablished { proxyHandler.withLock { $0.handler }?.connectionEnded(record.connection) }
        guard let record, record.isEstablished, let sessionID = record.connection.sessionID,
            let handler = handlers.withValue({ $0[sessionID] })
        else { return }
        handler.connectionEnded(record.connection)
    }

    static func sessionID(fromContext context: [UInt8]) -> SessionID? {
        guard context.count == 8 else { return nil }
        var raw: UInt64 = 0
        for byte in context { raw = raw << 8 | UInt64(byte) }
        return SessionID(rawValue: raw)
    }

    static func context(for sessionID: SessionID) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: sessionID.rawValue >> (56 - 8 * $0)) }
    }
}

/// The request proxy a service hands proxy requests to, held weakly.
private struct WeakProxyHandler {
    weak var handler: (any TerminalProxyHandler)?
}

/// The service's counts, readable from any thread.
private final class Counters: Sendable {
    let pendingHandshakes = Atomic(0)
    let evictedHandshakes = Atomic(0)
    let idleClosures = Atomic(0)
    let rateClosures = Atomic(0)
    let refusedHellos = Atomic(0)
    let rateLimitedHellos = Atomic(0)
}

/// Builds the terminal-signed receipt for a stored result.
enum ReceiptFactory {
    static func receipt(for result: SettlementResult, identity: TerminalIdentity) -> Receipt? {
        let outcome: ReceiptOutcome
        var reference: UInt64 = 0
        var earned: Int64 = 0
        var balance: Int64 = 0
        switch result.outcome {
        case .approved(let ref, let bonusEarned, let bonusBalance):
            outcome = .approved
            reference = ref
            earned = bonusEarned
            balance = bonusBalance
        case .declined(let code, _):
            outcome = .declined(code)
        }
        guard
            let unsigned = try? Receipt(
                sessionID: result.sessionID, transactionType: result.transactionType, paymentID: result.paymentID,
                outcome: outcome, amount: result.amount, tip: result.tip, transactionReference: reference,
                settledAt: result.settledAt, bonusPointsEarned: earned, bonusPointsBalance: balance),
            let signature = try? signatureBytes(for: unsigned.signedBytes, with: identity.signingKey)
        else { return nil }
        return unsigned.withSignature(signature)
    }
}
