import Foundation
import HorizonCore
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonSettlement
import HorizonTestSupport
import Testing

@testable import HorizonStores

/// The merchant's order reference a register gives a sale, and the register user of a
/// redemption: kept with the confirmed terms, found again by reference, and through a reopen and
/// a compaction.
@Suite("Terminal journal: order references and register users", .offTheCooperativePool)
struct JournalOrderReferenceTests {
    func payment(_ id: Int, reference: String) -> SettlementRequest {
        SettlementRequest(
            paymentID: paymentID(id), sessionID: session, walletKey: walletKey(1), terminalKeyID: terminalKey,
            amount: euros(500), tip: euros(0), registerUser: "anna", contentDigest: digest(id),
            orderReference: reference)
    }

    func declined(_ id: Int) -> SessionMessage {
        .error(ErrorMessage(code: .insufficientFunds, message: "declined", paymentID: paymentID(id)))
    }

    @Test func aPaymentsOrderReferenceIsJournaledAndFoundNewestFirst() throws {
        try withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("journal.sqlite").path
            do {
                let journal = try SQLiteTerminalJournal(path: path)
                try journal.write(.confirmed(.payment(payment(1, reference: "ORDER-1"))), at: 1)
                try journal.write(.result(paymentID(1), answer: declined(1)), at: 2)
                try journal.write(.confirmed(.payment(payment(2, reference: "ORDER-2"))), at: 3)
                // The reference of a declined sale may be used again.
                try journal.write(.confirmed(.payment(payment(3, reference: "ORDER-1"))), at: 4)
                try journal.write(.confirmed(.payment(request(4, amount: euros(100)))), at: 5)
            }
            // After a crash, from the synced confirmation.
            let journal = try SQLiteTerminalJournal(path: path)
            #expect(try journal.record(for: paymentID(3))?.request == .payment(payment(3, reference: "ORDER-1")))
            #expect(try journal.records(orderReference: "ORDER-1").map(\.request.id) == [paymentID(3), paymentID(1)])
            // Another sale's reference finds that sale only.
            #expect(try journal.records(orderReference: "ORDER-2").map(\.request.id) == [paymentID(2)])
            #expect(try journal.records(orderReference: "order-2").isEmpty, "references are compared exactly")
            #expect(try journal.records(orderReference: "ORDER-9").isEmpty)
            // A sale without a reference has none, and is found by none.
            guard case .payment(let plain)? = try journal.record(for: paymentID(4))?.request else {
                Issue.record("payment 4 is not journaled")
                return
            }
            #expect(plain.orderReference.isEmpty)
            #expect(try journal.records(orderReference: "").isEmpty)
            // A retry of a confirmation with another reference is other terms.
            #expect(throws: JournalError.self) {
                try journal.write(.confirmed(.payment(payment(2, reference: "ORDER-X"))), at: 6)
            }
        }
    }

    @Test func aCompactedPaymentKeepsItsOrderReference() throws {
        let journal = try SQLiteTerminalJournal(path: ":memory:")
        try journal.write(.confirmed(.payment(payment(1, reference: "ORDER-1"))), at: 1)
        try journal.write(.submitted(paymentID(1)), at: 2)
        try journal.write(.result(paymentID(1), answer: declined(1)), at: 3)
        let compaction = try journal.compact(answeredBefore: 10)
        #expect(compaction.requests == 1)
        #expect(try journal.history().count == 1)
        #expect(try journal.record(for: paymentID(1))?.request == .payment(payment(1, reference: "ORDER-1")))
        #expect(try journal.records(orderReference: "ORDER-1").map(\.request.id) == [paymentID(1)])
    }

    @Test func aRedemptionKeepsItsRegisterUser() throws {
        let journal = try SQLiteTerminalJournal(path: ":memory:")
        let redemption = RedemptionRequest(
            redemptionID: paymentID(9), sessionID: session, walletKey: walletKey(2), terminalKeyID: terminalKey,
            transactionType: .couponRedemption, item: "COFFEE", quantity: 0, value: euros(0),
            contentDigest: digest(9), registerUser: "Ana")
        try journal.write(.confirmed(.redemption(redemption)), at: 1)
        guard case .redemption(let stored)? = try journal.record(for: paymentID(9))?.request else {
            Issue.record("the redemption is not journaled")
            return
        }
        #expect(stored.registerUser == "Ana")
        #expect(stored == redemption)
    }

    /// The register's socket refuses what could not be an order reference before it reaches the
    /// journal: bytes that were not UTF-8, control and format characters, spaces, over 100.
    @Test(arguments: [
        "", " ORDER", "ORDER 1", "ORD\u{7}ER", "ORD\u{202E}ER", "ORD\u{FFFD}ER",
        String(repeating: "x", count: 101), String(decoding: [0x4F, 0xFF, 0xFE], as: UTF8.self),
    ])
    func whatCannotBeAnOrderReference(text: String) {
        #expect(!OrderReference.isValid(text))
    }

    @Test(arguments: ["ORDER-1", "A", "Bestellung/2026-11-28#17", "注文123", String(repeating: "x", count: 100)])
    func whatCanBeAnOrderReference(text: String) {
        #expect(OrderReference.isValid(text))
    }
}
