-- +goose Up
-- When the Stripe key in use was taken: no object it created can be older
-- (less the lookup's lookback, for clock skew and lost commits), so a lookup
-- lists from there rather than from the key's creation, a day ago perhaps.
ALTER TABLE payments ADD COLUMN charge_attempt_at timestamptz NOT NULL DEFAULT now();

-- +goose Down
ALTER TABLE payments DROP COLUMN charge_attempt_at;
