import HorizonProtocol

/// What `PaymentClient` and `RedemptionClient` have in common, for app code that drives either
/// the same way (decide, connect, confirm, show the receipt).
public protocol TransactionClient: AnyObject, Sendable {
    var transactionType: TransactionType { get }
    var manualConnectionDecider: ManualConnectionDecider { get }
    var state: PaymentClientState { get }
    var offer: PaymentOffer? { get }
    var receipt: PaymentReceipt? { get }
    var humanizedError: String? { get }
    /// The request sent and not yet answered, if any.
    var pendingRequest: PendingPayment? { get }
    var onHostConnected: (@Sendable () -> Void)? { get set }
    func observeState(_ observer: @escaping @Sendable (PaymentClientState) -> Void)
    @discardableResult func connectToSession() -> Bool
    @discardableResult func resume(_ pending: PendingPayment) -> Bool
    func restart()
}

extension PaymentClient: TransactionClient {
    public var transactionType: TransactionType { .payment }
    public var manualConnectionDecider: ManualConnectionDecider { fusionTracker.manualConnectionDecider }
    public var pendingRequest: PendingPayment? { pendingPayment }
    @discardableResult public func connectToSession() -> Bool { connectToPaymentSession() }
}

extension RedemptionClient: TransactionClient {
    public var pendingRequest: PendingPayment? { pendingRedemption }
    @discardableResult public func connectToSession() -> Bool { connectToRedemptionSession() }
}
