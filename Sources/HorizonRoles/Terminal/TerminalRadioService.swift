import HorizonCore
import HorizonLink
import HorizonProtocol
import HorizonRadio
import HorizonSecureChannel
import HorizonSettlement
import HorizonStores
import Logging
import Synchronization

/// One wallet's secure connection to the terminal: its link, and the state machine of its rules
/// (`TerminalConnectionStateMachine`), which `TerminalRadioService` drives.
public final class TerminalConnection: Sendable {
    public let id: Int
    /// The session the wallet bound into its handshake (nil: none, e.g. a status query).
    public let sessionID: SessionID?
    /// The code the wallet shows for this connection; the terminal shows the same.
    public let confirmationCode: ConfirmationCode
    let secureLink: SecureLink

    /// Read and written on the link's scheduler only, as everything a connection does (a host's
    /// reference-API commands hop onto the scheduler before they send).
    private let machine: SchedulerConfined<TerminalConnectionStateMachine>

    init(
        id: Int, sessionID: SessionID?, transcriptHash: [UInt8], confirmationCode: ConfirmationCode,
        secureLink: SecureLink, configuration: TerminalConnectionStateMachine.Configuration
    ) {
        self.id = id
        self.sessionID = sessionID
        self.confirmationCode = confirmationCode
        self.secureLink = secureLink
        let scheduler = secureLink.link.scheduler
        machine = SchedulerConfined(
            TerminalConnectionStateMachine(
                sessionID: sessionID, transcriptHash: transcriptHash, configuration: configuration, now: scheduler.now),
            on: scheduler)
    }

    public var peer: PeerAddress { secureLink.link.peer }

    /// Applies one event to the connection's machine; the caller carries out the actions.
    func handle(_ event: sending (inout TerminalConnectionStateMachine) -> [TerminalConnectionAction])
        -> [TerminalConnectionAction]
    {
        machine.withValue(event)
    }

    /// The proven session key from this connection's Hello, if it said one.
    var sessionKey: PublicKeyBytes? { machine.withValue { $0.sessionKey } }

    /// The connection may ask about (and acknowledge) this request id from now on.
    func proved(_ id: PaymentID) { machine.withValue { $0.proved(id) } }

    /// Sends a message; a failure means the link is gone, which its end callback reports.
    func send(_ message: SessionMessage) {
        let now = secureLink.link.scheduler.now
        machine.withValue { $0.sent(now: now) }
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
///
/// The rules of each established connection are a `TerminalConnectionStateMachine` that the
/// service drives (it carries out the actions: sending, closing, reading the journal, timers);
/// the service itself keeps what spans connections: the cap on pending handshakes and each wallet
/// key's session rate.
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
        /// The sessions each wallet key opened lately (see `maximumSessionsPerWallet`).
        var sessionRate: WalletSessionRate
    }

    /// One open connection, as the service knows it.
    private enum ConnectionRecord {
        /// The secure handshake is under way: the connection has no session and no rules yet.
        case handshaking(SecureLink)
        case established(TerminalConnection, idleTimer: ScheduledAction?)

        var connection: TerminalConnection? {
            if case .established(let connection, _) = self { connection } else { nil }
        }

        var secureLink: SecureLink {
            switch self {
            case .handshaking(let link): link
            case .established(let connection, _): connection.secureLink
            }
        }
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
        state = SchedulerConfined(
            State(
                sessionRate: WalletSessionRate(
                    maximumSessions: configuration.maximumSessionsPerWallet, window: configuration.sessionRateWindow)),
            on: radio.scheduler)
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

    /// The established connection with this id, while it is open.
    func connection(_ id: Int) -> TerminalConnection? { state.withValue { $0.connections[id]?.connection } }

    /// Changes the state and publishes the counts that follow from it (after the change, so an
    /// observer that calls back in finds the state free).
    private func update<Result: Sendable>(_ body: sending (inout State) -> Result) -> Result {
        let (result, connections, pending) = state.withValue { state in
            (body(&state), state.connections.count, state.pendingHandshakes.count)
        }
        counters.pendingHandshakes.store(pending, ordering: .relaxed)
        openConnections.set(connections)
        return result
    }

    /// Advertises `advertisement`; returns once the radio has it on the air (or refused it).
    func advertise(_ advertisement: HorizonAdvertisement) async throws(RadioError) -> any AdvertisingSet {
        try await radio.startAdvertising(advertisement.advertisingData(), interval: configuration.advertisingInterval)
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
            var evicted: [SecureLink] = []
            var evictions = 0
            while state.pendingHandshakes.count >= max(1, configuration.maximumPendingHandshakes) {
                let oldest = state.pendingHandshakes.removeFirst()
                if let record = state.connections.removeValue(forKey: oldest) { evicted.append(record.secureLink) }
                evictions += 1
            }
            state.pendingHandshakes.append(id)
            return (id, evicted, evictions)
        }
        counters.evictedHandshakes.add(evictions, ordering: .relaxed)
        for secureLink in evicted { secureLink.close() }
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
        update { state in
            // Not if it already ended (or was evicted) while starting.
            guard state.pendingHandshakes.contains(id) else { return }
            state.connections[id] = .handshaking(secure)
        }
    }

