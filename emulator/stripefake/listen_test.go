package stripefake_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

func TestServeShutsDownGracefully(t *testing.T) {
	t.Parallel()
	fake := stripefake.New(stripefake.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- stripefake.Serve(ctx, ln, fake) }()

	// A hung request is released by the shutdown and completes.
	fake.Inject(stripefake.Fault{Kind: stripefake.FaultHang})
	answered := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/v1/payment_intents",
			strings.NewReader("amount=100&currency=usd&payment_method=pm_card_visa&confirm=true"))
		req.Header.Set("Authorization", "Bearer sk_test_1")
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- -1
			return
		}
		_ = resp.Body.Close()
		answered <- resp.StatusCode
	}()
	require.Eventually(t, func() bool { return fake.Stats().HungNow == 1 }, 5*time.Second, time.Millisecond)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
	require.Equal(t, http.StatusOK, <-answered)
	require.Len(t, fake.PaymentIntents(), 1)
}

func TestListenAndServeBadAddr(t *testing.T) {
	t.Parallel()
	err := stripefake.ListenAndServe(context.Background(), "256.0.0.1:http-nope", stripefake.New(stripefake.Options{}))
	require.Error(t, err)
}

// A create whose client left is not tracked by http.Server; Serve still
// waits for it to finish before returning.
func TestServeWaitsForExecutionsOutlivingTheirClient(t *testing.T) {
	t.Parallel()
	fake := stripefake.New(stripefake.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- stripefake.Serve(ctx, ln, fake) }()

	fake.Inject(stripefake.Fault{Kind: stripefake.FaultOutliveClient, Latency: 300 * time.Millisecond})
	rctx, rcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer rcancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, "http://"+ln.Addr().String()+"/v1/payment_intents",
		strings.NewReader("amount=100&currency=usd&payment_method=pm_card_visa&confirm=true"))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer sk_test_1")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	_, err = http.DefaultClient.Do(req)
	require.Error(t, err)
	require.EqualValues(t, 1, fake.Stats().ExecutingNow)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
	require.Len(t, fake.PaymentIntents(), 1)
	require.EqualValues(t, 0, fake.Stats().ExecutingNow)
	require.EqualValues(t, 1, fake.Stats().ClientsGone)
}
