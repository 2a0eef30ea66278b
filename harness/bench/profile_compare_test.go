package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/require"
)

const (
	api    = paymentsd + "internal/api."
	phases = paymentsd + "internal/phases."
	serve  = "net/http.(*conn).serve"
	chi    = "github.com/go-chi/chi/v5.(*Mux).ServeHTTP"
)

// request is the stack above a service's handler, leaf first.
var request = []string{api + "(*Server).serveIdempotent", chi, api + "(*Server).accessLog.func1", chi, serve}

func under(leaf []string, callers ...string) []string {
	return append(append([]string{}, leaf...), callers...)
}

// cpuCases are stacks (leaf first) and the bucket each belongs to.
var cpuCases = []struct {
	stack  []string
	bucket string
}{
	{under([]string{"syscall.write", "internal/poll.(*FD).Write", "github.com/jackc/pgx/v5/pgconn.(*PgConn).Exec",
		phases + "(*Engine).Execute"}, request...), bucketDB},
	{under([]string{"runtime.mallocgc", "runtime.newobject", phases + "(*Engine).Execute"}, request...), bucketGC},
	{under([]string{"runtime.mallocgcSmallNoscan", "runtime.mallocgc", "github.com/rs/zerolog.(*Event).Msg"}, request...), bucketGC},
	{[]string{"runtime.scanobject", "runtime.gcDrain", "runtime.gcBgMarkWorker"}, bucketGC},
	{[]string{"runtime.newobject", "net/http.(*conn).readRequest", serve}, bucketGC},
	{under([]string{"encoding/json.Marshal", paymentsd + "internal/phases/payments.(*flow).answer", phases + "(*Engine).Execute"}, request...), bucketEngine},
	{under([]string{"net/http.Header.Get", "github.com/stripe/stripe-go/v79.(*BackendImplementation).Do",
		paymentsd + "internal/stripeonce.Create", phases + "(*Engine).Execute"}, request...), bucketStripe},
	{[]string{"bufio.(*Reader).Peek", "net/http.(*persistConn).readLoop"}, bucketStripe},
	{[]string{"net/textproto.(*Reader).ReadLine", "net/http.ReadResponse", "net/http.(*persistConn).readLoop"}, bucketStripe},
	{[]string{"syscall.read", "net/http.(*conn).readRequest", serve}, bucketHTTPServer},
	{under([]string{"bufio.(*Writer).Flush", "net/http.(*response).Write"}, request...), bucketHTTPServer},
	{[]string{"runtime.futex", "runtime.findRunnable", "runtime.schedule", "runtime.mcall"}, bucketRest},
	{[]string{"syscall.read", "internal/poll.(*FD).Read", "net.(*conn).Read", "net/http.(*connReader).backgroundRead"}, bucketConnWatch},
	{[]string{"internal/poll.(*FD).SetReadDeadline", "net.(*conn).SetReadDeadline", "net/http.(*connReader).abortPendingRead",
		"net/http.(*response).finishRequest", serve}, bucketConnWatch},
	{under([]string{"github.com/rs/zerolog.(*Event).Msg"}, request[1:]...), bucketLogging},
	{under([]string{"github.com/prometheus/client_golang/prometheus.(*histogram).Observe"}, request[1:]...), bucketMetrics},
	{[]string{"github.com/jackc/pgx/v5.(*Conn).Query", "github.com/riverqueue/river.(*producer).poll"}, bucketWorkers},
	{[]string{"runtime.mallocgc", paymentsd + "internal/workers.(*Receipts).Work"}, bucketWorkers},
	{[]string{"compress/flate.(*compressor).deflate", "runtime/pprof.profileWriter"}, bucketProfiling},
	{under([]string{"runtime.memmove", api + "(*Server).authenticate.func1"}, request[1:]...), bucketRouting},
	{under([]string{"github.com/go-chi/chi/v5.(*node).findRoute"}, request[1:]...), bucketRouting},
	{under([]string{"crypto/sha256.block", paymentsd + "internal/idempotency.Fingerprint"}, request...), bucketKey},
	{under([]string{"strconv.ParseInt", paymentsd + "internal/jsonbody.Parse", paymentsd + "internal/phases/payments.DecodeParams",
		paymentsd + "internal/phases/payments.Decode"}, request...), bucketDecode},
	{under([]string{"io.ReadAll", api + "readJSONBody"}, request...), bucketDecode},
	{under([]string{"io.ReadFull", api + "readAll", api + "readJSONBody"}, request...), bucketDecode},
	{under([]string{"runtime.memmove"}, request...), bucketHandler},
	{[]string{"runtime.mapaccess1_faststr", paymentsd + "harness/bench/bare.(*Server).pay", "net/http.HandlerFunc.ServeHTTP",
		"net/http.(*ServeMux).ServeHTTP", serve}, bucketHandler},
	{[]string{"net/http.(*ServeMux).findHandler", "net/http.(*ServeMux).ServeHTTP", serve}, bucketRouting},
	{[]string{paymentsd + "internal/apix.Something", "runtime.goexit"}, bucketOurs},
}

