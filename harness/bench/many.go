package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// # Many payments in flight
//
// With a slow processor a payment spends most of its life waiting on it,
// holding no database connection (the design's no connection across the
// call), so what bounds the throughput is Little's law, in flight over
// latency, or the database, whichever is less. The slow point at
// SlowConns reads the service against the bare service; this one puts
// ManyConns payments in flight against a processor that answers in
// SlowLatency and reads the service against that lesser bound, with its
// errors, its timeouts and its memory. The bare service runs it too, as a
// figure beside, not a yardstick.

const (
	// ManyConns is the payments in flight at the point.
	ManyConns = 1000
	// ManyRatio is the least share of the lesser of Little's bound and
	// the service's SQL ceiling the service must reach there.
	ManyRatio = 0.90
	// ManyWarmup and ManyWindow are the least warm-up and window of the
	// point's runs. With a thousand in flight a payment takes about two
	// seconds on two cores (in flight over throughput), so a short run's
	// 0.5 s warm-up ends before the first wave is answered and its 2 s
	// window holds about one round trip a client: the point would read
	// its ramp, not its steady state.
	ManyWarmup = 3 * time.Second
	ManyWindow = 10 * time.Second
)

// Many is the many-in-flight point.
type Many struct {
	Conns     int     `json:"conns"`
	LatencyMS float64 `json:"latency_ms"`
	// Warmup and Window are its runs' (manyMeasurer).
	Warmup    Seconds `json:"warmup,omitempty"`
	Window    Seconds `json:"window,omitempty"`
	Fresh     Load    `json:"fresh"`
	BareFresh Load    `json:"bare_fresh"`
	// Memory is the service process's resident memory, from /proc; nil
	// when it could not be read.
	Memory *Memory `json:"memory,omitempty"`
	// CPU is what one of the service's payments there cost the machine's
	// CPUs, by process (proccpu.go), warm-up included; nil when /proc
	// could not be read. It tells whether the machine, rather than the
	// engine or the database, held the point back.
	CPU *CPUCost `json:"cpu,omitempty"`
}

// Memory is a process's resident memory around a run, in bytes: before
// it, the most sampled during it (every 100 ms), and after it.
type Memory struct {
	Before int64 `json:"before"`
	Peak   int64 `json:"peak"`
	After  int64 `json:"after"`
}

// LittleBound is the throughput Little's law allows: in flight over the
// processor's latency.
func (m *Many) LittleBound() float64 {
	if m.LatencyMS <= 0 {
		return 0
	}
	return float64(m.Conns) / (m.LatencyMS / 1000)
}

// many measures the point: the emulator answers every create after
// SlowLatency while the service, then the bare service, keep m.conns
// payments in flight, the service's memory sampled meanwhile. The
// emulator's latency is reset afterwards, whatever happens.
func (m *measurer) many(ctx context.Context) (*Many, error) {
	s := &Many{Conns: m.conns, LatencyMS: ms(m.cfg.SlowLatency), Warmup: Of(m.cfg.Warmup), Window: Of(m.cfg.Duration)}
	logf(m.cfg.Log, "many in flight: the emulator answers in %s, %d payments in flight", m.cfg.SlowLatency, m.conns)
	if err := SetEmulatorLatency(ctx, m.cfg.EmulatorURL, m.cfg.SlowLatency.Milliseconds()); err != nil {
		return nil, err
	}
	defer func() {
		reset, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := SetEmulatorLatency(reset, m.cfg.EmulatorURL, 0); err != nil {
			logf(m.cfg.Log, "  %v", err)
		}
	}()
	// A side that answers nothing at all here is a finding, not a broken
	// harness: the point records it (and its target fails) rather than
	// ending the run.
	run := func(sc Scenario) (Load, error) {
		l, err := m.measure(ctx, sc)
		if err != nil && ctx.Err() == nil && l.Total == 0 {
			logf(m.cfg.Log, "  %v", err)
			return l.Load, nil
		}
		return l.Load, err
	}
	stop := sampleRSS(m.cfg.Processes.Service, 100*time.Millisecond)
	cpuBefore := m.readCPU()
	var err error
	s.Fresh, err = run(FreshScenario("service fresh", m.cfg.ServiceURL, m.cfg.Users))
	var cpu cpuSum
	cpu.add(cpuBefore, m.readCPU(), s.Fresh.Total)
	s.Memory, s.CPU = stop(), cpu.cost()
	if err != nil {
		return nil, err
	}
	if s.Memory != nil {
		logf(m.cfg.Log, "  service memory  %s before, %s at most, %s after", mib(s.Memory.Before), mib(s.Memory.Peak), mib(s.Memory.After))
	}
	if s.BareFresh, err = run(FreshScenario("bare fresh", m.cfg.BareURL, m.cfg.Users)); err != nil {
		return nil, err
	}
	return s, nil
}

