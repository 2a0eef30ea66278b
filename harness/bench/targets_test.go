package bench

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func load(throughput, p99 float64) Load {
	return Load{Throughput: throughput, P50: p99 / 3, P99: p99, OK: int(throughput * 2), Total: int(throughput * 2)}
}

func float(v float64) *float64 { return &v }

// sample is a run that meets every target: the service at 95% of the bare
// service with a p99 1.1× the bare's, 2.1 writing transactions a payment;
// at 84% of the least-SQL bare (90% of its replays), its SQL ceiling at 80%
// of the least SQL's.
func sample() *Results {
	point := func(conns int) Point {
		return Point{
			Conns: conns,
			Fresh: load(380, 110), BareFresh: load(400, 100),
			Replay: load(3800, 11), BareReplay: load(4000, 10),
			Emulator:      load(9000, 3),
			FreshCeiling:  Ceiling{TPS: 800, P50: 30, P99: 60, Transactions: 1600, XactPerScript: 2.1, WritesPerScript: 2},
			ReplayCeiling: Ceiling{TPS: 30000, P50: 0.5, P99: 6, Transactions: 60000},
			Commits: Commits{Payments: 760, Writes: 1600, PhaseWrites: 1520, WritesPerPayment: 2.1,
				PhaseCommitsPerPayment: 2, XactPerPayment: 3.1},
			BareWritesPerPayment: float(2),
			LeastFresh:           load(450, 100), LeastReplay: load(4200, 10),
			LeastCeiling:       Ceiling{TPS: 1000, P50: 25, P99: 50, Transactions: 2000},
			LeastReplayCeiling: Ceiling{TPS: 31000, P50: 0.5, P99: 6, Transactions: 62000},
		}
	}
	return &Results{
		Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Finished: time.Date(2026, 1, 2, 3, 9, 5, 0, time.UTC),
		Duration: 10, Warmup: 1, Command: "make bench", Users: 8, ReplayKeys: 32,
		StatStatements: "enabled", WALInspect: "enabled",
		Points: []Point{point(1), point(8), point(32), point(64)},
		Slow:   &Slow{Conns: SlowConns, LatencyMS: ms(SlowLatency), Fresh: load(250, 270), BareFresh: load(252, 262)},
		Many: &Many{Conns: ManyConns, LatencyMS: ms(SlowLatency), Fresh: load(760, 1300), BareFresh: load(780, 1250),
			Memory: &Memory{Before: 40 << 20, Peak: 120 << 20, After: 90 << 20}},
	}
}

func outcomes(r *Results) map[string]Target {
	m := map[string]Target{}
	for _, t := range Evaluate(r) {
		m[t.Name] = t
	}
	return m
}

// find is the one target whose name contains every part.
func find(t *testing.T, r *Results, parts ...string) Target {
	t.Helper()
	var found []Target
outer:
	for name, target := range outcomes(r) {
		for _, p := range parts {
			if !strings.Contains(name, p) {
				continue outer
			}
		}
		found = append(found, target)
	}
	require.Len(t, found, 1, "targets named with %q", parts)
	return found[0]
}

func TestEvaluateMet(t *testing.T) {
	r := sample()
	targets := Evaluate(r)
	require.Len(t, targets, 14)
	for _, target := range targets {
		require.True(t, target.Met, "%s: %s", target.Name, target.Measured)
	}
	require.Equal(t, "95% (380 of 400 payments/s)", find(t, r, "fresh payments ≥ 90%").Measured)
	require.Equal(t, "1.10× (110.0 ms against 100.0 ms)", find(t, r, "fresh payments p99", "1.2×").Measured)
	require.Equal(t, "95% (3800 of 4000 requests/s)", find(t, r, "replays ≥ 85%", "of the bare service's").Measured)
	require.Contains(t, find(t, r, "slow processor", "250ms", "64 payments in flight", "95%").Measured, "99%")
	require.Equal(t, "2.10 (from the WAL); 2.00 of them phase commits; the bare service: 2.00",
		find(t, r, "writing transactions", "at 1 connection").Measured)
	require.Equal(t, "none", find(t, r, "zero 409s").Measured)
}

