import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonSettlement
import HorizonStores

/// A wallet's payment cards (the reference's `WalletClient`): add with the
/// server's checks and the processor's token, 3-D Secure completion, list, update, remove.
/// Every operation is signed by the wallet's own key and sees only that wallet's cards.
extension APIHandler {
    /// How long a 3-D Secure challenge may stay open (page answered and card completed).
    static let cardChallengeLifetime: Int64 = 600

    func getPaymentCards(_ input: Operations.GetPaymentCards.Input) async throws -> Operations.GetPaymentCards.Output {
        let wallet = try await signingWallet()
        let cards = try await ledger.paymentCards(of: wallet.id)
        return .ok(.init(body: .json(.init(cards: cards.map(Self.cardBody)))))
    }

    func addPaymentCard(_ input: Operations.AddPaymentCard.Input) async throws -> Operations.AddPaymentCard.Output {
        guard case .json(let request) = input.body else {
            throw APIError(.unsupportedMediaType, "the body must be JSON")
        }
        let wallet = try await signingWallet()
        let time = now()
        let cardholder = request.cardholder.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !cardholder.isEmpty, cardholder.utf8.count <= Ledger.maximumCardTextBytes else {
            throw APIError(
                .invalidRequest,
                "cardholder must be the name on the card, 1 to \(Ledger.maximumCardTextBytes) bytes")
        }
        let details = try CardCheck.details(
            cardholder: cardholder, number: request.cardNumber, expiry: request.expiry, cvc: request.cvc, at: time)
        let tokenization: CardTokenization
        do { tokenization = try await cards.tokenize(details, at: time) } catch {
            throw Self.apiError(error)
        }
        let added: (card: PaymentCard, challenge: CardChallenge?)
        do {
            added = try await ledger.addPaymentCard(
                NewPaymentCard(
                    token: tokenization.token, brand: details.brand, lastFour: details.lastFour,
                    expiryMonth: details.expiryMonth, expiryYear: details.expiryYear, cardholder: cardholder,
                    name: request.name),
                to: wallet.id, challengeLifetime: tokenization.requiresChallenge ? Self.cardChallengeLifetime : nil,
                at: time)
        } catch { throw Self.apiError(error) }
        metrics.record(event: added.challenge == nil ? "card_added" : "card_challenge_started")
        // The card's id and brand only: never its number, CVC or even its last four in the log.
        RequestScope.current?.logger.notice(
            "card added",
            metadata: [
                "wallet": "\(wallet.id)", "card": "\(added.card.id)", "brand": "\(added.card.brand.rawValue)",
                "challenge": "\(added.challenge != nil)",
            ])
        var body = Components.Schemas.AddPaymentCardResult(card: Self.cardBody(added.card))
        guard let challenge = added.challenge else { return .created(.init(body: .json(body))) }
        body.paymentDetails = .init(
            md: challenge.md, redirectionUrl: ThreeDSecurePages.challengeURL(md: challenge.md),
            postDataTermUrl: ThreeDSecurePages.termPath, expiresAt: challenge.expiresAt, card3DSNotEnrolled: false)
        return .accepted(.init(body: .json(body)))
    }

    func executeAddPaymentCard(_ input: Operations.ExecuteAddPaymentCard.Input) async throws
        -> Operations.ExecuteAddPaymentCard.Output
    {
        guard case .json(let request) = input.body else {
            throw APIError(.unsupportedMediaType, "the body must be JSON")
        }
        let wallet = try await signingWallet()
        let card: PaymentCard
        do {
            card = try await ledger.completeCardChallenge(
                card: PaymentCardID(rawValue: input.path.cardId), of: wallet.id, md: request.md, paRes: request.paRes,
                at: now())
        } catch {
            metrics.record(event: "card_challenge_refused")
            throw Self.apiError(error)
        }
        metrics.record(event: "card_added")
        RequestScope.current?.logger.notice(
            "card challenge completed", metadata: ["wallet": "\(wallet.id)", "card": "\(card.id)"])
        return .ok(.init(body: .json(Self.cardBody(card))))
    }

    func getCardChallenge(_ input: Operations.GetCardChallenge.Input) async throws
        -> Operations.GetCardChallenge.Output
    {
        let wallet = try await signingWallet()
        let challenge: CardChallenge
        do { challenge = try await ledger.cardChallenge(md: input.path.md, of: wallet.id) } catch {
            throw Self.apiError(error)
        }
        let state: Components.Schemas.CardChallengeStatus.StatePayload =
            if challenge.completedAt != nil {
                .completed
            } else if let decision = challenge.decision {
                decision == .approved ? .approved : .failed
            } else if challenge.expiresAt <= now() {
                .expired
            } else {
                .open
            }
        return .ok(
            .init(
                body: .json(
                    .init(
                        md: challenge.md, cardId: challenge.cardID.rawValue, state: state, paRes: challenge.paRes,
                        expiresAt: challenge.expiresAt))))
    }

