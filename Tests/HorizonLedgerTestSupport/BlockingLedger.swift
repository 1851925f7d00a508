import Foundation
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonSettlement
import HorizonStores

/// A terminal's `InProcessLedger` for the simulated worlds' tests, which drive their simulation
/// synchronously (`world.run(until:)`) and look at the ledger between steps: each helper waits
/// for the ledger on the calling thread (`ExternalWork.wait`, whose task runs on that thread, so
/// it needs no free pool thread). The processor requirements stay async and go straight through.
public final class BlockingLedger: PaymentProcessor, RedemptionProcessor, Sendable {
    public let inProcess: InProcessLedger

    public init(path: String, configuration: InProcessLedgerConfiguration = InProcessLedgerConfiguration())
        throws(LedgerError)
    {
        inProcess = try Self.wait { try await InProcessLedger.open(path: path, configuration: configuration) }
    }

    public var currency: Currency { inProcess.currency }

    /// The ledger's calls throw only `LedgerError`; the closure's type just cannot say so.
    static func wait<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws(LedgerError) -> T {
        try ExternalWork.wait { () async -> Result<T, LedgerError> in
            do {
                return .success(try await body())
            } catch let error as LedgerError {
                return .failure(error)
            } catch {
                return .failure(.database(String(describing: error)))
            }
        }.get()
    }

    // MARK: PaymentProcessor, RedemptionProcessor

    public func settle(_ request: SettlementRequest, at time: UnixTime) async throws(ProcessorError)
        -> SettlementResult
    {
        try await inProcess.settle(request, at: time)
    }

    public func redeem(_ request: RedemptionRequest, at time: UnixTime) async throws(ProcessorError)
        -> SettlementResult
    {
        try await inProcess.redeem(request, at: time)
    }

    public func result(for paymentID: PaymentID) async throws(ProcessorError) -> SettlementResult? {
        try await inProcess.result(for: paymentID)
    }

    // MARK: The ledger's helpers, waited for

    public func setBalance(_ balance: Int64, for walletKey: PublicKeyBytes, at time: UnixTime = 0)
        throws(LedgerError)
    {
        let ledger = inProcess
        try Self.wait { try await ledger.setBalance(balance, for: walletKey, at: time) }
    }

    public func account(for walletKey: PublicKeyBytes) throws(LedgerError) -> WalletAccount? {
        let ledger = inProcess
        return try Self.wait { try await ledger.account(for: walletKey) }
    }

    public func merchantBalance() throws(LedgerError) -> Money {
        let ledger = inProcess
        return try Self.wait { try await ledger.merchantBalance() }
    }

    public func transactions(limit: Int = 50) throws(LedgerError) -> [SettlementResult] {
        let ledger = inProcess
        return try Self.wait { try await ledger.transactions(limit: limit) }
    }

    public func executionCount(of paymentID: PaymentID) throws(LedgerError) -> Int {
        let ledger = inProcess
        return try Self.wait { try await ledger.executionCount(of: paymentID) }
    }

    public func addRegisterUser(_ name: String, at time: UnixTime = 0) throws(LedgerError) {
        let ledger = inProcess
        try Self.wait { try await ledger.addRegisterUser(name, at: time) }
    }

    public func registerUsers() throws(LedgerError) -> [String] {
        let ledger = inProcess
        return try Self.wait { try await ledger.registerUsers() }
    }

    public func addBonusPoints(_ points: Int64, for walletKey: PublicKeyBytes, at time: UnixTime = 0)
        throws(LedgerError)
    {
        let ledger = inProcess
        try Self.wait { try await ledger.addBonusPoints(points, for: walletKey, at: time) }
    }

    public func grantGoldMembership(
        to walletKey: PublicKeyBytes, tier: String, validFrom: UnixTime, validUntil: UnixTime,
        benefitPeriod: Int64 = 30 * 86_400
    ) throws(LedgerError) {
        let ledger = inProcess
        try Self.wait {
            try await ledger.grantGoldMembership(
                to: walletKey, tier: tier, validFrom: validFrom, validUntil: validUntil, benefitPeriod: benefitPeriod)
        }
    }

    public func issueCoupon(
        code: String, to walletKey: PublicKeyBytes, description: String, value: Money, expiresAt: UnixTime,
        at time: UnixTime = 0
    ) throws(LedgerError) {
        let ledger = inProcess
        try Self.wait {
            try await ledger.issueCoupon(
                code: code, to: walletKey, description: description, value: value, expiresAt: expiresAt, at: time)
        }
    }

    public func goldMembership(for walletKey: PublicKeyBytes) throws(LedgerError) -> Membership? {
        let ledger = inProcess
        return try Self.wait { try await ledger.goldMembership(for: walletKey) }
    }

    public func coupons(for walletKey: PublicKeyBytes) throws(LedgerError) -> [IssuedCoupon] {
        let ledger = inProcess
        return try Self.wait { try await ledger.coupons(for: walletKey) }
    }

    public func merchantPrograms() throws(LedgerError) -> MerchantPrograms {
        let ledger = inProcess
        return try Self.wait { try await ledger.merchantPrograms() }
    }
}

extension BlockingLedger {
    /// `LedgerAudit`'s violations of the ledger's books (empty when they are consistent).
    public func auditViolations() throws(LedgerError) -> [String] {
        let store = inProcess.ledger.store
        return try Self.wait { try await LedgerAudit.violations(in: store) }
    }
}
