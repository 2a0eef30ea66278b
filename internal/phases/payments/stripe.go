package payments

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/stripe/stripe-go/v79"
	"github.com/stripe/stripe-go/v79/client"
)

// StripeIdempotencyWindow is how long Stripe keeps an idempotency key. A
// resume later than this could create a second PaymentIntent under the same
// key, so past it the flow only looks the PaymentIntent up.
const StripeIdempotencyWindow = 24 * time.Hour

// maxAttempts bounds the Stripe idempotency keys one payment may use. Each
// new one is taken only after the previous one was proven to hold a cached
// server error and a lookup found no PaymentIntent.
const maxAttempts = 5

// StripeConfig configures the Stripe client.
type StripeConfig struct {
	SecretKey string
	// APIBase overrides Stripe's URL (the emulator, stripe-mock).
	APIBase string
	// Timeout bounds every Stripe call.
	Timeout time.Duration
	// ObserveLookup, when set, is told the result of every lookup by
	// metadata: adopted, not_found or expired_not_found.
	ObserveLookup func(result string)
}

// Charger charges payments through stripe-go.
type Charger struct {
	api     *client.API
	timeout time.Duration
	observe func(result string)
}

// NewCharger returns a Charger. stripe-go's own retries are off: the phase
// engine retries with the same idempotency key, on its own schedule.
func NewCharger(cfg StripeConfig) *Charger {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	backendCfg := &stripe.BackendConfig{
		MaxNetworkRetries: stripe.Int64(0),
		HTTPClient:        &http.Client{Timeout: cfg.Timeout},
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	}
	if cfg.APIBase != "" {
		backendCfg.URL = stripe.String(cfg.APIBase)
	}
	backend := stripe.GetBackendWithConfig(stripe.APIBackend, backendCfg)
	if cfg.ObserveLookup == nil {
		cfg.ObserveLookup = func(string) {}
	}
	return &Charger{
		api:     client.New(cfg.SecretKey, &stripe.Backends{API: backend, Connect: backend, Uploads: backend}),
		timeout: cfg.Timeout,
		observe: cfg.ObserveLookup,
	}
}

// Charge is the definite outcome of charging a payment.
type Charge struct {
	PaymentIntentID string
	// Succeeded is true when the money moved.
	Succeeded bool
	// Declined is true for a card_error: the card was refused.
	Declined bool
	// Code and Message explain a refusal: Stripe's decline or error code
	// and its message.
	Code    string
	Message string
}

// Charge creates and confirms a PaymentIntent for the payment, or adopts the
// one an earlier attempt created. An error means the outcome is unknown.
//
// Stripe idempotency keys are derived from the payment id and an attempt
// number, so a resumed run re-sends the key the lost run sent. Stripe saves
// a 500 under its key, so a key that answers with a replayed server error is
// spent: the PaymentIntent is looked up by our metadata, adopted when found,
// and only otherwise is the next attempt's key used.
func (c *Charger) Charge(ctx context.Context, p *PaymentRef, age time.Duration) (*Charge, error) {
	if age > StripeIdempotencyWindow {
		return c.reconcile(ctx, p)
	}
	searched := false
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		pi, err := c.create(ctx, p, attempt)
		if err == nil {
			return outcomeOf(pi), nil
		}
		if charge, ok := definite(err); ok {
			return charge, nil
		}
		if !replayedServerError(err) {
			return nil, err
		}
		if !searched {
			searched = true
			pi, err := c.find(ctx, p.ID)
			if err != nil {
				return nil, err
			}
			if pi != nil {
				c.observe("adopted")
				return outcomeOf(pi), nil
			}
			c.observe("not_found")
		}
	}
	return nil, fmt.Errorf("every Stripe idempotency key of payment %d holds a server error", p.ID)
}

// reconcile decides a payment past Stripe's idempotency window by lookup
// alone: never by creating a PaymentIntent that could be a second charge.
func (c *Charger) reconcile(ctx context.Context, p *PaymentRef) (*Charge, error) {
	pi, err := c.find(ctx, p.ID)
	switch {
	case err != nil:
		return nil, err
	case pi == nil:
		c.observe("expired_not_found")
		return &Charge{Code: "not_attempted", Message: "no PaymentIntent was created within Stripe's idempotency window"}, nil
	}
	c.observe("adopted")
	return outcomeOf(pi), nil
}

