package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// Manual payments (-manual): a share of the payments is only authorized
// (capture_method manual), and its client then settles the authorization
// the way shops do, under keys of their own (POST /payments/{id}/capture
// and /cancel), with the same retries, give-ups and faults as every other
// key: the emulator's chaos takes captures and cancels too.

// Action is what an intent does to an authorized payment.
type Action string

const (
	ActionCapture Action = "capture"
	ActionCancel  Action = "cancel"
)

// The refusals a capture or a cancel is answered with, stored as a decline
// is: definite answers.
const (
	slugNotCapturable     = "payment-not-capturable"
	slugNotCancelable     = "payment-not-cancelable"
	slugExceedsCapture    = "capture-exceeds-authorization"
	statusRequiresCapture = "requires_capture"
	statusCanceled        = "canceled"
)

// actionRefusal reports whether slug is a stored refusal of a capture or cancel.
func actionRefusal(slug string) bool {
	return slug == slugNotCapturable || slug == slugNotCancelable || slug == slugExceedsCapture
}

// settle is what the client of an authorized payment does with it, by one
// draw: capture it whole (35%), capture half of it (20%), first ask for
// more than it holds and then capture it whole (5%), cancel it (15%),
// capture and cancel it at once under two keys, as two of the shop's
// systems might (15%), or leave it for Stripe to cancel when the
// authorization window closes (10%). It returns what was captured, as the
// client was told: 0 when nothing was, or the client never learned it.
func (c *Clients) settle(ctx context.Context, rng *rand.Rand, paid *Intent) int64 {
	var payment struct {
		ID     string `json:"id"`
		Amount int64  `json:"amount"`
	}
	if json.Unmarshal(paid.Response, &payment) != nil || payment.ID == "" {
		return 0
	}
	n := 0
	act := func(a Action, body map[string]any) *Intent {
		n++
		in := &Intent{Client: paid.Client, User: paid.User, Key: fmt.Sprintf("%s-%s-%d", paid.Key, a, n),
			Action: a, PaymentID: payment.ID, Parent: paid, GiveUpAfter: paid.GiveUpAfter, Started: time.Now()}
		if amount, ok := body["amount_to_capture"].(int64); ok {
			in.Amount = amount
		}
		in.Body, _ = json.Marshal(body)
		c.Ledger.Add(in)
		return in
	}
	switch u := rng.Float64(); {
	case u < 0.35:
		return c.capture(ctx, rng, act(ActionCapture, map[string]any{}))
	case u < 0.55:
		return c.capture(ctx, rng, act(ActionCapture, map[string]any{"amount_to_capture": max(payment.Amount/2, 1)}))
	case u < 0.60:
		over := act(ActionCapture, map[string]any{"amount_to_capture": payment.Amount + 1})
		if c.capture(ctx, rng, over); over.Status != http.StatusBadRequest {
			return 0 // not answered (checked with the keys), or answered wrongly (check 10)
		}
		return c.capture(ctx, rng, act(ActionCapture, map[string]any{}))
	case u < 0.75:
		c.drive(ctx, rng, act(ActionCancel, map[string]any{}))
		return 0
	case u < 0.90:
		capture, cancel := act(ActionCapture, map[string]any{}), act(ActionCancel, map[string]any{})
		capture.Rival, cancel.Rival = cancel, capture
		var captured int64
		var wg sync.WaitGroup
		wg.Add(2)
		captureRNG, cancelRNG := rand.New(rand.NewPCG(rng.Uint64(), 1)), rand.New(rand.NewPCG(rng.Uint64(), 2))
		go func() {
			defer wg.Done()
			captured = c.capture(ctx, captureRNG, capture)
		}()
		go func() {
			defer wg.Done()
			c.drive(ctx, cancelRNG, cancel)
		}()
		wg.Wait()
		return captured
	}
	return 0
}

// capture drives a capture and returns what it captured, as its client
// was told.
func (c *Clients) capture(ctx context.Context, rng *rand.Rand, in *Intent) int64 {
	c.drive(ctx, rng, in)
	if in.Status != http.StatusOK {
		return 0
	}
	var payment struct {
		Status         string `json:"status"`
		AmountCaptured int64  `json:"amount_captured"`
	}
	if json.Unmarshal(in.Response, &payment) != nil || payment.Status != "succeeded" {
		return 0 // check 10 says what is wrong with it
	}
	return payment.AmountCaptured
}

// AwaitAuthorizationsEnded waits, within bound, until the emulator holds no
// authorization: each one captured, canceled, or canceled by Stripe when
// its window closed. Once the clients stopped nothing makes a new one, so
// the wait is at most the window; a window that outlasts the bound (Stripe's
// seven days) ends no authorization during the run's last moments either,
// and is not waited for. The harness waits so before it settles the
// webhooks: an authorization that Stripe cancels after the last delivery,
// between the webhooks' settling and the snapshot, would leave the snapshot
// with a canceled PaymentIntent whose payment_intent.canceled event is not
// delivered yet, a payment still requires_capture beside it, and a
// violation that is the harness's own. Reading the PaymentIntents is what
// makes the emulator cancel whatever is due.
func AwaitAuthorizationsEnded(ctx context.Context, emu *Emulator, window, bound time.Duration, ev *Events) error {
	start := time.Now()
	for {
		pis, err := emu.PaymentIntents(ctx)
		if err != nil {
			return err
		}
		held, last := 0, start
		for _, pi := range pis {
			if pi.Status != statusRequiresCapture {
				continue
			}
			held++
			// Created is in whole seconds.
			if end := pi.Created.Add(window + time.Second); end.After(last) {
				last = end
			}
		}
		if held == 0 || last.Sub(start) > bound || time.Since(start) > bound {
			ev.Logf(EventPhase, "authorizations: %d still held after %s", held, time.Since(start).Round(time.Millisecond))
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
