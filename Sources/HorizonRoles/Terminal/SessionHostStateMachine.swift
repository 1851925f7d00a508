import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonSecureChannel
import HorizonSettlement
import HorizonStores
import Logging

/// A wallet's connection as the session's state machine sees it: the connection's id, which the
/// machine names in its actions (the driver maps it to the connection and does the I/O), and the
/// code both sides show.
struct SessionWallet: Sendable, Hashable {
    let id: Int
    let confirmationCode: ConfirmationCode
}

extension TerminalConnection {
    /// This connection as a session's state machine sees it.
    var sessionWallet: SessionWallet { SessionWallet(id: id, confirmationCode: confirmationCode) }
}

/// What the session's state machine asks its driver to do, in order. Values only: connections are
/// named by id, timers by what they guard, so a test compares actions with `==`.
enum SessionHostAction: Sendable, Equatable {
    /// Route the session's connections to this host.
    case register(SessionID)
    /// Publish the host's state (observers, streams).
    case setState(HostState)
    case notice(WalletNotice)
    /// Send on the connection with this id (if it is still open).
    case send(SessionMessage, to: Int)
    case close(Int)
    /// Leave the wallet time to read the last message (`lingerAfterReceipt`), then close.
    case closeLater(Int)
    /// The connection may ask about (and acknowledge) this request id from now on.
    case proved(PaymentID, by: Int)
    /// Journal the session's `offered` step, then report `offerJournaled` or `offerNotJournaled`:
    /// no offer leaves before it is on record.
    case journalOffer(Offer, walletKey: PublicKeyBytes, for: SessionWallet)
    /// Schedule `decisionTimedOut` for the wallet (by connection id) with this arming's generation.
    case armDecisionTimer(SessionID, wallet: Int, after: Duration, generation: Int)
    /// Cancel the timer of that arming, if it has not fired.
    case cancelDecisionTimer(SessionID, wallet: Int, generation: Int)
    /// Journal the request as confirmed and submitted, await the processor off the scheduler,
    /// journal its answer, then report `executed`.
    case execute(JournalRequest, by: SessionWallet, session: SessionID, at: UnixTime)
    /// The session the wallet with this session key opened stops counting against its session rate.
    case sessionExecuted(SessionID, walletKey: PublicKeyBytes)
    /// Stop advertising the session, cancel its decision timers, stop routing its connections here.
    case release(SessionID)
    /// Tell the facade (events, notifications).
    case finished(FinishedSession)
    case log(Logger.Level, Logger.Message, session: SessionID?, payment: PaymentID? = nil, Logger.Metadata = [:])
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
    /// What the latest request executed in the session came to. One value, so a payment accepted
    /// offline replaces the result of an attempt declined before it, and is never read together
    /// with it.
    private(set) var execution: Execution?

    enum Execution: Sendable, Equatable {
        /// The processor's answer.
        case settled(SettlementResult)
        /// The terminal accepted the payment offline rather than the server settling it.
        case acceptedOffline(OfflinePaymentRecord)
    }

    var result: SettlementResult? { if case .settled(let result)? = execution { result } else { nil } }
    /// The session's payment, when the terminal accepted it offline.
    var acceptedOffline: OfflinePaymentRecord? {
        if case .acceptedOffline(let record)? = execution { record } else { nil }
    }
    private(set) var error: HostError?
    private(set) var isCancelled = false
    /// Between `start` and `opened`/`openFailed`: the offer is being signed and advertised. The
    /// radio registers an advertisement asynchronously, so a stop or cancel can come first; the
    /// opening is then abandoned and its late advertisement withdrawn.
    private(set) var opening: Int?
    /// Openings started so far: each gets its own number, so a late answer cannot open a newer one.
    private var openings = 0
    /// The opening that failed last, so `start` can tell its caller when it failed at once.
    private(set) var failedOpening: Int?
    /// The request being executed: from the moment it took the session until its outcome is in,
    /// even if the session was stopped meanwhile (its wallet still gets the answer).
    private var inFlight: InFlight?

