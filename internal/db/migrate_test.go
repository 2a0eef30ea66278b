package db_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestAnInterruptedIndexBuildIsBuiltAgain: migration 00016 builds its
// indexes concurrently, outside a transaction. A build interrupted midway
// leaves an invalid index and the migration unrecorded; running it again
// must build that index anew, not take it for done and drop the old
// indexes the cap and the completer would otherwise fall back on.
func TestAnInterruptedIndexBuildIsBuiltAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// What an interrupted CREATE INDEX CONCURRENTLY leaves.
	pool, provider := interrupted(t, 16,
		`CREATE INDEX idempotency_keys_user_id_lock_token_unfinished_idx
		     ON idempotency_keys (user_id, lock_token) WHERE recovery_point <> 'finished'`,
		`UPDATE pg_index SET indisvalid = false
		 WHERE indexrelid = 'idempotency_keys_user_id_lock_token_unfinished_idx'::regclass`)

	// Up to 00016 only: 00027 replaces the indexes it builds.
	_, err := provider.UpTo(ctx, 16)
	require.NoError(t, err)
	var invalid int
	require.NoError(t, pool.QueryRow(ctx,
		`SELECT count(*) FROM pg_index WHERE indrelid = 'idempotency_keys'::regclass AND NOT indisvalid`).Scan(&invalid))
	require.Zero(t, invalid, "no invalid index is left on idempotency_keys")
	rows, err := pool.Query(ctx, `SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'idempotency_keys'::regclass`)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, names, "idempotency_keys_user_id_lock_token_unfinished_idx")
	require.Contains(t, names, "idempotency_keys_resumable_idx")
	require.NotContains(t, names, "idempotency_keys_user_id_unfinished_idx")
	require.NotContains(t, names, "idempotency_keys_unfinished_idx")
}

// TestAnInterruptedHOTIndexBuildIsBuiltAgain: migration 00027 builds the
// indexes of unfinished and finished keys anew, concurrently, and only then
// drops the ones they replace. Run again after a build of the cap's index
// was interrupted, it must build that index anew, finish, and leave the
// constraint of 00026 validated.
func TestAnInterruptedHOTIndexBuildIsBuiltAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, provider := interrupted(t, 27,
		`CREATE INDEX idempotency_keys_cap_idx ON idempotency_keys (user_id, lock_token) WHERE finished_at IS NULL`,
		`UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'idempotency_keys_cap_idx'::regclass`)

	// Up to 00027 only: 00034 merges two of the indexes it builds.
	_, err := provider.UpTo(ctx, 27)
	require.NoError(t, err)
	var invalid int
	require.NoError(t, pool.QueryRow(ctx,
		`SELECT count(*) FROM pg_index WHERE indrelid = 'idempotency_keys'::regclass AND NOT indisvalid`).Scan(&invalid))
	require.Zero(t, invalid, "no invalid index is left on idempotency_keys")
	rows, err := pool.Query(ctx, `SELECT indexrelid::regclass::text FROM pg_index
		WHERE indrelid IN ('idempotency_keys'::regclass, 'audit_records'::regclass)`)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	for _, built := range []string{"idempotency_keys_cap_idx", "idempotency_keys_completer_idx", "idempotency_keys_reaper_idx"} {
		require.Contains(t, names, built)
	}
	for _, gone := range []string{"idempotency_keys_user_id_lock_token_unfinished_idx", "idempotency_keys_resumable_idx",
		"idempotency_keys_finished_at_idx", "audit_records_resource_idx", "audit_records_user_id_created_at_idx"} {
		require.NotContains(t, names, gone)
	}
	var validated bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT convalidated FROM pg_constraint
		WHERE conrelid = 'idempotency_keys'::regclass AND conname = 'idempotency_keys_unfinished_check'`).Scan(&validated))
	require.True(t, validated)
	var options []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = 'idempotency_keys'::regclass`).Scan(&options))
	require.Equal(t, []string{"fillfactor=85"}, options)
}

