import Foundation
import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonSettlement
import HorizonStores

public struct PaymentHostConfiguration: Sendable {
    /// How long each wallet may look at the offer before the terminal ends that wallet's attempt
    /// (the sale waits on for another).
    public var userDecisionTimeout: Duration
    /// The currency the terminal charges in.
    public var currency: Currency
    public var merchantPrograms: MerchantPrograms
    /// How long the terminal keeps a link open after the receipt, for the wallet to close it.
    public var lingerAfterReceipt: Duration
    /// How the terminal accepts payments while its server is unreachable (the wallet's
    /// daily token, the merchant's limits); nil leaves them pending, as before.
    public var offline: OfflineAcceptanceConfiguration?

    public init(
        userDecisionTimeout: Duration = .seconds(60), currency: Currency = .eur,
        merchantPrograms: MerchantPrograms = .none,
        lingerAfterReceipt: Duration = .seconds(5), offline: OfflineAcceptanceConfiguration? = nil
    ) {
        self.offline = offline
        self.userDecisionTimeout = userDecisionTimeout
        self.currency = currency
        self.merchantPrograms = merchantPrograms
        self.lingerAfterReceipt = lingerAfterReceipt
    }
}

/// The terminal's payment session (the reference SDK's `PaymentHost`): advertise an amount,
/// show it to one wallet, take its signed confirmation, settle it exactly once, answer with a
/// signed receipt.
public final class PaymentHost: Sendable {
    public let service: TerminalRadioService
    public let processor: any PaymentProcessor
    public let configuration: PaymentHostConfiguration
    let core: SessionHost
    private let finished = EventBroadcaster<FinishedPayment>()

    public init(
        service: TerminalRadioService, processor: any PaymentProcessor,
        configuration: PaymentHostConfiguration = PaymentHostConfiguration()
    ) {
        self.service = service
        self.processor = processor
        self.configuration = configuration
        let finished = self.finished
        core = SessionHost(
            service: service, executor: PaymentExecutor(processor: processor, identity: service.identity),
            userDecisionTimeout: configuration.userDecisionTimeout,
            lingerAfterReceipt: configuration.lingerAfterReceipt, merchantPrograms: configuration.merchantPrograms,
            offline: configuration.offline
        ) { session in
            let event = FinishedPayment(
                sessionID: session.session.id,
                order: session.result.flatMap { PaymentHost.order(from: $0, session.session) },
                error: session.error, acceptedOffline: session.acceptedOffline)
            finished.send(event)
            NotificationCenter.default.post(
                name: .paymentHostFinishedAPayment, object: nil, userInfo: ["finishedPayment": event])
        }
    }

    // MARK: Observation

    public var state: PaymentHostState { core.state }
    /// The current state, then each change.
    public func states() -> AsyncStream<PaymentHostState> { core.observable.stream() }
    /// The latest wallet in the session: offered (with the confirmation code both sides show) or
    /// declined. A decline does not end the session: any central could send one.
    public var lastWalletNotice: WalletNotice? { core.walletNotices.value }
    /// Runs `observer` on every wallet notice (a wallet offered, a wallet declined).
    public func observeWallets(_ observer: @escaping @Sendable (WalletNotice) -> Void) {
        core.walletNotices.observe { notice in if let notice { observer(notice) } }
    }
    /// Runs `observer` on every state change, on the radio's scheduler.
    public func observeState(_ observer: @escaping @Sendable (PaymentHostState) -> Void) {
        core.observable.observe(observer)
    }
    public func finishedPayments() -> AsyncStream<FinishedPayment> { finished.stream() }

    public var finalPaymentState: FinalPaymentState? {
        // Read on the scheduler, so the state, the result and the session are of one moment.
        core.service.scheduler.performSynchronously {
            guard core.state == .completed, let result = core.result, let session = core.session,
                let order = Self.order(from: result, session)
            else { return nil }
            return FinalPaymentState(paymentOrder: order)
        }
    }
    /// The session's payment when it was accepted offline: not settled yet, it is
    /// forwarded to the server when the server is back. Nil otherwise.
    public var acceptedOfflinePayment: OfflinePaymentRecord? { core.acceptedOffline }
    public var error: PaymentHostError? { core.error }
    public var humanizedError: String? { core.error?.humanized(noun: "payment") }
    public var isCancelled: Bool { core.isCancelled }
    public var userDecisionTimeout: Duration { configuration.userDecisionTimeout }
    public var sessionID: SessionID? { core.session?.id }

    // MARK: Commands

    /// Opens a session for `amount` and advertises it. Returns false (and sets `error`) if a
    /// session is running, the amount is not positive, the currency is not this terminal's, or
    /// the radio is unavailable. Like every command, it runs on the radio's scheduler (the caller
    /// waits for it there, unless it calls from there).
    /// With `paymentID` (a payment intent's id) the offer asks the wallet to confirm under that
    /// id, and a confirmation under another is refused.
    /// `orderReference` (the merchant's, for the sale) is journaled and settled with the payment.
    @discardableResult
    public func start(
        amount: Money, registerUser: RegisterUser? = nil, paymentID: PaymentID? = nil, orderReference: String = ""
    ) -> Bool {
        core.start(
            OfferTerms(
                amount: amount, registerUser: registerUser?.name ?? "", item: "", quantity: 0, paymentID: paymentID,
                orderReference: orderReference)
        ) {
            guard amount.minorUnits > 0 else { return .invalidAmount }
            guard amount.currency == configuration.currency else { return .unsupportedCurrency(amount.currency.code) }
            return nil
        }
    }

    /// Ends the session (advertising stops) and returns to idle. Returns false if idle already.
    @discardableResult
    public func stop() -> Bool { core.stop() }

    /// Cancels a running session at the register; the wallet is told, nothing is charged. Does
    /// nothing once a wallet's confirmation is executing (`acquiringPaymentExecution`): it may be
    /// charged, so its outcome ends the session, never "cancelled".
    public func cancel() { core.cancel() }

    static func order(from result: SettlementResult, _ session: HostedSession) -> PaymentOrder? {
        guard case .approved(let reference, let earned, _) = result.outcome else { return nil }
        return PaymentOrder(
            sessionID: session.id, paymentID: result.paymentID, amount: result.amount, tip: result.tip,
            registerUser: session.terms.registerUser, reference: reference, bonusPointsEarned: earned,
            orderReference: session.terms.orderReference)
    }
}
