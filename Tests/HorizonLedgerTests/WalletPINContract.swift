import HorizonCore
import HorizonLedger
import HorizonProtocol
import Testing

/// The wallet PIN counted by the server, and pinless wallets' payment limit, on every store
/// (`LedgerSuites.swift`). The ledger only counts: whether a proof verifies is the caller's
/// answer (`isValid`), so these tests answer it directly.
extension LedgerContract {
    static let pinKey = [UInt8]([0x04] + [UInt8](repeating: 0x51, count: 64))
    static let share = [UInt8](repeating: 0x5A, count: 32)

    static func wrongPINProofsAreCountedAndBlock(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (_, wallet, _) = try await F.shop(ledger)
            let device = F.key(40)
            let policy = PINProofPolicy()
            try await ledger.setWalletPIN(wallet.id, deviceKey: device, pinKey: pinKey, share: share, at: 100)
            #expect(try await ledger.walletPIN(deviceKey: device)?.walletID == wallet.id)
            #expect(try await ledger.isWalletPinless(wallet.id) == false)
            let wrong: @Sendable ([UInt8]) -> Bool = { _ in false }
            let right: @Sendable ([UInt8]) -> Bool = { $0 == pinKey }

            #expect(
                try await ledger.provePIN(deviceKey: device, policy: policy, at: 100, isValid: wrong)
                    == .wrong(failures: 1, remainingBeforeBlock: 9, retryAfter: 0))
            #expect(
                try await ledger.provePIN(deviceKey: device, policy: policy, at: 100, isValid: wrong)
                    == .wrong(failures: 2, remainingBeforeBlock: 8, retryAfter: 0))
            #expect(
                try await ledger.provePIN(deviceKey: device, policy: policy, at: 100, isValid: wrong)
                    == .wrong(failures: 3, remainingBeforeBlock: 7, retryAfter: 30))
            // While backing off even the right PIN is not tried, and nothing is counted.
            #expect(
                try await ledger.provePIN(deviceKey: device, policy: policy, at: 110, isValid: right)
                    == .backingOff(retryAfter: 20, remainingBeforeBlock: 7))
            #expect(try await ledger.walletPIN(of: wallet.id)?.failures == 3)
            // The right PIN after the wait releases the share and clears the count.
            #expect(
                try await ledger.provePIN(deviceKey: device, policy: policy, at: 130, isValid: right)
                    == .proven(share: share))
            #expect(try await ledger.walletPIN(of: wallet.id)?.failures == 0)

            // Concurrent wrong proofs are each counted; none passes the block.
            var time: UnixTime = 200
            var outcomes: [PINProofOutcome] = []
            for _ in 0..<12 {
                time += 10_000
                let at = time
                async let a = ledger.provePIN(deviceKey: device, policy: policy, at: at, isValid: wrong)
                async let b = ledger.provePIN(deviceKey: device, policy: policy, at: at, isValid: wrong)
                outcomes += [try await a, try await b]
            }
            #expect(try await ledger.walletPIN(of: wallet.id)?.failures == policy.blockAfter)
            #expect(outcomes.filter { if case .wrong = $0 { true } else { false } }.count == policy.blockAfter)
            // Blocked: the right PIN no longer opens it, however long one waits.
            #expect(
                try await ledger.provePIN(deviceKey: device, policy: policy, at: time + 1_000_000, isValid: right)
                    == .blocked)
            // A PIN set again (with the payment key, after a restoration) starts from zero.
            try await ledger.setWalletPIN(wallet.id, deviceKey: device, pinKey: pinKey, share: share, at: time)
            #expect(
                try await ledger.provePIN(deviceKey: device, policy: policy, at: time, isValid: right)
                    == .proven(share: share))

            // One device key names one wallet's PIN; an unknown device key has none.
            let other = try await ledger.createWallet(name: "Bob", publicKey: F.key(41), at: 1_000)
            await #expect(throws: LedgerError.alreadyExists("a PIN with this device key")) {
                try await ledger.setWalletPIN(other.id, deviceKey: device, pinKey: pinKey, share: share, at: 100)
            }
            await #expect(throws: LedgerError.notFound("a PIN for this device key")) {
                try await ledger.provePIN(deviceKey: F.key(42), policy: policy, at: time, isValid: right)
            }
            await #expect(throws: LedgerError.self) {
                try await ledger.setWalletPIN(other.id, deviceKey: F.key(43), pinKey: [1, 2], share: share, at: 100)
            }
            // A wallet whose keys are all revoked proves nothing.
            #expect(try await ledger.revokeWalletKey(F.key(1), at: time))
            await #expect(throws: LedgerError.notFound("a PIN for this device key")) {
                try await ledger.provePIN(deviceKey: device, policy: policy, at: time, isValid: right)
            }
        }
    }

    /// A restoration (by the mailed code, or by PUK and reactivation token) drops the old
    /// device's PIN with its key: its proofs, right or wrong, are no longer taken, and the wrong
    /// tries it had (a block included) do not follow the account.
    static func aRestorationDropsTheOldDevicesPIN(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let policy = PINProofPolicy()
            let right: @Sendable ([UInt8]) -> Bool = { $0 == pinKey }
            let wrong: @Sendable ([UInt8]) -> Bool = { _ in false }
            let registered = try await register(ledger, key: F.key(50))
            let wallet = try await ledger.verifyRegistration(
                registered.id, kind: .registration, codeHash: rightCode, at: start
            ).wallet
            // By the mailed code: the old PIN, blocked after wrong tries, is gone.
            try await ledger.setWalletPIN(wallet.id, deviceKey: F.key(51), pinKey: pinKey, share: share, at: start)
            for attempt in 0..<policy.blockAfter {
                _ = try await ledger.provePIN(
                    deviceKey: F.key(51), policy: policy, at: start + 10_000 * Int64(attempt), isValid: wrong)
            }
            #expect(try await ledger.walletPIN(of: wallet.id)?.failures == policy.blockAfter)
            let byCode = try await ledger.startRestoration(
                id: .generate(), email: "alice@example.com", publicKey: F.key(52), codeHash: rightCode, at: start)
            _ = try await ledger.verifyRegistration(byCode.id, kind: .restoration, codeHash: rightCode, at: start + 1)
            #expect(try await ledger.walletPIN(of: wallet.id) == nil)
            await #expect(throws: LedgerError.notFound("a PIN for this device key")) {
                try await ledger.provePIN(deviceKey: F.key(51), policy: policy, at: start + 2, isValid: right)
            }

            // By PUK and token: the PIN the restored device set is dropped at the next restoration.
            try await ledger.setWalletPIN(wallet.id, deviceKey: F.key(53), pinKey: pinKey, share: share, at: start + 3)
            #expect(
                try await ledger.provePIN(deviceKey: F.key(53), policy: policy, at: start + 4, isValid: right)
                    == .proven(share: share))
            let id = RegistrationID.generate()
            _ = try await ledger.startRestoration(
                id: id, email: "alice@example.com", publicKey: F.key(54), codeHash: rightCode,
                reactivationLink: ([9, 9, 9], 86_400), at: start + 5)
            _ = try await ledger.submitRestorationPuk(
                id, pukHash: rightCode, key: F.key(54), tokenHash: [4, 5, 6], lifetime: 86_400, at: start + 6)
            // Until the token is used, the old device's PIN still works.
            #expect(
                try await ledger.provePIN(deviceKey: F.key(53), policy: policy, at: start + 7, isValid: right)
                    == .proven(share: share))
            _ = try await ledger.reactivateWallet(id, tokenHash: [4, 5, 6], key: F.key(54), at: start + 8)
            #expect(try await ledger.walletPIN(of: wallet.id) == nil)
            await #expect(throws: LedgerError.notFound("a PIN for this device key")) {
                try await ledger.provePIN(deviceKey: F.key(53), policy: policy, at: start + 9, isValid: right)
            }
            // The new device's PIN starts from zero, and the same old device key cannot name it.
            try await ledger.setWalletPIN(wallet.id, deviceKey: F.key(55), pinKey: pinKey, share: share, at: start + 10)
            #expect(try await ledger.walletPIN(of: wallet.id)?.failures == 0)
            await #expect(throws: LedgerError.notFound("a PIN for this device key")) {
                try await ledger.provePIN(deviceKey: F.key(53), policy: policy, at: start + 11, isValid: right)
            }
        }
    }

    static func pinlessWalletsPayUpToTheLimit(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, wallet, key) = try await F.shop(ledger, balance: 200_00)
            try await ledger.makeWalletPinless(wallet.id)
            #expect(try await ledger.isWalletPinless(wallet.id))
            let above = try await ledger.settle(F.payment(wallet: key, amount: 45_00, tip: 5_01), merchant: merchant.id)
            #expect(above.outcome.declineCode == .declined)
            guard case .declined(_, let reason) = above.outcome else { return }
            #expect(reason.hasPrefix("this wallet has no PIN: a payment above 50.00 EUR needs one"))
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(200_00))
            let atLimit = try await ledger.settle(
                F.payment(wallet: key, amount: 45_00, tip: 5_00), merchant: merchant.id)
            #expect(atLimit.outcome.isApproved)
            // With a PIN the limit no longer applies.
            try await ledger.setWalletPIN(wallet.id, deviceKey: F.key(50), pinKey: pinKey, share: share, at: 100)
            let withPIN = try await ledger.settle(F.payment(wallet: key, amount: 80_00), merchant: merchant.id)
            #expect(withPIN.outcome.isApproved)
            // Deactivating the PIN makes it pinless again, and drops the PIN.
            try await ledger.makeWalletPinless(wallet.id)
            #expect(try await ledger.walletPIN(of: wallet.id) == nil)
            let again = try await ledger.settle(F.payment(wallet: key, amount: 60_00), merchant: merchant.id)
            #expect(again.outcome.declineCode == .declined)
        }
        // A server configured without the limit lets a pinless wallet pay what it holds.
        try await TestStores.withLedger(kind, options: LedgerOptions(pinlessPaymentLimit: nil)) { ledger in
            let (merchant, wallet, key) = try await F.shop(ledger, balance: 200_00)
            try await ledger.makeWalletPinless(wallet.id)
            let big = try await ledger.settle(F.payment(wallet: key, amount: 150_00), merchant: merchant.id)
            #expect(big.outcome.isApproved)
        }
    }
}
