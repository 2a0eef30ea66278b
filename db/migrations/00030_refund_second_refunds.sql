-- +goose NO TRANSACTION
-- +goose Up
-- The second Refunds of a refund's intent that its key was handed to an
-- operator for, by Stripe id, each with what it did then: {"re_B":
-- {"status": "succeeded", "refund_failed": false}}. A later event of the
-- same Refund that says nothing new (the same status or an older one, the
-- refund still failed or not as then) only raises an alarm, so the
-- operator's settling stands; a pending Refund that then succeeds, or a
-- refund recorded failed since, hands the key over again. This replaced
-- comparing the alarm's words with earlier alarms of the Refund
-- (StripeEventAlarmRaisedBefore, 00029), which any change of wording, or
-- of a field the words name, took for news. NULL: no second Refund.
-- Adding a nullable column without a default rewrites nothing.
--
-- The index of 00029 served only that lookup; it is dropped. CONCURRENTLY,
-- hence no transaction: webhooks write stripe_events all day, and a plain
-- DROP INDEX would queue them behind its exclusive lock. Each statement may
-- run again after a crash before goose recorded the migration.
ALTER TABLE refunds ADD COLUMN IF NOT EXISTS second_refunds jsonb;

-- Keys handed over for a second Refund before this migration have no
-- second_refunds: only the 'alarm' stripe_events row each hand-over left,
-- in the words of the code before (93cb3dd, internal/phases/refunds):
--   Refund re_B of refund 7's intent is succeeded for 600, and refund 7
--   was recorded failed (...) by Refund re_A: ...
--   Refund re_B of refund 7's intent is pending for 600, and refund 7
--   records Refund re_A (...): ...
-- Left empty, a refund's own Refund failing later finds no second Refund
-- that returned the money (moneyMoved), is recorded failed, and its key
-- answers "failed" while re_B returned it: a client refunds again. So each
-- is filled in from those rows: the Refund's furthest status (succeeded
-- over pending; Stripe's requires_action is pending), refund_failed as the
-- latest row words it. A row of a reaped key that was not brought back
-- (": not brought back") handed nothing over.
--
-- A second Refund that failed (or was canceled) left no alarm: its event
-- was 'ignored', in the words of 93cb3dd:
--   Refund re_B of refund 7's intent is failed: a second Refund, which
--   returned nothing (refund 7 records Refund re_A)
-- Filled in from its alarms alone it would stay pending or succeeded, and
-- moneyMoved would count it as returning the money: the refund's own
-- Refund failing later would be handed over again instead of recorded
-- failed. Its failure is final, so such a row makes it failed, whatever
-- its alarms said; refund_failed comes from its latest alarm, false when
-- it had none (it only ever matters for a Refund that did not fail).
-- Only Refunds a refund does not record yet are added: run again, it
-- changes nothing.
WITH handed AS (
    SELECT m[1] AS stripe_refund_id,
           m[2]::bigint AS refund_id,
           CASE WHEN m[3] = 'succeeded' THEN 'succeeded' ELSE 'pending' END AS status,
           m[5] = 'was recorded failed' AS refund_failed,
           e.received_at
    FROM stripe_events AS e,
         regexp_match(e.reason,
             '^Refund (\S+) of refund (\d+)''s intent is (\S+) for -?\d+, and refund (\d+) (was recorded failed|records Refund) ') AS m
    WHERE e.outcome = 'alarm'
      AND e.reason LIKE 'Refund %'
      AND e.reason NOT LIKE '%: not brought back%'
      AND m[2] = m[4]
    UNION ALL
    SELECT m[1], m[2]::bigint, 'failed', NULL, e.received_at
    FROM stripe_events AS e,
         regexp_match(e.reason,
             '^Refund (\S+) of refund (\d+)''s intent is \S+: a second Refund, which returned nothing \(refund (\d+) records Refund ') AS m
    WHERE e.outcome = 'ignored'
      AND e.reason LIKE 'Refund %'
      AND m[2] = m[3]
), by_refund AS (
    SELECT refund_id, stripe_refund_id,
           CASE WHEN bool_or(status = 'failed') THEN 'failed'
                WHEN bool_or(status = 'succeeded') THEN 'succeeded'
                ELSE 'pending' END AS status,
           coalesce((array_agg(refund_failed ORDER BY received_at DESC) FILTER (WHERE refund_failed IS NOT NULL))[1],
                    false) AS refund_failed
    FROM handed
    GROUP BY refund_id, stripe_refund_id
), missing AS (
    SELECT b.refund_id,
           jsonb_object_agg(b.stripe_refund_id,
               jsonb_build_object('status', b.status, 'refund_failed', b.refund_failed)) AS entries
    FROM by_refund AS b
    JOIN refunds AS r ON r.id = b.refund_id
    WHERE r.second_refunds -> b.stripe_refund_id IS NULL
    GROUP BY b.refund_id
)
UPDATE refunds AS r
SET second_refunds = coalesce(r.second_refunds, '{}'::jsonb) || missing.entries
FROM missing
WHERE r.id = missing.refund_id;

DROP INDEX CONCURRENTLY IF EXISTS stripe_events_alarm_object_id_idx;

-- +goose Down
-- As 00029 builds it: an interrupted build left an invalid index that IF
-- NOT EXISTS would keep, so drop that first.
-- +goose StatementBegin
DO $$
BEGIN
    PERFORM set_config('lock_timeout', '5s', true);
    IF EXISTS (SELECT 1 FROM pg_index
               WHERE indexrelid = to_regclass('stripe_events_alarm_object_id_idx') AND NOT indisvalid) THEN
        DROP INDEX stripe_events_alarm_object_id_idx;
    END IF;
END $$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS stripe_events_alarm_object_id_idx
    ON stripe_events (object_id)
    WHERE outcome = 'alarm';
ALTER TABLE refunds DROP COLUMN IF EXISTS second_refunds;
