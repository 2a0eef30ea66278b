package stripefake

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Op names a kind of request that executes, and so takes faults: a write.
// Every write draws from the same injected queue (a Fault with an Op waits
// for a request of its kind) and the same chaos configuration.
type Op string

// The writes the emulator serves.
const (
	// OpCreatePaymentIntent is POST /v1/payment_intents.
	OpCreatePaymentIntent Op = "create_payment_intent"
	// OpCapturePaymentIntent is POST /v1/payment_intents/{id}/capture.
	OpCapturePaymentIntent Op = "capture_payment_intent"
	// OpCancelPaymentIntent is POST /v1/payment_intents/{id}/cancel.
	OpCancelPaymentIntent Op = "cancel_payment_intent"
	// OpCreateRefund is POST /v1/refunds.
	OpCreateRefund Op = "create_refund"
)

// ops lists the writes, for parsing and checks.
var ops = []Op{OpCreatePaymentIntent, OpCapturePaymentIntent, OpCancelPaymentIntent, OpCreateRefund}

// validOp checks an Op; empty (any write) is valid.
func validOp(op Op) error {
	if op == "" || slices.Contains(ops, op) {
		return nil
	}
	names := make([]string, len(ops))
	for i, o := range ops {
		names[i] = string(o)
	}
	return fmt.Errorf("stripefake: unknown op %q (want one of %s)", op, strings.Join(names, ", "))
}

// FaultKind selects what a Fault does to a write: creating a PaymentIntent
// or a refund, capturing or canceling a PaymentIntent. "Executes" below
// means the write takes place as it would without a fault: the
// PaymentIntent or the refund (whose amount is then taken from what remains
// refundable) is created, the PaymentIntent captured or canceled, or the
// request refused as it would be (a capture of a PaymentIntent that is not
// requires_capture).
type FaultKind int

const (
	// FaultLatency sleeps Fault.Latency, then behaves normally. Like Stripe,
	// the request keeps executing if the client gives up meanwhile: its
	// idempotency key stays in use (409 to concurrent requests with the same
	// key) until the result is saved, and the write executes.
	FaultLatency FaultKind = iota
	// Fault500 answers 500 api_error without executing: nothing is created,
	// captured or canceled. The 500 is saved under the idempotency key, so a
	// retry with the same key replays it (Idempotent-Replayed: true).
	Fault500
	// FaultLostAnswer executes the write and saves the idempotent
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
	// After release the request behaves normally. A hang is the only fault a
	// client can cut short; real Stripe does not abandon work this way.
	FaultHang
	// Fault500Charged is the indeterminate 500 Stripe documents: the
	// request executes as it would without the fault (a PaymentIntent is
	// created and confirmed, a decline included; a refund is made, or
	// refused; a PaymentIntent captured or canceled, or the request
	// refused), but the answer is a 500 api_error, identical to Fault500's.
	// That 500 is what is saved under the idempotency key, so a retry with
	// the same key replays the 500, never the object. For a refund it is
	// the "500 that did refund", for a capture the "500 that did capture".
	Fault500Charged
	// FaultIdempotencyError answers 400 idempotency_error, as for a key
	// reused with other parameters, without executing: nothing is changed
	// and nothing is saved, so a retry with the same key executes.
	FaultIdempotencyError
	// FaultOutliveClient is a latency meant to outlast the client's timeout:
	// the request sleeps Fault.Latency, then executes and saves its result
	// even though the client has usually disconnected by then.
	// Until the result is saved its idempotency key is in use (409
	// idempotency_key_in_use). It behaves exactly like FaultLatency; the kind
	// exists so that chaos can draw it with its own probability and latency,
	// and Stats count it apart (OutliveClients).
	FaultOutliveClient
)

// faultNone marks a plan without a fault.
const faultNone FaultKind = -1

