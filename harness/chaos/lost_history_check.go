package chaos

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/intent"
)

// How a lost key ended, as the report counts it.
const (
	LostReadopted   = "re-adopted"   // answered again with the object Stripe made before the loss
	LostNotCharged  = "not charged"  // answered 402 again (a refund: refused), nothing at Stripe
	LostFirstCharge = "charged anew" // nothing at Stripe before the loss; its first charge or refund came after
	LostParked      = "parked"       // handed to an operator (a refund: with its payment), never charged again
	LostRefusal     = "refusal kept" // a refund's refusal, final for its client, not sent again
	LostViolation   = "violation"    // check 10 failed for it
)

// oldLookback is how far before a retry's attempt the charge lookup listed
// before commit 70e3608 (stripeonce's LookupLookback), plus the second of
// Stripe's whole-second created times: a PaymentIntent older than that at
// the retry was outside that list.
const oldLookback = 2*time.Minute + time.Second

// LostSummary is what became of the lost-history faults.
type LostSummary struct {
	Faults, Payments, Refunds, Spent int
	// Ended counts the lost keys (payment and refund keys) by how they
	// ended.
	Ended map[string]int
	// ReceiptsAgain counts lost payments whose receipt had gone out and
	// went out again for the payment made anew.
	ReceiptsAgain int
	// Hidden counts the re-adopted PaymentIntents older than the old
	// two-minute lookback when their key came back, MinAge the youngest
	// such age.
	Hidden int
	MinAge time.Duration
}

// checkLostHistory is check 10: every key whose history was lost was sent
// again and answered as it was before the loss (the same status, the same
// PaymentIntent or Refund), and Stripe still holds at most one object for
// its intent; a refusal not sent again refunded nothing. Money is also
// judged by checks 3 and 6 over the whole run.
func checkLostHistory(faults []*LostHistory, snap *Snapshot) (*Check, *LostSummary) {
	c := &Check{N: 10, Name: "every lost key answered the same again, none charged twice"}
	s := &LostSummary{Ended: map[string]int{}}
	pis := map[string][]stripefake.PaymentIntent{} // succeeded, per intent
	for _, pi := range snap.Intents {
		if pi.Status == stripefake.StatusSucceeded {
			id := pi.Metadata[intent.MetadataIntent]
			pis[id] = append(pis[id], pi)
		}
	}
	refunds := map[string][]stripefake.Refund{}
	for _, r := range snap.StripeRefunds {
		id := r.Metadata[intent.MetadataIntent]
		refunds[id] = append(refunds[id], r)
	}
	for _, f := range faults {
		s.Faults++
		if f.Spent {
			s.Spent++
		}
		for _, in := range append([]*Intent{f.Victim}, f.Refunds...) {
			c.Checked++
			var how string
			if in.Refund {
				s.Refunds++
				how = judgeRefund(c, f, in, snap, refunds[snap.intentID(in)])
			} else {
				s.Payments++
				how = judgePayment(c, f, in, snap, pis[snap.intentID(in)], s)
			}
			s.Ended[how]++
		}
	}
	return c, s
}

// answeredAgain returns the key row of in once it was sent again, and how
// it ended if it needs no more judging: parked, or a violation.
func answeredAgain(c *Check, f *LostHistory, in *Intent, snap *Snapshot) (*KeyRow, string) {
	rows := snap.Keys[UserKey{in.User.UserID, in.Key}]
	switch {
	case in.Resend == nil:
		c.Failf("key %s, lost at %s, was never sent again", in.Key, f.At.Format("15:04:05.000"))
		return nil, LostViolation
	case len(rows) != 1:
		c.Failf("key %s, lost and sent again, has %d rows", in.Key, len(rows))
		return nil, LostViolation
	case rows[0].NeedsAttention != nil:
		return rows[0], LostParked
	case !in.Resend.Definite():
		c.Failf("key %s, lost and sent again, was not answered (%v)", in.Key, in.Resend.Labels)
		return nil, LostViolation
	case in.Definite() && in.Resend.Status != in.Status:
		c.Failf("key %s: answered %d, lost, then answered %d", in.Key, in.Status, in.Resend.Status)
		return nil, LostViolation
	}
	return rows[0], ""
}

