-- A released schema with its rows; never edited (see SchemaFixture).
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE offline_payments(
    payment_id BLOB PRIMARY KEY,
    session_id INTEGER NOT NULL,
    wallet_key BLOB NOT NULL,
    terminal_key_id BLOB NOT NULL,
    amount INTEGER NOT NULL CHECK (amount > 0),
    tip INTEGER NOT NULL CHECK (tip >= 0),
    currency TEXT NOT NULL,
    register_user TEXT NOT NULL,
    signed_confirmation BLOB NOT NULL,
    daily_token BLOB NOT NULL,
    token_id BLOB NOT NULL,
    accepted_at INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('stored', 'forwarding', 'settled', 'declined')),
    decline_code TEXT,
    decline_reason TEXT,
    forward_attempts INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL,
    CHECK ((state = 'declined') = (decline_code IS NOT NULL)));
CREATE TABLE "steps"(
    seq INTEGER PRIMARY KEY,
    step TEXT NOT NULL CHECK (step = 'offered' OR step = 'confirmed' OR step = 'submitted'
        OR step = 'result' OR step = 'acknowledged'),
    session_id INTEGER NOT NULL,
    request_id BLOB,
    transaction_type INTEGER NOT NULL,
    wallet_key BLOB NOT NULL,
    terminal_key_id BLOB,
    amount INTEGER,
    tip INTEGER,
    currency TEXT,
    register_user TEXT,
    item TEXT,
    quantity INTEGER,
    content_digest BLOB,
    answer BLOB,
    signed_request BLOB,
    recorded_at INTEGER NOT NULL, order_reference TEXT,
    CHECK ((step = 'offered') = (request_id IS NULL)),
    CHECK (step != 'confirmed' OR (terminal_key_id IS NOT NULL AND amount IS NOT NULL
        AND tip IS NOT NULL AND currency IS NOT NULL AND content_digest IS NOT NULL)),
    CHECK ((step = 'result') = (answer IS NOT NULL)));
CREATE INDEX steps_by_request ON steps(request_id, seq) WHERE request_id IS NOT NULL;
CREATE INDEX steps_by_order_reference ON steps(order_reference, seq)
    WHERE order_reference IS NOT NULL;
INSERT INTO meta(key, value) VALUES ('schema_version', '5');
INSERT INTO offline_payments(payment_id, session_id, wallet_key, terminal_key_id, amount, tip, currency, register_user, signed_confirmation, daily_token, token_id, accepted_at, state, decline_code, decline_reason, forward_attempts, updated_at) VALUES (X'04010203040506070C090A0B0C0D0E0F', -2401053092612145151, X'041F202122232425262728292A2B2C2D2E2F303132333435363738393A3B3C3D3E3F404142434445464748494A4B4C4D4E4F505152535455565758595A5B5C5D5E', X'7E123456789ABCDE', 450, 50, 'EUR', 'anna', X'040506', X'070809', X'0A0B', 9, 'stored', NULL, NULL, 0, 9);
INSERT INTO steps(seq, step, session_id, request_id, transaction_type, wallet_key, terminal_key_id, amount, tip, currency, register_user, item, quantity, content_digest, answer, signed_request, recorded_at, order_reference) VALUES (1, 'offered', -2401053092612145151, NULL, 1, X'041F202122232425262728292A2B2C2D2E2F303132333435363738393A3B3C3D3E3F404142434445464748494A4B4C4D4E4F505152535455565758595A5B5C5D5E', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1, NULL);
INSERT INTO steps(seq, step, session_id, request_id, transaction_type, wallet_key, terminal_key_id, amount, tip, currency, register_user, item, quantity, content_digest, answer, signed_request, recorded_at, order_reference) VALUES (2, 'confirmed', -2401053092612145151, X'010102030405060709090A0B0C0D0E0F', 1, X'041F202122232425262728292A2B2C2D2E2F303132333435363738393A3B3C3D3E3F404142434445464748494A4B4C4D4E4F505152535455565758595A5B5C5D5E', X'7E123456789ABCDE', 500, 0, 'EUR', 'anna', '', 0, X'838A91989FA6ADB4BBC2C9D0D7DEE5ECF3FA01080F161D242B323940474E555C', NULL, X'010203', 2, NULL);
INSERT INTO steps(seq, step, session_id, request_id, transaction_type, wallet_key, terminal_key_id, amount, tip, currency, register_user, item, quantity, content_digest, answer, signed_request, recorded_at, order_reference) VALUES (3, 'submitted', -2401053092612145151, X'010102030405060709090A0B0C0D0E0F', 1, X'041F202122232425262728292A2B2C2D2E2F303132333435363738393A3B3C3D3E3F404142434445464748494A4B4C4D4E4F505152535455565758595A5B5C5D5E', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 3, NULL);
INSERT INTO steps(seq, step, session_id, request_id, transaction_type, wallet_key, terminal_key_id, amount, tip, currency, register_user, item, quantity, content_digest, answer, signed_request, recorded_at, order_reference) VALUES (4, 'result', -2401053092612145151, X'010102030405060709090A0B0C0D0E0F', 1, X'041F202122232425262728292A2B2C2D2E2F303132333435363738393A3B3C3D3E3F404142434445464748494A4B4C4D4E4F505152535455565758595A5B5C5D5E', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, X'02070001000F7374616E642D696E20616E7377657201010102030405060709090A0B0C0D0E0F', NULL, 4, NULL);
INSERT INTO steps(seq, step, session_id, request_id, transaction_type, wallet_key, terminal_key_id, amount, tip, currency, register_user, item, quantity, content_digest, answer, signed_request, recorded_at, order_reference) VALUES (5, 'acknowledged', -2401053092612145151, X'010102030405060709090A0B0C0D0E0F', 1, X'041F202122232425262728292A2B2C2D2E2F303132333435363738393A3B3C3D3E3F404142434445464748494A4B4C4D4E4F505152535455565758595A5B5C5D5E', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 5, NULL);
INSERT INTO steps(seq, step, session_id, request_id, transaction_type, wallet_key, terminal_key_id, amount, tip, currency, register_user, item, quantity, content_digest, answer, signed_request, recorded_at, order_reference) VALUES (6, 'confirmed', -2401053092612145151, X'02010203040506070A090A0B0C0D0E0F', 1, X'041F202122232425262728292A2B2C2D2E2F303132333435363738393A3B3C3D3E3F404142434445464748494A4B4C4D4E4F505152535455565758595A5B5C5D5E', X'7E123456789ABCDE', 700, 0, 'EUR', 'anna', '', 0, X'060D141B222930373E454C535A61686F767D848B9299A0A7AEB5BCC3CAD1D8DF', NULL, X'010203', 6, NULL);
INSERT INTO steps(seq, step, session_id, request_id, transaction_type, wallet_key, terminal_key_id, amount, tip, currency, register_user, item, quantity, content_digest, answer, signed_request, recorded_at, order_reference) VALUES (7, 'confirmed', -2401053092612145151, X'03010203040506070B090A0B0C0D0E0F', 2, X'043E3F404142434445464748494A4B4C4D4E4F505152535455565758595A5B5C5D5E5F606162636465666768696A6B6C6D6E6F707172737475767778797A7B7C7D', X'7E123456789ABCDE', 320, 0, 'EUR', '', 'Free coffee', 40, X'8990979EA5ACB3BAC1C8CFD6DDE4EBF2F900070E151C232A31383F464D545B62', NULL, X'010203', 7, NULL);
