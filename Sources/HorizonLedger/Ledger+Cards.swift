import Foundation
import HorizonCore
import HorizonProtocol
import HorizonSettlement
import HorizonStores

/// A payment card's id: `c_` and 32 hex digits, made by the ledger when the card is added.
public struct PaymentCardID: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    static func generate() -> PaymentCardID { PaymentCardID(rawValue: "c_" + randomHex()) }
}

/// The card networks the server accepts.
public enum CardBrand: String, Sendable, Codable, CaseIterable {
    case visa, mastercard, amex

    public var displayName: String {
        switch self {
        case .visa: "Visa"
        case .mastercard: "Mastercard"
        case .amex: "American Express"
        }
    }
}

/// A wallet's card as the server keeps it: the processor's token and what a person needs to
/// recognise the card. The number and the CVC are never part of it.
public struct PaymentCard: Sendable, Equatable {
    public enum State: String, Sendable, Equatable {
        /// Added, waiting for its 3-D Secure challenge: it cannot pay yet.
        case challenge
        /// Usable (when also active).
        case ready
    }

    public let id: PaymentCardID
    public let walletID: WalletID
    /// The processor's token: what a charge names instead of the number.
    public let token: String
    public let brand: CardBrand
    public let lastFour: String
    public let expiryMonth: Int
    /// Four digits (2031, not 31).
    public let expiryYear: Int
    public let cardholder: String
    /// The person's own name for the card ("Visa •••• 4242" unless they chose one).
    public let name: String
    /// The person can switch a card off without removing it; an inactive card cannot pay.
    public let isActive: Bool
    public let state: State
    public let createdAt: UnixTime

    /// Whether a payment may be charged to it now.
    public var canPay: Bool { isActive && state == .ready }
}

/// What the server learned about a card it adds (after its own checks and the processor's
/// tokenization).
public struct NewPaymentCard: Sendable, Equatable {
    public var token: String
    public var brand: CardBrand
    public var lastFour: String
    public var expiryMonth: Int
    public var expiryYear: Int
    public var cardholder: String
    /// Nil: "<brand> •••• <last four>".
    public var name: String?

    public init(
        token: String, brand: CardBrand, lastFour: String, expiryMonth: Int, expiryYear: Int, cardholder: String,
        name: String? = nil
    ) {
        self.token = token
        self.brand = brand
        self.lastFour = lastFour
        self.expiryMonth = expiryMonth
        self.expiryYear = expiryYear
        self.cardholder = cardholder
        self.name = name
    }
}

/// A 3-D Secure challenge (the reference's `MD` / `PaRes` round trip) as the server keeps it.
public struct CardChallenge: Sendable, Equatable {
    public enum Decision: String, Sendable, Equatable {
        case approved, failed
    }

    /// The reference's `MD`: names the challenge on the challenge page and in the completion.
    public let md: String
    public let cardID: PaymentCardID
    public let createdAt: UnixTime
    public let expiresAt: UnixTime
    /// What the person answered on the challenge page; nil while it is open.
    public let decision: Decision?
    /// The reference's `PaRes`: given with the decision, carried back by the wallet.
    public let paRes: String?
    public let completedAt: UnixTime?
}

/// Why a card operation was refused.
public enum CardError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No card with this id belongs to this wallet (or it was removed).
    case notFound
    /// The card's display name or cardholder is empty, too long or not printable.
    case invalidText(String)
    /// No challenge has this MD, or it belongs to another wallet's card or another card.
    case challengeNotFound
    /// The challenge was not answered (or completed) before it expired.
    case challengeExpired
    /// The challenge has not been answered yet: the PaRes cannot be right.
    case challengePending
    /// The person (or the issuer) failed the challenge.
    case challengeFailed
    /// The PaRes is not the one this challenge gave (another challenge's, or made up).
    case paResInvalid
    case ledger(LedgerError)

    public var description: String {
        switch self {
        case .notFound: "this wallet has no such card"
        case .invalidText(let reason): reason
        case .challengeNotFound: "no 3-D Secure challenge has this MD for this card"
        case .challengeExpired: "the 3-D Secure challenge expired before it was completed; add the card again"
        case .challengePending: "the 3-D Secure challenge has not been answered yet"
        case .challengeFailed: "the 3-D Secure challenge failed; the card was not added"
        case .paResInvalid: "the PaRes is not the one this challenge gave"
        case .ledger(let error): error.description
        }
    }
}

