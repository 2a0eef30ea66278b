package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/workers"
)

// sampleFilled is sample() with a filled point that meets its targets: the
// service at 95% of its empty-database throughput, the reaper keeping up.
func sampleFilled() *Results {
	r := sample()
	r.Filled = &Filled{
		Keys: FillKeys,
		Made: FillMade{Keys: 10_000_000, PaymentKeys: 9_523_810, RefundKeys: 476_190, Declined: 761_905,
			Payments: 9_523_810, Refunds: 476_190, AuditRecords: 20_000_000, Receipts: 8_761_905,
			StripeEvents: 10_000_000, Tombstones: 10_000_000, Backlog: 100_000, TombstoneBacklog: 100_000},
		At: time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC), FirstKeyID: 10_000_101, LastKeyID: 20_000_100,
		Took: 362, Insert: 210, Vacuum: 18, Index: 120,
		AfterFill: ReaperState{At: time.Date(2026, 1, 2, 3, 11, 0, 0, time.UTC), Backlog: 141_000, TombstoneBacklog: 141_000},
		Conns:     TargetConns, ReaperInterval: 5, KeyRetention: 86400, ReplayKeys: FilledReplayKeys,
		Fresh: load(361, 115), BareFresh: load(385, 104), Replay: load(3610, 12), BareReplay: load(3900, 11),
		FreshCeiling: &Ceiling{TPS: 760, P50: 31, P99: 64, Transactions: 7600},
		CatchUp: &ReaperSpan{Seconds: 31, Reaped: 141_500, BacklogBefore: 141_000, BacklogAfter: 300,
			TombstoneBacklogBefore: 141_000, TombstoneBacklogAfter: 310},
		CaughtUp: true,
		Window: &ReaperSpan{Seconds: 55, Created: 20_000, Reaped: 6_300, Due: 6_250, BacklogBefore: 300, BacklogAfter: 250,
			TombstoneBacklogBefore: 310, TombstoneBacklogAfter: 260},
		KeepsUp: true,
		Sizes: []RelationSize{
			{Name: "idempotency_keys", Kind: "table", Rows: 10_000_000, HeapBytes: 8 << 30, IndexBytes: 2 << 30, TotalBytes: 10 << 30},
			{Name: "idempotency_keys_user_id_idempotency_key_key", Kind: "index", Table: "idempotency_keys", Rows: 10_000_000, IndexBytes: 1 << 30, TotalBytes: 1 << 30},
			{Name: "idempotency_keys_pkey", Kind: "index", Table: "idempotency_keys", Rows: -1, IndexBytes: 1 << 30, TotalBytes: 1 << 30},
			{Name: "payments", Kind: "table", Rows: 9_523_810, HeapBytes: 3 << 30, IndexBytes: 1 << 30, TotalBytes: 4 << 30},
			{Name: "payments_pkey", Kind: "index", Table: "payments", Rows: 9_523_810, IndexBytes: 1 << 30, TotalBytes: 1 << 30},
			{Name: "users", Kind: "table", Rows: 8, RowsExact: true, HeapBytes: 16 << 10, IndexBytes: 32 << 10, TotalBytes: 48 << 10},
			{Name: "users_pkey", Kind: "index", Table: "users", Rows: 8, IndexBytes: 16 << 10, TotalBytes: 16 << 10},
		},
	}
	return r
}

func TestEvaluateFilledMet(t *testing.T) {
	require.Len(t, Evaluate(sample()), 14, "no fill, no fill targets")
	r := sampleFilled()
	targets := Evaluate(r)
	require.Len(t, targets, 17)
	for _, target := range targets {
		require.True(t, target.Met, "%s: %s", target.Name, target.Measured)
	}
	require.Equal(t, "95% (361 of 380 payments/s)",
		find(t, r, "fresh payments with 10,000,000 keys filled ≥ 90% of the empty database's throughput at 32 connections").Measured)
	require.Equal(t, "95% (3610 of 3800 requests/s)", find(t, r, "replays of filled keys with 10,000,000 keys filled ≥ 90%").Measured)
	require.Equal(t, "backlog 300 → 250 keys over the 55 s of the filled runs; 114.5 keys/s reaped, 113.6/s came due",
		find(t, r, "the reaper keeps up with 10,000,000 keys filled").Measured)
}

