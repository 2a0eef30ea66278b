package api_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/testutil"
)

// tally counts the statements a pool sends, by the sqlc name of each
// ("-- name: PaymentInsert :one") or, for the rest, its first word (begin,
// commit).
type tally struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *tally) add(sql string) {
	name := strings.ToLower(strings.Fields(sql + " ?")[0])
	if rest, ok := strings.CutPrefix(strings.TrimSpace(sql), "-- name: "); ok {
		name = strings.Fields(rest)[0]
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[name]++
}

// take returns the counts since the last take, and starts again.
func (c *tally) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

func (c *tally) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.add(d.SQL)
	return ctx
}
func (c *tally) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *tally) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (c *tally) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.add(d.SQL)
}
func (c *tally) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// A fresh payment writes its key twice: its insert, at the point its first
// transaction reaches (payment_created), and its finish. The first
// transaction sends no advance of the key it has just inserted.
func TestAFreshPaymentWritesItsKeyTwice(t *testing.T) {
	t.Parallel()
	sent := &tally{n: map[string]int{}}
	pool := testutil.NewDBWith(t, func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = sent })
	svc := testutil.StartService(t, testutil.ServiceOptions{Pool: pool})
	_, apiKey := svc.NewUser(t)
	paid(t, svc, apiKey, "warm-up")

	const n = 20
	sent.take()
	for i := range n {
		resp := svc.PostPayment(t, apiKey, fmt.Sprintf("fresh-%d", i), visa)
		require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	}
	got := sent.take()
	names := make([]string, 0, len(got))
	for name := range got {
		names = append(names, name)
	}
	slices.Sort(names)
	var table strings.Builder
	for _, name := range names {
		fmt.Fprintf(&table, "\n%6.2f  %s", float64(got[name])/n, name)
	}
	t.Logf("statements per fresh payment over %d payments (background workers' included):%s", n, table.String())

	require.Equal(t, n, got["IdempotencyKeyInsert"])
	require.Zero(t, got["IdempotencyKeyAdvance"], "the first transaction inserts the key where it ends")
	require.Equal(t, n, got["IdempotencyKeyFinish"])
	var points []string
	rows, err := svc.Pool.Query(context.Background(), `SELECT DISTINCT recovery_point FROM idempotency_keys`)
	require.NoError(t, err)
	points, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"finished"}, points)
}
