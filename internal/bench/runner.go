package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"time"
)

// Config is one benchmark run.
type Config struct {
	// ServiceURL and EmulatorURL are the base URLs of paymentsd serve and
	// of the Stripe emulator it calls.
	ServiceURL, EmulatorURL string
	// AdminURL is any other database on the server (the watcher's); BenchURL
	// and BenchDB name the database the service uses, and only it.
	AdminURL, BenchURL, BenchDB string
	Users                       []User
	// ReplayKeys is the number of finished keys per user for the replays.
	ReplayKeys int
	Conns      []int
	// Duration is every measured window; Warmup precedes each HTTP one.
	Duration, Warmup time.Duration
	PGBench          *PGBench
	// Scripts is the directory of fresh.sql and replay.sql.
	Scripts string
	Command string
	// Log receives progress lines.
	Log io.Writer
}

// Run measures everything at every connection count; see the package
// documentation for the order and the commit accounting. It fails only when
// the harness cannot measure: the service answers nothing, pgbench fails,
// the database cannot be read.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	res := &Results{
		Started: time.Now().UTC(), Duration: Of(cfg.Duration), Warmup: Of(cfg.Warmup),
		Command: cfg.Command, Users: len(cfg.Users), ReplayKeys: cfg.ReplayKeys,
	}
	res.Machine = DescribeMachine(ctx, cfg.AdminURL, cfg.PGBench)
	watcher, err := NewWatcher(ctx, cfg.AdminURL, cfg.BenchDB)
	if err != nil {
		return nil, err
	}
	defer watcher.Close(ctx)
	statements, status := EnableStatements(ctx, cfg.BenchURL)
	defer statements.Close(ctx)
	res.StatStatements = status
	logf(cfg.Log, "pg_stat_statements: %s", status)
	wal, status := EnableWAL(ctx, cfg.BenchURL)
	defer wal.Close(ctx)
	res.WALInspect = status
	logf(cfg.Log, "pg_walinspect: %s", status)

	logf(cfg.Log, "finishing %d keys per user for the replays", cfg.ReplayKeys)
	if err := PrepareReplays(ctx, cfg.ServiceURL, cfg.Users, cfg.ReplayKeys); err != nil {
		return nil, fmt.Errorf("error preparing the replay keys: %w", err)
	}
	watcher.Touched()
	noiseFor := min(max(cfg.Duration/2, 2*time.Second), 5*time.Second)
	logf(cfg.Log, "measuring the idle background for %s once the counters settle", noiseFor)
	if res.Noise, err = watcher.MeasureNoise(ctx, noiseFor, wal); err != nil {
		return nil, err
	}
	logf(cfg.Log, "idle background: %.2f transactions/s and %.2f writing transactions/s in the bench database, %.2f transaction ids/s in the cluster",
		res.Noise.XactPerSec, res.Noise.WritesPerSec, res.Noise.XidPerSec)

	run := runID()
	freshSum, replaySum := snapshot{}, snapshot{}
	var freshTotal, replayTotal int
	for _, conns := range cfg.Conns {
		m := measurer{cfg: cfg, watcher: watcher, statements: statements, wal: wal, noise: res.Noise, conns: conns}
		p, err := m.point(ctx, run, freshSum, replaySum)
		if err != nil {
			return nil, err
		}
		freshTotal += p.Fresh.Total
		replayTotal += p.Replay.Total
		res.Points = append(res.Points, p)
	}
	if statements != nil {
		res.Top = map[string][]Statement{"fresh": freshSum.top(10, freshTotal), "replay": replaySum.top(10, replayTotal)}
	}
	res.Finished = time.Now().UTC()
	return res, nil
}

// measurer measures one connection count.
type measurer struct {
	cfg        Config
	watcher    *Watcher
	statements *Statements
	wal        *WAL
	noise      Noise
	conns      int
}

func (m *measurer) load(ctx context.Context, sc Scenario) (Load, error) {
	l, err := loadRun{conns: m.conns, warmup: m.cfg.Warmup, window: m.cfg.Duration}.Run(ctx, sc)
	if err != nil {
		return l, err
	}
	if l.Total == 0 {
		return l, fmt.Errorf("%s at %d connections: no successful request (non-2xx %v, %d unexpected, %d transport errors)",
			sc.Name, m.conns, l.NonOK, l.Unexpected, l.Errors)
	}
	logf(m.cfg.Log, "  %-15s %8.1f/s  p50 %7.2f ms  p99 %7.2f ms  non-2xx %v  errors %d",
		sc.Name, l.Throughput, l.P50, l.P99, l.NonOK, l.Errors+l.Unexpected)
	return l, nil
}

