-- +goose Up
-- The receipt outbox: a row per succeeded payment, inserted in the
-- transaction that records the charge, and deleted in the transaction that
-- records its receipt. A dispatcher drains it in batches, one transaction
-- for many receipts, where a River job cost two transactions a receipt
-- (its fetch and its completion). The primary key makes a second enqueue of
-- one payment impossible.
CREATE TABLE receipt_outbox (
    payment_id  bigint      PRIMARY KEY REFERENCES payments (id),
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- run_at is when the dispatcher may take the row next: now, or later
    -- after a failed delivery (attempts counts them).
    run_at      timestamptz NOT NULL DEFAULT now(),
    attempts    integer     NOT NULL DEFAULT 0,
    last_error  text
);
CREATE INDEX receipt_outbox_run_at_idx ON receipt_outbox (run_at);

-- Receipt jobs River has not finished move to the outbox. A job running
-- right now in a process of the previous version may finish too: receipts
-- are unique per payment, so its payment gets one receipts row either way
-- (and, delivery being at least once, may be mailed twice). Jobs such a
-- process enqueues later are moved by workers.LegacyReceiptWorker.
INSERT INTO receipt_outbox (payment_id, created_at)
SELECT (j.args->>'payment_id')::bigint, min(j.created_at)
FROM river_job AS j
WHERE j.kind = 'receipt'
  AND j.state NOT IN ('completed', 'discarded', 'cancelled')
  AND NOT EXISTS (SELECT 1 FROM receipts AS r WHERE r.payment_id = (j.args->>'payment_id')::bigint)
GROUP BY 1
ON CONFLICT (payment_id) DO NOTHING;
DELETE FROM river_job
WHERE kind = 'receipt' AND state NOT IN ('completed', 'discarded', 'cancelled', 'running');

-- +goose Down
INSERT INTO river_job (args, kind, max_attempts, priority, queue, state, scheduled_at, tags)
SELECT jsonb_build_object('payment_id', o.payment_id), 'receipt', 25, 1, 'default', 'available', now(), '{}'
FROM receipt_outbox AS o;
DROP TABLE receipt_outbox;
