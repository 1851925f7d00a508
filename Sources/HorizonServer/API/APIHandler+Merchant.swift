import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol

/// The merchant service (`/v1/merchant/...`): register users, transactions, refunds,
/// programs and terminals of the signing terminal's merchant. Every operation starts with
/// `signingTerminal()` (an active, unrevoked terminal), and every ledger call is scoped to that
/// terminal's merchant: another merchant's payment, terminal or register user is answered
/// exactly like one that does not exist.
extension APIHandler {
    // MARK: Register users

    func listRegisterUsers(_ input: Operations.ListRegisterUsers.Input) async throws
        -> Operations.ListRegisterUsers.Output
    {
        let caller = try await merchantCaller()
        let users = try await ledger.registerUsers(of: caller.merchantID)
        return .ok(.init(body: .json(.init(registerUsers: users.map(Self.registerUser)))))
    }

    func addRegisterUser(_ input: Operations.AddRegisterUser.Input) async throws -> Operations.AddRegisterUser.Output {
        guard case .json(let body) = input.body else { throw APIError(.unsupportedMediaType, "the body must be JSON") }
        let caller = try await merchantCaller()
        let name = try Self.checkRegisterUser(id: body.id, name: body.name) ?? ""
        let added = await Self.result { () async throws(LedgerError) in
            try await ledger.addRegisterUser(id: body.id, name: name, to: caller.merchantID, at: now())
        }
        if case .failure(.alreadyExists) = added {
            throw APIError(
                .registerUserExists,
                "register user \(body.id) exists already; choose another id, or rename it (PUT) to change its name")
        }
        try added.get()
        guard let user = try await ledger.registerUser(id: body.id, of: caller.merchantID) else {
            throw APIError(.internalError, "the register user just added cannot be read back")
        }
        return .created(.init(body: .json(Self.registerUser(user))))
    }

    func renameRegisterUser(_ input: Operations.RenameRegisterUser.Input) async throws
        -> Operations.RenameRegisterUser.Output
    {
        guard case .json(let body) = input.body else { throw APIError(.unsupportedMediaType, "the body must be JSON") }
        let caller = try await merchantCaller()
        let id = input.path.userId
        let name = try Self.checkRegisterUser(id: id, name: body.name) ?? ""
        guard try await ledger.renameRegisterUser(id: id, to: name, of: caller.merchantID),
            let user = try await ledger.registerUser(id: id, of: caller.merchantID)
        else { throw Self.noRegisterUser(id) }
        return .ok(.init(body: .json(Self.registerUser(user))))
    }

    func removeRegisterUser(_ input: Operations.RemoveRegisterUser.Input) async throws
        -> Operations.RemoveRegisterUser.Output
    {
        let caller = try await merchantCaller()
        let id = input.path.userId
        _ = try Self.checkRegisterUser(id: id, name: nil)
        guard try await ledger.removeRegisterUser(id: id, from: caller.merchantID) else {
            throw Self.noRegisterUser(id)
        }
        return .noContent(.init())
    }

    /// The checked, trimmed name (nil when `name` is nil), or the exact refusal.
    static func checkRegisterUser(id: String, name: String?) throws -> String? {
        do { return try RegisterUserRules.check(id: id, name: name) } catch {
            let code: APIError.Code =
                switch error {
                case .invalidID: .registerUserIDInvalid
                case .invalidName: .registerUserNameInvalid
                }
            throw APIError(code, error.description)
        }
    }

    static func noRegisterUser(_ id: String) -> APIError {
        APIError(.registerUserNotFound, "this merchant has no register user \(id)")
    }

    static func registerUser(_ user: RegisterUser) -> Components.Schemas.RegisterUser {
        .init(id: user.id, name: user.name, addedAt: user.addedAt)
    }

    // MARK: Transactions and refunds

    func listMerchantTransactions(_ input: Operations.ListMerchantTransactions.Input) async throws
        -> Operations.ListMerchantTransactions.Output
    {
        let caller = try await merchantCaller(keyScopes: [.transactionsRead])
        let query = input.query
        let limit = Int(query.limit ?? 50)
        guard (1...200).contains(limit) else { throw APIError(.invalidRequest, "limit must be 1 to 200") }
        var cursor: TransactionCursor?
        if let token = query.cursor {
            guard let parsed = TransactionCursor(token: token) else {
                throw APIError(
                    .invalidCursor, "cursor is not one this server made; send the nextCursor of the page before")
            }
            cursor = parsed
        }
        if let from = query.from, let to = query.to, from > to {
            throw APIError(.invalidRequest, "from (\(from)) is after to (\(to))")
        }
        // The contract's limit (characters, as JSON Schema counts them): a longer filter names no
        // register user and is a mistake to report, not an empty page.
        if let user = query.registerUser, user.unicodeScalars.count > 64 {
            throw APIError(.invalidRequest, "registerUser must be at most 64 characters")
        }
        let filter = TransactionFilter(
            from: query.from, to: query.to, type: query._type.map(Self.transactionType),
            registerUser: query.registerUser)
        let page = try await ledger.transactions(of: caller.merchantID, filter: filter, limit: limit, after: cursor)
        return .ok(
            .init(
                body: .json(
                    .init(
                        transactions: page.transactions.map { Self.merchantTransaction($0.transaction, $0.refunded) },
                        nextCursor: page.nextCursor?.token))))
    }

