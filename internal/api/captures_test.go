package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/phases/captures"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/stripeonce"
	"github.com/paymentsd/paymentsd/internal/testutil"
	"github.com/paymentsd/paymentsd/internal/workers"
)

// manualVisa authorizes 2000 on a card that succeeds, to capture later.
const manualVisa = `{"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa", "capture_method": "manual"}`

// authorized makes a manual payment of 2000, authorized, and returns it.
func authorized(t *testing.T, svc *testutil.Service, apiKey, key string) payment {
	t.Helper()
	resp := svc.PostPayment(t, apiKey, key, manualVisa)
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	return decode[payment](t, resp)
}

// stripePI is the emulator's PaymentIntent id, as it stands.
func stripePI(t *testing.T, svc *testutil.Service, id string) stripefake.PaymentIntent {
	t.Helper()
	for _, pi := range svc.Stripe.PaymentIntents() {
		if pi.ID == id {
			return pi
		}
	}
	t.Fatalf("the emulator has no PaymentIntent %s", id)
	return stripefake.PaymentIntent{}
}

// TestManualPayments covers POST /payments with capture_method manual: the
// authorization, and what it is not yet (charged, refundable, receipted).
func TestManualPayments(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		apiKey string
	}

	setup := func(t *testing.T) (*testutil.Service, *testBundle) {
		t.Helper()
		svc := testutil.StartService(t, testutil.ServiceOptions{})
		_, apiKey := svc.NewUser(t)
		return svc, &testBundle{apiKey: apiKey}
	}

	t.Run("AuthorizesWithoutCharging", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)

		p := authorized(t, svc, bundle.apiKey, "auth")
		require.Equal(t, "requires_capture", p.Status)
		require.Equal(t, "manual", p.CaptureMethod)
		require.Zero(t, p.AmountCaptured)
		require.NotNil(t, p.StripePaymentIntentID)
		pi := stripePI(t, svc, *p.StripePaymentIntentID)
		require.Equal(t, stripefake.StatusRequiresCapture, pi.Status)
		require.Zero(t, pi.AmountReceived)
		require.Zero(t, receipts(t, svc), "the receipt goes out on capture, not on authorization")

		got := getPaymentOf(t, svc, bundle.apiKey, p.ID)
		require.Equal(t, "requires_capture", got["status"])
		require.Equal(t, "manual", got["capture_method"])
		require.EqualValues(t, 0, got["amount_captured"])

		prob := requireProblem(t, postRefund(t, svc, bundle.apiKey, "refund", p.ID, `{}`), http.StatusBadRequest, "payment-not-refundable")
		require.Equal(t, p.ID, prob.PaymentID)
		require.Empty(t, svc.Stripe.Refunds())
	})

	t.Run("AutomaticIsCapturedWhole", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)

		p := paid(t, svc, bundle.apiKey, "pay")
		require.Equal(t, "succeeded", p.Status)
		require.Equal(t, "automatic", p.CaptureMethod)
		require.EqualValues(t, 2000, p.AmountCaptured)

		// "automatic", sent or not, is one request: the key made without it
		// replays (a key made before manual capture existed, too).
		replay := svc.PostPayment(t, bundle.apiKey, "pay",
			`{"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa", "description": "order 1", "capture_method": "automatic"}`)
		require.Equal(t, http.StatusCreated, replay.Status, "body: %s", replay.Body)
		require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "pay",
			`{"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa", "description": "order 1", "capture_method": "manual"}`),
			http.StatusUnprocessableEntity, "idempotency-key-reused")
		require.Len(t, svc.Stripe.PaymentIntents(), 1)
	})

	t.Run("UnknownCaptureMethodIsRefusedNotStored", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)

		for _, v := range []string{`"later"`, `"MANUAL"`, `1`} {
			prob := requireProblem(t, svc.PostPayment(t, bundle.apiKey, "bad",
				`{"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa", "capture_method": `+v+`}`),
				http.StatusBadRequest, "invalid-request")
			require.Equal(t, "/capture_method", prob.Errors[0].Pointer)
		}
		require.Empty(t, svc.Stripe.PaymentIntents())
		// Nothing was stored: the key is free for the corrected request.
		require.Equal(t, "requires_capture", authorized(t, svc, bundle.apiKey, "bad").Status)
	})
}

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

