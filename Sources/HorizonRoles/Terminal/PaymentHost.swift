import Foundation
import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonSecureChannel
import HorizonStores
import Synchronization

/// The terminal's payment states, in the reference SDK's order.
public enum PaymentHostState: Sendable, Equatable, CustomStringConvertible {
    case idle
    /// Advertising the session; no wallet connected.
    case waitingForWallet
    case walletConnected
    /// The offer is on the wallet's screen; bounded by `userDecisionTimeout`.
    case awaitingUserDecision
    case acquiringPaymentExecution
    case completed
    case completedWithError

    public var description: String {
        switch self {
        case .idle: "idle"
        case .waitingForWallet: "waiting for a wallet"
        case .walletConnected: "wallet connected"
        case .awaitingUserDecision: "awaiting the customer's decision"
        case .acquiringPaymentExecution: "executing the payment"
        case .completed: "completed"
        case .completedWithError: "completed with error"
        }
    }

    public var isFinished: Bool { self == .completed || self == .completedWithError }
}

/// The cashier operating the register.
public struct RegisterUser: Sendable, Equatable, Hashable {
    public let name: String
    public init(name: String) { self.name = name }
}

/// What was paid, as the terminal shows it at the end.
public struct PaymentOrder: Sendable, Equatable {
    public let sessionID: SessionID
    public let paymentID: PaymentID
    public let amount: Money
    public let tip: Money
    public let registerUser: String
    public let reference: UInt64
    public let bonusPointsEarned: Int64

    public var currency: Currency { amount.currency }
    /// Amount plus tip (both are bounded far below overflow).
    public var total: Money { (try? amount.adding(tip)) ?? amount }
}

/// The final state of a completed payment (`PaymentHost.finalPaymentState`).
public struct FinalPaymentState: Sendable, Equatable {
    public let paymentOrder: PaymentOrder
}

/// Why a payment session ended without a payment, or could not start.
public enum PaymentHostError: Error, Sendable, Equatable, CustomStringConvertible {
    case alreadyRunning
    case invalidAmount
    case unsupportedCurrency(String)
    case radio(RadioError)
    case customerDeclined
    case decisionTimedOut(Duration)
    case cancelled
    case declined(code: ErrorCode, reason: String)
    case processorFailure(String)

    /// A sentence for the cashier.
    public var description: String {
        switch self {
        case .alreadyRunning: "A payment is already in progress; stop it first."
        case .invalidAmount: "The amount must be greater than zero."
        case .unsupportedCurrency(let code): "This terminal does not accept \(code)."
        case .radio(let error): "Bluetooth is not available: \(error)."
        case .customerDeclined: "The customer declined the payment."
        case .decisionTimedOut(let timeout):
            "The customer did not decide within \(Int(timeout.milliseconds / 1000)) seconds."
        case .cancelled: "The payment was cancelled at the register."
        case .declined(_, let reason): "The payment was declined: \(reason)."
        case .processorFailure(let reason): "The payment could not be processed: \(reason). Nothing was charged."
        }
    }
}

/// A finished payment session, as announced on both sides.
public struct FinishedPayment: Sendable, Equatable {
    public let sessionID: SessionID
    /// The order, when the payment went through.
    public let order: PaymentOrder?
    /// Why it did not, otherwise.
    public let error: PaymentHostError?
}

extension Notification.Name {
    /// Posted by a `PaymentHost` when a session ends, paid or not; `object` is the host,
    /// `userInfo["finishedPayment"]` the `FinishedPayment`.
    public static let paymentHostFinishedAPayment = Notification.Name("PaymentHostFinishedAPaymentNotification")
}

public struct PaymentHostConfiguration: Sendable {
    /// How long the customer may look at the offer before the terminal gives up.
    public var userDecisionTimeout: Duration
    /// The currency the terminal charges in.
    public var currency: Currency
    public var merchantPrograms: MerchantPrograms
    /// How long the terminal keeps a link open after the receipt, for the wallet to close it.
    public var lingerAfterReceipt: Duration

    public init(
        userDecisionTimeout: Duration = .seconds(60), currency: Currency = .eur,
        merchantPrograms: MerchantPrograms = MerchantPrograms(hasBonusProgram: true),
        lingerAfterReceipt: Duration = .seconds(5)
    ) {
        self.userDecisionTimeout = userDecisionTimeout
        self.currency = currency
        self.merchantPrograms = merchantPrograms
        self.lingerAfterReceipt = lingerAfterReceipt
    }
}

