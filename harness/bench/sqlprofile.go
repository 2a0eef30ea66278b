package bench

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// # What a payment's SQL costs the server's CPU, phase by phase
//
// The ablation (scripts/bench-ablation.sh) says how much throughput each
// layer of the schema costs, but on two shared cores its runs drift by a
// fifth, so a layer worth a few percent is lost in them. A sampling
// profile of the Postgres processes while pgbench runs fresh.sql, and then
// least.sql, does not drift that way: every sample is a call stack, and
// the functions on it say what the backend was doing. Folding the stacks
// into the executor's phases, and dividing by the payments the run made,
// gives the server's CPU a payment in each phase on both sides, and the
// difference says where the distance between them goes
// (scripts/bench-sql-profile.sh writes it to docs/bench-sql-profile.md).

// SQLPhase is one part of a backend's work, named by the Postgres
// functions whose presence on a sample's stack puts the sample in it.
// They are functions the postgres binary exports: perf names a static one
// by its address alone (Debian's binary has no symbols beside its dynamic
// ones), so a phase names an exported function on the stack above it.
type SQLPhase struct {
	Name  string
	Funcs []string
	// What says what the phase is, for the report.
	What string
}

// SQLPhases are tried in order: a sample is in the first phase one of
// whose functions is on its stack, so the narrow phases come before the
// executor's stages that contain them.
var SQLPhases = []SQLPhase{
	{"CHECK constraints", []string{"ExecConstraints"},
		"the table's CHECKs and NOT NULLs; Postgres reads each CHECK back from its stored tree and plans it for every statement that writes the table (ExecRelCheck)"},
	{"foreign-key checks", []string{"AfterTriggerEndQuery", "AfterTriggerFireDeferred", "RI_FKey_check_ins", "RI_FKey_check_upd"},
		"the referential-integrity triggers, each a query that locks the referenced row, at the statement's end or, deferred, at commit"},
	{"index entries", []string{"ExecInsertIndexTuples"},
		"writing the new row's index entries, with each partial index's predicate planned and tested for every statement"},
	{"opening indexes", []string{"ExecOpenIndices", "ExecCloseIndices"},
		"opening and closing every index of a table a statement writes, written to or not"},
	{"executor start", []string{"standard_ExecutorStart"},
		"turning the cached plan into executor state: projections (with every domain-typed column's rules), scans, result relations"},
	{"executor, the rest", []string{"standard_ExecutorRun", "standard_ExecutorFinish", "standard_ExecutorEnd"},
		"scans, the rows' heap writes, expressions (the domains' rules among them), RETURNING, the CTEs"},
	{"commit", []string{"CommitTransactionCommand", "StartTransactionCommand"},
		"beginning and committing, the WAL flush included"},
	{"cached plan", []string{"GetCachedPlan"},
		"taking the prepared statement's cached plan, and planning it when it must"},
	{"client I/O", []string{"pq_getbyte", "pq_getmessage", "secure_write", "secure_read"},
		"reading the statements and sending the answers"},
	{"rest of the backend", []string{"PostgresMain"},
		"everything else a backend does: reading and binding each message, its start, between statements"},
	{"WAL writer", []string{"WalWriterMain"}, "flushing the WAL in the background"},
	{"checkpointer and background writer", []string{"CheckpointerMain", "BackgroundWriterMain"},
		"writing dirty pages out"},
	{"autovacuum", []string{"StartAutoVacWorker", "StartAutoVacLauncher"},
		"vacuuming and analysing the tables the runs grow"},
	{"postmaster", []string{"PostmasterMain"}, "starting each connection's backend"},
	{"other", nil, "samples of a postgres process with none of these on the stack: the kernel's work alone, or a stack perf could not walk"},
}

// SQLProfileRun is one profiled pgbench run: `perf script -F comm,sym`
// over it, and the payments it made.
type SQLProfileRun struct {
	Side     string
	Path     string
	Payments int64
}

// ParseSQLProfileRun reads "SIDE=FILE:PAYMENTS".
func ParseSQLProfileRun(s string) (SQLProfileRun, error) {
	side, rest, ok := strings.Cut(s, "=")
	i := strings.LastIndexByte(rest, ':')
	if !ok || side == "" || i <= 0 {
		return SQLProfileRun{}, fmt.Errorf("sql-profile: %q is not SIDE=FILE:PAYMENTS", s)
	}
	n, err := strconv.ParseInt(rest[i+1:], 10, 64)
	if err != nil || n <= 0 {
		return SQLProfileRun{}, fmt.Errorf("sql-profile: %q: the payments are not a positive number", s)
	}
	return SQLProfileRun{Side: side, Path: rest[:i], Payments: n}, nil
}

// SQLProfile is the samples of one side's runs by phase, and its payments.
type SQLProfile struct {
	Samples  map[string]int64
	Total    int64
	Payments int64
	// Runs are each run's samples and payments, in the order they were
	// folded: run i of each side is round i.
	Runs []SQLProfileCount
}

// SQLProfileCount is one run's samples, all phases, and its payments.
type SQLProfileCount struct{ Samples, Payments int64 }