// manyMeasurer is the measurer of the many-in-flight point: cfg's, with
// at least ManyWarmup and ManyWindow.
func manyMeasurer(cfg Config) *measurer {
	cfg.Warmup, cfg.Duration = max(cfg.Warmup, ManyWarmup), max(cfg.Duration, ManyWindow)
	return &measurer{cfg: cfg, conns: cfg.ManyConns}
}

// sampleRSS reads process pid's resident memory now and every interval
// until the returned function is called, which reads it once more and
// returns what it saw; nil when pid is 0 or /proc cannot be read.
func sampleRSS(pid int, interval time.Duration) func() *Memory {
	before, err := readRSS(pid)
	if pid == 0 || err != nil {
		return func() *Memory { return nil }
	}
	mem := &Memory{Before: before, Peak: before}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if v, err := readRSS(pid); err == nil {
					mem.Peak = max(mem.Peak, v)
				}
			}
		}
	})
	return func() *Memory {
		close(done)
		wg.Wait()
		after, err := readRSS(pid)
		if err != nil {
			return nil
		}
		mem.After, mem.Peak = after, max(mem.Peak, after)
		return mem
	}
}

// readRSS is the VmRSS line of /proc/PID/status, in bytes.
func readRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status: %w", pid, err)
			}
			return kb * 1024, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmRSS", pid)
}

func mib(bytes int64) string { return fmt.Sprintf("%.0f MiB", float64(bytes)/(1<<20)) }

// sqlCeiling is the most the service's own SQL (fresh.sql) sustained at
// any connection count of the run, and that count; ok false when none ran.
func (r *Results) sqlCeiling() (tps float64, conns int, ok bool) {
	for _, p := range r.Points {
		if p.FreshCeiling.TPS > tps {
			tps, conns, ok = p.FreshCeiling.TPS, p.Conns, true
		}
	}
	return tps, conns, ok
}

// manyTarget judges the many-in-flight point: the service's throughput
// against the lesser of Little's bound and its SQL ceiling, no errors, no
// timeouts, its memory reported.
func manyTarget(r *Results) Target {
	t := Target{Name: fmt.Sprintf("%d payments in flight, every create answered in %s: ≥ %.0f%% of the lesser of Little's bound and the service's SQL ceiling, no errors or timeouts, memory reported",
		ManyConns, SlowLatency, ManyRatio*100)}
	s := r.Many
	switch {
	case s == nil:
		t.Measured = "not measured"
		return t
	case s.Conns != ManyConns || s.LatencyMS != ms(SlowLatency):
		t.Measured = fmt.Sprintf("not measured as stated (%d in flight, %.0f ms)", s.Conns, s.LatencyMS)
		return t
	}
	little := s.LittleBound()
	bound, what := little, fmt.Sprintf("Little's bound %.0f/s", little)
	ceiling, at, ok := r.sqlCeiling()
	if ok && ceiling < bound {
		bound, what = ceiling, fmt.Sprintf("fresh.sql's ceiling %.0f/s at %d connections (Little's bound %.0f/s)", ceiling, at, little)
	} else if ok {
		what += fmt.Sprintf(" (fresh.sql's ceiling %.0f/s at %d connections)", ceiling, at)
	}
	f := s.Fresh
	share := ratio(f.Throughput, bound)
	t.Measured = fmt.Sprintf("%.0f%% (%.0f payments/s of %s); p50 / p99 %.0f / %.0f ms; non-2xx %s, errors %d (timeouts %d)",
		100*share, f.Throughput, what, f.P50, f.P99, nonOKText(f.NonOK), f.Errors+f.Unexpected, f.Timeouts)
	if m := s.Memory; m != nil {
		t.Measured += fmt.Sprintf("; the service's memory (RSS) %s before, %s at most, %s after", mib(m.Before), mib(m.Peak), mib(m.After))
	} else {
		t.Measured += "; the service's memory could not be read"
	}
	t.Measured += manyMachine(s, r.Machine.CPUs)
	t.Met = share >= ManyRatio && f.Failures() == 0 && f.Conflicts() == 0 && f.Timeouts == 0 && s.Memory != nil
	return t
}

