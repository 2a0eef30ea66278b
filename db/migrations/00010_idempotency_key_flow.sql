-- +goose Up
-- The flow that drives a key, by its stable name, so that any process finds
-- it again without the URL: a route may be renamed without stranding keys.
ALTER TABLE idempotency_keys ADD COLUMN flow text;
UPDATE idempotency_keys SET flow = 'payment' WHERE request_method = 'POST' AND request_path = '/payments';
ALTER TABLE idempotency_keys
    ALTER COLUMN flow SET NOT NULL,
    ADD CONSTRAINT idempotency_keys_flow_check CHECK (flow ~ '^[a-z][a-z0-9_]{0,62}$');

-- +goose Down
ALTER TABLE idempotency_keys DROP COLUMN flow;
