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
    created_at INTEGER NOT NULL) STRICT;
CREATE TABLE wallets(
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created_at INTEGER NOT NULL) STRICT;
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
CREATE TABLE entries(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL CHECK (kind IN ('payment', 'deposit', 'enrollment')),
    created_at INTEGER NOT NULL) STRICT;
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
    settled_at INTEGER NOT NULL) STRICT;
CREATE INDEX wallet_keys_wallet ON wallet_keys(wallet_id);
CREATE INDEX postings_entry ON postings(entry_id);
CREATE INDEX postings_account ON postings(account_id);
CREATE INDEX transactions_merchant ON transactions(merchant_id, reference);
INSERT INTO schema_migrations(version, name, applied_at) VALUES (1, 'merchants, wallets, accounts, postings and settlement', 1000);
INSERT INTO merchants(id, name, currency, admin_email, created_at) VALUES ('m_fixture', 'Corner Café', 'EUR', 'owner@example.com', 1000);
INSERT INTO wallets(id, name, created_at) VALUES ('w_fixture', 'Alex', 1000);
INSERT INTO wallet_keys(public_key, wallet_id, added_at, revoked_at) VALUES (X'041F202122232425262728292A2B2C2D2E2F303132333435363738393A3B3C3D3E3F404142434445464748494A4B4C4D4E4F505152535455565758595A5B5C5D5E', 'w_fixture', 1000, NULL);
INSERT INTO accounts(id, kind, owner_id, currency, balance) VALUES (1, 'wallet', 'w_fixture', 'EUR', 750);
INSERT INTO accounts(id, kind, owner_id, currency, balance) VALUES (2, 'merchant', 'm_fixture', 'EUR', 250);
INSERT INTO accounts(id, kind, owner_id, currency, balance) VALUES (3, 'external', 'external', 'EUR', -1000);
INSERT INTO entries(id, kind, created_at) VALUES (1, 'deposit', 1001);
INSERT INTO entries(id, kind, created_at) VALUES (2, 'payment', 1002);
INSERT INTO postings(id, entry_id, account_id, currency, amount) VALUES (1, 1, 1, 'EUR', 1000);
INSERT INTO postings(id, entry_id, account_id, currency, amount) VALUES (2, 1, 3, 'EUR', -1000);
INSERT INTO postings(id, entry_id, account_id, currency, amount) VALUES (3, 2, 1, 'EUR', -250);
INSERT INTO postings(id, entry_id, account_id, currency, amount) VALUES (4, 2, 2, 'EUR', 250);
INSERT INTO transactions(reference, payment_id, merchant_id, transaction_type, item, quantity, session_id, wallet_key, wallet_id, terminal_key_id, amount, tip, currency, register_user, content_digest, outcome, decline_code, decline_reason, bonus_earned, bonus_balance, entry_id, settled_at) VALUES (1, X'010102030405060709090A0B0C0D0E0F', 'm_fixture', 1, '', 0, -2401053092612145151, X'041F202122232425262728292A2B2C2D2E2F303132333435363738393A3B3C3D3E3F404142434445464748494A4B4C4D4E4F505152535455565758595A5B5C5D5E', 'w_fixture', X'7E123456789ABCDE', 250, 0, 'EUR', 'anna', X'838A91989FA6ADB4BBC2C9D0D7DEE5ECF3FA01080F161D242B323940474E555C', 'approved', NULL, NULL, 0, 0, 2, 1002);
