import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonSecureChannel
import HorizonSettlement
import HorizonStores
import Logging

/// A wallet's connection as the session's state machine sees it: a key to file it under and the
/// code both sides show. The machine only keeps it and names it in its actions; the driver does
/// the I/O on it (`TerminalConnection`; a stand-in in the machine's own tests).
protocol SessionWallet: AnyObject, Sendable {
    var id: Int { get }
    var confirmationCode: ConfirmationCode { get }
    /// The session key the wallet proved in its Hello.
    var sessionKey: PublicKeyBytes? { get }
    func send(_ message: SessionMessage)
    func close()
    /// The wallet may ask about (and acknowledge) this request id from now on.
    func proved(_ id: PaymentID)
}

extension TerminalConnection: SessionWallet {}

/// What the session's state machine asks its driver to do, in order.
enum SessionHostAction: Sendable, CustomStringConvertible {
    /// Route the session's connections to this host.
    case register(SessionID)
    /// Publish the host's state (observers, streams).
    case setState(HostState)
    case notice(WalletNotice)
    case send(SessionMessage, to: any SessionWallet)
    case close(any SessionWallet)
    /// Leave the wallet time to read the last message (`lingerAfterReceipt`), then close.
    case closeLater(any SessionWallet)
    case proved(PaymentID, by: any SessionWallet)
    /// Journal the session's `offered` step, then report `offerJournaled` or `offerNotJournaled`:
    /// no offer leaves before it is on record.
    case journalOffer(Offer, walletKey: PublicKeyBytes, for: any SessionWallet)
    /// Schedule `decisionTimedOut` for the wallet (by connection id) and report the timer with
    /// `decisionTimerArmed`, both with this arming's generation.
    case armDecisionTimer(SessionID, wallet: Int, after: Duration, generation: Int)
    case cancelTimer(ScheduledAction)
    /// Journal the request as confirmed and submitted, await the processor off the scheduler,
    /// journal its answer, then report `executed`.
    case execute(JournalRequest, by: any SessionWallet, session: SessionID, at: UnixTime)
    /// The wallet's session stops counting against its session rate.
    case sessionExecuted(SessionID, by: any SessionWallet)
    /// Stop advertising, cancel the decision timers, stop routing the session's connections here.
    case release(SessionID, advertising: (any AdvertisingSet)?, decisionTimers: [ScheduledAction])
    /// Tell the facade (events, notifications).
    case finished(FinishedSession)
    case log(Logger.Level, Logger.Message, session: SessionID?, payment: PaymentID? = nil, Logger.Metadata = [:])

    /// A short name for tests and traces: what is done, to which connection.
    var description: String {
        switch self {
        case .register: "register"
        case .setState(let state): "state \(state)"
        case .notice(.offered): "notice offered"
        case .notice(.declined): "notice declined"
        case .notice(.decisionTimedOut): "notice decision timed out"
        case .notice(.requestDeclined): "notice request declined"
        case .send(let message, let wallet): "send \(Self.name(of: message)) to \(wallet.id)"
        case .close(let wallet): "close \(wallet.id)"
        case .closeLater(let wallet): "close \(wallet.id) later"
        case .proved(_, let wallet): "proved by \(wallet.id)"
        case .journalOffer(_, _, let wallet): "journal offer for \(wallet.id)"
        case .armDecisionTimer: "arm decision timer"
        case .cancelTimer: "cancel timer"
        case .execute(_, let wallet, _, _): "execute for \(wallet.id)"
        case .sessionExecuted(_, let wallet): "session executed by \(wallet.id)"
        case .release: "release"
        case .finished(let finished): "finished \(finished.error.map { "\($0)" } ?? "completed")"
        case .log(_, let message, _, _, _): "log \(message)"
        }
    }

    private static func name(of message: SessionMessage) -> String {
        switch message {
        case .offer: "offer"
        case .receipt: "receipt"
        case .cancel: "cancel"
        case .error(let error): "error \(error.code)"
        default: "\(message.type)"
        }
    }
}

