import HorizonCore
import HorizonProtocol
import HorizonSettlement
import HorizonStores

// The terminal's async API: one await per sale, over the same session the callback API drives.
//
//     let order = try await host.collect(amount, registerUser: cashier)
//
// Cancelling the calling task cancels the sale at the register (the wallet is told). A request
// the terminal already executed is not undone by that: `collect` then returns its order, so an
// app never reports "not paid" for a payment that went through.

extension SessionHost {
    /// How a session that completed ended: executed by the processor, or (a payment whose
    /// server was unreachable) accepted offline.
    enum Completion: Sendable {
        case executed(SettlementResult)
        case acceptedOffline(OfflinePaymentRecord)
    }

    /// Opens a session with `start`, waits for it to end, and returns to idle. Returns the
    /// stored result of the executed request (or the offline acceptance), or throws why there is
    /// none.
    func run(_ start: @escaping @Sendable () -> Bool) async throws(HostError) -> Completion {
        let scheduler = service.scheduler
        let refusal: HostError? = await scheduler.perform { [self] in
            start() ? nil : (error ?? .alreadyRunning)
        }
        if let refusal { throw refusal }
        if await observable.first(where: \.isFinished) == nil {
            await scheduler.perform { [self] in cancel() }
            // The end of the session, whatever cancelled the caller: an executed request is
            // reported as executed. Unstructured, so the caller's cancellation does not cut it.
            _ = await Task { await self.observable.first(where: \.isFinished) }.value
        }
        let outcome: Result<Completion, HostError> = await scheduler.perform { [self] in
            defer { _ = stop() }
            if state == .completed, let result { return .success(.executed(result)) }
            if state == .completed, let acceptedOffline { return .success(.acceptedOffline(acceptedOffline)) }
            return .failure(error ?? .cancelled)
        }
        return try outcome.get()
    }
}

extension PaymentHost {
    /// Opens a payment session for `amount` (the reference's `start(amount:registerUser:)`),
    /// waits for a wallet to pay it, and returns the order. Throws why it did not complete:
    /// refused at start (`invalidAmount`, `unsupportedCurrency`, `alreadyRunning`, `radio`),
    /// `outcomeUnknown`, `serverUnreachable`, or `cancelled` when the calling task is cancelled
    /// first. A wallet's decline, decision time running out, or declined or refused request ends
    /// only that wallet's attempt (`observeWallets` tells the register) and the sale waits on:
    /// anyone in radio range can cause those. Back to idle when it returns.
    /// A payment accepted offline returns an order with `acceptedOffline` set and no
    /// reference: the server settles it when the terminal forwards it.
    /// With `paymentID`, the payment is made under that id (a payment intent's; see `start`).
    /// `orderReference` (the merchant's) is journaled with the payment and settled with it.
    public func collect(
        _ amount: Money, registerUser: RegisterUser? = nil, paymentID: PaymentID? = nil, orderReference: String = ""
    ) async throws(HostError) -> PaymentOrder {
        let result: SettlementResult
        switch try await core.run({ [self] in
            start(amount: amount, registerUser: registerUser, paymentID: paymentID, orderReference: orderReference)
        }) {
        case .executed(let executed): result = executed
        case .acceptedOffline(let record):
            return PaymentOrder(
                sessionID: record.sessionID, paymentID: record.paymentID, amount: record.amount, tip: record.tip,
                registerUser: registerUser?.name ?? "", reference: 0, bonusPointsEarned: 0, acceptedOffline: true,
                orderReference: orderReference)
        }
        guard case .approved(let reference, let earned, _) = result.outcome else {
            throw .processorFailure("the result of payment \(result.paymentID) is not an approval")
        }
        return PaymentOrder(
            sessionID: result.sessionID, paymentID: result.paymentID, amount: result.amount, tip: result.tip,
            registerUser: registerUser?.name ?? "", reference: reference, bonusPointsEarned: earned,
            orderReference: orderReference)
    }
}

extension RedemptionHost {
    /// Opens a redemption session for `offer`, waits for a wallet to redeem it, and returns the
    /// stored result. Throws as `PaymentHost.collect`.
    public func collect(_ offer: RedemptionOffer, registerUser: RegisterUser? = nil) async throws(HostError)
        -> SettlementResult
    {
        switch try await core.run({ [self] in start(offer, registerUser: registerUser) }) {
        case .executed(let result): return result
        case .acceptedOffline(let record):
            // Only payment hosts accept offline; a redemption host has no offline configuration.
            throw .processorFailure("redemption \(record.paymentID) cannot be accepted offline")
        }
    }
}