// faultKinds lists the kinds in their order; it drives parsing and checks.
var faultKinds = []FaultKind{
	FaultLatency, Fault500, FaultLostAnswer, FaultHang,
	Fault500Charged, FaultIdempotencyError, FaultOutliveClient,
}

// String returns the name used by the admin endpoint: "latency", "500",
// "lost_answer", "hang", "500_charged", "idempotency_error" or
// "outlive_client".
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
	case Fault500Charged:
		return "500_charged"
	case FaultIdempotencyError:
		return "idempotency_error"
	case FaultOutliveClient:
		return "outlive_client"
	case faultNone:
		return "none"
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// MarshalText encodes the kind as its String form.
func (k FaultKind) MarshalText() ([]byte, error) {
	if !slices.Contains(faultKinds, k) {
		return nil, fmt.Errorf("stripefake: invalid fault kind %d", int(k))
	}
	return []byte(k.String()), nil
}

// UnmarshalText parses a kind's String form.
func (k *FaultKind) UnmarshalText(b []byte) error {
	names := make([]string, len(faultKinds))
	for i, c := range faultKinds {
		if c.String() == string(b) {
			*k = c
			return nil
		}
		names[i] = c.String()
	}
	return fmt.Errorf("stripefake: unknown fault kind %q (want one of %s)", b, strings.Join(names, ", "))
}

// Fault is one injected fault.
type Fault struct {
	// Kind is what happens; the zero value is FaultLatency.
	Kind FaultKind
	// Op, when set, keeps the fault for the next write of that kind
	// (OpCapturePaymentIntent: the next capture): writes of other kinds
	// pass it by and take the fault queued after it, if any is theirs.
	// Empty: the next write of any kind takes it.
	Op Op
	// Latency is slept before the request executes: for FaultLatency and
	// FaultOutliveClient it is the whole fault; for FaultHang it is slept
	// after the hang ends; FaultIdempotencyError ignores it. The sleep is
	// not cut short when the client leaves.
	Latency time.Duration
}

// Chaos configures random faults for every write (creating a PaymentIntent
// or a refund, capturing or canceling a PaymentIntent) that reaches
// execution and is not served from the injected queue, and the lag of
// search. All writes take draws from the same seeded source, so a seeded
// run replays the same faults only for the same sequence of writes of all
// kinds. The zero value turns chaos off.
type Chaos struct {
	// P500 is the probability of a Fault500.
	P500 float64
	// PLostAnswer is the probability of a FaultLostAnswer.
	PLostAnswer float64
	// PHang is the probability of a hang.
	PHang float64
	// P500Charged is the probability of a Fault500Charged.
	P500Charged float64
	// PIdempotencyError is the probability of a FaultIdempotencyError.
	PIdempotencyError float64
	// POutliveClient is the probability of a FaultOutliveClient. All six
	// probabilities are exclusive; their sum should not exceed 1.
	POutliveClient float64
	// Latency and MaxLatency bound a uniformly random extra latency added to
	// every write; zero for both means none.
	Latency, MaxLatency time.Duration
	// HangFor ends a chaos hang by itself after this long (it then behaves
	// normally). Zero: the hang lasts until ReleaseHangs or the client quits.
	HangFor time.Duration
	// OutliveLatency is the latency of a chaos FaultOutliveClient, added to
	// the random latency. Pick it above the client's timeout.
	OutliveLatency time.Duration
	// SearchLag, when positive, replaces Options.SearchLag while this
	// configuration is in force.
	SearchLag time.Duration

	// Webhook faults, drawn independently of each other (and of the create
	// faults above, from a source of their own) for every event when
	// Options.WebhookURL is set, as Stripe documents its deliveries (see
	// webhooks.go). PWebhookDelay delays the event's first delivery by a
	// uniformly random time up to WebhookDelay.
	PWebhookDelay float64
	WebhookDelay  time.Duration
	// PWebhookDuplicate delivers the event twice: half the time both at
	// once, otherwise again after the first delivery was answered.
	PWebhookDuplicate float64
	// PWebhookReorder holds the event back until a later event has been
	// sent (or for at most 2 s), so that it arrives after it.
	PWebhookReorder float64
	// PWebhookLost drops the event's first delivery attempt, as a network
	// would: the endpoint sees only the retry, after the backoff.
	PWebhookLost float64
}

