package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// Results is everything one run measured; the report is rendered from it,
// and it is saved as JSON so that a report can be rendered again.
type Results struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Duration and Warmup are the measured window and the warm-up before it
	// of every load and pgbench run.
	Duration Seconds `json:"duration"`
	Warmup   Seconds `json:"warmup"`
	// Command is how the run was started, as the report should show it.
	Command string `json:"command"`
	// Code is the commit measured, and whether the work tree differed from
	// it; empty outside a git checkout and in results saved before it.
	Code    string  `json:"code,omitempty"`
	Machine Machine `json:"machine"`
	Users   int     `json:"users"`
	// ReplayKeys is the number of finished keys per user the replays use.
	ReplayKeys int `json:"replay_keys"`
	// StatStatements is "enabled", or why pg_stat_statements is not.
	StatStatements string `json:"stat_statements"`
	// WALInspect is "enabled", or why pg_walinspect is not.
	WALInspect string  `json:"wal_inspect"`
	Noise      Noise   `json:"noise"`
	Points     []Point `json:"points"`
	// Slow is the slow-processor point: the emulator answering every
	// create after a fixed latency, service and bare at one concurrency.
	Slow *Slow `json:"slow,omitempty"`
	// Many is the many-in-flight point (many.go); nil when it was not run.
	Many *Many `json:"many,omitempty"`
	// Profiled is set when the service ran with its pprof server on
	// (BENCH_PROFILE=1), and Profiles holds what was fetched from it and
	// from the bare service's.
	Profiled bool      `json:"profiled,omitempty"`
	Profiles []Profile `json:"profiles,omitempty"`
	// Top holds the heaviest statements of the service's fresh and replay
	// windows, summed over every connection count, when pg_stat_statements
	// is enabled.
	Top map[string][]Statement `json:"top,omitempty"`
	// Filled is the point measured again on a filled database (BENCH_FILL,
	// make bench-fill); nil when no fill ran.
	Filled *Filled `json:"filled,omitempty"`
}

// Seconds is a duration that encodes as a number of seconds.
type Seconds float64

// Of converts a duration.
func Of(d time.Duration) Seconds { return Seconds(d.Seconds()) }

// Duration converts back.
func (s Seconds) Duration() time.Duration { return time.Duration(float64(s) * float64(time.Second)) }

// Machine describes where the run happened.
type Machine struct {
	CPUs              int    `json:"cpus"`
	CPUModel          string `json:"cpu_model"`
	Memory            string `json:"memory"`
	Kernel            string `json:"kernel"`
	GoVersion         string `json:"go_version"`
	PostgresVersion   string `json:"postgres_version"`
	Fsync             string `json:"fsync"`
	SynchronousCommit string `json:"synchronous_commit"`
	SharedBuffers     string `json:"shared_buffers"`
	MaxWALSize        string `json:"max_wal_size,omitempty"`
	CheckpointTimeout string `json:"checkpoint_timeout,omitempty"`
	PreloadLibraries  string `json:"shared_preload_libraries"`
	PgbenchVersion    string `json:"pgbench_version"`
}

// Noise is the bench database's background activity with the service idle:
// its workers' polling, autovacuum, and (for transaction ids, which are
// counted cluster-wide) everyone else on the server.
type Noise struct {
	Seconds    float64 `json:"seconds"`
	XactPerSec float64 `json:"xact_per_sec"`
	XidPerSec  float64 `json:"xid_per_sec"`
	// WritesPerSec is the bench database's writing transactions, and
	// PhaseWritesPerSec those that wrote idempotency_keys, from the WAL.
	WritesPerSec      float64 `json:"writes_per_sec"`
	PhaseWritesPerSec float64 `json:"phase_writes_per_sec"`
}

