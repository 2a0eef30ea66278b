package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// # The filled point (issue 12, "flat as it grows")
//
// `make bench-fill` (BENCH_FILL=N; scripts/bench.sh) measures the point at
// TargetConns twice: on the empty database, as `make bench` does (Run),
// and again once the database holds N finished keys and all the service
// leaves behind them (Fill). The runs are three invocations of
// paymentsd-bench sharing the results file, because the service and the
// bare service must be stopped while the database fills (Fill drops and
// rebuilds indexes) and started again after, which scripts/bench.sh does
// between them:
//
//  1. `run` measures the empty database and saves the results;
//  2. `fill` fills the database, the services stopped, and records the
//     fill and the reaper's work list it leaves (RecordFill);
//  3. `run-filled` measures the filled point with the services started
//     again, the service's reaper running every ReaperInterval, and
//     writes the report (RunFilled).
//
// The filled point sends the same fresh payments (random keys, landing on
// random pages of the now full unique index) and replays keys the fill
// finished, spread evenly over the whole index (FilledRequests), instead of
// the few hot keys per user of the empty runs. It has no commit accounting,
// so nothing brackets its runs: the readings of the reaper (ReadReaper)
// around them query the bench database freely.

// tombstoneRetention is the reaper's tombstone retention,
// workers.TombstoneRetentionDefault (a test keeps them equal): the service
// runs with it, and it counts the tombstone backlog.
const tombstoneRetention = 90 * 24 * time.Hour

// FilledReplayKeys is the most filled keys the replays cycle over.
const FilledReplayKeys = 100_000

// RecordFill fills the database at dbURL with keys keys over users (the
// service and the bare service stopped), reads the reaper's work list it
// leaves (retention is the service's key retention), and records both in
// res.
func RecordFill(ctx context.Context, res *Results, dbURL string, users []User, keys int, retention time.Duration, log io.Writer) error {
	stats, err := Fill(ctx, dbURL, users, keys, log)
	if err != nil {
		return err
	}
	after, err := ReadReaper(ctx, dbURL, retention, tombstoneRetention)
	if err != nil {
		return err
	}
	res.Filled = filledOf(keys, stats, after)
	logf(log, "fill: the reaper's backlog is %d keys and %d tombstones", after.Backlog, after.TombstoneBacklog)
	return nil
}

// FilledConfig is the filled point's run.
type FilledConfig struct {
	// ServiceURL and BareURL are the services, started again after the
	// fill; BenchURL the bench database, AdminURL any other database on
	// the server (where the harness samples pg_stat_activity from: waits.go;
	// empty, it does not).
	ServiceURL, BareURL, BenchURL, AdminURL string
	Users                                   []User
	// Duration and Warmup are every run's, as in Config.
	Duration, Warmup time.Duration
	// PGBench and Scripts run fresh.sql once more; a nil PGBench skips it.
	PGBench *PGBench
	Scripts string
	// ReaperInterval and KeyRetention are the service's
	// (PAYMENTSD_REAPER_INTERVAL, PAYMENTSD_KEY_RETENTION).
	ReaperInterval, KeyRetention time.Duration
	// CatchUp is the longest the runner waits for the reaper to work off
	// the fill's backlog before measuring.
	CatchUp time.Duration
	// ReplayKeys is how many filled keys the replays cycle over.
	ReplayKeys int
	// Processes are as in Config: the services' (started again) and the
	// emulator's process ids.
	Processes Processes
	Log       io.Writer
}

