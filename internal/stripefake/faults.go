package stripefake

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// FaultKind selects what a Fault does to a PaymentIntent create request.
type FaultKind int

const (
	// FaultLatency sleeps Fault.Latency, then behaves normally. Like Stripe,
	// the request keeps executing if the client gives up meanwhile: its
	// idempotency key stays in use until the result is saved.
	FaultLatency FaultKind = iota
	// Fault500 answers 500 api_error without creating anything. The 500 is
	// saved under the idempotency key, so a retry with the same key replays
	// it (Idempotent-Replayed: true).
	Fault500
	// FaultLostAnswer creates the PaymentIntent and saves the idempotent
	// result, then drops the connection: the client gets a network error and
	// a retry with the same key gets the saved answer. Only the status line
	// is sent before the close, because Go's http.Transport silently resends
	// requests carrying an Idempotency-Key when a reused connection closes
	// without sending a single byte.
	FaultLostAnswer
	// FaultHang blocks the request before it does anything, until
	// ReleaseHangs is called or the request's context ends (then nothing is
	// created or saved). While hung, its idempotency key is in use: a
	// concurrent request with the same key gets 409 idempotency_key_in_use.
	// After release the request behaves normally.
	FaultHang
)

// faultNone marks a plan without a fault.
const faultNone FaultKind = -1

// String returns the name used by the admin endpoint: "latency", "500",
// "lost_answer" or "hang".
func (k FaultKind) String() string {
	switch k {
	case FaultLatency:
		return "latency"
	case Fault500:
		return "500"
	case FaultLostAnswer:
		return "lost_answer"
	case FaultHang:
		return "hang"
	case faultNone:
		return "none"
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// MarshalText encodes the kind as its String form.
func (k FaultKind) MarshalText() ([]byte, error) {
	if k < FaultLatency || k > FaultHang {
		return nil, fmt.Errorf("stripefake: invalid fault kind %d", int(k))
	}
	return []byte(k.String()), nil
}

// UnmarshalText parses "latency", "500", "lost_answer" or "hang".
func (k *FaultKind) UnmarshalText(b []byte) error {
	for _, c := range []FaultKind{FaultLatency, Fault500, FaultLostAnswer, FaultHang} {
		if c.String() == string(b) {
			*k = c
			return nil
		}
	}
	return fmt.Errorf("stripefake: unknown fault kind %q (want latency, 500, lost_answer or hang)", b)
}

// Fault is one injected fault.
type Fault struct {
	// Kind is what happens; the zero value is FaultLatency.
	Kind FaultKind
	// Latency is slept before the fault acts (for FaultLatency it is the
	// whole fault).
	Latency time.Duration
}

// Chaos configures random faults for every create request that is not
// served from the injected queue. The zero value turns chaos off.
type Chaos struct {
	// P500 is the probability of a Fault500.
	P500 float64
	// PLostAnswer is the probability of a FaultLostAnswer.
	PLostAnswer float64
	// PHang is the probability of a hang. The three probabilities are
	// exclusive; their sum should not exceed 1.
	PHang float64
	// Latency and MaxLatency bound a uniformly random extra latency added to
	// every create; zero for both means none.
	Latency, MaxLatency time.Duration
	// HangFor ends a chaos hang by itself after this long (it then behaves
	// normally). Zero: the hang lasts until ReleaseHangs or the client quits.
	HangFor time.Duration
}

// plan is what will happen to one create request.
type plan struct {
	latency time.Duration
	kind    FaultKind
	hangFor time.Duration
}

// Inject queues faults: each of the next len(faults) create requests that
// reach execution takes one, in order. Injected faults take precedence over
// chaos.
func (s *Server) Inject(faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, faults...)
}

// PendingFaults returns how many injected faults have not been taken yet.
func (s *Server) PendingFaults() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.faults)
}

// SetChaos replaces the chaos configuration. Probabilities are clamped to
// [0, 1], negative durations to 0 and MaxLatency to at least Latency.
func (s *Server) SetChaos(c Chaos) {
	clamp := func(p float64) float64 { return min(max(p, 0), 1) }
	c.P500, c.PLostAnswer, c.PHang = clamp(c.P500), clamp(c.PLostAnswer), clamp(c.PHang)
	c.Latency, c.HangFor = max(c.Latency, 0), max(c.HangFor, 0)
	c.MaxLatency = max(c.MaxLatency, c.Latency)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chaos = c
}

// ReleaseHangs releases every request currently hung.
func (s *Server) ReleaseHangs() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.release)
	s.release = make(chan struct{})
}

// nextPlan takes the next injected fault, or draws one from chaos.
func (s *Server) nextPlan() plan {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.faults) > 0 {
		f := s.faults[0]
		s.faults[0] = Fault{}
		s.faults = s.faults[1:]
		return plan{latency: max(f.Latency, 0), kind: f.Kind}
	}
	p := plan{kind: faultNone}
	c := s.chaos
	if c == (Chaos{}) {
		return p
	}
	p.latency = c.Latency
	if span := c.MaxLatency - c.Latency; span > 0 {
		p.latency += time.Duration(s.rng.Int64N(int64(span) + 1))
	}
	switch u := s.rng.Float64(); {
	case u < c.P500:
		p.kind = Fault500
	case u < c.P500+c.PLostAnswer:
		p.kind = FaultLostAnswer
	case u < c.P500+c.PLostAnswer+c.PHang:
		p.kind, p.hangFor = FaultHang, c.HangFor
	}
	return p
}

// delay applies the plan's latency and hang. It returns false if the client
// went away during a hang: the request must then be abandoned.
func (s *Server) delay(ctx context.Context, p plan) bool {
	if p.latency > 0 {
		s.bump(func(st *Stats) { st.Latencies++ })
		// Not cut short by ctx: Stripe finishes requests whose client left.
		time.Sleep(p.latency)
	}
	if p.kind != FaultHang {
		return true
	}
	s.mu.Lock()
	release := s.release
	s.stats.Hangs++
	s.stats.HungNow++
	s.mu.Unlock()
	defer s.bump(func(st *Stats) { st.HungNow-- })

	var timeout <-chan time.Time
	if p.hangFor > 0 {
		t := time.NewTimer(p.hangFor)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-release:
		return true
	case <-timeout:
		return true
	case <-ctx.Done():
		s.log.Info().Msg("stripefake: hung request abandoned by its client")
		return false
	}
}

// dropConnection closes the client connection after sending only the status
// line of the answer (see FaultLostAnswer).
func dropConnection(w http.ResponseWriter, status int) {
	if rec, ok := w.(*recorder); ok {
		rec.hijacked = true
	}
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable (HTTP/2): abort the stream instead.
		panic(http.ErrAbortHandler)
	}
	_, _ = fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	_ = buf.Flush()
	_ = conn.Close()
}
