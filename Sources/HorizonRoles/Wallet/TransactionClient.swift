import Foundation
import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonSecureChannel
import HorizonSettlement
import Logging

/// What `PaymentClient` and `RedemptionClient` share: the state, the verified offer and receipt,
/// the decider, connecting, resuming a pending request, restarting. App code can drive either
/// through this type the same way (decide, connect, confirm, show the receipt).
///
/// Only this module subclasses it; every stored property is an immutable `let` of a `Sendable`
/// type, which is what makes the unchecked conformance sound.
public class TransactionClient: @unchecked Sendable {
    let core: SessionClient
    let finished = EventBroadcaster<WalletFinishedPayment>()

    init(
        transactionType: TransactionType, radio: any CentralRadio, identity: WalletIdentity,
        trustAnchors: [TrustAnchor], configuration: PaymentClientConfiguration, pendingStore: any PendingPaymentStore,
        scanner: SightingHub?, logger: Logger, notification: Notification.Name, userInfoKey: String,
        offlineTokenProvider: (any OfflineTokenProvider)? = nil
    ) {
        let finished = self.finished
        core = SessionClient(
            transactionType: transactionType, radio: radio, identity: identity, trustAnchors: trustAnchors,
            configuration: configuration, pendingStore: pendingStore, scanner: scanner,
            logger: logger.with(transactionType: transactionType), offlineTokenProvider: offlineTokenProvider
        ) { event in
            finished.send(event)
            NotificationCenter.default.post(name: notification, object: nil, userInfo: [userInfoKey: event])
        }
    }

    public var transactionType: TransactionType { core.transactionType }
    public var fusionTracker: FusionTracker { core.fusionTracker }
    public var manualConnectionDecider: ManualConnectionDecider { core.fusionTracker.manualConnectionDecider }
    public var identity: WalletIdentity { core.identity }
    public var trustAnchors: [TrustAnchor] { core.trustAnchors }
    public var configuration: PaymentClientConfiguration { core.configuration }
    public var pendingStore: any PendingPaymentStore { core.pendingStore }

    public var state: PaymentClientState { core.state }
    public func states() -> AsyncStream<PaymentClientState> { core.states() }
    public func observeState(_ observer: @escaping @Sendable (PaymentClientState) -> Void) {
        core.observeState(observer)
    }

    /// The verified offer (for redemptions, `item` and `quantity` say what is asked).
    public var offer: PaymentOffer? { core.offer }
    public var receipt: PaymentReceipt? { core.receipt }
    public var error: PaymentClientError? { core.error }
    public var humanizedError: String? { core.humanizedError }
    public var bonusProgramMembership: BonusProgramMembership? { core.bonusProgramMembership }
    /// The request sent and not yet answered, if any.
    public var pendingRequest: PendingPayment? { core.pendingPayment }

    /// Called on the radio's scheduler when the terminal is connected and ready for the person's
    /// answer (the reference's `onHostConnectedCallback`).
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
    public func connectToSession() -> Bool { core.connectToSession() }

    /// Asks the terminal again for a request whose answer never arrived (this run's or an
    /// earlier one's): the same signed request, the same id. Ends `completed` or
    /// `completedWithError` once the terminal answers. False if another request is in progress.
    @discardableResult
    public func resume(_ pending: PendingPayment) -> Bool { core.resume(pending) }

    /// Clears the finished transaction so the next can start (restart the decider too).
    public func restart() { core.restart() }
}