func TestClassify(t *testing.T) {
	for _, c := range cpuCases {
		require.Equal(t, c.bucket, classify(c.stack), "%s", strings.Join(c.stack, " < "))
	}
}

// build is a profile of the given sample types whose samples have the
// given stacks; a stack is a list of locations, each a list of function
// names (inlined calls first), leaf first.
func build(types [][2]string, durationNanos int64, samples [][][]string, values [][]int64) *profile.Profile {
	p := &profile.Profile{DurationNanos: durationNanos, TimeNanos: 1}
	for _, t := range types {
		p.SampleType = append(p.SampleType, &profile.ValueType{Type: t[0], Unit: t[1]})
	}
	funcs := map[string]*profile.Function{}
	for i, stack := range samples {
		s := &profile.Sample{Value: values[i]}
		for _, loc := range stack {
			l := &profile.Location{ID: uint64(len(p.Location) + 1)}
			for _, name := range loc {
				f := funcs[name]
				if f == nil {
					f = &profile.Function{ID: uint64(len(p.Function) + 1), Name: name}
					funcs[name] = f
					p.Function = append(p.Function, f)
				}
				l.Line = append(l.Line, profile.Line{Function: f})
			}
			p.Location = append(p.Location, l)
			s.Location = append(s.Location, l)
		}
		p.Sample = append(p.Sample, s)
	}
	return p
}

func save(t *testing.T, p *profile.Profile) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "p.pprof")
	f, err := os.Create(file)
	require.NoError(t, err)
	require.NoError(t, p.Write(f))
	require.NoError(t, f.Close())
	return file
}

// frames makes every function a location of its own.
func frames(names ...string) [][]string {
	var locs [][]string
	for _, n := range names {
		locs = append(locs, []string{n})
	}
	return locs
}

func TestReadCPUAndAllocations(t *testing.T) {
	const ms = int64(1e6)
	// Two seconds of CPU profile: a database call (30 ms), the engine's
	// own encoding (20 ms), a zerolog call inlined into the handler,
	// innermost first (10 ms), a mark worker (40 ms).
	cpu := build([][2]string{{"samples", "count"}, {"cpu", "nanoseconds"}}, 2e9, [][][]string{
		frames(under([]string{"syscall.write", "github.com/jackc/pgx/v5/pgconn.(*PgConn).Exec", phases + "(*Engine).Execute"}, request...)...),
		frames(under([]string{"encoding/json.Marshal", phases + "(*Engine).Execute"}, request...)...),
		append([][]string{{"github.com/rs/zerolog.Ctx", api + "(*Server).serveIdempotent"}}, frames(request[1:]...)...),
		frames("runtime.scanobject", "runtime.gcBgMarkWorker"),
	}, [][]int64{{3, 30 * ms}, {2, 20 * ms}, {1, 10 * ms}, {4, 40 * ms}})
	c, err := ReadCPU(save(t, cpu))
	require.NoError(t, err)
	require.InDelta(t, 2.0, c.Seconds, 1e-9)
	require.InDelta(t, 0.1, c.CPU, 1e-9)
	want := map[string]float64{bucketDB: 0.03, bucketEngine: 0.02, bucketLogging: 0.01, bucketGC: 0.04}
	require.Len(t, c.Buckets, len(want))
	for name, v := range want {
		require.InDelta(t, v, c.Buckets[name], 1e-9, name)
	}

	allocs := build([][2]string{{"alloc_objects", "count"}, {"alloc_space", "bytes"}, {"inuse_objects", "count"}, {"inuse_space", "bytes"}},
		2e9, [][][]string{frames(phases + "(*Engine).Execute"), frames(api + "readJSONBody")},
		[][]int64{{300, 30000, 1, 100}, {100, 10000, 0, 0}})
	a, err := ReadAllocations(save(t, allocs))
	require.NoError(t, err)
	require.Equal(t, Allocations{Seconds: 2, Objects: 400, Bytes: 40000}, *a)

	_, err = ReadAllocations(save(t, cpu))
	require.ErrorContains(t, err, "no alloc_objects/count")
}

