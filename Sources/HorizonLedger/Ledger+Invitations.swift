import Foundation
import HorizonCore

/// An invitation code's id: `inv_` and 32 hex digits. The code itself is kept only as a hash
/// (the server hashes it), so the id is what the operator lists and revokes.
public struct InvitationID: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    public static func generate() -> InvitationID { InvitationID(rawValue: "inv_" + randomHex()) }
}

/// An invitation code the operator issued: how often it may register a wallet, how often it
/// did, and the bonus a wallet registered with it gets on its first top-up.
public struct Invitation: Sendable, Equatable {
    public let id: InvitationID
    /// The code's first characters, so the operator can tell codes apart.
    public let hint: String
    public let maximumUses: Int
    public let uses: Int
    public let bonus: Money?
    public let note: String
    public let createdAt: UnixTime
    public let revokedAt: UnixTime?

    public enum Status: String, Sendable {
        case active, spent, revoked
    }

    public var status: Status {
        if revokedAt != nil { return .revoked }
        return uses >= maximumUses ? .spent : .active
    }
}

/// Why an invitation code was refused.
public enum InvitationError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No invitation has this code.
    case unknown
    /// Every use of the code is taken.
    case spent
    /// The operator revoked the code.
    case revoked
    /// The server takes registrations with an invitation code only.
    case required

    public var description: String {
        switch self {
        case .unknown: "this invitation code is not known; check it, or ask whoever gave it to you"
        case .spent: "this invitation code has been used as often as it may be; ask for another"
        case .revoked: "this invitation code was withdrawn by the operator; ask for another"
        case .required: "this server registers wallets with an invitation code only; enter the one you were given"
        }
    }
}

extension Ledger {
    /// Records an invitation code (hashed by the caller) that registers up to `maximumUses`
    /// wallets, each getting `bonus` on its first top-up.
    public func createInvitation(
        codeHash: [UInt8], hint: String, maximumUses: Int, bonus: Money?, note: String, at time: UnixTime = now()
    ) async throws(LedgerError) -> Invitation {
        guard !codeHash.isEmpty, (1...1_000_000).contains(maximumUses) else {
            throw .invalidArgument("an invitation may be used 1 to 1000000 times")
        }
        if let bonus, bonus.minorUnits <= 0 { throw .invalidArgument("a bonus must be more than zero") }
        guard note.utf8.count <= 200, !note.unicodeScalars.contains(where: Self.isControl) else {
            throw .invalidArgument("the note must be at most 200 bytes of printable text")
        }
        let id = InvitationID.generate()
        try await store.transaction { db in
            if try await !db.query("SELECT id FROM invitations WHERE code_hash = ?", [.blob(codeHash)]).isEmpty {
                throw LedgerError.alreadyExists("an invitation with this code")
            }
            try await db.query(
                """
                INSERT INTO invitations(id, code_hash, hint, maximum_uses, uses, bonus_amount, bonus_currency, note,
                    created_at)
                VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?)
                """,
                [
                    .text(id.rawValue), .blob(codeHash), .text(hint), .integer(Int64(maximumUses)),
                    bonus.map { .integer($0.minorUnits) } ?? .null, bonus.map { .text($0.currency.code) } ?? .null,
                    .text(note), .integer(time),
                ])
        }
        return Invitation(
            id: id, hint: hint, maximumUses: maximumUses, uses: 0, bonus: bonus, note: note, createdAt: time,
            revokedAt: nil)
    }

    /// Every invitation, newest first.
    public func invitations() async throws(LedgerError) -> [Invitation] {
        try await store.transaction { db in
            var list: [Invitation] = []
            for row in try await db.query("SELECT * FROM invitations ORDER BY created_at DESC, id") {
                list.append(try Self.invitation(row))
            }
            return list
        }
    }