/// The terminal's session protocol as a value: each event (a command at the register, a wallet's
/// message, a timer, the processor's answer) goes in, the new state is kept and the actions come
/// out for the driver (`SessionHost`) to carry out in order. No I/O, no clock, no locks: the
/// driver applies one event at a time, so what an event checks and what it decides cannot be
/// separated by another event.
///
/// Nobody owns a session by saying hello: every wallet that proves its session key gets the
/// offer (journaled once per session), and the session is taken only by the first signed request
/// that checks out. A decline ends nothing but the decliner's part, and so do a decision time
/// running out (each wallet has its own, from its own offer) and a request the server declines or
/// the processor refuses: anyone in range can say hello, wait, or send a confirmation signed by a
/// key nobody registered, so none of these may end the customer's sale. The sale ends when a
/// request executes (approved, accepted offline, or outcome unknown) or at the register. From the
/// moment a request takes the session until its outcome is in, the session can be neither
/// cancelled nor timed out: it may be executing, so it must never be reported as not charged.
struct SessionHostStateMachine: Sendable {
    /// Checks requests against the session (the part that differs between payments and
    /// redemptions); the machine never calls its `execute`.
    let executor: any SessionExecutor
    let userDecisionTimeout: Duration

    private(set) var state: HostState = .idle
    private(set) var session: HostedSession?
    private(set) var result: SettlementResult?
    /// The session's payment, when the terminal accepted it offline rather than the
    /// server settling it.
    private(set) var acceptedOffline: OfflinePaymentRecord?
    private(set) var error: HostError?
    private(set) var isCancelled = false
    /// Between `start` and `opened`/`openFailed`: the offer is being signed and advertised.
    private var isOpening = false
    /// The request being executed: from the moment it took the session until its outcome is in,
    /// even if the session was stopped meanwhile (its wallet still gets the answer).
    private var inFlight: (session: HostedSession, wallet: any SessionWallet, requestID: PaymentID)?

    init(executor: any SessionExecutor, userDecisionTimeout: Duration) {
        self.executor = executor
        self.userDecisionTimeout = userDecisionTimeout
    }

    var transactionType: TransactionType { executor.transactionType }

    // MARK: Commands at the register

    enum StartDecision: Sendable, Equatable {
        /// Not started; `error` says why.
        case refused
        /// Sign and advertise an offer for the terms, then report `opened` or `openFailed`.
        case open
    }

    /// The register asks for a session; `refusal` is the facade's own verdict on the terms, which
    /// counts only if no session is running.
    mutating func start(refusal: HostError?) -> StartDecision {
        if isOpening || (session != nil && !state.isFinished) {
            error = .alreadyRunning
            return .refused
        }
        if let refusal {
            error = refusal
            return .refused
        }
        isOpening = true
        return .open
    }

    /// The offer is signed and advertised.
    mutating func opened(_ newSession: HostedSession) -> [SessionHostAction] {
        isOpening = false
        session = newSession
        result = nil
        acceptedOffline = nil
        error = nil
        isCancelled = false
        state = .waitingForWallet
        let terms = newSession.terms
        return [
            .register(newSession.id),
            .log(
                .info, "session opened", session: newSession.id,
                [
                    "type": "\(transactionType)", "amount": "\(terms.amount)",
                    "registerUser": "\(terms.registerUser)",
                ]),
            .setState(.waitingForWallet),
        ]
    }

    /// Signing or advertising failed: no session.
    mutating func openFailed(_ failure: HostError) {
        isOpening = false
        error = failure
    }

    /// Ends the session and returns to idle; nil if idle already. The wallet that was answered
    /// still owes its acknowledgement (a journal step): it keeps the linger time it was given.
    mutating func stop() -> [SessionHostAction]? {
        guard var ending = session else {
            guard state != .idle else { return nil }
            state = .idle
            return [.setState(.idle)]
        }
        session = nil
        var actions = release(&ending)
        for (id, wallet) in ending.wallets {
            actions.append(id == ending.executing ? .closeLater(wallet) : .close(wallet))
        }
        state = .idle
        actions.append(.setState(.idle))
        return actions
    }

    /// Cancels the session at the register: the wallets are told, nothing is executed. Ignored
    /// once a request took the session: it may be executing, and its outcome decides.
    mutating func cancel() -> [SessionHostAction] {
        guard !state.isFinished, state != .idle, state != .acquiringPaymentExecution else { return [] }
        isCancelled = true
        return finish(error: .cancelled)
    }

    // MARK: Wallet messages

