import Foundation
import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonSecureChannel
import Logging

public typealias RedemptionClientState = PaymentClientState
public typealias RedemptionClientError = PaymentClientError
public typealias RedemptionReceipt = PaymentReceipt

extension Notification.Name {
    /// Posted by a `RedemptionClient` when a redemption finishes; `userInfo["finishedRedemption"]`
    /// is the `WalletFinishedPayment` (its receipt's `transactionType` says which kind). The
    /// reference SDK's `RedemptionClientFinishedARedemptionNotification`.
    public static let redemptionClientFinishedARedemption = Notification.Name(
        "RedemptionClientFinishedARedemptionNotification")
}

/// The wallet's client for one kind of loyalty redemption (the reference SDK's
/// `RedemptionClient`): bonus points for a reward, the gold benefit, or a coupon. It has its own
/// `manualConnectionDecider` and runs on the same machinery as `PaymentClient`.
///
/// Call order: `manualConnectionDecider.startDeciding()` → (`offer` arrives: what is asked for,
/// and for bonus redemptions the points) → `decideForCandidate()` → `connectToRedemptionSession()`
/// → in `onHostConnected`, `setRedemptionConfirmedByUser(true, coupon:)` → `completed`.
public final class RedemptionClient: TransactionClient, @unchecked Sendable {
    /// A client for `transactionType` (bonus, gold or coupon redemption); nil for `.payment`.
    public static func redemptionClient(
        transactionType: TransactionType, radio: any CentralRadio, identity: WalletIdentity,
        trustAnchors: [TrustAnchor], configuration: PaymentClientConfiguration = PaymentClientConfiguration(),
        pendingStore: any PendingPaymentStore = InMemoryPendingPaymentStore(), scanner: SightingHub? = nil,
        logger: Logger = .silent
    ) -> RedemptionClient? {
        guard transactionType.isRedemption else { return nil }
        return RedemptionClient(
            transactionType: transactionType, radio: radio, identity: identity, trustAnchors: trustAnchors,
            configuration: configuration, pendingStore: pendingStore, scanner: scanner, logger: logger)
    }

    /// The reference SDK's `redemptionClientForBonusRedemption…`.
    public static func redemptionClientForBonusRedemption(
        radio: any CentralRadio, identity: WalletIdentity, trustAnchors: [TrustAnchor],
        pendingStore: any PendingPaymentStore = InMemoryPendingPaymentStore(), scanner: SightingHub? = nil
    ) -> RedemptionClient {
        RedemptionClient(.bonusRedemption, radio, identity, trustAnchors, pendingStore, scanner)
    }

    /// The reference SDK's `redemptionClientForGoldRedemption…`.
    public static func redemptionClientForGoldRedemption(
        radio: any CentralRadio, identity: WalletIdentity, trustAnchors: [TrustAnchor],
        pendingStore: any PendingPaymentStore = InMemoryPendingPaymentStore(), scanner: SightingHub? = nil
    ) -> RedemptionClient {
        RedemptionClient(.goldRedemption, radio, identity, trustAnchors, pendingStore, scanner)
    }

    /// The reference SDK's `redemptionClientForCouponRedemption…`.
    public static func redemptionClientForCouponRedemption(
        radio: any CentralRadio, identity: WalletIdentity, trustAnchors: [TrustAnchor],
        pendingStore: any PendingPaymentStore = InMemoryPendingPaymentStore(), scanner: SightingHub? = nil
    ) -> RedemptionClient {
        RedemptionClient(.couponRedemption, radio, identity, trustAnchors, pendingStore, scanner)
    }

    private convenience init(
        _ type: TransactionType, _ radio: any CentralRadio, _ identity: WalletIdentity, _ anchors: [TrustAnchor],
        _ pendingStore: any PendingPaymentStore, _ scanner: SightingHub?
    ) {
        self.init(
            transactionType: type, radio: radio, identity: identity, trustAnchors: anchors,
            configuration: PaymentClientConfiguration(), pendingStore: pendingStore, scanner: scanner, logger: .silent)
    }

    fileprivate init(
        transactionType: TransactionType, radio: any CentralRadio, identity: WalletIdentity,
        trustAnchors: [TrustAnchor], configuration: PaymentClientConfiguration, pendingStore: any PendingPaymentStore,
        scanner: SightingHub?, logger: Logger
    ) {
        super.init(
            transactionType: transactionType, radio: radio, identity: identity, trustAnchors: trustAnchors,
            configuration: configuration, pendingStore: pendingStore, scanner: scanner, logger: logger,
            notification: .redemptionClientFinishedARedemption, userInfoKey: "finishedRedemption")
    }

    public func finishedRedemptions() -> AsyncStream<WalletFinishedPayment> { finished.stream() }

    public var pendingRedemption: PendingPayment? { pendingRequest }

    @discardableResult
    public func connectToRedemptionSession() -> Bool { connectToSession() }

