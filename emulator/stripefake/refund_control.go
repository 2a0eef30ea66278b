package stripefake

import (
	"errors"
	"fmt"
	"slices"
)

// Errors of the refund controls.
var (
	// ErrNoSuchPaymentIntent: SetRefundOutcome was given an unknown id.
	ErrNoSuchPaymentIntent = errors.New("stripefake: no such PaymentIntent")
	// ErrNoSuchRefund: SetRefundStatus was given an unknown id.
	ErrNoSuchRefund = errors.New("stripefake: no such refund")
)

// RefundOutcome decides how the refunds of one PaymentIntent turn out. The
// zero value is the default: the payment method's behaviour, which for
// every test card but two is to succeed at once.
//
// Stripe's own refund test cards do the same without any control:
// pm_card_pendingRefund makes refunds start pending (RefundPending), and
// pm_card_refundFail makes them fail after answering succeeded
// (RefundFailed with expired_or_canceled_card).
type RefundOutcome struct {
	// Status is how new refunds start:
	//   - "" or RefundSucceeded: succeeded at once;
	//   - RefundPending: pending, their amount reserved, until
	//     SetRefundStatus (or POST /_fake/refunds/{id}/status) moves them;
	//   - RefundFailed: like pm_card_refundFail, the create answer (and its
	//     idempotent replays) says succeeded, but the refund is failed from
	//     the next read on, and its amount is refundable again.
	Status string `json:"status"`
	// FailureReason is recorded by RefundFailed; empty means
	// expired_or_canceled_card. One of the reasons Stripe documents.
	FailureReason string `json:"failure_reason,omitempty"`
}

// validate checks o's status and failure reason.
func (o RefundOutcome) validate() error {
	switch o.Status {
	case "", RefundSucceeded, RefundPending, RefundFailed:
	default:
		return fmt.Errorf("stripefake: invalid refund outcome status %q (want succeeded, pending or failed)", o.Status)
	}
	if o.FailureReason != "" && o.Status != RefundFailed {
		return errors.New("stripefake: a failure_reason needs the status failed")
	}
	return validFailureReason(o.FailureReason)
}

// validFailureReason checks a failure reason; empty is allowed (default).
func validFailureReason(reason string) error {
	if reason == "" || slices.Contains(refundFailureReasons, reason) {
		return nil
	}
	return fmt.Errorf("stripefake: invalid refund failure_reason %q (want one of %v)", reason, refundFailureReasons)
}

// SetRefundOutcome decides how refunds of the PaymentIntent created from now
// on turn out, overriding its payment method's behaviour; the zero
// RefundOutcome restores that behaviour. Refunds already created are not
// touched (see SetRefundStatus). It returns ErrNoSuchPaymentIntent for an
// unknown id.
func (s *Server) SetRefundOutcome(paymentIntentID string, o RefundOutcome) error {
	if err := o.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byID[paymentIntentID]; !ok {
		return fmt.Errorf("%w: %q", ErrNoSuchPaymentIntent, paymentIntentID)
	}
	if o == (RefundOutcome{}) {
		delete(s.outcomes, paymentIntentID)
	} else {
		s.outcomes[paymentIntentID] = o
	}
	return nil
}

// refundOutcome is how a new refund of pi turns out. The caller holds s.mu.
func (s *Server) refundOutcome(pi *PaymentIntent) RefundOutcome {
	if o, ok := s.outcomes[pi.ID]; ok {
		return o
	}
	return RefundOutcome{Status: testCards[pi.PaymentMethod].refunds}
}

// SetRefundStatus moves a refund on, as the card network eventually does:
// a pending refund to RefundSucceeded or RefundFailed, a succeeded one to
// RefundFailed (Stripe documents that succeeded refunds can still fail).
// A failed refund gives its amount back to what remains refundable on its
// PaymentIntent and records failureReason (empty: expired_or_canceled_card);
// failureReason is only allowed with RefundFailed. Moving a refund to the
// status it has is a no-op. It returns the refund as it now is, or
// ErrNoSuchRefund, or an error for a transition Stripe does not make (out of
// failed, back to pending).
func (s *Server) SetRefundStatus(refundID, status, failureReason string) (Refund, error) {
	switch {
	case status != RefundSucceeded && status != RefundFailed:
		return Refund{}, fmt.Errorf("stripefake: a refund can only be moved to succeeded or failed, not %q", status)
	case failureReason != "" && status != RefundFailed:
		return Refund{}, errors.New("stripefake: a failure_reason needs the status failed")
	}
	if err := validFailureReason(failureReason); err != nil {
		return Refund{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.refundByID[refundID]
	if !ok {
		return Refund{}, fmt.Errorf("%w: %q", ErrNoSuchRefund, refundID)
	}
	rf := &s.refunds[i]
	switch {
	case rf.Status == status:
	case rf.Status == RefundFailed:
		return rf.snapshot(), fmt.Errorf("stripefake: refund %s has failed; it cannot become %s", refundID, status)
	case status == RefundFailed:
		s.failRefund(i, failureReason)
		s.stats.RefundStatusChanges++
	default: // pending -> succeeded; the amount stays reserved
		before := rf.wire()
		rf.Status = status
		s.stats.RefundStatusChanges++
		s.emitRefundUpdatedLocked(i, before)
	}
	return rf.snapshot(), nil
}