func TestCompareProfiles(t *testing.T) {
	// 100 requests/s for 2 s: the service spends 100 ms of CPU on 200
	// requests, 500 µs each; the bare 40 ms on 400, 100 µs each.
	service := &Profile{Scenario: "fresh", Conns: 32, Seconds: 2,
		CPU:    &CPUBreakdown{Seconds: 2, CPU: 0.1, Buckets: map[string]float64{bucketDB: 0.04, bucketLogging: 0.04, bucketHTTPServer: 0.02}},
		Allocs: &Allocations{Seconds: 2, Objects: 20000, Bytes: 2048000}}
	bare := &Profile{Process: "bare", Scenario: "fresh", Conns: 32, Seconds: 2,
		CPU:    &CPUBreakdown{Seconds: 2, CPU: 0.04, Buckets: map[string]float64{bucketDB: 0.02, bucketHTTPServer: 0.02}},
		Allocs: &Allocations{Seconds: 2, Objects: 4000, Bytes: 409600}}
	s, b := perRequest(service, 100), perRequest(bare, 200)
	require.InDelta(t, 500e-6, s.CPU, 1e-12)
	require.InDelta(t, 100e-6, b.CPU, 1e-12)
	require.InDelta(t, 100, s.Objects, 1e-9)
	require.InDelta(t, 10, b.Objects, 1e-9)
	diffs := compareBuckets(s, b)
	require.Equal(t, []string{bucketLogging, bucketDB, bucketHTTPServer}, []string{diffs[0].Name, diffs[1].Name, diffs[2].Name})
	require.InDelta(t, 200e-6, diffs[0].Diff, 1e-12)
	require.InDelta(t, 150e-6, diffs[1].Diff, 1e-12)
	require.InDelta(t, 50e-6, diffs[2].Diff, 1e-12)
	require.Nil(t, perRequest(service, 0))
	require.Nil(t, perRequest(&Profile{}, 100))

	r := sample()
	r.Profiled = true
	for i := range r.Points {
		if r.Points[i].Conns == 32 {
			r.Points[i].Fresh.Throughput, r.Points[i].BareFresh.Throughput = 100, 200
		}
	}
	r.Profiles = []Profile{*bare, *service}
	text := Markdown(r, "bench.svg")
	require.Contains(t, text, "| **CPU / request** | **500.0 µs** | **100.0 µs** | **+400.0 µs** (5.00×) |")
	// 4 samples of 50 µs against none: ± 2·√4 samples.
	require.Contains(t, text, "| logging | 200.0 µs | 0.0 µs | +200.0 µs | 200.0 µs | 50% |")
	require.Contains(t, text, "| allocations / request | 100 | 10 | +90 |")
	require.Contains(t, text, "| bytes allocated / request | 10.0 KiB | 1.0 KiB | +9.0 KiB |")
	// 2·√(500·50 + 100·25) µs.
	require.Contains(t, text, "| **total** | **500.0 µs** | **100.0 µs** | **+400.0 µs** | 331.7 µs | |")
	require.Contains(t, text, "One sample is 50.0 µs per request of the service and 25.0 µs of the bare.\n")
	require.Contains(t, text, "<summary>the buckets</summary>")

	// A difference within the noise gets no shares.
	bare.CPU = &CPUBreakdown{Seconds: 2, CPU: 0.08, Buckets: map[string]float64{bucketDB: 0.06, bucketHTTPServer: 0.02}}
	r.Profiles = []Profile{*bare, *service}
	text = Markdown(r, "bench.svg")
	require.Contains(t, text, "| logging | 200.0 µs | 0.0 µs | +200.0 µs | 200.0 µs | – |")
	require.Contains(t, text, "The totals differ by no more than their\nsampling noise")
}