    func updatePaymentCard(_ input: Operations.UpdatePaymentCard.Input) async throws
        -> Operations.UpdatePaymentCard.Output
    {
        guard case .json(let request) = input.body else {
            throw APIError(.unsupportedMediaType, "the body must be JSON")
        }
        let wallet = try await signingWallet()
        let card: PaymentCard
        do {
            card = try await ledger.updatePaymentCard(
                PaymentCardID(rawValue: input.path.cardId), of: wallet.id, active: request.active, name: request.name)
        } catch { throw Self.apiError(error) }
        return .ok(.init(body: .json(Self.cardBody(card))))
    }

    func removePaymentCard(_ input: Operations.RemovePaymentCard.Input) async throws
        -> Operations.RemovePaymentCard.Output
    {
        let wallet = try await signingWallet()
        do {
            try await ledger.removePaymentCard(PaymentCardID(rawValue: input.path.cardId), of: wallet.id, at: now())
        } catch { throw Self.apiError(error) }
        metrics.record(event: "card_removed")
        return .noContent(.init())
    }

    // MARK: Paying with a card

    /// Charges a card payment through the processor, or finds the charge a lost answer made.
    ///
    /// The payment id is the idempotency key, and it is claimed in the ledger before the
    /// processor is called: an id the ledger executed, or that another Confirm holds (the
    /// balance, another wallet, another card, other terms), is never charged (the latter is
    /// `payment_conflict`). A charge found under the id is used only when it was made with this
    /// wallet's card (its token); an earlier attempt's charge whose answer was lost is the
    /// answer, whatever the card's state now. Otherwise the card must be usable. A processor
    /// timeout is resolved by asking the processor what happened (`lookup`) before one retry;
    /// when it still cannot say, nothing is recorded and the terminal is told to retry later
    /// with the same payment id, which can never charge twice. A claim charged and never
    /// settled is refunded by `CardClaimRecovery`.
    func chargeCard(_ cardID: PaymentCardID, for request: SettlementRequest, terminal: TerminalRecord)
        async throws -> CardChargeResult
    {
        let key = request.paymentID.bytes.hexString
        let time = now()
        // A stored result is replayed by the ledger before it looks at the charge: do not
        // charge (or even ask the processor) for a payment that was executed already.
        if try await ledger.transaction(for: request.paymentID) != nil {
            return .notCharged(reason: "the payment was executed before")
        }
        let merchant = try await ledger.merchant(terminal.merchantID)
        // The ledger declines another currency before the charge; so nothing is charged for it.
        guard request.amount.currency == merchant.currency, request.tip.currency == merchant.currency,
            let total = try? request.amount.adding(request.tip), request.amount.minorUnits > 0
        else {
            return .notCharged(reason: "the payment's amount or currency cannot be charged at this merchant")
        }
        // An unknown key is declined (unknownWallet) by the ledger; nothing to charge.
        guard let wallet = try await ledger.wallet(forKey: request.walletKey) else {
            return .notCharged(reason: "this wallet is not registered with the merchant's Horizon server")
        }
        // Another wallet's card, a removed one and an unknown id are the same answer, as
        // everywhere: nothing tells a wallet that another wallet's card exists.
        guard let card = try await ledger.paymentCardEverAdded(cardID, of: wallet.id) else {
            throw Self.apiError(CardError.notFound)
        }
        let claim: PaymentClaimOutcome
        do {
            claim = try await ledger.claimCardPayment(
                request, card: cardID, wallet: wallet.id, merchant: terminal.merchantID, at: time)
        } catch .conflictingRetry {
            metrics.record(event: "payment_conflict")
            throw APIError(
                .paymentConflict,
                "payment \(key) is held by another confirmation (another way of paying, another wallet or card, or other terms); nothing was charged (a new payment needs a new id)"
            )
        }
        switch claim {
        case .executed: return .notCharged(reason: "the payment was executed before")
        case .recovering:
            throw APIError(
                .cardProcessorUnavailable,
                "payment \(key) was abandoned and its charge is being refunded; retry shortly for its result",
                headers: [.retryAfter: "5"])
        case .claimed: break
        }
        if let found = try await lookUpCharge(key) { return try Self.chargeResult(found, amount: total, card: card) }
        guard let card = try await ledger.payableCard(cardID, of: wallet.id) else {
            return .notCharged(
                reason:
                    "card \(cardID) cannot pay: it was removed, is switched off or has not passed 3-D Secure"
            )
        }
        for attempt in 1...2 {
            let outcome: Result<CardCharge, CardProcessorError>
            do throws(CardProcessorError) {
                outcome = .success(
                    try await cards.charge(token: card.token, amount: total, idempotencyKey: key, at: time))
            } catch {
                outcome = .failure(error)
            }
            switch outcome {
            case .success(let charge): return try Self.chargeResult(charge, amount: total, card: card)
            case .failure(.timeout):
                metrics.record(event: "card_charge_timeout")
                RequestScope.current?.logger.warning(
                    "card processor timed out; asking what happened",
                    metadata: ["payment": "\(key)", "attempt": "\(attempt)"])
                if let found = try await lookUpCharge(key) {
                    return try Self.chargeResult(found, amount: total, card: card)
                }
            case .failure(.idempotencyConflict):
                throw APIError(
                    .paymentConflict,
                    "payment \(key) was charged before with other terms; nothing was executed now (a new payment needs a new id)"
                )
            case .failure(let error): throw Self.apiError(error)
            }
        }
        throw APIError(
            .cardProcessorUnavailable,
            "the card processor did not answer; nothing was recorded, retry with the same payment id (it cannot charge twice)",
            headers: [.retryAfter: "5"])
    }