// RunFilled measures the filled point that RecordFill prepared in res:
// it waits for the service's reaper to work off the fill's backlog, then
// measures at TargetConns the bare service's fresh payments, the
// service's, fresh.sql, the service's replays of filled keys and the bare
// service's, reading the reaper before and after them, and the sizes of
// every table and index after.
func RunFilled(ctx context.Context, cfg FilledConfig, res *Results) error {
	f := res.Filled
	if f == nil {
		return errors.New("the results hold no fill: run paymentsd-bench fill first")
	}
	f.Conns, f.ReaperInterval, f.KeyRetention = TargetConns, Of(cfg.ReaperInterval), Of(cfg.KeyRetention)
	logf(cfg.Log, "filled point: %d keys, %d connections, the service's reaper every %s", f.Made.Keys, f.Conns, cfg.ReaperInterval)

	// The reaper's catch-up: its backlogs down to what comes due between
	// two of its runs (twice over, for the time a run takes), counted at
	// the rate the filled keys come due.
	due := float64(f.Made.Keys-f.Made.Backlog) / cfg.KeyRetention.Seconds()
	limit := int64(2*due*cfg.ReaperInterval.Seconds()) + 10
	start := f.AfterFill.reading(cfg.KeyRetention, tombstoneRetention)
	logf(cfg.Log, "waiting for the reaper to work off the fill's backlog (%d keys, %d tombstones then) down to %d each",
		start.Backlog, start.TombstoneBacklog, limit)
	deadline := time.Now().Add(cfg.CatchUp)
	var now ReaperReading
	for {
		var err error
		if now, err = ReadReaper(ctx, cfg.BenchURL, cfg.KeyRetention, tombstoneRetention); err != nil {
			return err
		}
		if now.Backlog <= limit && now.TombstoneBacklog <= limit {
			f.CaughtUp = true
			break
		}
		if time.Now().After(deadline) {
			logf(cfg.Log, "  the reaper has not caught up after %s (backlog %d keys, %d tombstones): measuring anyway",
				cfg.CatchUp, now.Backlog, now.TombstoneBacklog)
			break
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	w, err := ReaperBetween(ctx, cfg.BenchURL, start, now)
	if err != nil {
		return err
	}
	f.CatchUp = spanOf(w)
	logf(cfg.Log, "  caught up: %t; %d keys reaped in %s since the fill; backlog %d keys, %d tombstones",
		f.CaughtUp, w.Reaped, w.Window.Round(time.Second), now.Backlog, now.TombstoneBacklog)

	reqs, err := FilledRequests(ctx, cfg.BenchURL, cfg.Users, f.stats(), cfg.KeyRetention, min(cfg.ReplayKeys, int(f.Made.Keys)))
	if err != nil {
		return err
	}
	if len(reqs) == 0 {
		return errors.New("no filled key to replay")
	}
	f.ReplayKeys = len(reqs)
	t0 := time.Now()
	if f.Prewarm, err = PrewarmHotIndexes(ctx, cfg.BenchURL); err != nil {
		return err
	}
	if f.Prewarm.Skipped != "" {
		logf(cfg.Log, "  the hot indexes were not prewarmed: %s", f.Prewarm.Skipped)
	} else {
		logf(cfg.Log, "  prewarmed the hot indexes (%s) in %s", formatBytes(f.Prewarm.Bytes), time.Since(t0).Round(time.Millisecond))
	}

	before, err := ReadReaper(ctx, cfg.BenchURL, cfg.KeyRetention, tombstoneRetention)
	if err != nil {
		return err
	}
	statements, status := EnableStatements(ctx, cfg.BenchURL)
	defer statements.Close(ctx)
	logf(cfg.Log, "  pg_stat_statements: %s", status)
	m := measurer{cfg: Config{AdminURL: cfg.AdminURL, BenchURL: cfg.BenchURL, Duration: cfg.Duration, Warmup: cfg.Warmup, PGBench: cfg.PGBench, Scripts: cfg.Scripts, Processes: cfg.Processes, Log: cfg.Log},
		statements: statements, conns: f.Conns}
	var sums costSums
	// What the fill leaves is a database no service has run on: beyond the
	// prewarmed indexes, the pages a payment writes (the heap pages with
	// the room the reaper freed, the tables' and indexes' right edges) are
	// cold, and the fill ends with a checkpoint, after which the first
	// write of every page goes into the WAL whole. A service at this size
	// is past both. So fresh payments run once through each service,
	// unmeasured, before the measured runs.
	for _, s := range []struct{ name, url string }{{"bare fresh", cfg.BareURL}, {"service fresh", cfg.ServiceURL}} {
		if _, err := m.load(ctx, FreshScenario(s.name+" (warming, not measured)", s.url, cfg.Users)); err != nil {
			return err
		}
	}
	// The pairs run as the judged point's do (abba): JudgedRuns a side, in
	// ABBA order over and over, each side's runs read as one. No vacuum
	// before the fresh runs: they meet the dead rows that the reaper and
	// each other leave, as a service does between autovacuums, which at
	// this size come once a fifth of a table has changed. Only the
	// replays, which write nothing, are preceded by one.
	cpBefore, cpErr := readCheckpoint(ctx, cfg.BenchURL)
	fresh := func(name, base string, cost *sideCost) func() (measured, error) {
		return func() (measured, error) { return m.observe(ctx, FreshScenario(name, base, cfg.Users), cost, nil) }
	}
	bareFresh, serviceFresh := fresh("bare fresh", cfg.BareURL, &sums.bareFresh), fresh("service fresh", cfg.ServiceURL, &sums.fresh)
	if f.BareFresh, f.Fresh, err = m.runPair(bareFresh, serviceFresh); err != nil {
		return err
	}
	if cfg.PGBench != nil {
		c, err := m.ceiling(ctx, "fresh.sql", &sums.freshSQL)
		if err != nil {
			return err
		}
		f.FreshCeiling = &c
	}
	// Before each replay run, a vacuum and one pass over the keys the
	// replays read, unmeasured, through the bare service: the fill and the
	// fresh runs left most of their pages out of the cache, and the first
	// replay run would otherwise pay for warming it for the second.
	replays := func(name, base string, cost *sideCost) func() (measured, error) {
		return func() (measured, error) {
			if err := m.vacuum(ctx); err != nil {
				return measured{}, err
			}
			t0 := time.Now()
			if err := warm(ctx, cfg.BareURL, reqs, f.Conns); err != nil {
				return measured{}, err
			}
			logf(cfg.Log, "  read the %d filled keys once through the bare service, unmeasured, in %s", len(reqs), time.Since(t0).Round(time.Millisecond))
			return m.observe(ctx, FilledReplayScenario(name, base, reqs), cost, nil)
		}
	}
	serviceReplays, bareReplays := replays("service replays", cfg.ServiceURL, &sums.replay), replays("bare replays", cfg.BareURL, &sums.bareReplay)
	if f.Replay, f.BareReplay, err = m.runPair(serviceReplays, bareReplays); err != nil {
		return err
	}
	f.Costs, f.CPU, f.Waits = sums.costs(), sums.cpuCosts(), sums.waitCosts()
	if cpErr == nil {
		var cpAfter checkpointReading
		if cpAfter, cpErr = readCheckpoint(ctx, cfg.BenchURL); cpErr == nil {
			f.Checkpoints = checkpointsOf(cpBefore, cpAfter)
		}
	}
	if cpErr != nil {
		logf(cfg.Log, "  %v: the report will not say where the runs fell in the checkpoint cycle", cpErr)
	}
	after, err := ReadReaper(ctx, cfg.BenchURL, cfg.KeyRetention, tombstoneRetention)
	if err != nil {
		return err
	}
	if w, err = ReaperBetween(ctx, cfg.BenchURL, before, after); err != nil {
		return err
	}
	f.Window, f.KeepsUp = spanOf(w), w.KeepsUp(cfg.ReaperInterval)
	logf(cfg.Log, "  reaper          %.1f keys created/s, %.1f reaped/s, %.1f came due/s over %s; backlog %d → %d keys, %d → %d tombstones; keeps up: %t",
		w.CreatedPerSecond(), w.ReapedPerSecond(), w.DuePerSecond(), w.Window.Round(time.Second),
		w.BacklogBefore, w.BacklogAfter, w.TombstoneBacklogBefore, w.TombstoneBacklogAfter, f.KeepsUp)

	if f.Sizes, err = Sizes(ctx, cfg.BenchURL); err != nil {
		return err
	}
	res.Finished = time.Now().UTC()
	return nil
}

// warm sends every request of reqs once to base on conns connections, and
// fails if any is not answered as the replay it is.
func warm(ctx context.Context, base string, reqs []FilledRequest, conns int) error {
	sc := FilledReplayScenario("warm", base, reqs)
	transport := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, DisableCompression: true}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	for range conns {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(reqs) {
					return
				}
				req, err := sc.Request(0, i)
				if err != nil {
					fail(err)
					return
				}
				resp, err := client.Do(req.WithContext(ctx))
				if err != nil {
					fail(fmt.Errorf("warming the filled keys: %w", err))
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if !sc.Answer(resp.StatusCode) || !sc.Accept(resp) {
					fail(fmt.Errorf("warming the filled keys: %s %s with key %s answered %d (Idempotent-Replayed: %q)",
						req.Method, req.URL.Path, reqs[i].Key, resp.StatusCode, resp.Header.Get("Idempotent-Replayed")))
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// formatCount writes n with thousands separators: 10,000,000.
func formatCount(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + formatCount(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