    /// A Hello whose session key the service verified: the wallet gets the offer unless the
    /// session is over. The session's first offer is journaled before it leaves. While another
    /// wallet's request executes the offer is still given: that request may be a stranger's
    /// (any central can sign one with a key nobody registered) and be declined in a moment, and
    /// the customer arriving meanwhile must still find the sale. If it is approved instead, the
    /// wallets still looking are told the session is over, as at every end.
    mutating func hello(_ hello: Hello, from wallet: any SessionWallet) -> [SessionHostAction] {
        func refuse(_ code: ErrorCode, _ message: String) -> [SessionHostAction] {
            [.send(.error(ErrorMessage(code: code, message: message)), to: wallet), .closeLater(wallet)]
        }
        guard var current = session, hello.sessionID == current.id, !state.isFinished else {
            return refuse(.sessionNotFound, "this session is over")
        }
        guard hello.transactionType == transactionType else {
            return refuse(.protocolViolation, "this session is a \(transactionType)")
        }
        current.wallets[wallet.id] = wallet
        let journal = !current.offerJournaled
        current.offerJournaled = true
        session = current
        if journal { return [.journalOffer(current.offer, walletKey: hello.sessionKey, for: wallet)] }
        return offerSent(current, to: wallet)
    }

    /// The session's `offered` step is on record: the offer goes out.
    mutating func offerJournaled(for wallet: any SessionWallet, session sessionID: SessionID) -> [SessionHostAction] {
        guard let current = session, current.id == sessionID else { return [] }
        return offerSent(current, to: wallet)
    }

    /// The `offered` step could not be journaled: no offer leaves unless it is on record; the
    /// wallet may try again.
    mutating func offerNotJournaled(for wallet: any SessionWallet, session sessionID: SessionID, reason: String)
        -> [SessionHostAction]
    {
        if session?.id == sessionID {
            session?.offerJournaled = false
            session?.wallets[wallet.id] = nil
        }
        return [
            .log(
                .error, "the offer could not be journaled; not sent", session: sessionID, payment: nil,
                ["error": "\(reason)"]),
            .send(
                .error(ErrorMessage(code: .internalError, message: "the terminal cannot record the session now")),
                to: wallet),
        ]
    }

    private mutating func offerSent(_ current: HostedSession, to wallet: any SessionWallet) -> [SessionHostAction] {
        // One allocation for the handful of actions an event gives, not one per doubling.
        var actions: [SessionHostAction] = []
        actions.reserveCapacity(8)
        if state == .waitingForWallet {
            state = .walletConnected
            actions.append(.setState(.walletConnected))
        }
        actions.append(.send(.offer(current.offer), to: wallet))
        if state == .walletConnected {
            state = .awaitingUserDecision
            actions.append(.setState(.awaitingUserDecision))
        }
        actions.append(.notice(.offered(wallet.confirmationCode)))
        actions.append(
            .log(.info, "offer sent", session: current.id, payment: nil, ["code": "\(wallet.confirmationCode)"]))
        // Each wallet's decision time runs from its own offer and ends only its own attempt: the
        // wallet just offered may be the customer's, however long another central has waited.
        if let earlier = current.decisions[wallet.id]?.timer { actions.append(.cancelTimer(earlier)) }
        let generation = current.decisionGeneration + 1
        session?.decisionGeneration = generation
        session?.decisions[wallet.id] = WalletDecision(generation: generation)
        actions.append(
            .armDecisionTimer(current.id, wallet: wallet.id, after: userDecisionTimeout, generation: generation))
        return actions
    }

    /// A wallet's decision timer is scheduled: kept, to cancel when the wallet leaves or the
    /// session ends (or cancelled now if either happened already).
    mutating func decisionTimerArmed(
        _ timer: ScheduledAction, session sessionID: SessionID, wallet walletID: Int, generation: Int
    ) -> [SessionHostAction] {
        guard let current = session, current.id == sessionID, !current.isReleased,
            let decision = current.decisions[walletID], decision.generation == generation, decision.timer == nil
        else {
            return [.cancelTimer(timer)]
        }
        session?.decisions[walletID]?.timer = timer
        return []
    }

