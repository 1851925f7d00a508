import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol

/// The wallet's services: account data, balances, history,
/// bonus, gold and coupon programs, signed by the wallet's registered key. Each operation
/// resolves the signing key to its wallet and reads or changes that wallet only: no request
/// names a wallet, so wallet B cannot even ask for wallet A's data.
extension APIHandler {
    // MARK: Account data

    func getWalletAccount(_ input: Operations.GetWalletAccount.Input) async throws
        -> Operations.GetWalletAccount.Output
    {
        let wallet = try await signingWallet()
        return .ok(.init(body: .json(Self.accountData(try await ledger.accountData(of: wallet.id)))))
    }

    func setWalletAccount(_ input: Operations.SetWalletAccount.Input) async throws
        -> Operations.SetWalletAccount.Output
    {
        guard case .json(let update) = input.body else {
            throw APIError(.unsupportedMediaType, "the body must be JSON")
        }
        let wallet = try await signingWallet()
        let data = try await ledger.setWalletName(update.name, of: wallet.id)
        RequestScope.current?.logger.info("wallet renamed", metadata: ["wallet": "\(wallet.id)"])
        return .ok(.init(body: .json(Self.accountData(data))))
    }

    // MARK: Balances and history

    func getWalletBalances(_ input: Operations.GetWalletBalances.Input) async throws
        -> Operations.GetWalletBalances.Output
    {
        let wallet = try await signingWallet()
        let balances = try await ledger.balances(of: wallet.id).map {
            Components.Schemas.Amount(amount: $0.minorUnits, currency: $0.currency.code)
        }
        return .ok(.init(body: .json(.init(balances: balances))))
    }

    func listWalletTransactions(_ input: Operations.ListWalletTransactions.Input) async throws
        -> Operations.ListWalletTransactions.Output
    {
        let wallet = try await signingWallet()
        let limit = Int(input.query.limit ?? 20)
        guard (1...100).contains(limit) else { throw APIError(.invalidRequest, "limit must be 1 to 100") }
        let before = try input.query.cursor.map(WalletHistoryCursor.reference(from:))
        // One more than asked tells whether a next page exists without a second query.
        let entries = try await ledger.history(of: wallet.id, limit: min(limit + 1, 100), before: before)
        let page = Array(entries.prefix(limit))
        let next =
            entries.count > limit ? page.last.map { WalletHistoryCursor.cursor(for: $0.transaction.reference) } : nil
        return .ok(.init(body: .json(.init(transactions: page.map(Self.walletTransaction), nextCursor: next))))
    }

    func getWalletTransaction(_ input: Operations.GetWalletTransaction.Input) async throws
        -> Operations.GetWalletTransaction.Output
    {
        let wallet = try await signingWallet()
        guard let bytes = [UInt8](hexString: input.path.paymentId), let id = try? PaymentID(bytes: bytes) else {
            throw APIError(.invalidRequest, "paymentId must be 32 hex digits")
        }
        // Another wallet's transaction is answered exactly like a missing one.
        guard let entry = try await ledger.historyEntry(id, of: wallet.id) else {
            throw APIError(.transactionNotFound, "this wallet has no transaction \(input.path.paymentId)")
        }
        return .ok(.init(body: .json(Self.walletTransaction(entry))))
    }

    // MARK: Programs

    func listWalletBonusPrograms(_ input: Operations.ListWalletBonusPrograms.Input) async throws
        -> Operations.ListWalletBonusPrograms.Output
    {
        let wallet = try await signingWallet()
        var programs = try await ledger.bonusPrograms(of: wallet.id)
        if input.query.participating == true { programs = programs.filter { $0.state == .joined } }
        return .ok(.init(body: .json(.init(programs: programs.map(Self.bonusProgram)))))
    }

    func setWalletBonusMembership(_ input: Operations.SetWalletBonusMembership.Input) async throws
        -> Operations.SetWalletBonusMembership.Output
    {
        guard case .json(let update) = input.body else {
            throw APIError(.unsupportedMediaType, "the body must be JSON")
        }
        let wallet = try await signingWallet()
        let state: BonusMembershipState = update.state == .joined ? .joined : .left
        let program = try await ledger.setBonusMembership(
            state, of: wallet.id, at: MerchantID(rawValue: input.path.merchantId), time: now())
        metrics.record(event: "bonus_membership_\(state.rawValue)")
        return .ok(.init(body: .json(Self.bonusProgram(program))))
    }

    func listWalletGoldMemberships(_ input: Operations.ListWalletGoldMemberships.Input) async throws
        -> Operations.ListWalletGoldMemberships.Output
    {
        let wallet = try await signingWallet()
        let time = now()
        let memberships = try await ledger.goldMemberships(of: wallet.id).map { entry in
            let membership = entry.membership
            let current = (time - membership.validFrom) / membership.benefitPeriod
            // The redemption rule's test, so the app shows what a terminal would accept.
            let available =
                time >= membership.validFrom && time <= membership.validUntil
                && (membership.lastBenefitPeriod.map { current > $0 } ?? true)
            return Components.Schemas.GoldMembership(
                merchantId: entry.merchantID.rawValue, merchantName: entry.merchantName, tier: membership.tier,
                validFrom: membership.validFrom, validUntil: membership.validUntil,
                benefitPeriod: membership.benefitPeriod, benefitAvailable: available)
        }
        return .ok(.init(body: .json(.init(memberships: memberships))))
    }