extension Ledger {
    /// The longest display name or cardholder, in UTF-8 bytes.
    public static let maximumCardTextBytes = 64

    /// Adds a checked, tokenized card to a wallet. With `challengeLifetime`, the card waits for a
    /// 3-D Secure challenge (returned, with its MD) and cannot pay until it succeeds.
    public func addPaymentCard(
        _ card: NewPaymentCard, to wallet: WalletID, challengeLifetime: Int64? = nil, at time: UnixTime = now()
    ) async throws(CardError) -> (card: PaymentCard, challenge: CardChallenge?) {
        let cardholder = try Self.cardText(card.cardholder, field: "cardholder")
        let name = try Self.cardText(
            card.name ?? "\(card.brand.displayName) •••• \(card.lastFour)", field: "the card's name")
        guard card.lastFour.count == 4, card.lastFour.allSatisfy({ $0.isASCII && $0.isNumber }),
            (1...12).contains(card.expiryMonth), (2000...9999).contains(card.expiryYear), !card.token.isEmpty
        else {
            throw .invalidText("the card's last four digits, expiry or token are malformed")
        }
        let id = PaymentCardID.generate()
        let state: PaymentCard.State = challengeLifetime == nil ? .ready : .challenge
        do {
            return try await store.transaction { db in
                _ = try await Self.wallet(wallet, in: db)
                try await db.query(
                    """
                    INSERT INTO payment_cards(id, wallet_id, token, brand, last_four, expiry_month, expiry_year,
                        cardholder, name, active, state, created_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)
                    """,
                    [
                        .text(id.rawValue), .text(wallet.rawValue), .text(card.token), .text(card.brand.rawValue),
                        .text(card.lastFour), .integer(Int64(card.expiryMonth)), .integer(Int64(card.expiryYear)),
                        .text(cardholder), .text(name), .text(state.rawValue), .integer(time),
                    ])
                let stored = PaymentCard(
                    id: id, walletID: wallet, token: card.token, brand: card.brand, lastFour: card.lastFour,
                    expiryMonth: card.expiryMonth, expiryYear: card.expiryYear, cardholder: cardholder, name: name,
                    isActive: true, state: state, createdAt: time)
                guard let lifetime = challengeLifetime else { return (stored, nil) }
                let md = "md_" + randomHex()
                try await db.query(
                    "INSERT INTO card_challenges(md, card_id, created_at, expires_at) VALUES (?, ?, ?, ?)",
                    [.text(md), .text(id.rawValue), .integer(time), .integer(time + lifetime)])
                return (
                    stored,
                    CardChallenge(
                        md: md, cardID: id, createdAt: time, expiresAt: time + lifetime, decision: nil, paRes: nil,
                        completedAt: nil)
                )
            }
        } catch { throw .ledger(error) }
    }

    /// The wallet's cards that were not removed, oldest first.
    public func paymentCards(of wallet: WalletID) async throws(LedgerError) -> [PaymentCard] {
        try await store.transaction { db in
            try await db.query(
                "SELECT * FROM payment_cards WHERE wallet_id = ? AND removed_at IS NULL ORDER BY created_at, id",
                [.text(wallet.rawValue)]
            ).map { row throws(LedgerError) in try Self.decodeCard(row) }
        }
    }

    /// One of the wallet's cards. Another wallet's card, a removed one and an unknown id are
    /// the same `notFound`: nothing tells a wallet that another wallet's card exists.
    public func paymentCard(_ id: PaymentCardID, of wallet: WalletID) async throws(CardError) -> PaymentCard {
        let card: PaymentCard?
        do {
            card = try await store.transaction { db in try await Self.card(id, of: wallet, in: db) }
        } catch { throw .ledger(error) }
        guard let card else { throw .notFound }
        return card
    }

    /// Switches a card on or off and renames it (nil leaves that field as it is).
    public func updatePaymentCard(_ id: PaymentCardID, of wallet: WalletID, active: Bool?, name: String?)
        async throws(CardError) -> PaymentCard
    {
        let newName = try name.map { (text) throws(CardError) in try Self.cardText(text, field: "the card's name") }
        let card: PaymentCard?
        do {
            card = try await store.transaction { db in
                guard let card = try await Self.card(id, of: wallet, in: db) else { return nil }
                try await db.query(
                    "UPDATE payment_cards SET active = ?, name = ? WHERE id = ?",
                    [
                        .integer((active ?? card.isActive) ? 1 : 0), .text(newName ?? card.name),
                        .text(id.rawValue),
                    ])
                return try await Self.card(id, of: wallet, in: db)
            }
        } catch { throw .ledger(error) }
        guard let card else { throw .notFound }
        return card
    }

