import Foundation
import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonSecureChannel
import HorizonStores
import Logging
import Synchronization

/// What the cashier asks for, as the signed offer states it.
struct OfferTerms: Sendable, Equatable {
    let amount: Money
    let registerUser: String
    let item: String
    let quantity: Int64
}

/// The session a host runs now.
///
/// Nobody owns a session by saying hello: every wallet that proves its session key gets the
/// offer, and the session is taken only by the first signed request that checks out. So a
/// central that completes the handshake and says hello (with any key, as often as it likes)
/// can neither take, nor end, nor block the session for the customer in front of the till.
struct HostedSession: Sendable {
    let id: SessionID
    let terms: OfferTerms
    let offer: Offer
    /// What a request must bind: the offer exactly as it went out.
    let offerDigest: DigestBytes
    var advertising: (any AdvertisingSet)?
    /// Connections that proved a session key and were sent the offer, by connection id.
    var wallets: [Int: TerminalConnection] = [:]
    /// The connection whose request is being executed: from then on the session is taken.
    var executing: Int?
    /// The `offered` step is journaled once per session, whatever the number of wallets.
    var offerJournaled = false
    var decisionTimer: ScheduledAction?

    var executingConnection: TerminalConnection? { executing.flatMap { wallets[$0] } }
}

/// What the register hears about wallets in its session: each shows the confirmation code the
/// wallet shows, so the cashier and the customer can compare them.
public enum WalletNotice: Sendable, Equatable {
    /// A wallet proved its session key and was sent the offer.
    case offered(ConfirmationCode)
    /// A wallet declined. The session stays open: any wallet can decline for itself only.
    case declined(ConfirmationCode)
}

/// What checking a wallet's request (a payment's Confirm, a redemption's Redeem) found.
enum RequestCheck: Sendable {
    /// Not a request this kind of session takes.
    case unexpected
    /// Refused before anything was executed; the session goes on.
    case refused(ErrorMessage)
    /// Signed by the session's wallet and true to its offer: to be executed.
    case accepted(JournalRequest)
}

/// The part that differs between a payment and the redemptions: checking the wallet's signed
/// request against the session, and executing it through its processor (exactly once per id, by
/// the processor's contract; the journal steps around it are the service's).
protocol SessionExecutor: Sendable {
    var transactionType: TransactionType { get }
    func check(_ message: SessionMessage, session: HostedSession, terminal: TerminalRadioService, now: UnixTime)
        -> RequestCheck
    func execute(_ request: JournalRequest, at now: UnixTime) throws(ProcessorError) -> SettlementResult
}

/// A finished session as a host reports it to its facade.
struct FinishedSession: Sendable {
    let session: HostedSession
    let result: SettlementResult?
    let error: HostError?
}

/// The session machinery shared by `PaymentHost` and `RedemptionHost`: advertise a signed offer,
/// offer it to every wallet that proves a session key, let the first valid signed request take
/// the session, bound the customer's decision in time, take cancellations,
/// hand the wallet's request to the executor, answer with a signed receipt, end and announce.
final class SessionHost: TerminalSessionHandler, Sendable {
    let service: TerminalRadioService
    let executor: any SessionExecutor
    let userDecisionTimeout: Duration
    let lingerAfterReceipt: Duration
    let merchantPrograms: MerchantPrograms
    let observable = ObservableState<HostState>(.idle)
    /// The latest wallet notice (nil before the first), for the register's display.
    let walletNotices = ObservableState<WalletNotice?>(nil)
    private let onFinish: @Sendable (FinishedSession) -> Void

    private struct State {
        var session: HostedSession?
        var result: SettlementResult?
        var error: HostError?
        var isCancelled = false
    }

    private let guarded = Mutex(State())

    init(
        service: TerminalRadioService, executor: any SessionExecutor, userDecisionTimeout: Duration,
        lingerAfterReceipt: Duration, merchantPrograms: MerchantPrograms,
        onFinish: @escaping @Sendable (FinishedSession) -> Void
    ) {
        self.service = service
        self.executor = executor
        self.userDecisionTimeout = userDecisionTimeout
        self.lingerAfterReceipt = lingerAfterReceipt
        self.merchantPrograms = merchantPrograms
        self.onFinish = onFinish
    }

    var state: HostState { observable.value }
    var session: HostedSession? { guarded.withLock { $0.session } }
    var result: SettlementResult? { guarded.withLock { $0.result } }
    var error: HostError? { guarded.withLock { $0.error } }
    var isCancelled: Bool { guarded.withLock { $0.isCancelled } }

    func setError(_ error: HostError) { guarded.withLock { $0.error = error } }

    // MARK: Commands