// TestCancels covers POST /payments/{id}/cancel.
func TestCancels(t *testing.T) {
	t.Parallel()

	setup := func(t *testing.T) (*testutil.Service, string) {
		t.Helper()
		svc := testutil.StartService(t, testutil.ServiceOptions{})
		_, apiKey := svc.NewUser(t)
		return svc, apiKey
	}

	t.Run("CancelReleasesTheAuthorization", func(t *testing.T) {
		t.Parallel()
		svc, apiKey := setup(t)
		p := authorized(t, svc, apiKey, "auth")

		resp := postCancel(t, svc, apiKey, "cancel", p.ID)
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		canceled := decode[payment](t, resp)
		require.Equal(t, "canceled", canceled.Status)
		require.Zero(t, canceled.AmountCaptured)
		require.Equal(t, stripefake.StatusCanceled, stripePI(t, svc, *p.StripePaymentIntentID).Status)
		replay := postCancel(t, svc, apiKey, "cancel", p.ID)
		require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
		require.Equal(t, string(resp.Body), string(replay.Body))

		requireProblem(t, postCancel(t, svc, apiKey, "cancel-2", p.ID), http.StatusBadRequest, "payment-not-cancelable")
		requireProblem(t, postCapture(t, svc, apiKey, "cap", p.ID, `{}`), http.StatusBadRequest, "payment-not-capturable")
		requireProblem(t, postRefund(t, svc, apiKey, "refund", p.ID, `{}`), http.StatusBadRequest, "payment-not-refundable")
		requireProblem(t, svc.Do(t, http.MethodPost, "/payments/"+p.ID+"/cancel", `{"reason": "x"}`,
			"Authorization", "Bearer "+apiKey, "Idempotency-Key", "bad", "Content-Type", "application/json"),
			http.StatusBadRequest, "invalid-request")
		require.EqualValues(t, 1, svc.Stripe.Stats().CancelRequests)
		require.Zero(t, svc.Stripe.Stats().CaptureRequests)
		require.Zero(t, receipts(t, svc))
	})

	t.Run("AutomaticPaymentIsNotCancelable", func(t *testing.T) {
		t.Parallel()
		svc, apiKey := setup(t)
		p := paid(t, svc, apiKey, "pay")
		require.Equal(t, p.ID, requireProblem(t, postCancel(t, svc, apiKey, "cancel", p.ID), http.StatusBadRequest, "payment-not-cancelable").PaymentID)
		require.Zero(t, svc.Stripe.Stats().CancelRequests)
	})
}

// TestCancelFaults: a cancel whose answer was lost, or that did cancel
// behind a 500, is read back from the PaymentIntent and answers 200 at
// once; one that did not is sent again under the next key.
func TestCancelFaults(t *testing.T) {
	t.Parallel()
	for _, kind := range []stripefake.FaultKind{stripefake.FaultLostAnswer, stripefake.Fault500Charged, stripefake.Fault500} {
		t.Run(kind.String(), func(t *testing.T) {
			t.Parallel()
			svc := testutil.StartService(t, testutil.ServiceOptions{})
			_, apiKey := svc.NewUser(t)
			p := authorized(t, svc, apiKey, "auth")
			svc.Stripe.Inject(stripefake.Fault{Kind: kind, Op: stripefake.OpCancelPaymentIntent})

			resp := postCancel(t, svc, apiKey, "cancel", p.ID)
			if kind == stripefake.Fault500 {
				requireProblem(t, resp, http.StatusServiceUnavailable, "processor-unavailable")
				resp = postCancel(t, svc, apiKey, "cancel", p.ID)
			}
			require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
			require.Equal(t, "canceled", decode[payment](t, resp).Status)
			require.EqualValues(t, 1, svc.Stripe.Stats().Cancels)
			require.Equal(t, stripefake.StatusCanceled, stripePI(t, svc, *p.StripePaymentIntentID).Status)
		})
	}
}