/// The terminal's payment session: advertise an amount, show it to one wallet, take its signed
/// confirmation, settle it exactly once, answer with a signed receipt.
public final class PaymentHost: TerminalSessionHandler, Sendable {
    public let service: TerminalRadioService
    public let processor: any PaymentProcessor
    public let configuration: PaymentHostConfiguration

    private let observableState = ObservableState<PaymentHostState>(.idle)
    private let finished = EventBroadcaster<FinishedPayment>()

    private struct Session {
        let id: SessionID
        let amount: Money
        let registerUser: String
        let offer: Offer
        var advertising: (any AdvertisingSet)?
        var owner: PublicKeyBytes?
        var activeConnection: TerminalConnection?
        var decisionTimer: ScheduledAction?
    }

    private struct State {
        var session: Session?
        var finalPaymentState: FinalPaymentState?
        var error: PaymentHostError?
        var isCancelled = false
    }

    private let guarded = Mutex(State())

    public init(
        service: TerminalRadioService, processor: any PaymentProcessor,
        configuration: PaymentHostConfiguration = PaymentHostConfiguration()
    ) {
        self.service = service
        self.processor = processor
        self.configuration = configuration
    }

    // MARK: Observation

    public var state: PaymentHostState { observableState.value }
    /// The current state, then each change.
    public func states() -> AsyncStream<PaymentHostState> { observableState.stream() }
    /// Runs `observer` on every state change (on the radio's scheduler, or the caller's thread).
    public func observeState(_ observer: @escaping @Sendable (PaymentHostState) -> Void) {
        observableState.observe(observer)
    }
    public func finishedPayments() -> AsyncStream<FinishedPayment> { finished.stream() }

    public var finalPaymentState: FinalPaymentState? { guarded.withLock { $0.finalPaymentState } }
    public var error: PaymentHostError? { guarded.withLock { $0.error } }
    public var humanizedError: String? { error?.description }
    public var isCancelled: Bool { guarded.withLock { $0.isCancelled } }
    public var userDecisionTimeout: Duration { configuration.userDecisionTimeout }
    public var sessionID: SessionID? { guarded.withLock { $0.session?.id } }

    // MARK: Commands

    /// Opens a session for `amount` and advertises it. Returns false (and sets `error`) if a
    /// session is running, the amount is not positive, the currency is not this terminal's, or
    /// the radio is unavailable.
    @discardableResult
    public func start(amount: Money, registerUser: RegisterUser? = nil) -> Bool {
        var random = SystemRandomNumberGenerator()
        let sessionID = SessionID.random(using: &random)
        let failure: PaymentHostError? = guarded.withLock { state in
            if let session = state.session, !observableState.value.isFinished {
                _ = session
                return .alreadyRunning
            }
            guard amount.minorUnits > 0 else { return .invalidAmount }
            guard amount.currency == configuration.currency else { return .unsupportedCurrency(amount.currency.code) }
            guard let keyID = service.terminalKeyID else { return .processorFailure("terminal key id unavailable") }
            let offer: Offer
            do {
                let unsigned = try Offer(
                    sessionID: sessionID, transactionType: .payment, amount: amount,
                    registerUser: registerUser?.name ?? "", merchantPrograms: configuration.merchantPrograms,
                    offerNonce: Nonce.random(using: &random),
                    expiresAt: service.scheduler.wallClock + configuration.userDecisionTimeout.nanoseconds
                        / 1_000_000_000
                        + 60)
                offer = unsigned.withSignature(
                    try signatureBytes(for: unsigned.signedBytes, with: service.identity.signingKey))
            } catch {
                return .processorFailure("could not sign the offer")
            }
            let advertising: any AdvertisingSet
            do throws(RadioError) {
                advertising = try service.advertise(
                    HorizonAdvertisement(transactionType: .payment, sessionID: sessionID, terminalKeyID: keyID))
            } catch {
                return .radio(error)
            }
            state.session = Session(
                id: sessionID, amount: amount, registerUser: registerUser?.name ?? "", offer: offer,
                advertising: advertising)
            state.finalPaymentState = nil
            state.error = nil
            state.isCancelled = false
            return nil
        }
        if let failure {
            guarded.withLock { $0.error = failure }
            return false
        }
        service.register(sessionID, handler: self)
        observableState.set(.waitingForWallet)
        return true
    }

