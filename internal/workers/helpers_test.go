package workers_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/testutil"
	"github.com/paymentsd/paymentsd/internal/workers"
)

// The service fixture the completer, reaper and receipt tests share: a
// running service whose own periodic workers stay out of the way, a user of
// it, and a completer the test runs by hand (setupService), optionally with
// keys left abandoned at a recovery point (setupCrashed). Its helpers are
// methods, so it is declared once here rather than in each test.

const visa = `{"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa"}`

var errCrash = errors.New("injected crash")

// crashing returns hooks that crash every run at point while *on is true.
func crashing(point phases.RecoveryPoint, afterCall bool, on *atomic.Bool) phases.Hooks {
	hook := func(_ context.Context, at phases.RecoveryPoint) error {
		if at == point && on.Load() {
			return errCrash
		}
		return nil
	}
	if afterCall {
		return phases.Hooks{AfterCall: hook}
	}
	return phases.Hooks{AfterCommit: hook}
}

type serviceBundle struct {
	svc       *testutil.Service
	apiKey    string
	completer *workers.CompleterWorker
}

func setupService(t *testing.T, opts testutil.ServiceOptions) *serviceBundle {
	t.Helper()
	// The periodic completer of the service itself runs rarely here (once
	// on start); tests run the worker directly, which waits for any other
	// run to end first. So does its reaper, which waits for no one: a test
	// of it waits for that run first (reaperRan).
	opts.Workers.Completer.Interval = time.Hour
	opts.Workers.Reaper.Interval = time.Hour
	svc := testutil.StartService(t, opts)
	_, apiKey := svc.NewUser(t)
	return &serviceBundle{
		svc:    svc,
		apiKey: apiKey,
		completer: &workers.CompleterWorker{
			Pool:   svc.Pool,
			Engine: svc.App.Engine,
			Config: workers.CompleterConfig{MinIdle: time.Millisecond, Backoff: time.Millisecond},
			Log:    testutil.Logger(t),
		},
	}
}

// later makes the bundle's completer judge leases d on: the crashed runs'
// leases are stale to it at once, with no sleep.
func (b *serviceBundle) later(d time.Duration) {
	b.completer.Engine = b.svc.App.EngineAt(func() time.Time { return time.Now().Add(d) })
}

// setupCrashed starts a service whose runs crash at point (after its commit,
// or after its call when afterCall), sends each key once so that it is left
// abandoned there, and stops the crashes.
func setupCrashed(t *testing.T, opts testutil.ServiceOptions, point phases.RecoveryPoint, afterCall bool, keys ...string) *serviceBundle {
	t.Helper()
	var on atomic.Bool
	on.Store(true)
	opts.Hooks = crashing(point, afterCall, &on)
	b := setupService(t, opts)
	for _, k := range keys {
		require.Equal(t, http.StatusInternalServerError, b.svc.PostPayment(t, b.apiKey, k, visa).Status)
	}
	on.Store(false)
	return b
}

func (b *serviceBundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := b.svc.Pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

func (b *serviceBundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.svc.Pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// reaperRan waits until the service's own reaper has finished the run it
// makes on start, which River's leader election can delay by seconds: keys
// a test ages before then could be reaped by that run, or locked by it and
// skipped by the worker the test runs.
func (b *serviceBundle) reaperRan(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		err := b.svc.Pool.QueryRow(context.Background(),
			"SELECT count(*) FROM river_job WHERE kind = 'reaper' AND state = 'completed'").Scan(&n)
		return err == nil && n > 0
	}, 30*time.Second, 20*time.Millisecond, "the service's reaper never ran on start")
}

// lazy formats as what f returns when it is formatted: for a message
// that should show the state at a deadline, not at the start of the wait.
type lazy func() any

func (l lazy) String() string { return fmt.Sprint(l()) }

// jobs describes every River job: kind, state and errors.
func (b *serviceBundle) jobs(t *testing.T) []string {
	rows, err := b.svc.Pool.Query(context.Background(), "SELECT kind || ' ' || state || ' ' || errors::text FROM river_job")
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var s *string
		require.NoError(t, rows.Scan(&s))
		if s != nil {
			out = append(out, *s)
		}
	}
	return out
}

// finishedStatus is the stored response status of key, or 0 if unfinished.
func (b *serviceBundle) finishedStatus(t *testing.T, key string) int {
	t.Helper()
	var status *int
	require.NoError(t, b.svc.Pool.QueryRow(context.Background(),
		"SELECT response_code FROM idempotency_keys WHERE idempotency_key = $1", key).Scan(&status))
	if status == nil {
		return 0
	}
	return *status
}
