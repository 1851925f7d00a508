import Foundation
import HorizonCore
import HorizonProtocol

/// A restoration's PUK was right: the reactivation token's mail goes to `email`.
public struct RestorationPukAccepted: Sendable, Equatable {
    /// The account's e-mail address, where the reactivation token is mailed.
    public let email: String
    /// Until when the token can be used.
    public let reactivationExpiresAt: UnixTime
}

/// The reference's restoration: the e-mail names the account, the PUK texted to its phone is
/// given back by the new device's key (`submitRestorationPuk`), then the one-time reactivation
/// token mailed to the address (`reactivateWallet`) moves the account to that key. Both steps
/// answer only the key the restoration was started with, so a token read from someone's mail
/// is of no use on another device.
extension Ledger {
    /// Checks the PUK of a restoration started with a reactivation link. Right: the phone is
    /// proven and `tokenHash` (the caller's hash of the token it is about to mail) replaces the
    /// placeholder, valid `lifetime` seconds. A PUK given again after it was right is `used`
    /// (the token went out already; a new restoration sends a new one). Wrong tries are counted
    /// and committed before the error, as for a registration.
    public func submitRestorationPuk(
        _ id: RegistrationID, pukHash: [UInt8], key: PublicKeyBytes, tokenHash: [UInt8], lifetime: Int64,
        policy: RegistrationPolicy = RegistrationPolicy(), at time: UnixTime = now()
    ) async throws(RegistrationError) -> RestorationPukAccepted {
        guard !tokenHash.isEmpty, lifetime > 0 else {
            throw .ledger(.invalidArgument("a reactivation needs a token hash and a lifetime"))
        }
        return try await restorationStep(id, key: key) { row, db throws(LedgerError) in
            if try row.optionalInteger("puk_verified_at") != nil { return .failure(.used) }
            if let refusal = try Self.unusable(row, policy: policy, at: time, expiry: "expires_at") {
                return .failure(refusal)
            }
            guard constantTimeEqual(try row.bytes("code_hash"), pukHash) else {
                try await db.query(
                    "UPDATE wallet_registrations SET failed_attempts = failed_attempts + 1 WHERE id = ?",
                    [.text(id.rawValue)])
                return .failure(Self.wrongTry(failures: try row.integer("failed_attempts"), policy: policy))
            }
            // No account had the e-mail: its PUK was never sent, so this is not reached in practice.
            guard try row.optionalText("wallet_id") != nil else { return .failure(.notFound) }
            try await db.query(
                """
                UPDATE wallet_registrations SET puk_verified_at = ?, link_token_hash = ?, link_expires_at = ?
                WHERE id = ?
                """, [.integer(time), .blob(tokenHash), .integer(time + lifetime), .text(id.rawValue)])
            try await Self.redactOutbox(for: id, channel: .sms, in: db)
            return .success(
                RestorationPukAccepted(email: try row.text("email"), reactivationExpiresAt: time + lifetime))
        }
    }

    /// Completes a restoration with its mailed token (hashed by the caller), given by the key
    /// that started it: that key joins the account and every other key of the account is
    /// revoked at `time`, in one transaction. The account keeps its id, so its history, balance
    /// and loyalty stay; payments signed by a revoked key and accepted offline at or after
    /// `time` are declined when forwarded. The old device's PIN goes with its key: it no longer
    /// opens anything, and the new device sets its own. A token works once; wrong tokens are
    /// counted on their own counter, which locks the restoration at the limit.
    public func reactivateWallet(
        _ id: RegistrationID, tokenHash: [UInt8], key: PublicKeyBytes,
        policy: RegistrationPolicy = RegistrationPolicy(),
        at time: UnixTime = now()
    ) async throws(RegistrationError) -> RegistrationResult {
        try await restorationStep(id, key: key) { row, db throws(LedgerError) in
            if try row.optionalInteger("used_at") != nil { return .failure(.used) }
            let linkFailures = try row.integer("link_failed_attempts")
            if let refusal = try Self.unusable(row, policy: policy, at: time, expiry: "link_expires_at") {
                return .failure(refusal)
            }
            // Before the PUK the stored hash is a placeholder no token matches: counted alike.
            guard try row.optionalInteger("puk_verified_at") != nil,
                constantTimeEqual(try row.optionalBytes("link_token_hash") ?? [], tokenHash)
            else {
                try await db.query(
                    "UPDATE wallet_registrations SET link_failed_attempts = link_failed_attempts + 1 WHERE id = ?",
                    [.text(id.rawValue)])
                return .failure(Self.wrongTry(failures: linkFailures, policy: policy))
            }
            try await db.query(
                "UPDATE wallet_registrations SET used_at = ?, email_confirmed_at = ? WHERE id = ?",
                [.integer(time), .integer(time), .text(id.rawValue)])
            guard let walletText = try row.optionalText("wallet_id") else { return .failure(.notFound) }
            let newKey = try row.bytes("public_key")
            if try await !db.query("SELECT wallet_id FROM wallet_keys WHERE public_key = ?", [.blob(newKey)]).isEmpty {
                return .failure(.keyAlreadyRegistered)
            }
            let wallet = try await Self.wallet(WalletID(rawValue: walletText), in: db)
            try await db.query(
                "INSERT INTO wallet_keys(public_key, wallet_id, added_at) VALUES (?, ?, ?)",
                [.blob(newKey), .text(wallet.id.rawValue), .integer(time)])
            let revoked = try await db.query(
                """
                UPDATE wallet_keys SET revoked_at = ?
                WHERE wallet_id = ? AND public_key <> ? AND revoked_at IS NULL RETURNING public_key
                """, [.integer(time), .text(wallet.id.rawValue), .blob(newKey)])
            try await Self.forgetWalletPIN(wallet.id, in: db)
            try await Self.redactOutbox(for: id, in: db)
            return .success(RegistrationResult(kind: .restoration, wallet: wallet, revokedKeys: revoked.count))
        }
    }

    /// Runs one step of a restoration started with a reactivation link, for the key that
    /// started it (any other key is answered like an unknown id), in one transaction whose
    /// writes (a counted wrong try too) are committed whatever it answers.
    private func restorationStep<T: Sendable>(
        _ id: RegistrationID, key: PublicKeyBytes,
        _ body:
            @escaping @Sendable (SQLRow, any SQLTransaction) async throws(LedgerError) -> Result<T, RegistrationError>
    ) async throws(RegistrationError) -> T {
        guard RegistrationID.isWellFormed(id.rawValue) else { throw .notFound }
        let outcome: Result<T, RegistrationError>
        do {
            outcome = try await store.transaction { db in
                guard
                    let row = try await db.query(
                        """
                        SELECT * FROM wallet_registrations
                        WHERE id = ? AND kind = 'restoration' AND link_token_hash IS NOT NULL
                        """, [.text(id.rawValue)]
                    ).first
                else { return .failure(.notFound) }
                guard constantTimeEqual(try row.bytes("public_key"), key.bytes) else { return .failure(.notFound) }
                let outcome = try await body(row, db)
                if case .failure(.locked) = outcome { try await Self.redactOutbox(for: id, in: db) }
                return outcome
            }
        } catch { throw .ledger(error) }
        return try outcome.get()
    }
}
