package testutil

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/api"
	"github.com/paymentsd/paymentsd/internal/app"
	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/workers"
)

// ServiceOptions tune a test service; the zero value is a working service.
type ServiceOptions struct {
	// Pool, when set, is used instead of a fresh database.
	Pool         *db.Pool
	LeaseTimeout time.Duration
	Hooks        phases.Hooks
	// StripeTimeout bounds each emulator call (default 5s).
	StripeTimeout time.Duration
	// RequestTimeout overrides the default (the lease length), for tests
	// of runs that outlive their lease.
	RequestTimeout time.Duration
	// Workers tunes the background workers (the app's defaults otherwise).
	Workers workers.Config
	// RateLimit and MaxUnfinished set the abuse limits (off and the
	// default by default).
	RateLimit     int
	MaxUnfinished int
	// LogWriter, when set, receives every log line at debug level, JSON.
	LogWriter io.Writer
	// Emulator, when set, is the Stripe emulator to use (two services on
	// one Stripe account share one); by default each service gets its own.
	Emulator *Emulator
	// Stripe tunes the charger; its key, base URL and timeout are filled in.
	Stripe payments.StripeConfig
	// WebhookSecret mounts POST /webhooks/stripe.
	WebhookSecret string
	// StaleAt is the time leases are judged stale at (nil: the database's
	// now()), so a test takes a lease over without sleeping it out.
	StaleAt func() time.Time
	// HeartbeatInterval is how often the instance heartbeats (zero: the
	// service's default).
	HeartbeatInterval time.Duration
}

// Emulator is a Stripe emulator served over HTTP for tests.
type Emulator struct {
	*stripefake.Server
	URL string
}

// StartEmulator serves a Stripe emulator until the test ends.
func StartEmulator(t testing.TB, opts stripefake.Options) *Emulator {
	t.Helper()
	opts.Logger = Logger(t)
	emulator := stripefake.New(opts)
	srv := httptest.NewServer(emulator)
	t.Cleanup(srv.Close)
	t.Cleanup(emulator.ReleaseHangs) // before the server closes: cleanups run last-in first-out
	t.Cleanup(emulator.Close)        // stops webhook deliveries, if any
	return &Emulator{Server: emulator, URL: srv.URL}
}

// Service is paymentsd served over real HTTP on loopback, with its own
// database and its own Stripe emulator, driven by the real stripe-go client.
type Service struct {
	URL    string
	Pool   *db.Pool
	Stripe *stripefake.Server
	// StripeURL is the emulator's base URL.
	StripeURL string
	App       *app.App
	Client    *http.Client

	stop     context.CancelFunc
	done     chan error
	stopOnce sync.Once
	stopErr  error
}

// Stop shuts the service down gracefully, as SIGTERM does, and returns
// what Run returned. Later calls return the same.
func (s *Service) Stop() error {
	s.stopOnce.Do(func() {
		s.stop()
		s.stopErr = <-s.done
	})
	return s.stopErr
}

