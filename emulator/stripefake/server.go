package stripefake

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// defaultIdempotencyTTL is how long Stripe keeps idempotent results.
const defaultIdempotencyTTL = 24 * time.Hour

// Options configures a Server. The zero value is usable.
type Options struct {
	// Logger receives a debug line per request and info lines for faults.
	// The zero value logs nothing.
	Logger zerolog.Logger
	// Seed seeds the random source that SetChaos draws from, so that a chaos
	// run is reproducible for a given request order. Zero picks a random seed.
	Seed uint64
	// IdempotencyTTL is how long a saved idempotent result is replayed.
	// Zero means 24 hours, like Stripe.
	IdempotencyTTL time.Duration
	// Now returns the current time. Nil means time.Now. It stamps creation
	// times, idempotency expiry, search lag and events. It is called with
	// the server's lock held, so it must not call the Server. Server.Advance
	// moves the server's clock on from it (see clock.go).
	Now func() time.Time
	// SearchLag is how long a new PaymentIntent stays invisible to search,
	// like Stripe's search index, which lags writes (Stripe documents under
	// a minute normally, up to an hour during outages). Zero: search is
	// strongly consistent. Chaos.SearchLag overrides it while set. Retrieve
	// and list are never delayed.
	SearchLag time.Duration
	// SearchRate is how many search requests a second the emulator
	// answers, measured by its clock, in bursts of up to one second's
	// worth: beyond it a search is refused with 429 rate_limit, as
	// Stripe refuses search beyond its limit (20 read requests a second
	// per account, docs.stripe.com/rate-limits). Zero: unlimited.
	SearchRate int
	// AuthorizationWindow is how long a PaymentIntent confirmed with
	// capture_method=manual can be captured: that long after its creation,
	// by the server's clock, the emulator cancels it if it is still
	// requires_capture (cancellation_reason "automatic", event
	// payment_intent.canceled), as Stripe does. Zero means 7 days, Stripe's
	// default; see authorizations.go.
	AuthorizationWindow time.Duration

	// WebhookURL, when set, receives a signed Stripe event for every state
	// change (see webhooks.go): the URL of a webhook endpoint, or several
	// separated by commas, which deliveries take in turn like a load
	// balancer's round robin. Empty: no events are made.
	WebhookURL string
	// WebhookSecret is the endpoint's signing secret (whsec_...), with which
	// every delivery is signed as Stripe signs it.
	WebhookSecret string
	// WebhookLatency is how long after the change an event's first
	// delivery goes out at the earliest. Stripe delivers asynchronously,
	// as a rule after the API answered the request that made the change;
	// at zero an event often overtakes that answer. Zero: at once.
	WebhookLatency time.Duration
	// WebhookBackoff is the pause before the first retry of an unanswered
	// delivery; it doubles with each retry up to WebhookMaxBackoff. Zero
	// means 500 ms and 10 s: Stripe's schedule (three days) compressed.
	WebhookBackoff, WebhookMaxBackoff time.Duration
	// WebhookQueue bounds the events not delivered yet; an event made while
	// it is full is dropped (counted, logged). Zero means 10,000.
	WebhookQueue int
}

