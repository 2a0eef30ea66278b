-- fresh.sql on the redesign of harness/bench/ablation/redesign.sql, for
-- `make bench-ablation` alone: the same two transactions, statement for
-- statement, with the redesign's two tables written inside the statements
-- that already write the key and the payment (a writable CTE each), so that
-- it costs no extra round trip or statement. Keep it in step with fresh.sql:
-- `diff harness/bench/pgbench/fresh.sql harness/bench/ablation/redesign-fresh.sql`
-- shows this header and the redesign, nothing else.
--
-- Variables (pgbench -D): umin, umax = the range of existing user ids.
--
-- pgbench substitutes :name even inside string literals: never write a colon
-- directly before a letter in a literal.
\set u random(:umin, :umax)
\set r random(1, 9223372036854775806)

-- Transaction 1: reserve the key with a lease at payment_created, the point
-- this transaction reaches (the service inserts a new key where its first
-- local steps leave it), then create the pending payment and its audit
-- record. The key is a random UUID, as clients' keys are (and the
-- benchmark's), so that it lands on a random page of the unique index; the
-- fingerprint and the intent id hash what it is made from, which costs the
-- same.
BEGIN;
WITH k AS (
INSERT INTO idempotency_keys (
    user_id, idempotency_key, flow, request_method, request_path,
    request_params, request_fingerprint, recovery_point, lock_token, locked_by, locked_at
) VALUES (
    :u::bigint, md5('pgbench-' || :client_id::bigint || '-' || :r::bigint)::uuid::text, 'payment', 'POST', '/payments',
    '{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}',
    sha256(('pgbench-' || :client_id::bigint || '-' || :r::bigint)::bytea), 'payment_created', gen_random_uuid(), NULL, now()
)
ON CONFLICT (user_id, idempotency_key) DO NOTHING
RETURNING id, user_id, lock_token
), u AS (
    INSERT INTO idempotency_keys_unfinished (user_id, key_id) SELECT user_id, id FROM k
)
SELECT id AS key_id, lock_token AS token FROM k \gset
WITH payment AS (
    INSERT INTO payments (user_id, idempotency_key_id, intent_id, amount, currency, payment_method, description, capture_method)
    VALUES (:u::bigint, :key_id::bigint, left(md5('pgbench-' || :client_id::bigint || '-' || :r::bigint), 32),
            2000, 'usd', 'pm_card_visa', NULL, 'automatic')
    RETURNING *
), audit AS (
    INSERT INTO audit_records (user_id, action, resource_type, resource_id, data)
    SELECT p.user_id, 'payment.created', 'payment', p.id,
           jsonb_build_object('status', p.status, 'idempotency_key_id', p.idempotency_key_id)
    FROM payment AS p
)
SELECT id AS payment_id, created_at FROM payment \gset
COMMIT;

-- (The service calls Stripe here, outside any transaction.)

-- Transaction 2: record the PaymentIntent and the outcome, audit it, and
-- finish the key with the stored response, releasing the lease.
BEGIN;
WITH payment AS (
    UPDATE payments
    SET status = 'succeeded', stripe_payment_intent_id = 'pi_pgbench_' || :payment_id::bigint,
        failure_code = NULL, failure_message = NULL, amount_captured = 2000, updated_at = now()
    WHERE payments.id = :payment_id::bigint
    RETURNING *
), audit AS (
    INSERT INTO audit_records (user_id, action, resource_type, resource_id, data)
    SELECT p.user_id, 'payment.' || p.status, 'payment', p.id,
           jsonb_strip_nulls(jsonb_build_object('status', p.status,
               'stripe_payment_intent_id', p.stripe_payment_intent_id,
               'failure_code', p.failure_code, 'idempotency_key_id', p.idempotency_key_id))
    FROM payment AS p
), pi AS (
    INSERT INTO payment_intents (stripe_payment_intent_id, payment_id) SELECT stripe_payment_intent_id, id FROM payment
)
SELECT id FROM payment;
-- The transactional outbox: the payment's receipt (ReceiptEnqueue), due in a
-- hundred years so that the dispatcher of a running service never takes it.
INSERT INTO receipt_outbox (payment_id, run_at) VALUES (:payment_id::bigint, now() + interval '100 years')
ON CONFLICT (payment_id) DO NOTHING;
WITH f AS (
UPDATE idempotency_keys
SET recovery_point = 'finished', lock_token = NULL, locked_by = NULL, locked_at = NULL,
    last_run_at = now(), finished_at = now(), response_code = 201,
    response_headers = '{"Content-Type":"application/json","Location":"/payments/1"}',
    response_body = convert_to('{"id":' || :payment_id::bigint || ',"amount":2000,"currency":"usd","status":"succeeded","stripe_payment_intent_id":"pi_pgbench_' || :payment_id::bigint || '","description":' || 'null,"amount_refunded":0,"capture_method":"automatic","amount_captured":2000,"disputed":' || 'false,"created_at":"2026-01-01T00:00:00.000000Z"}' || chr(10), 'UTF8')
WHERE id = :key_id::bigint AND lock_token = :token::uuid
RETURNING id, user_id
)
DELETE FROM idempotency_keys_unfinished AS u USING f WHERE u.user_id = f.user_id AND u.key_id = f.id;
COMMIT;
