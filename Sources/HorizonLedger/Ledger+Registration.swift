import Foundation
import HorizonCore
import HorizonProtocol

/// A pending registration's or restoration's id: `r_` and 32 hex digits (128 random bits), made
/// by the server when it sends the code.
public struct RegistrationID: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    public static func generate() -> RegistrationID { RegistrationID(rawValue: "r_" + randomHex()) }

    /// Whether `text` has the shape of an id this ledger makes (anything else is not looked up).
    public static func isWellFormed(_ text: String) -> Bool {
        text.utf8.count == 34 && text.hasPrefix("r_")
            && text.utf8.dropFirst(2).allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}

/// What a one-time code is for.
public enum RegistrationKind: String, Sendable, Codable {
    /// A new wallet account with its first key.
    case registration
    /// A new device's key for an existing account (found by e-mail); the older keys are revoked.
    case restoration
}

/// How long a one-time code lives and how many wrong tries it takes.
public struct RegistrationPolicy: Sendable, Equatable {
    /// Seconds from sending to expiry.
    public var codeLifetime: Int64
    /// Wrong codes before the registration is locked for good (a new one must be started).
    public var maximumAttempts: Int
    /// Codes sent to one e-mail address or one phone number within one lifetime, so nobody
    /// floods a phone or a mailbox.
    public var maximumPendingPerRecipient: Int

    public init(codeLifetime: Int64 = 600, maximumAttempts: Int = 5, maximumPendingPerRecipient: Int = 5) {
        self.codeLifetime = codeLifetime
        self.maximumAttempts = maximumAttempts
        self.maximumPendingPerRecipient = maximumPendingPerRecipient
    }
}

/// A registration or restoration waiting for its code, as its start returns it.
public struct PendingRegistration: Sendable, Equatable {
    public let id: RegistrationID
    public let kind: RegistrationKind
    public let expiresAt: UnixTime
    /// The normalised e-mail and phone (E.164) the code goes to; for a restoration, the e-mail
    /// of the account, nil when no account has it (then nothing is sent, and nothing says so).
    public let email: String?
    public let phone: String?
    /// For a registration proven by link: until when the mailed link can be confirmed.
    public var linkExpiresAt: UnixTime? = nil
}

/// How a registration's e-mail address is proven.
public enum EmailProof: Sendable, Equatable {
    /// A code by mail, given back with the SMS code in one verify.
    case code(hash: [UInt8])
    /// A one-time link by mail (its token hashed by the caller), confirmed on the page it
    /// opens, valid for `lifetime` seconds; the SMS code (the PUK) is given back on its own.
    case link(tokenHash: [UInt8], lifetime: Int64)
}

/// A code that was right: the wallet it registered or restored.
public struct RegistrationResult: Sendable, Equatable {
    public let kind: RegistrationKind
    public let wallet: Wallet
    /// The keys a restoration revoked (0 for a registration).
    public let revokedKeys: Int

    public init(kind: RegistrationKind, wallet: Wallet, revokedKeys: Int) {
        self.kind = kind
        self.wallet = wallet
        self.revokedKeys = revokedKeys
    }
}

/// A wallet's contact details, as registration stored them (nil for wallets from before).
public struct WalletContact: Sendable, Equatable {
    public let email: String?
    public let phone: String?

    public init(email: String?, phone: String?) {
        self.email = email
        self.phone = phone
    }
}

/// Why a registration, a restoration or its code was refused.
public enum RegistrationError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No registration has this id (or it was purged a day after it expired).
    case notFound
    /// The code is wrong; `attemptsLeft` more wrong ones lock the registration.
    case codeInvalid(attemptsLeft: Int)
    case expired
    /// The code was used already (single use).
    case used
    /// Too many wrong codes: this registration can no longer be completed.
    case locked
    /// The key is registered to a wallet already.
    case keyAlreadyRegistered
    /// Another wallet was registered with this e-mail (restore that one instead).
    case emailAlreadyRegistered
    /// Too many codes were sent to this e-mail or phone recently.
    case tooManyPending(retryAfter: Int64)
    /// The invitation code was refused (or one is needed).
    case invitation(InvitationError)
    case ledger(LedgerError)

    public var description: String {
        switch self {
        case .notFound: "there is no such registration; start again"
        case .codeInvalid(let left):
            "the code is wrong; \(left) more wrong \(left == 1 ? "try locks" : "tries lock") this registration"
        case .expired: "the code has expired; start again to get a new one"
        case .used: "this code was used already; each code completes one registration"
        case .locked: "too many wrong codes: this registration is locked; start again to get a new code"
        case .keyAlreadyRegistered: "this key is registered to a wallet already"
        case .emailAlreadyRegistered:
            "a wallet with this e-mail is registered already; restore it on this device instead"
        case .tooManyPending(let wait): "too many codes were sent to this e-mail or phone; retry in \(wait) s"
        case .invitation(let refusal): refusal.description
        case .ledger(let error): error.description
        }
    }
}