// TestStripeIDIndexesHoldOnlyKnownIDs: migration 00034 makes the unique
// indexes of Stripe's ids partial, so a row whose id is not known yet
// writes no entry, and leaves one index of unfinished keys. Uniqueness and
// the constraint's name, which the resolve tells a duplicate by, stay;
// run again after it was interrupted past a swap, and after its Down, it
// ends the same.
func TestStripeIDIndexesHoldOnlyKnownIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Interrupted after the payments' swap, with the refunds' build left
	// invalid.
	pool, provider := interrupted(t, 34,
		`INSERT INTO users (email, api_key_hash) VALUES ('ids@example.com', sha256('k'))`,
		`INSERT INTO payments (user_id, amount, currency, payment_method, stripe_payment_intent_id)
		 SELECT id, 1500, 'usd', 'pm_card_visa', pi FROM users, (VALUES (NULL), (NULL), ('pi_1')) AS v (pi)`,
		`ALTER TABLE payments DROP CONSTRAINT payments_stripe_payment_intent_id_key`,
		`CREATE UNIQUE INDEX payments_stripe_payment_intent_id_key ON payments (stripe_payment_intent_id)
		 WHERE stripe_payment_intent_id IS NOT NULL`,
		`CREATE UNIQUE INDEX refunds_stripe_refund_id_known ON refunds (stripe_refund_id) WHERE stripe_refund_id IS NOT NULL`,
		`UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'refunds_stripe_refund_id_known'::regclass`)
	check := func() {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT c.relname || ' ' || pg_get_indexdef(x.indexrelid) || ' ' || x.indisvalid
			FROM pg_index AS x JOIN pg_class AS c ON c.oid = x.indexrelid
			WHERE x.indrelid IN ('payments'::regclass, 'refunds'::regclass, 'idempotency_keys'::regclass)
			  AND c.relname ~ '^(payments_stripe|refunds_stripe|idempotency_keys_(unfinished|cap|completer))'
			ORDER BY 1`)
		require.NoError(t, err)
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Equal(t, []string{
			"idempotency_keys_unfinished_idx CREATE INDEX idempotency_keys_unfinished_idx ON public.idempotency_keys USING btree (user_id, lock_token) WHERE (finished_at IS NULL) true",
			"payments_stripe_payment_intent_id_key CREATE UNIQUE INDEX payments_stripe_payment_intent_id_key ON public.payments USING btree (stripe_payment_intent_id) WHERE (stripe_payment_intent_id IS NOT NULL) true",
			"refunds_stripe_refund_id_key CREATE UNIQUE INDEX refunds_stripe_refund_id_key ON public.refunds USING btree (stripe_refund_id) WHERE (stripe_refund_id IS NOT NULL) true",
		}, got)
		_, err = pool.Exec(ctx, `INSERT INTO payments (user_id, amount, currency, payment_method, stripe_payment_intent_id)
			SELECT id, 1500, 'usd', 'pm_card_visa', 'pi_1' FROM users`)
		require.True(t, db.IsUniqueViolation(err, "payments_stripe_payment_intent_id_key"), "%v", err)
	}

	_, err := provider.Up(ctx)
	require.NoError(t, err)
	check()
	_, err = provider.DownTo(ctx, 33)
	require.NoError(t, err)
	var constraints int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_constraint
		WHERE conname IN ('payments_stripe_payment_intent_id_key', 'refunds_stripe_refund_id_key')`).Scan(&constraints))
	require.Equal(t, 2, constraints, "Down makes them constraints again")
	_, err = provider.Up(ctx)
	require.NoError(t, err)
	check()
}

// TestAnInterruptedIntentIndexMigrationKeepsWhatItBuilt: migration 00017
// builds the partial intent indexes concurrently and then drops the full
// ones. Run again after an interruption, it must rebuild a new index that
// an interrupted build left invalid, keep one that was built (dropping it
// would leave the webhook's lookup without an index while it is rebuilt),
// and finish dropping the old ones.
func TestAnInterruptedIntentIndexMigrationKeepsWhatItBuilt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Interrupted while building the refunds' index, after the payments'
	// was built: one valid new index, one invalid, both old ones still there.
	pool, provider := interrupted(t, 17,
		`CREATE INDEX payments_intent_id_unresolved_idx ON payments (intent_id) WHERE stripe_payment_intent_id IS NULL`,
		`CREATE INDEX refunds_intent_id_unresolved_idx ON refunds (intent_id) WHERE stripe_refund_id IS NULL`,
		`UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'refunds_intent_id_unresolved_idx'::regclass`)
	oid := func(name string) (id uint32) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(to_regclass($1)::oid, 0)`, name).Scan(&id))
		return id
	}
	built, invalid := oid("payments_intent_id_unresolved_idx"), oid("refunds_intent_id_unresolved_idx")

	_, err := provider.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, built, oid("payments_intent_id_unresolved_idx"), "the valid index is kept, not rebuilt")
	require.NotEqual(t, invalid, oid("refunds_intent_id_unresolved_idx"), "the invalid index is built again")
	var invalids int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_index
		WHERE indrelid IN ('payments'::regclass, 'refunds'::regclass) AND NOT indisvalid`).Scan(&invalids))
	require.Zero(t, invalids)
	require.Zero(t, oid("payments_intent_id_idx"), "the old indexes are gone")
	require.Zero(t, oid("refunds_intent_id_idx"))
}

