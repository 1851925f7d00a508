import Foundation
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonStores
import Testing

/// What a merchant reads of its own business (merchant service and dashboard), on
/// every store (`LedgerSuites.swift`).
extension LedgerContract {
    static func transactionsArePagedAndFiltered(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, _, key) = try await F.shop(ledger)
            let other = try await ledger.createMerchant(name: "Diner", currency: .eur, adminEmail: "d@diner.example")
            var ids: [PaymentID] = []
            for (index, user) in ["ada", "bob", "ada", "bob", "ada"].enumerated() {
                let paid = try await ledger.settle(
                    F.payment(wallet: key, amount: Int64(index + 1) * 1_00, registerUser: user), merchant: merchant.id,
                    at: 10_000 + Int64(index) * 100)
                ids.append(paid.paymentID)
            }
            _ = try await ledger.settle(F.payment(wallet: key, amount: 1_00), merchant: other.id, at: 10_050)
            let redeemed = try await ledger.redeem(
                F.redemption(.bonusRedemption, wallet: key, quantity: 1), merchant: merchant.id, at: 20_000)
            _ = try await ledger.refund(
                RefundRequest(refundID: RefundID(rawValue: "r1"), paymentID: ids[1], amount: F.money(50)),
                merchant: merchant.id)

            // Pages of two, newest first, until a page without a cursor; the other merchant's never.
            var seen: [PaymentID] = []
            var cursor: TransactionCursor?
            var pages = 0
            repeat {
                let page = try await ledger.transactions(of: merchant.id, filter: .init(), limit: 2, after: cursor)
                seen += page.transactions.map(\.transaction.result.paymentID)
                cursor = page.nextCursor
                pages += 1
            } while cursor != nil
            #expect(pages == 3)
            #expect(seen == [redeemed.paymentID] + ids.reversed())
            let all = try await ledger.transactions(of: merchant.id, filter: .init())
            #expect(all.transactions.first { $0.transaction.result.paymentID == ids[1] }?.refunded == F.money(50))
            #expect(all.transactions.allSatisfy { $0.transaction.merchantID == merchant.id })