    /// Removes a card: it is no longer listed and can no longer pay (its row stays, for the
    /// payments that name it).
    public func removePaymentCard(_ id: PaymentCardID, of wallet: WalletID, at time: UnixTime = now())
        async throws(CardError)
    {
        let removed: Bool
        do {
            removed = try await store.transaction { db in
                !(try await db.query(
                    "UPDATE payment_cards SET removed_at = ? WHERE id = ? AND wallet_id = ? AND removed_at IS NULL RETURNING id",
                    [.integer(time), .text(id.rawValue), .text(wallet.rawValue)]
                ).isEmpty)
            }
        } catch { throw .ledger(error) }
        guard removed else { throw .notFound }
    }

    /// The card a charge may use now: the wallet's, not removed, active and past its challenge.
    /// Nil when there is no such card or it cannot pay.
    public func payableCard(_ id: PaymentCardID, of wallet: WalletID) async throws(LedgerError) -> PaymentCard? {
        try await store.transaction { db in try await Self.card(id, of: wallet, in: db) }.flatMap {
            $0.canPay ? $0 : nil
        }
    }

    /// One of the wallet's cards, removed or not: the card a charge made earlier was made with
    /// (a retry after a lost answer may come after the card was removed). Nil when the wallet
    /// never had this card.
    public func paymentCardEverAdded(_ id: PaymentCardID, of wallet: WalletID) async throws(LedgerError)
        -> PaymentCard?
    {
        try await store.transaction { db in
            try await db.query(
                "SELECT * FROM payment_cards WHERE id = ? AND wallet_id = ?",
                [.text(id.rawValue), .text(wallet.rawValue)]
            ).first.map { row throws(LedgerError) in try Self.decodeCard(row) }
        }
    }

    // MARK: 3-D Secure challenges

    /// A challenge by its MD, for the challenge page (which anyone holding the MD may answer,
    /// as an issuer's page is).
    public func cardChallenge(md: String) async throws(LedgerError) -> CardChallenge? {
        try await store.transaction { db in try await Self.challenge(md: md, in: db) }
    }

    /// A challenge of one of the wallet's cards, for the wallet that waits for its answer.
    public func cardChallenge(md: String, of wallet: WalletID) async throws(CardError) -> CardChallenge {
        let challenge: CardChallenge?
        do {
            challenge = try await store.transaction { db in
                guard let challenge = try await Self.challenge(md: md, in: db),
                    try await Self.card(challenge.cardID, of: wallet, in: db) != nil
                else { return nil }
                return challenge
            }
        } catch { throw .ledger(error) }
        guard let challenge else { throw .challengeNotFound }
        return challenge
    }

    /// The person's answer on the challenge page: approved or failed, with a new PaRes. An
    /// answered challenge keeps its first answer (a second submission gets the same one back).
    public func decideCardChallenge(md: String, approve: Bool, at time: UnixTime = now()) async throws(CardError)
        -> CardChallenge
    {
        let outcome: Result<CardChallenge, CardError>
        do {
            outcome = try await store.transaction { db in
                guard let challenge = try await Self.challenge(md: md, in: db) else {
                    return .failure(.challengeNotFound)
                }
                if challenge.decision != nil { return .success(challenge) }
                if challenge.expiresAt <= time { return .failure(.challengeExpired) }
                let decision: CardChallenge.Decision = approve ? .approved : .failed
                try await db.query(
                    "UPDATE card_challenges SET decision = ?, pa_res = ?, decided_at = ? WHERE md = ? AND decision IS NULL",
                    [.text(decision.rawValue), .text("pares_" + randomHex()), .integer(time), .text(md)])
                guard let decided = try await Self.challenge(md: md, in: db) else {
                    return .failure(.challengeNotFound)
                }
                return .success(decided)
            }
        } catch { throw .ledger(error) }
        return try outcome.get()
    }

