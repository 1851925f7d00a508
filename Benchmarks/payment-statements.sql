-- One payment's work on PostgreSQL, for pgbench: the statements `horizon-server` executes for a
-- payment submission by a terminal whose wallet paid before (the steady state), in the same
-- order, on the same tables and indexes, with the same isolation and one transaction: the
-- terminal's look-up, then one transaction that records the request's nonce, counts it in its
-- key's request window and settles the payment.
-- Benchmarks/server-throughput.sh runs it with `pgbench -M extended` (bound parameters, as the
-- server's driver sends them) against a copy of the ledger the server just used.
--
-- The only statement the server does not execute is the first: pgbench has no other way to take
-- the client's wallet and terminal (from bench_payers, one row per client, written by the
-- script) and fresh ids into variables. It reads one row by its key and touches no ledger
-- table. NULL parameters are written as NULL, and where PostgreSQL cannot infer a parameter's
-- type (pgbench binds every variable as text) a cast says it.
--
-- PaymentStatementsScriptTests checks this file against what the ledger executes, statement by
-- statement, so it cannot drift from the code.
\set amount random(100, 999)
\set tip random(0, 3) * 25
\set session random(-4611686018427387903, 4611686018427387903)
\set points_cap 1000000000000000
\set total :amount + :tip
\set debit -:total
SELECT merchant_id, wallet_id, wallet_key, terminal_public_key, terminal_key_id, rate_key,
    wallet_account, debt_owner, merchant_account, extract(epoch FROM now())::bigint AS now,
    decode(md5(random()::text || clock_timestamp()::text), 'hex') AS payment_id,
    md5(random()::text || clock_timestamp()::text) AS nonce,
    decode(md5(random()::text) || md5(random()::text), 'hex') AS content_digest
    FROM bench_payers WHERE client = :client_id \gset
SELECT * FROM terminals WHERE public_key = :terminal_public_key ORDER BY activated_at, id;
BEGIN ISOLATION LEVEL READ COMMITTED;
INSERT INTO request_nonces(public_key, nonce, seen_at) VALUES (:terminal_public_key, :nonce, :now)
    ON CONFLICT (public_key, nonce) DO NOTHING RETURNING nonce;
INSERT INTO request_rate_windows(rate_key, window_start, requests) VALUES (:rate_key, :now, 1)
    ON CONFLICT (rate_key, window_start) DO UPDATE SET requests = request_rate_windows.requests + 1
    RETURNING requests;
SELECT * FROM transactions WHERE payment_id = :payment_id;
SELECT * FROM merchants WHERE id = :merchant_id;
SELECT * FROM payment_intents WHERE payment_id = :payment_id;
SELECT wallet_id FROM wallet_keys WHERE public_key = :wallet_key AND revoked_at IS NULL;
SELECT id, balance FROM accounts WHERE kind = 'wallet' AND owner_id = :wallet_id AND currency = 'EUR' FOR UPDATE;
SELECT id, balance FROM accounts WHERE kind = 'external' AND owner_id = :debt_owner AND currency = 'EUR' FOR UPDATE;
SELECT state FROM bonus_memberships WHERE merchant_id = :merchant_id AND wallet_id = :wallet_id;
INSERT INTO bonus_points(merchant_id, wallet_id, points) VALUES (:merchant_id, :wallet_id, 1)
    ON CONFLICT (merchant_id, wallet_id) DO UPDATE SET points = CASE
        WHEN bonus_points.points > :points_cap - excluded.points THEN :points_cap
        ELSE bonus_points.points + excluded.points END
    RETURNING points;
SELECT id, balance FROM accounts WHERE kind = 'merchant' AND owner_id = :merchant_id AND currency = 'EUR';
INSERT INTO entries(kind, created_at) VALUES ('payment', :now) RETURNING id \gset entry_
INSERT INTO postings(entry_id, account_id, currency, amount) VALUES (:entry_id, :wallet_account, 'EUR', :debit), (:entry_id, :merchant_account, 'EUR', :total);
UPDATE accounts SET balance = balance + CASE id WHEN :wallet_account THEN :debit::bigint WHEN :merchant_account THEN :total::bigint END WHERE id = :wallet_account OR id = :merchant_account;
INSERT INTO payment_claims(payment_id, merchant_id, wallet_key, wallet_id, card_id, session_id,
        terminal_key_id, transaction_type, item, quantity, amount, tip, currency, register_user,
        content_digest, state, created_at, updated_at)
    VALUES (:payment_id, :merchant_id, :wallet_key, :wallet_id, NULL, :session, :terminal_key_id, 1, '', 0, :amount, :tip, 'EUR', 'pgbench', :content_digest, 'settled', :now, :now) ON CONFLICT (payment_id) DO NOTHING RETURNING payment_id;
INSERT INTO transactions(payment_id, merchant_id, transaction_type, item, quantity, session_id,
        wallet_key, wallet_id, terminal_key_id, amount, tip, currency, register_user, content_digest,
        outcome, decline_code, decline_reason, bonus_earned, bonus_balance, entry_id, settled_at,
        offline_token_id, offline_accepted_at, offline_guaranteed, order_reference)
    VALUES (:payment_id, :merchant_id, 1, '', 0, :session, :wallet_key, :wallet_id, :terminal_key_id, :amount, :tip, 'EUR', 'pgbench', :content_digest, 'approved', NULL, NULL, 1, 1, :entry_id, :now, NULL, NULL, NULL, NULL) RETURNING reference;
SELECT id FROM webhook_endpoints WHERE merchant_id = :merchant_id AND deleted_at IS NULL LIMIT 1;
COMMIT;