func TestEvaluateNotMet(t *testing.T) {
	r := sample()
	p := &r.Points[2]         // 32 connections
	p.Fresh = load(340, 130)  // 85%, 1.3×
	p.Replay = load(2000, 10) // 50%, 1.0×
	p.BareReplay.NonOK = map[int]int{409: 2, 500: 1}
	r.Points[0].Commits.WritesPerPayment = 3.1 // at 1 connection
	r.Points[1].Commits.WritesPerPayment = 9   // at 8: not judged
	r.Slow.Fresh = load(200, 400)

	require.False(t, find(t, r, "fresh payments ≥ 90%").Met)
	require.False(t, find(t, r, "fresh payments p99", "1.2×").Met)
	require.False(t, find(t, r, "replays ≥ 85%", "of the bare service's").Met)
	require.True(t, find(t, r, "replays p99").Met)
	require.False(t, find(t, r, "slow processor").Met)
	require.False(t, find(t, r, "writing transactions", "at 1 connection").Met)
	require.True(t, find(t, r, "writing transactions", "at 32 connections").Met)
	conflicts := find(t, r, "zero 409s")
	require.False(t, conflicts.Met)
	require.Equal(t, "2 bare replays at 32", conflicts.Measured)
	errs := find(t, r, "zero errors")
	require.False(t, errs.Met)
	require.Equal(t, "1 bare replays at 32", errs.Measured)

	// Without the WAL, the writing transactions come from transaction ids.
	r.Points[2].Commits.Writes, r.Points[2].Commits.PhaseWrites, r.Points[2].Commits.XidPerPayment = -1, -1, 2.3
	r.Points[2].BareWritesPerPayment = nil
	w := find(t, r, "writing transactions", "at 32 connections")
	require.False(t, w.Met)
	require.Equal(t, "2.30 (from cluster-wide transaction ids)", w.Measured)
}

// TestShareNearTheTargetReadsToATenth: a share within a point of its
// target is given to a tenth, rounded down, so that one just short never
// reads as the target itself.
func TestShareNearTheTargetReadsToATenth(t *testing.T) {
	r := sample()
	p := &r.Points[2] // 32 connections; the bare replays 4000/s
	for _, c := range []struct {
		replays  float64
		measured string
		met      bool
	}{
		{3398.4, "84.9% (3398 of 4000 requests/s)", false},
		{3384, "84.6% (3384 of 4000 requests/s)", false},
		{3400, "85.0% (3400 of 4000 requests/s)", true},
		{3422, "85.5% (3422 of 4000 requests/s)", true},
		{3300, "82% (3300 of 4000 requests/s)", false},
	} {
		p.Replay = load(c.replays, 10)
		target := find(t, r, "replays ≥ 85%", "of the bare service's")
		require.Equal(t, c.measured, target.Measured)
		require.Equal(t, c.met, target.Met, c.measured)
	}
}

