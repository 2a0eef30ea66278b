// Package stripeonce creates one object at Stripe exactly once per client
// intent, or proves that none was created, or hands the intent to an
// operator. It is the part of the charge path that does not know what is
// created: a PaymentIntent and a Refund follow the same rules.
//
// The rules, in the order they apply:
//   - The Stripe idempotency key is the intent's attempt-th key (package
//     intent), so a resumed run, or a retry after lost commits, re-sends
//     what the lost run sent and Stripe replays its answer.
//   - A create is sent only while Stripe's idempotency window, less how long
//     Stripe may keep executing it and the visibility margin, is open: then
//     every create ever sent is finished and visible by the time the window
//     closes, and from there on a lookup alone decides.
//   - A key whose answer is a replayed server error is spent: a 500 is
//     indeterminate, so the object is looked up: by search, which finds
//     everything older than its lag, and by a list by creation time,
//     strongly consistent, over what search may not have indexed yet (the
//     last SearchLag and a margin, in Stripe's clock as measured from its
//     answers). Nothing the database recorded bounds the lookup from
//     below: a failover or a restore may have lost the record of a send,
//     and a clock may have misdated it. A list too long to page through
//     leaves the outcome unknown until search covers the stretch. Only
//     when nothing is found, and the attempt's execution is finished
//     (Stripe replays it) and visible (the margin has passed since the key
//     was found spent), does the next key's turn come.
//   - An idempotency_error, an object of the intent that does not match
//     the request, or two of them, need an operator
//     (phases.NeedsAttention); so does an outcome still unknown after the
//     last key, or lookups that keep failing long after the window.
package stripeonce

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/internal/phases"
)

// Window is how long Stripe keeps an idempotency key.
const Window = 24 * time.Hour

// MaxAttempts bounds the Stripe keys one intent may use.
const MaxAttempts = 5

// Rules are the timing assumptions the proofs rest on. Each comment ends
// with the default.
type Rules struct {
	// ExecutionBound is the longest Stripe is assumed to keep executing a
	// request after it was sent, whether or not anyone still waits for the
	// answer. Stripe documents no figure; this one is deliberately
	// generous. Defaults to 10m.
	ExecutionBound time.Duration
	// VisibilityMargin is how long after Stripe finished a write a list is
	// trusted to show it (lists are strongly consistent; the margin covers
	// clock skew between us and Stripe too). Defaults to 1m.
	VisibilityMargin time.Duration
	// SearchLag is the longest Stripe's search is assumed to lag writes:
	// an object older than it is in the search index. Stripe documents
	// under a minute normally and up to an hour during incidents. Defaults
	// to 1h.
	SearchLag time.Duration
	// LookupLookback is a margin on SearchLag for what the measured skew
	// between our clocks and Stripe's (StripeOffset) may be off by.
	// Defaults to 10m.
	LookupLookback time.Duration
	// LookupGrace is how long past the window an intent whose lookups keep
	// failing waits before it is handed to an operator. Defaults to 24h.
	LookupGrace time.Duration
	// StripeOffset, when set, is how far Stripe's clock runs ahead of this
	// process's, as last measured from Stripe's answers. A lookup's window
	// is written in our database's times and read by Stripe's created
	// times, so it is moved by the skew between the two, measured, rather
	// than trusting LookupLookback to cover any skew at all.
	StripeOffset func() time.Duration
	// LostHistoryAt, when set, is a time no later than the database's last
	// loss of history (a promotion, a restore: see migrations 00022 and
	// 00033), or the zero time. A key made after it, up to
	// LostHistoryHorizon after the loss was seen, may be a lost key sent
	// again after Stripe forgot it: it is looked up (by search, and a list
	// over what search may not show yet) before its first Stripe key is
	// sent.
	LostHistoryAt func() time.Time
	// LostHistorySeenAt, when set, is when that loss was seen (the
	// heartbeat found a new timeline or oid), or the zero time when that
	// is not known: LostHistoryAt is then taken for it.
	LostHistorySeenAt func() time.Time
	// LostHistoryHorizon is how long after a loss was seen new keys are
	// looked up first (how late a client may send a lost key again), and
	// how far back before it a restore may have gone. Defaults to 72h.
	LostHistoryHorizon time.Duration
	// Observe, when set, is told the result of every lookup: adopted,
	// not_found, not_created or needs_attention.
	Observe func(result string)
	// ObserveTrustedSearchLag, when set, is told the result (not_found or
	// not_created) of every lookup that found nothing while search alone
	// covered part of the time since the key was made: a conclusion that
	// rests on SearchLag, which Stripe does not document (see
	// searchlag.go).
	ObserveTrustedSearchLag func(result string)
}

