import Foundation
import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonSecureChannel

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
public final class RedemptionClient: Sendable {
    let core: SessionClient
    public let transactionType: TransactionType
    private let finished = EventBroadcaster<WalletFinishedPayment>()

    public static func redemptionClientForBonusRedemption(
        radio: any CentralRadio, identity: WalletIdentity, trustAnchors: [TrustAnchor],
        configuration: PaymentClientConfiguration = PaymentClientConfiguration(),
        pendingStore: any PendingPaymentStore = InMemoryPendingPaymentStore(), scanner: SightingHub? = nil
    ) -> RedemptionClient {
        RedemptionClient(
            transactionType: .bonusRedemption, radio: radio, identity: identity, trustAnchors: trustAnchors,
            configuration: configuration, pendingStore: pendingStore, scanner: scanner)
    }

    public static func redemptionClientForGoldRedemption(
        radio: any CentralRadio, identity: WalletIdentity, trustAnchors: [TrustAnchor],
        configuration: PaymentClientConfiguration = PaymentClientConfiguration(),
        pendingStore: any PendingPaymentStore = InMemoryPendingPaymentStore(), scanner: SightingHub? = nil
    ) -> RedemptionClient {
        RedemptionClient(
            transactionType: .goldRedemption, radio: radio, identity: identity, trustAnchors: trustAnchors,
            configuration: configuration, pendingStore: pendingStore, scanner: scanner)
    }

    public static func redemptionClientForCouponRedemption(
        radio: any CentralRadio, identity: WalletIdentity, trustAnchors: [TrustAnchor],
        configuration: PaymentClientConfiguration = PaymentClientConfiguration(),
        pendingStore: any PendingPaymentStore = InMemoryPendingPaymentStore(), scanner: SightingHub? = nil
    ) -> RedemptionClient {
        RedemptionClient(
            transactionType: .couponRedemption, radio: radio, identity: identity, trustAnchors: trustAnchors,
            configuration: configuration, pendingStore: pendingStore, scanner: scanner)
    }

    private init(
        transactionType: TransactionType, radio: any CentralRadio, identity: WalletIdentity,
        trustAnchors: [TrustAnchor], configuration: PaymentClientConfiguration, pendingStore: any PendingPaymentStore,
        scanner: SightingHub?
    ) {
        self.transactionType = transactionType
        let finished = self.finished
        core = SessionClient(
            transactionType: transactionType, radio: radio, identity: identity, trustAnchors: trustAnchors,
            configuration: configuration, pendingStore: pendingStore, scanner: scanner
        ) { event in
            finished.send(event)
            NotificationCenter.default.post(
                name: .redemptionClientFinishedARedemption, object: nil, userInfo: ["finishedRedemption": event])
        }
    }

    public var manualConnectionDecider: ManualConnectionDecider { core.fusionTracker.manualConnectionDecider }
    public var fusionTracker: FusionTracker { core.fusionTracker }

    public var state: RedemptionClientState { core.state }
    public func states() -> AsyncStream<RedemptionClientState> { core.states() }
    public func observeState(_ observer: @escaping @Sendable (RedemptionClientState) -> Void) {
        core.observeState(observer)
    }
    public func finishedRedemptions() -> AsyncStream<WalletFinishedPayment> { finished.stream() }

    /// The verified offer: `item` is what is asked for, `quantity` the points (bonus).
    public var offer: PaymentOffer? { core.offer }
    public var receipt: RedemptionReceipt? { core.receipt }
    public var error: RedemptionClientError? { core.error }
    public var humanizedError: String? { core.humanizedError }
    public var bonusProgramMembership: BonusProgramMembership? { core.bonusProgramMembership }
    public var pendingRedemption: PendingPayment? { core.pendingPayment }

    public var onHostConnected: (@Sendable () -> Void)? {
        get { core.onHostConnected }
        set { core.onHostConnected = newValue }
    }

    public func start() throws(RadioError) { try core.start() }
    public func stop() { core.stop() }

    @discardableResult
    public func connectToRedemptionSession() -> Bool { core.connectToSession() }

    /// The person's final word. `true` signs and sends the redemption: bonus and gold redeem what
    /// the offer asks for; a coupon redemption names the coupon (`coupon`, the code the wallet
    /// holds). `false` declines. Returns false if not connected or the coupon is missing.
    @discardableResult
    public func setRedemptionConfirmedByUser(_ confirmed: Bool, coupon: String? = nil) -> Bool {
        guard confirmed else {
            core.decline()
            return true
        }
        let type = transactionType
        return core.sendRequest { (context) throws(PaymentClientError) in
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
                        sessionID: context.offer.sessionID, transactionType: type, redemptionID: context.requestID,
                        item: item, quantity: context.offer.quantity, walletNonce: context.walletNonce,
                        offerNonce: context.offer.offerNonce, expiresAt: context.expiresAt))
            } catch {
                throw .notReady("invalid redemption: \(error)")
            }
        }
    }

    @discardableResult
    public func resume(_ pending: PendingPayment) -> Bool { core.resume(pending) }

    public func restart() { core.restart() }
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
        manualConnectionDecider = ManualConnectionDeciderCollection(deciders: [
            paymentClient.fusionTracker.manualConnectionDecider, bonusRedemptionClient.manualConnectionDecider,
            goldRedemptionClient.manualConnectionDecider, couponRedemptionClient.manualConnectionDecider,
        ])
    }

    /// All four clients on one radio and one scan, sharing a pending store.
    public convenience init(
        radio: any CentralRadio, identity: WalletIdentity, trustAnchors: [TrustAnchor],
        configuration: PaymentClientConfiguration = PaymentClientConfiguration(),
        pendingStore: any PendingPaymentStore = InMemoryPendingPaymentStore()
    ) {
        let scanner = SightingHub(radio: radio)
        self.init(
            paymentClient: PaymentClient(
                radio: radio, identity: identity, trustAnchors: trustAnchors, configuration: configuration,
                pendingStore: pendingStore, scanner: scanner),
            bonusRedemptionClient: .redemptionClientForBonusRedemption(
                radio: radio, identity: identity, trustAnchors: trustAnchors, configuration: configuration,
                pendingStore: pendingStore, scanner: scanner),
            goldRedemptionClient: .redemptionClientForGoldRedemption(
                radio: radio, identity: identity, trustAnchors: trustAnchors, configuration: configuration,
                pendingStore: pendingStore, scanner: scanner),
            couponRedemptionClient: .redemptionClientForCouponRedemption(
                radio: radio, identity: identity, trustAnchors: trustAnchors, configuration: configuration,
                pendingStore: pendingStore, scanner: scanner))
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
