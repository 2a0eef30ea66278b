package phases_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestCapReadsOnlyTheUsersUnfinishedKeys checks the plan of the cap on a
// user's unfinished keys, the subquery of IdempotencyKeyInsert, on a table
// of many finished keys and a few unfinished ones over several users, as
// the prepared statement's generic plan: it must look the user up in the
// index of unfinished keys by user, never walk every user's (migration
// 00016, where it did until then in the completer's index; 00027 moved both
// indexes' predicates to finished_at; 00034 left the one).
func TestCapReadsOnlyTheUsersUnfinishedKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testutil.NewDB(t)
	_, err := pool.Exec(ctx, `
		INSERT INTO users (email, api_key_hash)
		SELECT 'cap-' || u || '@example.com', sha256(u::text::bytea) FROM generate_series(1, 8) AS u`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
		INSERT INTO idempotency_keys (user_id, idempotency_key, flow, request_method, request_path,
		                              request_params, request_fingerprint, recovery_point,
		                              finished_at, response_code, response_body)
		SELECT u.id, 'k-' || n, 'payments', 'POST', '/payments', '{}', sha256(n::text::bytea),
		       CASE WHEN n % 1000 = 0 THEN 'started' ELSE 'finished' END,
		       CASE WHEN n % 1000 = 0 THEN NULL ELSE now() END,
		       CASE WHEN n % 1000 = 0 THEN NULL ELSE 201 END,
		       CASE WHEN n % 1000 = 0 THEN NULL ELSE '{}'::bytea END
		FROM generate_series(1, 40000) AS n
		JOIN users AS u ON u.id = (SELECT min(id) FROM users) + n % 8`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE idempotency_keys`)
	require.NoError(t, err)

	conn, err := pool.Driver().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	// IdempotencyKeyInsert's cap, as it stands in its WHERE clause.
	testutil.GenericPlans(t, conn, `PREPARE cap (bigint, int) AS
		 SELECT count(*) FROM (
		     SELECT 1 FROM idempotency_keys
		     WHERE user_id = $1 AND finished_at IS NULL
		     LIMIT $2
		 ) AS unfinished`)
	plan := testutil.Explain(t, conn, `EXECUTE cap(1, 1000)`)
	require.Contains(t, plan, "idempotency_keys_unfinished_idx", plan)
	require.Contains(t, plan, "Index Cond: (user_id = $1)", plan)
}