    /// The wallet finishes adding a card with the MD and PaRes of its challenge
    /// (`executeAddPaymentCard`): the card can pay from now on. A failed, expired, unanswered or
    /// foreign challenge, or a PaRes that is not this challenge's, leaves the card unusable.
    public func completeCardChallenge(
        card id: PaymentCardID, of wallet: WalletID, md: String, paRes: String, at time: UnixTime = now()
    ) async throws(CardError) -> PaymentCard {
        let outcome: Result<PaymentCard, CardError>
        do {
            outcome = try await store.transaction { db in
                guard let card = try await Self.card(id, of: wallet, in: db) else { return .failure(.notFound) }
                guard let challenge = try await Self.challenge(md: md, in: db), challenge.cardID == id else {
                    return .failure(.challengeNotFound)
                }
                // Completed before (a retry after a lost answer): the card as it is.
                if challenge.completedAt != nil { return .success(card) }
                guard let decision = challenge.decision, let expected = challenge.paRes else {
                    return .failure(challenge.expiresAt <= time ? .challengeExpired : .challengePending)
                }
                guard constantTimeEqual(Array(expected.utf8), Array(paRes.utf8)) else {
                    return .failure(.paResInvalid)
                }
                guard decision == .approved else { return .failure(.challengeFailed) }
                // The person answered in time, but the wallet must also come back in time: an
                // abandoned completion is as expired as an abandoned page.
                if challenge.expiresAt <= time { return .failure(.challengeExpired) }
                try await db.query(
                    "UPDATE card_challenges SET completed_at = ? WHERE md = ?", [.integer(time), .text(md)])
                try await db.query("UPDATE payment_cards SET state = 'ready' WHERE id = ?", [.text(id.rawValue)])
                guard let ready = try await Self.card(id, of: wallet, in: db) else { return .failure(.notFound) }
                return .success(ready)
            }
        } catch { throw .ledger(error) }
        return try outcome.get()
    }

    // MARK: Rows

    static func card(_ id: PaymentCardID, of wallet: WalletID, in db: any SQLTransaction) async throws(LedgerError)
        -> PaymentCard?
    {
        try await db.query(
            "SELECT * FROM payment_cards WHERE id = ? AND wallet_id = ? AND removed_at IS NULL",
            [.text(id.rawValue), .text(wallet.rawValue)]
        ).first.map { row throws(LedgerError) in try decodeCard(row) }
    }

    static func challenge(md: String, in db: any SQLTransaction) async throws(LedgerError) -> CardChallenge? {
        guard let row = try await db.query("SELECT * FROM card_challenges WHERE md = ?", [.text(md)]).first else {
            return nil
        }
        let decision = try row.optionalText("decision").map { (text) throws(LedgerError) in
            guard let decision = CardChallenge.Decision(rawValue: text) else {
                throw LedgerError.corruptRow(column: "card_challenges.decision", reason: "unknown value \(text)")
            }
            return decision
        }
        return CardChallenge(
            md: try row.text("md"), cardID: PaymentCardID(rawValue: try row.text("card_id")),
            createdAt: try row.integer("created_at"), expiresAt: try row.integer("expires_at"), decision: decision,
            paRes: try row.optionalText("pa_res"), completedAt: try row.optionalInteger("completed_at"))
    }

    static func decodeCard(_ row: SQLRow) throws(LedgerError) -> PaymentCard {
        let brandText = try row.text("brand")
        guard let brand = CardBrand(rawValue: brandText) else {
            throw .corruptRow(column: "payment_cards.brand", reason: "unknown brand \(brandText)")
        }
        let stateText = try row.text("state")
        guard let state = PaymentCard.State(rawValue: stateText) else {
            throw .corruptRow(column: "payment_cards.state", reason: "unknown state \(stateText)")
        }
        let active = try row.integer("active")
        guard active == 0 || active == 1 else {
            throw .corruptRow(column: "payment_cards.active", reason: "\(active) is not 0 or 1")
        }
        // Read so that a row without the column is refused, as every row is read strictly.
        _ = try row.optionalInteger("removed_at")
        return PaymentCard(
            id: PaymentCardID(rawValue: try row.text("id")), walletID: WalletID(rawValue: try row.text("wallet_id")),
            token: try row.text("token"), brand: brand, lastFour: try row.text("last_four"),
            expiryMonth: Int(try row.integer("expiry_month")), expiryYear: Int(try row.integer("expiry_year")),
            cardholder: try row.text("cardholder"), name: try row.text("name"), isActive: active == 1, state: state,
            createdAt: try row.integer("created_at"))
    }