    /// The person's final word. `true` signs and sends the redemption: bonus and gold redeem what
    /// the offer asks for; a coupon redemption names the coupon (`coupon`, the code the wallet
    /// holds). `false` declines. Returns false if not connected or the coupon is missing.
    @discardableResult
    public func setRedemptionConfirmedByUser(_ confirmed: Bool, coupon: String? = nil, for offer: PaymentOffer? = nil)
        -> Bool
    {
        guard confirmed else {
            core.decline()
            return true
        }
        let type = transactionType
        return core.sendRequest(confirming: offer) { (context) throws(PaymentClientError) in
            let item: String
            if type == .couponRedemption {
                guard let coupon, !coupon.isEmpty else { throw .notReady("name the coupon to redeem") }
                item = coupon
            } else {
                item = context.offer.item
            }
            do {
                return .redeem(
                    try Redeem(
                        sessionID: context.offer.sessionID, transactionType: type,
                        terminalKeyDigest: context.terminalKeyDigest, walletKey: context.walletKey,
                        offerDigest: context.offerDigest, redemptionID: context.requestID, item: item,
                        quantity: context.offer.quantity, walletNonce: context.walletNonce,
                        expiresAt: context.expiresAt))
            } catch {
                throw .notReady("invalid redemption: \(error)")
            }
        }
    }
}

/// Owns a wallet's payment client and its three redemption clients, sharing one radio scan, so an
/// app creates one object (the reference SDK's `PaymentAndRedemptionClientCoordinator`). Its
/// `manualConnectionDecider` merges the four deciders and offers one candidate at a time.
public final class PaymentAndRedemptionClientCoordinator: Sendable {
    public let paymentClient: PaymentClient
    public let bonusRedemptionClient: RedemptionClient
    public let goldRedemptionClient: RedemptionClient
    public let couponRedemptionClient: RedemptionClient
    public let manualConnectionDecider: ManualConnectionDeciderCollection

    public init(
        paymentClient: PaymentClient, bonusRedemptionClient: RedemptionClient, goldRedemptionClient: RedemptionClient,
        couponRedemptionClient: RedemptionClient
    ) {
        self.paymentClient = paymentClient
        self.bonusRedemptionClient = bonusRedemptionClient
        self.goldRedemptionClient = goldRedemptionClient
        self.couponRedemptionClient = couponRedemptionClient
        // The payment client's scheduler: the four share one radio when the convenience
        // initializer made them, and any other scheduler is entered by its own decider.
        manualConnectionDecider = ManualConnectionDeciderCollection(
            deciders: [
                paymentClient.fusionTracker.manualConnectionDecider, bonusRedemptionClient.manualConnectionDecider,
                goldRedemptionClient.manualConnectionDecider, couponRedemptionClient.manualConnectionDecider,
            ], scheduler: paymentClient.scheduler)
    }

    /// All four clients on one radio and one scan, sharing a pending store.
    public convenience init(
        radio: any CentralRadio, identity: WalletIdentity, trustAnchors: [TrustAnchor],
        configuration: PaymentClientConfiguration = PaymentClientConfiguration(),
        pendingStore: any PendingPaymentStore = InMemoryPendingPaymentStore(), logger: Logger = .silent
    ) {
        let scanner = SightingHub(radio: radio)
        self.init(
            paymentClient: PaymentClient(
                radio: radio, identity: identity, trustAnchors: trustAnchors, configuration: configuration,
                pendingStore: pendingStore, scanner: scanner, logger: logger),
            bonusRedemptionClient: RedemptionClient(
                transactionType: .bonusRedemption, radio: radio, identity: identity, trustAnchors: trustAnchors,
                configuration: configuration, pendingStore: pendingStore, scanner: scanner, logger: logger),
            goldRedemptionClient: RedemptionClient(
                transactionType: .goldRedemption, radio: radio, identity: identity, trustAnchors: trustAnchors,
                configuration: configuration, pendingStore: pendingStore, scanner: scanner, logger: logger),
            couponRedemptionClient: RedemptionClient(
                transactionType: .couponRedemption, radio: radio, identity: identity, trustAnchors: trustAnchors,
                configuration: configuration, pendingStore: pendingStore, scanner: scanner, logger: logger))
    }

    /// The redemption client for a type (nil for `.payment`: use `paymentClient`).
    public func redemptionClient(for type: TransactionType) -> RedemptionClient? {
        switch type {
        case .payment: nil
        case .bonusRedemption: bonusRedemptionClient
        case .goldRedemption: goldRedemptionClient
        case .couponRedemption: couponRedemptionClient
        }
    }

    /// Starts all four (one scan).
    public func start() throws(RadioError) {
        try paymentClient.start()
        for client in [bonusRedemptionClient, goldRedemptionClient, couponRedemptionClient] { try client.start() }
    }

    public func stop() {
        paymentClient.stop()
        for client in [bonusRedemptionClient, goldRedemptionClient, couponRedemptionClient] { client.stop() }
    }

    /// Restarts every client and decider after a completion.
    public func restart() {
        paymentClient.restart()
        for client in [bonusRedemptionClient, goldRedemptionClient, couponRedemptionClient] { client.restart() }
        manualConnectionDecider.restart()
    }
}
