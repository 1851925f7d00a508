-- A released schema with its rows; never edited (see SchemaFixture).
CREATE TABLE schema_migrations(
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at INTEGER NOT NULL) STRICT;
CREATE TABLE merchants(
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL CHECK (length(name) > 0),
    currency TEXT NOT NULL CHECK (length(currency) = 3),
    admin_email TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL, bonus_points_per_major_unit INTEGER NOT NULL DEFAULT 1
    CHECK (bonus_points_per_major_unit BETWEEN 0 AND 1000000), time_zone TEXT NOT NULL DEFAULT 'UTC') STRICT;
CREATE TABLE wallets(
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created_at INTEGER NOT NULL, email TEXT, phone TEXT, pinless INTEGER NOT NULL DEFAULT 0) STRICT;
CREATE TABLE wallet_keys(
    public_key BLOB PRIMARY KEY,
    wallet_id TEXT NOT NULL REFERENCES wallets(id),
    added_at INTEGER NOT NULL,
    revoked_at INTEGER) STRICT;
CREATE TABLE accounts(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL CHECK (kind IN ('wallet', 'merchant', 'external')),
    owner_id TEXT NOT NULL,
    currency TEXT NOT NULL CHECK (length(currency) = 3),
    balance INTEGER NOT NULL,
    UNIQUE (kind, owner_id, currency),
    UNIQUE (id, currency),
    CHECK (kind = 'external' OR balance >= 0)) STRICT;
CREATE TABLE postings(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    entry_id INTEGER NOT NULL REFERENCES entries(id),
    account_id INTEGER NOT NULL,
    currency TEXT NOT NULL,
    amount INTEGER NOT NULL CHECK (amount <> 0),
    FOREIGN KEY (account_id, currency) REFERENCES accounts(id, currency)) STRICT;
CREATE TABLE register_users(
    merchant_id TEXT NOT NULL REFERENCES merchants(id),
    user_id TEXT NOT NULL CHECK (length(user_id) > 0),
    name TEXT NOT NULL,
    added_at INTEGER NOT NULL,
    PRIMARY KEY (merchant_id, user_id)) STRICT;
CREATE TABLE transactions(
    reference INTEGER PRIMARY KEY AUTOINCREMENT,
    payment_id BLOB NOT NULL UNIQUE,
    merchant_id TEXT NOT NULL REFERENCES merchants(id),
    transaction_type INTEGER NOT NULL,
    item TEXT NOT NULL,
    quantity INTEGER NOT NULL,
    session_id INTEGER NOT NULL,
    wallet_key BLOB NOT NULL,
    wallet_id TEXT REFERENCES wallets(id),
    terminal_key_id BLOB NOT NULL,
    amount INTEGER NOT NULL CHECK (amount >= 0),
    tip INTEGER NOT NULL CHECK (tip >= 0),
    currency TEXT NOT NULL,
    register_user TEXT NOT NULL,
    content_digest BLOB NOT NULL,
    outcome TEXT NOT NULL CHECK (outcome IN ('approved', 'declined')),
    decline_code INTEGER,
    decline_reason TEXT,
    bonus_earned INTEGER NOT NULL,
    bonus_balance INTEGER NOT NULL,
    entry_id INTEGER REFERENCES entries(id),
    settled_at INTEGER NOT NULL, offline_token_id BLOB, offline_accepted_at INTEGER, offline_guaranteed INTEGER CHECK (offline_guaranteed IN (0, 1)), order_reference TEXT) STRICT;
CREATE TABLE bonus_points(
    merchant_id TEXT NOT NULL REFERENCES merchants(id),
    wallet_id TEXT NOT NULL REFERENCES wallets(id),
    points INTEGER NOT NULL CHECK (points >= 0),
    PRIMARY KEY (merchant_id, wallet_id)) STRICT;
CREATE TABLE gold_memberships(
    merchant_id TEXT NOT NULL REFERENCES merchants(id),
    wallet_id TEXT NOT NULL REFERENCES wallets(id),
    tier TEXT NOT NULL,
    valid_from INTEGER NOT NULL,
    valid_until INTEGER NOT NULL,
    benefit_period INTEGER NOT NULL CHECK (benefit_period > 0),
    last_benefit_period INTEGER,
    PRIMARY KEY (merchant_id, wallet_id)) STRICT;