    func getMerchantTransaction(_ input: Operations.GetMerchantTransaction.Input) async throws
        -> Operations.GetMerchantTransaction.Output
    {
        let caller = try await merchantCaller(keyScopes: [.transactionsRead])
        let id = try Self.paymentID(input.path.paymentId)
        guard let details = try await ledger.transactionDetails(id, merchant: caller.merchantID) else {
            throw Self.noPayment(id)
        }
        let refunded = try Money(
            minorUnits: details.refunds.map(\.amount.minorUnits).reduce(0, +),
            currency: details.transaction.result.amount.currency)
        return .ok(
            .init(
                body: .json(
                    .init(
                        transaction: Self.merchantTransaction(details.transaction, refunded),
                        refunds: details.refunds.map(Self.refund), refundableAmount: details.refundable.minorUnits))))
    }

    func listRefunds(_ input: Operations.ListRefunds.Input) async throws -> Operations.ListRefunds.Output {
        let caller = try await merchantCaller(keyScopes: [.transactionsRead])
        let id = try Self.paymentID(input.path.paymentId)
        let refunds = try await ledger.refunds(of: id, merchant: caller.merchantID)
        return .ok(.init(body: .json(.init(refunds: refunds.map(Self.refund)))))
    }

    func createRefund(_ input: Operations.CreateRefund.Input) async throws -> Operations.CreateRefund.Output {
        guard case .json(let body) = input.body else { throw APIError(.unsupportedMediaType, "the body must be JSON") }
        let caller = try await merchantAdmin(for: "a refund", keyScope: .refundsWrite)
        let paymentID = try Self.paymentID(body.paymentId)
        let currency: Currency
        do { currency = try Currency(code: body.currency.uppercased()) } catch {
            throw APIError(.invalidRequest, "currency \(body.currency) is not a supported ISO 4217 code")
        }
        guard body.amount > 0 else { throw APIError(.refundAmountInvalid, RefundRefusal.invalidAmount.description) }
        let amount: Money
        do { amount = try Money(minorUnits: body.amount, currency: currency) } catch {
            throw APIError(.refundAmountInvalid, "amount must be 1 to 10^15 minor units")
        }
        let request = RefundRequest(refundID: RefundID(rawValue: body.refundId), paymentID: paymentID, amount: amount)
        // To the method the payment came from: a card payment's refund goes on to its processor.
        let refund: Refund
        do {
            refund = try await CardRefunds(ledger: ledger, processor: cards).refund(
                request, merchant: caller.merchantID, at: now())
        } catch {
            switch error {
            case .ledger(.refundRefused(let refusal)):
                metrics.record(event: "refund_refused")
                throw APIError(.refundRefused(refusal))
            case .ledger(let error): throw error
            case .processor:
                metrics.record(event: "refund_processor_unconfirmed")
                throw APIError(.cardProcessorUnavailable, error.description)
            }
        }
        metrics.record(event: "refund_executed")
        RequestScope.current?.logger.info(
            "refund executed",
            metadata: ["refund": "\(refund.refundID)", "payment": "\(paymentID)", "by": "\(caller)"])
        return .ok(.init(body: .json(Self.refund(refund))))
    }

    /// A ledger call's outcome as a value, so that one refusal can be told apart before the
    /// others go to the boundary's mapping.
    static func result<T>(_ body: () async throws(LedgerError) -> T) async -> Result<T, LedgerError> {
        do { return .success(try await body()) } catch { return .failure(error) }
    }

    static func paymentID(_ text: String) throws -> PaymentID {
        guard let bytes = [UInt8](hexString: text.lowercased()), let id = try? PaymentID(bytes: bytes) else {
            throw APIError(.invalidRequest, "paymentId must be 32 hex digits")
        }
        return id
    }

    static func noPayment(_ id: PaymentID) -> APIError {
        APIError(.paymentNotFound, "no payment \(id.bytes.hexString) was executed for this merchant")
    }