extension Ledger {
    /// Records a registration whose codes (hashed by the caller) are about to be sent: `codeHash`
    /// the SMS code's, `emailCodeHash` the e-mail code's. With both, the verify needs both, so
    /// each channel proves its own holder; nil sends one code only. Refuses a key that is
    /// registered already; the e-mail's uniqueness is checked when the code comes back, so that
    /// starting tells nobody which e-mails have wallets.
    ///
    /// `emailProof` `.link` proves the address by a link instead of a code; `invitationCodeHash`
    /// names the invitation the registration uses (checked now, and its use taken when the
    /// wallet is created); `invitationRequired` refuses a registration without one.
    public func startRegistration(
        id: RegistrationID, name: String, email: String, phone: String, publicKey: PublicKeyBytes,
        codeHash: [UInt8], emailCodeHash: [UInt8]? = nil, emailProof: EmailProof? = nil,
        invitationCodeHash: [UInt8]? = nil, invitationRequired: Bool = false,
        policy: RegistrationPolicy = RegistrationPolicy(), at time: UnixTime = now()
    ) async throws(RegistrationError) -> PendingRegistration {
        let name = name.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !name.isEmpty, name.utf8.count <= 200, !name.unicodeScalars.contains(where: Self.isControl) else {
            throw .ledger(.invalidArgument("name must be 1 to 200 bytes of printable text"))
        }
        let email = try Self.normalizedEmail(email)
        let phone = try Self.normalizedPhone(phone)
        if invitationRequired, invitationCodeHash == nil { throw .invitation(.required) }
        let proof = emailProof ?? emailCodeHash.map { .code(hash: $0) }
        return try await insertRegistration(
            id: id, kind: .registration, name: name, email: email, phone: phone, publicKey: publicKey, wallet: nil,
            codeHash: codeHash, emailProof: proof, invitationCodeHash: invitationCodeHash, policy: policy, at: time)
    }

    /// Records a restoration for the account with this e-mail. The answer has the same shape
    /// whether or not an account has the e-mail (`email` is nil when none does: send nothing);
    /// the registration is stored either way, so its code is checked, counted and expires alike.
    ///
    /// `reactivationLink` (the reference's restoration): `codeHash` is the PUK's, texted to the
    /// account's phone (`phone` of the answer; nil for an account registered without one), and
    /// the restoration completes only through `submitRestorationPuk` then `reactivateWallet`
    /// with the token mailed once the PUK is right. Until then the row holds `placeholderHash`
    /// (random bytes nobody knows) where the token's hash will be, so no code alone completes it.
    public func startRestoration(
        id: RegistrationID, email: String, publicKey: PublicKeyBytes, codeHash: [UInt8],
        reactivationLink: (placeholderHash: [UInt8], lifetime: Int64)? = nil,
        policy: RegistrationPolicy = RegistrationPolicy(), at time: UnixTime = now()
    ) async throws(RegistrationError) -> PendingRegistration {
        let email = try Self.normalizedEmail(email)
        let found: (wallet: WalletID, phone: String?)?
        do {
            found = try await store.transaction { db in
                try await db.query("SELECT id, phone FROM wallets WHERE email = ?", [.text(email)]).first.map {
                    row throws(LedgerError) in
                    (WalletID(rawValue: try row.text("id")), try row.optionalText("phone"))
                }
            }
        } catch { throw .ledger(error) }
        let phone = reactivationLink == nil ? "" : found?.phone ?? ""
        let pending = try await insertRegistration(
            id: id, kind: .restoration, name: "", email: email, phone: phone, publicKey: publicKey,
            wallet: found?.wallet, codeHash: codeHash,
            emailProof: reactivationLink.map { .link(tokenHash: $0.placeholderHash, lifetime: $0.lifetime) },
            invitationCodeHash: nil, policy: policy, at: time)
        return PendingRegistration(
            id: pending.id, kind: .restoration, expiresAt: pending.expiresAt, email: found == nil ? nil : email,
            phone: phone.isEmpty ? nil : phone, linkExpiresAt: pending.linkExpiresAt)
    }