    private func lookUpCharge(_ key: String) async throws -> CardCharge? {
        do { return try await cards.lookup(idempotencyKey: key) } catch { throw Self.apiError(error) }
    }

    /// The processor's charge as the ledger records it; a charge of another amount, or with
    /// another card than this wallet's, under this payment id is a conflict (the same id with
    /// other terms): a charge belongs to the wallet and card that made it.
    static func chargeResult(_ charge: CardCharge, amount: Money, card: PaymentCard) throws -> CardChargeResult {
        guard charge.token == card.token else {
            throw APIError(
                .paymentConflict,
                "payment \(charge.idempotencyKey) was charged before with another card; nothing was executed now")
        }
        guard charge.amount == amount else {
            throw APIError(
                .paymentConflict,
                "payment \(charge.idempotencyKey) was charged before with another amount; nothing was executed now")
        }
        switch charge.outcome {
        case .charged: return .charged
        case .declined(let code, let reason):
            return .declined(
                code: code == "insufficient_funds" ? .insufficientFunds : .declined, reason: "\(reason) (\(code))")
        }
    }

    // MARK: Helpers

    /// The wallet whose registered, unrevoked key signed this request.
    static func cardBody(_ card: PaymentCard) -> Components.Schemas.PaymentCard {
        .init(
            id: card.id.rawValue,
            brand: Components.Schemas.PaymentCard.BrandPayload(rawValue: card.brand.rawValue) ?? .visa,
            lastFour: card.lastFour, expiryMonth: Int32(card.expiryMonth), expiryYear: Int32(card.expiryYear),
            cardholder: card.cardholder, name: card.name, active: card.isActive,
            state: card.state == .ready ? .ready : .challengeRequired)
    }

    static func apiError(_ error: CardProcessorError) -> APIError {
        switch error {
        case .cardNotAccepted(let reason): APIError(.cardNotAccepted, reason)
        case .timeout, .unavailable:
            APIError(
                .cardProcessorUnavailable, "the card processor did not answer; nothing was added, try again shortly",
                headers: [.retryAfter: "5"])
        case .unknownToken, .idempotencyConflict, .chargeNotFound, .refundExceedsCharge:
            APIError(.internalError, "the card processor refused the request; the request id identifies it in the log")
        }
    }

    static func apiError(_ error: CardError) -> APIError {
        switch error {
        case .notFound:
            APIError(.cardNotFound, "this wallet has no such card (it may have been removed); list the cards again")
        case .invalidText(let reason): APIError(.invalidRequest, reason)
        case .challengeNotFound:
            APIError(
                .cardChallengeNotFound,
                "no 3-D Secure challenge with this MD belongs to this card; use the MD that adding the card answered")
        case .challengeExpired:
            APIError(
                .cardChallengeExpired,
                "the 3-D Secure challenge expired (challenges last \(cardChallengeLifetime / 60) minutes); remove the card and add it again"
            )
        case .challengePending:
            APIError(
                .cardChallengePending,
                "the 3-D Secure challenge has not been answered yet; complete it in the browser first")
        case .challengeFailed:
            APIError(
                .cardChallengeFailed,
                "the 3-D Secure challenge failed, so the card cannot pay; remove it and add it again to retry")
        case .paResInvalid:
            APIError(
                .cardPaResInvalid,
                "the PaRes is not the one this challenge gave; pass the MD and PaRes the term page showed, unchanged")
        case .ledger(let error): APIError(error)
        }
    }
}
