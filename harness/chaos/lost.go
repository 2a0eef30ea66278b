package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/intent"
)

// A failover to an asynchronous standby may lose the last commits of the
// primary: keys, payments, refunds, answers that clients already hold. This
// file finds what was lost, chooses what a reconciling client sends again,
// and checks that each lost answer was re-adopted from Stripe, not charged
// or refunded again. All of it is pure: the run feeds it snapshots.

// MarkLost sets Lost on every intent whose client got a definite answer
// that the database no longer holds: its key row is gone, or stores
// another answer (a retry re-created the key after its commits were lost).
// It returns those intents.
func MarkLost(intents []*Intent, snap *Snapshot) []*Intent {
	var lost []*Intent
	for _, in := range intents {
		if !in.Definite() {
			continue
		}
		rows := snap.Keys[UserKey{in.User.UserID, in.Key}]
		switch {
		case len(rows) == 0:
			in.Lost = "no key row"
		case rows[0].ResponseCode == nil:
			in.Lost = "the key is at " + rows[0].RecoveryPoint
		case int(*rows[0].ResponseCode) != in.Status || !bytes.Equal(rows[0].ResponseBody, in.Response):
			in.Lost = fmt.Sprintf("the key stores another answer (%d)", *rows[0].ResponseCode)
		default:
			continue
		}
		lost = append(lost, in)
	}
	return lost
}

// ToResend lists the intents a reconciling client sends again after a
// failover, payments first, then refunds: every intent whose answer was
// lost (MarkLost first), but a refund's refusal; every one without a key
// row that the service had acknowledged storing (a 409, a 503 from the
// processor) or that Stripe holds an object for (its client gave up; the
// charge must not stay orphaned); and every refund whose payment was lost
// and which was answered that no such payment exists.
func ToResend(intents []*Intent, snap *Snapshot) (payments, refunds []*Intent) {
	atStripe := map[string]bool{}
	for _, pi := range snap.Intents {
		atStripe[pi.Metadata[intent.MetadataIntent]] = true
	}
	for _, r := range snap.StripeRefunds {
		atStripe[r.Metadata[intent.MetadataIntent]] = true
	}
	for _, in := range intents {
		rows := snap.Keys[UserKey{in.User.UserID, in.Key}]
		resend := in.Lost != "" ||
			len(rows) == 0 && (in.MustExist || atStripe[snap.intentID(in)]) ||
			len(rows) == 0 && in.Refund && in.Parent != nil && in.Parent.Lost != "" && notFound(in.Unexpected)
		switch {
		case !resend, in.Lost != "" && refusedOnce(in):
		case in.Refund:
			refunds = append(refunds, in)
		default:
			payments = append(payments, in)
		}
	}
	return payments, refunds
}

// refusedOnce reports whether in is a refund its client was refused (400):
// a final answer, so a reconciling client does not send it again even when
// the database lost it; sent again, it could be decided otherwise against
// what the database holds now. Check 7 proves nothing was refunded for it.
func refusedOnce(in *Intent) bool { return in.Refund && in.Status == http.StatusBadRequest }

// notFound reports whether an unexpected answer was a 404: a refund sent
// to a payment the database no longer has.
func notFound(answer string) bool { return strings.HasPrefix(answer, "404") }

// intentID is in's name at Stripe, as paymentsd derives it.
func (s *Snapshot) intentID(in *Intent) string {
	return intent.Intent{Namespace: s.Namespace, UserID: in.User.UserID, Key: in.Key}.ID()
}

// PaymentNow is the id of the payment that payment intent in's key stores
// now: where a reconciling client sends its refunds. Zero if none.
func (s *Snapshot) PaymentNow(in *Intent) int64 {
	rows := s.Keys[UserKey{in.User.UserID, in.Key}]
	if len(rows) != 1 {
		return 0
	}
	if pays := s.PaymentsOf[rows[0].ID]; len(pays) == 1 {
		return pays[0].ID
	}
	return 0
}

// Recovery is what the service went through in a failover, as the run saw
// it: the facts check 8 judges.
type Recovery struct {
	Mode     FailoverMode
	Failover Failover
	// FirstCreated is when a payment was first answered 201 after the
	// standby was promoted; zero if never.
	FirstCreated time.Time
	// ExitedOnTheirOwn are the pids of serve processes that exited on
	// their own during the run; Running those running at the verdict.
	ExitedOnTheirOwn, Running []int
	// HeartbeatInterval is the serve processes' heartbeat interval.
	HeartbeatInterval time.Duration
	// Recorded are the PaymentIntents a payment, and the Refunds a refund,
	// records at the verdict (failover_alarms.go).
	Recorded map[string]bool
}

// Downtime is how long no payment was answered 201: from the primary's stop
// to the first 201 after the promotion.
func (r *Recovery) Downtime() time.Duration {
	if r.FirstCreated.IsZero() {
		return 0
	}
	return r.FirstCreated.Sub(r.Failover.StoppedAt)
}

