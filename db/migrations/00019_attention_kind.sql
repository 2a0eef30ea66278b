-- +goose Up
-- Why a key waits for an operator decides who may settle it.
--
-- 'unknown_outcome': no machine could learn what Stripe did (every Stripe
-- key spent, lookups failing past the window, an idempotency_error). Stripe's
-- own word, a webhook event, may still settle it.
--
-- 'conflict': what Stripe holds contradicts the request (two PaymentIntents
-- of one intent, one with another amount, an object that is not this
-- request's), or an event contradicted an answer already given. Only an
-- operator settles it: an event that would is recorded as an alarm instead.
--
-- Keys parked before this column get 'conflict': the reason was not kept
-- apart, and the operator is the safe owner of a key of unknown kind.
--
-- stripe_events gains the outcome 'alarm': a verified event that could not
-- be applied because it contradicts what is recorded, or because applying it
-- failed for good. It is kept, answered 200 (a redelivery is a duplicate,
-- never a 500 for ever), logged and counted.
SET LOCAL lock_timeout = '5s';
ALTER TABLE idempotency_keys
    ADD COLUMN needs_attention_kind text CHECK (needs_attention_kind IN ('unknown_outcome', 'conflict'));
UPDATE idempotency_keys SET needs_attention_kind = 'conflict' WHERE needs_attention_at IS NOT NULL;
ALTER TABLE idempotency_keys
    ADD CONSTRAINT idempotency_keys_attention_kind_set_check
        CHECK ((needs_attention_at IS NULL) = (needs_attention_kind IS NULL)) NOT VALID;
ALTER TABLE idempotency_keys VALIDATE CONSTRAINT idempotency_keys_attention_kind_set_check;

ALTER TABLE stripe_events DROP CONSTRAINT stripe_events_outcome_check,
    ADD CONSTRAINT stripe_events_outcome_check
        CHECK (outcome IN ('received', 'applied', 'ignored', 'alarm')) NOT VALID;
ALTER TABLE stripe_events VALIDATE CONSTRAINT stripe_events_outcome_check;

-- +goose Down
SET LOCAL lock_timeout = '5s';
UPDATE stripe_events SET outcome = 'ignored' WHERE outcome = 'alarm';
ALTER TABLE stripe_events DROP CONSTRAINT stripe_events_outcome_check,
    ADD CONSTRAINT stripe_events_outcome_check CHECK (outcome IN ('received', 'applied', 'ignored'));
ALTER TABLE idempotency_keys
    DROP CONSTRAINT idempotency_keys_attention_kind_set_check,
    DROP COLUMN needs_attention_kind;