    /// Opens a session unless one is running or `validate` (the facade's own rules for the
    /// terms) objects; on refusal `error` says why. The one entry point both hosts use.
    func start(_ terms: OfferTerms, validate: () -> HostError?) -> Bool {
        if session != nil, !observable.value.isFinished {
            setError(.alreadyRunning)
            return false
        }
        if let refusal = validate() {
            setError(refusal)
            return false
        }
        return open(terms) == nil
    }

    /// Signs the offer for `terms` and advertises a new session. Nil on success, else why not.
    private func open(_ terms: OfferTerms) -> HostError? {
        var random = SystemRandomNumberGenerator()
        let sessionID = SessionID.random(using: &random)
        let failure: HostError? = guarded.withLock { state in
            if state.session != nil, !observable.value.isFinished { return .alreadyRunning }
            guard let keyID = service.terminalKeyID else { return .processorFailure("terminal key id unavailable") }
            let offer: Offer
            do {
                let unsigned = try Offer(
                    sessionID: sessionID, transactionType: executor.transactionType, amount: terms.amount,
                    registerUser: terms.registerUser, item: terms.item, quantity: terms.quantity,
                    merchantPrograms: merchantPrograms, offerNonce: Nonce.random(using: &random),
                    expiresAt: service.scheduler.wallClock + userDecisionTimeout.nanoseconds / 1_000_000_000 + 60)
                offer = unsigned.withSignature(
                    try signatureBytes(for: unsigned.signedBytes, with: service.identity.signingKey))
            } catch let error as WireError {
                return .invalidRedemption(error.description)
            } catch {
                return .processorFailure("could not sign the offer")
            }
            let advertising: any AdvertisingSet
            do throws(RadioError) {
                advertising = try service.advertise(
                    HorizonAdvertisement(
                        transactionType: executor.transactionType, sessionID: sessionID, terminalKeyID: keyID))
            } catch {
                return .radio(error)
            }
            state.session = HostedSession(
                id: sessionID, terms: terms, offer: offer, offerDigest: offerDigest(offer), advertising: advertising)
            state.result = nil
            state.error = nil
            state.isCancelled = false
            return nil
        }
        if let failure {
            setError(failure)
            return failure
        }
        service.register(sessionID, handler: self)
        service.logger.with(session: sessionID).info(
            "session opened",
            metadata: [
                "type": "\(executor.transactionType)", "amount": "\(terms.amount)",
                "registerUser": "\(terms.registerUser)",
            ])
        observable.set(.waitingForWallet)
        return nil
    }

    /// Ends the session and returns to idle. False if idle already.
    func stop() -> Bool {
        let session = guarded.withLock { state -> HostedSession? in
            defer { state.session = nil }
            return state.session
        }
        guard let session else {
            if observable.value == .idle { return false }
            observable.set(.idle)
            return true
        }
        release(session)
        for (id, connection) in session.wallets {
            // The wallet that was answered still owes its acknowledgement (a journal step): it
            // keeps the linger time it was given; the others go now.
            if id == session.executing { closeLater(connection) } else { connection.close() }
        }
        observable.set(.idle)
        return true
    }

    /// Cancels a running session at the register; the wallet is told, nothing is executed.
    func cancel() {
        guard !observable.value.isFinished, observable.value != .idle else { return }
        guarded.withLock { $0.isCancelled = true }
        finish(error: .cancelled)
    }

    // MARK: Wallet messages

    func connection(_ connection: TerminalConnection, received message: SessionMessage) {
        switch message {
        case .hello(let hello): receiveHello(hello, on: connection)
        case .cancel(let cancel): receiveCancel(cancel, on: connection)
        default: receiveRequest(message, on: connection)
        }
    }