// TestJudgedPairsShowTheirRuns: when the judged point's sides are two runs
// each, its targets give each run's throughput and the report says how they
// were read as one; the filled point's do too once they are combined runs,
// and not while they are single ones; results saved before the ABBA runs
// say nothing of them.
func TestJudgedPairsShowTheirRuns(t *testing.T) {
	r := sampleFilled()
	require.NotContains(t, Tables(r), "ABBA")
	require.NotContains(t, Markdown(r, "bench.svg"), "ABBA")

	p := &r.Points[2] // 32 connections
	p.Fresh.Runs, p.BareFresh.Runs = []float64{370, 390, 380, 380}, []float64{410, 390, 400, 400}
	p.Replay.Runs, p.BareReplay.Runs = []float64{3700, 3900}, []float64{4100, 3900}
	require.Equal(t, "95% (380 of 400 payments/s); runs (ABBA): service 370, 390, 380 and 380, bare 410, 390, 400 and 400"+
		"; the pairs' shares 90%, 100%, 95% and 95%, 95% interval 89–101%, which holds 90%: this run cannot tell met from not met",
		find(t, r, "fresh payments ≥ 90% of the bare").Measured)
	require.Equal(t, "95% (3800 of 4000 requests/s); runs (ABBA): service 3700 and 3900, bare 4100 and 3900"+
		"; the pairs' shares 90% and 100%, 95% interval 33–157%, which holds 85%: this run cannot tell met from not met",
		find(t, r, "replays ≥ 85% of the bare").Measured)
	require.Equal(t, "95% (361 of 380 payments/s)", find(t, r, "fresh payments with", "keys filled").Measured)
	// The report tells the runs the results hold (these, as a run saved
	// when JudgedRuns was 4), not the runs JudgedRuns would make now.
	require.Contains(t, Tables(r), "figures are each **4 runs in ABBA order twice over**,\nread as one")
	md := Markdown(r, "bench.svg")
	require.Contains(t, md, "runs each pair 4 times, in ABBA order twice over")
	require.Contains(t, md, "fresh pair runs 3 times more")
	require.Contains(t, md, "4 runs a side\nin ABBA order")
	require.Contains(t, Tables(r), "The other connection counts, the slow processor and the filled\npoint are one run a side.")

	f := r.Filled
	f.Fresh.Runs, f.BareFresh.Runs = []float64{350, 370, 360, 364}, []float64{390, 380, 400, 390}
	f.Replay.Runs, f.BareReplay.Runs = []float64{3500, 3600, 3700, 3600}, []float64{3900, 3800, 3900, 3800}
	require.Equal(t, "95% (361 of 380 payments/s); filled runs (ABBA): 350, 370, 360 and 364; 95% interval 91–99%",
		find(t, r, "fresh payments with", "keys filled").Measured)
	require.Contains(t, find(t, r, "replays of filled keys").Measured, "; filled runs (ABBA): 3500, 3600, 3700 and 3600")
	require.Contains(t, Tables(r), "The filled point's pairs ran so too; the other connection\ncounts and the slow processor are one run a side.")
	md = Markdown(r, "bench.svg")
	require.Contains(t, md, "**4 runs a side in ABBA order twice over**")
	require.Equal(t, 8, JudgedRuns, "the runs below are JudgedRuns a side")
	p.Fresh.Runs, p.BareFresh.Runs = slices.Repeat(p.Fresh.Runs, 2), slices.Repeat(p.BareFresh.Runs, 2)
	f.Replay.Runs, f.BareReplay.Runs = slices.Repeat(f.Replay.Runs, 2), slices.Repeat(f.BareReplay.Runs, 2)
	md = Markdown(r, "bench.svg")
	require.Contains(t, md, "runs each pair 8 times, in ABBA order four times over")
	require.Contains(t, md, "fresh pair runs 7 times more")
	require.Contains(t, md, "**8 runs a side in ABBA order four times over**")
	require.Contains(t, Tables(r), "figures are each **8 runs in ABBA order four times over**,\nread as one")
	require.Contains(t, md, "fresh payments ran once through the bare service and once through the service, unmeasured")
	require.NotContains(t, md, "Each is a single run")

	path := filepath.Join(t.TempDir(), "results.json")
	require.NoError(t, r.Save(path))
	back, err := LoadResults(path)
	require.NoError(t, err)
	require.Equal(t, []float64{3700, 3900}, back.Points[2].Replay.Runs)
}

func TestEvaluateMissingPoints(t *testing.T) {
	r := sample()
	r.Points = r.Points[:2] // 1 and 8 connections
	r.Slow, r.Many = nil, nil
	for _, target := range Evaluate(r) {
		if strings.Contains(target.Name, "zero") || strings.Contains(target.Name, "at 1 connection") {
			continue
		}
		require.False(t, target.Met, target.Name)
		require.Contains(t, target.Measured, "not measured", target.Name)
	}
	r = sample()
	r.Slow.LatencyMS = 100
	require.Contains(t, find(t, r, "slow processor").Measured, "not measured as stated")
}

func TestResultsRoundTrip(t *testing.T) {
	r := sample()
	r.Profiled = true
	r.Profiles = []Profile{{Scenario: "fresh", Conns: 32, Seconds: 10, Tops: []ProfileTop{{Title: "CPU by flat time", Text: "flat flat%"}}}}
	path := filepath.Join(t.TempDir(), "results.json")
	require.NoError(t, r.Save(path))
	back, err := LoadResults(path)
	require.NoError(t, err)
	require.Equal(t, r, back)
}

// repoRoot is the repository's top directory.
const repoRoot = "../.."

var (
	pathRe = regexp.MustCompile(`(?:\.tmp|bin|cmd|internal|harness|emulator|bench|scripts|docs|db|api)/[\w./-]*[\w]`)
	fileRe = regexp.MustCompile(`\b[\w-]+\.(?:md|svg|sql|sh|log|pprof|json|go)\b`)
)