            let adas = try await ledger.transactions(of: merchant.id, filter: .init(registerUser: "ada"))
            #expect(adas.transactions.map(\.transaction.result.paymentID) == [ids[4], ids[2], ids[0]])
            let bonus = try await ledger.transactions(of: merchant.id, filter: .init(type: .bonusRedemption))
            #expect(bonus.transactions.map(\.transaction.result.paymentID) == [redeemed.paymentID])
            let window = try await ledger.transactions(of: merchant.id, filter: .init(from: 10_100, to: 10_300))
            #expect(window.transactions.map(\.transaction.result.paymentID) == [ids[2], ids[1]])
            await #expect(throws: LedgerError.invalidArgument("the date range's start (2) is after its end (1)")) {
                _ = try await ledger.transactions(of: merchant.id, filter: .init(from: 2, to: 1))
            }

            // Cursors are opaque and checked; one past the end is an empty last page.
            let oldest = try #require(all.transactions.last?.transaction.reference)
            let beyond = try #require(TransactionCursor(token: TransactionCursorToken.make(before: oldest)))
            let empty = try await ledger.transactions(of: merchant.id, filter: .init(), after: beyond)
            #expect(empty.transactions.isEmpty && empty.nextCursor == nil)
            for bad in ["", "not a cursor", "dHgxOjA", "dHgxOi0x", "eHg6MTI"] {
                #expect(TransactionCursor(token: bad) == nil, "\(bad)")
            }

            let details = try #require(try await ledger.transactionDetails(ids[1], merchant: merchant.id))
            #expect(details.refunds.map(\.refundID.rawValue) == ["r1"])
            #expect(details.refundable == F.money(2_00 - 50))
            #expect(try await ledger.transactionDetails(ids[1], merchant: other.id) == nil)
            let redemption = try #require(
                try await ledger.transactionDetails(redeemed.paymentID, merchant: merchant.id))
            #expect(redemption.refundable == F.money(0))
        }
    }

    /// The dashboard's searches (payment id, reference, amount), the terminal filter, the
    /// totals per period and the merchant's time zone.
    static func transactionsAreSearchedAndTotalledPerPeriod(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, _, key) = try await F.shop(ledger, balance: 1_000_00)
            #expect(merchant.timeZone == "UTC")
            let otherTerminal = try TerminalKeyID(bytes: [9, 9, 9, 9, 9, 9, 9, 9])
            var paid: [PaymentID] = []
            for (index, amount) in [12_50, 7_25, 42_00, 5_00].enumerated() {
                paid.append(
                    try await ledger.settle(
                        F.payment(wallet: key, amount: Int64(amount), tip: index == 0 ? 1_50 : 0),
                        merchant: merchant.id,
                        at: 10_000 + Int64(index) * 100
                    ).paymentID)
            }
            // A decline: counted apart, never in the sales.
            let declined = try await ledger.settle(
                F.payment(wallet: key, amount: 999_999_00), merchant: merchant.id, at: 10_350)
            #expect(!declined.outcome.isApproved)
            _ = try await ledger.refund(
                RefundRequest(refundID: RefundID(rawValue: "r1"), paymentID: paid[0], amount: F.money(2_00)),
                merchant: merchant.id, at: 20_000)
            func found(_ matching: [TransactionSearch], terminal: TerminalKeyID? = nil) async throws -> [PaymentID] {
                try await ledger.transactions(
                    of: merchant.id, filter: TransactionFilter(terminalKeyID: terminal, matching: matching)
                ).transactions.map(\.transaction.result.paymentID)
            }
            let reference = try #require(try await ledger.transaction(for: paid[1])?.reference)
            #expect(try await found([.paymentID(paid[2])]) == [paid[2]])
            #expect(try await found([.reference(reference)]) == [paid[1]])
            #expect(try await found([.amount(7_25)]) == [paid[1]])
            #expect(try await found([.amount(14_00)]) == [paid[0]])  // amount plus tip
            #expect(try await found([.reference(reference), .amount(42_00)]) == [paid[2], paid[1]])
            #expect(try await found([.amount(1)]).isEmpty)
            #expect(try await found([.amount(12_50)], terminal: F.terminal) == [paid[0]])
            #expect(try await found([], terminal: otherTerminal).isEmpty)

            let totals = try await ledger.totals(
                of: merchant.id, in: [10_000..<10_400, 10_100..<10_200, 20_000..<20_001, 0..<1])
            #expect(totals.map(\.payments) == [4, 1, 0, 0])
            let allSales: Int64 = 12_50 + 1_50 + 7_25 + 42_00 + 5_00
            #expect(totals.map(\.sales.minorUnits) == [allSales, 7_25, 0, 0])
            #expect(totals.map(\.tips.minorUnits) == [1_50, 0, 0, 0])
            #expect(totals.map(\.declined) == [1, 0, 0, 0])
            #expect(totals.map(\.refunds) == [0, 0, 1, 0])
            #expect(totals[2].refunded == F.money(2_00) && totals[2].netMinorUnits == -2_00)
            #expect(totals[0].period == 10_000..<10_400)

            try await ledger.setTimeZone("Europe/Berlin", for: merchant.id)
            #expect(try await ledger.merchant(merchant.id).timeZone == "Europe/Berlin")
            for bad in ["", "Europe/Berlin; DROP", String(repeating: "a", count: 65), "Zürich"] {
                await #expect(throws: LedgerError.self, "\(bad)") {
                    try await ledger.setTimeZone(bad, for: merchant.id)
                }
            }
            #expect(try await ledger.merchant(merchant.id).timeZone == "Europe/Berlin")
        }
    }

    static func registerUsersAndTerminalsAreScopedToTheirMerchant(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let cafe = try await ledger.createMerchant(name: "Café", currency: .eur, adminEmail: "c@cafe.example")
            let diner = try await ledger.createMerchant(name: "Diner", currency: .eur, adminEmail: "d@diner.example")
            try await ledger.addRegisterUser(id: "007", name: "James", to: cafe.id)
            #expect(try await ledger.renameRegisterUser(id: "007", to: "Jim", of: cafe.id))
            #expect(try await !ledger.renameRegisterUser(id: "007", to: "Mallory", of: diner.id))
            #expect(try await ledger.registerUser(id: "007", of: cafe.id)?.name == "Jim")
            #expect(try await ledger.registerUser(id: "007", of: diner.id) == nil)

            #expect(throws: RegisterUserInputError.invalidName("must not be empty")) {
                _ = try RegisterUserRules.check(id: "a", name: " \n ")
            }
            #expect(throws: RegisterUserInputError.invalidName("must be at most 64 bytes (this one is 65)")) {
                _ = try RegisterUserRules.check(id: "a", name: String(repeating: "x", count: 65))
            }
            #expect(throws: RegisterUserInputError.invalidID("a/b")) {
                _ = try RegisterUserRules.check(id: "a/b", name: nil)
            }
            #expect(try RegisterUserRules.check(id: "a.b_c:d-1", name: "  Ada ") == "Ada")

            let terminal = try await ledger.activateTerminal(
                merchant: cafe.id, label: "Till", publicKey: F.key(9), keyID: [1, 2, 3, 4, 5, 6, 7, 8],
                credentialExpiresAt: 5_000, at: 1_000)
            #expect(try await ledger.revokeTerminal(terminal.id, of: diner.id, at: 2_000) == nil)
            #expect(try await ledger.terminal(terminal.id).revokedAt == nil)
            #expect(try await ledger.revokeTerminal(terminal.id, of: cafe.id, at: 2_000)?.revokedAt == 2_000)
            #expect(try await ledger.revokeTerminal(terminal.id, of: cafe.id, at: 3_000)?.revokedAt == 2_000)
        }
    }
}

/// How the ledger spells a cursor (base64url of `tx1:<reference>`), for a test that needs one
/// the ledger did not hand out.
enum TransactionCursorToken {
    static func make(before reference: Int64) -> String {
        Data("tx1:\(reference)".utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")
    }
}