    /// Ends the session (advertising stops) and returns to idle. Returns false if idle already.
    @discardableResult
    public func stop() -> Bool {
        let session = guarded.withLock { state -> Session? in
            defer { state.session = nil }
            return state.session
        }
        guard let session else {
            if observableState.value == .idle { return false }
            observableState.set(.idle)
            return true
        }
        release(session)
        session.activeConnection?.close()
        observableState.set(.idle)
        return true
    }

    /// Cancels a running session at the register; the wallet is told, nothing is charged.
    public func cancel() {
        guard !observableState.value.isFinished, observableState.value != .idle else { return }
        let connection = guarded.withLock { state -> TerminalConnection? in
            state.isCancelled = true
            return state.session?.activeConnection
        }
        if let connection, let sessionID = sessionID {
            connection.send(
                .cancel(Cancel(sessionID: sessionID, reason: .terminalCancelled, message: "cancelled at the register")))
            closeLater(connection)
        }
        finish(with: .cancelled)
    }

    // MARK: Wallet messages

    func connection(_ connection: TerminalConnection, received message: SessionMessage) {
        switch message {
        case .hello(let hello): receiveHello(hello, on: connection)
        case .confirm(let confirm): receiveConfirm(confirm, on: connection)
        case .cancel(let cancel): receiveCancel(cancel, on: connection)
        default:
            connection.send(
                .error(ErrorMessage(code: .protocolViolation, message: "unexpected \(message.type) for a payment")))
        }
    }

    private func receiveHello(_ hello: Hello, on connection: TerminalConnection) {
        enum Outcome {
            case offer(Offer)
            case refuse(ErrorCode, String)
        }
        let outcome: Outcome = guarded.withLock { state in
            guard var session = state.session, hello.sessionID == session.id, !observableState.value.isFinished else {
                return .refuse(.sessionNotFound, "this session is over")
            }
            guard hello.transactionType == .payment else {
                return .refuse(.protocolViolation, "this session is a payment")
            }
            if let owner = session.owner, owner != hello.walletKey {
                return .refuse(.sessionTaken, "another wallet is already paying this session")
            }
            session.owner = hello.walletKey
            session.activeConnection = connection
            state.session = session
            return .offer(session.offer)
        }
        switch outcome {
        case .refuse(let code, let text):
            connection.send(.error(ErrorMessage(code: code, message: text)))
            closeLater(connection)
        case .offer(let offer):
            observableState.set(.walletConnected)
            connection.send(.offer(offer))
            observableState.set(.awaitingUserDecision)
            armDecisionTimer()
        }
    }

    private func armDecisionTimer() {
        let timeout = configuration.userDecisionTimeout
        guarded.withLock { state in
            guard var session = state.session, session.decisionTimer == nil else { return }
            let sessionID = session.id
            session.decisionTimer = service.scheduler.schedule(after: timeout) { [weak self] in
                self?.decisionTimedOut(sessionID)
            }
            state.session = session
        }
    }

    private func decisionTimedOut(_ sessionID: SessionID) {
        guard self.sessionID == sessionID, !observableState.value.isFinished,
            observableState.value != .acquiringPaymentExecution
        else { return }
        if let connection = guarded.withLock({ $0.session?.activeConnection }) {
            connection.send(.cancel(Cancel(sessionID: sessionID, reason: .timedOut, message: "no decision in time")))
            closeLater(connection)
        }
        finish(with: .decisionTimedOut(configuration.userDecisionTimeout))
    }

    private func receiveCancel(_ cancel: Cancel, on connection: TerminalConnection) {
        let isOwner = guarded.withLock {
            $0.session?.activeConnection?.id == connection.id && $0.session?.id == cancel.sessionID
        }
        guard isOwner, !observableState.value.isFinished else { return }
        closeLater(connection)
        finish(with: .customerDeclined)
    }

