import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonStores
import Testing

/// Daily tokens: what the ledger keeps of every token the server signed, on
/// both stores (`LedgerSuites.swift`).
extension LedgerContract {
    static func dailyTokensAreKeptPerWalletAndKey(_ kind: StoreKind) async throws {
        try await TestStores.withStore(kind) { store in
            let ledger = try await Ledger.open(store)
            let alice = try await ledger.createWallet(name: "Alice", publicKey: F.key(1))
            let bob = try await ledger.createWallet(name: "Bob", publicKey: F.key(2))
            func record(_ id: UInt8, wallet: WalletID, key: PublicKeyBytes, issuedAt: Int64, validity: Int64 = 86_400)
                -> DailyTokenRecord
            {
                DailyTokenRecord(
                    tokenID: Array(repeating: id, count: 16), walletID: wallet, walletKey: key,
                    allowance: F.money(50_00), balanceAtIssue: 80_00, revocationDigest: Array(repeating: 7, count: 32),
                    issuedAt: issuedAt, expiresAt: issuedAt + validity, token: [id, 1, 2, 3])
            }
            let first = record(1, wallet: alice.id, key: F.key(1), issuedAt: 1_000)
            let second = record(2, wallet: alice.id, key: F.key(1), issuedAt: 2_000)
            try await ledger.recordDailyToken(first)
            try await ledger.recordDailyToken(second)
            try await ledger.recordDailyToken(record(3, wallet: bob.id, key: F.key(2), issuedAt: 1_500))

            // The newest valid token of the wallet, its key and currency; read back exactly.
            #expect(
                try await ledger.currentDailyToken(of: alice.id, key: F.key(1), currency: .eur, at: 3_000) == second)
            #expect(try await ledger.currentDailyToken(of: alice.id, key: F.key(1), currency: .usd, at: 3_000) == nil)
            #expect(try await ledger.currentDailyToken(of: alice.id, key: F.key(1), currency: .eur, at: 88_400) == nil)
            #expect(
                try await ledger.currentDailyToken(of: bob.id, key: F.key(2), currency: .eur, at: 3_000)?.tokenID
                    == Array(repeating: 3, count: 16))
            // Every token valid in a period, superseded or not: what bounds the wallet's offline
            // spending later (a superseded token stays valid until it expires).
            let all = try await ledger.dailyTokens(of: alice.id, validBetween: 0, and: 90_000)
            #expect(all.map(\.tokenID) == [second.tokenID, first.tokenID])
            #expect(all.map(\.supersededAt) == [nil, 2_000])
            #expect(try await ledger.dailyTokens(of: alice.id, validBetween: 88_000, and: 90_000) == [second])

            // Two tokens signed within one second: the one recorded last is the current one.
            let sameSecond = record(7, wallet: alice.id, key: F.key(1), issuedAt: 2_000)
            try await ledger.recordDailyToken(sameSecond)
            #expect(
                try await ledger.currentDailyToken(of: alice.id, key: F.key(1), currency: .eur, at: 3_000) == sameSecond
            )

            // A token for a key that is not the wallet's, for longer than 24 h, or a second time: refused.
            await #expect(
                throws: LedgerError.invalidArgument("the token's key is not an active key of wallet \(alice.id)")
            ) {
                try await ledger.recordDailyToken(record(4, wallet: alice.id, key: F.key(2), issuedAt: 1_000))
            }
            await #expect(throws: LedgerError.invalidArgument("a daily token is valid for at most 24 h")) {
                try await ledger.recordDailyToken(
                    record(5, wallet: alice.id, key: F.key(1), issuedAt: 0, validity: 86_401))
            }
            await #expect(throws: LedgerError.self) { try await ledger.recordDailyToken(first) }
            // A revoked key gets no new token recorded.
            #expect(try await ledger.revokeWalletKey(F.key(1)))
            await #expect(throws: LedgerError.self) {
                try await ledger.recordDailyToken(record(6, wallet: alice.id, key: F.key(1), issuedAt: 3_000))
            }
        }
    }
}
