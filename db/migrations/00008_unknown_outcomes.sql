-- +goose Up
-- The deployment's namespace: random, created once with the database. Stripe
-- idempotency keys and metadata derive from it (see internal/intent), so two
-- databases on one Stripe account never send each other's keys. A copy of a
-- database that is to serve as a separate deployment (staging made from a
-- production backup) must be given a new one:
--   UPDATE deployment SET namespace = gen_random_uuid();
-- A restore or a failover that replaces the database keeps it, and that is
-- the point: retries then reach Stripe's cached answers.
CREATE TABLE deployment (
    singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    namespace  uuid        NOT NULL DEFAULT gen_random_uuid(),
    created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO deployment DEFAULT VALUES;

-- A key whose outcome no machine can settle awaits an operator: it is never
-- run again automatically until `paymentsd keys resolve` (or, later, Stripe's
-- own word) settles it. last_error says why a run last ended without an
-- outcome, for the operator; it never holds request data.
ALTER TABLE idempotency_keys
    ADD COLUMN needs_attention_at timestamptz,
    ADD COLUMN last_error         text CHECK (char_length(last_error) <= 1000),
    ADD CONSTRAINT idempotency_keys_needs_attention_check CHECK (
        needs_attention_at IS NULL OR (recovery_point <> 'finished' AND lock_token IS NULL));

CREATE INDEX idempotency_keys_needs_attention_idx ON idempotency_keys (needs_attention_at)
    WHERE needs_attention_at IS NOT NULL;

-- Which Stripe idempotency key the charge uses now (attempt n of the
-- intent), and since when that attempt is known to hold a cached server
-- error, so a later run looks up instead of re-sending it.
ALTER TABLE payments
    ADD COLUMN charge_attempt          integer NOT NULL DEFAULT 1 CHECK (charge_attempt >= 1),
    ADD COLUMN charge_attempt_spent_at timestamptz;

-- +goose Down
ALTER TABLE payments DROP COLUMN charge_attempt_spent_at, DROP COLUMN charge_attempt;
DROP INDEX idempotency_keys_needs_attention_idx;
ALTER TABLE idempotency_keys
    DROP CONSTRAINT idempotency_keys_needs_attention_check,
    DROP COLUMN last_error,
    DROP COLUMN needs_attention_at;
DROP TABLE deployment;
