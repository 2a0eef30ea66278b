package api_test

// Attacks on the late detach (commit d2302df): the engine now reads a key
// with the client's own context and detaches the run from it only once it
// reserves or resumes the key (phases.Request.RunTimeout).

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/idempotency"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestAttackClientHangsUpRightAfterReservation: the client goes away once
// its key is reserved (payment_created committed); the run must not see
// the hang-up, and must finish by itself, with no completer.
func TestAttackClientHangsUpRightAfterReservation(t *testing.T) {
	t.Parallel()
	reserved := make(chan struct{}, 1)
	release := make(chan struct{})
	var cancelled atomic.Bool
	opts := testutil.ServiceOptions{Hooks: phases.Hooks{AfterCommit: func(ctx context.Context, point phases.RecoveryPoint) error {
		if point != payments.PaymentCreated {
			return nil
		}
		reserved <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			cancelled.Store(true)
			return ctx.Err()
		}
		return nil
	}}}
	opts.Workers.Completer.Interval = time.Hour // the run must finish by itself
	svc := testutil.StartService(t, opts)
	_, apiKey := svc.NewUser(t)

	ctx, hangUp := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, svc.URL+"/payments",
		strings.NewReader(`{"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Idempotency-Key", "hang-up-after-reserve")
	done := svc.Send(req)
	<-reserved
	hangUp()
	require.Error(t, <-done)
	time.Sleep(300 * time.Millisecond) // the server sees the connection close
	close(release)

	var point string
	testutil.WaitFor(t, 5*time.Second, 20*time.Millisecond, func() bool {
		require.NoError(t, svc.Pool.QueryRow(context.Background(),
			`SELECT recovery_point FROM idempotency_keys WHERE idempotency_key = 'hang-up-after-reserve'`).Scan(&point))
		return point == string(phases.Finished)
	})
	require.False(t, cancelled.Load(), "the run saw the client's hang-up")
	var status string
	require.NoError(t, svc.Pool.QueryRow(context.Background(), `SELECT status FROM payments`).Scan(&status))
	require.Equal(t, payments.StatusSucceeded, status)
}

// TestAttackClientHangsUpBeforeTheRead: a client already gone when the
// engine reads its key reserves nothing and leaves no lease.
func TestAttackClientHangsUpBeforeTheRead(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	userID, _ := svc.NewUser(t)
	body := []byte(`{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}`)
	canonical, sum, err := idempotency.Fingerprint(http.MethodPost, "/payments", body)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = svc.App.Engine.Execute(ctx, &phases.Request{
		UserID: userID, Key: "gone", Flow: payments.FlowName, Method: http.MethodPost, Path: "/payments",
		Params: canonical, Fingerprint: sum, RunTimeout: 10 * time.Second,
	})
	require.Error(t, err)
	var keys int
	require.NoError(t, svc.Pool.QueryRow(context.Background(), `SELECT count(*) FROM idempotency_keys`).Scan(&keys))
	require.Zero(t, keys)
}