CREATE TABLE coupons(
    merchant_id TEXT NOT NULL REFERENCES merchants(id),
    code TEXT NOT NULL,
    wallet_id TEXT NOT NULL REFERENCES wallets(id),
    description TEXT NOT NULL,
    value INTEGER NOT NULL CHECK (value >= 0),
    expires_at INTEGER NOT NULL,
    redeemed_at INTEGER,
    redemption_id BLOB,
    PRIMARY KEY (merchant_id, code)) STRICT;
CREATE TABLE merchant_logins(
    merchant_id TEXT PRIMARY KEY REFERENCES merchants(id),
    password_hash TEXT NOT NULL,
    failed_attempts INTEGER NOT NULL CHECK (failed_attempts >= 0),
    locked_until INTEGER NOT NULL) STRICT;
CREATE TABLE terminals(
    id TEXT PRIMARY KEY,
    merchant_id TEXT NOT NULL REFERENCES merchants(id),
    label TEXT NOT NULL CHECK (length(label) > 0),
    public_key BLOB NOT NULL UNIQUE,
    key_id BLOB NOT NULL,
    activated_at INTEGER NOT NULL,
    credential_expires_at INTEGER NOT NULL,
    revoked_at INTEGER) STRICT;
CREATE TABLE outbox(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL CHECK (channel IN ('sms', 'email')),
    recipient TEXT NOT NULL,
    subject TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at INTEGER NOT NULL, registration_id TEXT, expires_at INTEGER, deliver_at INTEGER, delivered_at INTEGER, delivery_attempts INTEGER NOT NULL DEFAULT 0, delivery_error TEXT) STRICT;
CREATE TABLE request_nonces(
    public_key BLOB NOT NULL,
    nonce TEXT NOT NULL,
    seen_at INTEGER NOT NULL,
    PRIMARY KEY (public_key, nonce)) STRICT;
CREATE TABLE wallet_registrations(
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('registration', 'restoration')),
    name TEXT NOT NULL,
    email TEXT NOT NULL,
    phone TEXT NOT NULL,
    public_key BLOB NOT NULL,
    wallet_id TEXT REFERENCES wallets(id),
    code_hash BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    failed_attempts INTEGER NOT NULL CHECK (failed_attempts >= 0),
    used_at INTEGER, email_code_hash BLOB, invitation_id TEXT REFERENCES invitations(id), link_token_hash BLOB, link_expires_at INTEGER, link_failed_attempts INTEGER NOT NULL DEFAULT 0, puk_verified_at INTEGER, email_confirmed_at INTEGER) STRICT;
CREATE TABLE refunds(
    reference INTEGER PRIMARY KEY AUTOINCREMENT,
    merchant_id TEXT NOT NULL REFERENCES merchants(id),
    refund_id TEXT NOT NULL CHECK (length(refund_id) BETWEEN 1 AND 64),
    payment_id BLOB NOT NULL REFERENCES transactions(payment_id),
    wallet_id TEXT NOT NULL REFERENCES wallets(id),
    amount INTEGER NOT NULL CHECK (amount > 0),
    currency TEXT NOT NULL CHECK (length(currency) = 3),
    destination TEXT NOT NULL,
    destination_reference TEXT,
    bonus_reversed INTEGER NOT NULL CHECK (bonus_reversed >= 0),
    entry_id INTEGER NOT NULL UNIQUE REFERENCES entries(id),
    created_at INTEGER NOT NULL,
    UNIQUE (merchant_id, refund_id)) STRICT;
CREATE TABLE dashboard_sessions(
    token_hash BLOB PRIMARY KEY,
    merchant_id TEXT NOT NULL REFERENCES merchants(id),
    csrf_secret TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL) STRICT;
CREATE TABLE dashboard_sign_in_attempts(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    attempt_key TEXT NOT NULL,
    attempted_at INTEGER NOT NULL) STRICT;
CREATE TABLE bonus_memberships(
    merchant_id TEXT NOT NULL REFERENCES merchants(id),
    wallet_id TEXT NOT NULL REFERENCES wallets(id),
    state TEXT NOT NULL CHECK (state IN ('joined', 'left')),
    changed_at INTEGER NOT NULL,
    PRIMARY KEY (merchant_id, wallet_id)) STRICT;
CREATE TABLE status_messages(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    severity TEXT NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
    title TEXT NOT NULL CHECK (length(title) > 0),
    body TEXT NOT NULL,
    starts_at INTEGER NOT NULL,
    ends_at INTEGER,
    created_at INTEGER NOT NULL) STRICT;
