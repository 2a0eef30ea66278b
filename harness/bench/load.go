package bench

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Scenario is what one closed-loop HTTP run sends and what it accepts.
type Scenario struct {
	// Name labels the run in progress messages.
	Name string
	// Request builds the seq-th request of worker w. It is called by that
	// worker only.
	Request func(w, seq int) (*http.Request, error)
	// Answer reports whether a status is an answer rather than a failure
	// (counted in Load.NonOK). Nil takes every 2xx.
	Answer func(status int) bool
	// Accept reports whether an answer is the expected one. Nil accepts
	// every answer.
	Accept func(resp *http.Response) bool
}

// loadRun is the shape of one run: conns closed-loop clients, each sending
// its next request when the previous answer has been read whole, for warmup
// and then for the measured window.
type loadRun struct {
	conns          int
	warmup, window time.Duration
}

// recorder is one worker's tally; workers share nothing while running.
type recorder struct {
	latencies  []time.Duration
	total      int
	nonOK      map[int]int
	unexpected int
	errors     int
	timeouts   int
}

// measured is one run's Load with what reading it together with other runs
// of the same scenario needs (combine): the latencies of the window's
// successes, sorted, and the window. The latencies stay out of the saved
// results. name is the scenario's, for progress messages.
type measured struct {
	Load
	latencies []time.Duration
	window    time.Duration
	name      string
}

// Run drives the scenario and returns what the window saw. A request counts
// in the window when its answer arrived inside it. The client's connections
// are kept alive between requests and closed at the end.
func (r loadRun) Run(ctx context.Context, sc Scenario) (measured, error) {
	transport := &http.Transport{
		MaxIdleConnsPerHost: r.conns,
		MaxConnsPerHost:     r.conns,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}

	start := time.Now()
	from, to := start.Add(r.warmup), start.Add(r.warmup+r.window)
	recs := make([]*recorder, r.conns)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		buildErr error
	)
	for w := range r.conns {
		rec := &recorder{nonOK: map[int]int{}}
		recs[w] = rec
		wg.Go(func() {
			for seq := 0; ctx.Err() == nil && time.Now().Before(to); seq++ {
				req, err := sc.Request(w, seq)
				if err != nil {
					errOnce.Do(func() { buildErr = err })
					return
				}
				rec.do(client, req.WithContext(ctx), sc, from, to)
			}
		})
	}
	wg.Wait()
	if buildErr != nil {
		return measured{}, buildErr
	}
	return merge(recs, r.window), ctx.Err()
}

// do sends one request and records its outcome.
func (rec *recorder) do(client *http.Client, req *http.Request, sc Scenario, from, to time.Time) {
	sent := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		rec.errors++
		if netErr, ok := errors.AsType[net.Error](err); ok && netErr.Timeout() {
			rec.timeouts++
		}
		// A refused connection fails at once: do not spin on it.
		time.Sleep(10 * time.Millisecond)
		return
	}
	_, copyErr := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	done := time.Now()
	switch {
	case copyErr != nil:
		rec.errors++
		return
	case sc.Answer == nil && (resp.StatusCode < 200 || resp.StatusCode > 299),
		sc.Answer != nil && !sc.Answer(resp.StatusCode):
		rec.nonOK[resp.StatusCode]++
		return
	case sc.Accept != nil && !sc.Accept(resp):
		rec.unexpected++
		return
	}
	rec.total++
	if !done.Before(from) && done.Before(to) {
		rec.latencies = append(rec.latencies, done.Sub(sent))
	}
}

// merge sums the workers' tallies.
func merge(recs []*recorder, window time.Duration) measured {
	s := measured{Load: Load{NonOK: map[int]int{}}, window: window}
	for _, rec := range recs {
		s.latencies = append(s.latencies, rec.latencies...)
		s.Total += rec.total
		s.Unexpected += rec.unexpected
		s.Errors += rec.errors
		s.Timeouts += rec.timeouts
		for status, n := range rec.nonOK {
			s.NonOK[status] += n
		}
	}
	s.summarize()
	return s
}

// combine reads runs of one scenario as one Load: the requests answered
// inside their windows over the sum of the windows, p50 and p99 over all
// their latencies together, every other count summed, and each run's own
// throughput in Runs, in the order given.
func combine(runs ...measured) Load {
	s := measured{Load: Load{NonOK: map[int]int{}}}
	for _, run := range runs {
		s.latencies = append(s.latencies, run.latencies...)
		s.window += run.window
		s.Total += run.Total
		s.Unexpected += run.Unexpected
		s.Errors += run.Errors
		s.Timeouts += run.Timeouts
		for status, n := range run.NonOK {
			s.NonOK[status] += n
		}
		s.Runs = append(s.Runs, run.Throughput)
	}
	s.summarize()
	return s.Load
}

// summarize sorts the latencies and reads from them the successes in the
// window, the throughput and the percentiles; a NonOK with nothing in it
// becomes nil.
func (s *measured) summarize() {
	slices.Sort(s.latencies)
	s.OK = len(s.latencies)
	s.Throughput = float64(s.OK) / s.window.Seconds()
	s.P50 = ms(percentile(s.latencies, 0.50))
	s.P99 = ms(percentile(s.latencies, 0.99))
	if len(s.NonOK) == 0 {
		s.NonOK = nil
	}
}

// percentile is the nearest-rank percentile of sorted samples (0 for none).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(rank, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