func TestEvaluateFilledNotMet(t *testing.T) {
	r := sampleFilled()
	r.Filled.Fresh = load(340, 130)      // 89% of 380
	r.Filled.Replay = load(1900, 20)     // 50% of 3800
	r.Filled.Window.BacklogAfter = 2_000 // more than two intervals' worth (2 × 5 s × 113.6/s)
	r.Filled.BareReplay.NonOK = map[int]int{500: 3}
	require.False(t, find(t, r, "fresh payments with", "keys filled").Met)
	require.Equal(t, "89.4% (340 of 380 payments/s)", find(t, r, "fresh payments with", "keys filled").Measured)
	require.False(t, find(t, r, "replays of filled keys").Met)
	require.False(t, find(t, r, "the reaper keeps up").Met)
	require.Equal(t, "3 bare replays filled at 32", find(t, r, "zero errors").Measured)
	// The empty-database targets are the same as without the fill.
	require.True(t, find(t, r, "fresh payments ≥ 90% of the bare").Met)

	// A fill whose point was not measured, or no empty point to hold it
	// against: not met, and said so.
	r = sampleFilled()
	r.Filled.Conns = 0
	for _, name := range []string{"fresh payments with", "replays of filled keys", "the reaper keeps up"} {
		target := find(t, r, name)
		require.False(t, target.Met, name)
		require.Equal(t, "not measured (the filled point did not run)", target.Measured, name)
	}
	r = sampleFilled()
	r.Points = r.Points[:2]
	require.Equal(t, "not measured (no run at 32 connections on the empty database)", find(t, r, "fresh payments with").Measured)
	require.False(t, find(t, r, "replays of filled keys").Met)
}

