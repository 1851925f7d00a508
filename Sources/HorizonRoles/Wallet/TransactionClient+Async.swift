import HorizonCore
import HorizonProtocol
import HorizonRadio

// The wallet's async API: the reference's call order (candidate → startDeciding → offer →
// decideForCandidate → connectToPaymentSession → onHostConnected → setOrderConfirmedByUser) as
// three awaits, over the same state the callback API drives:
//
//     for await candidate in client.candidates() {
//         let offer = try await client.fetchOffer(candidate)
//         let receipt = try await client.pay(offer, tip: tip)   // or: await client.decline(offer)
//     }
//
// Every command hops onto the radio's scheduler, the one serial context a client's state lives
// on. Each call ends the attempt it belongs to (a failure, a decline, a receipt) and makes the
// client ready for the next candidate; a request that was signed and sent is never reported as
// failed while its outcome is unknown (`PaymentClientError.stillPending`).

extension ManualConnectionDeciderProtocol {
    /// Each terminal session as it becomes the clearly nearest candidate (again after every
    /// finished attempt, unless that session is over). Ends when the consuming task is cancelled.
    public func candidates() -> AsyncStream<PeripheralTracking> {
        let keys = availableCandidate.stream()
        let (stream, continuation) = AsyncStream<PeripheralTracking>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let follower = Task { [self] in
            for await key in keys {
                guard let key, let candidate, candidate.key == key else { continue }
                continuation.yield(candidate)
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in follower.cancel() }
        return stream
    }
}

extension TransactionClient {
    /// The terminal sessions this client may take, nearest first, as `candidates()` of its decider.
    public func candidates() -> AsyncStream<PeripheralTracking> { manualConnectionDecider.candidates() }

    /// Takes `candidate` (the reference's `startDeciding()`), connects, authenticates the
    /// terminal and returns its verified offer for the person to look at. Nothing is signed.
    /// Throws if the candidate went away, the terminal cannot prove who it is, its offer is
    /// invalid, or the connection fails; `.cancelled` if the calling task is cancelled (the
    /// terminal is told the wallet declined).
    public func fetchOffer(_ candidate: PeripheralTracking) async throws(PaymentClientError) -> PaymentOffer {
        let decider = manualConnectionDecider
        let refusal: PaymentClientError? = await scheduler.perform { [self] in
            if state.isFinished { readyForNextCandidate() }
            guard state == .idle else { return .notReady("another payment or redemption is in progress (\(state))") }
            guard decider.state == .candidateAvailable, decider.candidate?.key == candidate.key else {
                return .sessionUnavailable("that terminal is no longer the nearest candidate")
            }
            return decider.startDeciding() ? nil : .sessionUnavailable("that terminal is no longer available")
        }
        if let refusal { throw refusal }
        switch await core.observable.first(where: { $0 == .offerReceived || $0.isFinished }) {
        case .offerReceived?:
            if let offer { return offer }
            throw .notReady("the offer was withdrawn")
        case nil:
            await scheduler.perform { [self] in
                decider.decideAgainstCandidate()
                readyForNextCandidate()
            }
            throw .cancelled
        case _?:
            throw await endAttempt()
        }
    }

    /// The person says no to `offer`: the terminal is told, nothing is signed, and that session
    /// is not offered again.
    public func decline(_ offer: PaymentOffer) async {
        let decider = manualConnectionDecider
        await scheduler.perform { [self] in
            if state == .offerReceived, self.offer?.digest == offer.digest { decider.decideAgainstCandidate() }
            readyForNextCandidate()
        }
    }

    /// Asks the terminal again about a request an earlier run signed and sent without hearing
    /// the answer: the same signed request, the same id. Returns its receipt, throws the
    /// terminal's refusal (nothing was executed), or `.stillPending` when the task is cancelled
    /// before the terminal answers (the request stays stored).
    public func resolve(_ pending: PendingPayment) async throws(PaymentClientError) -> PaymentReceipt {
        let started = await scheduler.perform { [self] in
            if state.isFinished { readyForNextCandidate() }
            return resume(pending)
        }
        guard started else { throw .notReady("another payment or redemption is in progress (\(state))") }
        return try await awaitAnswer(to: pending.paymentID)
    }

