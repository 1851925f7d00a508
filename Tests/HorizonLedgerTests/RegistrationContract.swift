import HorizonCore
import HorizonLedger
import HorizonProtocol
import Testing

/// Wallet registration and restoration with one-time codes, on every store (`LedgerSuites.swift`).
/// The ledger sees only the codes' hashes; these tests use fixed bytes for them.
extension LedgerContract {
    static let rightCode = [UInt8](repeating: 0xC0, count: 32)
    static let wrongCode = [UInt8](repeating: 0xBA, count: 32)
    static let start: UnixTime = 2_000_000

    static func register(
        _ ledger: Ledger, key: PublicKeyBytes, email: String = "alice@example.com", phone: String = "+49 151 1234-5678"
    ) async throws -> PendingRegistration {
        try await ledger.startRegistration(
            id: .generate(), name: "Alice", email: email, phone: phone, publicKey: key, codeHash: rightCode, at: start)
    }

    static func registrationCreatesAWalletOnce(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let pending = try await register(ledger, key: F.key(1), email: " Alice@Example.COM ")
            #expect(pending.kind == .registration)
            #expect(pending.expiresAt == start + 600)
            #expect(pending.email == "alice@example.com")
            #expect(pending.phone == "+4915112345678")
            #expect(try await ledger.wallet(forKey: F.key(1)) == nil)

            let result = try await ledger.verifyRegistration(
                pending.id, kind: .registration, codeHash: rightCode, at: start + 599)
            #expect(result.kind == .registration && result.revokedKeys == 0)
            #expect(result.wallet.name == "Alice")
            #expect(try await ledger.wallet(forKey: F.key(1)) == result.wallet)
            #expect(
                try await ledger.walletContact(result.wallet.id)
                    == WalletContact(email: "alice@example.com", phone: "+4915112345678"))