// WithDefaults returns r with every unset field at its default.
func (r Rules) WithDefaults() Rules {
	defaultTo := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	defaultTo(&r.ExecutionBound, 10*time.Minute)
	defaultTo(&r.VisibilityMargin, time.Minute)
	defaultTo(&r.LookupGrace, 24*time.Hour)
	defaultTo(&r.SearchLag, time.Hour)
	defaultTo(&r.LookupLookback, 10*time.Minute)
	defaultTo(&r.LostHistoryHorizon, 72*time.Hour)
	if r.LostHistoryAt == nil {
		r.LostHistoryAt = func() time.Time { return time.Time{} }
	}
	if r.LostHistorySeenAt == nil {
		r.LostHistorySeenAt = func() time.Time { return time.Time{} }
	}
	if r.Observe == nil {
		r.Observe = func(string) {}
	}
	if r.ObserveTrustedSearchLag == nil {
		r.ObserveTrustedSearchLag = func(string) {}
	}
	if r.StripeOffset == nil {
		r.StripeOffset = func() time.Duration { return 0 }
	}
	return r
}

// State is how far earlier runs got with an intent.
type State struct {
	// KeyCreatedAt is when the client's key was first stored (the
	// database's clock): Stripe's window runs from about then.
	KeyCreatedAt time.Time
	// Attempt is the Stripe key in use (1 to MaxAttempts), AttemptAt when
	// it was taken, and SpentAt, when set, when that key was found to hold
	// a cached server error.
	Attempt   int
	AttemptAt time.Time
	SpentAt   *time.Time
	// Progress records a spent attempt and the move to the next one,
	// fenced by the run's lease.
	Progress Progress
	// Now is the clock the times above were written by (the database's:
	// phases.Run.Now), so a skewed local clock cannot move a deadline. Nil
	// means time.Now.
	Now func() time.Time
}

func (st *State) now() time.Time {
	if st.Now == nil {
		return time.Now()
	}
	return st.Now()
}

// Progress persists how far an intent got across runs.
type Progress interface {
	// Spent records that attempt holds a cached server error, and returns
	// since when that is known.
	Spent(ctx context.Context, attempt int) (time.Time, error)
	// Next moves from attempt to attempt+1, and returns when.
	Next(ctx context.Context, attempt int) (time.Time, error)
}

// Op is one kind of create at Stripe.
type Op[T any] interface {
	// Send creates the object under the attempt-th key and returns the
	// definite outcome, or the error Stripe or the network gave.
	Send(ctx context.Context, attempt int) (T, error)
	// Lookup returns the intent's object, found=false when there is none:
	// it searches, and lists what was created within window, which search
	// may not cover yet (see State.Lookup). An error is an unknown outcome,
	// or a *phases.NeedsAttentionError for an object that does not match or
	// is not the only one.
	Lookup(ctx context.Context, window Span) (result T, found bool, err error)
	// NotCreated is the outcome once it is proven that nothing was created.
	NotCreated() T
	// What names the object, for messages ("PaymentIntent").
	What() string
}