// faults reports whether c draws any create fault or latency (SearchLag
// and the webhook faults aside).
func (c Chaos) faults() bool {
	c.SearchLag = 0
	c.PWebhookDelay, c.WebhookDelay, c.PWebhookDuplicate, c.PWebhookReorder, c.PWebhookLost = 0, 0, 0, 0, 0
	return c != Chaos{}
}

// plan is what will happen to one write.
type plan struct {
	latency time.Duration
	kind    FaultKind
	hangFor time.Duration
}

// Inject queues faults: each write that reaches execution takes the first
// queued fault that is for any write (Fault.Op empty) or for its kind, so
// that faults without an Op are taken in order by the next len(faults)
// writes, whether they create a PaymentIntent or a refund or capture or
// cancel a PaymentIntent. Injected faults take precedence over chaos. It
// panics on an Op the emulator does not know.
func (s *Server) Inject(faults ...Fault) {
	for _, f := range faults {
		if err := validOp(f.Op); err != nil {
			panic(err.Error())
		}
	}
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
	c.P500Charged, c.PIdempotencyError, c.POutliveClient = clamp(c.P500Charged), clamp(c.PIdempotencyError), clamp(c.POutliveClient)
	c.Latency, c.HangFor = max(c.Latency, 0), max(c.HangFor, 0)
	c.OutliveLatency, c.SearchLag = max(c.OutliveLatency, 0), max(c.SearchLag, 0)
	c.MaxLatency = max(c.MaxLatency, c.Latency)
	c.PWebhookDelay, c.PWebhookDuplicate = clamp(c.PWebhookDelay), clamp(c.PWebhookDuplicate)
	c.PWebhookReorder, c.PWebhookLost, c.WebhookDelay = clamp(c.PWebhookReorder), clamp(c.PWebhookLost), max(c.WebhookDelay, 0)
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

// nextPlan takes the first injected fault for a write of kind op, or
// draws one from chaos.
func (s *Server) nextPlan(op Op) plan {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if f.Op != "" && f.Op != op {
			continue
		}
		s.faults = slices.Delete(s.faults, i, i+1)
		return plan{latency: max(f.Latency, 0), kind: f.Kind}
	}
	p := plan{kind: faultNone}
	c := s.chaos
	if !c.faults() {
		return p
	}
	p.latency = c.Latency
	if span := c.MaxLatency - c.Latency; span > 0 {
		p.latency += time.Duration(s.rng.Int64N(int64(span) + 1))
	}
	// One draw picks the kind; the older kinds come first so that a seed
	// replays the same faults when only they are configured.
	u, sum := s.rng.Float64(), 0.0
	for _, k := range []struct {
		p    float64
		kind FaultKind
	}{
		{c.P500, Fault500}, {c.PLostAnswer, FaultLostAnswer}, {c.PHang, FaultHang},
		{c.P500Charged, Fault500Charged}, {c.PIdempotencyError, FaultIdempotencyError},
		{c.POutliveClient, FaultOutliveClient},
	} {
		if sum += k.p; u < sum {
			p.kind = k.kind
			break
		}
	}
	switch p.kind {
	case FaultHang:
		p.hangFor = c.HangFor
	case FaultOutliveClient:
		p.latency += c.OutliveLatency
	}
	return p
}

// hang holds a FaultHang plan until it is released, times out or the client
// goes away. It returns false in the last case: the request must then be
// abandoned. Other plans pass straight through.
func (s *Server) hang(ctx context.Context, p plan) bool {
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
