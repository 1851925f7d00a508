import Foundation
import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonSecureChannel
import HorizonStores
import Synchronization

/// What the cashier asks for, as the signed offer states it.
struct OfferTerms: Sendable, Equatable {
    let amount: Money
    let registerUser: String
    let item: String
    let quantity: Int64
}

/// The session a host runs now.
struct HostedSession: Sendable {
    let id: SessionID
    let terms: OfferTerms
    let offer: Offer
    var advertising: (any AdvertisingSet)?
    var owner: PublicKeyBytes?
    var activeConnection: TerminalConnection?
    var decisionTimer: ScheduledAction?
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
    func check(
        _ message: SessionMessage, session: HostedSession, owner: PublicKeyBytes, terminal: TerminalRadioService,
        now: UnixTime
    ) -> RequestCheck
    func execute(_ request: JournalRequest, at now: UnixTime) throws(ProcessorError) -> SettlementResult
}

/// A finished session as a host reports it to its facade.
struct FinishedSession: Sendable {
    let session: HostedSession
    let result: SettlementResult?
    let error: HostError?
}

/// The session machinery shared by `PaymentHost` and `RedemptionHost`: advertise a signed offer,
/// let one wallet own the session, bound the customer's decision in time, take cancellations,
/// hand the wallet's request to the executor, answer with a signed receipt, end and announce.
final class SessionHost: TerminalSessionHandler, Sendable {
    let service: TerminalRadioService
    let executor: any SessionExecutor
    let userDecisionTimeout: Duration
    let lingerAfterReceipt: Duration
    let merchantPrograms: MerchantPrograms
    let observable = ObservableState<HostState>(.idle)
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
            state.session = HostedSession(id: sessionID, terms: terms, offer: offer, advertising: advertising)
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
        session.activeConnection?.close()
        observable.set(.idle)
        return true
    }

    /// Cancels a running session at the register; the wallet is told, nothing is executed.
    func cancel() {
        guard !observable.value.isFinished, observable.value != .idle else { return }
        let session = guarded.withLock { state -> HostedSession? in
            state.isCancelled = true
            return state.session
        }
        if let session, let connection = session.activeConnection {
            connection.send(
                .cancel(Cancel(sessionID: session.id, reason: .terminalCancelled, message: "cancelled at the register"))
            )
            closeLater(connection)
        }
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

    private func receiveHello(_ hello: Hello, on connection: TerminalConnection) {
        let outcome: Result<Offer, Refusal> = guarded.withLock { state in
            guard var session = state.session, hello.sessionID == session.id, !observable.value.isFinished else {
                return .failure(Refusal(ErrorMessage(code: .sessionNotFound, message: "this session is over")))
            }
            guard hello.transactionType == executor.transactionType else {
                return .failure(
                    Refusal(
                        ErrorMessage(code: .protocolViolation, message: "this session is a \(executor.transactionType)")
                    ))
            }
            if let owner = session.owner, owner != hello.walletKey {
                return .failure(
                    Refusal(
                        ErrorMessage(
                            code: .sessionTaken,
                            message:
                                "another wallet is already \(executor.transactionType == .payment ? "paying" : "redeeming") this session"
                        )))
            }
            session.owner = hello.walletKey
            session.activeConnection = connection
            state.session = session
            return .success(session.offer)
        }
        switch outcome {
        case .failure(let refusal):
            connection.send(.error(refusal.message))
            closeLater(connection)
        case .success(let offer):
            do {
                try service.journal.write(
                    .offered(
                        sessionID: offer.sessionID, transactionType: offer.transactionType, walletKey: hello.walletKey),
                    at: service.scheduler.wallClock)
            } catch {
                // No offer leaves unless it is on record; the wallet may try again.
                connection.send(
                    .error(ErrorMessage(code: .internalError, message: "the terminal cannot record the session now")))
                return
            }
            observable.set(.walletConnected)
            connection.send(.offer(offer))
            observable.set(.awaitingUserDecision)
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
        if let connection = session.activeConnection {
            connection.send(.cancel(Cancel(sessionID: sessionID, reason: .timedOut, message: "no decision in time")))
            closeLater(connection)
        }
        finish(error: .decisionTimedOut(userDecisionTimeout))
    }

    private func receiveCancel(_ cancel: Cancel, on connection: TerminalConnection) {
        let isOwner = guarded.withLock {
            $0.session?.activeConnection?.id == connection.id && $0.session?.id == cancel.sessionID
        }
        guard isOwner, !observable.value.isFinished else { return }
        closeLater(connection)
        finish(error: .customerDeclined)
    }

    private func receiveRequest(_ message: SessionMessage, on connection: TerminalConnection) {
        let requestID = Self.requestID(of: message)
        let ready: Result<(HostedSession, PublicKeyBytes), Refusal> = guarded.withLock { state in
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
            guard let owner = session.owner, session.activeConnection?.id == connection.id else {
                return .failure(
                    Refusal(
                        ErrorMessage(code: .protocolViolation, message: "say hello first", paymentID: requestID)))
            }
            return .success((session, owner))
        }
        let session: HostedSession
        let owner: PublicKeyBytes
        switch ready {
        case .failure(let refusal):
            connection.send(.error(refusal.message))
            return
        case .success(let value): (session, owner) = value
        }
        let now = service.scheduler.wallClock
        let request: JournalRequest
        switch executor.check(message, session: session, owner: owner, terminal: service, now: now) {
        case .unexpected:
            connection.send(
                .error(ErrorMessage(code: .protocolViolation, message: "unexpected \(message.type) in this session")))
            return
        case .refused(let error):
            connection.send(.error(error))
            return
        case .accepted(let accepted): request = accepted
        }
        observable.set(.acquiringPaymentExecution)
        let executor = executor
        let outcome = service.executeJournaled(request, at: now) { (request) throws(ProcessorError) in
            try executor.execute(request, at: now)
        }
        switch outcome {
        case .refused(let error, let reason):
            connection.send(.error(error))
            closeLater(connection)
            finish(error: .processorFailure(reason))
        case .undecided(let error, let reason):
            connection.send(.error(error))
            closeLater(connection)
            finish(error: .outcomeUnknown(reason))
        case .executed(let result, let answer):
            service.sessionExecuted(session.id, by: owner)
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
        let wasActive = guarded.withLock { state -> Bool in
            guard state.session?.activeConnection?.id == connection.id else { return false }
            state.session?.activeConnection = nil
            return true
        }
        // The wallet may come back (same key) while the decision timer runs.
        if wasActive, observable.value == .walletConnected || observable.value == .awaitingUserDecision {
            observable.set(.waitingForWallet)
        }
    }

    func isAwaitingWallet(on connection: TerminalConnection) -> Bool {
        let owns = guarded.withLock { $0.session?.activeConnection?.id == connection.id }
        switch observable.value {
        case .walletConnected, .awaitingUserDecision, .acquiringPaymentExecution: return owns
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