// StartService starts a service for the test and stops it when the test ends.
func StartService(t testing.TB, opts ServiceOptions) *Service {
	t.Helper()
	pool := opts.Pool
	if pool == nil {
		pool = NewDB(t)
	}
	emulator := opts.Emulator
	if emulator == nil {
		emulator = StartEmulator(t, stripefake.Options{})
	}

	// Tests shorten leases to watch takeovers happen; requests keep a
	// generous bound so a loaded machine does not time them out.
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = 10 * time.Second
	}
	if opts.StripeTimeout == 0 {
		opts.StripeTimeout = 5 * time.Second
	}
	log := Logger(t)
	if opts.LogWriter != nil {
		log = zerolog.New(opts.LogWriter).Level(zerolog.DebugLevel).With().Timestamp().Logger()
	}
	stripeCfg := opts.Stripe
	stripeCfg.SecretKey, stripeCfg.APIBase, stripeCfg.Timeout = "sk_test_paymentsd", emulator.URL, opts.StripeTimeout
	// The least non-zero durations (zero means the default): the
	// emulator's list is consistent at once, and it has finished a request
	// by the time it answers, or the test released its hang. Tests of the
	// margin or the bound set their own. A millisecond was not "at once": a
	// retry that found its Stripe key spent, searched and listed in less
	// than that, and was told to wait for the next key.
	if stripeCfg.VisibilityMargin == 0 {
		stripeCfg.VisibilityMargin = time.Nanosecond
	}
	if stripeCfg.ExecutionBound == 0 {
		stripeCfg.ExecutionBound = time.Nanosecond
	}
	a, err := app.New(context.Background(), pool, app.Options{
		Logger:         log,
		RateLimit:      opts.RateLimit,
		MaxUnfinished:  opts.MaxUnfinished,
		LeaseTimeout:   opts.LeaseTimeout,
		Stripe:         stripeCfg,
		Hooks:          opts.Hooks,
		ShutdownGrace:  5 * time.Second,
		RequestTimeout: opts.RequestTimeout,
		Workers:        opts.Workers,
		WebhookSecret:  opts.WebhookSecret,
		StaleAt:        opts.StaleAt,

		HeartbeatInterval: opts.HeartbeatInterval,
	})
	if err != nil {
		t.Fatalf("error assembling service: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("error listening: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	svc := &Service{
		URL:    "http://" + ln.Addr().String(),
		Pool:   pool,
		Stripe: emulator.Server, StripeURL: emulator.URL,
		App:    a,
		Client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 128}},
		stop:   cancel,
		done:   make(chan error, 1),
	}
	go func() { svc.done <- a.Run(ctx, ln) }()
	t.Cleanup(func() {
		if err := svc.Stop(); err != nil {
			t.Errorf("error serving: %v", err)
		}
	})
	// Run registers the instance and starts the workers before it serves:
	// wait until it serves, so a test that ends at once does not cancel
	// the start half way.
	select {
	case <-a.Serving():
	case err := <-svc.done:
		svc.done <- err // for Stop, in the cleanup
		t.Fatalf("error starting the service: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatalf("the service did not start serving within 10s")
	}
	return svc
}

var userCounter atomic.Int64

// NewUser creates a user and returns its id and API key.
func (s *Service) NewUser(t testing.TB) (int64, string) {
	t.Helper()
	key := api.NewAPIKey()
	user, err := dbsqlc.New().UserInsert(context.Background(), s.Pool, &dbsqlc.UserInsertParams{
		Email:      fmt.Sprintf("user%d-%d@example.com", os.Getpid(), userCounter.Add(1)),
		ApiKeyHash: api.HashAPIKey(key),
	})
	if err != nil {
		t.Fatalf("error creating user: %v", err)
	}
	return user.ID, key
}

// Response is a response read whole.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends a request and reads the whole response. headers are name, value
// pairs; a name given twice sends the header twice.
func (s *Service) Do(t testing.TB, method, path, body string, headers ...string) *Response {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatalf("error building request: %v", err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		t.Fatalf("error sending %s %s: %v", method, path, err)
	}
	return ReadResponse(t, resp)
}

// Send sends req in the background, and gives the error the exchange ended
// with (nil for any answer, whose body it closes) once it ends: for a test
// that hangs up, through req's context, while the service works.
func (s *Service) Send(req *http.Request) <-chan error {
	done := make(chan error, 1)
	go func() {
		resp, err := s.Client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	return done
}

// ReadResponse reads resp whole and closes its body.
func ReadResponse(t testing.TB, resp *http.Response) *Response {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("error reading response: %v", err)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// PostPayment sends POST /payments with the API key, idempotency key and
// JSON body.
func (s *Service) PostPayment(t testing.TB, apiKey, idemKey, body string) *Response {
	t.Helper()
	return s.Do(t, http.MethodPost, "/payments", body,
		"Authorization", "Bearer "+apiKey, "Idempotency-Key", idemKey, "Content-Type", "application/json")
}
