package db_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
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

	_, err := provider.Up(ctx)
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