    /// A wallet did not decide in time: its attempt ends (it is told, and closed), and the session
    /// waits for the others, or for a wallet as it did before the first came. Never the sale: the
    /// wallet may be anyone's. The wallet whose request executes is past deciding.
    mutating func decisionTimedOut(session sessionID: SessionID, wallet walletID: Int, generation: Int)
        -> [SessionHostAction]
    {
        guard var current = session, current.id == sessionID, !current.isReleased,
            current.decisions[walletID]?.generation == generation
        else { return [] }
        current.decisions[walletID] = nil
        guard current.executing != walletID, !state.isFinished,
            let wallet = current.wallets.removeValue(forKey: walletID)
        else {
            session = current
            return []
        }
        current.timedOut.insert(walletID)
        session = current
        var actions: [SessionHostAction] = [
            .send(
                .cancel(Cancel(sessionID: sessionID, reason: .timedOut, message: "no decision in time")), to: wallet),
            .closeLater(wallet),
            .log(
                .info, "a wallet did not decide in time; the session stays open", session: sessionID, payment: nil,
                ["code": "\(wallet.confirmationCode)"]),
            .notice(.decisionTimedOut(wallet.confirmationCode)),
        ]
        actions += nobodyLeftDeciding()
        return actions
    }

    /// A wallet declines for itself only: its connection leaves the session, which stays open for
    /// the customer's wallet (a decline is unauthenticated as far as the sale is concerned: any
    /// central can send one). The register hears of it with the wallet's code.
    mutating func walletCancelled(_ cancel: Cancel, by wallet: any SessionWallet) -> [SessionHostAction] {
        guard var current = session, current.id == cancel.sessionID, current.executing != wallet.id,
            current.wallets.removeValue(forKey: wallet.id) != nil
        else { return [] }
        let timer = current.decisions.removeValue(forKey: wallet.id)?.timer
        session = current
        guard !state.isFinished else { return [] }
        var actions: [SessionHostAction] = [
            .closeLater(wallet),
            .log(
                .info, "a wallet declined", session: cancel.sessionID, payment: nil,
                ["code": "\(wallet.confirmationCode)"]),
            .notice(.declined(wallet.confirmationCode)),
        ]
        if let timer { actions.append(.cancelTimer(timer)) }
        actions += nobodyLeftDeciding()
        return actions
    }

    /// A signed request (a payment's Confirm, a redemption's Redeem), received at `now`: refused,
    /// or the first valid one takes the session and is executed.
    mutating func request(_ message: SessionMessage, from wallet: any SessionWallet, now: UnixTime)
        -> [SessionHostAction]
    {
        let requestID = Self.requestID(of: message)
        func refuse(_ code: ErrorCode, _ text: String) -> [SessionHostAction] {
            [.send(.error(ErrorMessage(code: code, message: text, paymentID: requestID)), to: wallet)]
        }
        // While a request executes (its processor may take a while), another one is checked and
        // then refused as `sessionTaken` below, never executed.
        guard let current = session, message.sessionID == current.id, !current.isReleased, !state.isFinished
        else { return refuse(.sessionExpired, "this session no longer takes requests; nothing was executed") }
        // The session is open, but this connection has no attempt in it: its decision time ran
        // out, it was answered already, or it never said hello.
        guard current.wallets[wallet.id] != nil else {
            if current.timedOut.contains(wallet.id) {
                return refuse(.timedOut, "your decision time ran out; nothing was executed")
            }
            return refuse(.protocolViolation, "say hello first; nothing was executed")
        }
        let request: JournalRequest
        switch executor.check(message, session: current, now: now) {
        case .unexpected:
            return [
                .send(
                    .error(
                        ErrorMessage(code: .protocolViolation, message: "unexpected \(message.type) in this session")),
                    to: wallet)
            ]
        case .refused(let error):
            return [
                .log(
                    .notice, "request refused", session: current.id, payment: requestID,
                    ["code": "\(error.code)", "reason": "\(error.message)"]),
                .send(.error(error), to: wallet),
            ]
        case .accepted(let accepted): request = accepted
        }
        // The first valid request takes the session; a second one (another wallet, or the same
        // racing itself with another id) is refused, never executed.
        guard current.executing == nil, inFlight?.session.id != current.id else {
            return [
                .send(
                    .error(
                        ErrorMessage(
                            code: .sessionTaken, message: "another request is already being executed in this session",
                            paymentID: request.id)), to: wallet)
            ]
        }
        session?.executing = wallet.id
        // Past deciding: its timer stops (the others' run on; their attempts may follow a decline).
        let timer = session?.decisions.removeValue(forKey: wallet.id)?.timer
        if let taken = session { inFlight = (taken, wallet, request.id) }
        state = .acquiringPaymentExecution
        return (timer.map { [.cancelTimer($0)] } ?? []) + [
            .proved(request.id, by: wallet),
            .log(.info, "executing the request", session: current.id, payment: request.id),
            .setState(.acquiringPaymentExecution),
            .execute(request, by: wallet, session: current.id, at: now),
        ]
    }

