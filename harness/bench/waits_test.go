package bench

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestWaitSumIsAMeanOverTheSamples counts backends over four samples and
// reads them back as means, the events the most first.
func TestWaitSumIsAMeanOverTheSamples(t *testing.T) {
	var a, b waitSum
	a.samples, b.samples = 2, 2
	for _, s := range [][2]string{
		{"active", ""}, {"active", ""}, {"active", "LWLock:WALWrite"}, {"idle in transaction", "Client:ClientRead"},
	} {
		a.add(s[0], s[1])
	}
	for _, s := range [][2]string{
		{"active", ""}, {"active", "IO:DataFileRead"}, {"active", "IO:DataFileRead"}, {"active", "LWLock:WALWrite"},
		{"active", "Lock:transactionid"},
	} {
		b.add(s[0], s[1])
	}
	var sum waitSum
	require.Nil(t, sum.waits())
	sum.plus(a)
	sum.plus(b)
	w := sum.waits()
	require.Equal(t, 4, w.Samples)
	require.InDelta(t, 0.75, w.OnCPU, 1e-9)
	require.InDelta(t, 0.25, w.IdleInTransaction, 1e-9)
	require.Equal(t, []WaitEvent{{"IO:DataFileRead", 0.5}, {"LWLock:WALWrite", 0.5}, {"Lock:transactionid", 0.25}}, w.Events)
	require.InDelta(t, 1.25, w.Waiting(), 1e-9)
	require.Equal(t, 2, a.samples, "plus leaves its argument alone")
}

// TestWaitsAreSampledFromTheServer holds one backend in pg_sleep and
// another idle inside a transaction while the sampler, connected to another
// database, watches theirs: it sees both, and not a third backend sleeping
// in a database it does not watch.
func TestWaitsAreSampledFromTheServer(t *testing.T) {
	ctx := context.Background()
	url, elsewhere := testutil.NewEmptyDB(t), testutil.NewEmptyDB(t)
	connect := func(url string) *pgx.Conn {
		conn, err := pgx.Connect(ctx, url)
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close(ctx) })
		return conn
	}
	idle, sleeper, other := connect(url), connect(url), connect(elsewhere)
	tx, err := idle.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SELECT 1")
	require.NoError(t, err)
	otherDone := make(chan error, 1)
	go func() {
		_, err := other.Exec(ctx, "SELECT pg_sleep(1.5)")
		otherDone <- err
	}()

	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	at := waitTarget{url: testutil.AdminURL(t), db: cfg.Database}
	var cost sideCost
	_, err = waitsDuring(ctx, at, &cost, func() (struct{}, error) {
		_, err := sleeper.Exec(ctx, "SELECT pg_sleep(1)")
		return struct{}{}, err
	})
	require.NoError(t, err)
	require.NoError(t, <-otherDone)
	w := cost.waits.waits()
	require.NotNil(t, w)
	require.GreaterOrEqual(t, w.Samples, 5, "every %s over 1 s", waitInterval)
	require.InDelta(t, 1, w.IdleInTransaction, 1e-9, "the idle transaction, in every sample")
	require.NotEmpty(t, w.Events)
	require.Equal(t, "Timeout:PgSleep", w.Events[0].Event)
	require.Greater(t, w.Events[0].Backends, 0.5, "the sleeper, in most samples: %+v", w)
	require.LessOrEqual(t, w.Events[0].Backends, 1.0, "the other database's sleeper is not counted: %+v", w)
	require.Zero(t, w.OnCPU, "the sampler does not count itself")

	// A nil cost or an empty target samples nothing; a server that cannot
	// be reached gives nothing either, and the run goes on.
	_, err = waitsDuring(ctx, at, nil, func() (int, error) { return 1, nil })
	require.NoError(t, err)
	var none sideCost
	_, err = waitsDuring(ctx, waitTarget{}, &none, func() (int, error) { return 1, nil })
	require.NoError(t, err)
	require.Nil(t, none.waits.waits())
	unreachable := waitTarget{url: "postgres://postgres@127.0.0.1:1/none?connect_timeout=1", db: at.db}
	v, err := waitsDuring(ctx, unreachable, &none, func() (int, error) { time.Sleep(2 * waitInterval); return 7, nil })
	require.NoError(t, err)
	require.Equal(t, 7, v)
	require.Nil(t, none.waits.waits())
}

func TestWaitsSection(t *testing.T) {
	r := withCosts()
	waits := func(onCPU, waiting float64, event string) *Waits {
		return &Waits{Samples: 200, OnCPU: onCPU, IdleInTransaction: 0.5,
			Events: []WaitEvent{{event, waiting}, {"LWLock:WALWrite", waiting / 4}}}
	}
	for i := range r.Points {
		r.Points[i].Waits = &WaitCosts{Replay: waits(1.5, 0.1, "LWLock:BufferMapping"), BareReplay: waits(1.4, 0.08, "LWLock:BufferMapping")}
	}
	r.Filled.Waits = &WaitCosts{Replay: waits(1.7, 0.4, "IO:DataFileRead"), BareReplay: waits(1.6, 0.3, "IO:DataFileRead")}
	text := Markdown(r, "bench.svg")
	for _, want := range []string{
		"### What the database's connections were doing, at 32 connections\n",
		"| runs | samples | in a statement, not waiting | in a statement, waiting | idle in a transaction |",
		"| service replays | 200 → 200 | 1.50 → 1.70 | 0.12 → 0.50 | 0.50 → 0.50 |",
		"- **service replays** waited most on `IO:DataFileRead` 0.00 → 0.40, `LWLock:BufferMapping` 0.10 → 0.00, `LWLock:WALWrite` 0.03 → 0.10.\n",
		"- **bare replays** waited most on `IO:DataFileRead` 0.00 → 0.30,",
	} {
		require.Contains(t, text, want)
	}
	require.NotContains(t, text, "- **service fresh** waited")

	r.Filled = nil
	require.Contains(t, Markdown(r, "bench.svg"), "| service replays | 200 | 1.50 | 0.12 | 0.50 |")
	require.NotContains(t, Markdown(sample(), "bench.svg"), "### What the database's connections were doing")
}
