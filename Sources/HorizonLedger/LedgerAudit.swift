/// The ledger's invariants, checked by SQL over the stored rows alone (not through the rules
/// that wrote them), for tests, the scale-out check and an operator's audit.
public enum LedgerAudit {
    /// Each query returns one row per violation, with a `what` column saying which.
    static let checks: [(name: String, sql: String)] = [
        (
            "an entry's postings do not sum to zero in a currency",
            """
            SELECT 'entry ' || CAST(entry_id AS TEXT) || ' ' || currency AS what FROM postings
            GROUP BY entry_id, currency HAVING SUM(amount) <> 0
            """
        ),
        (
            "an entry has fewer than two postings",
            """
            SELECT 'entry ' || CAST(e.id AS TEXT) AS what FROM entries e LEFT JOIN postings p ON p.entry_id = e.id
            GROUP BY e.id HAVING COUNT(p.id) < 2
            """
        ),
        (
            "an account's balance is not the sum of its postings",
            """
            SELECT 'account ' || CAST(a.id AS TEXT) AS what FROM accounts a LEFT JOIN postings p ON p.account_id = a.id
            GROUP BY a.id, a.balance HAVING a.balance <> COALESCE(SUM(p.amount), 0)
            """
        ),
        (
            "a wallet or merchant account is below zero",
            "SELECT 'account ' || CAST(id AS TEXT) AS what FROM accounts WHERE kind <> 'external' AND balance < 0"
        ),
        (
            "the accounts of a currency do not sum to zero",
            "SELECT currency AS what FROM accounts GROUP BY currency HAVING SUM(balance) <> 0"
        ),
        (
            "an approved payment without its entry, or a decline or redemption that moved money",
            """
            SELECT 'transaction ' || CAST(reference AS TEXT) AS what FROM transactions
            WHERE (outcome = 'approved' AND transaction_type = 1 AND entry_id IS NULL)
               OR ((outcome <> 'approved' OR transaction_type <> 1) AND entry_id IS NOT NULL)
            """
        ),
        (
            "a payment's entry did not move its amount plus tip",
            """
            SELECT 'transaction ' || CAST(t.reference AS TEXT) AS what FROM transactions t
            JOIN postings p ON p.entry_id = t.entry_id AND p.amount > 0
            GROUP BY t.reference, t.amount, t.tip HAVING SUM(p.amount) <> t.amount + t.tip
            """
        ),
        (
            "an entry is used by more than one transaction",
            """
            SELECT 'entry ' || CAST(entry_id AS TEXT) AS what FROM transactions WHERE entry_id IS NOT NULL
            GROUP BY entry_id HAVING COUNT(*) > 1
            """
        ),
        // Refunds
        (
            "a payment's refunds total more than its amount plus tip",
            """
            SELECT 'transaction ' || CAST(t.reference AS TEXT) AS what FROM transactions t
            JOIN refunds r ON r.payment_id = t.payment_id
            GROUP BY t.reference, t.amount, t.tip HAVING SUM(r.amount) > t.amount + t.tip
            """
        ),
        (
            "a refund of something other than an approved payment of its merchant, in its currency, to its wallet",
            """
            SELECT 'refund ' || CAST(r.reference AS TEXT) AS what FROM refunds r
            LEFT JOIN transactions t ON t.payment_id = r.payment_id
            WHERE t.reference IS NULL OR t.outcome <> 'approved' OR t.transaction_type <> 1
               OR t.merchant_id <> r.merchant_id OR t.currency <> r.currency OR t.wallet_id <> r.wallet_id
            """
        ),
        (
            "a refund's entry did not move its amount out of its merchant's account",
            """
            SELECT 'refund ' || CAST(r.reference AS TEXT) AS what FROM refunds r
            JOIN entries e ON e.id = r.entry_id
            LEFT JOIN postings p ON p.entry_id = r.entry_id AND p.amount < 0
            LEFT JOIN accounts a ON a.id = p.account_id
            GROUP BY r.reference, r.amount, r.merchant_id, e.kind
            HAVING e.kind <> 'refund' OR COUNT(p.id) <> 1 OR SUM(p.amount) <> -r.amount
               OR MAX(a.kind) <> 'merchant' OR MAX(a.owner_id) <> r.merchant_id
            """
        ),
        (
            "an entry is used by both a transaction and a refund",
            """
            SELECT 'entry ' || CAST(r.entry_id AS TEXT) AS what FROM refunds r
            JOIN transactions t ON t.entry_id = r.entry_id
            """
        ),
        // Offline settlement
        (
            "an offline debt account is above zero",
            """
            SELECT 'account ' || CAST(id AS TEXT) AS what FROM accounts
            WHERE kind = 'external' AND owner_id LIKE 'offline!_debt:%' ESCAPE '!' AND balance > 0
            """
        ),
        (
            "an offline payment's columns are set in part, or a redemption is marked offline",
            """
            SELECT 'transaction ' || CAST(reference AS TEXT) AS what FROM transactions
            WHERE NOT ((offline_token_id IS NULL AND offline_accepted_at IS NULL AND offline_guaranteed IS NULL)
                OR (offline_token_id IS NOT NULL AND offline_accepted_at IS NOT NULL AND offline_guaranteed IS NOT NULL
                    AND transaction_type = 1))
            """
        ),
        (
            "an offline debt posted outside a guaranteed offline payment or a top-up",
            """
            SELECT 'entry ' || CAST(p.entry_id AS TEXT) AS what FROM postings p
            JOIN accounts a ON a.id = p.account_id AND a.kind = 'external'
                AND a.owner_id LIKE 'offline!_debt:%' ESCAPE '!'
            JOIN entries e ON e.id = p.entry_id
            LEFT JOIN transactions t ON t.entry_id = p.entry_id
            WHERE NOT ((p.amount < 0 AND t.offline_guaranteed = 1) OR (p.amount > 0 AND e.kind IN ('deposit', 'enrollment')))
            """
        ),
    ]

    /// Every violation found, as "check: where"; empty when the ledger is consistent.
    public static func violations(in store: any LedgerStore) async throws(LedgerError) -> [String] {
        try await store.transaction { db in
            var found: [String] = []
            for check in checks {
                for row in try await db.query(check.sql) { found.append("\(check.name): \(try row.text("what"))") }
            }
            return found
        }
    }
}
