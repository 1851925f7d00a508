import Foundation
import HorizonCore
import HorizonProtocol

/// Where a registration proven by a PUK and an activation link stands: each channel proven on
/// its own, in either order; the wallet exists once both are.
public struct RegistrationActivation: Sendable, Equatable {
    /// The PUK texted to the phone was given back.
    public let phoneProven: Bool
    /// The activation link mailed to the address was opened and confirmed.
    public let emailProven: Bool
    /// The wallet the registration created, once both are proven.
    public let wallet: WalletID?
    /// Until when the link can be confirmed.
    public let linkExpiresAt: UnixTime

    public var isActive: Bool { wallet != nil }
}

extension Ledger {
    /// Checks the PUK of a registration proven by link, given by the key being registered (a
    /// request signed by another key is answered like one for an unknown registration). Right:
    /// the phone is proven, and the wallet is created if the link was confirmed already. Wrong:
    /// counted before the error is thrown, as `verifyRegistration` does; the limit locks it.
    public func submitRegistrationPuk(
        _ id: RegistrationID, pukHash: [UInt8], key: PublicKeyBytes, policy: RegistrationPolicy = RegistrationPolicy(),
        at time: UnixTime = now()
    ) async throws(RegistrationError) -> RegistrationActivation {
        try await linkStep(id, key: key, policy: policy) { row, db throws(LedgerError) in
            if try row.optionalInteger("puk_verified_at") != nil { return try await Self.activation(id, in: db) }
            if let refusal = try Self.unusable(row, policy: policy, at: time, expiry: "expires_at") {
                return .failure(refusal)
            }
            guard constantTimeEqual(try row.bytes("code_hash"), pukHash) else {
                try await db.query(
                    "UPDATE wallet_registrations SET failed_attempts = failed_attempts + 1 WHERE id = ?",
                    [.text(id.rawValue)])
                return .failure(Self.wrongTry(failures: try row.integer("failed_attempts"), policy: policy))
            }
            try await db.query(
                "UPDATE wallet_registrations SET puk_verified_at = ? WHERE id = ?",
                [.integer(time), .text(id.rawValue)])
            try await Self.redactOutbox(for: id, channel: .sms, in: db)
            if try row.optionalInteger("email_confirmed_at") != nil {
                if let refusal = try await Self.completeLinkRegistration(row, at: time, in: db) {
                    return .failure(refusal)
                }
            }
            return try await Self.activation(id, in: db)
        }
    }

    /// Confirms the activation link's token (hashed by the caller), from the page the link
    /// opens: the e-mail address is proven, and the wallet is created if the PUK was given
    /// already. A link works once: confirmed again it is `used`. Wrong tokens are counted like
    /// wrong PUKs, on a counter of their own.
    public func confirmActivationLink(
        _ id: RegistrationID, tokenHash: [UInt8], policy: RegistrationPolicy = RegistrationPolicy(),
        at time: UnixTime = now()
    ) async throws(RegistrationError) -> RegistrationActivation {
        try await linkStep(id, key: nil, policy: policy) { row, db throws(LedgerError) in
            if try row.optionalInteger("email_confirmed_at") != nil { return .failure(.used) }
            let linkFailures = try row.integer("link_failed_attempts")
            if linkFailures >= Int64(policy.maximumAttempts) { return .failure(.locked) }
            if let refusal = try Self.unusable(row, policy: policy, at: time, expiry: "link_expires_at") {
                return .failure(refusal)
            }
            guard constantTimeEqual(try row.optionalBytes("link_token_hash") ?? [], tokenHash) else {
                try await db.query(
                    "UPDATE wallet_registrations SET link_failed_attempts = link_failed_attempts + 1 WHERE id = ?",
                    [.text(id.rawValue)])
                return .failure(Self.wrongTry(failures: linkFailures, policy: policy))
            }
            try await db.query(
                "UPDATE wallet_registrations SET email_confirmed_at = ? WHERE id = ?",
                [.integer(time), .text(id.rawValue)])
            try await Self.redactOutbox(for: id, channel: .email, in: db)
            if try row.optionalInteger("puk_verified_at") != nil {
                if let refusal = try await Self.completeLinkRegistration(row, at: time, in: db) {
                    return .failure(refusal)
                }
            }
            return try await Self.activation(id, in: db)
        }
    }

    /// Where a registration proven by link stands, for the key being registered only. One that
    /// can no longer complete (expired, locked, refused) says so.
    public func registrationActivation(
        _ id: RegistrationID, key: PublicKeyBytes, policy: RegistrationPolicy = RegistrationPolicy(),
        at time: UnixTime = now()
    ) async throws(RegistrationError) -> RegistrationActivation {
        try await linkStep(id, key: key, policy: policy) { row, db throws(LedgerError) in
            let status = try await Self.activation(id, in: db)
            guard case .success(let activation) = status, !activation.isActive else { return status }
            if try row.optionalInteger("used_at") != nil { return .failure(.used) }
            let failures = max(try row.integer("failed_attempts"), try row.integer("link_failed_attempts"))
            if failures >= Int64(policy.maximumAttempts) { return .failure(.locked) }
            let deadline = activation.phoneProven ? activation.linkExpiresAt : try row.integer("expires_at")
            if !activation.emailProven, activation.linkExpiresAt <= time { return .failure(.expired) }
            if deadline <= time { return .failure(.expired) }
            return status
        }
    }

    // MARK: Helpers