// TestCaptureEvents covers Stripe's word on an authorization: its
// expiry, and a capture whose outcome only the event tells.
func TestCaptureEvents(t *testing.T) {
	t.Parallel()

	// Stripe cancels an authorization nobody captured within its window;
	// its payment_intent.canceled moves the payment to canceled, and a
	// capture then is refused without a call to Stripe.
	t.Run("ExpiredAuthorizationIsCanceledByTheEvent", func(t *testing.T) {
		t.Parallel()
		svc := webhookRigWith(t, testutil.ServiceOptions{}, stripefake.Options{AuthorizationWindow: time.Hour})
		_, apiKey := svc.NewUser(t)
		p := authorized(t, svc, apiKey, "auth")
		svc.Stripe.Advance(2 * time.Hour)

		testutil.WaitForf(t, 15*time.Second, 10*time.Millisecond, func() bool {
			return getPaymentOf(t, svc, apiKey, p.ID)["status"] == "canceled"
		}, "the payment was not canceled")
		requireProblem(t, postCapture(t, svc, apiKey, "cap", p.ID, `{}`), http.StatusBadRequest, "payment-not-capturable")
		require.Zero(t, svc.Stripe.Stats().CaptureRequests)
		require.Zero(t, receipts(t, svc))
		require.Equal(t, 1, countEvents(t, svc, "WHERE type = 'payment_intent.canceled' AND outcome = 'applied'"))
	})

	// The capture outlives the client's timeout; read back, the
	// PaymentIntent is still requires_capture, so the outcome is unknown
	// (503). The capture then takes at Stripe, and its
	// payment_intent.succeeded settles the key: the client's retry gets
	// the stored 200, and nothing is sent again.
	t.Run("EventSettlesAnUnknownCapture", func(t *testing.T) {
		t.Parallel()
		svc := webhookRigWith(t, testutil.ServiceOptions{Workers: quietCompleter, StripeTimeout: time.Second}, stripefake.Options{})
		_, apiKey := svc.NewUser(t)
		p := authorized(t, svc, apiKey, "auth")
		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.FaultOutliveClient, Op: stripefake.OpCapturePaymentIntent, Latency: 2 * time.Second})

		requireProblem(t, postCapture(t, svc, apiKey, "cap", p.ID, `{"amount_to_capture": 700}`), http.StatusServiceUnavailable, "processor-unavailable")
		testutil.WaitForf(t, 15*time.Second, 10*time.Millisecond, func() bool {
			var point string
			err := svc.Pool.QueryRow(context.Background(), "SELECT recovery_point FROM idempotency_keys WHERE idempotency_key = 'cap'").Scan(&point)
			return err == nil && point == "finished"
		}, "the event did not finish the key")
		requests := svc.Stripe.Stats().CaptureRequests

		retried := postCapture(t, svc, apiKey, "cap", p.ID, `{"amount_to_capture": 700}`)
		require.Equal(t, http.StatusOK, retried.Status, "body: %s", retried.Body)
		require.Equal(t, "true", retried.Header.Get("Idempotent-Replayed"))
		require.EqualValues(t, 700, decode[payment](t, retried).AmountCaptured)
		require.Equal(t, requests, svc.Stripe.Stats().CaptureRequests, "settled by the event, not sent again")
		require.EqualValues(t, 1, svc.Stripe.Stats().Captures)
		require.Equal(t, 1, receipts(t, svc))
	})

	// An authorization whose answer was lost, never retried:
	// payment_intent.amount_capturable_updated settles its key as
	// authorized, with no receipt.
	t.Run("EventSettlesAnUnknownAuthorization", func(t *testing.T) {
		t.Parallel()
		svc := webhookRigWith(t, testutil.ServiceOptions{Workers: quietCompleter}, stripefake.Options{})
		_, apiKey := svc.NewUser(t)
		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.FaultLostAnswer, Op: stripefake.OpCreatePaymentIntent})
		requireProblem(t, svc.PostPayment(t, apiKey, "auth", manualVisa), http.StatusServiceUnavailable, "processor-unavailable")

		testutil.WaitForf(t, 15*time.Second, 10*time.Millisecond, func() bool {
			var point string
			err := svc.Pool.QueryRow(context.Background(), "SELECT recovery_point FROM idempotency_keys WHERE idempotency_key = 'auth'").Scan(&point)
			return err == nil && point == "finished"
		}, "the event did not finish the key")
		retried := svc.PostPayment(t, apiKey, "auth", manualVisa)
		require.Equal(t, http.StatusCreated, retried.Status, "body: %s", retried.Body)
		require.Equal(t, "true", retried.Header.Get("Idempotent-Replayed"))
		require.Equal(t, "requires_capture", decode[payment](t, retried).Status)
		require.Zero(t, receipts(t, svc))
		require.EqualValues(t, 1, svc.Stripe.Stats().CreateRequests)
	})

	// An event older than the payment's state (an authorization's
	// amount_capturable_updated, or its canceled, delivered after the
	// capture was recorded) changes nothing.
	t.Run("OlderEventsNeverOverwrite", func(t *testing.T) {
		t.Parallel()
		svc := testutil.StartService(t, testutil.ServiceOptions{WebhookSecret: whsec})
		_, apiKey := svc.NewUser(t)
		p := authorized(t, svc, apiKey, "auth")
		authorization := stripeObject(t, svc, "/v1/payment_intents/"+*p.StripePaymentIntentID)
		require.Equal(t, http.StatusOK, postCapture(t, svc, apiKey, "cap", p.ID, `{}`).Status)

		_, payload := event("payment_intent.amount_capturable_updated", authorization, time.Now().Add(-time.Minute))
		require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)
		canceled := strings.Replace(authorization, `"status":"requires_capture"`, `"status":"canceled"`, 1)
		require.NotEqual(t, authorization, canceled)
		_, payload = event("payment_intent.canceled", canceled, time.Now().Add(-time.Minute))
		require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)

		got := getPaymentOf(t, svc, apiKey, p.ID)
		require.Equal(t, "succeeded", got["status"])
		require.EqualValues(t, 2000, got["amount_captured"])
		require.Equal(t, 2, countEvents(t, svc, "WHERE outcome = 'ignored'"))
	})
}