// TestReportCitesOnlyRepositoryFiles renders the report of a profiled run
// with a fill and checks that every file or directory it names is in the
// repository.
func TestReportCitesOnlyRepositoryFiles(t *testing.T) {
	r := sampleFilled()
	r.Profiled = true
	cpu := &CPUBreakdown{Seconds: 10, CPU: 5, Buckets: map[string]float64{bucketDB: 3, bucketHTTPServer: 2}}
	r.Profiles = []Profile{{Scenario: "fresh", Conns: 32, Seconds: 10, Tops: []ProfileTop{{Title: "CPU by flat time", Text: "flat"}}, CPU: cpu},
		{Process: "bare", Scenario: "fresh", Conns: 32, Seconds: 10, CPU: cpu, Allocs: &Allocations{Seconds: 10, Objects: 1, Bytes: 1}},
		{Scenario: "replay", Conns: 32, Seconds: 10, Error: "block: connection refused"}}
	text := Markdown(r, "docs/bench.svg") + SVG(r) + Summary(r, "docs/bench.svg", "docs/bench-report.md")
	for _, p := range pathRe.FindAllString(text, -1) {
		_, err := os.Stat(filepath.Join(repoRoot, p))
		require.NoError(t, err, "the report names %s", p)
	}
	for _, f := range fileRe.FindAllString(pathRe.ReplaceAllString(text, ""), -1) {
		_, atRoot := os.Stat(filepath.Join(repoRoot, f))
		_, inScripts := os.Stat(filepath.Join(repoRoot, "harness/bench/pgbench", f))
		require.True(t, atRoot == nil || inScripts == nil, "the report names %s", f)
	}
	require.NotContains(t, text, ".tmp")
	require.Contains(t, text, "## Ten million keys")
	require.Contains(t, text, "## Where the service's time goes")
	require.Contains(t, text, "### Fresh payments at 32 connections (10 s)")
	require.Contains(t, text, "Not everything of the service could be read: block: connection refused.")
	require.Contains(t, text, "| **CPU / request** |")
	require.Contains(t, text, "<summary>the service: CPU by flat time</summary>")

	r.Profiled, r.Profiles = false, nil
	require.Contains(t, Markdown(r, "bench.svg"), "This run was not profiled. `BENCH_PROFILE=1 make bench`")
}

func TestSVGIsWellFormed(t *testing.T) {
	for _, r := range []*Results{sample(), {Points: sample().Points[:1]}} {
		dec := xml.NewDecoder(strings.NewReader(SVG(r)))
		for {
			_, err := dec.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
		}
	}
}

func TestTablesShowServiceBareAndCeiling(t *testing.T) {
	text := Tables(sample())
	// Fresh at 32: service, bare, their ratio, the ceiling and both shares.
	require.Contains(t, text, "| 32 | 380 | 400 | 95% | 800 | 48% | 50% | 36.7 / 110.0 | 33.3 / 100.0 | 30.0 / 60.0 | 9000 |")
	require.Contains(t, text, "### Slow processor (the emulator answers every create in 250 ms)")
	require.Contains(t, text, "| 64 | 250 | 252 | 99% |")
}

// TestPGBenchNothingProcessed: a run that finished no transaction, and
// failed none, is told apart so that the runner can run it again.
func TestPGBenchNothingProcessed(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "pgbench")
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\n"+
		"echo 'number of transactions actually processed: 0'\necho 'number of failed transactions: 0 (NaN%)'\n"), 0o755))
	p := &PGBench{Path: fake, URL: "postgres://x", Duration: time.Second, LogDir: dir}
	_, err := p.Run(context.Background(), "fresh.sql", 32)
	require.ErrorIs(t, err, errNothingProcessed)
}

// TestReportNamesTheCodeMeasured: a run that knows its commit says which
// in the header; results saved before it say nothing of one.
func TestReportNamesTheCodeMeasured(t *testing.T) {
	r := sample()
	require.NotContains(t, Markdown(r, "bench.svg"), "**Code:**")
	r.Code = "commit 3618b19, with uncommitted changes"
	require.Contains(t, Markdown(r, "bench.svg"), "\n- **Code:** commit 3618b19, with uncommitted changes\n")
}

// TestTheSummaryIsTargetsAndMethodAndLinksTheFullReport: BENCHMARKS.md keeps
// the targets and the method; every other figure is in the full report it
// links to.
func TestTheSummaryIsTargetsAndMethodAndLinksTheFullReport(t *testing.T) {
	r := sampleFilled()
	summary := Summary(r, "docs/bench.svg", "docs/bench-report.md")
	for _, want := range []string{"# Benchmarks", "## Targets", "| target | measured | |", "## Method",
		"[docs/bench-report.md](docs/bench-report.md)", "](docs/bench.svg)"} {
		require.Contains(t, summary, want)
	}
	for _, only := range []string{"### Fresh payments (POST /payments", "## Machine", "## Ten million keys"} {
		require.NotContains(t, summary, only)
		require.Contains(t, Markdown(r, "bench.svg"), only)
	}
}
