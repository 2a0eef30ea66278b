package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/testutil"
)

func TestSideCostSumsTheRunsPerRequest(t *testing.T) {
	stats := func(calls, ms, hit, read, dirtied, written, fpi, wal int64) statementStats {
		return statementStats{query: "q", calls: calls, totalMs: float64(ms), blocksHit: hit, blocksRead: read,
			blocksDirtied: dirtied, blocksWritten: written, walFPI: fpi, walBytes: wal}
	}
	a := snapshot{1: stats(10, 5, 100, 10, 10, 0, 1, 1000), 2: stats(3, 1, 30, 3, 0, 0, 0, 0)}
	// Between a and b statement 1 ran 20 times and 2 not at all; between b
	// and c, 1 ran 10 times more and 3 appeared.
	b := snapshot{1: stats(30, 25, 300, 30, 50, 2, 21, 21000), 2: stats(3, 1, 30, 3, 0, 0, 0, 0)}
	c := snapshot{1: stats(40, 35, 400, 40, 70, 2, 31, 31000), 2: stats(3, 1, 30, 3, 0, 0, 0, 0),
		3: stats(10, 10, 200, 0, 0, 0, 0, 0)}

	var side sideCost
	side.add(a, b, 10)
	side.add(b, c, 10)
	require.Equal(t, &DBCost{
		Requests: 20, Statements: 2, ExecMs: 2,
		BlocksHit: 25, BlocksRead: 1.5, BlocksDirtied: 3, BlocksWritten: 0.1,
		FullPageImages: 1.5, WALBytes: 1500,
	}, side.cost())

	// Without pg_stat_statements the snapshots are nil, and nothing is counted.
	var none sideCost
	none.add(nil, nil, 10)
	require.Nil(t, none.cost())
	var nilSide *sideCost
	nilSide.add(a, b, 10)
	require.Nil(t, nilSide.cost())
	require.Nil(t, (&costSums{}).costs())

	sums := costSums{}
	sums.replay.add(a, b, 10)
	costs := sums.costs()
	require.NotNil(t, costs.Replay)
	require.Nil(t, costs.Fresh)
}

// withCosts is sampleFilled with what each side cost the database, empty and
// filled: the filled fresh payments writing whole pages into the WAL.
func withCosts() *Results {
	r := sampleFilled()
	cost := func(ms, read, fpi, walKiB float64) *DBCost {
		return &DBCost{Requests: 1000, Statements: 9, ExecMs: ms, BlocksHit: 120, BlocksRead: read, BlocksDirtied: 6,
			FullPageImages: fpi, WALBytes: walKiB * 1024}
	}
	for i := range r.Points {
		r.Points[i].Costs = &Costs{Fresh: cost(1.2, 0.01, 0.02, 5), BareFresh: cost(1.0, 0.01, 0.02, 4.8),
			FreshSQL: cost(0.9, 0, 0.01, 4.7), Replay: cost(0.1, 0, 0, 0), BareReplay: cost(0.08, 0, 0, 0)}
	}
	r.Filled.Costs = &Costs{Fresh: cost(2.5, 1.25, 1.9, 16.5), BareFresh: cost(2.2, 1.2, 1.8, 16),
		FreshSQL: cost(2, 1.1, 1.85, 15.5), Replay: cost(0.3, 2, 0, 0), BareReplay: cost(0.25, 2, 0, 0)}
	r.Filled.Checkpoints = &Checkpoints{Before: 150, After: 550, Timeout: 900}
	return r
}

