package api_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/intent"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/phases/captures"
	"github.com/paymentsd/paymentsd/internal/testutil"
	"github.com/paymentsd/paymentsd/internal/workers"
)

// postCapture sends POST /payments/{id}/capture.
func postCapture(t testing.TB, svc *testutil.Service, apiKey, idemKey, paymentID, body string) *testutil.Response {
	t.Helper()
	return svc.Do(t, http.MethodPost, "/payments/"+paymentID+"/capture", body,
		"Authorization", "Bearer "+apiKey, "Idempotency-Key", idemKey, "Content-Type", "application/json")
}

// postCancel sends POST /payments/{id}/cancel.
func postCancel(t testing.TB, svc *testutil.Service, apiKey, idemKey, paymentID string) *testutil.Response {
	t.Helper()
	return svc.Do(t, http.MethodPost, "/payments/"+paymentID+"/cancel", `{}`,
		"Authorization", "Bearer "+apiKey, "Idempotency-Key", idemKey, "Content-Type", "application/json")
}

// captureMetadata is the metadata a capture sent under the capture key
// idemKey of user userID carries: the ID of the key's intent, which makes a
// capture that took that key's own.
func captureMetadata(t *testing.T, svc *testutil.Service, userID int64, idemKey string) map[string]string {
	t.Helper()
	return map[string]string{intent.MetadataCaptureIntent: intentOf(t, svc, userID, idemKey).ID()}
}

// userOfKey is the user of the stored key idemKey.
func userOfKey(t *testing.T, svc *testutil.Service, idemKey string) int64 {
	t.Helper()
	var userID int64
	require.NoError(t, svc.Pool.QueryRow(context.Background(),
		"SELECT user_id FROM idempotency_keys WHERE idempotency_key = $1", idemKey).Scan(&userID))
	return userID
}

