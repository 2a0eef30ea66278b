package bench

import (
	"bytes"
	"strings"
	"testing"
)

// perfScript is `perf script -F comm,ip,sym` output: four samples of
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
	          302b00 ExecInsertIndexTuples
	          303d1a standard_ExecutorRun
	          47dabf PostgresMain
`

func TestFoldPerfScriptPutsEachSampleInItsFirstPhase(t *testing.T) {
	var p SQLProfile
	if err := p.FoldPerfScript(strings.NewReader(perfScript)); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"CHECK constraints": 1, "executor, the rest": 1, "other processes": 1, "index entries": 1}
	if p.Total != 4 || len(p.Samples) != len(want) {
		t.Fatalf("folded %d samples into %v, want 4 into %v", p.Total, p.Samples, want)
	}
	for phase, n := range want {
		if p.Samples[phase] != n {
			t.Errorf("%s: %d samples, want %d", phase, p.Samples[phase], n)
		}
	}
	// 4 samples at 100 Hz are 40 ms of CPU; over 20 payments, 2000 µs each.
	p.Payments = 20
	if got := p.MicrosPerPayment("", 100); got != 2000 {
		t.Errorf("all phases: %v µs a payment, want 2000", got)
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