func TestDBCostSection(t *testing.T) {
	r := withCosts()
	text := Markdown(r, "docs/bench.svg")
	for _, want := range []string{
		"### What a request costs the database, at 32 connections\n",
		"Each cell is the empty database's figure, then the filled one's.",
		"| service fresh | 1.20 → 2.50 | 120 → 120 | 0.01 → 1.25 | 6.00 → 6.00 | 0.02 → 1.90 | 5.0 KiB → 16.5 KiB |",
		"| fresh.sql | 0.90 → 2.00 | 120 → 120 | 0.00 → 1.10 | 6.00 → 6.00 | 0.01 → 1.85 | 4.7 KiB → 15.5 KiB |",
		"| bare replays | 0.08 → 0.25 | 120 → 120 | 0.00 → 2.00 | 6.00 → 6.00 | 0.00 → 0.00 | 0.0 KiB → 0.0 KiB |",
		"On the filled database a fresh payment through the service wrote 1.90 full-page images and 16.5 KiB of\nWAL, against 0.02 and 5.0 KiB on the empty one, and fresh.sql alone",
		"around them, 1.85 and 15.5 KiB against 0.01 and 4.7 KiB.\n\nEvery payment",
		"That checkpoint was 2m30s old when the\nmeasured runs began and 9m10s when they ended; the server checkpoints at least\nevery 15m0s (`checkpoint_timeout`).",
	} {
		require.Contains(t, text, want)
	}
	require.Less(t, strings.Index(text, "## Where the database time goes"), strings.Index(text, "### What a request costs the database"))

	r.Filled.Checkpoints.During = true
	require.Contains(t, Markdown(r, "bench.svg"), "9m10s when they ended (another came during them); the server")

	// Replays short of the empty database's, as far as the bare's.
	r.Filled.Replay, r.Filled.BareReplay = load(3300, 12), load(3500, 11)
	r.Filled.Costs.Replay.BlocksHit, r.Points[2].Costs.Replay.BlocksHit = 6, 4
	text = Markdown(r, "bench.svg")
	require.Contains(t, text, "Replays of filled keys kept 87% of the empty database's throughput, and the bare service's 88% of its own.\n"+
		"A replay's one indexed read found 6.0 buffers instead of 4.0 (a deeper index, and the key's row one of\n"+
		"millions) and spent 0.300 ms in its statement instead of 0.100, with 2.00 blocks read from outside the pool.\n"+
		"That is the database's cost at this size: the bare service, which does nothing else, pays it as the\nservice does.")
	r.Filled.BareReplay = load(3900, 11)
	require.Contains(t, Markdown(r, "bench.svg"), "The bare service lost less: the rest of the service's loss is its own.")
	r.Filled.Replay = load(3610, 12)
	require.NotContains(t, Markdown(r, "bench.svg"), "Replays of filled keys kept")

	// Few whole pages on the filled database: no note.
	r.Filled.Costs.Fresh.FullPageImages = 0.03
	require.NotContains(t, Markdown(r, "bench.svg"), "On the filled database a fresh payment")

	// No fill: the empty database's figures alone.
	r.Filled = nil
	text = Markdown(r, "bench.svg")
	require.Contains(t, text, "| service fresh | 1.20 | 120 | 0.01 | 6.00 | 0.02 | 5.0 KiB |")
	require.NotContains(t, text, "→")

	// Without pg_stat_statements: no section.
	require.NotContains(t, Markdown(sample(), "bench.svg"), "### What a request costs the database")
}

// TestCheckpointsAreReadFromTheServer reads the last checkpoint of the test
// server, makes one, and reads again: the second reading sees it.
func TestCheckpointsAreReadFromTheServer(t *testing.T) {
	ctx := context.Background()
	url := testutil.AdminURL(t)
	a, err := readCheckpoint(ctx, url)
	require.NoError(t, err)
	require.Positive(t, a.Timeout)
	require.False(t, a.Last.After(a.At), "the last checkpoint is in the past")

	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CHECKPOINT")
	require.NoError(t, err)
	b, err := readCheckpoint(ctx, url)
	require.NoError(t, err)
	c := checkpointsOf(a, b)
	require.True(t, c.During, "the checkpoint made between the readings")
	require.Less(t, c.After.Duration(), time.Minute)
	require.Equal(t, Of(a.Timeout), c.Timeout)
}
