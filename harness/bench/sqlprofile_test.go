package bench

import (
	"bytes"
	"strings"
	"testing"
)

// perfScript is `perf script -F comm,ip,sym` output: six samples of
// postgres and one of pgbench.
const perfScript = `postgres 
	          2a1b2c stringToNode
	          302a5f ExecConstraints
	          32fdc7 [unknown]
	          303d1a standard_ExecutorRun
	          480386 PortalRun
	          47dabf PostgresMain

postgres 
	          1f00aa heap_insert
	          303d1a standard_ExecutorRun
	          47dabf PostgresMain

pgbench 
	          aaaaaa ExecConstraints

postgres 
	          5a879e XLogBackgroundFlush
	          3f930c [unknown]

postgres 
	          5a879e XLogBackgroundFlush
	          5a0000 WalWriterMain
	          3f930c [unknown]
	          3f0000 PostmasterMain

postgres 
	          4b0000 RI_FKey_check_ins
	          4a0000 AfterTriggerFireDeferred
	          490000 CommitTransactionCommand
	          47dabf PostgresMain

postgres 
	          302b00 ExecInsertIndexTuples
	          303d1a standard_ExecutorRun
	          47dabf PostgresMain
`

func TestFoldPerfScriptPutsEachSampleInItsFirstPhase(t *testing.T) {
	var p SQLProfile
	if err := p.FoldPerfScript(strings.NewReader(perfScript)); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"CHECK constraints": 1, "executor, the rest": 1, "other": 1, "index entries": 1,
		// The WAL writer's, forked by the postmaster, and a foreign key
		// checked at commit.
		"WAL writer": 1, "foreign-key checks": 1}
	if p.Total != 6 || len(p.Samples) != len(want) {
		t.Fatalf("folded %d samples into %v, want 6 into %v", p.Total, p.Samples, want)
	}
	for phase, n := range want {
		if p.Samples[phase] != n {
			t.Errorf("%s: %d samples, want %d", phase, p.Samples[phase], n)
		}
	}
	// 6 samples at 100 Hz are 60 ms of CPU; over 20 payments, 3000 µs each.
	p.Payments = 20
	if got := p.MicrosPerPayment("", 100); got != 3000 {
		t.Errorf("all phases: %v µs a payment, want 3000", got)
	}
	if got := p.MicrosPerPayment("CHECK constraints", 100); got != 500 {
		t.Errorf("CHECK constraints: %v µs a payment, want 500", got)
	}
}

func TestSQLProfileTableSortsByDifference(t *testing.T) {
	a := &SQLProfile{Samples: map[string]int64{"CHECK constraints": 10, "commit": 30}, Total: 40, Payments: 1}
	b := &SQLProfile{Samples: map[string]int64{"commit": 30}, Total: 30, Payments: 1}
	var buf bytes.Buffer
	WriteSQLProfileTable(&buf, "a", "b", a, b, 1e6)
	lines := strings.Split(buf.String(), "\n")
	if !strings.HasPrefix(lines[2], "| CHECK constraints | 10 | 0 | +10 | 100% |") {
		t.Errorf("first row %q, want the CHECKs with the whole difference", lines[2])
	}
	if !strings.Contains(buf.String(), "| **all** | **40** | **30** | **+10** |") {
		t.Errorf("no total row of 40 against 30 in\n%s", buf.String())
	}

	// Rounds: a 12 and 8 µs, b 10 and 10: differences +2 and -2, mean 0,
	// sd 2.83, t(1) 12.706, so 0 ± 25.4.
	a.Runs = []SQLProfileCount{{12, 1}, {8, 1}}
	b.Runs = []SQLProfileCount{{10, 1}, {10, 1}}
	buf.Reset()
	WriteSQLProfileTable(&buf, "a", "b", a, b, 1e6)
	if !strings.Contains(buf.String(), "Round by round, µs a payment: a 12, 8; b 10, 10. The difference, round by round as pairs: 95% interval -25 to +25 µs.") {
		t.Errorf("no rounds or interval in\n%s", buf.String())
	}

	// A difference within a tenth of b's CPU has no shares.
	a.Samples["CHECK constraints"], a.Total = 2, 32
	buf.Reset()
	WriteSQLProfileTable(&buf, "a", "b", a, b, 1e6)
	if !strings.Contains(buf.String(), "| CHECK constraints | 2 | 0 | +2 | – |") {
		t.Errorf("a share of a 2 µs difference over 30 µs in\n%s", buf.String())
	}
}

func TestParseSQLProfileRun(t *testing.T) {
	run, err := ParseSQLProfileRun("fresh.sql=/tmp/a:b.txt:1200")
	if err != nil || run != (SQLProfileRun{Side: "fresh.sql", Path: "/tmp/a:b.txt", Payments: 1200}) {
		t.Errorf("got %+v, %v", run, err)
	}
	for _, bad := range []string{"fresh.sql", "=/tmp/a:1", "fresh.sql=/tmp/a", "fresh.sql=/tmp/a:0", "fresh.sql=:5"} {
		if _, err := ParseSQLProfileRun(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
