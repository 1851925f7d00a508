import Foundation
import HorizonCore

// MARK: E-mail addresses

extension Ledger {
    /// The one form of an e-mail address that every lookup, uniqueness rule and counter uses:
    /// trimmed of white space and line ends, lower case. An address with a control or format
    /// character inside (a newline, NUL, a bidi override) is refused, so no variant of one
    /// address can name another row or split a counter.
    public static func canonicalEmail(_ email: String) throws(LedgerError) -> String {
        let trimmed = email.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        guard !trimmed.unicodeScalars.contains(where: isControl) else {
            throw .invalidArgument("an e-mail address cannot contain control or format characters")
        }
        return trimmed
    }
}

// MARK: Request limits

extension Ledger {
    /// Counts one request under `key` in the fixed window starting at `windowStart` and returns
    /// the window's count including it. One statement (the primary key decides), so every server
    /// process on this database counts into the same windows.
    public func countRequest(key: String, windowStart: UnixTime) async throws(LedgerError) -> Int {
        try await store.transaction(.singleStatement) { db in
            try await Self.countRequest(key: key, windowStart: windowStart, in: db)
        }
    }

    /// Counts one request in the caller's transaction; the window's count including it.
    static func countRequest(key: String, windowStart: UnixTime, in db: any SQLTransaction)
        async throws(LedgerError) -> Int
    {
        let row = try await db.query(
            """
            INSERT INTO request_rate_windows(rate_key, window_start, requests) VALUES (?, ?, 1)
            ON CONFLICT (rate_key, window_start) DO UPDATE SET requests = request_rate_windows.requests + 1
            RETURNING requests
            """, [.text(key), .integer(windowStart)]
        ).first
        return Int(try row?.integer("requests") ?? 1)
    }

    /// Forgets the windows that started before `time`.
    public func pruneRequestWindows(before time: UnixTime) async throws(LedgerError) {
        try await store.transaction(.singleStatement) { db in
            try await db.query("DELETE FROM request_rate_windows WHERE window_start < ?", [.integer(time)])
        }
    }
}

// MARK: Sign-in back-off

extension Ledger {
    /// The latest time until which any of `keys` is held back after wrong sign-ins (0: none).
    public func signInBlockedUntil(keys: [String], at time: UnixTime) async throws(LedgerError) -> UnixTime {
        guard !keys.isEmpty else { return 0 }
        return try await store.transaction(.singleStatement) { db in
            let placeholders = Array(repeating: "?", count: keys.count).joined(separator: ", ")
            let row = try await db.query(
                """
                SELECT CAST(COALESCE(MAX(blocked_until), 0) AS BIGINT) AS until FROM sign_in_backoff
                WHERE backoff_key IN (\(placeholders))
                """, keys.map { .text($0) }
            ).first
            return try row?.integer("until") ?? 0
        }
    }

    /// Records a wrong sign-in under each key and returns until when the first of them now holds
    /// sign-ins back (0: none yet). Each key's failures grow by one (from one again when its last
    /// failure is older than `forgetAfter`); its back-off is its policy's lock for that many, so
    /// it doubles up to the policy's cap and never becomes permanent.
    @discardableResult
    public func recordSignInFailure(
        keys: [(key: String, policy: LoginPolicy)], forgetAfter: Int64 = 24 * 3600, at time: UnixTime
    ) async throws(LedgerError) -> UnixTime {
        try await store.transaction { db in
            var until: UnixTime = 0
            for (key, policy) in keys {
                let row = try await db.query(
                    """
                    INSERT INTO sign_in_backoff(backoff_key, failures, blocked_until, last_failure_at) VALUES (?, 1, 0, ?)
                    ON CONFLICT (backoff_key) DO UPDATE SET
                        failures = CASE WHEN sign_in_backoff.last_failure_at < ? THEN 1
                            ELSE sign_in_backoff.failures + 1 END,
                        last_failure_at = excluded.last_failure_at
                    RETURNING failures
                    """, [.text(key), .integer(time), .integer(time - forgetAfter)]
                ).first
                let failures = Int(try row?.integer("failures") ?? 1)
                let lock = policy.lock(afterFailures: failures)
                guard lock > 0 else { continue }
                try await db.query(
                    "UPDATE sign_in_backoff SET blocked_until = ? WHERE backoff_key = ?",
                    [.integer(time + lock), .text(key)])
                until = max(until, time + lock)
            }
            return until
        }
    }

    /// A right password: these keys' failures are forgotten.
    public func clearSignInFailures(keys: [String]) async throws(LedgerError) {
        guard !keys.isEmpty else { return }
        try await store.transaction(.singleStatement) { db in
            let placeholders = Array(repeating: "?", count: keys.count).joined(separator: ", ")
            try await db.query(
                "DELETE FROM sign_in_backoff WHERE backoff_key IN (\(placeholders))", keys.map { .text($0) })
        }
    }

    /// Forgets back-offs whose last failure is older than `time` and that hold nothing back.
    public func pruneSignInBackoff(before time: UnixTime, at now: UnixTime) async throws(LedgerError) {
        try await store.transaction(.singleStatement) { db in
            try await db.query(
                "DELETE FROM sign_in_backoff WHERE last_failure_at < ? AND blocked_until < ?",
                [.integer(time), .integer(now)])
        }
    }
}
