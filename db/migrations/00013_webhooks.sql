-- +goose Up
-- Every verified Stripe event, once: the unique id makes a redelivery, or
-- five deliveries at once, take effect a single time. The row and the
-- event's effects commit in one transaction. outcome says what became of
-- it: applied, or ignored with the reason (an older event than the state it
-- would overwrite, another deployment's object, an object unknown here).
CREATE TABLE stripe_events (
    id             text        PRIMARY KEY CHECK (id ~ '^evt_[A-Za-z0-9_]+$'),
    type           text        NOT NULL,
    object_id      text,
    stripe_created timestamptz NOT NULL,
    received_at    timestamptz NOT NULL DEFAULT now(),
    outcome        text        NOT NULL DEFAULT 'received' CHECK (outcome IN ('received', 'applied', 'ignored')),
    reason         text
);

-- The intent a payment or refund was made for (see internal/intent), so an
-- event that names it in its metadata finds the row even when the answer
-- that would have told us the Stripe id was lost. Existing rows get it from
-- their key, computed as package intent computes it. Not unique: a key
-- reused once its tombstone expired names the same intent again, months
-- later.
ALTER TABLE payments ADD COLUMN intent_id text, ADD COLUMN disputed_at timestamptz;
ALTER TABLE refunds ADD COLUMN intent_id text,
    -- When Stripe made the refund's status what it is (the event's time),
    -- so an older event never overwrites a newer status.
    ADD COLUMN status_at timestamptz;
UPDATE payments AS p
SET intent_id = substr(encode(sha256(
        convert_to(d.namespace::text, 'UTF8') || '\x00'::bytea || convert_to(k.user_id::text, 'UTF8')
        || '\x00'::bytea || convert_to(k.idempotency_key, 'UTF8')), 'hex'), 1, 32)
FROM idempotency_keys AS k, deployment AS d
WHERE k.id = p.idempotency_key_id;
UPDATE refunds AS r
SET intent_id = substr(encode(sha256(
        convert_to(d.namespace::text, 'UTF8') || '\x00'::bytea || convert_to(k.user_id::text, 'UTF8')
        || '\x00'::bytea || convert_to(k.idempotency_key, 'UTF8')), 'hex'), 1, 32)
FROM idempotency_keys AS k, deployment AS d
WHERE k.id = r.idempotency_key_id;
CREATE INDEX payments_intent_id_idx ON payments (intent_id);
CREATE INDEX refunds_intent_id_idx ON refunds (intent_id);

-- +goose Down
DROP INDEX refunds_intent_id_idx;
DROP INDEX payments_intent_id_idx;
ALTER TABLE refunds DROP COLUMN status_at, DROP COLUMN intent_id;
ALTER TABLE payments DROP COLUMN disputed_at, DROP COLUMN intent_id;
DROP TABLE stripe_events;
