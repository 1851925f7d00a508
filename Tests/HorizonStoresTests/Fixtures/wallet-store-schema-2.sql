-- A released schema with its rows; never edited (see SchemaFixture).
CREATE TABLE receipts(
    payment_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, merchant TEXT NOT NULL,
    amount INTEGER NOT NULL, tip INTEGER NOT NULL, currency TEXT NOT NULL, reference INTEGER NOT NULL,
    settled_at INTEGER NOT NULL, bonus_earned INTEGER NOT NULL, bonus_balance INTEGER NOT NULL, accepted_offline INTEGER NOT NULL DEFAULT 0
    CHECK (accepted_offline IN (0, 1)));
CREATE TABLE pending(
    payment_id BLOB PRIMARY KEY, request BLOB NOT NULL, terminal_key_id BLOB NOT NULL,
    terminal_address TEXT NOT NULL, merchant TEXT NOT NULL, created_at INTEGER NOT NULL);
INSERT INTO receipts(payment_id, session_id, merchant, amount, tip, currency, reference, settled_at, bonus_earned, bonus_balance, accepted_offline) VALUES ('010102030405060709090a0b0c0d0e0f', '1', 'Corner Café', 100, 10, 'EUR', 1, 1001, 1, 1, 0);
INSERT INTO receipts(payment_id, session_id, merchant, amount, tip, currency, reference, settled_at, bonus_earned, bonus_balance, accepted_offline) VALUES ('02010203040506070a090a0b0c0d0e0f', '2', 'Corner Café', 200, 10, 'EUR', 2, 1002, 1, 2, 1);
INSERT INTO pending(payment_id, request, terminal_key_id, terminal_address, merchant, created_at) VALUES (X'05010203040506070D090A0B0C0D0E0F', X'010203', X'7E123456789ABCDE', 'AA:BB:CC:DD:EE:FF', 'Corner Café', 1005);