// Point is everything measured at one connection count: the service, the
// bare service (the yardstick, harness/bench/bare) and the pgbench
// ceilings.
type Point struct {
	Conns         int     `json:"conns"`
	Fresh         Load    `json:"fresh"`
	BareFresh     Load    `json:"bare_fresh"`
	Emulator      Load    `json:"emulator"`
	Replay        Load    `json:"replay"`
	BareReplay    Load    `json:"bare_replay"`
	FreshCeiling  Ceiling `json:"fresh_ceiling"`
	ReplayCeiling Ceiling `json:"replay_ceiling"`
	Commits       Commits `json:"commits"`
	// BareWritesPerPayment is the bare service's writing transactions per
	// payment, from the WAL (net of the background); nil when the WAL could
	// not be read. It has no background work: 2 is what it should show.
	BareWritesPerPayment *float64 `json:"bare_writes_per_payment,omitempty"`
	// Costs is what each side's runs cost the database per request, from
	// pg_stat_statements; nil without it.
	Costs *Costs `json:"db_cost,omitempty"`
	// CPU is what each side's runs cost the machine's CPUs per request, by
	// process, from /proc; nil without it.
	CPU *CPUCosts `json:"cpu_cost,omitempty"`
	// Waits is what the database's backends were doing during each side's
	// runs, from pg_stat_activity (waits.go); nil when it was not sampled.
	Waits *WaitCosts `json:"waits,omitempty"`
	// LeastFresh and LeastReplay are the bare service over the least SQL
	// that does the job (harness/bench/least), the design's yardstick, and
	// LeastCeiling and LeastReplayCeiling its pgbench ceilings (least.sql,
	// least_replay.sql); zero when the run had no least-SQL bare service
	// (see Point.LeastMeasured).
	LeastFresh         Load    `json:"least_fresh"`
	LeastReplay        Load    `json:"least_replay"`
	LeastCeiling       Ceiling `json:"least_ceiling"`
	LeastReplayCeiling Ceiling `json:"least_replay_ceiling"`
	// Evidence is what the database showed of the service's first fresh
	// run and of the least-SQL bare's (evidence.go); nil, or either side
	// nil, when it could not be read.
	Evidence *EvidenceSides `json:"evidence,omitempty"`
}

// LeastMeasured reports whether the point measured the least SQL: the
// bare service over it, and its ceilings.
func (p Point) LeastMeasured() bool { return p.LeastFresh.OK > 0 || p.LeastCeiling.Transactions > 0 }

// Slow is the slow-processor point.
type Slow struct {
	Conns     int     `json:"conns"`
	LatencyMS float64 `json:"latency_ms"`
	Fresh     Load    `json:"fresh"`
	BareFresh Load    `json:"bare_fresh"`
}

// Profile is what a pprof server showed during one run: the service's, or
// the bare service's during its own run of the same scenario.
type Profile struct {
	// Process is "bare" for the bare service's profiles, empty for the
	// service's.
	Process string `json:"process,omitempty"`
	// Scenario is "fresh" or "replay"; Conns the connection count.
	Scenario string  `json:"scenario"`
	Conns    int     `json:"conns"`
	Seconds  float64 `json:"seconds"`
	// Throughput is the requests per second of the run the profile
	// sampled, a run of its own (measurer.profiledRuns); 0 in results
	// from before, whose profiles sampled the judged runs.
	Throughput float64 `json:"throughput,omitempty"`
	// Tops are `go tool pprof -top` summaries, in the report's order.
	Tops []ProfileTop `json:"tops,omitempty"`
	// CPU is the CPU profile read by bucket, and Allocs the allocations'
	// totals (profile_compare.go), when they could be read.
	CPU    *CPUBreakdown `json:"cpu,omitempty"`
	Allocs *Allocations  `json:"allocs,omitempty"`
	// Error says what could not be fetched or read, if anything.
	Error string `json:"error,omitempty"`
}

// ProfileTop is one `go tool pprof -top` summary.
type ProfileTop struct {
	// Title says which profile and which order: "CPU by flat time", say.
	Title string `json:"title"`
	Text  string `json:"text"`
}

