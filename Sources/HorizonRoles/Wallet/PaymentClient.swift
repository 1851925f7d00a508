import Foundation
import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonSecureChannel
import HorizonSettlement
import Logging

/// The wallet's payment client (the reference SDK's `PaymentClient`): follows terminals through
/// its `fusionTracker`, fetches and verifies the chosen terminal's offer when the app starts
/// deciding, confirms with a tip, and reports the verified receipt.
///
/// Call order, as in the reference SDK: `fusionTracker.manualConnectionDecider.startDeciding()`
/// → (`offer` arrives) → `decideForCandidate()` → `connectToPaymentSession()` → in
/// `onHostConnected`, `setOrderConfirmedByUser(true, tip:)` → `completed` with `receipt`.
public final class PaymentClient: TransactionClient, @unchecked Sendable {
    /// Which card to pay with (the reference's `paymentCardIDProvider`, e.g. `WalletClient`):
    /// asked when the person confirms; nil, or no provider, pays from the account balance.
    public let paymentCardIDProvider: (any PaymentCardIDProvider)?
    /// The daily token a terminal that cannot reach its server asks for (the
    /// reference's `dailyTokenClient`, which `DailyTokenClient` is). Nil: such a terminal leaves
    /// the payment pending.
    public let dailyTokenClient: (any OfflineTokenProvider)?

    public init(
        radio: any CentralRadio, identity: WalletIdentity, trustAnchors: [TrustAnchor],
        configuration: PaymentClientConfiguration = PaymentClientConfiguration(),
        pendingStore: any PendingPaymentStore = InMemoryPendingPaymentStore(), scanner: SightingHub? = nil,
        paymentCardIDProvider: (any PaymentCardIDProvider)? = nil, dailyTokenClient: (any OfflineTokenProvider)? = nil,
        logger: Logger = .silent
    ) {
        self.paymentCardIDProvider = paymentCardIDProvider
        self.dailyTokenClient = dailyTokenClient
        super.init(
            transactionType: .payment, radio: radio, identity: identity, trustAnchors: trustAnchors,
            configuration: configuration, pendingStore: pendingStore, scanner: scanner, logger: logger,
            notification: .paymentClientFinishedAPayment, userInfoKey: "finishedPayment",
            offlineTokenProvider: dailyTokenClient)
    }

    public func finishedPayments() -> AsyncStream<WalletFinishedPayment> { finished.stream() }

    /// The payment confirmed and not yet answered, if any.
    public var pendingPayment: PendingPayment? { pendingRequest }

    @discardableResult
    public func connectToPaymentSession() -> Bool { connectToSession() }

    /// The person's final word with the tip. `true` signs and sends the confirmation; `false`
    /// declines. Returns false if the terminal is not connected or the tip is invalid. With
    /// `offer` (the one the app displayed), a confirmation is refused unless it is the offer the
    /// attempt received (an attempt has one offer; a second one ends it).
    @discardableResult
    public func setOrderConfirmedByUser(_ confirmed: Bool, tip: Money, for offer: PaymentOffer? = nil) -> Bool {
        guard confirmed else {
            core.decline()
            return true
        }
        // Asked once, now: the method the person confirms with is the one signed.
        let method = paymentCardIDProvider?.paymentCardID.map { PaymentMethod.card(id: $0) } ?? .accountBalance
        return core.sendRequest(confirming: offer) { (context) throws(PaymentClientError) in
            guard tip.currency == context.offer.amount.currency else {
                throw .invalidTip("the tip must be in \(context.offer.amount.currency.code)")
            }
            do {
                return .confirm(
                    try Confirm(
                        sessionID: context.offer.sessionID, terminalKeyDigest: context.terminalKeyDigest,
                        walletKey: context.walletKey, offerDigest: context.offerDigest, amount: context.offer.amount,
                        tip: tip, paymentID: context.requestID, walletNonce: context.walletNonce,
                        expiresAt: context.expiresAt, paymentMethod: method))
            } catch {
                throw .invalidTip(String(describing: error))
            }
        }
    }
}