    /// The signed request for `offer`, built and sent by `confirm` once the terminal is
    /// connected; then the terminal's answer.
    func execute(_ offer: PaymentOffer, confirm: @escaping @Sendable () -> Bool) async throws(PaymentClientError)
        -> PaymentReceipt
    {
        let decider = manualConnectionDecider
        let refusal: PaymentClientError? = await scheduler.perform { [self] in
            guard state == .offerReceived, let shown = self.offer else {
                // An attempt that ended (a re-priced offer, a refusal) says why, not that there
                // was never an offer.
                if state.isFinished, let error { return error }
                return .notReady("there is no offer to accept (\(state)); fetch one first")
            }
            guard shown.digest == offer.digest else {
                return .invalidOffer("it is not the offer this client received; nothing was signed")
            }
            guard decider.decideForCandidate(), connectToSession() else {
                return error ?? .notReady("the terminal's session is over")
            }
            return nil
        }
        if let refusal { throw refusal }
        switch await core.observable.first(where: { $0 == .hostConnected || $0.isFinished }) {
        case .hostConnected?: break
        case nil:
            await scheduler.perform { [self] in
                if !state.isFinished { core.decline() }
                readyForNextCandidate()
            }
            throw .cancelled
        case _?:
            throw await endAttempt()
        }
        let sent: PaymentRequestOutcome = await scheduler.perform { [self] in
            if confirm() { return .sent(pendingRequest?.paymentID) }
            // Nothing was signed: end the attempt so the terminal is not left waiting.
            let error = error ?? .notReady("the request could not be sent")
            if !state.isFinished { core.decline() }
            readyForNextCandidate()
            return .refused(error)
        }
        switch sent {
        case .refused(let error): throw error
        case .sent(let paymentID?): return try await awaitAnswer(to: paymentID)
        case .sent(nil): throw .notReady("the request was not recorded")
        }
    }

    private enum PaymentRequestOutcome: Sendable {
        case sent(PaymentID?)
        case refused(PaymentClientError)
    }

    /// Waits for the terminal's answer to a signed request. Cancellation stops the waiting, not
    /// the request: the client keeps asking, and the caller learns it is still pending.
    private func awaitAnswer(to paymentID: PaymentID) async throws(PaymentClientError) -> PaymentReceipt {
        guard await core.observable.first(where: \.isFinished) != nil || state.isFinished else {
            throw .stillPending(paymentID)
        }
        let outcome: Result<PaymentReceipt, PaymentClientError> = await scheduler.perform { [self] in
            defer { readyForNextCandidate() }
            if state == .completed, let receipt { return .success(receipt) }
            return .failure(error ?? .notReady("it ended without an answer"))
        }
        return try outcome.get()
    }

    /// The finished attempt's error, after making the client ready for the next candidate.
    private func endAttempt() async -> PaymentClientError {
        await scheduler.perform { [self] in
            defer { readyForNextCandidate() }
            return error ?? .notReady("it ended without an answer")
        }
    }

    /// Clears a finished attempt and lets the decider offer the next candidate (a finished
    /// session is never offered again). Runs on the scheduler.
    func readyForNextCandidate() {
        restart()
        if manualConnectionDecider.state != .waitingForCandidate, manualConnectionDecider.state != .candidateAvailable {
            manualConnectionDecider.restart()
        }
    }

    var scheduler: any Scheduler { core.scheduler }
}

extension PaymentClient {
    /// Accepts `offer` (the one `fetchOffer` returned and the person saw), signs the
    /// confirmation with `tip`, and returns the verified receipt. Throws the terminal's refusal
    /// (nothing was charged), or `.stillPending(id)` if the link was lost after sending and the
    /// calling task is cancelled before the answer arrives (the wallet keeps asking; never
    /// reported as failed). Cancelled before sending: `.cancelled`, and the terminal is told.
    public func pay(_ offer: PaymentOffer, tip: Money) async throws(PaymentClientError) -> PaymentReceipt {
        guard tip.currency == offer.amount.currency else {
            throw .invalidTip("the tip must be in \(offer.amount.currency.code)")
        }
        guard tip.minorUnits >= 0 else { throw .invalidTip("the tip cannot be negative") }
        return try await execute(offer) { [self] in setOrderConfirmedByUser(true, tip: tip, for: offer) }
    }
}

extension RedemptionClient {
    /// Accepts `offer` and redeems what it asks for (bonus, gold), or `coupon` for a coupon
    /// redemption; returns the verified receipt. Errors as `PaymentClient.pay`.
    public func redeem(_ offer: PaymentOffer, coupon: String? = nil) async throws(PaymentClientError)
        -> PaymentReceipt
    {
        if transactionType == .couponRedemption, (coupon ?? "").isEmpty {
            throw .notReady("name the coupon to redeem")
        }
        return try await execute(offer) { [self] in setRedemptionConfirmedByUser(true, coupon: coupon, for: offer) }
    }
}

extension PaymentAndRedemptionClientCoordinator {
    /// Every kind's candidates, one at a time, the nearest first.
    public func candidates() -> AsyncStream<PeripheralTracking> { manualConnectionDecider.candidates() }

    /// The client that handles `candidate`'s kind of session.
    public func client(for candidate: PeripheralTracking) -> TransactionClient {
        let type = candidate.peripheralMetaData.transactionType
        return redemptionClient(for: type) ?? paymentClient
    }

    /// The verified offer of `candidate`, fetched by the client of its kind.
    public func fetchOffer(_ candidate: PeripheralTracking) async throws(PaymentClientError) -> PaymentOffer {
        try await client(for: candidate).fetchOffer(candidate)
    }
}
