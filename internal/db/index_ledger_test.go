package db_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/testutil"
)

// indexLedger names, for every index of the four tables a fresh payment
// writes, the statement that reads it: the index is written by every payment
// (or every payment of its kind), so something must need it. query is the
// sqlc constant of a statement in db/queries; args are its EXECUTE
// arguments. A statement is explained as its generic plan (what pgx's cached
// statements come to) unless custom is set: a statement run once a process,
// as the CLI's are, is planned for its arguments.
var indexLedger = []struct {
	index, query, args string
	custom             bool
}{
	// The keys.
	{"idempotency_keys_pkey", "idempotencyKeyFinish", `(201, '{}', '\x7b7d', 5, '00000000-0000-0000-0000-000000000000')`, false},
	// Also the arbiter of IdempotencyKeyInsert's ON CONFLICT: one key a
	// (user, Idempotency-Key).
	{"idempotency_keys_user_id_idempotency_key_key", "idempotencyKeyGetByUserKey", `(NULL, 1, 'k-1')`, false},
	{"idempotency_keys_unfinished_idx", "idempotencyKeyListResumable", `(NULL, 2, 1, 300, 60, 30, 100)`, false},
	{"idempotency_keys_reaper_idx", "idempotencyKeyReap", `(86400, 1000)`, false},
	// The operator's `paymentsd keys list --needs-attention`.
	{"idempotency_keys_needs_attention_idx", "idempotencyKeyListUnfinished", `(true, NULL, 100)`, true},
	// The payments.
	{"payments_pkey", "paymentRecordOutcome", `('succeeded', 'pi_x', NULL, NULL, 2000, 5)`, false},
	// Also one payment a key.
	{"payments_idempotency_key_id_key", "paymentGetByIdempotencyKeyID", `(5)`, false},
	// GET /payments/{id}.
	{"payments_user_id_public_id_key", "paymentGetByPublicIDForUser", `(1, '01900000-0000-7000-8000-000000000000')`, false},
	// GET /payments/{id} with an id from before public ids (00021).
	{"payments_user_id_legacy_id_key", "paymentPublicIDByLegacyID", `(1, 2)`, false},
	// A webhook's payment, by its PaymentIntent or, before the outcome is
	// recorded, by intent (00017, 00034).
	{"payments_stripe_payment_intent_id_key", "paymentLockForEvent", `('pi_x', 'x')`, false},
	{"payments_intent_id_unresolved_idx", "paymentLockForEvent", `('pi_x', 'x')`, false},
	// A webhook's success for an intent whose payment was declined under
	// another PaymentIntent.
	{"payments_intent_id_declined_idx", "paymentLockDeclinedForIntent", `('x')`, false},
	// A capture or cancel key's payment.
	{"payments_capture_key_id_key", "paymentGetByCaptureKeyID", `(3)`, false},
	// The outbox: one receipt a payment, and the dispatcher's due rows.
	{"receipt_outbox_pkey", "receiptEnqueue", `(5)`, false},
	{"receipt_outbox_run_at_idx", "receiptOutboxClaim", `(100)`, false},
}

// unreadIndexes are the indexes of those tables that no statement reads,
// each with why it stays.
var unreadIndexes = map[string]string{
	// The trail's identity: it is appended to and never read by the service,
	// and the least SQL's audit table has the same key.
	"audit_records_pkey": "a primary key",
}

// TestEveryHotIndexEarnsItsWrite checks issue 29's rule that every index a
// fresh payment's tables carry earns its write by a statement that needs
// it: each index of idempotency_keys, payments, receipt_outbox and
// audit_records is in indexLedger (or unreadIndexes, with its reason), and
// each ledger statement, sqlc's own text prepared on FillHistory's tables,
// plans a read of its index. A new index without an entry fails here, as
// does an entry whose index is gone or whose statement stopped using it.
func TestEveryHotIndexEarnsItsWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testutil.NewDB(t)
	testutil.FillHistory(t, pool.Driver())

	var have []string
	rows, err := pool.Driver().Query(ctx, `
		SELECT indexrelid::regclass::text FROM pg_index
		WHERE indrelid IN ('idempotency_keys'::regclass, 'payments'::regclass,
		                   'receipt_outbox'::regclass, 'audit_records'::regclass)`)
	require.NoError(t, err)
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		have = append(have, name)
	}
	require.NoError(t, rows.Err())
	want := slices.Collect(maps.Keys(unreadIndexes))
	for _, e := range indexLedger {
		if !slices.Contains(want, e.index) {
			want = append(want, e.index)
		}
	}
	slices.Sort(have)
	slices.Sort(want)
	require.Equal(t, want, have, "the indexes of the tables a fresh payment writes, against the ledger")

	statements := generatedStatements(t)
	conn, err := pool.Driver().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	for i, e := range indexLedger {
		sql, ok := statements[e.query]
		require.True(t, ok, "%s: no statement %s in dbsqlc", e.index, e.query)
		mode := "force_generic_plan"
		if e.custom {
			mode = "force_custom_plan"
		}
		name := fmt.Sprintf("ledger%d", i)
		for _, stmt := range []string{`SET plan_cache_mode = ` + mode, `PREPARE ` + name + ` AS ` + sql} {
			_, err := conn.Exec(ctx, stmt)
			require.NoError(t, err, "%s: %s", e.query, stmt)
		}
		plan := testutil.Explain(t, conn, `EXECUTE `+name+e.args)
		require.Contains(t, plan, e.index, "%s (%s):\n%s", e.query, mode, plan)
	}
}
