package bench

import (
	"fmt"
	"strings"
)

// cpuCostSection shows what one request of each side cost the machine's
// CPUs at TargetConns (CPUCost), by process, on the empty database and,
// after a fill, on the filled one beside it; then where the service's
// remainder against the bare service went, machine-wide. It writes nothing
// without /proc.
func cpuCostSection(b *strings.Builder, r *Results) {
	e, ok := r.point(TargetConns)
	if !ok || e.CPU == nil {
		return
	}
	var f *CPUCosts
	if r.Filled.Measured() {
		f = r.Filled.CPU
	}
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("### What a request costs the machine's CPUs, at %d connections\n\n", TargetConns)
	w("A profile sees one process; the throughput ratios are of the whole machine, whose cores the load\n")
	w("generator, Postgres and the emulator share with the service. Per request, in µs, over each side's runs\n")
	w("(warm-up included), from /proc: the CPU time of the service's process, the bare service's, every postgres\n")
	w("process (those that exited meanwhile included), the emulator's, the load generator's (the harness, and\n")
	w("pgbench for fresh.sql), the rest of the time the CPUs were busy (the kernel's own work, other processes,\n")
	w("and time the hypervisor gave to other machines, where it says so), all of it, and the time they were idle\n")
	w("(harness/bench/proccpu.go). /proc counts in hundredths of a second per process, read before and after\n")
	w("each run, so a small figure is good to a few µs (the rest, a difference, can come out below zero). ")
	sideTable(w, e.CPU, f, []sideColumn[CPUCost]{
		{"service", "%.1f", func(c *CPUCost) float64 { return c.Service }},
		{"bare", "%.1f", func(c *CPUCost) float64 { return c.Bare }},
		{"Postgres", "%.1f", func(c *CPUCost) float64 { return c.Postgres }},
		{"emulator", "%.1f", func(c *CPUCost) float64 { return c.Emulator }},
		{"load generator", "%.1f", func(c *CPUCost) float64 { return c.Load }},
		{"the rest", "%.1f", func(c *CPUCost) float64 { return c.Rest }},
		{"busy", "%.1f", func(c *CPUCost) float64 { return c.Busy }},
		{"idle", "%.1f", func(c *CPUCost) float64 { return c.Idle }},
	})
	remainderNote(w, "Fresh payments", e.CPU.Fresh, e.CPU.BareFresh, e.Fresh.Throughput, e.BareFresh.Throughput)
	remainderNote(w, "Replays", e.CPU.Replay, e.CPU.BareReplay, e.Replay.Throughput, e.BareReplay.Throughput)
	if f != nil {
		remainderNote(w, "Replays of filled keys", f.Replay, f.BareReplay, r.Filled.Replay.Throughput, r.Filled.BareReplay.Throughput)
	}
	w("\n")
}

// remainderNote says, for one pair of sides, how much more busy CPU time
// a request of the service's runs took than one of the bare service's, by
// process, and what throughput ratio that alone would give on CPUs that
// are never idle, beside the ratio measured.
func remainderNote(w func(string, ...any), what string, service, bare *CPUCost, serviceTput, bareTput float64) {
	if service == nil || bare == nil || service.Busy <= 0 || bareTput <= 0 {
		return
	}
	d := func(v float64) string { return fmt.Sprintf("%+.1f", v) }
	w("- **%s**: the CPUs were busy %.1f µs per request of the service's runs and %.1f of the bare's, %s µs:\n",
		what, service.Busy, bare.Busy, d(service.Busy-bare.Busy))
	w("  the serving process %s (the service's %.1f against the bare's %.1f), Postgres %s, the load generator %s,\n",
		d(service.Service-bare.Bare), service.Service, bare.Bare, d(service.Postgres-bare.Postgres), d(service.Load-bare.Load))
	w("  the emulator %s, the other service, not under load, %s, the rest %s; idle %.1f and %.1f µs per request.\n",
		d(service.Emulator-bare.Emulator), d(service.Bare-bare.Service), d(service.Rest-bare.Rest), service.Idle, bare.Idle)
	w("  Busy time alone gives the service %s of the bare's throughput; measured: %s.",
		percent(bare.Busy, service.Busy), percent(serviceTput, bareTput))
	if need := service.Busy - bare.Busy/BareRatio; need > 0 {
		w(" For %s the service's\n  runs would need %.1f µs less busy time per request; its own process's excess over the bare's is %.1f µs",
			percent(BareRatio, 1), need, service.Service-bare.Bare)
		if own := service.Service - bare.Bare; own < need {
			w(",\n  less than all of it: the rest is in processes doing the same work for a request of either side (one\n")
			w("  indexed read, one HTTP exchange), which spent more per request in the service's runs")
		}
		w(".")
	}
	w("\n")
}
