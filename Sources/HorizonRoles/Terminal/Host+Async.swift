import HorizonCore
import HorizonProtocol
import HorizonStores

// The terminal's async API: one await per sale, over the same session the callback API drives.
//
//     let order = try await host.collect(amount, registerUser: cashier)
//
// Cancelling the calling task cancels the sale at the register (the wallet is told). A request
// the terminal already executed is not undone by that: `collect` then returns its order, so an
// app never reports "not paid" for a payment that went through.

extension SessionHost {
    /// Opens a session with `start`, waits for it to end, and returns to idle. Returns the
    /// stored result of the executed request, or throws why there is none.
    func run(_ start: @escaping @Sendable () -> Bool) async throws(HostError) -> SettlementResult {
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
        let outcome: Result<SettlementResult, HostError> = await scheduler.perform { [self] in
            defer { _ = stop() }
            if state == .completed, let result { return .success(result) }
            return .failure(error ?? .cancelled)
        }
        return try outcome.get()
    }
}

extension PaymentHost {
    /// Opens a payment session for `amount` (the reference's `start(amount:registerUser:)`),
    /// waits for a wallet to pay it, and returns the order. Throws why it did not complete:
    /// refused at start (`invalidAmount`, `unsupportedCurrency`, `alreadyRunning`, `radio`),
    /// `decisionTimedOut`, `declined`, `processorFailure`, `outcomeUnknown`, `serverUnreachable`,
    /// or `cancelled` when the calling task is cancelled first. Back to idle when it returns.
    public func collect(_ amount: Money, registerUser: RegisterUser? = nil) async throws(HostError) -> PaymentOrder {
        let result = try await core.run { [self] in start(amount: amount, registerUser: registerUser) }
        guard case .approved(let reference, let earned, _) = result.outcome else {
            throw .processorFailure("the result of payment \(result.paymentID) is not an approval")
        }
        return PaymentOrder(
            sessionID: result.sessionID, paymentID: result.paymentID, amount: result.amount, tip: result.tip,
            registerUser: registerUser?.name ?? "", reference: reference, bonusPointsEarned: earned)
    }
}

extension RedemptionHost {
    /// Opens a redemption session for `offer`, waits for a wallet to redeem it, and returns the
    /// stored result. Throws as `PaymentHost.collect`.
    public func collect(_ offer: RedemptionOffer, registerUser: RegisterUser? = nil) async throws(HostError)
        -> SettlementResult
    {
        try await core.run { [self] in start(offer, registerUser: registerUser) }
    }
}
