package stripefake

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// The server's clock is Options.Now (time.Now by default) plus what Advance
// added. It stamps every creation time, event and saved idempotent result,
// and search lag, idempotency expiry and the authorization window of manual
// capture are measured by it, so a test can make "five minutes later" (or
// "eight days later") without sleeping:
//
//   - Advance moves the whole clock on: everything already made is that
//     much older (past the search lag, nearer its idempotency expiry, an
//     authorization past its window canceled), and what is made from then
//     on is stamped that much later.
//   - Backdate moves one PaymentIntent's creation earlier: its created (so
//     list's created filters and order), its search lag, the end of its
//     authorization window, and its charge's created. Its events and
//     refunds keep their times.

// now is the server's clock. The callers that order objects by it read it
// with s.mu held.
func (s *Server) now() time.Time {
	return s.base().Add(time.Duration(s.skew.Load()))
}

// Now returns the server's clock: Options.Now (or time.Now) plus everything
// Advance added.
func (s *Server) Now() time.Time { return s.now() }

// Advance moves the server's clock d on, so that objects already made are d
// older by it: a search lag runs out, idempotency keys come nearer their
// expiry, authorizations whose window (Options.AuthorizationWindow) ends
// within d are canceled, and objects made from now on are stamped d later.
// It never moves the clock back (that would make creation order contradict
// creation times): a negative d panics.
func (s *Server) Advance(d time.Duration) {
	if d < 0 {
		panic(fmt.Sprintf("stripefake: Advance(%v): the clock only moves on", d))
	}
	// Under the lock, so that no creation reads the clock half-way.
	s.mu.Lock()
	defer s.mu.Unlock()
	s.skew.Add(int64(d))
	// Authorizations whose window the jump covers are canceled now, and
	// the timer waits for the next deadline by the moved clock.
	s.expireDueLocked()
	s.scheduleExpiryLocked()
}

// Backdate moves the creation of a PaymentIntent d earlier, as if it had
// been created d before it was: its created (and its charge's) is d
// earlier, so list's created filters and newest-first order place it
// there, its search lag is measured from the earlier time, and an
// authorization it holds ends d earlier (and is canceled at once if that is
// past). Its events and its refunds keep their own times. A search page
// token issued before a Backdate may skip or repeat results on its later
// pages. It returns the PaymentIntent as it now is, ErrNoSuchPaymentIntent
// for an unknown id, or an error for a negative d.
func (s *Server) Backdate(paymentIntentID string, d time.Duration) (PaymentIntent, error) {
	if d < 0 {
		return PaymentIntent{}, errors.New("stripefake: Backdate needs a duration not below zero")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	idx, ok := s.byID[paymentIntentID]
	if !ok {
		return PaymentIntent{}, fmt.Errorf("%w: %q", ErrNoSuchPaymentIntent, paymentIntentID)
	}
	rec := &s.intents[idx]
	rec.createdAt = rec.createdAt.Add(-d)
	rec.Created = time.Unix(rec.createdAt.Unix(), 0).UTC()
	s.sortIntentsLocked()
	// Its authorization, if it holds one, ends earlier too.
	s.scheduleExpiryLocked()
	s.expireDueLocked()
	return s.intents[s.byID[paymentIntentID]].snapshot(), nil
}

// sortIntentsLocked restores the order of s.intents by creation time (stable,
// so that ties keep the order they were made in) after a Backdate, and every
// index into it: byID, byCharge and the refunds' intent. The caller holds
// s.mu.
func (s *Server) sortIntentsLocked() {
	order := make([]int, len(s.intents)) // new position -> old position
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return s.intents[a].createdAt.Compare(s.intents[b].createdAt)
	})
	moved := make([]int, len(order)) // old position -> new position
	sorted := make([]storedIntent, len(order))
	for to, from := range order {
		moved[from] = to
		sorted[to] = s.intents[from]
	}
	s.intents = sorted
	for id, i := range s.byID {
		s.byID[id] = moved[i]
	}
	for ch, i := range s.byCharge {
		s.byCharge[ch] = moved[i]
	}
	for i := range s.refunds {
		s.refunds[i].intent = moved[s.refunds[i].intent]
	}
}
