package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Config is one benchmark run.
type Config struct {
	// ServiceURL, BareURL and EmulatorURL are the base URLs of paymentsd
	// serve, of the bare service (harness/cmd/paymentsd-bare) and of the Stripe
	// emulator both call.
	ServiceURL, BareURL, EmulatorURL string
	// LeastURL is the base URL of the bare service over the least SQL
	// (paymentsd-bare -sql least), the design's yardstick; empty: the run
	// measures neither it nor least.sql.
	LeastURL string
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
	// Scripts is the directory of fresh.sql and replay.sql, and of
	// least.sql and least_replay.sql.
	Scripts string
	// Command and Code are how the run was started and the commit it
	// measured, as the report shows them.
	Command, Code string
	// SlowConns and SlowLatency shape the slow-processor point: that many
	// requests in flight while the emulator answers every create after
	// SlowLatency. SlowConns 0 skips it.
	SlowConns   int
	SlowLatency time.Duration
	// ManyConns is the payments in flight at the many-in-flight point,
	// with the emulator answering after SlowLatency (many.go); 0 skips it.
	ManyConns int
	// Profiler, when set, profiles the service's fresh and replay runs at
	// TargetConns connections; BareProfiler the bare service's.
	Profiler, BareProfiler *Profiler
	// Processes are the process ids of the service, the bare service and
	// the emulator, whose CPU time each run reads (proccpu.go).
	Processes Processes
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
		Command: cfg.Command, Code: cfg.Code, Users: len(cfg.Users), ReplayKeys: cfg.ReplayKeys, Profiled: cfg.Profiler != nil,
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

	logf(cfg.Log, "finishing %d keys per user for the replays, through the service and through the bare service", cfg.ReplayKeys)
	if err := PrepareReplays(ctx, cfg.ServiceURL, cfg.Users, cfg.ReplayKeys, ServiceReplayPrefix); err != nil {
		return nil, fmt.Errorf("error preparing the service's replay keys: %w", err)
	}
	if err := PrepareReplays(ctx, cfg.BareURL, cfg.Users, cfg.ReplayKeys, BareReplayPrefix); err != nil {
		return nil, fmt.Errorf("error preparing the bare service's replay keys: %w", err)
	}
	if cfg.LeastURL != "" {
		if err := PrepareReplays(ctx, cfg.LeastURL, cfg.Users, cfg.ReplayKeys, LeastReplayPrefix); err != nil {
			return nil, fmt.Errorf("error preparing the least-SQL bare service's replay keys: %w", err)
		}
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
		p, profiles, err := m.point(ctx, run, freshSum, replaySum)
		if err != nil {
			return nil, err
		}
		res.Profiles = append(res.Profiles, profiles...)
		freshTotal += p.Fresh.Total
		replayTotal += p.Replay.Total
		res.Points = append(res.Points, p)
	}
	if statements != nil {
		res.Top = map[string][]Statement{"fresh": freshSum.top(10, freshTotal), "replay": replaySum.top(10, replayTotal)}
	}
	if cfg.SlowConns > 0 {
		m := measurer{cfg: cfg, conns: cfg.SlowConns}
		if res.Slow, err = m.slow(ctx); err != nil {
			return nil, err
		}
	}
	if cfg.ManyConns > 0 {
		if res.Many, err = manyMeasurer(cfg).many(ctx); err != nil {
			return nil, err
		}
	}
	res.Finished = time.Now().UTC()
	return res, nil
}

