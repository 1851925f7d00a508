import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonProtocol
import Testing

/// A POS cancels an intent while a terminal settles its payment id, on two server processes
/// (two stores of one database): one of them wins, never both. A canceled intent's payment is
/// never executed; an executed one is never shown as canceled.
@Suite("Payment intents: cancel races settlement")
struct PaymentIntentRaceTests {
    static let stores: [StoreKind] = TestStores.postgresConfigured ? [.sqlite, .postgres] : [.sqlite]

    @Test(arguments: stores)
    func cancelAndSettlementOfOneIntentNeverBothWin(_ kind: StoreKind) async throws {
        try await TestStores.withStores(kind) { store, another in
            let first = try await Ledger.open(store)
            let second = try await Ledger.open(try another())
            let merchant = try await first.createMerchant(name: "Bakery", currency: .eur, adminEmail: "o@b.example")
            let wallet = try await first.createWallet(name: "Alex", publicKey: walletKey(1))
            try await first.deposit(euros(100_00), to: wallet.id)
            var canceled = 0
            var executed = 0
            for round in 1...20 {
                let intent = NewPaymentIntent(
                    paymentID: paymentID(round), idempotencyKey: "round-\(round)", requestDigest: [UInt8(round)],
                    orderReference: "ORDER-\(round)", amount: euros(1_00), metadata: "{}", terminalID: nil,
                    expiresAt: 4_000_000_000)
                _ = try await first.createPaymentIntent(intent, merchant: merchant.id, at: 1_000).get()
                async let cancel = first.cancelPaymentIntent(paymentID(round), of: merchant.id, at: 1_001)
                async let settle = second.settle(request(round, amount: euros(1_00)), merchant: merchant.id, at: 1_001)
                let (cancelResult, settlement) = try await (cancel, settle)
                let count = try await first.executionCount(of: paymentID(round))
                let status = try #require(try await first.paymentIntent(paymentID(round), of: merchant.id, at: 1_002))
                    .status
                switch cancelResult {
                case .success?:
                    #expect(count == 0 && status == .canceled, "round \(round): canceled, yet executed")
                    #expect(!settlement.outcome.isApproved)
                    canceled += 1
                default:
                    #expect(count == 1 && status == .succeeded, "round \(round): \(status), \(count) executions")
                    #expect(settlement.outcome.isApproved)
                    executed += 1
                }
            }
            #expect(canceled + executed == 20)
            #expect(try await first.balance(of: wallet.id, in: .eur) == euros(100_00 - Int64(executed) * 1_00))
            await second.close()
        }
    }
}
