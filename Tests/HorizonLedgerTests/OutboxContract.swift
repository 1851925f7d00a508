import HorizonCore
import HorizonLedger
import HorizonProtocol
import Testing

/// A code per channel, and the outbox that forgets codes once used, locked or expired, on every
/// store (`LedgerSuites.swift`).
extension LedgerContract {
    static let emailCode = [UInt8](repeating: 0xE1, count: 32)

    static func eachChannelsCodeIsNeededAndTheOutboxForgetsIt(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            func begin(_ key: PublicKeyBytes, _ email: String) async throws -> PendingRegistration {
                let pending = try await ledger.startRegistration(
                    id: .generate(), name: "Alice", email: email, phone: "+4915112345678", publicKey: key,
                    codeHash: rightCode, emailCodeHash: emailCode, at: start)
                for (channel, recipient, code) in [
                    (OutboxMessage.Channel.sms, "+4915112345678", "11112222"), (.email, email, "33334444"),
                ] {
                    try await ledger.enqueue(
                        channel, to: recipient, subject: "code", body: "your code is \(code)",
                        registration: pending.id, expiresAt: pending.expiresAt, at: start)
                }
                return pending
            }
            func bodies(_ id: RegistrationID) async throws -> [String] {
                try await ledger.store.transaction { db in
                    try await db.query("SELECT body FROM outbox WHERE registration_id = ?", [.text(id.rawValue)])
                        .map { try $0.text("body") }
                }
            }

            let used = try await begin(F.key(1), "alice@example.com")
            // One channel's code alone, or each given for the other, is a wrong code.
            for (sms, email, left) in [
                (rightCode, nil as [UInt8]?, 4), (emailCode, rightCode, 3), (rightCode, rightCode, 2),
            ] {
                await #expect(throws: RegistrationError.codeInvalid(attemptsLeft: left)) {
                    try await ledger.verifyRegistration(
                        used.id, kind: .registration, codeHash: sms, emailCodeHash: email, at: start + 1)
                }
            }
            #expect(try await bodies(used.id).allSatisfy { $0.contains("is 1111") || $0.contains("is 3333") })
            _ = try await ledger.verifyRegistration(
                used.id, kind: .registration, codeHash: rightCode, emailCodeHash: emailCode, at: start + 2)
            #expect(try await bodies(used.id) == [OutboxMessage.redactedBody, OutboxMessage.redactedBody])

            // Locked: blanked too.
            let locked = try await begin(F.key(2), "bob@example.com")
            for _ in 0..<5 {
                _ = try? await ledger.verifyRegistration(
                    locked.id, kind: .registration, codeHash: wrongCode, emailCodeHash: emailCode, at: start + 3)
            }
            #expect(try await bodies(locked.id) == [OutboxMessage.redactedBody, OutboxMessage.redactedBody])

            // Expired: deleted.
            let expired = try await begin(F.key(3), "carol@example.com")
            try await ledger.purgeExpiredOutbox(at: expired.expiresAt - 1)
            #expect(try await bodies(expired.id).count == 2)
            try await ledger.purgeExpiredOutbox(at: expired.expiresAt)
            #expect(try await bodies(expired.id).isEmpty)
            #expect(try await ledger.outbox().isEmpty)
        }
    }
}
