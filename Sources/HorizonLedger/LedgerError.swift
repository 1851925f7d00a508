import HorizonProtocol

/// Why the ledger could not do what it was asked. A declined payment is not an error (it is a
/// stored result); these are the cases where no result exists, each worded so that the person
/// reading it knows what to do next.
public enum LedgerError: Error, Equatable, Sendable, CustomStringConvertible {
    /// This payment or redemption id was executed before with other terms; nothing was executed now.
    case conflictingRetry(PaymentID)
    /// The thing named (a merchant, a wallet) does not exist.
    case notFound(String)
    /// The thing named exists already (a merchant's admin e-mail, a register user's id).
    case alreadyExists(String)
    /// An argument the caller can fix (a name too long, a negative amount).
    case invalidArgument(String)
    /// The database was written by a newer version of Horizon than this one.
    case schemaTooNew(found: Int, supported: Int)
    /// A migration step failed; the database stays at the version before it.
    case migrationFailed(version: Int, name: String, reason: String)
    /// A stored row does not have the shape this version reads (missing column, wrong type,
    /// value out of range). Never read as zero.
    case corruptRow(column: String, reason: String)
    /// The database could not be reached (connection refused, closed, timed out).
    case unavailable(String)
    /// Concurrent transactions kept conflicting; nothing was executed, the request can be retried.
    case contention(attempts: Int)
    /// Any other failure the database reported, with its own message.
    case database(String)
    /// A setting (a database URL, an option) that cannot work.
    case invalidConfiguration(String)
    /// A refund was refused for the reason given (its `code` is stable); nothing was refunded.
    case refundRefused(RefundRefusal)

    public var description: String {
        switch self {
        case .conflictingRetry(let id):
            "payment \(id) was already executed with other terms; nothing was executed (use a new payment id for a new payment)"
        case .notFound(let what): "\(what) does not exist"
        case .alreadyExists(let what): "\(what) already exists"
        case .invalidArgument(let reason): reason
        case .schemaTooNew(let found, let supported):
            "the database has schema version \(found), newer than this program's \(supported); run the newer horizon-server against it"
        case .migrationFailed(let version, let name, let reason):
            "migration \(version) (\(name)) failed, the database stays at the version before it: \(reason)"
        case .corruptRow(let column, let reason):
            "a stored row cannot be read (column \(column): \(reason)); the database was changed outside Horizon or is damaged"
        case .unavailable(let reason): "the database cannot be reached: \(reason); check that it is running and retry"
        case .contention(let attempts):
            "the database stayed busy with conflicting transactions after \(attempts) attempts; nothing was executed, retry"
        case .database(let reason): "the database refused the operation: \(reason)"
        case .invalidConfiguration(let reason): reason
        case .refundRefused(let refusal): refusal.description
        }
    }
}