    static func transactionType(_ kind: Components.Schemas.TransactionKind) -> TransactionType {
        switch kind {
        case .payment: .payment
        case .bonus: .bonusRedemption
        case .gold: .goldRedemption
        case .coupon: .couponRedemption
        }
    }

    static func transactionKind(_ type: TransactionType) -> Components.Schemas.TransactionKind {
        switch type {
        case .payment: .payment
        case .bonusRedemption: .bonus
        case .goldRedemption: .gold
        case .couponRedemption: .coupon
        }
    }

    static func merchantTransaction(_ transaction: LedgerTransaction, _ refunded: Money)
        -> Components.Schemas.MerchantTransaction
    {
        let result = transaction.result
        let isPayment = result.transactionType == .payment
        var body = Components.Schemas.MerchantTransaction(
            paymentId: result.paymentID.bytes.hexString, reference: transaction.reference,
            transactionType: transactionKind(result.transactionType),
            outcome: result.outcome.isApproved ? .approved : .declined, amount: result.amount.minorUnits,
            tip: result.tip.minorUnits, currency: result.amount.currency.code, item: isPayment ? nil : result.item,
            quantity: isPayment ? nil : result.quantity, registerUser: transaction.registerUser,
            terminalKeyId: transaction.terminalKeyID.bytes.hexString,
            settledAt: result.settledAt, refundedAmount: refunded.minorUnits)
        switch result.outcome {
        case .approved(_, let earned, _): body.bonusPointsEarned = earned
        case .declined(let code, let reason):
            body.declineCode = Int32(code.rawValue)
            body.declineReason = reason
        }
        // Offline settlement
        body.offline = transaction.offline.map(Self.offlineAcceptance)
        body.orderReference = transaction.orderReference
        return body
    }

    static func refund(_ refund: Refund) -> Components.Schemas.Refund {
        .init(
            refundId: refund.refundID.rawValue, reference: refund.reference,
            paymentId: refund.paymentID.bytes.hexString,
            amount: refund.amount.minorUnits, currency: refund.amount.currency.code,
            destination: refund.destination.rawValue, bonusPointsReversed: refund.bonusPointsReversed,
            createdAt: refund.createdAt)
    }

    // MARK: Programs

    func getMerchantPrograms(_ input: Operations.GetMerchantPrograms.Input) async throws
        -> Operations.GetMerchantPrograms.Output
    {
        let caller = try await merchantCaller()
        let programs = try await ledger.programs(of: caller.merchantID)
        let merchant = try await ledger.merchant(caller.merchantID)
        return .ok(
            .init(
                body: .json(
                    .init(
                        hasBonusProgram: programs.hasBonusProgram, hasGoldProgram: programs.hasGoldProgram,
                        hasCouponProgram: programs.hasCouponProgram,
                        bonusProgram: .init(
                            pointsPerMajorUnit: merchant.bonusPointsPerMajorUnit, currency: merchant.currency.code)))))
    }

    // MARK: Terminals

    func listMerchantTerminals(_ input: Operations.ListMerchantTerminals.Input) async throws
        -> Operations.ListMerchantTerminals.Output
    {
        let caller = try await merchantCaller()
        let terminals = try await ledger.terminals(of: caller.merchantID)
        return .ok(
            .init(body: .json(.init(terminals: terminals.map { Self.merchantTerminal($0, caller: caller.terminal) }))))
    }

    func revokeMerchantTerminal(_ input: Operations.RevokeMerchantTerminal.Input) async throws
        -> Operations.RevokeMerchantTerminal.Output
    {
        let caller = try await merchantAdmin(for: "revoking a terminal")
        let id = TerminalID(rawValue: input.path.terminalId)
        guard let revoked = try await ledger.revokeTerminal(id, of: caller.merchantID, at: now()) else {
            throw APIError(.terminalNotFound, "this merchant has no terminal \(id)")
        }
        metrics.record(event: "terminal_revoked")
        RequestScope.current?.logger.notice(
            "terminal revoked", metadata: ["terminal": "\(revoked.id)", "by": "\(caller)"])
        return .ok(.init(body: .json(Self.merchantTerminal(revoked, caller: caller.terminal))))
    }

    static func merchantTerminal(_ terminal: TerminalRecord, caller: TerminalRecord?)
        -> Components.Schemas.MerchantTerminal
    {
        .init(
            terminalId: terminal.id.rawValue, label: terminal.label, keyId: terminal.keyID.hexString,
            activatedAt: terminal.activatedAt, credentialExpiresAt: terminal.credentialExpiresAt,
            revokedAt: terminal.revokedAt, isCaller: terminal.id == caller?.id)
    }
}