// point measures, in this order: the bare service's fresh payments, the
// emulator alone, the service's fresh payments, the fresh.sql ceiling, the
// service's replays, the bare service's replays and the replay.sql ceiling.
// The service's fresh run is bracketed by settled readings of the counters
// (see Settle); the bare's runs before the first of them, with the emulator
// filling most of the wait, so its commits never blur the service's. At
// TargetConns each pair the targets judge runs JudgedRuns times, in ABBA
// order over and over (abba): the fresh pair again after the fresh.sql ceiling
// and its calibration, so outside the commit accounting, which reads the
// first service run alone; the replays as service, bare, bare, service, and
// so on. It adds the statements of the service's runs to the sums,
// and returns the profiles taken at TargetConns when profiling: the
// service's, and the bare's during its own runs of the same scenarios.
func (m *measurer) point(ctx context.Context, run string, freshSum, replaySum snapshot) (Point, []Profile, error) {
	p := Point{Conns: m.conns}
	logf(m.cfg.Log, "%d connections", m.conns)
	w, st := m.watcher, m.statements
	suffix := "-c" + strconv.Itoa(m.conns)
	var profiles []Profile
	var sums costSums

	// The bare service, with its writing transactions from the WAL: it has
	// no background work, so every one is committed once its answers are in.
	if err := m.vacuum(ctx); err != nil {
		return p, nil, err
	}
	bareStart, err := w.Read(ctx)
	if err != nil {
		return p, nil, err
	}
	bareFresh, err := m.observe(ctx, FreshScenario("bare fresh", m.cfg.BareURL, m.cfg.Users), &sums.bareFresh, nil)
	if err != nil {
		return p, nil, err
	}
	bareEnd, err := w.Read(ctx)
	if err != nil {
		return p, nil, err
	}
	w.Touched()
	if m.wal != nil && bareFresh.Total > 0 {
		if n, err := m.wal.Writes(ctx, bareStart, bareEnd); err == nil {
			v := (float64(n.All) - m.noise.WritesPerSec*bareEnd.At.Sub(bareStart.At).Seconds()) / float64(bareFresh.Total)
			p.BareWritesPerPayment = &v
			logf(m.cfg.Log, "  bare commits    %.2f writing transactions per payment", v)
		}
		w.Touched()
	}
	// The emulator alone fills most of the wait for the counters.
	if p.Emulator, err = m.load(ctx, EmulatorScenario(m.cfg.EmulatorURL, run+"-emulator"+suffix)); err != nil {
		return p, nil, err
	}

	if err := m.vacuum(ctx); err != nil {
		return p, nil, err
	}
	start, err := w.Settle(ctx)
	if err != nil {
		return p, nil, err
	}
	evidence := m.evidenceBracket(ctx, start)
	before, err := st.Snapshot(ctx)
	if err != nil {
		return p, nil, err
	}
	cpuBefore := m.readCPU()
	fresh, err := m.measure(ctx, FreshScenario("service fresh", m.cfg.ServiceURL, m.cfg.Users))
	if err != nil {
		return p, nil, err
	}
	sums.fresh.addCPU(cpuBefore, m.readCPU(), fresh.Total)
	after, err := st.Snapshot(ctx)
	if err != nil {
		return p, nil, err
	}
	w.Touched()
	end, err := w.Settle(ctx)
	if err != nil {
		return p, nil, err
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
	harness := 2 * st.Readings()
	if m.wal != nil {
		harness += evidenceReadings
	}
	p.Commits = commitsOf(start, end, fresh.Total, harness, writes, m.noise)
	p.Evidence = &EvidenceSides{Service: evidence(end, fresh.Total)}
	if st != nil {
		delta := snapshot{}
		addDelta(delta, before, after)
		addDelta(freshSum, before, after)
		sums.fresh.add(before, after, fresh.Total)
		p.Commits.CommitStatements = float64(delta.commits()) / float64(fresh.Total)
	}
	logf(m.cfg.Log, "  commits         %s phase commits, %s writing transactions, %.2f transactions per payment",
		phaseCommits(p.Commits), writing(p.Commits), p.Commits.XactPerPayment)

	if p.FreshCeiling, err = m.ceiling(ctx, "fresh.sql", &sums.freshSQL); err != nil {
		return p, nil, err
	}
	calibrated, err := w.AfterExit(ctx)
	if err != nil {
		return p, nil, err
	}
	if n := float64(p.FreshCeiling.Transactions); n > 0 {
		secs := calibrated.At.Sub(end.At).Seconds()
		harness := float64(2 * st.Readings())
		p.FreshCeiling.XactPerScript = (float64(calibrated.Xact-end.Xact) - harness - m.noise.XactPerSec*secs) / n
		if m.wal != nil {
			if writes, err := m.wal.Writes(ctx, end, calibrated); err == nil {
				p.FreshCeiling.WritesPerScript = (float64(writes.All) - m.noise.WritesPerSec*secs) / n
			}
			w.Touched()
		}
	}

	freshAgain := func() (measured, error) {
		return m.vacuumedRun(ctx, FreshScenario("service fresh", m.cfg.ServiceURL, m.cfg.Users), &sums.fresh, freshSum)
	}
	bareFreshAgain := func() (measured, error) {
		return m.vacuumedRun(ctx, FreshScenario("bare fresh", m.cfg.BareURL, m.cfg.Users), &sums.bareFresh, nil)
	}
	serviceReplays := func() (measured, error) {
		return m.vacuumedRun(ctx, ReplayScenario("service replays", m.cfg.ServiceURL, m.cfg.Users, m.cfg.ReplayKeys, ServiceReplayPrefix), &sums.replay, replaySum)
	}
	bareReplays := func() (measured, error) {
		return m.vacuumedRun(ctx, ReplayScenario("bare replays", m.cfg.BareURL, m.cfg.Users, m.cfg.ReplayKeys, BareReplayPrefix), &sums.bareReplay, nil)
	}
	if m.cfg.LeastURL == "" {
		if p.BareFresh, p.Fresh, err = m.abba(bareFresh, fresh, bareFreshAgain, freshAgain); err != nil {
			return p, nil, err
		}
		if p.Replay, p.BareReplay, err = m.runPair(serviceReplays, bareReplays); err != nil {
			return p, nil, err
		}
		if p.ReplayCeiling, err = m.ceiling(ctx, "replay.sql", nil); err != nil {
			return p, nil, err
		}
	} else if err := m.withLeast(ctx, &p, &sums, bareFresh, fresh, bareFreshAgain, freshAgain, serviceReplays, bareReplays); err != nil {
		return p, nil, err
	}
	p.Costs, p.CPU, p.Waits = sums.costs(), sums.cpuCosts(), sums.waitCosts()
	if profiles, err = m.profiledRuns(ctx); err != nil {
		return p, nil, err
	}
	return p, profiles, nil
}

// profiledRuns runs the service and the bare service once more each, fresh
// payments then replays, while their profiles are taken, when this is the
// connection count the targets are judged at and the run profiles (nil
// otherwise). The judged runs are never profiled: a profile costs the
// process it samples, and block sampling the service alone. Each profile
// keeps the throughput of the run it sampled, to be read per request.
func (m *measurer) profiledRuns(ctx context.Context) ([]Profile, error) {
	if m.conns != TargetConns || (m.cfg.Profiler == nil && m.cfg.BareProfiler == nil) {
		return nil, nil
	}
	logf(m.cfg.Log, "  profiled runs (not judged):")
	var profiles []Profile
	for _, run := range []struct {
		profiler *Profiler
		scenario Scenario
		kind     string
	}{
		{m.cfg.Profiler, FreshScenario("  service fresh", m.cfg.ServiceURL, m.cfg.Users), "fresh"},
		{m.cfg.BareProfiler, FreshScenario("  bare fresh", m.cfg.BareURL, m.cfg.Users), "fresh"},
		{m.cfg.Profiler, ReplayScenario("  service replays", m.cfg.ServiceURL, m.cfg.Users, m.cfg.ReplayKeys, ServiceReplayPrefix), "replay"},
		{m.cfg.BareProfiler, ReplayScenario("  bare replays", m.cfg.BareURL, m.cfg.Users, m.cfg.ReplayKeys, BareReplayPrefix), "replay"},
	} {
		if run.profiler == nil {
			continue
		}
		if err := m.vacuum(ctx); err != nil {
			return nil, err
		}
		profiled := run.profiler.During(ctx, run.kind, m.conns, m.cfg.Warmup, m.cfg.Duration)
		l, err := m.load(ctx, run.scenario)
		if err != nil {
			return nil, err
		}
		prof := profiled()
		prof.Throughput = l.Throughput
		profiles = append(profiles, prof)
	}
	return profiles, nil
}

// slow measures the slow-processor point: the emulator answers every
// create after SlowLatency while the service, then the bare service, keep
// SlowConns payments in flight. The emulator's latency is reset afterwards,
// whatever happens.
func (m *measurer) slow(ctx context.Context) (*Slow, error) {
	s := &Slow{Conns: m.conns, LatencyMS: ms(m.cfg.SlowLatency)}
	logf(m.cfg.Log, "slow processor: the emulator answers in %s, %d payments in flight", m.cfg.SlowLatency, m.conns)
	latency := m.cfg.SlowLatency.Milliseconds()
	if err := SetEmulatorLatency(ctx, m.cfg.EmulatorURL, latency); err != nil {
		return nil, err
	}
	defer func() {
		// A fresh context: the run's may be done.
		reset, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := SetEmulatorLatency(reset, m.cfg.EmulatorURL, 0); err != nil {
			logf(m.cfg.Log, "  %v", err)
		}
	}()
	var err error
	if s.Fresh, err = m.load(ctx, FreshScenario("service fresh", m.cfg.ServiceURL, m.cfg.Users)); err != nil {
		return nil, err
	}
	if s.BareFresh, err = m.load(ctx, FreshScenario("bare fresh", m.cfg.BareURL, m.cfg.Users)); err != nil {
		return nil, err
	}
	return s, nil
}

// runID tells this run's Stripe idempotency keys (the emulator-alone runs')
// from any other run's; the payments' own keys are random (RandomKey).
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