// Do creates op's object once, adopts the one an earlier run created, or
// proves there is none. An error means the outcome is still unknown (a
// later run goes on); a *phases.NeedsAttentionError means no machine can
// settle it.
func Do[T any](ctx context.Context, rules Rules, st *State, op Op[T]) (T, error) {
	var zero T
	rules = rules.WithDefaults()
	if span, ok := st.lostHistorySpan(rules); ok {
		// A key this database does not know, made soon after it lost
		// history: what a lost send of it made may be older than Stripe
		// remembers any of its keys. Search sees everything older than
		// its lag, and the list everything younger: Stripe's replay of
		// key 1 cannot stand in for the list, since a lost run may have
		// charged under a later key while key 1 is forgotten.
		result, found, err := op.Lookup(ctx, span)
		if found || err != nil {
			return adopted(rules, result, err)
		}
		st.foundNothing(ctx, rules, span, span.SearchSince, "not_found")
	}
	sendCutoff := st.KeyCreatedAt.Add(Window - rules.ExecutionBound - rules.VisibilityMargin)
	for st.now().Before(sendCutoff) {
		if st.SpentAt == nil {
			result, err := op.Send(ctx, st.Attempt)
			if !spent(err) {
				return result, classify(err, st.Attempt)
			}
			at, err := st.Progress.Spent(ctx, st.Attempt)
			if err != nil {
				return zero, err
			}
			st.SpentAt = &at
		}
		// What the spent key created, if anything, was created before
		// Stripe replayed its error.
		span := st.Lookup(rules, st.SpentAt.Add(rules.VisibilityMargin))
		result, found, err := op.Lookup(ctx, span)
		if found || err != nil {
			return adopted(rules, result, err)
		}
		st.foundNothing(ctx, rules, span, st.KeyCreatedAt, "not_found")
		if visible := st.SpentAt.Add(rules.VisibilityMargin); st.now().Before(visible) {
			return zero, fmt.Errorf("stripe key %d of %d holds a server error and no %s is listed yet; "+
				"the next key may be used after %s", st.Attempt, MaxAttempts, op.What(), visible.UTC().Format(time.RFC3339))
		}
		if st.Attempt == MaxAttempts {
			rules.Observe("needs_attention")
			return zero, phases.NeedsAttention("all %d Stripe keys hold server errors and no %s exists", MaxAttempts, op.What())
		}
		at, err := st.Progress.Next(ctx, st.Attempt)
		if err != nil {
			return zero, err
		}
		st.Attempt, st.AttemptAt, st.SpentAt = st.Attempt+1, at, nil
	}
	return reconcile(ctx, rules, st, op)
}

// reconcile decides an intent near or past the end of Stripe's window by
// lookup alone: never by a create that could be a second one. Nothing found
// proves "not created" only once every create ever sent is finished and
// visible, which the send cut-off makes true at the window's end.
//
// The list need not reach past the window's end either: no run sends after
// the cut-off, so whatever the intent made was made, and is visible, by
// then, whatever the database remembers of its sends. Once search covers
// the window's end (SearchLag and LookupLookback later), the list has
// nothing left to cover and search alone decides: an account too busy to
// page the list through settles then, not after LookupGrace.
func reconcile[T any](ctx context.Context, rules Rules, st *State, op Op[T]) (T, error) {
	var zero T
	windowEnd := st.KeyCreatedAt.Add(Window)
	until := st.now().Add(rules.VisibilityMargin)
	if until.After(windowEnd) {
		until = windowEnd
	}
	span := st.Lookup(rules, until)
	result, found, err := op.Lookup(ctx, span)
	switch {
	case err != nil && st.now().After(windowEnd.Add(rules.LookupGrace)):
		var attention *phases.NeedsAttentionError
		if !errors.As(err, &attention) {
			err = phases.NeedsAttention("lookups past Stripe's idempotency window keep failing: %v", err)
		}
		return adopted(rules, zero, err)
	case found || err != nil:
		return adopted(rules, result, err)
	case st.now().Before(windowEnd):
		return zero, fmt.Errorf("no %s listed yet; one sent near the window's end may still be executing until %s",
			op.What(), windowEnd.UTC().Format(time.RFC3339))
	}
	st.foundNothing(ctx, rules, span, st.KeyCreatedAt, "not_created")
	return op.NotCreated(), nil
}

// adopted reports a lookup's outcome.
func adopted[T any](rules Rules, result T, err error) (T, error) {
	var attention *phases.NeedsAttentionError
	switch {
	case errors.As(err, &attention):
		rules.Observe("needs_attention")
	case err == nil:
		rules.Observe("adopted")
	}
	return result, err
}

// spent reports a server error that Stripe replayed from its idempotency
// cache: the key can never succeed again.
func spent(err error) bool {
	var serr *stripe.Error
	return errors.As(err, &serr) && serr.HTTPStatusCode >= 500 && serr.LastResponse != nil &&
		serr.LastResponse.Header.Get("Idempotent-Replayed") == "true"
}

// classify turns what Send returned into Do's answer: an idempotency_error
// needs an operator (the key was first used with other parameters, so it
// can never succeed, and what it made, if anything, is not this request);
// every other error is an unknown outcome.
func classify(err error, attempt int) error {
	var serr *stripe.Error
	if errors.As(err, &serr) && serr.Type == stripe.ErrorTypeIdempotency && serr.HTTPStatusCode == http.StatusBadRequest {
		return phases.NeedsAttention("Stripe refused key %d: idempotency_error (%s)", attempt, serr.Msg)
	}
	return err
}
