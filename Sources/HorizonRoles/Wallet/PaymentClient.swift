import Foundation
import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonSecureChannel

/// The wallet's payment client (the reference SDK's `PaymentClient`): follows terminals through
/// its `fusionTracker`, fetches and verifies the chosen terminal's offer when the app starts
/// deciding, confirms with a tip, and reports the verified receipt.
///
/// Call order, as in the reference SDK: `fusionTracker.manualConnectionDecider.startDeciding()`
/// → (`offer` arrives) → `decideForCandidate()` → `connectToPaymentSession()` → in
/// `onHostConnected`, `setOrderConfirmedByUser(true, tip:)` → `completed` with `receipt`.
public final class PaymentClient: Sendable {
    let core: SessionClient
    private let finished = EventBroadcaster<WalletFinishedPayment>()

    public init(
        radio: any CentralRadio, identity: WalletIdentity, trustAnchors: [TrustAnchor],
        configuration: PaymentClientConfiguration = PaymentClientConfiguration(),
        pendingStore: any PendingPaymentStore = InMemoryPendingPaymentStore(), scanner: SightingHub? = nil
    ) {
        let finished = self.finished
        core = SessionClient(
            transactionType: .payment, radio: radio, identity: identity, trustAnchors: trustAnchors,
            configuration: configuration, pendingStore: pendingStore, scanner: scanner
        ) { event in
            finished.send(event)
            NotificationCenter.default.post(
                name: .paymentClientFinishedAPayment, object: nil, userInfo: ["finishedPayment": event])
        }
    }

    public var fusionTracker: FusionTracker { core.fusionTracker }
    public var identity: WalletIdentity { core.identity }
    public var trustAnchors: [TrustAnchor] { core.trustAnchors }
    public var configuration: PaymentClientConfiguration { core.configuration }
    public var pendingStore: any PendingPaymentStore { core.pendingStore }

    public var state: PaymentClientState { core.state }
    public func states() -> AsyncStream<PaymentClientState> { core.states() }
    public func observeState(_ observer: @escaping @Sendable (PaymentClientState) -> Void) {
        core.observeState(observer)
    }
    public func finishedPayments() -> AsyncStream<WalletFinishedPayment> { finished.stream() }

    public var offer: PaymentOffer? { core.offer }
    public var receipt: PaymentReceipt? { core.receipt }
    public var error: PaymentClientError? { core.error }
    public var humanizedError: String? { core.humanizedError }
    public var bonusProgramMembership: BonusProgramMembership? { core.bonusProgramMembership }
    /// The payment confirmed and not yet answered, if any.
    public var pendingPayment: PendingPayment? { core.pendingPayment }

    /// Called on the radio's scheduler when the terminal is connected and ready for the
    /// confirmation (the reference's `onHostConnectedCallback`).
    public var onHostConnected: (@Sendable () -> Void)? {
        get { core.onHostConnected }
        set { core.onHostConnected = newValue }
    }

    /// Starts scanning and tracking terminals.
    public func start() throws(RadioError) { try core.start() }
    public func stop() { core.stop() }

    /// After the decider accepted: make sure the terminal is connected, then call
    /// `onHostConnected`. Returns false if there is no accepted offer.
    @discardableResult
    public func connectToPaymentSession() -> Bool { core.connectToSession() }

    /// The person's final word with the tip. `true` signs and sends the confirmation; `false`
    /// declines. Returns false if the terminal is not connected or the tip is invalid.
    @discardableResult
    public func setOrderConfirmedByUser(_ confirmed: Bool, tip: Money) -> Bool {
        guard confirmed else {
            core.decline()
            return true
        }
        return core.sendRequest { (context) throws(PaymentClientError) in
            guard tip.currency == context.offer.amount.currency else {
                throw .invalidTip("the tip must be in \(context.offer.amount.currency.code)")
            }
            do {
                return .confirm(
                    try Confirm(
                        sessionID: context.offer.sessionID, terminalKeyID: context.terminalKeyID,
                        amount: context.offer.amount, tip: tip, paymentID: context.requestID,
                        walletNonce: context.walletNonce, offerNonce: context.offer.offerNonce,
                        expiresAt: context.expiresAt))
            } catch {
                throw .invalidTip(String(describing: error))
            }
        }
    }

    /// Asks again for a payment whose answer never arrived (see `SessionClient.resume`).
    @discardableResult
    public func resume(_ pending: PendingPayment) -> Bool { core.resume(pending) }

    /// Clears the finished payment so the next one can start (call the decider's `restart()` too).
    public func restart() { core.restart() }
}