CREATE TABLE payment_cards(
    id TEXT PRIMARY KEY,
    wallet_id TEXT NOT NULL REFERENCES wallets(id),
    token TEXT NOT NULL UNIQUE,
    brand TEXT NOT NULL CHECK (brand IN ('visa', 'mastercard', 'amex')),
    last_four TEXT NOT NULL CHECK (length(last_four) = 4),
    expiry_month INTEGER NOT NULL CHECK (expiry_month BETWEEN 1 AND 12),
    expiry_year INTEGER NOT NULL,
    cardholder TEXT NOT NULL,
    name TEXT NOT NULL,
    active INTEGER NOT NULL CHECK (active IN (0, 1)),
    state TEXT NOT NULL CHECK (state IN ('challenge', 'ready')),
    created_at INTEGER NOT NULL,
    removed_at INTEGER) STRICT;
CREATE TABLE card_challenges(
    md TEXT PRIMARY KEY,
    card_id TEXT NOT NULL REFERENCES payment_cards(id),
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    decision TEXT CHECK (decision IN ('approved', 'failed')),
    pa_res TEXT,
    decided_at INTEGER,
    completed_at INTEGER) STRICT;
CREATE TABLE card_payments(
    payment_id BLOB PRIMARY KEY,
    card_id TEXT NOT NULL REFERENCES payment_cards(id),
    charge_key TEXT NOT NULL,
    created_at INTEGER NOT NULL) STRICT;
CREATE TABLE sandbox_card_tokens(
    token TEXT PRIMARY KEY,
    behaviour TEXT NOT NULL,
    created_at INTEGER NOT NULL) STRICT;
CREATE TABLE sandbox_card_charges(
    idempotency_key TEXT PRIMARY KEY,
    token TEXT NOT NULL REFERENCES sandbox_card_tokens(token),
    amount INTEGER NOT NULL CHECK (amount > 0),
    currency TEXT NOT NULL CHECK (length(currency) = 3),
    outcome TEXT NOT NULL CHECK (outcome IN ('charged', 'declined')),
    decline_code TEXT,
    created_at INTEGER NOT NULL) STRICT;
CREATE TABLE sandbox_card_lost_attempts(
    idempotency_key TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL) STRICT;
CREATE TABLE sandbox_card_refunds(
    idempotency_key TEXT PRIMARY KEY,
    charge_key TEXT NOT NULL REFERENCES sandbox_card_charges(idempotency_key),
    amount INTEGER NOT NULL CHECK (amount > 0),
    created_at INTEGER NOT NULL) STRICT;
CREATE TABLE daily_tokens(
    token_id BLOB PRIMARY KEY CHECK (length(token_id) = 16),
    wallet_id TEXT NOT NULL REFERENCES wallets(id),
    wallet_key BLOB NOT NULL,
    currency TEXT NOT NULL CHECK (length(currency) = 3),
    allowance INTEGER NOT NULL CHECK (allowance >= 0),
    balance_at_issue INTEGER NOT NULL,
    revocation_digest BLOB NOT NULL,
    issued_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL CHECK (expires_at > issued_at AND expires_at - issued_at <= 86400),
    superseded_at INTEGER,
    token BLOB NOT NULL) STRICT;
CREATE TABLE "entries"(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL
        CHECK (kind = 'payment' OR kind = 'deposit' OR kind = 'enrollment' OR kind = 'refund'),
    created_at INTEGER NOT NULL) STRICT;
CREATE TABLE payment_claims(
    payment_id BLOB PRIMARY KEY,
    merchant_id TEXT NOT NULL,
    wallet_key BLOB NOT NULL,
    wallet_id TEXT,
    card_id TEXT,
    session_id INTEGER NOT NULL,
    terminal_key_id BLOB NOT NULL,
    transaction_type INTEGER NOT NULL,
    item TEXT NOT NULL,
    quantity INTEGER NOT NULL,
    amount INTEGER NOT NULL,
    tip INTEGER NOT NULL,
    currency TEXT NOT NULL CHECK (length(currency) = 3),
    register_user TEXT NOT NULL,
    content_digest BLOB NOT NULL,
    state TEXT NOT NULL
        CHECK (state = 'open' OR state = 'settled' OR state = 'closed' OR state = 'refunding'
            OR state = 'refunded'),
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL) STRICT;
CREATE TABLE gateway_replays(
    request_key BLOB PRIMARY KEY,
    expires_at INTEGER NOT NULL) STRICT;