    /// Runs one step on a registration proven by link, in one transaction whose writes (a
    /// counted wrong try too) are committed whatever it answers. `key`: the caller's, which must
    /// be the one being registered.
    private func linkStep(
        _ id: RegistrationID, key: PublicKeyBytes?, policy: RegistrationPolicy,
        _ body:
            @escaping @Sendable (SQLRow, any SQLTransaction) async throws(LedgerError) -> Result<
                RegistrationActivation, RegistrationError
            >
    ) async throws(RegistrationError) -> RegistrationActivation {
        guard RegistrationID.isWellFormed(id.rawValue) else { throw .notFound }
        let outcome: Result<RegistrationActivation, RegistrationError>
        do {
            outcome = try await store.transaction { db in
                guard
                    let row = try await db.query(
                        """
                        SELECT * FROM wallet_registrations
                        WHERE id = ? AND kind = 'registration' AND link_token_hash IS NOT NULL
                        """, [.text(id.rawValue)]
                    ).first
                else { return .failure(.notFound) }
                if let key, !constantTimeEqual(try row.bytes("public_key"), key.bytes) { return .failure(.notFound) }
                let outcome = try await body(row, db)
                switch outcome {
                case .failure(.locked), .failure(.keyAlreadyRegistered), .failure(.emailAlreadyRegistered),
                    .failure(.invitation):
                    try await Self.redactOutbox(for: id, in: db)
                default: break
                }
                return outcome
            }
        } catch { throw .ledger(error) }
        return try outcome.get()
    }

    /// Locked, used or expired (by the column `expiry`), in that order.
    static func unusable(_ row: SQLRow, policy: RegistrationPolicy, at time: UnixTime, expiry: String)
        throws(LedgerError) -> RegistrationError?
    {
        if try row.optionalInteger("used_at") != nil { return .used }
        // Too many wrong PUKs or wrong links: either locks the whole registration.
        let failures = max(try row.integer("failed_attempts"), try row.integer("link_failed_attempts"))
        if failures >= Int64(policy.maximumAttempts) { return .locked }
        if try row.integer(expiry) <= time { return .expired }
        return nil
    }

    static func wrongTry(failures: Int64, policy: RegistrationPolicy) -> RegistrationError {
        let left = policy.maximumAttempts - Int(failures) - 1
        return left > 0 ? .codeInvalid(attemptsLeft: left) : .locked
    }

    private static func activation(_ id: RegistrationID, in db: any SQLTransaction) async throws(LedgerError)
        -> Result<RegistrationActivation, RegistrationError>
    {
        guard
            let row = try await db.query("SELECT * FROM wallet_registrations WHERE id = ?", [.text(id.rawValue)])
                .first
        else { return .failure(.notFound) }
        let done = try row.optionalInteger("used_at") != nil
        return .success(
            RegistrationActivation(
                phoneProven: try row.optionalInteger("puk_verified_at") != nil,
                emailProven: try row.optionalInteger("email_confirmed_at") != nil,
                wallet: done ? try row.optionalText("wallet_id").map(WalletID.init(rawValue:)) : nil,
                linkExpiresAt: try row.optionalInteger("link_expires_at") ?? 0))
    }

    /// Both channels are proven: the wallet is created with the registered key, the invitation
    /// (if any) takes its use. The registration is used whatever follows, so it never completes
    /// twice; a refusal (the key or e-mail registered meanwhile, the invitation spent or revoked
    /// meanwhile) is final.
    private static func completeLinkRegistration(_ row: SQLRow, at time: UnixTime, in db: any SQLTransaction)
        async throws(LedgerError) -> RegistrationError?
    {
        let id = try row.text("id")
        try await db.query("UPDATE wallet_registrations SET used_at = ? WHERE id = ?", [.integer(time), .text(id)])
        let key: PublicKeyBytes
        do { key = try PublicKeyBytes(bytes: try row.bytes("public_key")) } catch let error as LedgerError {
            throw error
        } catch {
            throw .corruptRow(column: "wallet_registrations.public_key", reason: "not an uncompressed P-256 public key")
        }
        if try await !db.query("SELECT wallet_id FROM wallet_keys WHERE public_key = ?", [.blob(key.bytes)]).isEmpty {
            return .keyAlreadyRegistered
        }
        let email = try row.text("email")
        if try await !db.query("SELECT id FROM wallets WHERE email = ?", [.text(email)]).isEmpty {
            return .emailAlreadyRegistered
        }
        var invitation: Invitation?
        if let id = try row.optionalText("invitation_id") {
            switch try await currentInvitation(InvitationID(rawValue: id), in: db) {
            case .success(let usable): invitation = usable
            case .failure(let refusal): return .invitation(refusal)
            }
        }
        let wallet = WalletID.generate()
        try await insertWallet(id: wallet, name: try row.text("name"), key: key, at: time, in: db)
        try await db.query(
            "UPDATE wallets SET email = ?, phone = ? WHERE id = ?",
            [.text(email), .text(try row.text("phone")), .text(wallet.rawValue)])
        if let invitation { try await takeInvitationUse(invitation, for: wallet, in: db) }
        try await db.query(
            "UPDATE wallet_registrations SET wallet_id = ? WHERE id = ?", [.text(wallet.rawValue), .text(id)])
        return nil
    }

    /// Blanks the message a registration sent by one channel (the other may still be needed).
    static func redactOutbox(
        for registration: RegistrationID, channel: OutboxMessage.Channel, in db: any SQLTransaction
    ) async throws(LedgerError) {
        try await db.query(
            "UPDATE outbox SET body = ?, deliver_at = NULL WHERE registration_id = ? AND channel = ?",
            [.text(OutboxMessage.redactedBody), .text(registration.rawValue), .text(channel.rawValue)])
    }
}