    /// A Hello whose session key the service has verified: the wallet gets the offer, unless the
    /// session is over or already taken. The first offer of a session is journaled before it
    /// leaves; later wallets add no row.
    private func receiveHello(_ hello: Hello, on connection: TerminalConnection) {
        let outcome: Result<(offer: Offer, journal: Bool), Refusal> = guarded.withLock { state in
            guard var session = state.session, hello.sessionID == session.id, !observable.value.isFinished else {
                return .failure(Refusal(ErrorMessage(code: .sessionNotFound, message: "this session is over")))
            }
            guard hello.transactionType == executor.transactionType else {
                return .failure(
                    Refusal(
                        ErrorMessage(code: .protocolViolation, message: "this session is a \(executor.transactionType)")
                    ))
            }
            guard session.executing == nil else {
                return .failure(
                    Refusal(
                        ErrorMessage(
                            code: .sessionTaken,
                            message:
                                "another wallet is already \(executor.transactionType == .payment ? "paying" : "redeeming") this session"
                        )))
            }
            session.wallets[connection.id] = connection
            let journal = !session.offerJournaled
            session.offerJournaled = true
            state.session = session
            return .success((session.offer, journal))
        }
        switch outcome {
        case .failure(let refusal):
            connection.send(.error(refusal.message))
            closeLater(connection)
        case .success(let (offer, journal)):
            if journal {
                do {
                    try service.journal.write(
                        .offered(
                            sessionID: offer.sessionID, transactionType: offer.transactionType,
                            walletKey: hello.sessionKey), at: service.scheduler.wallClock)
                } catch {
                    service.logger.with(session: offer.sessionID).error(
                        "the offer could not be journaled; not sent", metadata: ["error": "\(error)"])
                    // No offer leaves unless it is on record; the wallet may try again.
                    guarded.withLock { state in
                        state.session?.offerJournaled = false
                        state.session?.wallets[connection.id] = nil
                    }
                    connection.send(
                        .error(
                            ErrorMessage(code: .internalError, message: "the terminal cannot record the session now")))
                    return
                }
            }
            if observable.value == .waitingForWallet { observable.set(.walletConnected) }
            connection.send(.offer(offer))
            if observable.value == .walletConnected { observable.set(.awaitingUserDecision) }
            walletNotices.set(.offered(connection.confirmationCode))
            service.logger.with(session: offer.sessionID).info(
                "offer sent", metadata: ["code": "\(connection.confirmationCode)"])
            armDecisionTimer()
        }
    }

    private func armDecisionTimer() {
        guarded.withLock { state in
            guard var session = state.session, session.decisionTimer == nil else { return }
            let sessionID = session.id
            session.decisionTimer = service.scheduler.schedule(after: userDecisionTimeout) { [weak self] in
                self?.decisionTimedOut(sessionID)
            }
            state.session = session
        }
    }

    private func decisionTimedOut(_ sessionID: SessionID) {
        guard let session, session.id == sessionID, !observable.value.isFinished,
            observable.value != .acquiringPaymentExecution
        else { return }
        finish(error: .decisionTimedOut(userDecisionTimeout))
    }

    /// A wallet declines for itself only: its connection leaves the session, which stays open
    /// for the customer's wallet (a decline is unauthenticated as far as the sale is concerned:
    /// any central can send one). The register hears of it with the wallet's code.
    private func receiveCancel(_ cancel: Cancel, on connection: TerminalConnection) {
        let left: Bool? = guarded.withLock { state in
            guard var session = state.session, session.id == cancel.sessionID, session.executing == nil,
                session.wallets.removeValue(forKey: connection.id) != nil
            else { return nil }
            state.session = session
            return session.wallets.isEmpty
        }
        guard let left, !observable.value.isFinished else { return }
        closeLater(connection)
        service.logger.with(session: cancel.sessionID).info(
            "a wallet declined", metadata: ["code": "\(connection.confirmationCode)"])
        walletNotices.set(.declined(connection.confirmationCode))
        if left, observable.value == .walletConnected || observable.value == .awaitingUserDecision {
            observable.set(.waitingForWallet)
        }
    }