// interrupted is a database migrated back to before version (undoing every
// later migration too), where stmts then leave what an interrupted run of
// version would, and the provider that runs the migrations up again.
func interrupted(t *testing.T, version int64, stmts ...string) (*db.Pool, *goose.Provider) {
	t.Helper()
	ctx := context.Background()
	pool := testutil.NewDB(t)
	provider, sqlDB, err := db.Migrator(pool)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sqlDB.Close() })
	_, err = provider.DownTo(ctx, version-1)
	require.NoError(t, err)
	for _, stmt := range stmts {
		_, err := pool.Exec(ctx, stmt)
		require.NoError(t, err)
	}
	return pool, provider
}

// TestManualCaptureBackfillsWhatWasCharged: migration 00023 gives every
// payment made before it capture_method automatic, and amount_captured its
// amount when it was charged (succeeded, refunded or disputed alike), 0
// otherwise; and its Down goes back cleanly.
func TestManualCaptureBackfillsWhatWasCharged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, provider := interrupted(t, 23,
		`INSERT INTO users (email, api_key_hash) VALUES ('backfill@example.com', sha256('k'))`,
		`INSERT INTO payments (user_id, amount, currency, payment_method, status, amount_reserved, amount_refunded, disputed_at)
		 SELECT id, 1500, 'usd', 'pm_card_visa', s, r, r, d
		 FROM users,
		      (VALUES ('succeeded', 0, NULL::timestamptz), ('succeeded', 1500, NULL), ('succeeded', 500, now()),
		              ('pending', 0, NULL), ('failed', 0, NULL)) AS v (s, r, d)`)

	_, err := provider.Up(ctx)
	require.NoError(t, err)
	rows, err := pool.Query(ctx, `SELECT status || ' ' || capture_method || ' ' || amount_captured FROM payments ORDER BY id`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"succeeded automatic 1500", "succeeded automatic 1500", "succeeded automatic 1500",
		"pending automatic 0", "failed automatic 0"}, got)

	_, err = pool.Exec(ctx, `UPDATE payments SET amount_captured = 100 WHERE amount_reserved = 1500`)
	require.Error(t, err, "refunds may never take more than was captured")

	_, err = provider.DownTo(ctx, 22)
	require.NoError(t, err)
	_, err = provider.Up(ctx)
	require.NoError(t, err)
}

// TestSecondRefundsMigrationGoesBack: migration 00030 adds
// refunds.second_refunds and drops the alarm index of 00029; its Down
// builds the index again and drops the column, and Up runs again.
func TestSecondRefundsMigrationGoesBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, provider := interrupted(t, 30)
	indexed := func() bool {
		var ok bool
		require.NoError(t, pool.QueryRow(ctx,
			`SELECT EXISTS (SELECT 1 FROM pg_index WHERE indexrelid = to_regclass('stripe_events_alarm_object_id_idx') AND indisvalid)`).Scan(&ok))
		return ok
	}
	require.True(t, indexed())

	_, err := provider.UpTo(ctx, 30)
	require.NoError(t, err)
	require.False(t, indexed())
	_, err = pool.Exec(ctx, `SELECT second_refunds FROM refunds`)
	require.NoError(t, err)

	_, err = provider.DownTo(ctx, 29)
	require.NoError(t, err)
	require.True(t, indexed())
	_, err = pool.Exec(ctx, `SELECT second_refunds FROM refunds`)
	require.Error(t, err)
	_, err = provider.Up(ctx)
	require.NoError(t, err)
}

