-- The SQL ceiling of the least that does a fresh payment's job: the two
-- transactions on the least schema (harness/bench/least/schema.sql), a
-- yardstick the service never runs. One run of this script is one payment,
-- so pgbench's tps is payments per second, to read beside fresh.sql's.
--
-- It is statement for statement what the bare service over the least SQL
-- (harness/bench/bare/least.go) runs: keep the two in step. The bare makes
-- the payment's UUIDv7 itself; this script has the database make it, with
-- the function the service's migrations define, as part of the key's
-- insert; the bare passes the stored answer as a parameter where this
-- script builds it in SQL.
--
-- Variables (pgbench -D): umin, umax = the range of existing user ids.
--
-- pgbench substitutes :name even inside string literals: never write a colon
-- directly before a letter in a literal.
\set u random(:umin, :umax)
\set r random(1, 9223372036854775806)

-- Transaction 1: reserve the key at the point this transaction reaches
-- (payment_created) with a lease, naming the payment it makes; then the
-- payment and its audit record. The key is a random UUID, as clients' keys
-- are, so that it lands on a random page of the unique index.
BEGIN;
INSERT INTO leastsql.idempotency_keys (user_id, idempotency_key, request_params, recovery_point, locked_at, payment_id)
VALUES (:u::bigint, md5('least-' || :client_id::bigint || '-' || :r::bigint)::uuid::text,
        '{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}', 'payment_created', now(),
        public.paymentsd_uuid_v7())
ON CONFLICT (user_id, idempotency_key) DO NOTHING
RETURNING id AS key_id, locked_at AS lease, payment_id AS pid \gset
WITH payment AS (
    INSERT INTO leastsql.payments (id, user_id, amount, currency, payment_method, description)
    VALUES (:pid::uuid, :u::bigint, 2000, 'usd', 'pm_card_visa', NULL)
    RETURNING id, user_id, status, created_at
), audit AS (
    INSERT INTO leastsql.audit_records (user_id, action, resource_type, resource_id, data)
    SELECT user_id, 'payment.created', 'payment', id, jsonb_build_object('status', status)
    FROM payment
)
SELECT created_at FROM payment;
COMMIT;

-- (The service calls Stripe here, outside any transaction.)

-- Transaction 2: record the outcome and audit it, stage the receipt's job,
-- and finish the key with the stored answer under the lease it holds.
BEGIN;
WITH payment AS (
    UPDATE leastsql.payments SET status = 'succeeded', stripe_payment_intent_id = 'pi_pgbench_' || :key_id::bigint
    WHERE id = :pid::uuid
    RETURNING id, user_id, status, stripe_payment_intent_id
), audit AS (
    INSERT INTO leastsql.audit_records (user_id, action, resource_type, resource_id, data)
    SELECT user_id, 'payment.' || status, 'payment', id,
           jsonb_build_object('status', status, 'stripe_payment_intent_id', stripe_payment_intent_id)
    FROM payment
)
SELECT id FROM payment;
INSERT INTO leastsql.staged_jobs (job_name, job_args)
VALUES ('receipt', jsonb_build_object('payment_id', :pid::uuid));
UPDATE leastsql.idempotency_keys
SET recovery_point = 'finished', locked_at = NULL, last_run_at = now(),
    response_code = 201,
    response_headers = '{"Content-Type":"application/json","Location":"/payments/pay_0"}',
    response_body = convert_to('{"id":"pay_' || :key_id::bigint || '","amount":2000,"currency":"usd","status":"succeeded","stripe_payment_intent_id":"pi_pgbench_' || :key_id::bigint || '","description":' || 'null,"amount_refunded":0,"capture_method":"automatic","amount_captured":2000,"disputed":' || 'false,"created_at":"2026-01-01T00:00:00.000000Z"}' || chr(10), 'UTF8')
WHERE id = :key_id::bigint AND locked_at = :lease::timestamptz;
COMMIT;
