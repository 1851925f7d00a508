-- One row per pgbench client: a wallet that paid the newest merchant (the level just run), a
-- terminal of that merchant, and the accounts a payment touches; the wallets topped up so the
-- script's payments never run out of money.
DROP TABLE IF EXISTS bench_payers;
CREATE TABLE bench_payers AS
WITH merchant AS (SELECT id FROM merchants ORDER BY created_at DESC, id LIMIT 1),
payer AS (
    SELECT w.wallet_id, row_number() OVER (ORDER BY w.wallet_id) AS n
    FROM (SELECT DISTINCT t.wallet_id FROM transactions t JOIN merchant m ON t.merchant_id = m.id) w),
till AS (
    SELECT t.public_key, t.key_id, row_number() OVER (ORDER BY t.id) AS n
    FROM terminals t JOIN merchant m ON t.merchant_id = m.id)
SELECT payer.n - 1 AS client, merchant.id AS merchant_id, payer.wallet_id,
    (SELECT k.public_key FROM wallet_keys k WHERE k.wallet_id = payer.wallet_id AND k.revoked_at IS NULL
        ORDER BY k.added_at LIMIT 1) AS wallet_key,
    till.public_key AS terminal_public_key, till.key_id AS terminal_key_id,
    'key:' || encode(till.public_key, 'hex') AS rate_key, wallet_account.id AS wallet_account,
    'offline_debt:' || payer.wallet_id AS debt_owner, merchant_account.id AS merchant_account
FROM payer JOIN till ON till.n = payer.n CROSS JOIN merchant
JOIN accounts wallet_account ON wallet_account.kind = 'wallet' AND wallet_account.owner_id = payer.wallet_id
    AND wallet_account.currency = 'EUR'
JOIN accounts merchant_account ON merchant_account.kind = 'merchant' AND merchant_account.owner_id = merchant.id
    AND merchant_account.currency = 'EUR';
ALTER TABLE bench_payers ADD PRIMARY KEY (client);
UPDATE accounts SET balance = balance + 1000000000000 WHERE id IN (SELECT wallet_account FROM bench_payers);
SELECT count(*) FROM bench_payers;
