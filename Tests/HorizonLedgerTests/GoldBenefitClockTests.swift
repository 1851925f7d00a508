import Foundation
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonSettlement
import HorizonStores
import Testing

/// Regression (found by the fault simulation, seed 9 of the CI set): two terminals sharing a
/// ledger whose wall clocks disagree let one wallet use its gold benefit twice in one period. The
/// ledger only refused the period it last recorded, so after a benefit in period 6 (terminal
/// ahead) a terminal behind computed period 5 again and approved it a second time.
@Suite("Gold benefits under clock skew")
struct GoldBenefitClockTests {
    func redeem(_ ledger: InProcessLedger, number: Int, at time: UnixTime) async throws -> SettlementResult {
        try await ledger.redeem(
            RedemptionRequest(
                redemptionID: paymentID(number), sessionID: session, walletKey: walletKey(1),
                terminalKeyID: terminalKey,
                transactionType: .goldRedemption, item: "Free dessert", quantity: 0, value: euros(600),
                contentDigest: digest(number)),
            at: time)
    }

    @Test func aBenefitUsedInALaterPeriodIsNotUsedAgainByATerminalWhoseClockIsBehind() async throws {
        try await withLedgerDirectory { directory in
            let ledger = try await InProcessLedger.open(path: ledgerPath(in: directory))
            try await ledger.grantGoldMembership(
                to: walletKey(1), tier: "Gold", validFrom: 1_000, validUntil: 100_000, benefitPeriod: 100)
            // Period 2 on a terminal whose clock is right.
            #expect(try await redeem(ledger, number: 1, at: 1_250).outcome.isApproved)
            // Period 1 on a terminal 60 s behind: already covered by the later use.
            let behind = try await redeem(ledger, number: 2, at: 1_190)
            #expect(
                behind.outcome
                    == .declined(code: .alreadyRedeemed, reason: "the gold benefit was already used this period"))
            // The same period again, and then the next one.
            #expect(!(try await redeem(ledger, number: 3, at: 1_299).outcome.isApproved))
            #expect(try await redeem(ledger, number: 4, at: 1_300).outcome.isApproved)
            #expect(try await ledger.goldMembership(for: walletKey(1))?.lastBenefitPeriod == 3)
        }
    }
}