    private func insertRegistration(
        id: RegistrationID, kind: RegistrationKind, name: String, email: String, phone: String,
        publicKey: PublicKeyBytes, wallet: WalletID?, codeHash: [UInt8], emailProof: EmailProof?,
        invitationCodeHash: [UInt8]?, policy: RegistrationPolicy, at time: UnixTime
    ) async throws(RegistrationError) -> PendingRegistration {
        let (emailCodeHash, link): ([UInt8]?, (hash: [UInt8], expiresAt: UnixTime)?) =
            switch emailProof {
            case .code(let hash): (hash, nil)
            case .link(let hash, let lifetime): (nil, (hash, time + lifetime))
            case nil: (nil, nil)
            }
        guard RegistrationID.isWellFormed(id.rawValue), !codeHash.isEmpty, emailCodeHash?.isEmpty != true,
            link?.hash.isEmpty != true
        else {
            throw .ledger(.invalidArgument("a registration needs a well-formed id and a code hash"))
        }
        let expiresAt = time + policy.codeLifetime
        let outcome: Result<PendingRegistration, RegistrationError>
        let purged: Bool
        do {
            (outcome, purged) = try await store.transaction { db in
                // Registrations a day past their expiry are of no use to anyone.
                try await db.query(
                    """
                    DELETE FROM wallet_registrations
                    WHERE expires_at < ? AND (link_expires_at IS NULL OR link_expires_at < ?)
                    """, [.integer(time - 86_400), .integer(time - 86_400)])
                let purged = try await Self.purgeExpiredOutbox(at: time, in: db)
                if try await !db.query(
                    "SELECT wallet_id FROM wallet_keys WHERE public_key = ?", [.blob(publicKey.bytes)]
                )
                .isEmpty {
                    return (.failure(.keyAlreadyRegistered), purged)
                }
                let recent = try await db.query(
                    """
                    SELECT created_at FROM wallet_registrations
                    WHERE (email = ? OR (phone = ? AND phone <> '')) AND created_at > ? ORDER BY created_at
                    """, [.text(email), .text(phone), .integer(time - policy.codeLifetime)])
                if recent.count >= policy.maximumPendingPerRecipient,
                    let oldest = try recent.first?.integer("created_at")
                {
                    return (.failure(.tooManyPending(retryAfter: max(1, oldest + policy.codeLifetime - time))), purged)
                }
                var invitation: InvitationID?
                if let invitationCodeHash {
                    switch try await Self.usableInvitation(codeHash: invitationCodeHash, in: db) {
                    case .success(let found): invitation = found.id
                    case .failure(let refusal): return (.failure(.invitation(refusal)), purged)
                    }
                }
                try await db.query(
                    """
                    INSERT INTO wallet_registrations(id, kind, name, email, phone, public_key, wallet_id, code_hash,
                        email_code_hash, created_at, expires_at, failed_attempts, link_token_hash, link_expires_at,
                        invitation_id)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?)
                    """,
                    [
                        .text(id.rawValue), .text(kind.rawValue), .text(name), .text(email), .text(phone),
                        .blob(publicKey.bytes), wallet.map { .text($0.rawValue) } ?? .null, .blob(codeHash),
                        emailCodeHash.map { .blob($0) } ?? .null, .integer(time), .integer(expiresAt),
                        link.map { .blob($0.hash) } ?? .null, link.map { .integer($0.expiresAt) } ?? .null,
                        invitation.map { .text($0.rawValue) } ?? .null,
                    ])
                return (
                    .success(
                        PendingRegistration(
                            id: id, kind: kind, expiresAt: expiresAt, email: email, phone: phone,
                            linkExpiresAt: link?.expiresAt)),
                    purged
                )
            }
        } catch { throw .ledger(error) }
        if purged { await scrubDeletedCodes() }
        return try outcome.get()
    }