func TestFillSection(t *testing.T) {
	r := sampleFilled()
	text := Markdown(r, "docs/bench.svg")
	require.Contains(t, text, "## Ten million keys\n\nThe point at 32 connections measured again once the database holds **10,000,000 finished keys**")
	require.NotContains(t, text, "This run filled")
	// The section comes after the results and before the machine, the
	// normal sections unchanged around it.
	require.Less(t, strings.Index(text, "## Results"), strings.Index(text, "## Ten million keys"))
	require.Less(t, strings.Index(text, "## Ten million keys"), strings.Index(text, "## Machine"))
	require.Equal(t, Markdown(sample(), "docs/bench.svg"), withoutFill(t, text),
		"the report less the section and the fill's targets is the report of a run without a fill")
	for _, want := range []string{
		"Filled in **6m2s** (inserting 3m30s, vacuuming 18s, building the indexes 2m0s); after the filled runs the service's tables and indexes held **14.00 GiB**.",
		"`PAYMENTSD_REAPER_INTERVAL=5s`",
		"**100,000 filled keys**",
		"| **service fresh** payments/s | 380 | 361 | 95% |",
		"| **service fresh** p50 / p99 ms | 36.67 / 110.00 | 38.33 / 115.00 | 1.05× |",
		"| fresh.sql ceiling payments/s | 800 | 760 | 95% |",
		"| **service replays** requests/s | 3800 | 3610 | 95% |",
		"| bare replays requests/s | 4000 | 3900 | 98% |",
		"| service / bare, fresh | 95% | 94% | |",
		"- fresh payments with 10,000,000 keys filled ≥ 90% of the empty database's throughput at 32 connections: 95% (361 of 380 payments/s) — met",
		"every 5s (`PAYMENTSD_REAPER_INTERVAL`), each run moving the keys past the 24h key",
		"- **After the fill** the backlog was 141,000 keys and 141,000 tombstones. The restarted service's reaper worked it off (141,500 keys\n  reaped) within 31s",
		"keys created 363.6/s (the benchmark's), reaped 114.5/s, came due 113.6/s",
		"backlog 300 → 250 keys, 310 → 260 tombstones. **Keeps up: yes**",
		"| **`idempotency_keys`** | ~10,000,000 | 8.00 GiB | 2.00 GiB | 10.00 GiB | 71% |",
		"| ↳ `idempotency_keys_user_id_idempotency_key_key` | ~10,000,000 | | 1.00 GiB | | 7% |",
		"| ↳ `idempotency_keys_pkey` | – | | 1.00 GiB | | 7% |",
		"| **`payments`** | ~9,523,810 | 3.00 GiB | 1.00 GiB | 4.00 GiB | 29% |",
		"| 1 smaller table | | | | 48 KiB | 0% |",
		"| **all** | | | | **14.00 GiB** | |",
	} {
		require.Contains(t, text, want)
	}
	require.NotContains(t, text, "users_pkey", "a table under 1% is summed, its indexes too")
	require.Contains(t, Tables(r), "fresh payments with 10,000,000 keys filled")

	// A smaller fill says so; one that stopped after the fill says that.
	r.Filled.Keys = 20_000
	require.Contains(t, Markdown(r, "bench.svg"), "This run filled **20,000** keys; the issue's figure, and `make bench-fill`'s default, is 10,000,000.")
	r.Filled.CaughtUp = false
	require.Contains(t, Markdown(r, "bench.svg"), "The runner stopped waiting for the reaper after 31s\n  (141,500 keys reaped; 300 keys and 310 tombstones left)")
	r.Filled.Conns = 0
	text = Markdown(r, "bench.svg")
	require.Contains(t, text, "The filled point was not measured: the run stopped after the fill.")
	require.NotContains(t, text, "### The reaper")
	require.Empty(t, FilledTable(r))
}

// withoutFill is a report less its fill section and the rows of the
// fill's targets.
func withoutFill(t *testing.T, text string) string {
	t.Helper()
	start, end := strings.Index(text, "## Ten million keys"), strings.Index(text, "## Machine")
	require.Positive(t, start)
	text = text[:start] + text[end:]
	var kept []string
	for line := range strings.SplitSeq(text, "\n") {
		if !strings.HasPrefix(line, "| ") || !strings.Contains(line, "keys filled") {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "\n")
}

func TestFilledRoundTrip(t *testing.T) {
	r := withCosts() // sampleFilled, with what a request cost the database
	path := filepath.Join(t.TempDir(), "results.json")
	require.NoError(t, r.Save(path))
	back, err := LoadResults(path)
	require.NoError(t, err)
	require.Equal(t, r, back)
	require.Equal(t, r.Filled.At, back.Filled.stats().At)
	require.Equal(t, r.Filled.FirstKeyID, back.Filled.stats().FirstKeyID)
	require.Equal(t, r.Filled.Made.Keys, back.Filled.stats().Keys)
}

func TestReaperConversions(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	reading := ReaperReading{At: at, Backlog: 5, TombstoneBacklog: 6, KeysIssued: 7, Retention: time.Hour, TombstoneRetention: 2 * time.Hour}
	require.Equal(t, reading, stateOf(reading).reading(time.Hour, 2*time.Hour))
	w := ReaperWindow{Window: 10 * time.Second, Created: 100, Reaped: 20, Due: 25, BacklogBefore: 10, BacklogAfter: 15,
		TombstoneBacklogBefore: 1, TombstoneBacklogAfter: 2}
	require.Equal(t, w, spanOf(w).window())
	require.Equal(t, tombstoneRetention, workers.TombstoneRetentionDefault)
}

func TestFormatting(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 20_000: "20,000", 10_000_000: "10,000,000", -1234: "-1,234"} {
		require.Equal(t, want, formatCount(n))
	}
	for d, want := range map[time.Duration]string{24 * time.Hour: "24h", 5 * time.Second: "5s", 90 * time.Second: "1m30s",
		time.Minute: "1m", 90 * time.Minute: "1h30m", 25*time.Hour + time.Second: "25h0m1s"} {
		require.Equal(t, want, shortDuration(d))
	}
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestRandomKey(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		k := RandomKey()
		require.Regexp(t, uuidV4, k)
		u, err := uuid.Parse(k)
		require.NoError(t, err)
		require.Equal(t, uuid.Version(4), u.Version())
		require.Equal(t, uuid.RFC4122, u.Variant())
		require.False(t, seen[k])
		seen[k] = true
	}
}