CREATE TABLE request_rate_windows(
    rate_key TEXT NOT NULL,
    window_start INTEGER NOT NULL,
    requests INTEGER NOT NULL CHECK (requests >= 0),
    PRIMARY KEY (rate_key, window_start)) STRICT;
CREATE TABLE sign_in_backoff(
    backoff_key TEXT PRIMARY KEY,
    failures INTEGER NOT NULL CHECK (failures >= 0),
    blocked_until INTEGER NOT NULL,
    last_failure_at INTEGER NOT NULL) STRICT;
CREATE TABLE api_keys(
    id TEXT PRIMARY KEY,
    merchant_id TEXT NOT NULL REFERENCES merchants(id),
    name TEXT NOT NULL,
    secret_hash BLOB NOT NULL UNIQUE,
    secret_prefix TEXT NOT NULL,
    secret_last4 TEXT NOT NULL,
    scopes TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at INTEGER,
    replaced_by TEXT) STRICT;
CREATE TABLE payment_intents(
    payment_id BLOB PRIMARY KEY,
    merchant_id TEXT NOT NULL REFERENCES merchants(id),
    idempotency_key TEXT NOT NULL,
    request_digest BLOB NOT NULL,
    order_reference TEXT NOT NULL,
    amount INTEGER NOT NULL CHECK (amount > 0),
    currency TEXT NOT NULL CHECK (length(currency) = 3),
    metadata TEXT NOT NULL,
    terminal_id TEXT,
    state TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    canceled_at INTEGER,
    UNIQUE (merchant_id, idempotency_key),
    CHECK (state IN ('requires_collection', 'collecting', 'processed', 'canceled'))) STRICT;
CREATE TABLE invitations(
    id TEXT PRIMARY KEY,
    code_hash BLOB NOT NULL UNIQUE,
    hint TEXT NOT NULL,
    maximum_uses INTEGER NOT NULL CHECK (maximum_uses >= 1),
    uses INTEGER NOT NULL CHECK (uses >= 0 AND uses <= maximum_uses),
    bonus_amount INTEGER CHECK (bonus_amount > 0),
    bonus_currency TEXT CHECK (length(bonus_currency) = 3),
    note TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER) STRICT;
CREATE TABLE invitation_bonuses(
    wallet_id TEXT PRIMARY KEY REFERENCES wallets(id),
    invitation_id TEXT NOT NULL REFERENCES invitations(id),
    amount INTEGER NOT NULL CHECK (amount > 0),
    currency TEXT NOT NULL CHECK (length(currency) = 3),
    granted_at INTEGER) STRICT;
CREATE TABLE webhook_endpoints(
    id TEXT PRIMARY KEY,
    merchant_id TEXT NOT NULL REFERENCES merchants(id),
    url TEXT NOT NULL,
    description TEXT NOT NULL,
    event_types TEXT NOT NULL,
    secret TEXT NOT NULL,
    previous_secret TEXT,
    previous_secret_expires_at INTEGER,
    created_at INTEGER NOT NULL,
    deleted_at INTEGER) STRICT;
CREATE TABLE webhook_events(
    id TEXT PRIMARY KEY,
    merchant_id TEXT NOT NULL REFERENCES merchants(id),
    event_type TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at INTEGER NOT NULL) STRICT;
CREATE TABLE webhook_deliveries(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id TEXT NOT NULL REFERENCES webhook_events(id),
    endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints(id),
    merchant_id TEXT NOT NULL REFERENCES merchants(id),
    due_at INTEGER,
    give_up_at INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    delivered_at INTEGER,
    created_at INTEGER NOT NULL,
    UNIQUE (event_id, endpoint_id)) STRICT;
CREATE TABLE webhook_attempts(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id INTEGER NOT NULL REFERENCES webhook_deliveries(id),
    attempted_at INTEGER NOT NULL,
    status INTEGER,
    response_body TEXT NOT NULL,
    latency_ms INTEGER NOT NULL,
    error TEXT) STRICT;
CREATE TABLE wallet_pins(
    wallet_id TEXT PRIMARY KEY REFERENCES wallets(id),
    device_key BLOB NOT NULL UNIQUE,
    pin_key BLOB NOT NULL,
    share BLOB NOT NULL,
    failures INTEGER NOT NULL CHECK (failures >= 0),
    blocked_until INTEGER NOT NULL,
    set_at INTEGER NOT NULL) STRICT;
