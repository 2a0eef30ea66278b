package stripefake_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"
	"github.com/stripe/stripe-go/v79/client"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// env is one emulator behind an httptest server plus a real stripe-go client.
type env struct {
	fake *stripefake.Server
	srv  *httptest.Server
	sc   *client.API
}

// newEnv starts an emulator with opts and returns a client for it.
func newEnv(t *testing.T, opts stripefake.Options) *env {
	t.Helper()
	fake := stripefake.New(opts)
	srv := httptest.NewServer(fake)
	t.Cleanup(func() {
		fake.ReleaseHangs()
		srv.Close()
	})
	return &env{fake: fake, srv: srv, sc: newClient(srv, "sk_test_123")}
}

// newClient configures stripe-go v79 against srv with the given secret key.
func newClient(srv *httptest.Server, key string) *client.API {
	backend := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL:               stripe.String(srv.URL),
		MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
		HTTPClient:        srv.Client(),
	})
	return client.New(key, &stripe.Backends{API: backend, Connect: backend, Uploads: backend})
}

// piParams builds confirmed create params for pm with metadata payment_id.
func piParams(pm, paymentID, key string) *stripe.PaymentIntentParams {
	p := &stripe.PaymentIntentParams{
		Amount:        stripe.Int64(1234),
		Currency:      stripe.String("usd"),
		PaymentMethod: stripe.String(pm),
		Confirm:       stripe.Bool(true),
		Description:   stripe.String("order " + paymentID),
	}
	p.AddMetadata("payment_id", paymentID)
	p.AddExpand("latest_charge")
	if key != "" {
		p.SetIdempotencyKey(key)
	}
	return p
}

// stripeErr asserts err is a *stripe.Error and returns it.
func stripeErr(t *testing.T, err error) *stripe.Error {
	t.Helper()
	require.Error(t, err)
	var se *stripe.Error
	require.True(t, errors.As(err, &se), "want *stripe.Error, got %T: %v", err, err)
	return se
}

// rawDo sends a raw request to the emulator and returns status, headers, body.
func rawDo(t *testing.T, e *env, method, path, auth string, header http.Header, form url.Values) (int, http.Header, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, e.srv.URL+path, body)
	require.NoError(t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := e.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

// fakeClock is a settable clock for Options.Now.
type fakeClock struct{ ns atomic.Int64 }

// newClock returns a clock standing at t.
func newClock(t time.Time) *fakeClock {
	c := &fakeClock{}
	c.ns.Store(t.UnixNano())
	return c
}

// Now returns the clock's time.
func (c *fakeClock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// Add moves the clock by d.
func (c *fakeClock) Add(d time.Duration) { c.ns.Add(int64(d)) }
