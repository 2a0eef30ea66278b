package bench

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
)

// The service's CPU is read against the bare service's by bucket: every
// sample of a CPU profile is put in exactly one bucket, read from its stack,
// so that the buckets add up to the profile's total and the differences
// between the two processes add up to the difference of their totals: the
// remainder of each ratio, by where it goes.
//
// A sample is put
//
//  1. in the bucket of its goroutine, when that is one of the goroutines
//     outside the requests: the GC's own workers (runtime.gcBgMarkWorker,
//     the sweeper, the scavenger), the profiler itself, the background
//     workers (River, internal/workers), whatever those call;
//  2. otherwise, in the bucket of the innermost frame of its stack that
//     names one, leaf first: a pgx call made by the engine is the database
//     client's, the engine's own code around it the engine's, and time in
//     the standard library or the runtime below a frame (encoding/json, a
//     syscall) is that frame's; mallocgc and the other allocation and GC
//     frames are the GC's wherever they are called from; net/http is the
//     HTTP server's, except in a stack that is the Stripe client's;
//  3. otherwise in "other paymentsd code" when a frame is paymentsd's, and
//     in "Go runtime and the rest" (the scheduler, the network poller,
//     timers) when none is.
const (
	bucketGC         = "GC and allocation"
	bucketProfiling  = "profiling itself"
	bucketWorkers    = "background workers"
	bucketLogging    = "logging"
	bucketMetrics    = "metrics"
	bucketDB         = "database client"
	bucketStripe     = "Stripe client"
	bucketKey        = "key + fingerprint"
	bucketDecode     = "body decode + validation"
	bucketEngine     = "engine bookkeeping"
	bucketRouting    = "routing + middleware"
	bucketHandler    = "request handler"
	bucketConnWatch  = "HTTP server: watching the connection"
	bucketHTTPServer = "HTTP server"
	bucketOurs       = "other paymentsd code"
	bucketRest       = "Go runtime and the rest"
)

// paymentsd is the module's prefix in function names.
const paymentsd = "github.com/paymentsd/paymentsd/"

// pkg matches the functions of a package, and not of its subpackages'
// namesakes: "…/internal/api." but not "…/internal/apix.".
func pkg(path string) []string { return []string{path + ".", path + "/"} }

func ours(path string) []string { return pkg(paymentsd + path) }

func join(lists ...[]string) []string {
	var all []string
	for _, l := range lists {
		all = append(all, l...)
	}
	return all
}

// cpuBucket is one bucket: the function-name prefixes that put a frame (or,
// for a goroutine bucket, a whole stack) in it, and what the report says of
// it.
type cpuBucket struct {
	name, what string
	prefixes   []string
}

var (
	// goroutineBuckets claim a whole stack in which any frame matches
	// (rule 1), in this order.
	goroutineBuckets = []cpuBucket{
		{bucketGC, "", []string{"runtime.gcBgMarkWorker", "runtime.bgsweep", "runtime.bgscavenge"}},
		{bucketProfiling, "the pprof server and the CPU profile's writer (runtime/pprof, net/http/pprof)",
			join(pkg("runtime/pprof"), pkg("net/http/pprof"))},
		{bucketWorkers, "the goroutines of River and internal/workers (the outbox, completer, reaper), their database calls and allocations included",
			join(pkg("github.com/riverqueue"), ours("internal/workers"))},
	}
	// frameBuckets claim a stack by its innermost matching frame (rule 2);
	// for each frame they are tried in this order.
	frameBuckets = []cpuBucket{
		{bucketGC, "the GC's workers (runtime.gcBgMarkWorker, sweeping, scavenging) and, wherever they are called from, the allocator (mallocgc and its entry points: newobject, makeslice, growslice, …), GC assists and write barriers",
			[]string{"runtime.mallocgc", "runtime.newobject", "runtime.makeslice", "runtime.growslice", "runtime.makemap",
				"runtime.rawstring", "runtime.rawbyteslice", "runtime.rawruneslice",
				"runtime.gcAssistAlloc", "runtime.gcWriteBarrier", "runtime.wbBufFlush", "runtime.bulkBarrierPreWrite", "runtime.gcStart"}},
		{bucketLogging, "zerolog and internal/logging", join(pkg("github.com/rs/zerolog"), ours("internal/logging"))},
		{bucketMetrics, "Prometheus's client and internal/metrics", join(pkg("github.com/prometheus"), ours("internal/metrics"))},
		{bucketDB, "pgx, pgxpool, puddle and the generated queries (internal/db)", join(pkg("github.com/jackc"), ours("internal/db"))},
		{bucketStripe, "stripe-go and net/http's client (the transport's connections, their read and write loops)", stripeClient},
		{bucketKey, "internal/idempotency: the key's parsing and the request's fingerprint", ours("internal/idempotency")},
		{bucketDecode, "internal/jsonbody, payments.Decode and reading the body (internal/api's readJSONBody, isJSON, readAll)",
			join(ours("internal/jsonbody"), []string{paymentsd + "internal/phases/payments.Decode", paymentsd + "internal/api.readJSONBody",
				paymentsd + "internal/api.isJSON", paymentsd + "internal/api.readAll"})},
		{bucketEngine, "internal/phases (the engine and the payment flow), internal/stripeonce and internal/intent, less the calls above",
			join(ours("internal/phases"), ours("internal/stripeonce"), ours("internal/intent"))},
		{bucketRouting, "chi and its middleware, net/http's ServeMux (the bare's router), and internal/api's accessLog, authenticate (with the key cache) and recoverPanic",
			join(pkg("github.com/go-chi/chi"), []string{"net/http.(*ServeMux)",
				paymentsd + "internal/api.(*Server).accessLog", paymentsd + "internal/api.(*Server).authenticate",
				paymentsd + "internal/api.(*Server).recoverPanic", paymentsd + "internal/api.(*Server).lookupUser",
				paymentsd + "internal/api.(*authCache)", paymentsd + "internal/api.newRequestID"})},
		{bucketHandler, "the rest of internal/api and internal/problem (serveIdempotent, writing the answer); the bare's handler (harness/bench/bare)",
			join(ours("internal/api"), ours("internal/problem"), ours("harness/bench/bare"))},
		{bucketConnWatch, "net/http's read in the background of a connection whose handler is running, started once the request's body has been read to its end and stopped when the handler returns (a goroutine, a read, two deadline changes); the bare reads no replay's body until it answers",
			[]string{"net/http.(*connReader).backgroundRead", "net/http.(*connReader).startBackgroundRead", "net/http.(*connReader).abortPendingRead"}},
		{bucketHTTPServer, "the rest of net/http: reading requests, writing responses, the connections' goroutines", pkg("net/http")},
	}
	// stripeClient marks a stack as the Stripe client's, whose net/http
	// frames are not the HTTP server's: the service's only HTTP client
	// during a run is its Stripe client, and so is the bare's.
	stripeClient = join(pkg("github.com/stripe/stripe-go"), []string{"net/http.(*Transport)", "net/http.(*persistConn)",
		"net/http.(*Client)", "net/http.send", "net/http.setRequestCancel", "net/http.(*Request).write", "net/http.persistConnWriter"})
)