    func listWalletCoupons(_ input: Operations.ListWalletCoupons.Input) async throws
        -> Operations.ListWalletCoupons.Output
    {
        let wallet = try await signingWallet()
        let time = now()
        let coupons = try await ledger.coupons(of: wallet.id).map { entry in
            let coupon = entry.coupon
            let status: Components.Schemas.Coupon.StatusPayload =
                coupon.redeemedAt != nil ? .redeemed : time > coupon.expiresAt ? .expired : .open
            return Components.Schemas.Coupon(
                merchantId: entry.merchantID.rawValue, merchantName: entry.merchantName, code: coupon.code,
                description: coupon.description, value: coupon.value.minorUnits, currency: coupon.value.currency.code,
                expiresAt: coupon.expiresAt, redeemedAt: coupon.redeemedAt, status: status)
        }
        return .ok(.init(body: .json(.init(coupons: coupons))))
    }

    // MARK: Status messages

    func getStatusMessages(_ input: Operations.GetStatusMessages.Input) async throws
        -> Operations.GetStatusMessages.Output
    {
        let messages = try await ledger.statusMessages(shownAt: now()).map { message in
            Components.Schemas.StatusMessage(
                id: message.id, severity: .init(rawValue: message.severity.rawValue) ?? .info, title: message.title,
                body: message.body, startsAt: message.startsAt, endsAt: message.endsAt)
        }
        return .ok(.init(body: .json(.init(messages: messages))))
    }

    // MARK: Authentication

    /// The wallet whose registered, unrevoked key signed this request.
    func signingWallet() async throws -> Wallet {
        guard let signer = RequestScope.current?.signer else {
            throw APIError(
                .unauthenticated, "this operation needs a request signed with the wallet's key (HorizonSignature)",
                headers: [.wwwAuthenticate: RequestSignature.scheme])
        }
        switch try await ledger.walletKeyStatus(signer) {
        case .active(let wallet):
            return wallet
        case .revoked:
            throw APIError(
                .walletKeyRevoked,
                "this wallet key was revoked (the wallet was restored on another device); restore the wallet here with `horizon-wallet restore`",
                headers: [.wwwAuthenticate: RequestSignature.scheme])
        case .unknown:
            throw APIError(
                .walletUnknown, "the signing key is not a registered wallet; register it with `horizon-wallet register`"
            )
        }
    }

    // MARK: Encoding

    static func accountData(_ data: WalletAccountData) -> Components.Schemas.WalletAccountData {
        .init(
            walletId: data.id.rawValue, name: data.name, email: data.email, phone: data.phone, createdAt: data.createdAt
        )
    }

    static func walletTransaction(_ entry: WalletHistoryEntry) -> Components.Schemas.WalletTransaction {
        let transaction = entry.transaction
        let result = transaction.result
        let isPayment = result.transactionType == .payment
        var body = Components.Schemas.WalletTransaction(
            paymentId: result.paymentID.bytes.hexString,
            transactionType: .init(rawValue: typeName(result.transactionType).rawValue) ?? .payment,
            outcome: result.outcome.isApproved ? .approved : .declined, amount: result.amount.minorUnits,
            tip: result.tip.minorUnits, currency: result.amount.currency.code,
            merchantId: transaction.merchantID.rawValue, merchantName: entry.merchantName,
            registerUser: transaction.registerUser.isEmpty ? nil : transaction.registerUser,
            settledAt: result.settledAt, item: isPayment ? nil : result.item,
            quantity: isPayment ? nil : result.quantity,
            refunds: entry.refunds.map { refund in
                .init(
                    refundId: refund.refundID.rawValue, amount: refund.amount.minorUnits,
                    currency: refund.amount.currency.code, destination: refund.destination.rawValue,
                    bonusPointsReversed: refund.bonusPointsReversed, refundedAt: refund.createdAt)
            })
        switch result.outcome {
        case .approved(let reference, let earned, let balance):
            body.reference = Int64(bitPattern: reference)
            body.bonusPointsEarned = earned
            body.bonusPointsBalance = balance
        case .declined(_, let reason):
            body.declineReason = reason
        }
        return body
    }

    static func bonusProgram(_ program: BonusProgramMembership) -> Components.Schemas.BonusProgram {
        .init(
            merchantId: program.merchantID.rawValue, merchantName: program.merchantName,
            currency: program.currency.code, pointsPerMajorUnit: program.pointsPerMajorUnit,
            state: .init(rawValue: program.state.rawValue) ?? .notJoined, points: program.points)
    }
}

/// The opaque cursor of a wallet's history: the last reference of a page, versioned so that a
/// later server can change what it holds. Clients pass it back as given.
enum WalletHistoryCursor {
    static let prefix = "h1."

    static func cursor(for reference: Int64) -> String { prefix + String(reference, radix: 36) }

    static func reference(from cursor: String) throws -> Int64 {
        guard cursor.hasPrefix(prefix), let reference = Int64(cursor.dropFirst(prefix.count), radix: 36),
            reference > 0
        else {
            throw APIError(
                .invalidCursor,
                "cursor is not one this server gave; pass a page's nextCursor as it is, or start again without a cursor"
            )
        }
        return reference
    }
}