func judgePayment(c *Check, f *LostHistory, in *Intent, snap *Snapshot, succeeded []stripefake.PaymentIntent, s *LostSummary) string {
	_, how := answeredAgain(c, f, in, snap)
	switch {
	case how == LostParked && len(succeeded) > 1:
		c.Failf("key %s, lost, parked, charged by %v", in.Key, piIDs(succeeded))
		return LostViolation
	case how != "":
		return how
	case in.Resend.Status == http.StatusPaymentRequired:
		if len(succeeded) != 0 {
			c.Failf("key %s, lost, declined again, yet charged by %v", in.Key, piIDs(succeeded))
			return LostViolation
		}
		return LostNotCharged
	}
	now := answeredObject(in.Resend.Response, "stripe_payment_intent_id")
	switch {
	case len(succeeded) != 1 || succeeded[0].ID != now:
		c.Failf("key %s, lost at %s (PaymentIntent %s), answered again with %s; succeeded PaymentIntents %v",
			in.Key, f.At.Format("15:04:05.000"), orNone(f.PaymentIntent), now, piIDs(succeeded))
		return LostViolation
	case in.Definite() && answeredObject(in.Response, "stripe_payment_intent_id") != now:
		c.Failf("key %s: answered with PaymentIntent %s, lost, then with %s", in.Key,
			answeredObject(in.Response, "stripe_payment_intent_id"), now)
		return LostViolation
	case f.PaymentIntent != "" && f.PaymentIntent != now:
		c.Failf("key %s: its lost payment recorded PaymentIntent %s, its retry %s", in.Key, f.PaymentIntent, now)
		return LostViolation
	}
	if f.Receipt && snap.Receipts[snap.PaymentNow(in)] == 1 {
		s.ReceiptsAgain++
	}
	if created := succeeded[0].Created; created.Before(f.At) {
		if age := f.RetriedAt.Sub(created); age > oldLookback {
			s.Hidden++
			if s.MinAge == 0 || age < s.MinAge {
				s.MinAge = age
			}
		}
		return LostReadopted
	}
	return LostFirstCharge
}

func judgeRefund(c *Check, f *LostHistory, in *Intent, snap *Snapshot, atStripe []stripefake.Refund) string {
	if in.Resend == nil && in.AwaitsOperator {
		if len(atStripe) > 1 {
			c.Failf("refund key %s, lost with its parked payment, refunded %d times", in.Key, len(atStripe))
			return LostViolation
		}
		return LostParked
	}
	if in.Resend == nil && refusedOnce(in) {
		if len(atStripe) != 0 {
			c.Failf("refund key %s: refused, lost, yet refunded by %s", in.Key, atStripe[0].ID)
			return LostViolation
		}
		return LostRefusal
	}
	_, how := answeredAgain(c, f, in, snap)
	switch {
	case how != "":
		return how
	case in.Resend.Status == http.StatusBadRequest:
		if len(atStripe) != 0 {
			c.Failf("refund key %s, lost, refused again, yet refunded by %s", in.Key, atStripe[0].ID)
			return LostViolation
		}
		return LostNotCharged
	}
	now := answeredObject(in.Resend.Response, "stripe_refund_id")
	ids := make([]string, len(atStripe))
	for i, r := range atStripe {
		ids[i] = r.ID
	}
	switch {
	case !slices.Equal(ids, []string{now}):
		c.Failf("refund key %s, lost, answered again with Refund %s; Stripe Refunds %v", in.Key, now, ids)
		return LostViolation
	case in.Definite() && answeredObject(in.Response, "stripe_refund_id") != now:
		c.Failf("refund key %s: answered with Refund %s, lost, then with %s", in.Key, answeredObject(in.Response, "stripe_refund_id"), now)
		return LostViolation
	case atStripe[0].Created.Before(f.At):
		return LostReadopted
	}
	return LostFirstCharge
}

// print writes the lost-history section of the table.
func (s *LostSummary) print(w io.Writer, row func(name, format string, args ...any), cfg *Config) {
	fmt.Fprintln(w, "lost history")
	row("faults injected", "%d (every %s ±20%%; sent again %s later; search lag %s)", s.Faults, cfg.LostEvery,
		cfg.LostRetryAfter, time.Duration(cfg.Faults.SearchLagMS)*time.Millisecond)
	row("keys lost", "%d payment keys (%d whose Stripe key held a 500), %d refund keys", s.Payments, s.Spent, s.Refunds)
	for _, how := range []string{LostReadopted, LostNotCharged, LostFirstCharge, LostParked, LostRefusal, LostViolation} {
		row("  ended "+how, "%d", s.Ended[how])
	}
	row("receipts sent again", "%d (a lost payment made anew under a new id)", s.ReceiptsAgain)
	if s.Hidden > 0 {
		row("re-adopted past the old lookback", "%d PaymentIntents older than %s at their retry (youngest %s)", s.Hidden,
			oldLookback, s.MinAge.Round(time.Second))
	} else {
		row("re-adopted past the old lookback", "0 (older than %s at their retry)", oldLookback)
	}
}