    private func receiveConfirm(_ confirm: Confirm, on connection: TerminalConnection) {
        let check: Result<(Session, SettlementRequest), Refusal> = guarded.withLock { state in
            guard let session = state.session, session.id == confirm.sessionID,
                observableState.value == .awaitingUserDecision || observableState.value == .walletConnected
            else {
                return .failure(
                    Refusal(
                        ErrorMessage(
                            code: .sessionExpired,
                            message: "this session no longer takes payments; nothing was charged",
                            paymentID: confirm.paymentID)))
            }
            return Self.validate(
                confirm, for: session, on: connection, terminal: service, now: service.scheduler.wallClock
            )
            .map { (session, $0) }
        }
        let (session, request): (Session, SettlementRequest)
        switch check {
        case .failure(let refusal):
            connection.send(.error(refusal.message))
            return
        case .success(let value): (session, request) = value
        }
        observableState.set(.acquiringPaymentExecution)
        let result: SettlementResult
        do {
            result = try processor.settle(request, at: service.scheduler.wallClock)
        } catch {
            let code: ErrorCode =
                if case .conflictingRetry = error { .duplicatePaymentConflict } else { .internalError }
            connection.send(.error(ErrorMessage(code: code, message: error.description, paymentID: confirm.paymentID)))
            closeLater(connection)
            finish(with: .processorFailure(error.description))
            return
        }
        if let receipt = ReceiptFactory.receipt(for: result, transactionType: .payment, identity: service.identity) {
            connection.send(.receipt(receipt))
        }
        closeLater(connection)
        switch result.outcome {
        case .approved(let reference, let earned, _):
            let order = PaymentOrder(
                sessionID: session.id, paymentID: result.paymentID, amount: result.amount, tip: result.tip,
                registerUser: session.registerUser, reference: reference, bonusPointsEarned: earned)
            guarded.withLock { $0.finalPaymentState = FinalPaymentState(paymentOrder: order) }
            finish(with: nil, order: order)
        case .declined(let code, let reason):
            finish(with: .declined(code: code, reason: reason))
        }
    }

    /// Every rule a confirmation must meet before any money moves.
    private static func validate(
        _ confirm: Confirm, for session: Session, on connection: TerminalConnection, terminal: TerminalRadioService,
        now: UnixTime
    ) -> Result<SettlementRequest, Refusal> {
        func refuse(_ code: ErrorCode, _ text: String) -> Result<SettlementRequest, Refusal> {
            .failure(Refusal(ErrorMessage(code: code, message: text, paymentID: confirm.paymentID)))
        }
        guard let owner = session.owner, session.activeConnection?.id == connection.id else {
            return refuse(.protocolViolation, "say hello before confirming")
        }
        guard confirm.terminalKeyID == terminal.terminalKeyID else {
            return refuse(.badSignature, "the confirmation names another terminal")
        }
        guard confirm.offerNonce == session.offer.offerNonce else {
            return refuse(.badSignature, "the confirmation is for another offer")
        }
        guard confirm.amount == session.amount else {
            return refuse(.invalidAmount, "the confirmed amount differs from the offer")
        }
        guard confirm.expiresAt >= now else { return refuse(.sessionExpired, "the confirmation has expired") }
        guard verify(confirm.signature, over: confirm.signedBytes, publicKey: owner.bytes) else {
            return refuse(.badSignature, "the confirmation's signature does not verify")
        }
        guard let keyID = terminal.terminalKeyID else { return refuse(.internalError, "no terminal key") }
        return .success(
            SettlementRequest(
                paymentID: confirm.paymentID, sessionID: session.id, walletKey: owner, terminalKeyID: keyID,
                amount: confirm.amount, tip: confirm.tip, registerUser: session.registerUser,
                contentDigest: digest(confirm.signedBytes)))
    }

    func connectionEnded(_ connection: TerminalConnection) {
        let wasActive = guarded.withLock { state -> Bool in
            guard state.session?.activeConnection?.id == connection.id else { return false }
            state.session?.activeConnection = nil
            return true
        }
        // The wallet may come back (same key) while the decision timer runs.
        if wasActive, observableState.value == .walletConnected || observableState.value == .awaitingUserDecision {
            observableState.set(.waitingForWallet)
        }
    }

    // MARK: Ending

    private func finish(with error: PaymentHostError?, order: PaymentOrder? = nil) {
        let session = guarded.withLock { state -> Session? in
            state.error = error
            return state.session
        }
        guard let session else { return }
        release(session)
        observableState.set(error == nil ? .completed : .completedWithError)
        let event = FinishedPayment(sessionID: session.id, order: order, error: error)
        finished.send(event)
        NotificationCenter.default.post(
            name: .paymentHostFinishedAPayment, object: nil, userInfo: ["finishedPayment": event])
    }

    /// Stops advertising the session and stops routing its connections here.
    private func release(_ session: Session) {
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
        service.scheduler.schedule(after: configuration.lingerAfterReceipt) { connection.close() }
    }
}

/// An error message to send back instead of acting.
struct Refusal: Error {
    let message: ErrorMessage
    init(_ message: ErrorMessage) { self.message = message }
}
