/// One step of the schema's history. Steps are never edited once released: a change is a new
/// step, so that every older database reaches the current schema by the same path.
struct Migration: Sendable {
    let version: Int
    let name: String
    /// Whether the program of the version before still runs on the schema with this step.
    var kind: Kind = .expand
    /// Statements in the dialect-neutral template (`{ID}`, `{INT}`, `{BYTES}`, `{STRICT}`),
    /// one statement each (both drivers run one statement per call).
    let statements: [String]
    /// Statements only one dialect runs, before the shared ones: for changes the two databases
    /// spell differently (SQLite cannot alter a CHECK constraint; it rebuilds the table).
    var dialectStatements: [SQLDialect: [String]] = [:]

    /// Upgrades replace server processes one at a time, so for a while the previous program runs
    /// on the schema the new one migrated. A step that only adds (tables, indexes, columns that
    /// are nullable or have a default) keeps it working: an **expand** step. A step that drops,
    /// renames, rebuilds or tightens is a **contract** step, and ships one release after the
    /// expand step that made it safe, once no program of the older release is left running.
    enum Kind: String, Sendable {
        case expand
        case contract
    }

    func statements(for dialect: SQLDialect) -> [String] { dialectStatements[dialect, default: []] + statements }
}

/// The ledger's schema history, and the runner that brings a database up to date.
///
/// `schema_migrations` records each applied step, and `schema_step_kinds` whether each was an
/// expand or a contract step. A database at an older version is migrated, never refused. One at a
/// newer version than this program knows is run on as it is when every newer step only expanded
/// it (what a rolling upgrade needs: the processes not yet upgraded keep serving), and refused
/// when one contracted it or its kind is not recorded, because this program's statements might
/// no longer fit it.
public enum LedgerSchema {
    /// The version this program's rules read and write.
    public static var currentVersion: Int { migrations.last?.version ?? 0 }

