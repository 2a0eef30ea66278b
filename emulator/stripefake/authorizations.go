package stripefake

import (
	"slices"
	"time"
)

// Authorizations. A PaymentIntent confirmed with capture_method=manual is
// only authorized (StatusRequiresCapture): the card holds the amount until
// it is captured or canceled. Stripe cancels an authorization nobody
// captured a set number of days after the PaymentIntent's creation (7 by
// default, the card networks' window for online payments), with
// cancellation_reason "automatic", releasing the funds and sending
// payment_intent.canceled. The emulator does the same after
// Options.AuthorizationWindow, by the server's clock (see clock.go):
//
//   - Advance past the window cancels every authorization it covers at
//     once; Backdate moves a PaymentIntent's deadline with its creation.
//   - Otherwise the cancel happens when the window ends in real time (a
//     timer), and in any case before any request or any call that could
//     see the PaymentIntent (retrieve, capture, list, PaymentIntents,
//     Events, ...), so nobody ever sees an authorization past its window.
//
// Its canceled_at is the end of the window, as Stripe would have stamped
// it, however late the emulator noticed.

// defaultAuthorizationWindow is Stripe's: uncaptured PaymentIntents are
// canceled 7 days after their creation.
const defaultAuthorizationWindow = 7 * 24 * time.Hour

// minExpiryWake bounds how often the expiry timer wakes: with a clock that
// does not move (Options.Now), it would otherwise spin near a deadline.
const minExpiryWake = 10 * time.Millisecond

// deadlineLocked is when the authorization of the PaymentIntent at index
// idx is canceled. The caller holds s.mu.
func (s *Server) deadlineLocked(idx int) time.Time {
	return s.intents[idx].createdAt.Add(s.authWindow)
}

// holdLocked records that the PaymentIntent id is now requires_capture, so
// that it is canceled at the end of its window. The caller holds s.mu.
func (s *Server) holdLocked(id string) {
	s.held[id] = struct{}{}
	s.stats.Authorizations++
	if d := s.deadlineLocked(s.byID[id]); s.nextExpiry.Load() == 0 || d.UnixNano() < s.nextExpiry.Load() {
		s.armExpiryLocked(d)
	}
}

// releaseLocked forgets the authorization of the PaymentIntent id, captured
// or canceled. The caller holds s.mu.
func (s *Server) releaseLocked(id string) {
	if _, ok := s.held[id]; !ok {
		return
	}
	delete(s.held, id)
	if s.deadlineLocked(s.byID[id]).UnixNano() <= s.nextExpiry.Load() {
		s.scheduleExpiryLocked()
	}
}

// scheduleExpiryLocked finds the earliest deadline of the authorizations
// held and arms the timer for it. The caller holds s.mu.
func (s *Server) scheduleExpiryLocked() {
	var next time.Time
	for id := range s.held {
		if d := s.deadlineLocked(s.byID[id]); next.IsZero() || d.Before(next) {
			next = d
		}
	}
	s.armExpiryLocked(next)
}

// armExpiryLocked makes next (zero: none) the earliest deadline and sets
// the timer to wake then. The caller holds s.mu.
func (s *Server) armExpiryLocked(next time.Time) {
	if next.IsZero() {
		s.nextExpiry.Store(0)
		if s.expiryTimer != nil {
			s.expiryTimer.Stop()
		}
		return
	}
	s.nextExpiry.Store(next.UnixNano())
	if s.expiryStopped {
		return
	}
	wait := max(next.Sub(s.now()), minExpiryWake)
	if s.expiryTimer == nil {
		s.expiryTimer = time.AfterFunc(wait, s.expireByTimer)
		return
	}
	s.expiryTimer.Reset(wait)
}

// expireByTimer is the timer's work: cancel what is due, wake again for
// the next deadline.
func (s *Server) expireByTimer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.expiryStopped {
		return
	}
	s.expireDueLocked()
	if next := s.nextExpiry.Load(); next != 0 {
		// Woken before the deadline by the server's clock (Options.Now
		// moves at its own pace): wait again.
		s.armExpiryLocked(time.Unix(0, next))
	}
}

// expireDue cancels every authorization whose window has ended. It takes
// the lock only when one may have: it is called before every request.
func (s *Server) expireDue() {
	next := s.nextExpiry.Load()
	if next == 0 || s.now().UnixNano() < next {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireDueLocked()
}

// expireDueLocked cancels every authorization whose window has ended, in
// creation order, as Stripe does: status canceled, cancellation_reason
// automatic, canceled_at the end of the window, nothing capturable any
// more, and payment_intent.canceled (with no request). The caller holds
// s.mu.
func (s *Server) expireDueLocked() {
	next := s.nextExpiry.Load()
	if next == 0 {
		return
	}
	now := s.now()
	if now.UnixNano() < next {
		return
	}
	var due []int
	for id := range s.held {
		if idx := s.byID[id]; !now.Before(s.deadlineLocked(idx)) {
			due = append(due, idx)
		}
	}
	slices.Sort(due)
	for _, idx := range due {
		pi := &s.intents[idx].PaymentIntent
		deadline := s.deadlineLocked(idx)
		pi.Status = StatusCanceled
		pi.AmountCapturable = 0
		pi.CanceledAt = time.Unix(deadline.Unix(), 0).UTC()
		pi.CancellationReason = "automatic"
		delete(s.held, pi.ID)
		s.stats.AuthorizationsExpired++
		s.log.Info().Str("payment_intent", pi.ID).Time("deadline", deadline).
			Msg("stripefake: authorization not captured in time; canceled")
		s.emitLocked("payment_intent.canceled", pi.ID, pi.wire(), eventRequest{})
	}
	s.scheduleExpiryLocked()
}

// stopExpiryTimer stops the timer for good (Close): authorizations then
// expire only when a request or a call comes.
func (s *Server) stopExpiryTimer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expiryStopped = true
	if s.expiryTimer != nil {
		s.expiryTimer.Stop()
	}
}