// Server is the emulator. It implements http.Handler and is safe for
// concurrent use. Create it with New.
type Server struct {
	log zerolog.Logger
	// base is Options.Now; the server's clock (now) adds skew to it.
	base func() time.Time
	skew atomic.Int64 // nanoseconds Advance moved the clock on
	ttl  time.Duration
	lag  time.Duration
	mux  *http.ServeMux
	// searchRate is Options.SearchRate; see ratelimit.go.
	searchRate searchBucket
	// authWindow is Options.AuthorizationWindow; nextExpiry the earliest
	// end of a window among the authorizations held (UnixNano by the
	// server's clock, 0: none), read without the lock before every request.
	authWindow time.Duration
	nextExpiry atomic.Int64

	mu         sync.Mutex
	rng        *rand.Rand
	chaos      Chaos
	faults     []Fault
	release    chan struct{}
	intents    []storedIntent
	byID       map[string]int // PaymentIntent id -> index in intents
	byCharge   map[string]int // latest charge id -> index in intents
	refunds    []storedRefund
	refundByID map[string]int // refund id -> index in refunds
	outcomes   map[string]RefundOutcome
	held       map[string]struct{} // ids of the PaymentIntents requires_capture
	idem       map[idemKey]*idemEntry
	sinceSweep int
	stats      Stats

	// The timer that cancels authorizations at the end of their window
	// (authorizations.go); expiryStopped once Close stopped it.
	expiryTimer   *time.Timer
	expiryStopped bool

	// Webhooks (webhooks.go): hooks is nil without Options.WebhookURL.
	hooks    *webhookSender
	hookRng  *rand.Rand // draws webhook faults apart from create faults
	events   []*Event
	disputes []Dispute
	disputed map[string]int // PaymentIntent id -> index in disputes
}

// New returns a Server with no PaymentIntents, no faults and chaos off.
func New(opts Options) *Server {
	seed := opts.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	s := &Server{
		log:        opts.Logger,
		base:       opts.Now,
		ttl:        opts.IdempotencyTTL,
		lag:        max(opts.SearchLag, 0),
		searchRate: searchBucket{rate: max(opts.SearchRate, 0)},
		authWindow: opts.AuthorizationWindow,
		rng:        rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		release:    make(chan struct{}),
		byID:       make(map[string]int),
		byCharge:   make(map[string]int),
		refundByID: make(map[string]int),
		outcomes:   make(map[string]RefundOutcome),
		held:       make(map[string]struct{}),
		idem:       make(map[idemKey]*idemEntry),
		hookRng:    rand.New(rand.NewPCG(seed^0x5851f42d4c957f2d, seed)),
		disputed:   make(map[string]int),
	}
	if s.base == nil {
		s.base = time.Now
	}
	if s.ttl <= 0 {
		s.ttl = defaultIdempotencyTTL
	}
	if s.authWindow <= 0 {
		s.authWindow = defaultAuthorizationWindow
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/payment_intents", s.authed(s.handleCreate))
	mux.HandleFunc("GET /v1/payment_intents", s.authed(s.handleList))
	mux.HandleFunc("GET /v1/payment_intents/search", s.authed(s.handleSearch))
	mux.HandleFunc("GET /v1/payment_intents/{id}", s.authed(s.handleRetrieve))
	mux.HandleFunc("POST /v1/payment_intents/{id}/capture", s.authed(s.handleCapture))
	mux.HandleFunc("POST /v1/payment_intents/{id}/cancel", s.authed(s.handleCancel))
	mux.HandleFunc("POST /v1/refunds", s.authed(s.handleRefundCreate))
	mux.HandleFunc("GET /v1/refunds", s.authed(s.handleRefundList))
	mux.HandleFunc("GET /v1/refunds/{id}", s.authed(s.handleRefundRetrieve))
	mux.HandleFunc("GET /_fake/stats", s.handleAdminStats)
	mux.HandleFunc("GET /_fake/payment_intents", s.handleAdminPaymentIntents)
	mux.HandleFunc("POST /_fake/faults", s.handleAdminFaults)
	mux.HandleFunc("POST /_fake/release", s.handleAdminRelease)
	mux.HandleFunc("GET /_fake/refunds", s.handleAdminRefunds)
	mux.HandleFunc("POST /_fake/refunds/{id}/status", s.handleAdminRefundStatus)
	mux.HandleFunc("POST /_fake/payment_intents/{id}/refund_outcome", s.handleAdminRefundOutcome)
	mux.HandleFunc("POST /_fake/payment_intents/{id}/status", s.handleAdminPaymentIntentStatus)
	mux.HandleFunc("GET /_fake/events", s.handleAdminEvents)
	mux.HandleFunc("GET /_fake/disputes", s.handleAdminDisputes)
	mux.HandleFunc("POST /_fake/disputes", s.handleAdminDisputeCreate)
	mux.HandleFunc("/", s.handleUnknown)
	s.mux = mux
	if opts.WebhookURL != "" {
		s.hooks = newWebhookSender(s, opts)
	}
	return s
}

// ServeHTTP answers one request. Every answer carries a Request-Id header,
// and a Date header by the emulator's clock (Options.Now), as Stripe's
// answers carry Stripe's: a client can measure the skew between its clock
// and Stripe's from it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	reqID := "req_" + randomID(14)
	w.Header().Set("Request-Id", reqID)
	w.Header().Set("Date", s.now().UTC().Format(http.TimeFormat))
	if v := r.Header.Get("Stripe-Version"); v != "" {
		w.Header().Set("Stripe-Version", v)
	}
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	// No request sees an authorization past its window.
	s.expireDue()
	s.mux.ServeHTTP(rec, r)
	s.log.Debug().
		Str("request_id", reqID).
		Str("method", r.Method).
		Str("path", r.URL.Path).
		Str("idempotency_key", r.Header.Get("Idempotency-Key")).
		Int("status", rec.status).
		Bool("hijacked", rec.hijacked).
		Dur("took", time.Since(start)).
		Msg("stripefake request")
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireDueLocked()
	return s.stats
}