    private func receiveRequest(_ message: SessionMessage, on connection: TerminalConnection) {
        let requestID = Self.requestID(of: message)
        let ready: Result<HostedSession, Refusal> = guarded.withLock { state in
            guard let session = state.session, message.sessionID == session.id,
                observable.value == .awaitingUserDecision || observable.value == .walletConnected
            else {
                return .failure(
                    Refusal(
                        ErrorMessage(
                            code: .sessionExpired,
                            message: "this session no longer takes requests; nothing was executed",
                            paymentID: requestID)))
            }
            guard session.wallets[connection.id] != nil else {
                return .failure(
                    Refusal(
                        ErrorMessage(code: .protocolViolation, message: "say hello first", paymentID: requestID)))
            }
            return .success(session)
        }
        let session: HostedSession
        switch ready {
        case .failure(let refusal):
            connection.send(.error(refusal.message))
            return
        case .success(let value): session = value
        }
        let now = service.scheduler.wallClock
        let request: JournalRequest
        switch executor.check(message, session: session, terminal: service, now: now) {
        case .unexpected:
            connection.send(
                .error(ErrorMessage(code: .protocolViolation, message: "unexpected \(message.type) in this session")))
            return
        case .refused(let error):
            service.logger.with(session: session.id).with(payment: requestID).notice(
                "request refused", metadata: ["code": "\(error.code)", "reason": "\(error.message)"])
            connection.send(.error(error))
            return
        case .accepted(let accepted): request = accepted
        }
        // The first valid request takes the session; a second one (another wallet, or the same
        // racing itself with another id) is refused, never executed.
        let taken = guarded.withLock { state -> Bool in
            guard state.session?.id == session.id, state.session?.executing == nil else { return true }
            state.session?.executing = connection.id
            return false
        }
        guard !taken else {
            connection.send(
                .error(
                    ErrorMessage(
                        code: .sessionTaken, message: "another request is already being executed in this session",
                        paymentID: request.id)))
            return
        }
        connection.proved(request.id)
        let logger = service.logger.with(session: session.id).with(payment: request.id)
        logger.info("executing the request")
        observable.set(.acquiringPaymentExecution)
        let executor = executor
        let outcome = service.executeJournaled(request, at: now) { (request) throws(ProcessorError) in
            try executor.execute(request, at: now)
        }
        switch outcome {
        case .refused(let error, let reason):
            logger.notice("refused by the processor; nothing was executed", metadata: ["reason": "\(reason)"])
            connection.send(.error(error))
            closeLater(connection)
            finish(error: .processorFailure(reason))
        case .undecided(let error, let reason):
            logger.error("outcome not recorded; settled at the next recovery", metadata: ["reason": "\(reason)"])
            connection.send(.error(error))
            closeLater(connection)
            finish(error: .outcomeUnknown(reason))
        case .executed(let result, let answer):
            logger.info("settled", metadata: ["outcome": "\(result.outcome)", "tip": "\(result.tip)"])
            if let sessionKey = connection.sessionKey { service.sessionExecuted(session.id, by: sessionKey) }
            connection.send(answer)
            closeLater(connection)
            guarded.withLock { $0.result = result }
            switch result.outcome {
            case .approved: finish(error: nil)
            case .declined(let code, let reason): finish(error: .declined(code: code, reason: reason))
            }
        }
    }

    static func requestID(of message: SessionMessage) -> PaymentID? {
        switch message {
        case .confirm(let confirm): confirm.paymentID
        case .redeem(let redeem): redeem.redemptionID
        default: nil
        }
    }

    func connectionEnded(_ connection: TerminalConnection) {
        let noneLeft = guarded.withLock { state -> Bool? in
            guard state.session?.executing != connection.id,
                state.session?.wallets.removeValue(forKey: connection.id) != nil
            else { return nil }
            return state.session?.wallets.isEmpty ?? true
        }
        // A wallet may come back (a new connection) while the decision timer runs.
        if noneLeft == true, observable.value == .walletConnected || observable.value == .awaitingUserDecision {
            observable.set(.waitingForWallet)
        }
    }

    func isAwaitingWallet(on connection: TerminalConnection) -> Bool {
        let inSession = guarded.withLock { $0.session?.wallets[connection.id] != nil }
        switch observable.value {
        case .walletConnected, .awaitingUserDecision, .acquiringPaymentExecution: return inSession
        default: return false
        }
    }

    // MARK: Ending

    private func finish(error: HostError?) {
        let (session, result) = guarded.withLock { state -> (HostedSession?, SettlementResult?) in
            state.error = error
            return (state.session, state.result)
        }
        guard let session else { return }
        release(session)
        // Wallets still looking at the offer are told why the session is over.
        let why: Cancel
        switch error {
        case .cancelled?:
            why = Cancel(sessionID: session.id, reason: .terminalCancelled, message: "cancelled at the register")
        case .decisionTimedOut?: why = Cancel(sessionID: session.id, reason: .timedOut, message: "no decision in time")
        default: why = Cancel(sessionID: session.id, reason: .terminalCancelled, message: "the session is over")
        }
        for (id, connection) in session.wallets where id != session.executing {
            connection.send(.cancel(why))
            closeLater(connection)
        }
        service.logger.with(session: session.id).info(
            "session ended", metadata: ["outcome": "\(error.map { "\($0)" } ?? "completed")"])
        observable.set(error == nil ? .completed : .completedWithError)
        onFinish(FinishedSession(session: session, result: error == nil ? result : nil, error: error))
    }

    /// Stops advertising the session and stops routing its connections here.
    private func release(_ session: HostedSession) {
        session.advertising?.stop()
        session.decisionTimer?.cancel()
        service.unregister(session.id)
        guarded.withLock { state in
            state.session?.advertising = nil
            state.session?.decisionTimer = nil
        }
    }

    /// Leaves the wallet time to read the last message and close; closes it after that.
    private func closeLater(_ connection: TerminalConnection) {
        service.scheduler.schedule(after: lingerAfterReceipt) { connection.close() }
    }
}

/// An error message to send back instead of acting.
struct Refusal: Error {
    let message: ErrorMessage
    init(_ message: ErrorMessage) { self.message = message }
}