    /// Checks a code (hashed by the caller the way it hashed the one it sent) and, when it is
    /// right, registers the wallet or adds the restored key and revokes the account's others.
    ///
    /// A wrong code is counted in the same transaction that finds it wrong and committed before
    /// the error is thrown, so no number of processes or retries gets more than
    /// `policy.maximumAttempts` tries. Expiry, use and lock are checked before the code, so an
    /// unusable registration tells nothing about its code. A registration sent a code per
    /// channel needs both (`emailCodeHash` the e-mail one's); one wrong or missing is one wrong
    /// try, and the answer does not say which. Once used or locked, the outbox forgets its codes.
    public func verifyRegistration(
        _ id: RegistrationID, kind: RegistrationKind, codeHash: [UInt8], emailCodeHash: [UInt8]? = nil,
        policy: RegistrationPolicy = RegistrationPolicy(), at time: UnixTime = now()
    ) async throws(RegistrationError) -> RegistrationResult {
        guard RegistrationID.isWellFormed(id.rawValue) else { throw .notFound }
        let outcome: Result<RegistrationResult, RegistrationError>
        let redacted: Bool
        do {
            (outcome, redacted) = try await store.transaction { db in
                let outcome = try await Self.verify(
                    id, kind: kind, codeHash: codeHash, emailCodeHash: emailCodeHash, policy: policy, at: time, in: db)
                switch outcome {
                case .success, .failure(.locked), .failure(.used), .failure(.keyAlreadyRegistered),
                    .failure(.emailAlreadyRegistered):
                    try await Self.redactOutbox(for: id, in: db)
                    return (outcome, true)
                default: return (outcome, false)
                }
            }
        } catch { throw .ledger(error) }
        if redacted { await scrubDeletedCodes() }
        return try outcome.get()
    }

    private static func verify(
        _ id: RegistrationID, kind: RegistrationKind, codeHash: [UInt8], emailCodeHash: [UInt8]?,
        policy: RegistrationPolicy, at time: UnixTime, in db: any SQLTransaction
    ) async throws(LedgerError) -> Result<RegistrationResult, RegistrationError> {
        guard
            let row = try await db.query(
                "SELECT * FROM wallet_registrations WHERE id = ? AND kind = ?",
                [.text(id.rawValue), .text(kind.rawValue)]
            ).first
        else { return .failure(.notFound) }
        // A registration proven by link completes through its own steps, never by codes alone.
        if try row.optionalBytes("link_token_hash") != nil { return .failure(.notFound) }
        let failures = try row.integer("failed_attempts")
        if try row.optionalInteger("used_at") != nil { return .failure(.used) }
        if failures >= Int64(policy.maximumAttempts) { return .failure(.locked) }
        if try row.integer("expires_at") <= time { return .failure(.expired) }
        // Both compared whatever the first gives, so the time does not tell which was wrong.
        let smsRight = constantTimeEqual(try row.bytes("code_hash"), codeHash)
        let emailRight =
            switch try row.optionalBytes("email_code_hash") {
            case .some(let stored): constantTimeEqual(stored, emailCodeHash ?? [])
            case .none: true
            }
        guard smsRight && emailRight else {
            try await db.query(
                "UPDATE wallet_registrations SET failed_attempts = failed_attempts + 1 WHERE id = ?",
                [.text(id.rawValue)])
            let left = policy.maximumAttempts - Int(failures) - 1
            return .failure(left > 0 ? .codeInvalid(attemptsLeft: left) : .locked)
        }
        // Right code: used now, whatever follows, so it can never complete a second time.
        try await db.query(
            "UPDATE wallet_registrations SET used_at = ? WHERE id = ?", [.integer(time), .text(id.rawValue)])
        let key: PublicKeyBytes
        do { key = try PublicKeyBytes(bytes: try row.bytes("public_key")) } catch let error as LedgerError {
            throw error
        } catch {
            throw .corruptRow(column: "wallet_registrations.public_key", reason: "not an uncompressed P-256 public key")
        }
        if try await !db.query("SELECT wallet_id FROM wallet_keys WHERE public_key = ?", [.blob(key.bytes)]).isEmpty {
            return .failure(.keyAlreadyRegistered)
        }
        let email = try row.text("email")
        switch kind {
        case .registration:
            if try await !db.query("SELECT id FROM wallets WHERE email = ?", [.text(email)]).isEmpty {
                return .failure(.emailAlreadyRegistered)
            }
            let wallet = WalletID.generate()
            let name = try row.text("name")
            try await insertWallet(id: wallet, name: name, key: key, at: time, in: db)
            try await db.query(
                "UPDATE wallets SET email = ?, phone = ? WHERE id = ?",
                [.text(email), .text(try row.text("phone")), .text(wallet.rawValue)])
            return .success(
                RegistrationResult(kind: kind, wallet: Wallet(id: wallet, name: name, createdAt: time), revokedKeys: 0))
        case .restoration:
            // No account had the e-mail: its code was never sent, so this is not reached in
            // practice; refused like a code for a registration that does not exist.
            guard let walletText = try row.optionalText("wallet_id") else { return .failure(.notFound) }
            let wallet = try await Self.wallet(WalletID(rawValue: walletText), in: db)
            try await db.query(
                "INSERT INTO wallet_keys(public_key, wallet_id, added_at) VALUES (?, ?, ?)",
                [.blob(key.bytes), .text(wallet.id.rawValue), .integer(time)])
            let revoked = try await db.query(
                """
                UPDATE wallet_keys SET revoked_at = ?
                WHERE wallet_id = ? AND public_key <> ? AND revoked_at IS NULL RETURNING public_key
                """, [.integer(time), .text(wallet.id.rawValue), .blob(key.bytes)])
            try await forgetWalletPIN(wallet.id, in: db)
            return .success(RegistrationResult(kind: kind, wallet: wallet, revokedKeys: revoked.count))
        }
    }

