package workers_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/testutil"
	"github.com/paymentsd/paymentsd/internal/workers"
)

// listens records the LISTEN statements a pool's connections send.
type listens struct {
	mu   sync.Mutex
	seen []string
}

func (l *listens) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(strings.ToUpper(strings.TrimSpace(d.SQL)), "LISTEN") {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.seen = append(l.seen, d.SQL)
	}
	return ctx
}

func (*listens) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (l *listens) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen...)
}

// Behind PgBouncer in transaction pooling mode a LISTEN lands on a server
// connection that is not the client's for long: River must poll there.
// The URL's query exec mode says so, and River then never listens, yet its
// leader runs the periodic jobs and its workers work the jobs inserted:
// here a receipt job of a previous version, moved into the outbox and
// delivered. In the default mode the same service listens, which shows the
// check can fail.
func TestRiverPollsWhenThePoolIsTransactionPooled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode     pgx.QueryExecMode
		pollOnly bool
	}{
		{pgx.QueryExecModeExec, true},
		{pgx.QueryExecModeSimpleProtocol, true},
		{pgx.QueryExecModeCacheStatement, false},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			t.Parallel()
			traced := &listens{}
			configure := func(cfg *pgxpool.Config) {
				cfg.ConnConfig.DefaultQueryExecMode = tc.mode
				cfg.ConnConfig.Tracer = traced
			}
			// The default mode prepares statements, which no
			// transaction pooler (TEST_POOLER_URL) keeps.
			newDB := testutil.NewDBWith
			if tc.mode == pgx.QueryExecModeCacheStatement {
				newDB = testutil.NewDirectDBWith
			}
			pool := newDB(t, configure)
			require.Equal(t, tc.pollOnly, workers.PollOnly(pool, workers.Config{}))
			paymentID := legacyReceiptJob(t, pool)

			testutil.StartService(t, testutil.ServiceOptions{Pool: pool,
				Workers: workers.Config{Receipts: workers.DispatcherConfig{Interval: 20 * time.Millisecond}}})
			testutil.WaitForf(t, 15*time.Second, 50*time.Millisecond, func() bool {
				return count(t, pool, "SELECT count(*) FROM receipts WHERE payment_id = $1", paymentID) == 1 &&
					count(t, pool, "SELECT count(DISTINCT kind) FROM river_job WHERE state = 'completed' AND kind IN ('receipt', 'completer', 'reaper')") == 3
			}, "the receipt job, the completer and the reaper ran, and the receipt was delivered")
			if tc.pollOnly {
				require.Empty(t, traced.list(), "River listened")
			} else {
				require.NotEmpty(t, traced.list(), "River listens on a direct connection")
			}
		})
	}
}

// legacyReceiptJob inserts a succeeded payment and the River receipt job a
// version before the receipt outbox enqueued for it, and returns the
// payment's id.
func legacyReceiptJob(t *testing.T, pool *db.Pool) int64 {
	t.Helper()
	ctx := context.Background()
	var userID, paymentID int64
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO users (email, api_key_hash) VALUES ('old@example.com', sha256('old')) RETURNING id`).Scan(&userID))
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO payments (user_id, amount, currency, payment_method, status)
		VALUES ($1, 2000, 'usd', 'pm_card_visa', 'succeeded') RETURNING id`, userID).Scan(&paymentID))
	inserter, err := river.NewClient(riverpgxv5.New(pool.Driver()), &river.Config{})
	require.NoError(t, err)
	_, err = inserter.Insert(ctx, workers.LegacyReceiptArgs{PaymentID: paymentID}, nil)
	require.NoError(t, err)
	return paymentID
}