// bump applies f to the counters under the lock.
func (s *Server) bump(f func(*Stats)) {
	s.mu.Lock()
	f(&s.stats)
	s.mu.Unlock()
}

// authed wraps a Stripe endpoint with API key authentication.
func (s *Server) authed(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key, msg := apiKey(r)
		if msg != "" {
			s.bump(func(st *Stats) { st.Unauthorized++ })
			writeError(w, http.StatusUnauthorized, errorObject{Type: typeInvalidRequest, Message: msg})
			return
		}
		h(w, r, key)
	}
}

// apiKey extracts the secret key, or returns a Stripe-like message why not.
func apiKey(r *http.Request) (key, problem string) {
	if user, _, ok := r.BasicAuth(); ok {
		key = user
	} else {
		auth := r.Header.Get("Authorization")
		if auth == "" {
			return "", "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY')."
		}
		scheme, rest, _ := strings.Cut(auth, " ")
		if !strings.EqualFold(scheme, "Bearer") {
			return "", "Invalid authorization header; use Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY')."
		}
		key = strings.TrimSpace(rest)
	}
	if !strings.HasPrefix(key, "sk_") {
		return "", "Invalid API Key provided: " + redactKey(key)
	}
	return key, ""
}

// redactKey hides all but the start and end of a key, like Stripe does.
func redactKey(k string) string {
	if len(k) <= 8 {
		return strings.Repeat("*", len(k))
	}
	return k[:4] + strings.Repeat("*", len(k)-8) + k[len(k)-4:]
}

// handleUnknown answers Stripe's 404 for routes the emulator does not know.
func (s *Server) handleUnknown(w http.ResponseWriter, r *http.Request) {
	s.bump(func(st *Stats) { st.InvalidRequests++ })
	writeError(w, http.StatusNotFound, errorObject{
		Type: typeInvalidRequest,
		Message: "Unrecognized request URL (" + r.Method + ": " + r.URL.Path + "). stripefake only implements " +
			"create, retrieve, list and search of PaymentIntents, and create, retrieve and list of refunds.",
	})
}

// writeJSON writes an already encoded JSON body.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeValue encodes v as JSON and writes it.
func writeValue(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, errorObject{Type: typeAPI, Message: err.Error()})
		return
	}
	writeJSON(w, status, body)
}

// recorder remembers the status for logging; Unwrap keeps Hijack reachable
// through http.ResponseController.
type recorder struct {
	http.ResponseWriter
	status   int
	hijacked bool
}

// WriteHeader records the status code.
func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap returns the underlying ResponseWriter.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

const alphanumerics = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// randomID returns n random alphanumerics (not from the seeded chaos source,
// so chaos decisions do not depend on how many IDs were minted).
func randomID(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphanumerics[rand.IntN(len(alphanumerics))]
	}
	return string(b)
}