// TestSecondRefundsBackfilledFromAlarms: 00030 fills refunds.second_refunds
// in from the alarm rows a hand-over for a second Refund left before it, in
// the words of 93cb3dd: both forms, the furthest status of a Refund
// (succeeded over pending), refund_failed as the latest row words it; a
// Refund whose reaped key was not brought back, other alarms and other
// outcomes are left out; and run again, it changes nothing.
func TestSecondRefundsBackfilledFromAlarms(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, provider := interrupted(t, 30,
		`INSERT INTO users (email, api_key_hash) VALUES ('second@example.com', sha256('k'))`,
		`INSERT INTO payments (user_id, amount, currency, payment_method, status, amount_captured, amount_reserved)
		 SELECT id, 2000, 'usd', 'pm_card_visa', 'succeeded', 2000, 1200 FROM users`,
		`INSERT INTO refunds (user_id, payment_id, payment_public_id, amount, currency, status, stripe_refund_id)
		 SELECT user_id, id, public_id, 600, 'usd', s, r FROM payments, (VALUES ('pending', 're_A1'), ('failed', 're_A2')) AS v (s, r)`)
	var one, two int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM refunds WHERE stripe_refund_id = 're_A1'`).Scan(&one))
	require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM refunds WHERE stripe_refund_id = 're_A2'`).Scan(&two))
	records := func(second string, refund int64, status string) string {
		return fmt.Sprintf("Refund %s of refund %d's intent is %s for 600, and refund %d records Refund re_A1 (pending for 600): "+
			"a second refund, money being returned twice", second, refund, status, refund)
	}
	failed := func(second string, refund int64, status string) string {
		return fmt.Sprintf("Refund %s of refund %d's intent is %s for 600, and refund %d was recorded failed (lost_or_stolen_card) "+
			"by Refund re_A2: money returned for a refund answered failed", second, refund, status, refund)
	}
	rows := []struct{ outcome, reason string }{
		{"alarm", records("re_B1", one, "pending")},
		{"alarm", records("re_B1", one, "succeeded")},
		{"alarm", records("re_B1", one, "pending") + "; an earlier event of Refund re_B1 raised this and handed the key to the operator then: not reopened"},
		{"alarm", records("re_B2", one, "requires_action")},
		{"alarm", records("re_B3", one, "succeeded") + "; its reaped key was reaped, and key 9 holds its idempotency key now: not brought back, its tombstone kept (docs/operations.md)"},
		{"ignored", records("re_B4", one, "succeeded")},
		{"alarm", failed("re_C1", two, "succeeded")},
		{"alarm", "Refund re_A1 is for 700, refund 1 for 600"},
	}
	for i, r := range rows {
		_, err := pool.Exec(ctx, `INSERT INTO stripe_events (id, type, object_id, stripe_created, received_at, outcome, reason)
			VALUES ($1, 'refund.updated', 're_x', now(), now() + $2 * interval '1 second', $3, $4)`,
			fmt.Sprintf("evt_backfill%d", i), i, r.outcome, r.reason)
		require.NoError(t, err)
	}
	want := map[int64]string{
		one: `{"re_B1": {"status": "succeeded", "refund_failed": false}, "re_B2": {"status": "pending", "refund_failed": false}}`,
		two: `{"re_C1": {"status": "succeeded", "refund_failed": true}}`,
	}
	check := func() {
		for id, w := range want {
			var got string
			require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(second_refunds::text, '') FROM refunds WHERE id = $1`, id).Scan(&got))
			require.JSONEq(t, w, got, "refund %d", id)
		}
	}
	_, err := provider.UpTo(ctx, 30)
	require.NoError(t, err)
	check()

	// Run again (a crash before goose recorded it): what is there stays,
	// what is recorded since is not overwritten.
	_, err = pool.Exec(ctx, `UPDATE refunds SET second_refunds = second_refunds || '{"re_B2": {"status": "failed", "refund_failed": false}}' WHERE id = $1`, one)
	require.NoError(t, err)
	want[one] = `{"re_B1": {"status": "succeeded", "refund_failed": false}, "re_B2": {"status": "failed", "refund_failed": false}}`
	_, err = provider.ApplyVersion(ctx, 30, false)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ALTER TABLE refunds ADD COLUMN second_refunds jsonb`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE refunds SET second_refunds = $1::jsonb WHERE id = $2`, want[one], one)
	require.NoError(t, err)
	_, err = provider.ApplyVersion(ctx, 30, true)
	require.NoError(t, err)
	check()
	_, err = provider.Up(ctx)
	require.NoError(t, err)
}

// TestSecondRefundsBackfillKeepsAFailedSecondRefundReturning: before
// 00030 (93cb3dd), a second Refund's failure was recorded only as an
// 'ignored' stripe_events row ("a second Refund, which returned
// nothing"). The backfill reads the hand-over alarms alone, so a Refund
// handed over pending that failed since is backfilled pending: moneyMoved
// counts it as returning the money, and the refund's own Refund failing
// later is not recorded failed (ownFailedBesideSeconds), its amount held
// and its key handed to the operator for money a failed Refund "was
// returning".
func TestSecondRefundsBackfillKeepsAFailedSecondRefundReturning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, provider := interrupted(t, 30,
		`INSERT INTO users (email, api_key_hash) VALUES ('failedsecond@example.com', sha256('k'))`,
		`INSERT INTO payments (user_id, amount, currency, payment_method, status, amount_captured, amount_reserved)
		 SELECT id, 2000, 'usd', 'pm_card_visa', 'succeeded', 2000, 600 FROM users`,
		`INSERT INTO refunds (user_id, payment_id, payment_public_id, amount, currency, status, stripe_refund_id)
		 SELECT user_id, id, public_id, 600, 'usd', 'pending', 're_A1' FROM payments`)
	var one int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM refunds WHERE stripe_refund_id = 're_A1'`).Scan(&one))
	rows := []struct{ outcome, reason string }{
		{"alarm", fmt.Sprintf("Refund re_B1 of refund %d's intent is pending for 600, and refund %d records Refund re_A1 (pending for 600): "+
			"a second refund, money being returned twice", one, one)},
		{"ignored", fmt.Sprintf("Refund re_B1 of refund %d's intent is failed: a second Refund, which returned nothing (refund %d records Refund re_A1)", one, one)},
	}
	for i, r := range rows {
		_, err := pool.Exec(ctx, `INSERT INTO stripe_events (id, type, object_id, stripe_created, received_at, outcome, reason)
			VALUES ($1, 'refund.updated', 're_B1', now(), now() + $2 * interval '1 second', $3, $4)`,
			fmt.Sprintf("evt_failedsecond%d", i), i, r.outcome, r.reason)
		require.NoError(t, err)
	}
	_, err := provider.UpTo(ctx, 30)
	require.NoError(t, err)
	var got string
	require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(second_refunds -> 're_B1' ->> 'status', '') FROM refunds WHERE id = $1`, one).Scan(&got))
	require.Contains(t, []string{"", "failed"}, got,
		"re_B1 failed before 00030 (its 'ignored' row says it returned nothing), yet 00030 backfills it %q on refund %d: "+
			"moneyMoved counts it as returning the money", got, one)
}

// TestValueDomainsKeepEveryRule: migration 00035 moves each rule about a
// single value from a table's CHECK into a domain. Each statement below
// breaks one rule and nothing else: each is refused (23514) before the
// migration by the table's CHECK, after it by the domain's, and after its
// Down by the table's again, while the statements that break none go
// through. The migration rewrites no table and keeps the keys' unique
// index; a run interrupted while the declined payments' index was being
// built again builds it once more.
func TestValueDomainsKeepEveryRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, provider := interrupted(t, 35,
		`INSERT INTO users (email, api_key_hash) VALUES ('domains@example.com', sha256('k'))`,
		`INSERT INTO idempotency_keys (user_id, idempotency_key, flow, request_method, request_path, request_params,
		                              request_fingerprint, recovery_point, lock_token, locked_at)
		 SELECT id, 'open', 'payment', 'POST', '/payments', '{}', sha256('y'), 'started', gen_random_uuid(), now() FROM users`,
		`INSERT INTO payments (user_id, amount, currency, payment_method, status, amount_captured, amount_reserved, amount_refunded)
		 SELECT id, 1500, 'usd', 'pm_card_visa', 'succeeded', 1500, 500, 300 FROM users`,
		`INSERT INTO refunds (user_id, payment_id, payment_public_id, amount, currency)
		 SELECT user_id, id, public_id, 300, 'usd' FROM payments`,
		`INSERT INTO idempotency_key_tombstones (user_id, idempotency_key, request_method, request_path,
		                                        request_fingerprint, response_code, finished_at)
		 SELECT id, 'gone', 'POST', '/payments', sha256('z'), 201, now() FROM users`)
	const key, payment = `UPDATE idempotency_keys SET %s`, `UPDATE payments SET %s`
	const refund, tombstone = `UPDATE refunds SET %s`, `UPDATE idempotency_key_tombstones SET %s`
	broken := []string{
		fmt.Sprintf(key, `idempotency_key = ''`),
		fmt.Sprintf(key, `idempotency_key = repeat('k', 256)`),
		fmt.Sprintf(key, `request_fingerprint = '\x00'`),
		fmt.Sprintf(key, `flow = 'Payment'`),
		fmt.Sprintf(key, `recovery_point = 'Started'`),
		fmt.Sprintf(key, `last_error = repeat('e', 1001)`),
		fmt.Sprintf(key, `lock_token = NULL, locked_at = NULL, needs_attention_at = now(), needs_attention_kind = 'other'`),
		fmt.Sprintf(payment, `amount = 0, amount_captured = 0, amount_reserved = 0, amount_refunded = 0`),
		fmt.Sprintf(payment, `amount = 100000000`),
		fmt.Sprintf(payment, `currency = 'USD'`),
		fmt.Sprintf(payment, `payment_method = ''`),
		fmt.Sprintf(payment, `description = repeat('d', 1001)`),
		fmt.Sprintf(payment, `status = 'paid'`),
		fmt.Sprintf(payment, `capture_method = 'later'`),
		fmt.Sprintf(payment, `charge_attempt = 0`),
		fmt.Sprintf(payment, `capture_attempt = 0`),
		fmt.Sprintf(refund, `amount = 0`),
		fmt.Sprintf(refund, `currency = 'us'`),
		fmt.Sprintf(refund, `status = 'refunded'`),
		fmt.Sprintf(refund, `reason = 'changed_mind'`),
		fmt.Sprintf(refund, `refund_attempt = 0`),
		fmt.Sprintf(tombstone, `idempotency_key = ''`),
		fmt.Sprintf(tombstone, `request_fingerprint = sha224('z')`),
		// Two of the row rules, which stay CHECKs.
		fmt.Sprintf(key, `locked_at = NULL`),
		fmt.Sprintf(payment, `amount_refunded = 600`),
	}
	fine := []string{
		fmt.Sprintf(key, `idempotency_key = repeat('k', 255), last_error = repeat('e', 1000), flow = 'refund_2'`),
		fmt.Sprintf(key, `lock_token = NULL, locked_at = NULL, needs_attention_at = now(), needs_attention_kind = 'conflict'`),
		fmt.Sprintf(payment, `description = NULL, status = 'canceled', capture_method = 'manual', amount = 99999999, currency = 'eur'`),
		fmt.Sprintf(refund, `reason = 'fraudulent', status = 'succeeded', refund_attempt = 2`),
		fmt.Sprintf(refund, `reason = NULL`),
	}
	// each runs every statement in a transaction rolled back, and returns
	// the constraint that refused each of the broken ones.
	each := func() []string {
		t.Helper()
		var names []string
		for _, stmt := range append(slices.Clone(broken), fine...) {
			tx, err := pool.Driver().Begin(ctx)
			require.NoError(t, err)
			_, err = tx.Exec(ctx, stmt)
			require.NoError(t, tx.Rollback(ctx))
			if slices.Contains(fine, stmt) {
				require.NoError(t, err, stmt)
				continue
			}
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr, stmt)
			require.Equal(t, "23514", pgErr.Code, stmt)
			names = append(names, pgErr.ConstraintName)
		}
		return names
	}
	storage := func() (oids []uint32) {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT relfilenode FROM pg_class WHERE relname IN ('idempotency_keys', 'payments',
			'refunds', 'idempotency_key_tombstones', 'idempotency_keys_user_id_idempotency_key_key') ORDER BY relname`)
		require.NoError(t, err)
		oids, err = pgx.CollectRows(rows, pgx.RowTo[uint32])
		require.NoError(t, err)
		return oids
	}
	checks := func() (n int) {
		t.Helper()
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_constraint WHERE contype = 'c'
			AND conrelid IN ('idempotency_keys'::regclass, 'payments'::regclass)`).Scan(&n))
		return n
	}
	before, stored := each(), storage()
	require.Len(t, slices.Compact(slices.Sorted(slices.Values(before))), 23, "the 21 CHECKs moved and 2 that stay each refuse: %v", before)
	require.Equal(t, 22, checks())

	_, err := provider.UpTo(ctx, 35)
	require.NoError(t, err)
	after := each()
	require.Equal(t, []string{
		"client_key_length", "client_key_length", "sha256_digest_length", "flow_name_form", "recovery_point_name_form",
		"error_text_length", "attention_kind_known",
		"money_amount_range", "money_amount_range", "currency_code_form", "payment_method_ref_length",
		"description_text_length", "payment_status_known", "capture_method_known", "attempt_number_from_one",
		"attempt_number_from_one",
		"money_amount_range", "currency_code_form", "refund_status_known", "refund_reason_known", "attempt_number_from_one",
		"client_key_length", "sha256_digest_length",
		"idempotency_keys_lease_check", "payments_amount_refunded_check",
	}, after)
	require.Equal(t, stored, storage(), "no table is rewritten, and the keys' unique index is kept")
	require.Equal(t, 8, checks(), "the hot tables keep only the rules about a whole row as CHECKs")

	// Interrupted while building the declined payments' index again.
	_, err = pool.Exec(ctx, `DELETE FROM goose_db_version WHERE version_id = 35`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'payments_intent_id_declined_idx'::regclass`)
	require.NoError(t, err)
	_, err = provider.UpTo(ctx, 35)
	require.NoError(t, err)
	var valid bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT indisvalid FROM pg_index
		WHERE indexrelid = 'payments_intent_id_declined_idx'::regclass`).Scan(&valid))
	require.True(t, valid, "the rerun builds the invalid index again")
	require.Equal(t, after, each())

	_, err = provider.DownTo(ctx, 34)
	require.NoError(t, err)
	require.Equal(t, before, each(), "Down names each table's CHECK again")
	require.Equal(t, stored, storage())
	_, err = provider.Up(ctx)
	require.NoError(t, err)
}

// TestUUIDv7InPLpgSQLMakesTheSameIDs: migration 00036 writes
// paymentsd_uuid_v7 in PL/pgSQL. Before it, after it and after its Down,
// the function makes version 7, RFC 9562 variant UUIDs whose first 48 bits
// are the millisecond it is given, random otherwise, and is the public id's
// default.
func TestUUIDv7InPLpgSQLMakesTheSameIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, provider := interrupted(t, 36,
		`INSERT INTO users (email, api_key_hash) VALUES ('uuid@example.com', sha256('k'))`)
	check := func(language string) {
		t.Helper()
		var lang string
		require.NoError(t, pool.QueryRow(ctx, `SELECT l.lanname FROM pg_proc AS p JOIN pg_language AS l ON l.oid = p.prolang
			WHERE p.proname = 'paymentsd_uuid_v7'`).Scan(&lang))
		require.Equal(t, language, lang)
		at := time.Date(2026, 11, 28, 7, 5, 1, 234_000_000, time.UTC)
		var a, b uuid.UUID
		require.NoError(t, pool.QueryRow(ctx, `SELECT paymentsd_uuid_v7($1), paymentsd_uuid_v7($1)`, at).Scan(&a, &b))
		for _, id := range []uuid.UUID{a, b} {
			require.Equal(t, uuid.Version(7), id.Version(), id)
			require.Equal(t, uuid.RFC4122, id.Variant(), id)
			sec, nsec := id.Time().UnixTime()
			require.Equal(t, at, time.Unix(sec, nsec).UTC(), id)
		}
		require.NotEqual(t, a, b, "the rest is random")
		var public uuid.UUID
		require.NoError(t, pool.QueryRow(ctx, `INSERT INTO payments (user_id, amount, currency, payment_method)
			SELECT id, 1500, 'usd', 'pm_card_visa' FROM users RETURNING public_id`).Scan(&public))
		require.Equal(t, uuid.Version(7), public.Version())
	}
	check("sql")
	_, err := provider.Up(ctx)
	require.NoError(t, err)
	check("plpgsql")
	_, err = provider.DownTo(ctx, 35)
	require.NoError(t, err)
	check("sql")
	_, err = provider.Up(ctx)
	require.NoError(t, err)
}