    /// Withdraws an invitation: registrations that have not completed with it can no longer.
    /// Revoking one revoked before changes nothing.
    public func revokeInvitation(_ id: InvitationID, at time: UnixTime = now()) async throws(LedgerError)
        -> Invitation
    {
        try await store.transaction { db in
            try await db.query(
                "UPDATE invitations SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                [.integer(time), .text(id.rawValue)])
            guard let row = try await db.query("SELECT * FROM invitations WHERE id = ?", [.text(id.rawValue)]).first
            else { throw LedgerError.notFound("invitation \(id)") }
            return try Self.invitation(row)
        }
    }

    static func invitation(_ row: SQLRow) throws(LedgerError) -> Invitation {
        var bonus: Money?
        if let amount = try row.optionalInteger("bonus_amount"), let code = try row.optionalText("bonus_currency") {
            do { bonus = try Money(minorUnits: amount, currency: Currency(code: code)) } catch {
                throw .corruptRow(column: "invitations.bonus_amount", reason: "not an amount: \(error)")
            }
        }
        return Invitation(
            id: InvitationID(rawValue: try row.text("id")), hint: try row.text("hint"),
            maximumUses: Int(try row.integer("maximum_uses")), uses: Int(try row.integer("uses")), bonus: bonus,
            note: try row.text("note"), createdAt: try row.integer("created_at"),
            revokedAt: try row.optionalInteger("revoked_at"))
    }

    /// The invitation a code names, if it may still register a wallet.
    static func usableInvitation(codeHash: [UInt8], in db: any SQLTransaction) async throws(LedgerError)
        -> Result<Invitation, InvitationError>
    {
        guard let row = try await db.query("SELECT * FROM invitations WHERE code_hash = ?", [.blob(codeHash)]).first
        else { return .failure(.unknown) }
        let invitation = try invitation(row)
        switch invitation.status {
        case .active: return .success(invitation)
        case .spent: return .failure(.spent)
        case .revoked: return .failure(.revoked)
        }
    }

    /// The invitation as it stands now, if it may still register a wallet (it may have been
    /// spent or revoked since its registration started).
    static func currentInvitation(_ id: InvitationID, in db: any SQLTransaction) async throws(LedgerError)
        -> Result<Invitation, InvitationError>
    {
        guard let row = try await db.query("SELECT * FROM invitations WHERE id = ?", [.text(id.rawValue)]).first
        else { return .failure(.unknown) }
        let invitation = try invitation(row)
        switch invitation.status {
        case .active: return .success(invitation)
        case .spent: return .failure(.spent)
        case .revoked: return .failure(.revoked)
        }
    }

    /// Takes one use of a usable invitation (checked in the same transaction) for the wallet a
    /// registration just created, and owes the wallet the invitation's bonus on its first top-up.
    /// The table's CHECK keeps its uses within its limit whatever runs at the same time.
    static func takeInvitationUse(_ invitation: Invitation, for wallet: WalletID, in db: any SQLTransaction)
        async throws(LedgerError)
    {
        try await db.query("UPDATE invitations SET uses = uses + 1 WHERE id = ?", [.text(invitation.id.rawValue)])
        if let bonus = invitation.bonus {
            try await db.query(
                "INSERT INTO invitation_bonuses(wallet_id, invitation_id, amount, currency) VALUES (?, ?, ?, ?)",
                [
                    .text(wallet.rawValue), .text(invitation.id.rawValue), .integer(bonus.minorUnits),
                    .text(bonus.currency.code),
                ])
        }
    }

    /// Grants the invitation bonus a wallet is owed, once, with its first top-up: from the
    /// external account straight to the wallet (an offline debt is repaid by the top-up itself,
    /// not by the bonus). Returns the bonus granted, if any (none when it would take the wallet
    /// past the most a wallet holds).
    static func grantInvitationBonus(to wallet: WalletID, at time: UnixTime, in db: any SQLTransaction)
        async throws(LedgerError) -> Money?
    {
        guard
            let row = try await db.query(
                "SELECT amount, currency FROM invitation_bonuses WHERE wallet_id = ? AND granted_at IS NULL",
                [.text(wallet.rawValue)]
            ).first
        else { return nil }
        let bonus: Money
        do {
            bonus = try Money(minorUnits: try row.integer("amount"), currency: Currency(code: try row.text("currency")))
        } catch let error as LedgerError { throw error } catch {
            throw .corruptRow(column: "invitation_bonuses.amount", reason: "not an amount: \(error)")
        }
        try await db.query(
            "UPDATE invitation_bonuses SET granted_at = ? WHERE wallet_id = ?",
            [.integer(time), .text(wallet.rawValue)])
        let target = try await account(.wallet, owner: wallet.rawValue, bonus.currency, in: db)
        guard target.balance <= Money.maximumMinorUnits - bonus.minorUnits else { return nil }
        let source = try await account(.external, owner: externalOwner, bonus.currency, in: db)
        // An entry of its own, of the deposit kind (money from outside, as a top-up is); the
        // bonus table says which deposit was the bonus.
        _ = try await post(
            "deposit",
            [
                Leg(account: source.id, currency: bonus.currency, amount: -bonus.minorUnits),
                Leg(account: target.id, currency: bonus.currency, amount: bonus.minorUnits),
            ], at: time, in: db)
        return bonus
    }
}