// FoldPerfScript adds the postgres samples of perf script's output (a
// header line "comm ..." then one frame a line, leaf first, samples
// separated by blank lines) to p, each in its first matching phase.
func (p *SQLProfile) FoldPerfScript(r io.Reader) error {
	if p.Samples == nil {
		p.Samples = map[string]int64{}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var (
		inSample, isPostgres bool
		frames               []string
	)
	flush := func() {
		if inSample && isPostgres {
			p.Samples[phaseOf(frames)]++
			p.Total++
		}
		inSample, isPostgres, frames = false, false, frames[:0]
	}
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
			flush()
		case !inSample:
			inSample = true
			isPostgres = strings.Fields(line)[0] == "postgres"
		default:
			// A frame: "ADDRESS SYMBOL+OFFSET (DSO)" or just "SYMBOL".
			f := strings.Fields(line)
			sym := f[0]
			if len(f) > 1 {
				sym = f[1]
			}
			sym, _, _ = strings.Cut(sym, "+")
			frames = append(frames, sym)
		}
	}
	flush()
	return sc.Err()
}

func phaseOf(frames []string) string {
	for _, ph := range SQLPhases {
		for _, fn := range ph.Funcs {
			if slices.Contains(frames, fn) {
				return ph.Name
			}
		}
	}
	return SQLPhases[len(SQLPhases)-1].Name
}

// MicrosPerPayment is the CPU µs a payment that the phase's samples stand
// for, at hz samples a second on each CPU.
func (p *SQLProfile) MicrosPerPayment(phase string, hz float64) float64 {
	if p.Payments == 0 {
		return 0
	}
	n := p.Total
	if phase != "" {
		n = p.Samples[phase]
	}
	return micros(n, p.Payments, hz)
}

// micros is the CPU µs a payment that samples stand for, at hz samples a
// second on each CPU.
func micros(samples, payments int64, hz float64) float64 {
	return 1e6 * float64(samples) / hz / float64(payments)
}

// LoadSQLProfiles folds every run's file into its side's profile.
func LoadSQLProfiles(runs []SQLProfileRun) (map[string]*SQLProfile, error) {
	out := map[string]*SQLProfile{}
	for _, run := range runs {
		p := out[run.Side]
		if p == nil {
			p = &SQLProfile{}
			out[run.Side] = p
		}
		f, err := os.Open(run.Path)
		if err != nil {
			return nil, err
		}
		before := p.Total
		err = p.FoldPerfScript(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", run.Path, err)
		}
		p.Payments += run.Payments
		p.Runs = append(p.Runs, SQLProfileCount{Samples: p.Total - before, Payments: run.Payments})
	}
	return out, nil
}

// WriteSQLProfileTable writes the Markdown table of the server's CPU a
// payment by phase, side a against side b, biggest difference first.
func WriteSQLProfileTable(w io.Writer, a, b string, pa, pb *SQLProfile, hz float64) {
	total := pa.MicrosPerPayment("", hz) - pb.MicrosPerPayment("", hz)
	phases := slices.Clone(SQLPhases)
	diff := func(ph SQLPhase) float64 {
		return pa.MicrosPerPayment(ph.Name, hz) - pb.MicrosPerPayment(ph.Name, hz)
	}
	slices.SortStableFunc(phases, func(x, y SQLPhase) int { return cmp.Compare(diff(y), diff(x)) })
	fmt.Fprintf(w, "| phase | %s, µs a payment | %s, µs a payment | difference | share of the difference | what it is |\n", a, b)
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|---|")
	for _, ph := range phases {
		d := diff(ph)
		// A share of a difference within a tenth of b's CPU says nothing.
		share := "–"
		if math.Abs(total) >= pb.MicrosPerPayment("", hz)/10 {
			share = fmt.Sprintf("%.0f%%", 100*d/total)
		}
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %+.0f | %s | %s |\n", ph.Name,
			pa.MicrosPerPayment(ph.Name, hz), pb.MicrosPerPayment(ph.Name, hz), d, share, ph.What)
	}
	fmt.Fprintf(w, "| **all** | **%.0f** | **%.0f** | **%+.0f** | | %d and %d samples, %d and %d payments |\n",
		pa.MicrosPerPayment("", hz), pb.MicrosPerPayment("", hz), total, pa.Total, pb.Total, pa.Payments, pb.Payments)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Round by round, µs a payment: %s %s; %s %s.", a, roundsText(pa.Runs, hz), b, roundsText(pb.Runs, hz))
	if lo, hi, ok := pairedDifference(pa.Runs, pb.Runs, hz); ok {
		fmt.Fprintf(w, " The difference, round by round as pairs: 95%% interval %+.0f to %+.0f µs.", lo, hi)
	}
	fmt.Fprintln(w)
}

func roundsText(runs []SQLProfileCount, hz float64) string {
	parts := make([]string, len(runs))
	for i, c := range runs {
		parts[i] = fmt.Sprintf("%.0f", micros(c.Samples, c.Payments, hz))
	}
	return strings.Join(parts, ", ")
}

// pairedDifference is the 95% interval of the mean of a's µs a payment less
// b's, run i of each side from round i; ok is false with fewer than two
// rounds a side or unequal rounds.
func pairedDifference(a, b []SQLProfileCount, hz float64) (lo, hi float64, ok bool) {
	if len(a) < 2 || len(a) != len(b) {
		return 0, 0, false
	}
	d := make([]float64, len(a))
	for i := range a {
		d[i] = micros(a[i].Samples, a[i].Payments, hz) - micros(b[i].Samples, b[i].Payments, hz)
	}
	lo, hi = meanInterval(d)
	return lo, hi, true
}