// TestCaptures covers POST /payments/{id}/capture and its rules.
func TestCaptures(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		apiKey string
	}

	setupWith := func(t *testing.T, opts testutil.ServiceOptions) (*testutil.Service, *testBundle) {
		t.Helper()
		svc := testutil.StartService(t, opts)
		_, apiKey := svc.NewUser(t)
		return svc, &testBundle{apiKey: apiKey}
	}
	setup := func(t *testing.T) (*testutil.Service, *testBundle) {
		t.Helper()
		return setupWith(t, testutil.ServiceOptions{})
	}

	t.Run("CaptureWholeReplayThenRefuseASecond", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := authorized(t, svc, bundle.apiKey, "auth")

		first := postCapture(t, svc, bundle.apiKey, "cap", p.ID, `{}`)
		require.Equal(t, http.StatusOK, first.Status, "body: %s", first.Body)
		captured := decode[payment](t, first)
		require.Equal(t, "succeeded", captured.Status)
		require.EqualValues(t, 2000, captured.AmountCaptured)
		require.Equal(t, p.ID, captured.ID)
		require.Equal(t, 1, receipts(t, svc), "the receipt goes out on capture")
		pi := stripePI(t, svc, *p.StripePaymentIntentID)
		require.Equal(t, stripefake.StatusSucceeded, pi.Status)
		require.EqualValues(t, 2000, pi.AmountReceived)

		replay := postCapture(t, svc, bundle.apiKey, "cap", p.ID, `{}`)
		require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
		require.Equal(t, string(first.Body), string(replay.Body))
		requireProblem(t, postCapture(t, svc, bundle.apiKey, "cap", p.ID, `{"amount_to_capture": 100}`),
			http.StatusUnprocessableEntity, "idempotency-key-reused")

		second := postCapture(t, svc, bundle.apiKey, "cap-2", p.ID, `{}`)
		require.Equal(t, p.ID, requireProblem(t, second, http.StatusBadRequest, "payment-not-capturable").PaymentID)
		again := postCapture(t, svc, bundle.apiKey, "cap-2", p.ID, `{}`)
		require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"), "a refusal is stored")
		require.Equal(t, string(second.Body), string(again.Body))

		require.EqualValues(t, 1, svc.Stripe.Stats().Captures)
		require.EqualValues(t, 1, svc.Stripe.Stats().CaptureRequests, "the refused key never reached Stripe")
		require.Equal(t, 1, receipts(t, svc))
		got := getPaymentOf(t, svc, bundle.apiKey, p.ID)
		require.Equal(t, "succeeded", got["status"])
		require.EqualValues(t, 2000, got["amount_captured"])
	})

	t.Run("PartialCaptureRefundsAtMostWhatWasCaptured", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := authorized(t, svc, bundle.apiKey, "auth")

		requireProblem(t, postCapture(t, svc, bundle.apiKey, "too-much", p.ID, `{"amount_to_capture": 2001}`),
			http.StatusBadRequest, "capture-exceeds-authorization")
		require.Zero(t, svc.Stripe.Stats().CaptureRequests)

		resp := postCapture(t, svc, bundle.apiKey, "cap", p.ID, `{"amount_to_capture": 1500}`)
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		require.EqualValues(t, 1500, decode[payment](t, resp).AmountCaptured)
		require.EqualValues(t, 1500, stripePI(t, svc, *p.StripePaymentIntentID).AmountReceived)

		all := postRefund(t, svc, bundle.apiKey, "refund", p.ID, `{}`)
		require.Equal(t, http.StatusCreated, all.Status, "body: %s", all.Body)
		require.EqualValues(t, 1500, decode[refund](t, all).Amount, "all that was captured")
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "more", p.ID, `{"amount": 1}`), http.StatusBadRequest, "refund-exceeds-payment")
		require.Len(t, svc.Stripe.Refunds(), 1)
	})

	t.Run("RefusalsAndScope", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		_, otherKey := svc.NewUser(t)
		p := authorized(t, svc, bundle.apiKey, "auth")
		automatic := paid(t, svc, bundle.apiKey, "pay")

		for _, body := range []string{`{"amount_to_capture": 0}`, `{"amount_to_capture": "5"}`, `{"amount": 5}`, `[]`, ``} {
			requireProblem(t, postCapture(t, svc, bundle.apiKey, "bad", p.ID, body), http.StatusBadRequest, "invalid-request")
		}
		requireProblem(t, postCapture(t, svc, bundle.apiKey, "bad", "pay_nope", `{}`), http.StatusBadRequest, "invalid-request")
		requireProblem(t, postCapture(t, svc, otherKey, "bad", p.ID, `{}`), http.StatusNotFound, "not-found")
		requireProblem(t, postCapture(t, svc, bundle.apiKey, "auto", automatic.ID, `{}`), http.StatusBadRequest, "payment-not-capturable")
		require.Zero(t, svc.Stripe.Stats().CaptureRequests)

		// Nothing was stored under "bad": the corrected request proceeds.
		require.Equal(t, http.StatusOK, postCapture(t, svc, bundle.apiKey, "bad", p.ID, `{}`).Status)
	})

	// Ten keys capture one payment at once: one 200, nine stored 400s, and
	// Stripe is asked once.
	t.Run("ConcurrentCapturesReachStripeOnce", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := authorized(t, svc, bundle.apiKey, "auth")

		var waits []func() *testutil.Response
		for i := range 10 {
			waits = append(waits, testutil.Go(t, func(t testing.TB) *testutil.Response {
				return postCapture(t, svc, bundle.apiKey, fmt.Sprintf("cap-%d", i), p.ID, `{}`)
			}))
		}
		answers := map[int]int{}
		for _, wait := range waits {
			answers[wait().Status]++
		}
		require.Equal(t, map[int]int{http.StatusOK: 1, http.StatusBadRequest: 9}, answers)
		require.EqualValues(t, 1, svc.Stripe.Stats().CaptureRequests)
		require.Equal(t, 1, receipts(t, svc))
	})

	// A capture and a cancel of one payment at once, on several payments:
	// one of each pair wins, the other gets its stored 400, and Stripe
	// does exactly what the winner said.
	t.Run("CaptureRacingCancelOneWins", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		const n = 6
		for i := range n {
			p := authorized(t, svc, bundle.apiKey, fmt.Sprintf("auth-%d", i))
			capture := testutil.Go(t, func(t testing.TB) *testutil.Response {
				return postCapture(t, svc, bundle.apiKey, fmt.Sprintf("cap-%d", i), p.ID, `{}`)
			})
			cancel := testutil.Go(t, func(t testing.TB) *testutil.Response {
				return postCancel(t, svc, bundle.apiKey, fmt.Sprintf("cancel-%d", i), p.ID)
			})
			captured, canceled := capture(), cancel()
			pi := stripePI(t, svc, *p.StripePaymentIntentID)
			if captured.Status == http.StatusOK {
				requireProblem(t, canceled, http.StatusBadRequest, "payment-not-cancelable")
				require.Equal(t, stripefake.StatusSucceeded, pi.Status)
			} else {
				requireProblem(t, captured, http.StatusBadRequest, "payment-not-capturable")
				require.Equal(t, http.StatusOK, canceled.Status, "body: %s", canceled.Body)
				require.Equal(t, "canceled", decode[payment](t, canceled).Status)
				require.Equal(t, stripefake.StatusCanceled, pi.Status)
			}
		}
		stats := svc.Stripe.Stats()
		require.EqualValues(t, n, stats.CaptureRequests+stats.CancelRequests, "one call per payment")
		require.EqualValues(t, n, stats.Captures+stats.Cancels)
		require.EqualValues(t, stats.Captures, receipts(t, svc))
	})

	t.Run("Faults", func(t *testing.T) {
		t.Parallel()
		// A 500 that did capture and a lost answer: the PaymentIntent, read
		// back, says it was captured, and the very request answers 200.
		for _, kind := range []stripefake.FaultKind{stripefake.Fault500Charged, stripefake.FaultLostAnswer} {
			t.Run(kind.String(), func(t *testing.T) {
				t.Parallel()
				svc, bundle := setup(t)
				p := authorized(t, svc, bundle.apiKey, "auth")
				svc.Stripe.Inject(stripefake.Fault{Kind: kind, Op: stripefake.OpCapturePaymentIntent})

				resp := postCapture(t, svc, bundle.apiKey, "cap", p.ID, `{"amount_to_capture": 1200}`)
				require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
				require.EqualValues(t, 1200, decode[payment](t, resp).AmountCaptured)
				require.EqualValues(t, 1, svc.Stripe.Stats().Captures)
				require.EqualValues(t, 1, svc.Stripe.Stats().CaptureRequests)
			})
		}

		// A 500 that did not capture is replayed under its key for ever:
		// the PaymentIntent, still requires_capture, says the key did
		// nothing, so the retry sends the next key.
		t.Run("500", func(t *testing.T) {
			t.Parallel()
			svc, bundle := setup(t)
			p := authorized(t, svc, bundle.apiKey, "auth")
			svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.Fault500, Op: stripefake.OpCapturePaymentIntent})

			resp := postCapture(t, svc, bundle.apiKey, "cap", p.ID, `{}`)
			requireProblem(t, resp, http.StatusServiceUnavailable, "processor-unavailable")
			require.NotEmpty(t, resp.Header.Get("Retry-After"))
			require.Equal(t, "requires_capture", getPaymentOf(t, svc, bundle.apiKey, p.ID)["status"])

			retried := postCapture(t, svc, bundle.apiKey, "cap", p.ID, `{}`)
			require.Equal(t, http.StatusOK, retried.Status, "body: %s", retried.Body)
			require.Equal(t, "succeeded", decode[payment](t, retried).Status)
			require.EqualValues(t, 2, svc.Stripe.Stats().CaptureRequests)
			require.EqualValues(t, 1, svc.Stripe.Stats().Captures)
			requireProblem(t, postCapture(t, svc, bundle.apiKey, "other", p.ID, `{}`), http.StatusBadRequest, "payment-not-capturable")
		})
	})

	// A capture whose outcome stayed unknown, never retried by its
	// client: the completer resumes it, and the client's late retry gets
	// the stored answer.
	t.Run("CompleterFinishesAnUnknownCapture", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setupWith(t, testutil.ServiceOptions{Workers: quietCompleter})
		p := authorized(t, svc, bundle.apiKey, "auth")
		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.Fault500, Op: stripefake.OpCapturePaymentIntent})
		requireProblem(t, postCapture(t, svc, bundle.apiKey, "cap", p.ID, `{"amount_to_capture": 900}`),
			http.StatusServiceUnavailable, "processor-unavailable")

		resumed, err := completer(svc).RunOnce(context.Background())
		require.NoError(t, err)
		require.Equal(t, 1, resumed)
		require.Equal(t, "succeeded", getPaymentOf(t, svc, bundle.apiKey, p.ID)["status"])
		late := postCapture(t, svc, bundle.apiKey, "cap", p.ID, `{"amount_to_capture": 900}`)
		require.Equal(t, http.StatusOK, late.Status, "body: %s", late.Body)
		require.Equal(t, "true", late.Header.Get("Idempotent-Replayed"))
		require.EqualValues(t, 900, decode[payment](t, late).AmountCaptured)
		require.EqualValues(t, 1, svc.Stripe.Stats().Captures)
		require.Equal(t, 1, receipts(t, svc))
	})

	// A crash after each commit and after the call: the retry finishes the
	// key, Stripe captured once, the receipt went out once.
	t.Run("CrashAfterEachRecoveryPoint", func(t *testing.T) {
		t.Parallel()
		const lease = 300 * time.Millisecond
		cases := []struct {
			name  string
			hooks phases.Hooks
		}{
			{"after claimed commits", phases.Hooks{AfterCommit: crashOnce(captures.Claimed)}},
			{"after the capture, before it is recorded", phases.Hooks{AfterCall: crashOnce(captures.Claimed)}},
			{"after finished commits", phases.Hooks{AfterCommit: crashOnce(phases.Finished)}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				svc, bundle := setupWith(t, testutil.ServiceOptions{LeaseTimeout: lease})
				p := authorized(t, svc, bundle.apiKey, "auth")
				// The hooks fire for the capture only: the service is
				// restarted on the same database and Stripe with them.
				crashing := testutil.StartService(t, testutil.ServiceOptions{
					Pool: svc.Pool, Emulator: &testutil.Emulator{Server: svc.Stripe, URL: svc.StripeURL},
					LeaseTimeout: lease, Hooks: tc.hooks,
				})

				requireProblem(t, postCapture(t, crashing, bundle.apiKey, "cap", p.ID, `{}`), http.StatusInternalServerError, "internal-error")
				var retried *testutil.Response
				testutil.WaitFor(t, 10*lease, lease/3, func() bool {
					retried = postCapture(t, crashing, bundle.apiKey, "cap", p.ID, `{}`)
					return retried.Status != http.StatusConflict
				})
				require.Equal(t, http.StatusOK, retried.Status, "body: %s", retried.Body)
				require.Equal(t, "succeeded", decode[payment](t, retried).Status)
				again := postCapture(t, crashing, bundle.apiKey, "cap", p.ID, `{}`)
				require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
				require.Equal(t, string(retried.Body), string(again.Body))
				require.EqualValues(t, 1, svc.Stripe.Stats().Captures)
				require.Equal(t, 1, receipts(t, svc))
			})
		}
	})

	// A capture retried after the reaper took its key: refused with the
	// 422 that names the payment it captured, and never sent again.
	t.Run("LateRetryAfterReapingNamesThePayment", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		svc, bundle := setup(t)
		p := authorized(t, svc, bundle.apiKey, "auth")
		require.Equal(t, http.StatusOK, postCapture(t, svc, bundle.apiKey, "cap", p.ID, `{}`).Status)

		_, err := svc.Pool.Exec(ctx, "UPDATE idempotency_keys SET finished_at = now() - interval '2 days'")
		require.NoError(t, err)
		reaper := &workers.ReaperWorker{Pool: svc.Pool, Config: workers.ReaperConfig{Retention: 24 * time.Hour}, Log: testutil.Logger(t)}
		reaped, err := reaper.RunOnce(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 2, reaped)

		resp := postCapture(t, svc, bundle.apiKey, "cap", p.ID, `{}`)
		require.Equal(t, p.ID, requireProblem(t, resp, http.StatusUnprocessableEntity, "idempotency-key-expired").PaymentID)
		require.EqualValues(t, 1, svc.Stripe.Stats().CaptureRequests)
		require.Equal(t, "succeeded", getPaymentOf(t, svc, bundle.apiKey, p.ID)["status"], "the payment outlives its keys")
	})

	// Stripe canceled the authorization (it expired) before the capture:
	// Stripe refuses with payment_intent_unexpected_state, the PaymentIntent
	// read back is canceled, and the capture's stored answer says so.
	t.Run("ExpiredAuthorizationIsNotCapturable", func(t *testing.T) {
		t.Parallel()
		em := testutil.StartEmulator(t, stripefake.Options{AuthorizationWindow: time.Hour})
		svc, bundle := setupWith(t, testutil.ServiceOptions{Emulator: em})
		p := authorized(t, svc, bundle.apiKey, "auth")
		em.Advance(2 * time.Hour)

		resp := postCapture(t, svc, bundle.apiKey, "cap", p.ID, `{}`)
		requireProblem(t, resp, http.StatusBadRequest, "payment-not-capturable")
		require.Equal(t, "canceled", getPaymentOf(t, svc, bundle.apiKey, p.ID)["status"])
		require.Zero(t, svc.Stripe.Stats().Captures)
		require.Zero(t, receipts(t, svc))
	})
}