// PaymentRef is what the charge needs to know of a payment.
type PaymentRef struct {
	ID            int64
	UserID        int64
	Amount        int64
	Currency      string
	PaymentMethod string
	Description   *string
}

func (c *Charger) create(ctx context.Context, p *PaymentRef, attempt int) (*stripe.PaymentIntent, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	params := &stripe.PaymentIntentParams{
		Amount:                stripe.Int64(p.Amount),
		Currency:              stripe.String(p.Currency),
		PaymentMethod:         stripe.String(p.PaymentMethod),
		PaymentMethodTypes:    stripe.StringSlice([]string{"card"}),
		Confirm:               stripe.Bool(true),
		ErrorOnRequiresAction: stripe.Bool(true),
		Description:           p.Description,
	}
	params.Context = ctx
	params.AddMetadata("payment_id", strconv.FormatInt(p.ID, 10))
	params.AddMetadata("user_id", strconv.FormatInt(p.UserID, 10))
	params.SetIdempotencyKey(stripeIdempotencyKey(p.ID, attempt))
	return c.api.PaymentIntents.New(params)
}

// find looks the payment's PaymentIntent up by our metadata. Stripe's search
// index can lag writes by up to a minute; the emulator's does not.
func (c *Charger) find(ctx context.Context, paymentID int64) (*stripe.PaymentIntent, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	params := &stripe.PaymentIntentSearchParams{}
	params.Query = fmt.Sprintf("metadata['payment_id']:'%d'", paymentID)
	params.Context = ctx
	iter := c.api.PaymentIntents.Search(params)
	var found *stripe.PaymentIntent
	for iter.Next() {
		pi := iter.PaymentIntent()
		// Prefer a PaymentIntent that moved money over a declined one.
		if found == nil || pi.Status == stripe.PaymentIntentStatusSucceeded {
			found = pi
		}
	}
	if err := iter.Err(); err != nil {
		return nil, err
	}
	return found, nil
}

func stripeIdempotencyKey(paymentID int64, attempt int) string {
	return "paymentsd-payment-" + strconv.FormatInt(paymentID, 10) + "-attempt-" + strconv.Itoa(attempt)
}

// outcomeOf reads the outcome of a confirmed PaymentIntent.
func outcomeOf(pi *stripe.PaymentIntent) *Charge {
	charge := &Charge{PaymentIntentID: pi.ID, Succeeded: pi.Status == stripe.PaymentIntentStatusSucceeded}
	if !charge.Succeeded {
		charge.Declined = true
		charge.Code, charge.Message = "payment_intent_"+string(pi.Status), "the PaymentIntent did not succeed"
		if e := pi.LastPaymentError; e != nil {
			charge.Code, charge.Message = declineCode(e), e.Msg
		}
	}
	return charge
}

// definite reports whether err is a definite refusal and what it was.
func definite(err error) (*Charge, bool) {
	var serr *stripe.Error
	if !errors.As(err, &serr) {
		return nil, false
	}
	switch {
	case serr.Type == stripe.ErrorTypeCard:
		charge := &Charge{Declined: true, Code: declineCode(serr), Message: serr.Msg}
		if serr.PaymentIntent != nil {
			charge.PaymentIntentID = serr.PaymentIntent.ID
		}
		return charge, true
	case serr.Type == stripe.ErrorTypeInvalidRequest && serr.HTTPStatusCode >= 400 && serr.HTTPStatusCode < 500 &&
		serr.HTTPStatusCode != http.StatusUnauthorized && serr.HTTPStatusCode != http.StatusConflict &&
		serr.HTTPStatusCode != http.StatusTooManyRequests:
		return &Charge{Code: string(serr.Code), Message: serr.Msg}, true
	}
	return nil, false
}

func declineCode(e *stripe.Error) string {
	if e.DeclineCode != "" {
		return string(e.DeclineCode)
	}
	return string(e.Code)
}

// replayedServerError reports whether err is a server error that Stripe
// replayed from its idempotency cache: the key can never succeed again.
func replayedServerError(err error) bool {
	var serr *stripe.Error
	return errors.As(err, &serr) && serr.HTTPStatusCode >= 500 && serr.LastResponse != nil &&
		serr.LastResponse.Header.Get("Idempotent-Replayed") == "true"
}