// Load is one closed-loop HTTP run, or several runs of one scenario read
// as one (combine): their windows end to end, their latencies together.
type Load struct {
	// Throughput is successful requests per second in the window.
	Throughput float64 `json:"throughput"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
	// OK counts successes in the window; Total counts every success of
	// the run, warm-up and the requests in flight at its end included.
	OK    int `json:"ok"`
	Total int `json:"total"`
	// NonOK counts the responses that were not 2xx, by status, over the
	// whole run (409s are among them).
	NonOK map[int]int `json:"non_2xx,omitempty"`
	// Unexpected counts 2xx responses that were still wrong: a replay
	// without Idempotent-Replayed: true, say.
	Unexpected int `json:"unexpected"`
	// Errors counts transport errors: no HTTP response at all; Timeouts
	// those of them that were the client's timeout (30 s) running out.
	Errors   int `json:"errors"`
	Timeouts int `json:"timeouts,omitempty"`
	// Runs is the throughput of each run a combined Load was read from,
	// in the order they ran (the judged pairs at TargetConns, JudgedRuns
	// runs a side in ABBA order); empty for a single run.
	Runs []float64 `json:"runs,omitempty"`
}

// Conflicts is the number of 409s.
func (l Load) Conflicts() int { return l.NonOK[409] }

// Failures is every request that went wrong other than a 409.
func (l Load) Failures() int {
	n := l.Unexpected + l.Errors
	for status, count := range l.NonOK {
		if status != 409 {
			n += count
		}
	}
	return n
}

// Ceiling is one pgbench run.
type Ceiling struct {
	TPS          float64 `json:"tps"`
	P50          float64 `json:"p50_ms"`
	P99          float64 `json:"p99_ms"`
	Transactions int     `json:"transactions"`
	Failed       int     `json:"failed"`
	// XactPerScript is the xact_commit delta per script run: 2 for
	// fresh.sql, which validates the commit accounting.
	XactPerScript float64 `json:"xact_per_script,omitempty"`
	// WritesPerScript is the writing transactions per script, from the
	// WAL: 2 for fresh.sql.
	WritesPerScript float64 `json:"writes_per_script,omitempty"`
	// Runs is the throughput of each run a combined Ceiling was read from
	// (combineCeilings), in the order they ran; empty for a single run.
	Runs []float64 `json:"runs,omitempty"`
	// latencies are the run's transaction latencies, sorted, for
	// combining; they stay out of the saved results.
	latencies []time.Duration
}

// Commits is the commit accounting of one fresh run.
type Commits struct {
	Payments      int     `json:"payments"`
	WindowSeconds float64 `json:"window_seconds"`
	// Xact and Xid are the raw deltas over the window.
	Xact int64 `json:"xact"`
	Xid  int64 `json:"xid"`
	// Writes is the number of transactions that wrote to the bench
	// database and PhaseWrites of those that wrote idempotency_keys (the
	// phase commits), from the WAL; -1 when the WAL could not be read.
	Writes      int64 `json:"writes"`
	PhaseWrites int64 `json:"phase_writes"`
	// The figures per payment are net of the background rate and of the
	// harness's own queries.
	XactPerPayment         float64 `json:"xact_per_payment"`
	XidPerPayment          float64 `json:"xid_per_payment"`
	WritesPerPayment       float64 `json:"writes_per_payment"`
	PhaseCommitsPerPayment float64 `json:"phase_commits_per_payment"`
	// CommitStatements counts COMMIT statements per payment, from
	// pg_stat_statements when it is enabled (0 otherwise).
	CommitStatements float64 `json:"commit_statements_per_payment,omitempty"`
}

// WritingPerPayment is the best count of writing transactions per payment:
// from the WAL when it could be read, else from the cluster-wide counter.
func (c Commits) WritingPerPayment() (float64, string) {
	if c.Writes >= 0 {
		return c.WritesPerPayment, "WAL"
	}
	return c.XidPerPayment, "xid"
}

// Statement is one pg_stat_statements entry over the service's windows.
type Statement struct {
	Query       string  `json:"query"`
	Calls       int64   `json:"calls"`
	TotalMs     float64 `json:"total_ms"`
	MeanMs      float64 `json:"mean_ms"`
	PerRequest  float64 `json:"calls_per_request"`
	ShareOfTime float64 `json:"share"`
}

// Save writes r as indented JSON.
func (r *Results) Save(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// LoadResults reads what Save wrote.
func LoadResults(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("error decoding %s: %w", path, err)
	}
	return &r, nil
}