    static let migrations: [Migration] = [
        Migration(
            version: 1, name: "merchants, wallets, accounts, postings and settlement",
            statements: [
                """
                CREATE TABLE merchants(
                    id TEXT PRIMARY KEY,
                    name TEXT NOT NULL CHECK (length(name) > 0),
                    currency TEXT NOT NULL CHECK (length(currency) = 3),
                    admin_email TEXT NOT NULL UNIQUE,
                    created_at {INT} NOT NULL) {STRICT}
                """,
                """
                CREATE TABLE wallets(
                    id TEXT PRIMARY KEY,
                    name TEXT NOT NULL,
                    created_at {INT} NOT NULL) {STRICT}
                """,
                // A wallet's keys: one active at a time in practice; a restored device adds a new
                // key and revokes the old one, and the account stays the same.
                """
                CREATE TABLE wallet_keys(
                    public_key {BYTES} PRIMARY KEY,
                    wallet_id TEXT NOT NULL REFERENCES wallets(id),
                    added_at {INT} NOT NULL,
                    revoked_at {INT}) {STRICT}
                """,
                "CREATE INDEX wallet_keys_wallet ON wallet_keys(wallet_id)",
                // Balances per owner and currency. Wallets and merchants never go below zero (the
                // rules check first; the CHECK is the backstop); the external account is where
                // money enters from outside (top-ups), so it goes negative by what came in.
                """
                CREATE TABLE accounts(
                    id {ID},
                    kind TEXT NOT NULL CHECK (kind IN ('wallet', 'merchant', 'external')),
                    owner_id TEXT NOT NULL,
                    currency TEXT NOT NULL CHECK (length(currency) = 3),
                    balance {INT} NOT NULL,
                    UNIQUE (kind, owner_id, currency),
                    UNIQUE (id, currency),
                    CHECK (kind = 'external' OR balance >= 0)) {STRICT}
                """,
                // One entry per movement of money; its postings sum to zero per currency.
                """
                CREATE TABLE entries(
                    id {ID},
                    kind TEXT NOT NULL CHECK (kind IN ('payment', 'deposit', 'enrollment')),
                    created_at {INT} NOT NULL) {STRICT}
                """,
                // The composite key makes a posting's currency its account's currency.
                """
                CREATE TABLE postings(
                    id {ID},
                    entry_id {INT} NOT NULL REFERENCES entries(id),
                    account_id {INT} NOT NULL,
                    currency TEXT NOT NULL,
                    amount {INT} NOT NULL CHECK (amount <> 0),
                    FOREIGN KEY (account_id, currency) REFERENCES accounts(id, currency)) {STRICT}
                """,
                "CREATE INDEX postings_entry ON postings(entry_id)",
                "CREATE INDEX postings_account ON postings(account_id)",
                """
                CREATE TABLE register_users(
                    merchant_id TEXT NOT NULL REFERENCES merchants(id),
                    user_id TEXT NOT NULL CHECK (length(user_id) > 0),
                    name TEXT NOT NULL,
                    added_at {INT} NOT NULL,
                    PRIMARY KEY (merchant_id, user_id)) {STRICT}
                """,
                // Every executed payment or redemption, approved or declined, by its id: the
                // UNIQUE payment_id is what makes execution happen once.
                """
                CREATE TABLE transactions(
                    reference {ID},
                    payment_id {BYTES} NOT NULL UNIQUE,
                    merchant_id TEXT NOT NULL REFERENCES merchants(id),
                    transaction_type {INT} NOT NULL,
                    item TEXT NOT NULL,
                    quantity {INT} NOT NULL,
                    session_id {INT} NOT NULL,
                    wallet_key {BYTES} NOT NULL,
                    wallet_id TEXT REFERENCES wallets(id),
                    terminal_key_id {BYTES} NOT NULL,
                    amount {INT} NOT NULL CHECK (amount >= 0),
                    tip {INT} NOT NULL CHECK (tip >= 0),
                    currency TEXT NOT NULL,
                    register_user TEXT NOT NULL,
                    content_digest {BYTES} NOT NULL,
                    outcome TEXT NOT NULL CHECK (outcome IN ('approved', 'declined')),
                    decline_code {INT},
                    decline_reason TEXT,
                    bonus_earned {INT} NOT NULL,
                    bonus_balance {INT} NOT NULL,
                    entry_id {INT} REFERENCES entries(id),
                    settled_at {INT} NOT NULL) {STRICT}
                """,
                "CREATE INDEX transactions_merchant ON transactions(merchant_id, reference)",
            ]),
        Migration(
            version: 2, name: "loyalty: bonus points, gold memberships, coupons",
            statements: [
                """
                ALTER TABLE merchants ADD COLUMN bonus_points_per_major_unit {INT} NOT NULL DEFAULT 1
                    CHECK (bonus_points_per_major_unit BETWEEN 0 AND 1000000)
                """,
                """
                CREATE TABLE bonus_points(
                    merchant_id TEXT NOT NULL REFERENCES merchants(id),
                    wallet_id TEXT NOT NULL REFERENCES wallets(id),
                    points {INT} NOT NULL CHECK (points >= 0),
                    PRIMARY KEY (merchant_id, wallet_id)) {STRICT}
                """,
                """
                CREATE TABLE gold_memberships(
                    merchant_id TEXT NOT NULL REFERENCES merchants(id),
                    wallet_id TEXT NOT NULL REFERENCES wallets(id),
                    tier TEXT NOT NULL,
                    valid_from {INT} NOT NULL,
                    valid_until {INT} NOT NULL,
                    benefit_period {INT} NOT NULL CHECK (benefit_period > 0),
                    last_benefit_period {INT},
                    PRIMARY KEY (merchant_id, wallet_id)) {STRICT}
                """,
                """
                CREATE TABLE coupons(
                    merchant_id TEXT NOT NULL REFERENCES merchants(id),
                    code TEXT NOT NULL,
                    wallet_id TEXT NOT NULL REFERENCES wallets(id),
                    description TEXT NOT NULL,
                    value {INT} NOT NULL CHECK (value >= 0),
                    expires_at {INT} NOT NULL,
                    redeemed_at {INT},
                    redemption_id {BYTES},
                    PRIMARY KEY (merchant_id, code)) {STRICT}
                """,
            ]),
        Migration(
            version: 3, name: "identity: merchant sign-in, terminals, outbox, request nonces",
            statements: [
                // The merchant admin's password as a self-describing scrypt hash, and the
                // lock-out state: in the database, so every server process sees the same count.
                """
                CREATE TABLE merchant_logins(
                    merchant_id TEXT PRIMARY KEY REFERENCES merchants(id),
                    password_hash TEXT NOT NULL,
                    failed_attempts {INT} NOT NULL CHECK (failed_attempts >= 0),
                    locked_until {INT} NOT NULL) {STRICT}
                """,
                // An activated terminal key. A revoked one is never renewed and is listed in the
                // revocation data wallets receive.
                """
                CREATE TABLE terminals(
                    id TEXT PRIMARY KEY,
                    merchant_id TEXT NOT NULL REFERENCES merchants(id),
                    label TEXT NOT NULL CHECK (length(label) > 0),
                    public_key {BYTES} NOT NULL UNIQUE,
                    key_id {BYTES} NOT NULL,
                    activated_at {INT} NOT NULL,
                    credential_expires_at {INT} NOT NULL,
                    revoked_at {INT}) {STRICT}
                """,
                "CREATE INDEX terminals_merchant ON terminals(merchant_id)",
                // What the server would have sent by SMS or mail (the sandbox `MessageSender`).
                """
                CREATE TABLE outbox(
                    id {ID},
                    channel TEXT NOT NULL CHECK (channel IN ('sms', 'email')),
                    recipient TEXT NOT NULL,
                    subject TEXT NOT NULL,
                    body TEXT NOT NULL,
                    created_at {INT} NOT NULL) {STRICT}
                """,
                // Signed requests' nonces, once per key within the accepted clock window: shared
                // by every server process, so a replay to another process is refused too.
                """
                CREATE TABLE request_nonces(
                    public_key {BYTES} NOT NULL,
                    nonce TEXT NOT NULL,
                    seen_at {INT} NOT NULL,
                    PRIMARY KEY (public_key, nonce)) {STRICT}
                """,
                "CREATE INDEX request_nonces_seen ON request_nonces(seen_at)",
            ]),
        Migration(
            version: 4, name: "wallet registration and restoration with one-time codes",
            statements: [
                // A registered wallet's contact: the e-mail restoration sends its code to (one
                // wallet per e-mail, so it names one account) and the phone registration texts.
                // NULL for wallets from before registration existed (UNIQUE allows many NULLs).
                "ALTER TABLE wallets ADD COLUMN email TEXT",
                "ALTER TABLE wallets ADD COLUMN phone TEXT",
                "CREATE UNIQUE INDEX wallets_email ON wallets(email)",
                // A registration or restoration waiting for its one-time code. Only a keyed hash
                // of the code is kept; wrong tries are counted here, so every server process
                // sees the same count. A restoration for an unknown e-mail has no wallet_id
                // and a code nobody was sent: it answers like any other (no enumeration).
                """
                CREATE TABLE wallet_registrations(
                    id TEXT PRIMARY KEY,
                    kind TEXT NOT NULL CHECK (kind IN ('registration', 'restoration')),
                    name TEXT NOT NULL,
                    email TEXT NOT NULL,
                    phone TEXT NOT NULL,
                    public_key {BYTES} NOT NULL,
                    wallet_id TEXT REFERENCES wallets(id),
                    code_hash {BYTES} NOT NULL,
                    created_at {INT} NOT NULL,
                    expires_at {INT} NOT NULL,
                    failed_attempts {INT} NOT NULL CHECK (failed_attempts >= 0),
                    used_at {INT}) {STRICT}
                """,
                "CREATE INDEX wallet_registrations_expiry ON wallet_registrations(expires_at)",
                "CREATE INDEX wallet_registrations_email ON wallet_registrations(email, created_at)",
                "CREATE INDEX wallet_registrations_phone ON wallet_registrations(phone, created_at)",
            ]),
        // Refunds
        Migration(
            version: 5, name: "refunds",
            kind: .contract,  // rebuilds entries to widen its CHECK
            statements: [
                // One row per executed refund. The refund id is the client's idempotency key,
                // unique per merchant. `destination` is the payment method the money went back
                // to (today always 'horizon_balance'; no CHECK, so that a new method such as a
                // card needs no rebuild: the rules decode it strictly), with the method's own id
                // in destination_reference. The entry is the money's movement; bonus_reversed the
                // points taken back from the wallet.
                """
                CREATE TABLE refunds(
                    reference {ID},
                    merchant_id TEXT NOT NULL REFERENCES merchants(id),
                    refund_id TEXT NOT NULL CHECK (length(refund_id) BETWEEN 1 AND 64),
                    payment_id {BYTES} NOT NULL REFERENCES transactions(payment_id),
                    wallet_id TEXT NOT NULL REFERENCES wallets(id),
                    amount {INT} NOT NULL CHECK (amount > 0),
                    currency TEXT NOT NULL CHECK (length(currency) = 3),
                    destination TEXT NOT NULL,
                    destination_reference TEXT,
                    bonus_reversed {INT} NOT NULL CHECK (bonus_reversed >= 0),
                    entry_id {INT} NOT NULL UNIQUE REFERENCES entries(id),
                    created_at {INT} NOT NULL,
                    UNIQUE (merchant_id, refund_id)) {STRICT}
                """,
                "CREATE INDEX refunds_payment ON refunds(payment_id, reference)",
            ],
            dialectStatements: [
                // An entry of kind 'refund'. SQLite cannot change a CHECK in place: the table is
                // rebuilt with the same ids (in a migration the store checks foreign keys at the
                // end, not per statement: the postings' and transactions' references name the new
                // table once it is renamed).
                .sqlite: [
                    """
                    CREATE TABLE entries_v5(
                        id {ID},
                        kind TEXT NOT NULL CHECK (kind IN ('payment', 'deposit', 'enrollment', 'refund')),
                        created_at {INT} NOT NULL) {STRICT}
                    """,
                    "INSERT INTO entries_v5(id, kind, created_at) SELECT id, kind, created_at FROM entries",
                    "DROP TABLE entries",
                    "ALTER TABLE entries_v5 RENAME TO entries",
                ],
                .postgres: [
                    "ALTER TABLE entries DROP CONSTRAINT entries_kind_check",
                    """
                    ALTER TABLE entries ADD CONSTRAINT entries_kind_check
                        CHECK (kind IN ('payment', 'deposit', 'enrollment', 'refund'))
                    """,
                ],
            ]),
        // Merchant dashboard
        Migration(
            version: 6, name: "merchant dashboard: sessions and sign-in attempts",
            statements: [
                // A signed-in dashboard browser. Only the SHA-256 of the cookie's token is kept, so
                // a copy of the database signs nobody in; the CSRF secret is per session and goes
                // with it. Every server process reads the same rows (no session lives in memory).
                """
                CREATE TABLE dashboard_sessions(
                    token_hash {BYTES} PRIMARY KEY,
                    merchant_id TEXT NOT NULL REFERENCES merchants(id),
                    csrf_secret TEXT NOT NULL,
                    created_at {INT} NOT NULL,
                    expires_at {INT} NOT NULL) {STRICT}
                """,
                "CREATE INDEX dashboard_sessions_expiry ON dashboard_sessions(expires_at)",
                // Recent sign-in attempts per key ("email:…" or "address:…"), for the sign-in
                // rate limit that holds across processes; rows older than the window are deleted.
                """
                CREATE TABLE dashboard_sign_in_attempts(
                    id {ID},
                    attempt_key TEXT NOT NULL,
                    attempted_at {INT} NOT NULL) {STRICT}
                """,
                "CREATE INDEX dashboard_sign_in_attempts_key ON dashboard_sign_in_attempts(attempt_key, attempted_at)",
            ]),
        // Wallet services: a wallet's own history, its bonus program memberships, and
        // the messages the operator asks every app to show.
        Migration(
            version: 7, name: "wallet services: history by wallet, bonus memberships, status messages",
            statements: [
                // A wallet's history pages by reference, newest first, without scanning every
                // merchant's transactions.
                "CREATE INDEX transactions_wallet ON transactions(wallet_id, reference)",
                // A wallet's explicit choice about a merchant's bonus program. No row: the wallet
                // takes part once it earns points (as before this version). 'left': it earns no
                // points there until it joins again, and leaving forfeited the points it held.
                """
                CREATE TABLE bonus_memberships(
                    merchant_id TEXT NOT NULL REFERENCES merchants(id),
                    wallet_id TEXT NOT NULL REFERENCES wallets(id),
                    state TEXT NOT NULL CHECK (state IN ('joined', 'left')),
                    changed_at {INT} NOT NULL,
                    PRIMARY KEY (merchant_id, wallet_id)) {STRICT}
                """,
                // What the operator asks every wallet app to show (`horizon-server messages`),
                // shown from starts_at until ends_at (NULL: until removed).
                """
                CREATE TABLE status_messages(
                    id {ID},
                    severity TEXT NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
                    title TEXT NOT NULL CHECK (length(title) > 0),
                    body TEXT NOT NULL,
                    starts_at {INT} NOT NULL,
                    ends_at {INT},
                    created_at {INT} NOT NULL) {STRICT}
                """,
            ]),
        // Cards and 3-D Secure
        Migration(
            version: 8, name: "payment cards, 3-D Secure challenges and the sandbox card processor",
            statements: [
                // A wallet's card as the server keeps it: the processor's token and what a person
                // needs to recognise the card. Never the number or the CVC.
                // `state` is 'challenge' until a required 3-D Secure challenge succeeds; a removed
                // card keeps its row (payments name it) but cannot pay or be listed.
                """
                CREATE TABLE payment_cards(
                    id TEXT PRIMARY KEY,
                    wallet_id TEXT NOT NULL REFERENCES wallets(id),
                    token TEXT NOT NULL UNIQUE,
                    brand TEXT NOT NULL CHECK (brand IN ('visa', 'mastercard', 'amex')),
                    last_four TEXT NOT NULL CHECK (length(last_four) = 4),
                    expiry_month {INT} NOT NULL CHECK (expiry_month BETWEEN 1 AND 12),
                    expiry_year {INT} NOT NULL,
                    cardholder TEXT NOT NULL,
                    name TEXT NOT NULL,
                    active {INT} NOT NULL CHECK (active IN (0, 1)),
                    state TEXT NOT NULL CHECK (state IN ('challenge', 'ready')),
                    created_at {INT} NOT NULL,
                    removed_at {INT}) {STRICT}
                """,
                "CREATE INDEX payment_cards_wallet ON payment_cards(wallet_id)",
                // A 3-D Secure challenge (the reference's MD / PaRes round trip). The decision is
                // written when the person submits the challenge page; `completed_at` when the
                // wallet finishes adding the card with the PaRes. In the database, so any server
                // process serves any step.
                """
                CREATE TABLE card_challenges(
                    md TEXT PRIMARY KEY,
                    card_id TEXT NOT NULL REFERENCES payment_cards(id),
                    created_at {INT} NOT NULL,
                    expires_at {INT} NOT NULL,
                    decision TEXT CHECK (decision IN ('approved', 'failed')),
                    pa_res TEXT,
                    decided_at {INT},
                    completed_at {INT}) {STRICT}
                """,
                "CREATE INDEX card_challenges_card ON card_challenges(card_id)",
                // Which card paid a payment (its processor charge has the payment id as its
                // idempotency key): what a refund goes back to.
                """
                CREATE TABLE card_payments(
                    payment_id {BYTES} PRIMARY KEY,
                    card_id TEXT NOT NULL REFERENCES payment_cards(id),
                    charge_key TEXT NOT NULL,
                    created_at {INT} NOT NULL) {STRICT}
                """,
                // The sandbox processor's own state (a real processor keeps this on its side):
                // what each token does when charged, and every charge, lost attempt and refund by
                // its idempotency key, so that several server processes and restarts agree.
                """
                CREATE TABLE sandbox_card_tokens(
                    token TEXT PRIMARY KEY,
                    behaviour TEXT NOT NULL,
                    created_at {INT} NOT NULL) {STRICT}
                """,
                """
                CREATE TABLE sandbox_card_charges(
                    idempotency_key TEXT PRIMARY KEY,
                    token TEXT NOT NULL REFERENCES sandbox_card_tokens(token),
                    amount {INT} NOT NULL CHECK (amount > 0),
                    currency TEXT NOT NULL CHECK (length(currency) = 3),
                    outcome TEXT NOT NULL CHECK (outcome IN ('charged', 'declined')),
                    decline_code TEXT,
                    created_at {INT} NOT NULL) {STRICT}
                """,
                """
                CREATE TABLE sandbox_card_lost_attempts(
                    idempotency_key TEXT PRIMARY KEY,
                    created_at {INT} NOT NULL) {STRICT}
                """,
                """
                CREATE TABLE sandbox_card_refunds(
                    idempotency_key TEXT PRIMARY KEY,
                    charge_key TEXT NOT NULL REFERENCES sandbox_card_charges(idempotency_key),
                    amount {INT} NOT NULL CHECK (amount > 0),
                    created_at {INT} NOT NULL) {STRICT}
                """,
            ]),
        Migration(
            version: 9, name: "daily tokens for offline payments",
            statements: [
                // Every daily token the server signed: what a wallet may spend
                // offline, so that settling offline payments can later be bounded by it. The
                // signed bytes are kept because a signature cannot be made again identically: a
                // wallet asking twice gets the very token it had. `balance_at_issue` and
                // `revocation_digest` tell whether a refresh has anything new to sign. A newer token
                // for the same wallet key and currency marks the older `superseded_at` (it stays
                // valid offline until it expires: the wallet may still hold it), so the current
                // token is known even when two are signed within one second.
                """
                CREATE TABLE daily_tokens(
                    token_id {BYTES} PRIMARY KEY CHECK (length(token_id) = 16),
                    wallet_id TEXT NOT NULL REFERENCES wallets(id),
                    wallet_key {BYTES} NOT NULL,
                    currency TEXT NOT NULL CHECK (length(currency) = 3),
                    allowance {INT} NOT NULL CHECK (allowance >= 0),
                    balance_at_issue {INT} NOT NULL,
                    revocation_digest {BYTES} NOT NULL,
                    issued_at {INT} NOT NULL,
                    expires_at {INT} NOT NULL CHECK (expires_at > issued_at AND expires_at - issued_at <= 86400),
                    superseded_at {INT},
                    token {BYTES} NOT NULL) {STRICT}
                """,
                "CREATE INDEX daily_tokens_wallet ON daily_tokens(wallet_id, currency, expires_at)",
            ]),
        // Offline settlement
        Migration(
            version: 10, name: "offline settlement: the offline columns of a payment",
            statements: [
                // A payment a terminal accepted offline: the daily token it was accepted under, when,
                // and whether it settled within the wallet's offline guarantee. All three are NULL
                // for a payment settled online, all three set for an offline one. (A wallet's
                // offline debt needs no new table: it is an external account of its own, see
                // `Ledger.offlineDebtOwner`.)
                "ALTER TABLE transactions ADD COLUMN offline_token_id {BYTES}",
                "ALTER TABLE transactions ADD COLUMN offline_accepted_at {INT}",
                "ALTER TABLE transactions ADD COLUMN offline_guaranteed {INT} CHECK (offline_guaranteed IN (0, 1))",
                "CREATE INDEX transactions_offline_token ON transactions(offline_token_id)",
            ]),
        // Less CPU per payment
        Migration(
            version: 11, name: "entries: the kind checked by comparisons, not a list",
            kind: .contract,  // rebuilds entries
            statements: [],
            dialectStatements: [
                // SQLite checks `kind IN (…)` of more than two values by building a temporary table
                // (a page cache of its own, allocated and freed) at every row it writes: every
                // payment's entry paid for it. The same rule as comparisons costs nothing of the
                // kind. The table is rebuilt with the same ids, as in version 5. PostgreSQL checks
                // a list without such a table, so it keeps its constraint.
                .sqlite: [
                    """
                    CREATE TABLE entries_v11(
                        id {ID},
                        kind TEXT NOT NULL
                            CHECK (kind = 'payment' OR kind = 'deposit' OR kind = 'enrollment' OR kind = 'refund'),
                        created_at {INT} NOT NULL) {STRICT}
                    """,
                    "INSERT INTO entries_v11(id, kind, created_at) SELECT id, kind, created_at FROM entries",
                    "DROP TABLE entries",
                    "ALTER TABLE entries_v11 RENAME TO entries",
                ]
            ]),
        Migration(
            version: 12, name: "payment claims: one payment id, one way to pay",
            statements: [
                // Who holds a payment id, and how it pays: a card payment claims its id here in a
                // transaction of its own before the card processor is called; every execution
                // (from the balance, a redemption, an offline payment, a card) inserts or checks
                // this row in its own transaction, so the primary key lets only one way of paying
                // take the id, on either store. `card_id` is NULL for anything but a card. The
                // terms are kept so that recovery can store a decline for a claim that was
                // charged and never settled. `state`: 'open' (claimed, not executed), 'settled'
                // (its transaction is stored), 'closed' (recovery found nothing charged; the same
                // Confirm may claim it again), 'refunding' and 'refunded' (recovery refunded an
                // abandoned charge and stored a decline).
                """
                CREATE TABLE payment_claims(
                    payment_id {BYTES} PRIMARY KEY,
                    merchant_id TEXT NOT NULL,
                    wallet_key {BYTES} NOT NULL,
                    wallet_id TEXT,
                    card_id TEXT,
                    session_id {INT} NOT NULL,
                    terminal_key_id {BYTES} NOT NULL,
                    transaction_type {INT} NOT NULL,
                    item TEXT NOT NULL,
                    quantity {INT} NOT NULL,
                    amount {INT} NOT NULL,
                    tip {INT} NOT NULL,
                    currency TEXT NOT NULL CHECK (length(currency) = 3),
                    register_user TEXT NOT NULL,
                    content_digest {BYTES} NOT NULL,
                    state TEXT NOT NULL
                        CHECK (state = 'open' OR state = 'settled' OR state = 'closed' OR state = 'refunding'
                            OR state = 'refunded'),
                    created_at {INT} NOT NULL,
                    updated_at {INT} NOT NULL) {STRICT}
                """,
                // Only the claims recovery looks at: a settled claim (every payment from the
                // balance) costs no index entry.
                """
                CREATE INDEX payment_claims_pending ON payment_claims(updated_at)
                WHERE state = 'open' OR state = 'refunding'
                """,
            ]),
        Migration(
            version: 13, name: "the gateway's replay window, shared by every server process",
            statements: [
                // The encapsulated key of each sealed request the gateway served, until its date
                // leaves the window (then the date check refuses the request anyway, and the row
                // is deleted by age). In the database, so another process or a restart refuses a
                // replay too.
                """
                CREATE TABLE gateway_replays(
                    request_key {BYTES} PRIMARY KEY,
                    expires_at {INT} NOT NULL) {STRICT}
                """,
                "CREATE INDEX gateway_replays_expiry ON gateway_replays(expires_at)",
            ]),
        Migration(
            version: 14, name: "request limits and sign-in back-off, shared by every server process",
            statements: [
                // Requests per client (a signing key, an admin session or an address) in fixed
                // windows: one upsert per request counts it, rows are deleted by age.
                """
                CREATE TABLE request_rate_windows(
                    rate_key TEXT NOT NULL,
                    window_start {INT} NOT NULL,
                    requests {INT} NOT NULL CHECK (requests >= 0),
                    PRIMARY KEY (rate_key, window_start)) {STRICT}
                """,
                "CREATE INDEX request_rate_windows_age ON request_rate_windows(window_start)",
                // Wrong sign-ins per e-mail (known or not) and per client address: the back-off
                // each carries, so a guesser waits longer and longer, up to a cap, and nobody is
                // locked out for good. Replaces merchant_logins' own lock.
                """
                CREATE TABLE sign_in_backoff(
                    backoff_key TEXT PRIMARY KEY,
                    failures {INT} NOT NULL CHECK (failures >= 0),
                    blocked_until {INT} NOT NULL,
                    last_failure_at {INT} NOT NULL) {STRICT}
                """,
                "CREATE INDEX sign_in_backoff_age ON sign_in_backoff(last_failure_at)",
            ]),
        Migration(
            version: 15, name: "a code per channel; the outbox forgets codes after use or expiry",
            kind: .contract,  // expires unused codes and empties the outbox
            statements: [
                // A registration's e-mail code, hashed like `code_hash` (which is then the SMS
                // code's): each channel proves itself. NULL when one channel only was sent a code.
                "ALTER TABLE wallet_registrations ADD COLUMN email_code_hash {BYTES}",
                // An outbox message carrying a code names its registration and expiry, so the
                // code is blanked when the registration is used or locked and the row deleted
                // once it expires.
                "ALTER TABLE outbox ADD COLUMN registration_id TEXT",
                "ALTER TABLE outbox ADD COLUMN expires_at {INT}",
                "CREATE INDEX outbox_registration ON outbox(registration_id)",
                "CREATE INDEX outbox_expiry ON outbox(expires_at)",
                // Codes from before went to both channels alike: no longer accepted, and no
                // longer kept.
                "UPDATE wallet_registrations SET expires_at = 0 WHERE used_at IS NULL",
                "DELETE FROM outbox",
            ]),
        Migration(
            version: 16, name: "the merchant's time zone, for the days its dashboard counts in",
            statements: [
                // An IANA name such as Europe/Berlin; merchants from before count in UTC, as
                // their dashboard did.
                "ALTER TABLE merchants ADD COLUMN time_zone TEXT NOT NULL DEFAULT 'UTC'"
            ]),
        Migration(
            version: 17, name: "secret API keys for a merchant's own systems, and payment intents",
            statements: [
                // A POS system's secret key. Only the SHA-256 of the secret is kept (the secret is
                // shown once), with its first and last characters so a person can tell keys
                // apart. Scopes are space-separated names. A revoked key (or one rolled, which
                // revokes it and names its successor) is kept for the list and refused.
                """
                CREATE TABLE api_keys(
                    id TEXT PRIMARY KEY,
                    merchant_id TEXT NOT NULL REFERENCES merchants(id),
                    name TEXT NOT NULL,
                    secret_hash {BYTES} NOT NULL UNIQUE,
                    secret_prefix TEXT NOT NULL,
                    secret_last4 TEXT NOT NULL,
                    scopes TEXT NOT NULL,
                    created_at {INT} NOT NULL,
                    last_used_at {INT},
                    revoked_at {INT},
                    replaced_by TEXT) {STRICT}
                """,
                "CREATE INDEX api_keys_merchant ON api_keys(merchant_id, created_at)",
                // A payment a merchant's system asked for: its id is the payment's id end to end.
                // `state` is what the intent itself records (the result of its payment is the
                // transaction with that payment id); `idempotency_key` and `request_digest` make a
                // retried create replay and a reused key with other terms a conflict.
                """
                CREATE TABLE payment_intents(
                    payment_id {BYTES} PRIMARY KEY,
                    merchant_id TEXT NOT NULL REFERENCES merchants(id),
                    idempotency_key TEXT NOT NULL,
                    request_digest {BYTES} NOT NULL,
                    order_reference TEXT NOT NULL,
                    amount {INT} NOT NULL CHECK (amount > 0),
                    currency TEXT NOT NULL CHECK (length(currency) = 3),
                    metadata TEXT NOT NULL,
                    terminal_id TEXT,
                    state TEXT NOT NULL,
                    created_at {INT} NOT NULL,
                    expires_at {INT} NOT NULL,
                    canceled_at {INT},
                    UNIQUE (merchant_id, idempotency_key),
                    CHECK (state IN ('requires_collection', 'collecting', 'processed', 'canceled'))) {STRICT}
                """,
                "CREATE INDEX payment_intents_reference ON payment_intents(merchant_id, order_reference, created_at)",
                // The order reference of the intent a payment was made for, written with the payment
                // so every list, receipt and export reads it from the transaction itself.
                "ALTER TABLE transactions ADD COLUMN order_reference TEXT",
            ]),
        Migration(
            version: 18, name: "the outbox delivers: mail and SMS handed over after the commit, retried",
            statements: [
                // When the next delivery attempt is due; NULL when none is (the sandbox, where the
                // outbox is the delivery, or delivered, or given up). Several server processes
                // share the outbox: a process claims a message by moving its due time.
                "ALTER TABLE outbox ADD COLUMN deliver_at {INT}",
                "ALTER TABLE outbox ADD COLUMN delivered_at {INT}",
                "ALTER TABLE outbox ADD COLUMN delivery_attempts {INT} NOT NULL DEFAULT 0",
                "ALTER TABLE outbox ADD COLUMN delivery_error TEXT",
                "CREATE INDEX outbox_due ON outbox(deliver_at)",
            ]),
        Migration(
            version: 19, name: "invitation codes; a registration proven by a PUK and an activation link",
            statements: [
                // An invitation the operator issued. Only the code's hash is kept (the code is
                // shown once), with its first characters so the operator can tell codes apart.
                // `uses` never passes `maximum_uses`; the bonus is credited on a wallet's first
                // top-up.
                """
                CREATE TABLE invitations(
                    id TEXT PRIMARY KEY,
                    code_hash {BYTES} NOT NULL UNIQUE,
                    hint TEXT NOT NULL,
                    maximum_uses {INT} NOT NULL CHECK (maximum_uses >= 1),
                    uses {INT} NOT NULL CHECK (uses >= 0 AND uses <= maximum_uses),
                    bonus_amount {INT} CHECK (bonus_amount > 0),
                    bonus_currency TEXT CHECK (length(bonus_currency) = 3),
                    note TEXT NOT NULL,
                    created_at {INT} NOT NULL,
                    revoked_at {INT}) {STRICT}
                """,
                // The bonus a wallet registered with an invitation is owed until its first top-up.
                """
                CREATE TABLE invitation_bonuses(
                    wallet_id TEXT PRIMARY KEY REFERENCES wallets(id),
                    invitation_id TEXT NOT NULL REFERENCES invitations(id),
                    amount {INT} NOT NULL CHECK (amount > 0),
                    currency TEXT NOT NULL CHECK (length(currency) = 3),
                    granted_at {INT}) {STRICT}
                """,
                "ALTER TABLE wallet_registrations ADD COLUMN invitation_id TEXT REFERENCES invitations(id)",
                // A registration proven by link: the mailed link's token hashed like a code, its
                // own expiry and wrong-try counter; each channel's proof recorded when it comes,
                // in either order. NULL token: proven by codes.
                "ALTER TABLE wallet_registrations ADD COLUMN link_token_hash {BYTES}",
                "ALTER TABLE wallet_registrations ADD COLUMN link_expires_at {INT}",
                "ALTER TABLE wallet_registrations ADD COLUMN link_failed_attempts {INT} NOT NULL DEFAULT 0",
                "ALTER TABLE wallet_registrations ADD COLUMN puk_verified_at {INT}",
                "ALTER TABLE wallet_registrations ADD COLUMN email_confirmed_at {INT}",
            ]),
        Migration(
            version: 20, name: "webhooks: a merchant's endpoints, its events and their deliveries",
            statements: [
                // Where a merchant's system hears of events. `secret` is kept as it is: the server
                // signs every delivery with it, so a hash would not do (Stripe keeps endpoint
                // secrets recoverable for the same reason); it only lets its holder sign webhooks
                // to this merchant, never move money. A rolled secret stays valid for signing
                // beside the new one until `previous_secret_expires_at`. A deleted endpoint is
                // kept for its deliveries' history, without its secrets.
                """
                CREATE TABLE webhook_endpoints(
                    id TEXT PRIMARY KEY,
                    merchant_id TEXT NOT NULL REFERENCES merchants(id),
                    url TEXT NOT NULL,
                    description TEXT NOT NULL,
                    event_types TEXT NOT NULL,
                    secret TEXT NOT NULL,
                    previous_secret TEXT,
                    previous_secret_expires_at {INT},
                    created_at {INT} NOT NULL,
                    deleted_at {INT}) {STRICT}
                """,
                "CREATE INDEX webhook_endpoints_merchant ON webhook_endpoints(merchant_id, created_at)",
                // What happened, once, with the body every endpoint receives for it.
                """
                CREATE TABLE webhook_events(
                    id TEXT PRIMARY KEY,
                    merchant_id TEXT NOT NULL REFERENCES merchants(id),
                    event_type TEXT NOT NULL,
                    body TEXT NOT NULL,
                    created_at {INT} NOT NULL) {STRICT}
                """,
                // One event on its way to one endpoint: the outbox of webhooks, written in the
                // transaction of the change it reports. `due_at` is when the next attempt may
                // start (NULL: delivered or given up); a process claims a delivery by moving it,
                // so two processes never send one at the same moment. Retries stop at `give_up_at`.
                """
                CREATE TABLE webhook_deliveries(
                    id {ID},
                    event_id TEXT NOT NULL REFERENCES webhook_events(id),
                    endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints(id),
                    merchant_id TEXT NOT NULL REFERENCES merchants(id),
                    due_at {INT},
                    give_up_at {INT} NOT NULL,
                    attempts {INT} NOT NULL DEFAULT 0,
                    delivered_at {INT},
                    created_at {INT} NOT NULL,
                    UNIQUE (event_id, endpoint_id)) {STRICT}
                """,
                "CREATE INDEX webhook_deliveries_due ON webhook_deliveries(due_at)",
                "CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries(endpoint_id, created_at)",
                // Each attempt's answer: the status (NULL when none came), the start of the body,
                // how long it took, or why nothing came back.
                """
                CREATE TABLE webhook_attempts(
                    id {ID},
                    delivery_id {INT} NOT NULL REFERENCES webhook_deliveries(id),
                    attempted_at {INT} NOT NULL,
                    status {INT},
                    response_body TEXT NOT NULL,
                    latency_ms {INT} NOT NULL,
                    error TEXT) {STRICT}
                """,
                "CREATE INDEX webhook_attempts_delivery ON webhook_attempts(delivery_id, id)",
            ]),
        Migration(
            version: 21, name: "the wallet PIN counted by the server; pinless wallets",
            statements: [
                // A wallet's PIN as the server checks it. The device keeps its payment key
                // encrypted under its PIN and `share` together, so a copy of the device's file
                // cannot be opened or tested offline: each guess is a proof sent here, signed by
                // the device key (which is not the payment key) and verified against `pin_key`
                // (derived from the PIN on the device). Wrong proofs are counted here: a back-off,
                // then blocked until the account is restored to a new key.
                """
                CREATE TABLE wallet_pins(
                    wallet_id TEXT PRIMARY KEY REFERENCES wallets(id),
                    device_key {BYTES} NOT NULL UNIQUE,
                    pin_key {BYTES} NOT NULL,
                    share {BYTES} NOT NULL,
                    failures {INT} NOT NULL CHECK (failures >= 0),
                    blocked_until {INT} NOT NULL,
                    set_at {INT} NOT NULL) {STRICT}
                """,
                // 1: the wallet said it keeps its key without a PIN; its payments are limited.
                "ALTER TABLE wallets ADD COLUMN pinless {INT} NOT NULL DEFAULT 0",
            ]),
        Migration(
            version: 22, name: "terminal connections: which terminals keep a connection for payment intents",
            statements: [
                // The one connection each terminal keeps to some server process for its payment
                // intents, so any process can tell whether a terminal is connected: refreshed by
                // its process while open, replaced by a newer one, forgotten once stale.
                """
                CREATE TABLE terminal_connections(
                    terminal_id TEXT PRIMARY KEY REFERENCES terminals(id),
                    connection_id TEXT NOT NULL,
                    seen_at {INT} NOT NULL) {STRICT}
                """,
                // Each server process reads the intents waiting for its connected terminals.
                "CREATE INDEX payment_intents_terminal ON payment_intents(terminal_id, state)",
            ]),
    ]