    /// The executing request's outcome, journaled: the wallet gets its answer. An execution
    /// (approved, accepted offline, or not known yet) ends the session; a decline or a refusal
    /// with nothing executed ends only that wallet's attempt, and the session takes the others'
    /// requests again. If the session was stopped meanwhile, the wallet still gets the answer and
    /// the facade still hears of the outcome; the host stays idle.
    mutating func executed(_ outcome: JournaledOutcome, session sessionID: SessionID) -> [SessionHostAction] {
        guard let (executedSession, wallet, requestID) = inFlight, executedSession.id == sessionID else { return [] }
        inFlight = nil
        let isCurrent = session?.id == sessionID && state == .acquiringPaymentExecution
        var actions: [SessionHostAction]
        let ending: HostError?
        var offline: OfflinePaymentRecord?
        switch outcome {
        case .acceptedOffline(let record, let answer):
            actions = [
                .log(
                    .notice, "accepted offline against the wallet's daily token; forwarded when the server is back",
                    session: sessionID, payment: requestID, ["total": "\(record.totalMinorUnits)"]),
                .sessionExecuted(sessionID, by: wallet), .send(answer, to: wallet), .closeLater(wallet),
            ]
            ending = nil
            offline = record
            if isCurrent { acceptedOffline = record }
        case .refused(let error, let reason):
            actions = [
                .log(
                    .notice, "refused by the processor; nothing was executed", session: sessionID,
                    payment: requestID, ["reason": "\(reason)"]),
                .send(.error(error), to: wallet), .closeLater(wallet),
            ]
            ending = .processorFailure(reason)
        case .undecided(let error, let reason, let serverUnreachable):
            actions = [
                .log(
                    serverUnreachable ? .warning : .error,
                    serverUnreachable
                        ? "the server did not answer; pending, settled at the next recovery"
                        : "outcome not recorded; settled at the next recovery",
                    session: sessionID, payment: requestID, ["reason": "\(reason)"]),
                .send(.error(error), to: wallet), .closeLater(wallet),
            ]
            ending = serverUnreachable ? .serverUnreachable(reason) : .outcomeUnknown(reason)
        case .executed(let settled, let answer):
            actions = [
                .log(
                    .info, "settled", session: sessionID, payment: requestID,
                    ["outcome": "\(settled.outcome.logText)", "tip": "\(settled.tip)"]),
                .sessionExecuted(sessionID, by: wallet), .send(answer, to: wallet), .closeLater(wallet),
            ]
            switch settled.outcome {
            case .approved: ending = nil
            case .declined(let code, let reason): ending = .declined(code: code, reason: reason)
            }
            if isCurrent { result = settled }
        }
        guard isCurrent else {
            let settled: SettlementResult? = if case .executed(let settled, _) = outcome { settled } else { nil }
            actions.append(
                .log(
                    .notice, "the request's outcome came in after the session was stopped", session: sessionID,
                    payment: requestID))
            actions.append(
                .finished(
                    FinishedSession(
                        session: executedSession, result: ending == nil ? settled : nil, error: ending,
                        acceptedOffline: offline)))
            return actions
        }
        switch ending {
        case .declined(let code, let reason)?: return actions + attemptEnded(by: wallet, code: code, reason: reason)
        case .processorFailure(let reason)?:
            let code = if case .refused(let error, _) = outcome { error.code } else { ErrorCode.declined }
            return actions + attemptEnded(by: wallet, code: code, reason: reason)
        default: return actions + finish(error: ending)
        }
    }

    /// The executing wallet's request was declined or refused, nothing executed for the sale:
    /// that wallet's attempt is over (it has its answer and is closed), and the session is open
    /// again for the wallets still deciding, or for a wallet as before the first came. Anyone in
    /// range can get a decline (a key nobody registered), so it must not end the customer's sale.
    private mutating func attemptEnded(by wallet: any SessionWallet, code: ErrorCode, reason: String)
        -> [SessionHostAction]
    {
        guard var current = session else { return [] }
        current.executing = nil
        current.wallets[wallet.id] = nil
        session = current
        state = current.wallets.isEmpty ? .waitingForWallet : .awaitingUserDecision
        return [
            .log(
                .notice, "that wallet's attempt is over; the session stays open", session: current.id, payment: nil,
                ["code": "\(wallet.confirmationCode)", "decline": "\(code)"]),
            .notice(.requestDeclined(wallet.confirmationCode, code: code, reason: reason)),
            .setState(state),
        ]
    }

