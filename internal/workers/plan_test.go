package workers_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestWorkerQueriesAreIndexServed checks the plan of every query the
// background workers run on a table that grows with the service's history,
// as the prepared statements' generic plans (what pgx's cached statements
// come to), on tables of many finished keys, payments, tombstones and
// receipts and a few unfinished and parked keys: each reads its own index,
// never the whole table. Each statement is the query's text as it stands in
// db/queries, its parameters numbered.
//
// The index of unfinished keys has no column a phase's update changes
// (migration 00027: the update is then HOT), so it serves the completer's
// filter but not its order: the plan sorts what it read, parked keys left
// out by the filter (00034).
func TestWorkerQueriesAreIndexServed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testutil.NewDB(t)
	testutil.FillHistory(t, pool.Driver())

	conn, err := pool.Driver().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	testutil.GenericPlans(t, conn,
		// The completer: IdempotencyKeyListResumable.
		`PREPARE resumable (timestamptz, float8, float8, float8, float8, float8, int) AS
		 SELECT k.id
		 FROM idempotency_keys AS k
		 WHERE k.finished_at IS NULL
		   AND k.needs_attention_at IS NULL
		   AND k.last_run_at < coalesce($1::timestamptz, now()) - interval '1 second' * (
		         $2::float8 + least($3::float8 * power(2, least(k.runs - 1, 16)), $4::float8))
		   AND idempotency_key_lease_is_stale(k.lock_token, k.locked_at, k.locked_by,
		         $5::float8, $6::float8, coalesce($1::timestamptz, now()))
		 ORDER BY k.last_run_at
		 LIMIT $7`,
		// The reaper: IdempotencyKeyReap's choice of the keys it reaps (the
		// rest of the statement deletes them by id and joins what each made
		// by the resources' key indexes, or by hashing the resource tables
		// when they are small, as here).
		`PREPARE reapable (float8, int) AS
		 SELECT id
		 FROM idempotency_keys
		 WHERE recovery_point = 'finished'
		   AND finished_at < now() - make_interval(secs => $1::float8)
		 ORDER BY finished_at
		 LIMIT $2
		 FOR UPDATE SKIP LOCKED`,
		// The reaper: IdempotencyKeyTombstoneDeleteExpired's choice of the
		// tombstones it deletes (the rest deletes them by key).
		`PREPARE expired (float8, int) AS
		 SELECT user_id, idempotency_key
		 FROM idempotency_key_tombstones
		 WHERE reaped_at < now() - make_interval(secs => $1::float8)
		 ORDER BY reaped_at
		 LIMIT $2
		 FOR UPDATE SKIP LOCKED`,
		// The receipt dispatcher: ReceiptOutboxClaim, then ReceiptsRecord.
		`PREPARE claim (int) AS
		 SELECT o.payment_id, o.attempts, p.user_id, p.amount_captured AS amount, p.currency,
		        EXISTS (SELECT 1 FROM receipts AS r WHERE r.payment_id = o.payment_id) AS recorded
		 FROM receipt_outbox AS o
		 JOIN payments AS p ON p.id = o.payment_id
		 WHERE o.run_at <= now()
		 ORDER BY o.run_at
		 LIMIT $1::int
		 FOR UPDATE OF o SKIP LOCKED`,
		`PREPARE record (bigint[]) AS
		 WITH done AS (
		     DELETE FROM receipt_outbox AS o
		     WHERE o.payment_id = ANY ($1::bigint[])
		     RETURNING o.payment_id
		 )
		 INSERT INTO receipts (payment_id, user_id, amount, currency)
		 SELECT p.id, p.user_id, p.amount_captured, p.currency
		 FROM done JOIN payments AS p ON p.id = done.payment_id
		 ON CONFLICT (payment_id) DO NOTHING`,
		// The metrics collector's gauges of unfinished keys and of those
		// needing attention: IdempotencyKeyUnfinishedStats.
		`PREPARE stats (float8) AS
		 SELECT count(*),
		        coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8,
		        count(*) FILTER (WHERE created_at < now() - make_interval(secs => $1::float8)),
		        count(*) FILTER (WHERE needs_attention_at IS NOT NULL)
		 FROM idempotency_keys
		 WHERE finished_at IS NULL`,
		// The operator's `keys list` (not a worker, but it reads the same
		// keys): IdempotencyKeyListUnfinished.
		`PREPARE unfinished (boolean, bigint, int) AS
		 SELECT id
		 FROM idempotency_keys
		 WHERE finished_at IS NULL
		   AND (NOT $1::boolean OR needs_attention_at IS NOT NULL)
		   AND ($2::bigint IS NULL OR user_id = $2)
		 ORDER BY created_at, id
		 LIMIT $3`)

	for _, c := range []struct {
		name, stmt string
		uses       []string
		scans      []string // tables that must not be read whole
	}{
		{"completer", `EXECUTE resumable(NULL, 2, 1, 300, 60, 30, 100)`,
			[]string{"idempotency_keys_unfinished_idx"}, []string{"idempotency_keys"}},
		{"reaper", `EXECUTE reapable(86400, 1000)`,
			[]string{"idempotency_keys_reaper_idx"}, []string{"idempotency_keys"}},
		{"tombstones", `EXECUTE expired(86400, 1000)`,
			[]string{"idempotency_key_tombstones_reaped_at_idx"}, []string{"idempotency_key_tombstones"}},
		{"receipt claim", `EXECUTE claim(100)`,
			// Whether a receipt was recorded, the planner may hash the
			// receipts for, at this size: not asserted.
			[]string{"receipt_outbox_run_at_idx", "payments_pkey"}, []string{"receipt_outbox", "payments"}},
		{"receipt record", `EXECUTE record('{1,2,3}')`,
			// The outbox holds only what is undelivered: at 400 rows the
			// planner filters it whole, which is not asserted.
			[]string{"payments_pkey"}, []string{"payments"}},
		{"unfinished stats", `EXECUTE stats(3600)`,
			[]string{"idempotency_keys_unfinished_idx"}, []string{"idempotency_keys"}},
		{"keys list", `EXECUTE unfinished(false, NULL, 100)`,
			[]string{"idempotency_keys_unfinished_idx"}, []string{"idempotency_keys"}},
	} {
		plan := testutil.Explain(t, conn, c.stmt)
		for _, index := range c.uses {
			require.Contains(t, plan, index, "%s:\n%s", c.name, plan)
		}
		for _, table := range c.scans {
			require.NotContains(t, plan, "Seq Scan on "+table+" ", "%s:\n%s", c.name, plan)
		}
	}
}