    /// Brings the store's schema to `target` (the current version unless told otherwise, which
    /// only tests of the migration path do), all pending steps in one transaction: a step that
    /// fails leaves the database at the version before the run. Returns the version reached.
    @discardableResult
    public static func migrate(_ store: any LedgerStore, to target: Int? = nil, at time: Int64)
        async throws(LedgerError) -> Int
    {
        let target = target ?? currentVersion
        guard (0...currentVersion).contains(target) else {
            throw .invalidArgument("schema version \(target) is not one this program knows (0 to \(currentVersion))")
        }
        let dialect = store.dialect
        return try await store.migrationTransaction { db in
            if let lock = dialect.migrationLock { try await db.query(lock) }
            try await db.query(
                dialect.render(
                    """
                    CREATE TABLE IF NOT EXISTS schema_migrations(
                        version {INT} PRIMARY KEY,
                        name TEXT NOT NULL,
                        applied_at {INT} NOT NULL) {STRICT}
                    """))
            try await db.query(
                dialect.render(
                    """
                    CREATE TABLE IF NOT EXISTS schema_step_kinds(
                        version {INT} PRIMARY KEY,
                        kind TEXT NOT NULL CHECK (kind IN ('expand', 'contract'))) {STRICT}
                    """))
            let found = try await version(in: db)
            if found > currentVersion {
                guard try await onlyExpanded(after: currentVersion, in: db) else {
                    throw LedgerError.schemaTooNew(found: found, supported: currentVersion)
                }
                return found
            }
            for migration in migrations where migration.version > found && migration.version <= target {
                for statement in migration.statements(for: dialect) {
                    do {
                        try await db.query(dialect.render(statement))
                    } catch LedgerError.contention(let attempts) {
                        // A conflict with another process is retried whole, not reported as a broken step.
                        throw LedgerError.contention(attempts: attempts)
                    } catch {
                        throw LedgerError.migrationFailed(
                            version: migration.version, name: migration.name, reason: "\(error)")
                    }
                }
                try await db.query(
                    "INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)",
                    [.integer(Int64(migration.version)), .text(migration.name), .integer(time)])
                try await db.query(
                    "INSERT INTO schema_step_kinds(version, kind) VALUES (?, ?)",
                    [.integer(Int64(migration.version)), .text(migration.kind.rawValue)])
            }
            return try await version(in: db)
        }
    }

    /// Whether every applied step after `version` is recorded as an expand step.
    static func onlyExpanded(after version: Int, in db: any SQLTransaction) async throws(LedgerError) -> Bool {
        let row = try await db.query(
            """
            SELECT CAST(COUNT(*) AS BIGINT) AS steps,
                CAST(COALESCE(SUM(CASE WHEN k.kind = 'expand' THEN 1 ELSE 0 END), 0) AS BIGINT) AS expanding
            FROM schema_migrations m LEFT JOIN schema_step_kinds k ON k.version = m.version
            WHERE m.version > ?
            """, [.integer(Int64(version))]
        ).first
        guard let row else { throw .corruptRow(column: "steps", reason: "no row from COUNT(*)") }
        return try row.integer("steps") == row.integer("expanding")
    }

    /// The highest applied version (0 for a new database).
    static func version(in db: any SQLTransaction) async throws(LedgerError) -> Int {
        let row = try await db.query(
            "SELECT CAST(COALESCE(MAX(version), 0) AS BIGINT) AS version FROM schema_migrations"
        )
        .first
        guard let row else { throw .corruptRow(column: "version", reason: "no row from MAX(version)") }
        return Int(try row.integer("version"))
    }
}