    /// A wallet's connection ended. It may come back (a new connection, a new hello and its own
    /// decision time); the wallet whose request executes stays in the session.
    mutating func connectionEnded(_ wallet: any SessionWallet) -> [SessionHostAction] {
        guard var current = session else { return [] }
        current.timedOut.remove(wallet.id)
        guard current.executing != wallet.id, current.wallets.removeValue(forKey: wallet.id) != nil else {
            session = current
            return []
        }
        let timer = current.decisions.removeValue(forKey: wallet.id)?.timer
        session = current
        return (timer.map { [.cancelTimer($0)] } ?? []) + nobodyLeftDeciding()
    }

    /// When no wallet is left looking at the offer, the session waits for a wallet as it did
    /// before the first one came.
    private mutating func nobodyLeftDeciding() -> [SessionHostAction] {
        guard let current = session, current.wallets.isEmpty,
            state == .walletConnected || state == .awaitingUserDecision
        else { return [] }
        state = .waitingForWallet
        return [.setState(.waitingForWallet)]
    }

    /// Whether the session waits on this connection's wallet (deciding, or its request executing).
    func isAwaitingWallet(_ walletID: Int) -> Bool {
        switch state {
        case .walletConnected, .awaitingUserDecision, .acquiringPaymentExecution:
            return session?.wallets[walletID] != nil
        default: return false
        }
    }

    // MARK: Ending

    private mutating func finish(error ending: HostError?) -> [SessionHostAction] {
        error = ending
        guard var current = session else { return [] }
        var actions = release(&current)
        session = current
        // Wallets still looking at the offer are told why the session is over.
        let why: Cancel
        switch ending {
        case .cancelled?:
            why = Cancel(sessionID: current.id, reason: .terminalCancelled, message: "cancelled at the register")
        case .decisionTimedOut?: why = Cancel(sessionID: current.id, reason: .timedOut, message: "no decision in time")
        default: why = Cancel(sessionID: current.id, reason: .terminalCancelled, message: "the session is over")
        }
        for (id, wallet) in current.wallets where id != current.executing {
            actions.append(.send(.cancel(why), to: wallet))
            actions.append(.closeLater(wallet))
        }
        actions.append(
            .log(
                .info, "session ended", session: current.id, payment: nil,
                ["outcome": "\(ending.map { "\($0)" } ?? "completed")"]))
        state = ending == nil ? .completed : .completedWithError
        actions.append(.setState(state))
        actions.append(
            .finished(
                FinishedSession(
                    session: current, result: ending == nil ? result : nil, error: ending,
                    acceptedOffline: ending == nil ? acceptedOffline : nil)))
        return actions
    }

    /// The session stops advertising and taking connections; its timers stop.
    private func release(_ ending: inout HostedSession) -> [SessionHostAction] {
        defer {
            ending.advertising = nil
            ending.decisions = [:]
            ending.isReleased = true
        }
        return [
            .release(
                ending.id, advertising: ending.advertising, decisionTimers: ending.decisions.values.compactMap(\.timer))
        ]
    }

    /// The payment or redemption id a request names.
    static func requestID(of message: SessionMessage) -> PaymentID? {
        switch message {
        case .confirm(let confirm): confirm.paymentID
        case .redeem(let redeem): redeem.redemptionID
        default: nil
        }
    }
}

extension SettlementOutcome {
    /// The outcome as the log shows it (the text string interpolation gives), written out:
    /// interpolating the enum itself reflects on its payload (`Mirror`), about 150,000
    /// instructions a payment, paid whether or not anything logs, since an action's metadata is
    /// built when the machine returns it.
    var logText: String {
        switch self {
        case .approved(let reference, let earned, let balance):
            "approved(reference: \(reference), bonusPointsEarned: \(earned), bonusPointsBalance: \(balance))"
        case .declined(let code, let reason): "declined(code: \(code), reason: \(reason.debugDescription))"
        }
    }
}
