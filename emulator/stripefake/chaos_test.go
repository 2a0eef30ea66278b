package stripefake_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// chaosRun sends n sequential creates with fresh keys and returns each
// outcome ("ok", "500", "lost", "hang") plus the final stats. Chaos hangs end
// by themselves after HangFor, so they are told apart by the Hangs counter.
func chaosRun(t *testing.T, seed uint64, n int) ([]string, stripefake.Stats) {
	t.Helper()
	e := newEnv(t, stripefake.Options{Seed: seed, Logger: zerolog.New(io.Discard).Level(zerolog.DebugLevel)})
	e.fake.SetChaos(stripefake.Chaos{
		P500: 0.1, PLostAnswer: 0.1, PHang: 0.05,
		Latency: 0, MaxLatency: 2 * time.Millisecond,
		HangFor: 20 * time.Millisecond,
	})
	outcomes := make([]string, 0, n)
	for i := range n {
		hangsBefore := e.fake.Stats().Hangs
		_, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", fmt.Sprint(i), fmt.Sprintf("chaos-%d", i)))
		var se *stripe.Error
		switch {
		case e.fake.Stats().Hangs > hangsBefore:
			require.NoError(t, err)
			outcomes = append(outcomes, "hang")
		case err == nil:
			outcomes = append(outcomes, "ok")
		case errors.As(err, &se):
			require.Equal(t, http.StatusInternalServerError, se.HTTPStatusCode)
			outcomes = append(outcomes, "500")
		default:
			outcomes = append(outcomes, "lost")
		}
	}
	return outcomes, e.fake.Stats()
}

func TestChaosSeededIsDeterministic(t *testing.T) {
	t.Parallel()
	const n = 200
	first, st := chaosRun(t, 42, n)
	second, _ := chaosRun(t, 42, n)
	require.Equal(t, first, second)

	count := map[string]int64{}
	for _, o := range first {
		count[o]++
	}
	require.Positive(t, count["500"])
	require.Positive(t, count["lost"])
	require.Positive(t, count["hang"])
	require.Positive(t, count["ok"])
	require.Equal(t, count["500"], st.Faults500)
	require.Equal(t, count["lost"], st.LostAnswers)
	require.Equal(t, count["hang"], st.Hangs)
	require.Positive(t, st.Latencies)
	require.EqualValues(t, n, st.CreateRequests)
	// Only the 500s created nothing.
	require.Equal(t, int64(n)-count["500"], st.PaymentIntentsCreated)
}

func TestChaosHangEndsByItself(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{Seed: 1})
	e.fake.SetChaos(stripefake.Chaos{PHang: 1, HangFor: 50 * time.Millisecond})
	start := time.Now()
	pi, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", ""))
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, pi.Status)

	e.fake.SetChaos(stripefake.Chaos{})
	start = time.Now()
	_, err = e.sc.PaymentIntents.New(piParams("pm_card_visa", "2", ""))
	require.NoError(t, err)
	require.Less(t, time.Since(start), 50*time.Millisecond)
	require.EqualValues(t, 1, e.fake.Stats().Hangs)
}

// chaosRunDocumented is chaosRun for the kinds Stripe documents: outcomes
// are "ok", "500" (always after a charge) and "idem" (nothing executed).
func chaosRunDocumented(t *testing.T, seed uint64, n int) ([]string, stripefake.Stats) {
	t.Helper()
	e := newEnv(t, stripefake.Options{Seed: seed})
	e.fake.SetChaos(stripefake.Chaos{
		P500Charged: 0.1, PIdempotencyError: 0.1, POutliveClient: 0.1,
		OutliveLatency: time.Millisecond,
	})
	outcomes := make([]string, 0, n)
	for i := range n {
		_, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", fmt.Sprint(i), fmt.Sprintf("doc-%d", i)))
		var se *stripe.Error
		switch {
		case err == nil:
			outcomes = append(outcomes, "ok")
		case errors.As(err, &se) && se.HTTPStatusCode == http.StatusInternalServerError:
			outcomes = append(outcomes, "500")
		case errors.As(err, &se) && se.Type == stripe.ErrorTypeIdempotency:
			outcomes = append(outcomes, "idem")
		default:
			t.Fatalf("unexpected outcome %v", err)
		}
	}
	return outcomes, e.fake.Stats()
}

func TestChaosDocumentedKinds(t *testing.T) {
	t.Parallel()
	const n = 200
	first, st := chaosRunDocumented(t, 7, n)
	second, _ := chaosRunDocumented(t, 7, n)
	require.Equal(t, first, second)

	count := map[string]int64{}
	for _, o := range first {
		count[o]++
	}
	require.Positive(t, count["500"])
	require.Positive(t, count["idem"])
	require.Positive(t, st.OutliveClients)
	require.Equal(t, count["500"], st.Faults500Charged)
	require.Equal(t, count["idem"], st.FaultsIdempotencyError)
	require.Equal(t, st.OutliveClients, st.Latencies)
	// Every 500 charged; only the idempotency errors created nothing.
	require.Equal(t, int64(n)-count["idem"], st.PaymentIntentsCreated)
}