    /// A cardholder or card name: trimmed, 1 to 64 bytes, no control characters.
    static func cardText(_ text: String, field: String) throws(CardError) -> String {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty, trimmed.utf8.count <= maximumCardTextBytes,
            !trimmed.unicodeScalars.contains(where: isControl)
        else {
            throw .invalidText("\(field) must be 1 to \(maximumCardTextBytes) bytes of printable text")
        }
        return trimmed
    }
}

// MARK: Paying with a card

/// What the card processor did for a card payment, as the ledger records it.
public enum CardChargeResult: Sendable, Equatable {
    /// The processor charged the card (amount and tip) under the payment id.
    case charged
    /// The processor declined the charge: the protocol's code and the processor's reason.
    case declined(code: ErrorCode, reason: String)
    /// Nothing was charged, and why (the card was removed, switched off or not verified).
    case notCharged(reason: String)
}

extension Ledger {
    /// Settles a payment the wallet confirmed with one of its cards, once per payment id like
    /// `settle` (a retry gets the stored result; other terms are a conflict). The ledger's own
    /// checks come first (amount, currency, a registered wallet); then the charge decides: a
    /// charged card moves the money from outside (the external account) to the merchant and
    /// earns bonus points as any payment; a decline is stored with the processor's reason.
    public func settleCardPayment(
        _ request: SettlementRequest, card: PaymentCardID, charge: CardChargeResult, merchant: MerchantID,
        at time: UnixTime = now()
    ) async throws(LedgerError) -> SettlementResult {
        let record = Record(payment: request)
        return try await executeOnce(
            record, merchant: merchant, at: time, card: card,
            sameTerms: { stored in
                // The digest covers the signed payment method, so a retry naming another card
                // (or the balance) is a conflict.
                stored.contentDigest == request.contentDigest && stored.transaction.walletKey == request.walletKey
                    && stored.transaction.result.transactionType == .payment
                    && stored.transaction.result.sessionID == request.sessionID
                    && stored.transaction.result.amount == request.amount
                    && stored.transaction.result.tip == request.tip
            },
            execute: { (merchant, db) throws(LedgerError) in
                try await Self.executeCardPayment(request, card: card, charge: charge, at: merchant, time: time, in: db)
            })
    }

    /// The card that paid a payment, if a card did.
    public func cardOfPayment(_ id: PaymentID) async throws(LedgerError) -> PaymentCardID? {
        try await store.transaction { db in
            try await db.query("SELECT card_id FROM card_payments WHERE payment_id = ?", [.blob(id.bytes)]).first.map {
                row throws(LedgerError) in PaymentCardID(rawValue: try row.text("card_id"))
            }
        }
    }

    static func executeCardPayment(
        _ request: SettlementRequest, card: PaymentCardID, charge: CardChargeResult, at merchant: Merchant,
        time: UnixTime, in db: any SQLTransaction
    ) async throws(LedgerError) -> Execution {
        let total: Money
        switch checkTerms(request, at: merchant) {
        case .declined(let execution): return execution
        case .total(let checked): total = checked
        }
        guard let walletID = try await activeWalletID(for: request.walletKey, in: db) else {
            return .declined(.unknownWallet, "this wallet is not registered with the merchant's Horizon server")
        }
        switch charge {
        case .declined(let code, let reason): return .declined(code, reason, wallet: walletID)
        case .notCharged(let reason): return .declined(.declined, reason, wallet: walletID)
        case .charged: break
        }
        // As for a payment from the balance (a wallet that left the program earns none).
        let earned = try await pointsEarned(by: request.amount, walletID, at: merchant, in: db)
        let points = try await earnBonusPoints(earned, walletID, merchant.id, in: db)
        let external = try await account(.external, owner: externalOwner, merchant.currency, in: db)
        let merchantAccount = try await account(.merchant, owner: merchant.id.rawValue, merchant.currency, in: db)
        let entry = try await post(
            "payment",
            [
                Leg(account: external.id, currency: merchant.currency, amount: -total.minorUnits),
                Leg(account: merchantAccount.id, currency: merchant.currency, amount: total.minorUnits),
            ], at: time, in: db)
        try await db.query(
            "INSERT INTO card_payments(payment_id, card_id, charge_key, created_at) VALUES (?, ?, ?, ?)",
            [
                .blob(request.paymentID.bytes), .text(card.rawValue), .text(request.paymentID.bytes.hexString),
                .integer(time),
            ])
        return Execution(
            outcome: .approved(reference: 0, bonusPointsEarned: earned, bonusPointsBalance: points), walletID: walletID,
            entryID: entry)
    }
}