// manyMachine says what held the many-in-flight point back when it was
// not the engine: how busy the machine's CPUs were, what a payment cost
// them by process, the throughput that cost allows its cpus, and the bare
// service's throughput on the same SQL. Empty without the CPU reading.
func manyMachine(s *Many, cpus int) string {
	c := s.CPU
	if c == nil || c.Busy <= 0 {
		return ""
	}
	text := fmt.Sprintf("; the machine's CPUs were %.0f%% busy, %.0f µs a payment (Postgres %.0f, the service %.0f, the emulator %.0f, the load generator %.0f, the rest %.0f)",
		100*c.Busy/(c.Busy+c.Idle), c.Busy, c.Postgres, c.Service, c.Emulator, c.Load, c.Rest)
	if cpus > 0 {
		text += fmt.Sprintf(", which bounds %d CPUs at %.0f payments/s", cpus, float64(cpus)*1e6/c.Busy)
	}
	return text + fmt.Sprintf("; the bare service, on the same SQL: %.0f payments/s", s.BareFresh.Throughput)
}

// nonOKText lists every non-2xx status, 409s included: "none", or
// "503×2, 500×1".
func nonOKText(nonOK map[int]int) string {
	n := 0
	for _, c := range nonOK {
		n += c
	}
	if n == 0 {
		return "none"
	}
	if c := nonOK[409]; c > 0 {
		if rest := others(nonOK); rest != "0" {
			return fmt.Sprintf("409×%d, %s", c, rest)
		}
		return fmt.Sprintf("409×%d", c)
	}
	return others(nonOK)
}

// manyTable renders the many-in-flight point; empty when it did not run.
func manyTable(r *Results) string {
	s := r.Many
	if s == nil {
		return ""
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("\n### Many in flight (the emulator answers every create in %.0f ms)\n\n", s.LatencyMS)
	w("| in flight | Little's bound | service payments/s | bare payments/s | service p50 / p99 ms | bare p50 / p99 ms " +
		"| non-2xx service / bare | errors service / bare | timeouts service / bare | service RSS before / at most / after |\n")
	w("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	f, bf := s.Fresh, s.BareFresh
	memory := "–"
	if m := s.Memory; m != nil {
		memory = fmt.Sprintf("%s / %s / %s", mib(m.Before), mib(m.Peak), mib(m.After))
	}
	w("| %d | %.0f | %.0f | %.0f | %.1f / %.1f | %.1f / %.1f | %s / %s | %d / %d | %d / %d | %s |\n",
		s.Conns, s.LittleBound(), f.Throughput, bf.Throughput, f.P50, f.P99, bf.P50, bf.P99, nonOKText(f.NonOK), nonOKText(bf.NonOK),
		f.Errors+f.Unexpected, bf.Errors+bf.Unexpected, f.Timeouts, bf.Timeouts, memory)
	return b.String()
}