// CPUBuckets lists the buckets a CPU profile is read by, with what each
// holds, for the report.
func CPUBuckets() [][2]string {
	var out [][2]string
	for _, b := range frameBuckets {
		out = append(out, [2]string{b.name, b.what})
	}
	for _, b := range goroutineBuckets {
		if b.what != "" { // the GC's is said with its frames
			out = append(out, [2]string{b.name, b.what})
		}
	}
	out = append(out, [2]string{bucketOurs, "paymentsd's code outside the buckets above (none is expected)"},
		[2]string{bucketRest, "the scheduler, the network poller, timers: stacks with no frame of the above"})
	return out
}

func matches(name string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// classify returns the bucket of a stack of function names, leaf first.
func classify(stack []string) string {
	for _, b := range goroutineBuckets {
		for _, f := range stack {
			if matches(f, b.prefixes) {
				return b.name
			}
		}
	}
	for _, f := range stack {
		for _, b := range frameBuckets {
			if !matches(f, b.prefixes) {
				continue
			}
			if b.name == bucketHTTPServer {
				for _, g := range stack {
					if matches(g, stripeClient) {
						return bucketStripe
					}
				}
			}
			return b.name
		}
	}
	for _, f := range stack {
		if strings.HasPrefix(f, paymentsd) {
			return bucketOurs
		}
	}
	return bucketRest
}

// stack is a sample's function names, leaf first, inlined calls included.
func stack(s *profile.Sample) []string {
	var names []string
	for _, loc := range s.Location {
		// A location's lines run from the innermost inlined call out.
		for _, line := range loc.Line {
			if line.Function != nil {
				names = append(names, line.Function.Name)
			}
		}
	}
	return names
}

// CPUBreakdown is a CPU profile read by bucket.
type CPUBreakdown struct {
	// Seconds is how long the profile ran; CPU is the CPU time it sampled,
	// in seconds.
	Seconds float64 `json:"seconds"`
	CPU     float64 `json:"cpu_seconds"`
	// Period is the CPU time one sample stands for, in seconds (10 ms at
	// Go's 100 Hz).
	Period float64 `json:"period_seconds"`
	// Buckets holds the CPU seconds of each bucket; they add up to CPU.
	Buckets map[string]float64 `json:"buckets"`
}

// Allocations are an allocs delta profile's totals: what was allocated over
// Seconds, as the runtime's sampling estimates it.
type Allocations struct {
	Seconds float64 `json:"seconds"`
	Objects int64   `json:"objects"`
	Bytes   int64   `json:"bytes"`
}

func readProfile(file string) (*profile.Profile, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return profile.Parse(f)
}

// valueIndex is the index of the sample value of the given type and unit.
func valueIndex(p *profile.Profile, typ, unit string) (int, error) {
	for i, st := range p.SampleType {
		if st.Type == typ && st.Unit == unit {
			return i, nil
		}
	}
	return 0, fmt.Errorf("the profile has no %s/%s values", typ, unit)
}

// ReadCPU reads a CPU profile (/debug/pprof/profile) by bucket.
func ReadCPU(file string) (*CPUBreakdown, error) {
	p, err := readProfile(file)
	if err != nil {
		return nil, err
	}
	i, err := valueIndex(p, "cpu", "nanoseconds")
	if err != nil {
		return nil, err
	}
	c := &CPUBreakdown{Seconds: float64(p.DurationNanos) / 1e9, Period: 0.01, Buckets: map[string]float64{}}
	if pt := p.PeriodType; pt != nil && pt.Type == "cpu" && pt.Unit == "nanoseconds" && p.Period > 0 {
		c.Period = float64(p.Period) / 1e9
	}
	for _, s := range p.Sample {
		v := float64(s.Value[i]) / 1e9
		c.CPU += v
		c.Buckets[classify(stack(s))] += v
	}
	return c, nil
}

// ReadAllocations reads the totals of an allocs delta profile
// (/debug/pprof/allocs?seconds=N).
func ReadAllocations(file string) (*Allocations, error) {
	p, err := readProfile(file)
	if err != nil {
		return nil, err
	}
	objects, err := valueIndex(p, "alloc_objects", "count")
	if err != nil {
		return nil, err
	}
	bytes, err := valueIndex(p, "alloc_space", "bytes")
	if err != nil {
		return nil, err
	}
	a := &Allocations{Seconds: float64(p.DurationNanos) / 1e9}
	for _, s := range p.Sample {
		a.Objects += s.Value[objects]
		a.Bytes += s.Value[bytes]
	}
	return a, nil
}

// PerRequest is one process's profile over one run, per request answered.
type PerRequest struct {
	// Throughput is the run's requests answered per second of its window.
	Throughput float64
	// Cores is the CPU time sampled per second: how many cores were busy.
	Cores float64
	// CPU is the CPU seconds per request, in total and by bucket.
	CPU     float64
	Buckets map[string]float64
	// Sample is what one sample adds to CPU: the resolution.
	Sample float64
	// Objects and Bytes are the allocations per request; HasAllocs says
	// whether they were read.
	Objects, Bytes float64
	HasAllocs      bool
}

// perRequest divides a profile by the requests answered over its span: the
// run's throughput (requests answered in its window over the window) times
// the profile's own duration. Nil when there is no CPU profile or no
// throughput to divide by.
func perRequest(p *Profile, throughput float64) *PerRequest {
	if p == nil || p.CPU == nil || p.CPU.Seconds <= 0 || throughput <= 0 {
		return nil
	}
	requests := throughput * p.CPU.Seconds
	r := &PerRequest{Throughput: throughput, Cores: p.CPU.CPU / p.CPU.Seconds, CPU: p.CPU.CPU / requests,
		Buckets: map[string]float64{}, Sample: cmp.Or(p.CPU.Period, 0.01) / requests}
	for name, v := range p.CPU.Buckets {
		r.Buckets[name] = v / requests
	}
	if a := p.Allocs; a != nil && a.Seconds > 0 {
		n := throughput * a.Seconds
		r.Objects, r.Bytes, r.HasAllocs = float64(a.Objects)/n, float64(a.Bytes)/n, true
	}
	return r
}

// BucketDiff is one bucket's CPU per request in each process, in seconds,
// and the sampling noise of their difference.
type BucketDiff struct {
	Name                string
	Service, Bare, Diff float64
	// Noise is two standard deviations of Diff, counting each bucket's
	// samples as a Poisson count: a count of n samples is n ± √n, so a
	// value v of resolution r has a variance of v·r.
	Noise float64
}

// noise is two standard deviations of the difference of two sampled values
// of the given resolutions (see BucketDiff).
func noise(service, bare float64, s, b *PerRequest) float64 {
	return 2 * math.Sqrt(max(0, service)*s.Sample+max(0, bare)*b.Sample)
}

// compareBuckets lists every bucket either process spent time in, the
// largest excess of the service's first.
func compareBuckets(service, bare *PerRequest) []BucketDiff {
	seen := map[string]bool{}
	var out []BucketDiff
	for _, m := range []map[string]float64{service.Buckets, bare.Buckets} {
		for name := range m {
			if !seen[name] {
				seen[name] = true
				sv, bv := service.Buckets[name], bare.Buckets[name]
				out = append(out, BucketDiff{Name: name, Service: sv, Bare: bv, Diff: sv - bv, Noise: noise(sv, bv, service, bare)})
			}
		}
	}
	// Largest difference first; the name breaks ties, for a stable report.
	slices.SortFunc(out, func(a, b BucketDiff) int {
		return cmp.Or(cmp.Compare(b.Diff, a.Diff), strings.Compare(a.Name, b.Name))
	})
	return out
}