// checkLostAnswers is check 7: no definite answer lost with a synchronous
// standby; with an asynchronous one, each lost answer re-adopted from
// Stripe: the same outcome, the same PaymentIntent or Refund, and still only
// one; or, for a refund refused and not sent again, nothing refunded.
func checkLostAnswers(c *Check, mode FailoverMode, intents []*Intent, snap *Snapshot, v *Verdict) {
	succeeded := map[string][]string{} // succeeded PaymentIntents per intent
	for _, pi := range snap.Intents {
		if pi.Status == stripefake.StatusSucceeded {
			id := pi.Metadata[intent.MetadataIntent]
			succeeded[id] = append(succeeded[id], pi.ID)
		}
	}
	refunds := map[string][]string{} // Stripe Refunds per intent
	for _, r := range snap.StripeRefunds {
		id := r.Metadata[intent.MetadataIntent]
		refunds[id] = append(refunds[id], r.ID)
	}
	for _, in := range intents {
		if in.Resend != nil {
			v.Resent++
		}
		if in.Refund && in.Parent != nil && in.Parent.Lost != "" && notFound(in.Unexpected) {
			v.RefundsOfLostPayments++
		}
		if !in.Definite() {
			continue
		}
		c.Checked++
		if in.Lost == "" {
			continue
		}
		v.LostAnswers++
		if !in.Refund && in.Status == http.StatusCreated {
			v.LostPayments++
		}
		if !mode.Async() {
			c.Failf("key %s: answered %d, then lost by the failover (%s)", in.Key, in.Status, in.Lost)
			continue
		}
		id := snap.intentID(in)
		if refusedOnce(in) && in.Resend == nil {
			if len(refunds[id]) != 0 {
				c.Failf("refund key %s: refused, lost (%s), yet refunded by %v", in.Key, in.Lost, refunds[id])
				continue
			}
			v.LostRefusals++
			continue
		}
		rows := snap.Keys[UserKey{in.User.UserID, in.Key}]
		if len(rows) != 1 || rows[0].ResponseCode == nil || int(*rows[0].ResponseCode) != in.Status {
			c.Failf("key %s: answered %d, lost (%s), and not answered %d again", in.Key, in.Status, in.Lost, in.Status)
			continue
		}
		switch {
		case !in.Refund && in.Status == http.StatusCreated:
			was, now := answeredObject(in.Response, "stripe_payment_intent_id"), answeredObject(rows[0].ResponseBody, "stripe_payment_intent_id")
			if was == "" || now != was || !slices.Equal(succeeded[id], []string{was}) {
				c.Failf("key %s: answered 201 with PaymentIntent %s, lost (%s); now answers %s, succeeded PaymentIntents %v",
					in.Key, was, in.Lost, now, succeeded[id])
				continue
			}
		case !in.Refund:
			if len(succeeded[id]) != 0 {
				c.Failf("key %s: declined, lost (%s), then charged by %v", in.Key, in.Lost, succeeded[id])
				continue
			}
		case in.Status == http.StatusCreated:
			was, now := answeredObject(in.Response, "stripe_refund_id"), answeredObject(rows[0].ResponseBody, "stripe_refund_id")
			if was == "" || now != was || !slices.Equal(refunds[id], []string{was}) {
				c.Failf("refund key %s: answered 201 with Refund %s, lost (%s); now answers %s, Stripe Refunds %v",
					in.Key, was, in.Lost, now, refunds[id])
				continue
			}
		}
		v.Readopted++
	}
}

// answeredObject is the Stripe object an answer body names in field.
func answeredObject(body []byte, field string) string {
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	s, _ := m[field].(string)
	return s
}

// checkRecovery is check 8: the service came through the failover on its
// own. The failover happened; a payment was answered 201 after it; no serve
// process running when the primary stopped exited on its own; every
// running process heartbeats; River has a leader, and its leader's
// periodic completer ran and receipts went out on the new primary.
func checkRecovery(c *Check, r *Recovery, snap *Snapshot) {
	c.Checked++
	if !r.Failover.Done() {
		c.Failf("no failover happened (the run ended first)")
		return
	}
	checkPatroniEvents(c, r)
	if r.FirstCreated.IsZero() {
		c.Failf("no payment was answered 201 after the standby was promoted")
	}
	for _, pid := range r.Failover.UpAtStop {
		c.Checked++
		if slices.Contains(r.ExitedOnTheirOwn, pid) {
			c.Failf("serve process %d, up when the primary stopped, exited on its own", pid)
		}
	}
	for _, pid := range r.Running {
		c.Checked++
		age, ok := snap.Service.HeartbeatAge[pid]
		switch {
		case !ok:
			c.Failf("serve process %d has no instance row", pid)
		case age > 10*r.HeartbeatInterval: // stopped, not merely late on a busy machine
			c.Failf("serve process %d last heartbeat %s ago", pid, age.Round(time.Millisecond))
		}
	}
	c.Checked++
	if snap.Service.Leader == "" {
		c.Failf("River has no leader")
	}
	for _, kind := range []string{"completer", "receipt"} {
		c.Checked++
		if at := snap.Service.LastFinished[kind]; !at.After(r.Failover.PromotedAt) {
			c.Failf("no %s finished after the promotion (last at %s)", kind, timeText(&at))
		}
	}
}
