package bench

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/testutil"
)

func TestParseProcesses(t *testing.T) {
	p, err := ParseProcesses("service=12, bare=34,emulator=56")
	require.NoError(t, err)
	require.Equal(t, Processes{Service: 12, Bare: 34, Emulator: 56}, p)

	p, err = ParseProcesses("")
	require.NoError(t, err)
	require.Zero(t, p)

	for _, bad := range []string{"service", "service=", "service=x", "service=-1", "pgbench=3"} {
		_, err := ParseProcesses(bad)
		require.Error(t, err, bad)
	}
}

func TestProcStatLines(t *testing.T) {
	// A command's name may hold spaces and parentheses: the fields start
	// after the last ')'.
	line := []byte("4242 (post) (gres)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 7 3 20 0 1 0 99 0 0\n")
	comm, fields, ok := statFields(line)
	require.True(t, ok)
	require.Equal(t, "post) (gres)", comm)
	own, ok := timesOf(fields, false)
	require.True(t, ok)
	require.Equal(t, 3*time.Second, own) // 250 + 50 ticks
	all, ok := timesOf(fields, true)
	require.True(t, ok)
	require.Equal(t, 3100*time.Millisecond, all) // + 7 + 3 of children

	_, _, ok = statFields([]byte("no parentheses"))
	require.False(t, ok)
	_, ok = timesOf([]string{"S", "1"}, false)
	require.False(t, ok)

	busy, idle, err := machineCPU([]byte("cpu  100 5 50 1000 20 1 4 10 0 0\ncpu0 1 2 3\n"))
	require.NoError(t, err)
	require.Equal(t, 1700*time.Millisecond, busy)  // user, nice, system, irq, softirq, steal
	require.Equal(t, 10200*time.Millisecond, idle) // idle, iowait
	_, _, err = machineCPU([]byte("intr 1 2 3\n"))
	require.Error(t, err)
}

func TestCPUSumIsPerRequest(t *testing.T) {
	at := func(service, bare, postgres, load, busy, idle time.Duration) *cpuReading {
		return &cpuReading{roles: cpuRoles{service: service, bare: bare, postgres: postgres, load: load}, busy: busy, idle: idle}
	}
	var s cpuSum
	s.add(at(0, 0, 0, 0, 0, 0), at(4*time.Millisecond, 0, 3*time.Millisecond, 2*time.Millisecond, 10*time.Millisecond, time.Millisecond), 100)
	s.add(at(10, 10, 10, 10, 10, 10), at(10+6*time.Millisecond, 10, 10+time.Millisecond, 10, 10+8*time.Millisecond, 10+time.Millisecond), 100)
	s.add(nil, at(time.Hour, 0, 0, 0, time.Hour, 0), 100) // a missing reading counts nothing
	require.Equal(t, &CPUCost{Requests: 200, Service: 50, Postgres: 20, Load: 10, Rest: 10, Busy: 90, Idle: 10}, s.cost())
	require.Nil(t, (&cpuSum{}).cost())
}

// TestReadCPUCountsEachProcess burns CPU in a child process named as the
// service and in a Postgres backend, and reads both, and the machine,
// going up by at least as much.
func TestReadCPUCountsEachProcess(t *testing.T) {
	ctx := context.Background()
	burn := exec.Command("sh", "-c", "while :; do :; done")
	require.NoError(t, burn.Start())
	t.Cleanup(func() { _ = burn.Process.Kill(); _ = burn.Wait() })
	procs := Processes{Service: burn.Process.Pid}

	conn, err := pgx.Connect(ctx, testutil.AdminURL(t))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(ctx) })

	before, err := readCPU(procs)
	require.NoError(t, err)
	// Postgres's part: a query that keeps one backend busy for a while.
	var n int64
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM generate_series(1, 3000000) AS g WHERE g % 7 = 0").Scan(&n))
	deadline := time.Now().Add(10 * time.Second)
	var after cpuReading
	for {
		after, err = readCPU(procs)
		require.NoError(t, err)
		if after.roles.service-before.roles.service >= 200*time.Millisecond || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	service, postgres := after.roles.service-before.roles.service, after.roles.postgres-before.roles.postgres
	require.GreaterOrEqual(t, service, 200*time.Millisecond, "the service's process burned CPU the whole time")
	require.Positive(t, postgres, "a backend counted a query of millions of rows")
	require.GreaterOrEqual(t, after.busy-before.busy+2*time.Second/clockTicks, service+postgres, "the machine was busy at least as long")
	require.Zero(t, after.roles.bare-before.roles.bare, "no bare service was named")

	// A process that is gone counts nothing, and is no error.
	gone := Processes{Bare: 1 << 30}
	r, err := readCPU(gone)
	require.NoError(t, err)
	require.Zero(t, r.roles.bare)
}