// TestCaptureResolve covers `paymentsd keys resolve` on capture and cancel
// keys: a key parked after every Stripe key did nothing is settled by an
// operator, checked against the PaymentIntent first.
func TestCaptureResolve(t *testing.T) {
	t.Parallel()

	// park makes key's capture (or cancel) of p await an operator: every
	// Stripe key answers a 500 that did nothing, until none is left.
	park := func(t *testing.T, svc *testutil.Service, apiKey, action, key string, p payment) {
		t.Helper()
		op := stripefake.OpCapturePaymentIntent
		if action == "cancel" {
			op = stripefake.OpCancelPaymentIntent
		}
		for range stripeonce.MaxAttempts {
			svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.Fault500, Op: op})
		}
		send := func() *testutil.Response {
			if action == "cancel" {
				return postCancel(t, svc, apiKey, key, p.ID)
			}
			return postCapture(t, svc, apiKey, key, p.ID, `{}`)
		}
		for range stripeonce.MaxAttempts {
			requireProblem(t, send(), http.StatusServiceUnavailable, "processor-unavailable")
		}
		requireProblem(t, send(), http.StatusServiceUnavailable, "needs-attention")
		require.Zero(t, svc.Stripe.PendingFaults())
	}

	setup := func(t *testing.T) (*testutil.Service, string) {
		t.Helper()
		svc := testutil.StartService(t, testutil.ServiceOptions{Workers: quietCompleter})
		_, apiKey := svc.NewUser(t)
		return svc, apiKey
	}

	t.Run("NotChargedReleasesTheAuthorization", func(t *testing.T) {
		t.Parallel()
		svc, apiKey := setup(t)
		p := authorized(t, svc, apiKey, "auth")
		park(t, svc, apiKey, "capture", "cap", p)

		_, err := svc.App.Resolve(context.Background(), keyID(t, svc, "cap"), *p.StripePaymentIntentID)
		require.ErrorIs(t, err, payments.ErrResolutionRefused, "the PaymentIntent was not captured")
		settled, err := svc.App.Resolve(context.Background(), keyID(t, svc, "cap"), "")
		require.NoError(t, err)
		require.Equal(t, http.StatusBadRequest, settled.Status)
		requireProblem(t, postCapture(t, svc, apiKey, "cap", p.ID, `{}`), http.StatusBadRequest, "payment-not-capturable")

		// The claim is released: another key captures.
		resp := postCapture(t, svc, apiKey, "cap-2", p.ID, `{}`)
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		require.EqualValues(t, 1, svc.Stripe.Stats().Captures)
	})

	t.Run("ChargedRecordsTheCapture", func(t *testing.T) {
		t.Parallel()
		svc, apiKey := setup(t)
		p := authorized(t, svc, apiKey, "auth")
		other := authorized(t, svc, apiKey, "auth-2")
		park(t, svc, apiKey, "capture", "cap", p)
		// Captured by hand, in the Dashboard say.
		_, err := stripeClient(&testutil.Emulator{Server: svc.Stripe, URL: svc.StripeURL}).PaymentIntents.Capture(*p.StripePaymentIntentID,
			&stripe.PaymentIntentCaptureParams{AmountToCapture: stripe.Int64(1800)})
		require.NoError(t, err)

		_, err = svc.App.Resolve(context.Background(), keyID(t, svc, "cap"), "")
		require.ErrorIs(t, err, payments.ErrResolutionRefused, "it was captured")
		_, err = svc.App.Resolve(context.Background(), keyID(t, svc, "cap"), *other.StripePaymentIntentID)
		require.ErrorIs(t, err, payments.ErrResolutionRefused, "not this payment's PaymentIntent")
		settled, err := svc.App.Resolve(context.Background(), keyID(t, svc, "cap"), *p.StripePaymentIntentID)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, settled.Status)

		replay := postCapture(t, svc, apiKey, "cap", p.ID, `{}`)
		require.Equal(t, http.StatusOK, replay.Status, "body: %s", replay.Body)
		require.EqualValues(t, 1800, decode[payment](t, replay).AmountCaptured)
		require.Equal(t, 1, receipts(t, svc))
	})

	t.Run("CancelKeyNotChargedAfterStripeCanceled", func(t *testing.T) {
		t.Parallel()
		svc, apiKey := setup(t)
		p := authorized(t, svc, apiKey, "auth")
		park(t, svc, apiKey, "cancel", "cancel", p)
		_, err := stripeClient(&testutil.Emulator{Server: svc.Stripe, URL: svc.StripeURL}).PaymentIntents.Cancel(*p.StripePaymentIntentID, nil)
		require.NoError(t, err)

		settled, err := svc.App.Resolve(context.Background(), keyID(t, svc, "cancel"), "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, settled.Status)
		replay := postCancel(t, svc, apiKey, "cancel", p.ID)
		require.Equal(t, "canceled", decode[payment](t, replay).Status)
	})
}
