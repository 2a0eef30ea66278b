-- +goose Up
-- Payments and refunds get public ids that no sequence hands out (package
-- ids): a UUIDv7, shown as pay_… and re_…. The bigint id stays the rows'
-- key inside the database (foreign keys, audit records, outbox), and is
-- never shown again: a restore, a failover that lost commits, or a second
-- database hands its numbers out again, and a client holding one would
-- read, or refund, another customer's payment by it.
--
-- Rows made before this migration get a UUIDv7 of their created_at, so
-- lists keep their order across the change, and keep their number as
-- legacy_id: stored answers replay as stored, with their numbers, and the
-- API still finds those rows by them. Rows made after have no legacy_id,
-- and no number the API answers to.
--
-- Indexes: lists page by (user_id, public_id), which also answers a lookup
-- by id (every lookup is scoped to its user) and replaces the lists' old
-- (user_id, id) and the unused (user_id, created_at). A refund's list is
-- (payment_id, public_id). legacy_id's indexes hold only the old rows.
SET LOCAL lock_timeout = '5s';

-- paymentsd_uuid_v7(at) is a UUIDv7 (RFC 9562) whose time is at: the
-- 48-bit Unix millisecond time, then gen_random_uuid()'s random bits with
-- the version set to 7 (their variant bits are already the RFC's). It is
-- the public ids' default, of the commit's clock, and what the rows made
-- before this migration get, of their created_at. (Postgres 18 has
-- uuidv7(); this is the same for 15 to 17.)
CREATE FUNCTION paymentsd_uuid_v7(at timestamptz DEFAULT clock_timestamp()) RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT encode(set_byte(
        overlay(r PLACING substring(int8send((extract(epoch FROM at) * 1000)::bigint) FROM 3) FROM 1 FOR 6),
        6, (get_byte(r, 6) & 15) | 112), 'hex')::uuid
    FROM uuid_send(gen_random_uuid()) AS r
$$;

ALTER TABLE payments ADD COLUMN public_id uuid, ADD COLUMN legacy_id bigint;
UPDATE payments SET public_id = paymentsd_uuid_v7(created_at), legacy_id = id;
ALTER TABLE payments ALTER COLUMN public_id SET NOT NULL, ALTER COLUMN public_id SET DEFAULT paymentsd_uuid_v7();
CREATE UNIQUE INDEX payments_user_id_public_id_key ON payments (user_id, public_id);
CREATE UNIQUE INDEX payments_user_id_legacy_id_key ON payments (user_id, legacy_id) WHERE legacy_id IS NOT NULL;
DROP INDEX payments_user_id_id_idx;
DROP INDEX payments_user_id_created_at_idx;

-- A refund shows its payment's public id: kept on the refund, so that no
-- view of a refund needs the payment's row.
ALTER TABLE refunds ADD COLUMN public_id uuid, ADD COLUMN legacy_id bigint, ADD COLUMN payment_public_id uuid;
UPDATE refunds AS r
SET public_id = paymentsd_uuid_v7(r.created_at), legacy_id = r.id, payment_public_id = p.public_id
FROM payments AS p
WHERE p.id = r.payment_id;
ALTER TABLE refunds ALTER COLUMN public_id SET NOT NULL, ALTER COLUMN public_id SET DEFAULT paymentsd_uuid_v7(),
    ALTER COLUMN payment_public_id SET NOT NULL;
CREATE UNIQUE INDEX refunds_user_id_public_id_key ON refunds (user_id, public_id);
CREATE UNIQUE INDEX refunds_user_id_legacy_id_key ON refunds (user_id, legacy_id) WHERE legacy_id IS NOT NULL;
CREATE INDEX refunds_payment_id_public_id_idx ON refunds (payment_id, public_id);
DROP INDEX refunds_payment_id_id_idx;

-- A tombstone names what its key made by the id the client saw: the
-- public id from now on, the number for tombstones made before.
ALTER TABLE idempotency_key_tombstones ADD COLUMN resource_public_id uuid;

-- +goose Down
SET LOCAL lock_timeout = '5s';
ALTER TABLE idempotency_key_tombstones DROP COLUMN resource_public_id;
CREATE INDEX refunds_payment_id_id_idx ON refunds (payment_id, id);
DROP INDEX refunds_payment_id_public_id_idx;
ALTER TABLE refunds DROP COLUMN payment_public_id, DROP COLUMN legacy_id, DROP COLUMN public_id;
CREATE INDEX payments_user_id_created_at_idx ON payments (user_id, created_at);
CREATE INDEX payments_user_id_id_idx ON payments (user_id, id);
ALTER TABLE payments DROP COLUMN legacy_id, DROP COLUMN public_id;
DROP FUNCTION paymentsd_uuid_v7(timestamptz);