    /// The e-mail and phone a wallet registered with.
    public func walletContact(_ id: WalletID) async throws(LedgerError) -> WalletContact {
        try await store.transaction { db in
            guard
                let row = try await db.query("SELECT email, phone FROM wallets WHERE id = ?", [.text(id.rawValue)])
                    .first
            else { throw LedgerError.notFound("wallet \(id)") }
            return WalletContact(email: try row.optionalText("email"), phone: try row.optionalText("phone"))
        }
    }

    // MARK: Input rules

    /// Lower case, trimmed, and plausible (name@domain.tld).
    public static func normalizedEmail(_ email: String) throws(RegistrationError) -> String {
        let normalized: String
        do { normalized = try canonicalEmail(email) } catch { throw .ledger(error) }
        guard isPlausibleEmail(normalized) else {
            throw .ledger(.invalidArgument("\"\(email.prefix(80))\" is not an e-mail address (expected name@domain)"))
        }
        return normalized
    }

    /// E.164: `+`, then 8 to 15 digits, the first not 0; spaces, dashes, dots and parentheses
    /// people type are dropped.
    public static func normalizedPhone(_ phone: String) throws(RegistrationError) -> String {
        let kept = phone.unicodeScalars.filter { !" -.()\t".unicodeScalars.contains($0) }
        let digits = kept.dropFirst()
        guard kept.first == "+", (8...15).contains(digits.count), digits.first != "0",
            digits.allSatisfy({ ("0"..."9").contains($0) })
        else {
            throw .ledger(
                .invalidArgument(
                    "\"\(phone.prefix(40))\" is not a phone number in international form (+ country code and number, e.g. +4915112345678)"
                ))
        }
        return "+" + String(digits)
    }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .format
    }
}

/// Equal bytes, compared without an early exit (the time does not tell where they differ).
func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    return zip(a, b).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
}

// MARK: Administration

extension Ledger {
    /// Every wallet with its contact, oldest first (the operator's list).
    public func walletsWithContacts() async throws(LedgerError) -> [(Wallet, WalletContact)] {
        try await store.transaction { db in
            var wallets: [(Wallet, WalletContact)] = []
            for row in try await db.query(
                "SELECT id, name, created_at, email, phone FROM wallets ORDER BY created_at, id")
            {
                wallets.append(
                    (
                        Wallet(
                            id: WalletID(rawValue: try row.text("id")), name: try row.text("name"),
                            createdAt: try row.integer("created_at")),
                        WalletContact(email: try row.optionalText("email"), phone: try row.optionalText("phone"))
                    ))
            }
            return wallets
        }
    }

    /// The wallet registered with this e-mail, if any.
    public func wallet(email: String) async throws(LedgerError) -> WalletID? {
        let email = try Self.canonicalEmail(email)
        return try await store.transaction { db in
            try await db.query("SELECT id FROM wallets WHERE email = ?", [.text(email)]).first.map {
                WalletID(rawValue: try $0.text("id"))
            }
        }
    }
}