    /// The request that took a session, until its outcome is in.
    private struct InFlight: Sendable {
        let session: HostedSession
        let wallet: OfferedWallet
        let requestID: PaymentID
    }

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
        if opening != nil || (session != nil && !state.isFinished) {
            error = .alreadyRunning
            return .refused
        }
        if let refusal {
            error = refusal
            return .refused
        }
        openings += 1
        opening = openings
        return .open
    }

    /// The offer is signed and advertised.
    mutating func opened(_ newSession: HostedSession) -> [SessionHostAction] {
        opening = nil
        session = newSession
        execution = nil
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

    /// The advertisement of opening `number` is up: the session opens, unless the opening was
    /// stopped or cancelled meanwhile (nil: withdraw the advertisement).
    mutating func advertised(_ newSession: HostedSession, opening number: Int) -> [SessionHostAction]? {
        guard opening == number else { return nil }
        return opened(newSession)
    }

    /// Signing or advertising failed: no session. A failure that comes after `start` returned
    /// (`announce`) ends the attempt as `completedWithError`, so whoever waits for the session
    /// to finish hears of it. Nothing when opening `number` was abandoned already.
    @discardableResult
    mutating func openFailed(_ failure: HostError, opening number: Int? = nil, announce: Bool = false)
        -> [SessionHostAction]
    {
        let failing = number ?? opening
        guard failing != nil, failing == opening else { return [] }
        opening = nil
        failedOpening = failing
        error = failure
        guard announce else { return [] }
        state = .completedWithError
        return [.setState(.completedWithError)]
    }

    /// Ends the session and returns to idle; nil if idle already. The wallet that was answered
    /// still owes its acknowledgement (a journal step): it keeps the linger time it was given.
    mutating func stop() -> [SessionHostAction]? {
        // An opening under way is abandoned: its advertisement is withdrawn when it is up.
        let abandoned = opening != nil
        opening = nil
        guard var ending = session else {
            guard state != .idle else { return abandoned ? [] : nil }
            state = .idle
            return [.setState(.idle)]
        }
        session = nil
        var actions = release(&ending)
        for id in ending.wallets.keys {
            actions.append(id == ending.executing ? .closeLater(id) : .close(id))
        }
        state = .idle
        actions.append(.setState(.idle))
        return actions
    }

    /// Cancels the session at the register: the wallets are told, nothing is executed. Ignored
    /// once a request took the session: it may be executing, and its outcome decides.
    mutating func cancel() -> [SessionHostAction] {
        if opening != nil {
            // No wallet can have the offer yet: the attempt simply ends, cancelled.
            opening = nil
            isCancelled = true
            error = .cancelled
            state = .completedWithError
            return [.setState(.completedWithError)]
        }
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
    mutating func hello(_ hello: Hello, from wallet: SessionWallet) -> [SessionHostAction] {
        func refuse(_ code: ErrorCode, _ message: String) -> [SessionHostAction] {
            [.send(.error(ErrorMessage(code: code, message: message)), to: wallet.id), .closeLater(wallet.id)]
        }
        guard var current = session, hello.sessionID == current.id, !state.isFinished else {
            return refuse(.sessionNotFound, "this session is over")
        }
        guard hello.transactionType == transactionType else {
            return refuse(.protocolViolation, "this session is a \(transactionType)")
        }
        current.wallets[wallet.id] = OfferedWallet(wallet: wallet, sessionKey: hello.sessionKey)
        let journal = !current.offerJournaled
        current.offerJournaled = true
        session = current
        if journal { return [.journalOffer(current.offer, walletKey: hello.sessionKey, for: wallet)] }
        return offerSent(current, to: wallet)
    }

    /// The session's `offered` step is on record: the offer goes out.
    mutating func offerJournaled(for wallet: SessionWallet, session sessionID: SessionID) -> [SessionHostAction] {
        guard let current = session, current.id == sessionID else { return [] }
        return offerSent(current, to: wallet)
    }

    /// The `offered` step could not be journaled: no offer leaves unless it is on record; the
    /// wallet may try again.
    mutating func offerNotJournaled(for wallet: SessionWallet, session sessionID: SessionID, reason: String)
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
                to: wallet.id),
        ]
    }

    private mutating func offerSent(_ current: HostedSession, to wallet: SessionWallet) -> [SessionHostAction] {
        // One allocation for the handful of actions an event gives, not one per doubling.
        var actions: [SessionHostAction] = []
        actions.reserveCapacity(8)
        if state == .waitingForWallet {
            state = .walletConnected
            actions.append(.setState(.walletConnected))
        }
        actions.append(.send(.offer(current.offer), to: wallet.id))
        if state == .walletConnected {
            state = .awaitingUserDecision
            actions.append(.setState(.awaitingUserDecision))
        }
        actions.append(.notice(.offered(wallet.confirmationCode)))
        actions.append(
            .log(.info, "offer sent", session: current.id, payment: nil, ["code": "\(wallet.confirmationCode)"]))
        // Each wallet's decision time runs from its own offer and ends only its own attempt: the
        // wallet just offered may be the customer's, however long another central has waited.
        if let earlier = current.decisions[wallet.id] {
            actions.append(.cancelDecisionTimer(current.id, wallet: wallet.id, generation: earlier))
        }
        let generation = current.decisionGeneration + 1
        session?.decisionGeneration = generation
        session?.decisions[wallet.id] = generation
        actions.append(
            .armDecisionTimer(current.id, wallet: wallet.id, after: userDecisionTimeout, generation: generation))
        return actions
    }

    /// A wallet did not decide in time: its attempt ends (it is told, and closed), and the session
    /// waits for the others, or for a wallet as it did before the first came. Never the sale: the
    /// wallet may be anyone's. The wallet whose request executes is past deciding.
    mutating func decisionTimedOut(session sessionID: SessionID, wallet walletID: Int, generation: Int)
        -> [SessionHostAction]
    {
        guard var current = session, current.id == sessionID, !current.isReleased,
            current.decisions[walletID] == generation
        else { return [] }
        current.decisions[walletID] = nil
        guard current.executing != walletID, !state.isFinished,
            let wallet = current.wallets.removeValue(forKey: walletID)?.wallet
        else {
            session = current
            return []
        }
        current.timedOut.insert(walletID)
        session = current
        var actions: [SessionHostAction] = [
            .send(
                .cancel(Cancel(sessionID: sessionID, reason: .timedOut, message: "no decision in time")),
                to: walletID),
            .closeLater(walletID),
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
    mutating func walletCancelled(_ cancel: Cancel, by wallet: SessionWallet) -> [SessionHostAction] {
        guard var current = session, current.id == cancel.sessionID, current.executing != wallet.id,
            current.wallets.removeValue(forKey: wallet.id) != nil
        else { return [] }
        let decision = current.decisions.removeValue(forKey: wallet.id)
        session = current
        guard !state.isFinished else { return [] }
        var actions: [SessionHostAction] = [
            .closeLater(wallet.id),
            .log(
                .info, "a wallet declined", session: cancel.sessionID, payment: nil,
                ["code": "\(wallet.confirmationCode)"]),
            .notice(.declined(wallet.confirmationCode)),
        ]
        if let decision {
            actions.append(.cancelDecisionTimer(cancel.sessionID, wallet: wallet.id, generation: decision))
        }
        actions += nobodyLeftDeciding()
        return actions
    }

    /// A signed request (a payment's Confirm, a redemption's Redeem), received at `now`: refused,
    /// or the first valid one takes the session and is executed.
    mutating func request(_ message: SessionMessage, from wallet: SessionWallet, now: UnixTime)
        -> [SessionHostAction]
    {
        let requestID = Self.requestID(of: message)
        func refuse(_ code: ErrorCode, _ text: String) -> [SessionHostAction] {
            [.send(.error(ErrorMessage(code: code, message: text, paymentID: requestID)), to: wallet.id)]
        }
        // While a request executes (its processor may take a while), another one is checked and
        // then refused as `sessionTaken` below, never executed.
        guard let current = session, message.sessionID == current.id, !current.isReleased, !state.isFinished
        else { return refuse(.sessionExpired, "this session no longer takes requests; nothing was executed") }
        // The session is open, but this connection has no attempt in it: its decision time ran
        // out, it was answered already, or it never said hello.
        guard let offered = current.wallets[wallet.id] else {
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
                    to: wallet.id)
            ]
        case .refused(let error):
            return [
                .log(
                    .notice, "request refused", session: current.id, payment: requestID,
                    ["code": "\(error.code)", "reason": "\(error.message)"]),
                .send(.error(error), to: wallet.id),
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
                            paymentID: request.id)), to: wallet.id)
            ]
        }
        session?.executing = wallet.id
        // Past deciding: its timer stops (the others' run on; their attempts may follow a decline).
        let decision = session?.decisions.removeValue(forKey: wallet.id)
        if let taken = session { inFlight = InFlight(session: taken, wallet: offered, requestID: request.id) }
        state = .acquiringPaymentExecution
        return (decision.map { [.cancelDecisionTimer(current.id, wallet: wallet.id, generation: $0)] } ?? []) + [
            .proved(request.id, by: wallet.id),
            .log(.info, "executing the request", session: current.id, payment: request.id),
            .setState(.acquiringPaymentExecution),
            .execute(request, by: offered.wallet, session: current.id, at: now),
        ]
    }

    /// The executing request's outcome, journaled: the wallet gets its answer. An execution
    /// (approved, accepted offline, or not known yet) ends the session; a decline or a refusal
    /// with nothing executed ends only that wallet's attempt, and the session takes the others'
    /// requests again. If the session was stopped meanwhile, the wallet still gets the answer and
    /// the facade still hears of the outcome; the host stays idle.
    mutating func executed(_ outcome: JournaledOutcome, session sessionID: SessionID) -> [SessionHostAction] {
        guard let inFlight, inFlight.session.id == sessionID else { return [] }
        self.inFlight = nil
        let (executedSession, wallet, requestID) = (inFlight.session, inFlight.wallet.wallet, inFlight.requestID)
        let walletKey = inFlight.wallet.sessionKey
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
                .sessionExecuted(sessionID, walletKey: walletKey), .send(answer, to: wallet.id), .closeLater(wallet.id),
            ]
            ending = nil
            offline = record
            if isCurrent { execution = .acceptedOffline(record) }
        case .refused(let error, let reason):
            actions = [
                .log(
                    .notice, "refused by the processor; nothing was executed", session: sessionID,
                    payment: requestID, ["reason": "\(reason)"]),
                .send(.error(error), to: wallet.id), .closeLater(wallet.id),
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
                .send(.error(error), to: wallet.id), .closeLater(wallet.id),
            ]
            ending = serverUnreachable ? .serverUnreachable(reason) : .outcomeUnknown(reason)
        case .executed(let settled, let answer):
            actions = [
                .log(
                    .info, "settled", session: sessionID, payment: requestID,
                    ["outcome": "\(settled.outcome.logText)", "tip": "\(settled.tip)"]),
                .sessionExecuted(sessionID, walletKey: walletKey), .send(answer, to: wallet.id), .closeLater(wallet.id),
            ]
            switch settled.outcome {
            case .approved: ending = nil
            case .declined(let code, let reason): ending = .declined(code: code, reason: reason)
            }
            if isCurrent { execution = .settled(settled) }
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
    private mutating func attemptEnded(by wallet: SessionWallet, code: ErrorCode, reason: String)
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
    mutating func connectionEnded(_ wallet: SessionWallet) -> [SessionHostAction] {
        guard var current = session else { return [] }
        current.timedOut.remove(wallet.id)
        guard current.executing != wallet.id, current.wallets.removeValue(forKey: wallet.id) != nil else {
            session = current
            return []
        }
        let decision = current.decisions.removeValue(forKey: wallet.id)
        session = current
        return (decision.map { [.cancelDecisionTimer(current.id, wallet: wallet.id, generation: $0)] } ?? [])
            + nobodyLeftDeciding()
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
        for id in current.wallets.keys where id != current.executing {
            actions.append(.send(.cancel(why), to: id))
            actions.append(.closeLater(id))
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
        ending.decisions = [:]
        ending.isReleased = true
        return [.release(ending.id)]
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