CREATE TABLE terminal_connections(
    terminal_id TEXT PRIMARY KEY REFERENCES terminals(id),
    connection_id TEXT NOT NULL,
    seen_at INTEGER NOT NULL) STRICT;
CREATE INDEX wallet_keys_wallet ON wallet_keys(wallet_id);
CREATE INDEX postings_entry ON postings(entry_id);
CREATE INDEX postings_account ON postings(account_id);
CREATE INDEX transactions_merchant ON transactions(merchant_id, reference);
CREATE INDEX terminals_merchant ON terminals(merchant_id);
CREATE INDEX request_nonces_seen ON request_nonces(seen_at);
CREATE UNIQUE INDEX wallets_email ON wallets(email);
CREATE INDEX wallet_registrations_expiry ON wallet_registrations(expires_at);
CREATE INDEX wallet_registrations_email ON wallet_registrations(email, created_at);
CREATE INDEX wallet_registrations_phone ON wallet_registrations(phone, created_at);
CREATE INDEX refunds_payment ON refunds(payment_id, reference);
CREATE INDEX dashboard_sessions_expiry ON dashboard_sessions(expires_at);
CREATE INDEX dashboard_sign_in_attempts_key ON dashboard_sign_in_attempts(attempt_key, attempted_at);
CREATE INDEX transactions_wallet ON transactions(wallet_id, reference);
CREATE INDEX payment_cards_wallet ON payment_cards(wallet_id);
CREATE INDEX card_challenges_card ON card_challenges(card_id);
CREATE INDEX daily_tokens_wallet ON daily_tokens(wallet_id, currency, expires_at);
CREATE INDEX transactions_offline_token ON transactions(offline_token_id);
CREATE INDEX payment_claims_pending ON payment_claims(updated_at)
WHERE state = 'open' OR state = 'refunding';
CREATE INDEX gateway_replays_expiry ON gateway_replays(expires_at);
CREATE INDEX request_rate_windows_age ON request_rate_windows(window_start);
CREATE INDEX sign_in_backoff_age ON sign_in_backoff(last_failure_at);
CREATE INDEX outbox_registration ON outbox(registration_id);
CREATE INDEX outbox_expiry ON outbox(expires_at);
CREATE INDEX api_keys_merchant ON api_keys(merchant_id, created_at);
CREATE INDEX payment_intents_reference ON payment_intents(merchant_id, order_reference, created_at);
CREATE INDEX outbox_due ON outbox(deliver_at);
CREATE INDEX webhook_endpoints_merchant ON webhook_endpoints(merchant_id, created_at);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries(due_at);
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries(endpoint_id, created_at);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts(delivery_id, id);
CREATE INDEX payment_intents_terminal ON payment_intents(terminal_id, state);
INSERT INTO schema_migrations(version, name, applied_at) VALUES (1, 'merchants, wallets, accounts, postings and settlement', 1000);
INSERT INTO schema_migrations(version, name, applied_at) VALUES (2, 'loyalty: bonus points, gold memberships, coupons', 2000);
INSERT INTO schema_migrations(version, name, applied_at) VALUES (3, 'identity: merchant sign-in, terminals, outbox, request nonces', 2000);
INSERT INTO schema_migrations(version, name, applied_at) VALUES (4, 'wallet registration and restoration with one-time codes', 2000);
INSERT INTO schema_migrations(version, name, applied_at) VALUES (5, 'refunds', 2000);
INSERT INTO schema_migrations(version, name, applied_at) VALUES (6, 'merchant dashboard: sessions and sign-in attempts', 2000);
INSERT INTO schema_migrations(version, name, applied_at) VALUES (7, 'wallet services: history by wallet, bonus memberships, status messages', 2000);
INSERT INTO schema_migrations(version, name, applied_at) VALUES (8, 'payment cards, 3-D Secure challenges and the sandbox card processor', 2000);
INSERT INTO schema_migrations(version, name, applied_at) VALUES (9, 'daily tokens for offline payments', 2000);
INSERT INTO schema_migrations(version, name, applied_at) VALUES (10, 'offline settlement: the offline columns of a payment', 2000);
INSERT INTO schema_migrations(version, name, applied_at) VALUES (11, 'entries: the kind checked by comparisons, not a list', 2000);
INSERT INTO schema_migrations(version, name, applied_at) VALUES (12, 'payment claims: one payment id, one way to pay', 2000);
INSERT INTO schema_migrations(version, name, applied_at) VALUES (13, 'the gateway''s replay window, shared by every server process', 2000);
INSERT INTO schema_migrations(version, name, applied_at) VALUES (14, 'request limits and sign-in back-off, shared by every server process', 2000);
INSERT INTO schema_migrations(version, name, applied_at) VALUES (15, 'a code per channel; the outbox forgets codes after use or expiry', 2000);
INSERT INTO schema_migrations(version, name, applied_at) VALUES (16, 'the merchant''s time zone, for the days its dashboard counts in', 2000);
INSERT INTO schema_migrations(version, name, applied_at) VALUES (17, 'secret API keys for a merchant''s own systems, and payment intents', 2000);
INSERT INTO schema_migrations(version, name, applied_at) VALUES (18, 'the outbox delivers: mail and SMS handed over after the commit, retried', 2000);
INSERT INTO schema_migrations(version, name, applied_at) VALUES (19, 'invitation codes; a registration proven by a PUK and an activation link', 2000);
INSERT INTO schema_migrations(version, name, applied_at) VALUES (20, 'webhooks: a merchant''s endpoints, its events and their deliveries', 2000);
INSERT INTO schema_migrations(version, name, applied_at) VALUES (21, 'the wallet PIN counted by the server; pinless wallets', 2000);
INSERT INTO schema_migrations(version, name, applied_at) VALUES (22, 'terminal connections: which terminals keep a connection for payment intents', 2000);
INSERT INTO merchants(id, name, currency, admin_email, created_at, bonus_points_per_major_unit, time_zone) VALUES ('m_fixture', 'Corner Café', 'EUR', 'owner@example.com', 1000, 1, 'UTC');
INSERT INTO wallets(id, name, created_at, email, phone, pinless) VALUES ('w_fixture', 'Alex', 1000, NULL, NULL, 0);
INSERT INTO wallet_keys(public_key, wallet_id, added_at, revoked_at) VALUES (X'041F202122232425262728292A2B2C2D2E2F303132333435363738393A3B3C3D3E3F404142434445464748494A4B4C4D4E4F505152535455565758595A5B5C5D5E', 'w_fixture', 1000, NULL);
INSERT INTO accounts(id, kind, owner_id, currency, balance) VALUES (1, 'wallet', 'w_fixture', 'EUR', 750);
INSERT INTO accounts(id, kind, owner_id, currency, balance) VALUES (2, 'merchant', 'm_fixture', 'EUR', 250);
INSERT INTO accounts(id, kind, owner_id, currency, balance) VALUES (3, 'external', 'external', 'EUR', -1000);
INSERT INTO postings(id, entry_id, account_id, currency, amount) VALUES (1, 1, 1, 'EUR', 1000);
INSERT INTO postings(id, entry_id, account_id, currency, amount) VALUES (2, 1, 3, 'EUR', -1000);
INSERT INTO postings(id, entry_id, account_id, currency, amount) VALUES (3, 2, 1, 'EUR', -250);
INSERT INTO postings(id, entry_id, account_id, currency, amount) VALUES (4, 2, 2, 'EUR', 250);
INSERT INTO transactions(reference, payment_id, merchant_id, transaction_type, item, quantity, session_id, wallet_key, wallet_id, terminal_key_id, amount, tip, currency, register_user, content_digest, outcome, decline_code, decline_reason, bonus_earned, bonus_balance, entry_id, settled_at, offline_token_id, offline_accepted_at, offline_guaranteed, order_reference) VALUES (1, X'010102030405060709090A0B0C0D0E0F', 'm_fixture', 1, '', 0, -2401053092612145151, X'041F202122232425262728292A2B2C2D2E2F303132333435363738393A3B3C3D3E3F404142434445464748494A4B4C4D4E4F505152535455565758595A5B5C5D5E', 'w_fixture', X'7E123456789ABCDE', 250, 0, 'EUR', 'anna', X'838A91989FA6ADB4BBC2C9D0D7DEE5ECF3FA01080F161D242B323940474E555C', 'approved', NULL, NULL, 0, 0, 2, 1002, NULL, NULL, NULL, NULL);
INSERT INTO entries(id, kind, created_at) VALUES (1, 'deposit', 1001);
INSERT INTO entries(id, kind, created_at) VALUES (2, 'payment', 1002);