// TestFilledReplayScenario: a replay of a filled key is an answer when it
// carries the key's stored status, 402 included, marked as a replay; any
// other status or an unmarked answer is not.
func TestFilledReplayScenario(t *testing.T) {
	stored := map[string]int{"k-paid": 201, "k-declined": 402, "k-refund": 201}
	var (
		mu   sync.Mutex
		mode string
		seen = map[string]string{}
	)
	setMode := func(m string) {
		mu.Lock()
		defer mu.Unlock()
		mode = m
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		seen[key] = r.Method + " " + r.URL.Path + " " + r.Header.Get("Authorization")
		mode := mode
		mu.Unlock()
		switch mode {
		case "replay":
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(stored[key])
		case "fresh":
			w.WriteHeader(stored[key])
		case "error":
			w.WriteHeader(500)
		}
	}))
	defer srv.Close()
	user := User{ID: 1, APIKey: "key-1"}
	reqs := []FilledRequest{
		{User: user, Key: "k-paid", Path: "/payments", Body: []byte(`{}`), Status: 201},
		{User: User{ID: 2, APIKey: "key-2"}, Key: "k-declined", Path: "/payments", Body: []byte(`{}`), Status: 402},
		{User: user, Key: "k-refund", Path: "/payments/7/refunds", Body: []byte(`{}`), Status: 201},
	}
	sc := FilledReplayScenario("replays", srv.URL, reqs)
	run := loadRun{conns: 1, warmup: 0, window: 200 * time.Millisecond}
	setMode("replay")
	l, err := run.Run(context.Background(), sc)
	require.NoError(t, err)
	require.Positive(t, l.OK)
	require.Zero(t, l.Unexpected)
	require.Empty(t, l.NonOK)
	mu.Lock()
	require.Equal(t, map[string]string{"k-paid": "POST /payments Bearer key-1", "k-declined": "POST /payments Bearer key-2",
		"k-refund": "POST /payments/7/refunds Bearer key-1"}, seen)
	mu.Unlock()
	require.NoError(t, warm(context.Background(), srv.URL, reqs, 2))

	setMode("fresh")
	l, err = run.Run(context.Background(), sc)
	require.NoError(t, err)
	require.Zero(t, l.OK)
	require.Positive(t, l.Unexpected)
	require.Error(t, warm(context.Background(), srv.URL, reqs, 2))

	setMode("error")
	l, err = run.Run(context.Background(), sc)
	require.NoError(t, err)
	require.Positive(t, l.NonOK[500])
}

func TestTheReaperMayBeOneRunBehind(t *testing.T) {
	// The backlog grows by an interval's worth between two runs, and a run
	// starts a little after its tick: a reading just before one sees a
	// little more (the committed 10 M run read 575 with 573 due per 5 s).
	w := ReaperWindow{Window: 54 * time.Second, Due: 6_188, BacklogBefore: 86, BacklogAfter: 575}
	require.True(t, w.KeepsUp(5*time.Second))
	w.BacklogAfter = 1_200
	require.False(t, w.KeepsUp(5*time.Second))
}