func (m *measurer) ceiling(ctx context.Context, script string) (Ceiling, error) {
	c, err := m.cfg.PGBench.Run(ctx, filepath.Join(m.cfg.Scripts, script), m.conns)
	if err == nil {
		logf(m.cfg.Log, "  %-15s %8.1f/s  p50 %7.2f ms  p99 %7.2f ms", script, c.TPS, c.P50, c.P99)
	}
	return c, err
}

// point measures fresh payments, the emulator, the fresh ceiling, replays
// and the replay ceiling, adding the service's statements to the sums.
func (m *measurer) point(ctx context.Context, run string, freshSum, replaySum snapshot) (Point, error) {
	p := Point{Conns: m.conns}
	logf(m.cfg.Log, "%d connections", m.conns)
	w, st := m.watcher, m.statements

	before, err := st.Snapshot(ctx)
	if err != nil {
		return p, err
	}
	w.Touched()
	start, err := w.Settle(ctx)
	if err != nil {
		return p, err
	}
	if p.Fresh, err = m.load(ctx, FreshScenario(m.cfg.ServiceURL, m.cfg.Users, run+"-c"+strconv.Itoa(m.conns))); err != nil {
		return p, err
	}
	after, err := st.Snapshot(ctx)
	if err != nil {
		return p, err
	}
	w.Touched()
	// The emulator alone fills most of the wait for the counters.
	if p.Emulator, err = m.load(ctx, EmulatorScenario(m.cfg.EmulatorURL, run+"-c"+strconv.Itoa(m.conns))); err != nil {
		return p, err
	}
	end, err := w.Settle(ctx)
	if err != nil {
		return p, err
	}
	var writes *Writes
	if m.wal != nil {
		n, err := m.wal.Writes(ctx, start, end)
		if err != nil {
			logf(m.cfg.Log, "  %v: counting writing transactions from transaction ids instead", err)
		} else {
			writes = &n
		}
		w.Touched()
	}
	p.Commits = commitsOf(start, end, p.Fresh.Total, st.Readings(), writes, m.noise)
	if st != nil {
		delta := snapshot{}
		addDelta(delta, before, after)
		addDelta(freshSum, before, after)
		p.Commits.CommitStatements = float64(delta.commits()) / float64(p.Fresh.Total)
	}
	logf(m.cfg.Log, "  commits         %s phase commits, %s writing transactions, %.2f transactions per payment",
		phaseCommits(p.Commits), writing(p.Commits), p.Commits.XactPerPayment)

	if p.FreshCeiling, err = m.ceiling(ctx, "fresh.sql"); err != nil {
		return p, err
	}
	calibrated, err := w.AfterExit(ctx)
	if err != nil {
		return p, err
	}
	if n := float64(p.FreshCeiling.Transactions); n > 0 {
		secs := calibrated.At.Sub(end.At).Seconds()
		p.FreshCeiling.XactPerScript = (float64(calibrated.Xact-end.Xact) - m.noise.XactPerSec*secs) / n
		if m.wal != nil {
			if writes, err := m.wal.Writes(ctx, end, calibrated); err == nil {
				p.FreshCeiling.WritesPerScript = (float64(writes.All) - m.noise.WritesPerSec*secs) / n
			}
			w.Touched()
		}
	}

	if before, err = st.Snapshot(ctx); err != nil {
		return p, err
	}
	if p.Replay, err = m.load(ctx, ReplayScenario(m.cfg.ServiceURL, m.cfg.Users, m.cfg.ReplayKeys)); err != nil {
		return p, err
	}
	if after, err = st.Snapshot(ctx); err != nil {
		return p, err
	}
	w.Touched()
	addDelta(replaySum, before, after)
	if p.ReplayCeiling, err = m.ceiling(ctx, "replay.sql"); err != nil {
		return p, err
	}
	return p, nil
}

// runID tells this run's idempotency keys from any other run's.
func runID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "bench-" + hex.EncodeToString(b)
}

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}