    private func established(id: Int, info: SecureLinkEstablished) {
        let sessionID = Self.sessionID(fromContext: info.context)
        let rules = TerminalConnectionStateMachine.Configuration(configuration)
        let connection = update { state -> TerminalConnection? in
            state.pendingHandshakes.removeAll { $0 == id }
            // Evicted while its last handshake message was on the way: it stays closed.
            guard let secureLink = state.connections[id]?.secureLink else { return nil }
            let connection = TerminalConnection(
                id: id, sessionID: sessionID, transcriptHash: info.transcriptHash,
                confirmationCode: info.confirmationCode, secureLink: secureLink, configuration: rules)
            state.connections[id] = .established(connection, idleTimer: nil)
            return connection
        }
        guard let connection else { return }
        logger.with(session: sessionID).debug("secure channel established", metadata: ["connection": "\(id)"])
        perform(connection.handle { $0.startActions }, on: connection)
    }

    private func received(_ bytes: [UInt8], on id: Int) {
        // Only an established connection has rules; nothing else is delivered before the handshake.
        guard let connection = connection(id) else { return }
        let now = scheduler.now
        perform(connection.handle { $0.received(bytes, now: now) }, on: connection)
    }

    /// Carries out what the connection's machine decided, feeding it the results it asks for.
    private func perform(_ actions: [TerminalConnectionAction], on connection: TerminalConnection) {
        for action in actions {
            switch action {
            case .send(let message): connection.send(message)
            case .close(let closure): close(connection, because: closure)
            case .route(let message): route(message, on: connection)
            case .admitSession(let hello):
                let now = scheduler.now
                let admitted = state.withValue {
                    $0.sessionRate.admit(hello.sessionID, for: hello.sessionKey, now: now)
                }
                if !admitted {
                    counters.rateLimitedHellos.add(1, ordering: .relaxed)
                    logger.with(session: hello.sessionID).notice("a wallet key over its session rate was refused")
                }
                perform(connection.handle { $0.sessionRate(admitted: admitted, for: hello) }, on: connection)
            case .readJournal(let paymentID, let message):
                let next: [TerminalConnectionAction]
                do {
                    let record = try journal.record(for: paymentID)
                    next = connection.handle { $0.journalRead(record, for: message) }
                } catch {
                    next = connection.handle { $0.journalUnreadable(for: message) }
                }
                perform(next, on: connection)
            case .acknowledge(let paymentID):
                guard let record = try? journal.record(for: paymentID) else { continue }
                try? journal.write(.acknowledged(paymentID, by: record.request.walletKey), at: scheduler.wallClock)
            case .relay(let envelope):
                if let handler = proxyHandler.withLock({ $0.handler }) {
                    handler.proxyRequest(envelope, on: connection)
                } else {
                    connection.send(RequestProxyHostCoordinator.unavailable(envelope.requestID))
                }
            case .armIdleTimer(let delay): armIdleTimer(for: connection, after: delay)
            }
        }
    }

    /// Closes a connection its machine gave up on, counting and logging why.
    private func close(_ connection: TerminalConnection, because closure: TerminalConnectionClosure) {
        let log = logger.with(session: connection.sessionID)
        let id: Logger.MetadataValue = "\(connection.id)"
        switch closure {
        case .overMessageRate:
            counters.rateClosures.add(1, ordering: .relaxed)
            log.notice("closed a connection over its message rate", metadata: ["connection": id])
        case .undecodable(let error):
            log.notice("undecodable message", metadata: ["connection": id, "error": "\(error)"])
        case .helloRefused(let reason):
            counters.refusedHellos.add(1, ordering: .relaxed)
            log.notice("hello refused", metadata: ["connection": id, "reason": "\(reason)"])
        case .idle:
            counters.idleClosures.add(1, ordering: .relaxed)
            log.info("closed an idle connection", metadata: ["connection": id])
        }
        connection.close()
    }

    // MARK: Idle timeout

    private func armIdleTimer(for connection: TerminalConnection, after delay: Duration) {
        let id = connection.id
        let timer = scheduler.schedule(after: delay) { [weak self, weak connection] in
            guard let self, let connection else { return }
            self.idleTimerFired(connection)
        }
        let previous = state.withValue { state -> ScheduledAction? in
            // An ended connection keeps no timer (its end already ran).
            guard case .established(let open, let previous)? = state.connections[id] else { return timer }
            state.connections[id] = .established(open, idleTimer: timer)
            return previous
        }
        previous?.cancel()
    }

    private func idleTimerFired(_ connection: TerminalConnection) {
        let isOpen = state.withValue { $0.connections[connection.id]?.connection === connection }
        guard isOpen else { return }
        let handler = connection.sessionID.flatMap { id in handlers.withValue { $0[id] } }
        let awaitsWallet = handler?.isAwaitingWallet(on: connection) ?? false
        let now = scheduler.now
        perform(connection.handle { $0.idleTimerFired(now: now, sessionAwaitsWallet: awaitsWallet) }, on: connection)
    }

    // MARK: Session rate

    /// The wallet's request in `sessionID` was executed: that session no longer counts against
    /// its rate (see `maximumSessionsPerWallet`). A host reports it from the processor's answer,
    /// which arrives on the scheduler.
    func sessionExecuted(_ sessionID: SessionID, by walletKey: PublicKeyBytes) {
        state.withValue { $0.sessionRate.executed(sessionID, by: walletKey) }
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

    private func ended(id: Int) {
        let record = update { state in
            state.pendingHandshakes.removeAll { $0 == id }
            return state.connections.removeValue(forKey: id)
        }
        guard case .established(let connection, let idleTimer)? = record else { return }
        idleTimer?.cancel()
        _ = connection.handle { machine in
            machine.ended()
            return []
        }
        proxyHandler.withLock { $0.handler }?.connectionEnded(connection)
        guard let sessionID = connection.sessionID, let handler = handlers.withValue({ $0[sessionID] }) else { return }
        handler.connectionEnded(connection)
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
