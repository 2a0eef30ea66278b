package bench

import (
	"cmp"
	"fmt"
	"strings"
)

// compareMethod says how compareProfiles reads the two processes.
func compareMethod(b *strings.Builder) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("**The service beside the bare.** *CPU per request* is the CPU time a process's profile sampled\n")
	w("(the total of its samples, taken at 100 Hz on every thread) divided by the requests that process\n")
	w("answered over the profile's span: the profiled run's throughput (requests answered inside its\n")
	w("measured window ÷ the window) × the profile's duration. *Allocations per request* are the allocs delta\n")
	w("profile's totals over the window (`alloc_objects`, `alloc_space`: the runtime's sampled estimates)\n")
	w("divided the same way. Each CPU sample is put in exactly one bucket, read from its stack, so a\n")
	w("process's buckets add up to its CPU per request and the *service − bare* column adds up to the\n")
	w("difference: the remainder of the ratio, by where it goes. A sample is its goroutine's when that is\n")
	w("the GC's, the profiler's or a background worker's; otherwise it is the bucket of the innermost frame\n")
	w("of its stack that names one, leaf first: a pgx call made by the engine is the database client's and\n")
	w("the engine's code around it the engine's, and the standard library or the runtime below a frame\n")
	w("(encoding/json, a syscall) counts for that frame. The allocator (mallocgc and its entry points),\n")
	w("GC assists and write barriers are the GC's wherever they are called from; net/http is the HTTP\n")
	w("server's except under the Stripe client (harness/bench/profile_compare.go reads the stacks).\n")
	w("A profile's resolution is one sample, 10 ms of CPU, over the requests of its span; it is given\n")
	w("under each table, and the ± column is two standard deviations of the sampling noise, counting\n")
	w("a bucket's samples as a Poisson count (n ± √n).\n\n")
	w("<details><summary>the buckets</summary>\n\n| bucket | what it holds |\n|---|---|\n")
	for _, bk := range CPUBuckets() {
		w("| %s | %s |\n", bk[0], bk[1])
	}
	w("\n</details>\n\n")
}

// compareProfiles writes the service's CPU and allocations per request
// beside the bare's during one scenario's runs, and the difference by
// bucket.
func compareProfiles(b *strings.Builder, r *Results, scenario string, service, bare *Profile) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	var svcLoad, bareLoad Load
	conns := cmp.Or(service, bare).Conns
	for _, p := range r.Points {
		if p.Conns == conns {
			svcLoad, bareLoad = p.Fresh, p.BareFresh
			if scenario == "replay" {
				svcLoad, bareLoad = p.Replay, p.BareReplay
			}
		}
	}
	s, bp := perRequest(service, cmp.Or(profileThroughput(service), svcLoad.Throughput)),
		perRequest(bare, cmp.Or(profileThroughput(bare), bareLoad.Throughput))
	switch {
	case s == nil && bp == nil:
		w("Neither CPU profile could be read per request.\n\n")
		return
	case s == nil:
		w("The service's CPU profile could not be read per request.\n\n")
		return
	case bp == nil:
		w("The bare service's CPU profile could not be read per request.\n\n")
		return
	}
	w("| at %d connections | service | bare | service − bare |\n|---|--:|--:|--:|\n", conns)
	w("| requests / s in the window | %.0f | %.0f | %.0f%% of the bare's |\n", s.Throughput, bp.Throughput, 100*s.Throughput/bp.Throughput)
	w("| CPU in use (cores) | %.2f | %.2f | %+.2f |\n", s.Cores, bp.Cores, s.Cores-bp.Cores)
	w("| **CPU / request** | **%s** | **%s** | **%s** (%.2f×) |\n", us(s.CPU), us(bp.CPU), usSigned(s.CPU-bp.CPU), s.CPU/bp.CPU)
	if s.HasAllocs && bp.HasAllocs {
		w("| allocations / request | %.0f | %.0f | %+.0f |\n", s.Objects, bp.Objects, s.Objects-bp.Objects)
		w("| bytes allocated / request | %s | %s | %+.1f KiB |\n", kib(s.Bytes), kib(bp.Bytes), (s.Bytes-bp.Bytes)/1024)
	}
	diff, diffNoise := s.CPU-bp.CPU, noise(s.CPU, bp.CPU, s, bp)
	// Shares of a difference lost in the noise would be noise too.
	shares := diff > diffNoise
	w("\nService minus bare, CPU per request by bucket, the largest excess first (± is two standard\n")
	w("deviations of the sampling noise):\n\n")
	w("| bucket | service | bare | service − bare | ± | share of the difference |\n|---|--:|--:|--:|--:|--:|\n")
	for _, d := range compareBuckets(s, bp) {
		share := "–"
		if shares {
			share = fmt.Sprintf("%.0f%%", 100*d.Diff/diff)
		}
		w("| %s | %s | %s | %s | %s | %s |\n", d.Name, us(d.Service), us(d.Bare), usSigned(d.Diff), us(d.Noise), share)
	}
	w("| **total** | **%s** | **%s** | **%s** | %s | |\n\n", us(s.CPU), us(bp.CPU), usSigned(diff), us(diffNoise))
	w("One sample is %s per request of the service and %s of the bare.", us(s.Sample), us(bp.Sample))
	if !shares {
		w(" The totals differ by no more than their\nsampling noise: the buckets say where each process spends its CPU, not what the service adds.")
	}
	w("\n\n")
}

// us writes seconds as microseconds.
func us(secs float64) string { return fmt.Sprintf("%.1f µs", secs*1e6) }

func usSigned(secs float64) string { return fmt.Sprintf("%+.1f µs", secs*1e6) }

// kib writes bytes as KiB.
func kib(bytes float64) string { return fmt.Sprintf("%.1f KiB", bytes/1024) }

// profileThroughput is the throughput of the run p sampled, when it was a
// run of its own; 0 otherwise.
func profileThroughput(p *Profile) float64 {
	if p == nil {
		return 0
	}
	return p.Throughput
}
