import Foundation
import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonSettlement
import HorizonStores

/// What a redemption host offers: bonus points for a reward, the gold benefit, or a coupon.
public struct RedemptionOffer: Sendable, Equatable {
    /// The reward (bonus), the benefit (gold) or a description of the coupon asked for.
    public let item: String
    /// Points the reward costs (bonus redemptions); zero otherwise.
    public let points: Int64
    /// The value of what is redeemed, shown to the customer; nothing is charged.
    public let value: Money

    public init(item: String, points: Int64 = 0, value: Money) {
        self.item = item
        self.points = points
        self.value = value
    }
}

/// A finished redemption: what was redeemed, or why not.
public struct FinishedRedemption: Sendable, Equatable {
    public let sessionID: SessionID
    public let transactionType: TransactionType
    /// The stored result when the redemption went through.
    public let result: SettlementResult?
    public let error: HostError?
}

extension Notification.Name {
    /// Posted by a `RedemptionHost` when a session ends; `userInfo["finishedRedemption"]` is the
    /// `FinishedRedemption`.
    public static let redemptionHostFinishedARedemption = Notification.Name(
        "RedemptionHostFinishedARedemptionNotification")
}

/// The terminal's loyalty redemption session for one transaction type (the reference SDK's
/// `RedemptionHost`, created with `redemptionHost(transactionType:…)`): the same states,
/// decision timeout, cancel and conflict handling as `PaymentHost`, on the same machinery.
public final class RedemptionHost: Sendable {
    public let service: TerminalRadioService
    public let transactionType: TransactionType
    public let configuration: PaymentHostConfiguration
    let core: SessionHost
    private let finished = EventBroadcaster<FinishedRedemption>()

    /// A redemption host for `transactionType` (bonus, gold or coupon redemption).
    public static func redemptionHost(
        transactionType: TransactionType, service: TerminalRadioService, processor: any RedemptionProcessor,
        configuration: PaymentHostConfiguration = PaymentHostConfiguration()
    ) -> RedemptionHost? {
        guard transactionType.isRedemption else { return nil }
        return RedemptionHost(
            transactionType: transactionType, service: service, processor: processor, configuration: configuration)
    }

    private init(
        transactionType: TransactionType, service: TerminalRadioService, processor: any RedemptionProcessor,
        configuration: PaymentHostConfiguration
    ) {
        self.service = service
        self.transactionType = transactionType
        self.configuration = configuration
        let finished = self.finished
        core = SessionHost(
            service: service,
            executor: RedemptionExecutor(
                processor: processor, transactionType: transactionType, identity: service.identity),
            userDecisionTimeout: configuration.userDecisionTimeout,
            lingerAfterReceipt: configuration.lingerAfterReceipt, merchantPrograms: configuration.merchantPrograms
        ) { session in
            let event = FinishedRedemption(
                sessionID: session.session.id, transactionType: transactionType, result: session.result,
                error: session.error)
            finished.send(event)
            NotificationCenter.default.post(
                name: .redemptionHostFinishedARedemption, object: nil, userInfo: ["finishedRedemption": event])
        }
    }

    public var state: RedemptionHostState { core.state }
    public func states() -> AsyncStream<RedemptionHostState> { core.observable.stream() }
    /// The latest wallet in the session: offered (with the confirmation code both sides show) or
    /// declined. A decline does not end the session: any central could send one.
    public var lastWalletNotice: WalletNotice? { core.walletNotices.value }
    /// Runs `observer` on every wallet notice (a wallet offered, a wallet declined).
    public func observeWallets(_ observer: @escaping @Sendable (WalletNotice) -> Void) {
        core.walletNotices.observe { notice in if let notice { observer(notice) } }
    }
    public func observeState(_ observer: @escaping @Sendable (RedemptionHostState) -> Void) {
        core.observable.observe(observer)
    }
    public func finishedRedemptions() -> AsyncStream<FinishedRedemption> { finished.stream() }

    /// The stored result of the completed redemption.
    public var finalRedemption: SettlementResult? {
        // Read on the scheduler, so the state and the result are of one moment.
        core.service.scheduler.performSynchronously { core.state == .completed ? core.result : nil }
    }
    public var error: HostError? { core.error }
    public var humanizedError: String? { core.error?.humanized(noun: transactionType.description) }
    public var isCancelled: Bool { core.isCancelled }
    public var userDecisionTimeout: Duration { configuration.userDecisionTimeout }
    public var sessionID: SessionID? { core.session?.id }

    /// Opens a redemption session and advertises it. False (with `error`) if one runs, the offer
    /// is not valid for this type, or the radio is unavailable.
    @discardableResult
    public func start(_ offer: RedemptionOffer, registerUser: RegisterUser? = nil) -> Bool {
        let terms = OfferTerms(
            amount: offer.value, registerUser: registerUser?.name ?? "", item: offer.item, quantity: offer.points)
        return core.start(terms) {
            if transactionType == .bonusRedemption, offer.points <= 0 {
                return .invalidRedemption("a bonus redemption must cost at least one point")
            }
            if transactionType != .bonusRedemption, offer.points != 0 {
                return .invalidRedemption("only bonus redemptions cost points")
            }
            return nil
        }
    }

    @discardableResult
    public func stop() -> Bool { core.stop() }

    /// Cancels a running session at the register, as `PaymentHost.cancel()`: nothing once a
    /// wallet's request is executing.
    public func cancel() { core.cancel() }
}