func TestCPUCostSection(t *testing.T) {
	r := sampleFilled() // replays at 32 connections: service 3700/s, bare 3900/s
	cost := func(service, bare, postgres, load, busy, idle float64) *CPUCost {
		return &CPUCost{Requests: 1000, Service: service, Bare: bare, Postgres: postgres, Load: load,
			Rest: busy - service - bare - postgres - load, Busy: busy, Idle: idle}
	}
	p := &r.Points[2]
	p.CPU = &CPUCosts{Fresh: cost(500, 0, 1100, 250, 2100, 60), BareFresh: cost(0, 420, 1080, 240, 1990, 50),
		Replay: cost(50, 0, 60, 30, 150, 5), BareReplay: cost(0, 40, 57, 28, 132, 6)}
	r.Filled.CPU = &CPUCosts{Replay: cost(51, 0, 75, 31, 166, 4), BareReplay: cost(0, 41, 74, 29, 153, 5)}

	text := Markdown(r, "bench.svg")
	for _, want := range []string{
		"### What a request costs the machine's CPUs, at 32 connections\n",
		"| runs | service | bare | Postgres | emulator | load generator | the rest | busy | idle |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|\n",
		"| service fresh | 500.0 → – | 0.0 → – | 1100.0 → – |",
		"| service replays | 50.0 → 51.0 | 0.0 → 0.0 | 60.0 → 75.0 | 0.0 → 0.0 | 30.0 → 31.0 | 10.0 → 9.0 | 150.0 → 166.0 | 5.0 → 4.0 |",
		"- **Replays**: the CPUs were busy 150.0 µs per request of the service's runs and 132.0 of the bare's, +18.0 µs:\n" +
			"  the serving process +10.0 (the service's 50.0 against the bare's 40.0), Postgres +3.0, the load generator +2.0,\n" +
			"  the emulator +0.0, the other service, not under load, +0.0, the rest +3.0; idle 5.0 and 6.0 µs per request.\n" +
			"  Busy time alone gives the service 88% of the bare's throughput; measured: 95%. For 90% the service's\n" +
			"  runs would need 3.3 µs less busy time per request; its own process's excess over the bare's is 10.0 µs.\n",
		"- **Replays of filled keys**: the CPUs were busy 166.0 µs per request of the service's runs and 153.0 of the bare's",
	} {
		require.Contains(t, text, want)
	}
	require.NotContains(t, text, "| fresh.sql |", "a side measured neither empty nor filled has no row")
	require.Contains(t, text, "Busy time alone gives the service 95% of the bare's throughput; measured: 95%.\n- **Replays**",
		"fresh payments: busy time alone meets the target, so no more is said")

	// The service's own process short of the gap: the rest is elsewhere.
	p.CPU.Replay.Busy, p.CPU.Replay.Rest = 170, 30
	require.Contains(t, Markdown(r, "bench.svg"), "For 90% the service's\n"+
		"  runs would need 23.3 µs less busy time per request; its own process's excess over the bare's is 10.0 µs,\n"+
		"  less than all of it: the rest is in processes doing the same work for a request of either side (one\n"+
		"  indexed read, one HTTP exchange), which spent more per request in the service's runs.\n")
	require.Less(t, strings.Index(text, "## Where the service's time goes"), strings.Index(text, "### What a request costs the machine's CPUs"))
	require.Less(t, strings.Index(text, "### What a request costs the machine's CPUs"), strings.Index(text, "## Where the database time goes"))

	// Without /proc: no section.
	require.NotContains(t, Markdown(sample(), "bench.svg"), "What a request costs the machine's CPUs")
}