            // Single use, even with the right code; and not as the other kind.
            await #expect(throws: RegistrationError.used) {
                try await ledger.verifyRegistration(pending.id, kind: .registration, codeHash: rightCode, at: start + 1)
            }
            await #expect(throws: RegistrationError.notFound) {
                try await ledger.verifyRegistration(pending.id, kind: .restoration, codeHash: rightCode, at: start + 1)
            }
            await #expect(throws: RegistrationError.notFound) {
                try await ledger.verifyRegistration(.generate(), kind: .registration, codeHash: rightCode, at: start)
            }
            await #expect(throws: RegistrationError.notFound) {
                try await ledger.verifyRegistration(
                    RegistrationID(rawValue: "r_' OR 1=1 --"), kind: .registration, codeHash: rightCode, at: start)
            }
        }
    }

    static func wrongCodesLockARegistration(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let pending = try await register(ledger, key: F.key(2))
            for left in [4, 3, 2, 1] {
                await #expect(throws: RegistrationError.codeInvalid(attemptsLeft: left)) {
                    try await ledger.verifyRegistration(pending.id, kind: .registration, codeHash: wrongCode, at: start)
                }
            }
            // The fifth wrong code locks it; from then on even the right one is refused.
            await #expect(throws: RegistrationError.locked) {
                try await ledger.verifyRegistration(pending.id, kind: .registration, codeHash: wrongCode, at: start)
            }
            await #expect(throws: RegistrationError.locked) {
                try await ledger.verifyRegistration(pending.id, kind: .registration, codeHash: rightCode, at: start)
            }
            #expect(try await ledger.wallet(forKey: F.key(2)) == nil)
        }
    }

    static func expiredCodesAreRefused(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let pending = try await register(ledger, key: F.key(3))
            await #expect(throws: RegistrationError.expired) {
                try await ledger.verifyRegistration(
                    pending.id, kind: .registration, codeHash: rightCode, at: pending.expiresAt)
            }
            // An expired registration does not check (or count) codes.
            await #expect(throws: RegistrationError.expired) {
                try await ledger.verifyRegistration(
                    pending.id, kind: .registration, codeHash: wrongCode, at: pending.expiresAt + 60)
            }
            #expect(try await ledger.wallet(forKey: F.key(3)) == nil)
        }
    }

    static func restorationMovesTheAccountToTheNewKey(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let first = try await register(ledger, key: F.key(4))
            let wallet = try await ledger.verifyRegistration(
                first.id, kind: .registration, codeHash: rightCode, at: start
            ).wallet
            try await ledger.deposit(F.money(25_00), to: wallet.id)
            try await ledger.addWalletKey(F.key(5), to: wallet.id)

            let restoration = try await ledger.startRestoration(
                id: .generate(), email: "ALICE@example.com", publicKey: F.key(6), codeHash: rightCode, at: start)
            #expect(restoration.kind == .restoration && restoration.email == "alice@example.com")
            #expect(restoration.phone == nil)
            let result = try await ledger.verifyRegistration(
                restoration.id, kind: .restoration, codeHash: rightCode, at: start + 10)
            #expect(result == RegistrationResult(kind: .restoration, wallet: wallet, revokedKeys: 2))
            #expect(try await ledger.wallet(forKey: F.key(4)) == nil)
            #expect(try await ledger.wallet(forKey: F.key(5)) == nil)
            #expect(try await ledger.wallet(forKey: F.key(6)) == wallet)
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(25_00))
            // A revoked key cannot come back through another restoration.
            await #expect(throws: RegistrationError.keyAlreadyRegistered) {
                try await ledger.startRestoration(
                    id: .generate(), email: "alice@example.com", publicKey: F.key(4), codeHash: rightCode, at: start)
            }
        }
    }

    static func restorationOfAnUnknownEmailLooksTheSame(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let pending = try await ledger.startRestoration(
                id: .generate(), email: "nobody@example.com", publicKey: F.key(7), codeHash: rightCode, at: start)
            #expect(pending.email == nil)
            #expect(pending.expiresAt == start + 600)
            // Its code is checked and counted like any other; no code reaches anyone.
            await #expect(throws: RegistrationError.codeInvalid(attemptsLeft: 4)) {
                try await ledger.verifyRegistration(pending.id, kind: .restoration, codeHash: wrongCode, at: start)
            }
            await #expect(throws: RegistrationError.notFound) {
                try await ledger.verifyRegistration(pending.id, kind: .restoration, codeHash: rightCode, at: start)
            }
            #expect(try await ledger.wallet(forKey: F.key(7)) == nil)
        }
    }

    static func keysAndEmailsBelongToOneWallet(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let first = try await register(ledger, key: F.key(8))
            // Two registrations may wait with one e-mail; the first verified wins it.
            let second = try await register(ledger, key: F.key(9))
            _ = try await ledger.verifyRegistration(first.id, kind: .registration, codeHash: rightCode, at: start)
            await #expect(throws: RegistrationError.keyAlreadyRegistered) {
                try await register(ledger, key: F.key(8), email: "other@example.com")
            }
            await #expect(throws: RegistrationError.emailAlreadyRegistered) {
                try await ledger.verifyRegistration(second.id, kind: .registration, codeHash: rightCode, at: start)
            }
            #expect(try await ledger.wallet(forKey: F.key(9)) == nil)
        }
    }

    static func registrationInputIsChecked(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            await #expect(
                throws: RegistrationError.ledger(
                    .invalidArgument("\"alice\" is not an e-mail address (expected name@domain)"))
            ) { try await register(ledger, key: F.key(10), email: "alice") }
            await #expect(
                throws: RegistrationError.ledger(
                    .invalidArgument(
                        "\"0151 1234\" is not a phone number in international form (+ country code and number, e.g. +4915112345678)"
                    ))
            ) { try await register(ledger, key: F.key(10), phone: "0151 1234") }
            await #expect(
                throws: RegistrationError.ledger(.invalidArgument("name must be 1 to 200 bytes of printable text"))
            ) {
                try await ledger.startRegistration(
                    id: .generate(), name: "  ", email: "a@example.com", phone: "+4915112345678", publicKey: F.key(10),
                    codeHash: rightCode, at: start)
            }
            // At most five codes per e-mail, and per phone, within a code's lifetime.
            for _ in 0..<5 { _ = try await register(ledger, key: F.key(11)) }
            await #expect(throws: RegistrationError.tooManyPending(retryAfter: 600)) {
                try await register(ledger, key: F.key(11))
            }
            await #expect(throws: RegistrationError.tooManyPending(retryAfter: 600)) {
                try await register(ledger, key: F.key(11), email: "someone.else@example.com")
            }
            _ = try await register(ledger, key: F.key(11), email: "someone.else@example.com", phone: "+33612345678")
        }
    }

    static func registrationMigratesAVersion3Database(_ kind: StoreKind) async throws {
        try await TestStores.withStore(kind) { store in
            #expect(try await LedgerSchema.migrate(store, to: 3, at: 500) == 3)
            try await store.transaction { db in
                try await db.query("INSERT INTO wallets(id, name, created_at) VALUES ('w_v3', 'Bob', 500)")
            }
            let ledger = try await Ledger.open(store)
            #expect(try await ledger.schemaVersion() == LedgerSchema.currentVersion)
            #expect(try await ledger.walletContact(WalletID(rawValue: "w_v3")) == WalletContact(email: nil, phone: nil))
        }
    }
}
