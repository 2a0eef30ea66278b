package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/intent"
)

// Verify checks the invariants of the run (see the package documentation)
// against the snapshot taken after the drain; rec, in a failover run, adds
// checks 7 and 8.
func Verify(intents []*Intent, snap *Snapshot, drain Drain, bound time.Duration, rec *Recovery) *Verdict {
	v := &Verdict{Recovery: rec}
	keys := &Check{N: 1, Name: "one finished key (201/402; 200/400 for captures, cancels) per intent"}
	outcomes := &Check{N: 2, Name: "outcome = PaymentIntent = payment row = client's answer"}
	charges := &Check{N: 3, Name: "every PaymentIntent has its payment; none charged twice"}
	receipts := &Check{N: 4, Name: "one receipt per succeeded payment, none per failed"}
	drained := &Check{N: 5, Name: "every key finished within the drain bound"}
	refunds := &Check{N: 6, Name: "one Stripe Refund per refund key; refunded = succeeded refunds <= captured"}
	manual := &Check{N: 11, Name: "authorizations, captures and cancels: answer = payment = PaymentIntent; captured once, never after a cancel"}
	v.Checks = []*Check{keys, outcomes, charges, receipts, drained, refunds, manual}
	checkManual(manual, intents, snap)
	awaiting := map[string]bool{}
	for _, in := range intents {
		if in.AwaitsOperator {
			awaiting[snap.intentID(in)] = true
		}
	}
	checkRefunds(refunds, snap, v, awaiting)
	if rec != nil {
		lost := &Check{N: 7, Name: "no answer lost by the failover"}
		if rec.Mode.Async() {
			lost.Name = "every answer the failover lost re-adopted, not re-charged"
		}
		recovered := &Check{N: 8, Name: "the service recovered from the failover on its own"}
		v.Checks = append(v.Checks, lost, recovered)
		checkLostAnswers(lost, rec.Mode, intents, snap, v)
		checkRecovery(recovered, rec, snap)
	}

	// PaymentIntents by our payment id, through the intent in their
	// metadata: the deployment's namespace, the user and the client's key.
	paymentOfIntent := map[string]*PaymentRow{}
	for uk, rows := range snap.Keys {
		for _, k := range rows {
			if pays := snap.PaymentsOf[k.ID]; len(pays) == 1 {
				paymentOfIntent[intent.Intent{Namespace: snap.Namespace, UserID: uk.UserID, Key: uk.Key}.ID()] = pays[0]
			}
		}
	}
	piOf := map[int64][]stripefake.PaymentIntent{}
	piByID := map[string]stripefake.PaymentIntent{}
	for _, pi := range snap.Intents {
		piByID[pi.ID] = pi
		v.PaymentIntents++
		if pi.Status == stripefake.StatusSucceeded {
			v.SucceededIntents++
		}
		charges.Checked++
		p, ok := paymentOfIntent[pi.Metadata[intent.MetadataIntent]]
		switch {
		case pi.Metadata[intent.MetadataNamespace] != snap.Namespace.String():
			charges.Failf("PaymentIntent %s (%s) is not of this deployment: %v", pi.ID, pi.Status, pi.Metadata)
			continue
		case !ok:
			charges.Failf("PaymentIntent %s (%s, %d) names intent %s, which has no payment", pi.ID, pi.Status, pi.Amount,
				pi.Metadata[intent.MetadataIntent])
			continue
		}
		piOf[p.ID] = append(piOf[p.ID], pi)
		switch {
		case pi.Amount != p.Amount || pi.Metadata[intent.MetadataUserID] != strconv.FormatInt(p.UserID, 10):
			charges.Failf("PaymentIntent %s (amount %d, user %s) does not match payment %d (amount %d, user %d)",
				pi.ID, pi.Amount, pi.Metadata[intent.MetadataUserID], p.ID, p.Amount, p.UserID)
		case pi.Status == stripefake.StatusSucceeded && p.Status == "pending" && snap.parked(p):
			// Parked for an operator: checked with the keys below.
		case pi.Status == stripefake.StatusSucceeded && (p.Status != "succeeded" || p.PaymentIntentID == nil || *p.PaymentIntentID != pi.ID):
			charges.Failf("PaymentIntent %s succeeded, but payment %d is %s with PaymentIntent %s",
				pi.ID, p.ID, p.Status, deref(p.PaymentIntentID))
		}
	}
	for id, pis := range piOf {
		if n := countSucceeded(pis); n > 1 {
			charges.Failf("payment %d was charged %d times: %v", id, n, piIDs(pis))
		}
		if p := snap.Payments[id]; p.CaptureMethod == "manual" {
			holding := 0
			for _, pi := range pis {
				if held(pi) {
					holding++
				}
			}
			if holding > 1 {
				charges.Failf("payment %d was authorized %d times: %v", id, holding, piIDs(pis))
			}
		}
	}

	seen := map[UserKey]bool{}
	for _, in := range intents {
		keys.Checked++
		uk := UserKey{in.User.UserID, in.Key}
		seen[uk] = true
		switch {
		case in.Unexpected == "":
		case in.Refund && in.Parent != nil && in.Parent.Lost != "" && notFound(in.Unexpected) && in.Resend != nil:
			// A refund of a payment the failover lost: the service no
			// longer knew it. Sent again to the re-adopted payment.
		default:
			outcomes.Failf("key %s: unexpected answer %s", in.Key, in.Unexpected)
		}
		rows := snap.Keys[uk]
		switch {
		case len(rows) == 0 && in.Lost != "" && refusedOnce(in):
			// A refusal the failover lost: judged by check 7.
			continue
		case len(rows) == 0 && in.AwaitsOperator:
			// Lost with its payment, which an operator now holds.
			v.NeedsAttention = append(v.NeedsAttention, fmt.Sprintf("refund key %s: lost with its payment, which awaits an operator", in.Key))
			continue
		case len(rows) == 0 && in.MustExist:
			keys.Failf("key %s (user %d): no row, yet the client was answered %v", in.Key, in.User.UserID, in.Labels)
			continue
		case len(rows) == 0:
			v.NeverStored++
			continue
		case len(rows) > 1:
			keys.Failf("key %s (user %d): %d rows", in.Key, in.User.UserID, len(rows))
			continue
		}
		k := rows[0]
		if k.Runs > 1 {
			v.Resumed++
		}
		v.MaxRuns = max(v.MaxRuns, int(k.Runs))
		if k.NeedsAttention != nil {
			// Parked for an operator: never charged again, counted, and
			// shown with its reason. Not a failure of the run.
			v.NeedsAttention = append(v.NeedsAttention, fmt.Sprintf("key %s (id %d): %s", in.Key, k.ID, deref(k.LastError)))
			continue
		}
		if k.RecoveryPoint != "finished" || k.ResponseCode == nil {
			keys.Failf("key %s (id %d): at %s after %d runs (locked by %s at %s, last run %s)", in.Key, k.ID,
				k.RecoveryPoint, k.Runs, deref(k.LockedBy), timeText(k.LockedAt), k.LastRunAt.Format("15:04:05.000"))
			continue
		}
		if code := *k.ResponseCode; !finishedAs(in, int(code)) {
			keys.Failf("key %s (id %d): finished with %d: %s", in.Key, k.ID, code, k.ResponseBody)
			continue
		}
		if in.Definite() {
			v.FinishedWithClient++
		} else {
			v.FinishedWithoutClient++
		}
		outcomes.Checked++
		switch {
		case in.Refund:
			checkRefund(outcomes, in, k, snap)
		case in.Action != "":
			outcomes.Checked--
			manual.Checked++
			checkAction(manual, in, k, snap, piByID)
		default:
			checkOutcome(outcomes, in, k, snap, piOf)
		}
	}
	for uk, rows := range snap.Keys {
		if !seen[uk] {
			keys.Failf("key %s (user %d, %d rows) was never sent by a client", uk.Key, uk.UserID, len(rows))
		}
	}

	for _, p := range snap.Payments {
		receipts.Checked++
		n, attempts := snap.Receipts[p.ID], snap.Outbox[p.ID]
		_, queued := snap.Outbox[p.ID]
		switch p.Status {
		case "succeeded":
			v.Succeeded++
			v.Receipts += n
			if n != 1 || queued {
				receipts.Failf("succeeded payment %d has %d receipts (still in the outbox: %t, after %d failed deliveries)", p.ID, n, queued, attempts)
			}
		case "failed", statusRequiresCapture, statusCanceled:
			if p.Status == "failed" {
				v.Failed++
			}
			if n != 0 || queued {
				receipts.Failf("%s payment %d has %d receipts (in the outbox: %t)", p.Status, p.ID, n, queued)
			}
		case "pending":
			if !snap.parked(p) {
				receipts.Failf("payment %d is still pending", p.ID)
			}
		default:
			receipts.Failf("payment %d is %s", p.ID, p.Status)
		}
	}

	v.Manual = countManual(intents, snap)
	drained.Checked = 1
	if !drain.KeysDone {
		drained.Failf("%d keys still unfinished %s after the faults stopped", drain.Unfinished, bound)
	}
	if !drain.ReceiptsDone {
		drained.Failf("%d receipts still in the outbox %s after the faults stopped", drain.PendingReceipts, bound)
	}
	return v
}

// finishedAs reports whether a key of in may finish with code.
func finishedAs(in *Intent, code int) bool {
	switch {
	case in.Action != "":
		return code == http.StatusOK || code == http.StatusBadRequest
	case in.Refund:
		return code == http.StatusCreated || code == http.StatusPaymentRequired || code == http.StatusBadRequest
	}
	return code == http.StatusCreated || code == http.StatusPaymentRequired
}

// checkOutcome checks one finished key against its payment, its
// PaymentIntents and what its client was told.
func checkOutcome(c *Check, in *Intent, k *KeyRow, snap *Snapshot, piOf map[int64][]stripefake.PaymentIntent) {
	code := int(*k.ResponseCode)
	checkAnswered(c, in, k)
	pays := snap.PaymentsOf[k.ID]
	if len(pays) != 1 {
		c.Failf("key %s (id %d) has %d payments", in.Key, k.ID, len(pays))
		return
	}
	p := pays[0]
	if p.Amount != in.Amount || p.UserID != in.User.UserID || p.PaymentMethod != in.Card || p.Currency != "usd" {
		c.Failf("key %s: payment %d (%d %s %s, user %d) is not the request %s", in.Key, p.ID, p.Amount, p.Currency,
			p.PaymentMethod, p.UserID, in.Body)
	}
	var body struct {
		ID        string  `json:"id"`
		PaymentID string  `json:"payment_id"`
		Amount    int64   `json:"amount"`
		Status    any     `json:"status"` // a string for a payment, a number for a problem
		PI        *string `json:"stripe_payment_intent_id"`
	}
	if err := json.Unmarshal(k.ResponseBody, &body); err != nil {
		c.Failf("key %s: stored body is not JSON: %v", in.Key, err)
		return
	}
	succeeded := succeededOf(piOf[p.ID])
	switch code {
	case http.StatusCreated:
		switch {
		case in.Card == CardVisa && in.Manual:
			checkAuthorized(c, in, k, p, piOf[p.ID])
		case p.CaptureMethod != "automatic" || p.Status == "succeeded" && p.AmountCaptured != p.Amount:
			c.Failf("key %s: automatic payment %d is %s, %s with %d captured", in.Key, p.ID, p.CaptureMethod, p.Status, p.AmountCaptured)
		case in.Card != CardVisa:
			c.Failf("key %s: %s was charged (payment %d)", in.Key, in.Card, p.ID)
		case p.Status != "succeeded" || p.PaymentIntentID == nil:
			c.Failf("key %s answered 201, but payment %d is %s with PaymentIntent %s", in.Key, p.ID, p.Status, deref(p.PaymentIntentID))
		case len(succeeded) != 1 || succeeded[0].ID != *p.PaymentIntentID:
			c.Failf("key %s: payment %d records %s, succeeded PaymentIntents are %v", in.Key, p.ID, *p.PaymentIntentID, piIDs(succeeded))
		case body.ID != p.PublicID || body.Amount != in.Amount || body.Status != "succeeded" || deref(body.PI) != *p.PaymentIntentID:
			c.Failf("key %s: stored body %s does not describe payment %d (%s)", in.Key, k.ResponseBody, p.ID, *p.PaymentIntentID)
		}
	case http.StatusPaymentRequired:
		switch {
		case in.Card != CardDeclined:
			c.Failf("key %s: %s was declined (payment %d): %s", in.Key, in.Card, p.ID, k.ResponseBody)
		case p.Status != "failed":
			c.Failf("key %s answered 402, but payment %d is %s", in.Key, p.ID, p.Status)
		case len(succeeded) != 0:
			c.Failf("key %s answered 402, but payment %d was charged by %v", in.Key, p.ID, piIDs(succeeded))
		case body.PaymentID != p.PublicID:
			c.Failf("key %s: stored problem %s does not name payment %d", in.Key, k.ResponseBody, p.ID)
		}
	}
}

// checkAnswered checks that the client got the answer the key stores: the
// client's own, or, for a key sent again after a failover or lost history
// (checks 7 and 10 judge the lost answers), the one its key was sent again
// for.
func checkAnswered(c *Check, in *Intent, k *KeyRow) {
	code := int(*k.ResponseCode)
	got := in
	if in.Lost != "" || in.Resend != nil {
		got = in.Resend
	}
	if got != nil && got.Definite() && (got.Status != code || !bytes.Equal(got.Response, k.ResponseBody)) {
		c.Failf("key %s: the client was answered %d %s, the key stores %d %s", in.Key, got.Status, got.Response, code, k.ResponseBody)
	}
}

// parked reports whether payment p's key awaits an operator.
func (s *Snapshot) parked(p *PaymentRow) bool {
	if p.KeyID == nil {
		return false
	}
	for _, rows := range s.Keys {
		for _, k := range rows {
			if k.ID == *p.KeyID {
				return k.NeedsAttention != nil
			}
		}
	}
	return false
}

func succeededOf(pis []stripefake.PaymentIntent) []stripefake.PaymentIntent {
	var out []stripefake.PaymentIntent
	for _, pi := range pis {
		if pi.Status == stripefake.StatusSucceeded {
			out = append(out, pi)
		}
	}
	return out
}

func countSucceeded(pis []stripefake.PaymentIntent) int { return len(succeededOf(pis)) }

func piIDs(pis []stripefake.PaymentIntent) []string {
	ids := make([]string, len(pis))
	for i, pi := range pis {
		ids[i] = pi.ID + " (" + pi.Status + ")"
	}
	return ids
}

func deref(s *string) string {
	if s == nil {
		return "none"
	}
	return *s
}

func timeText(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.Format("15:04:05.000")
}
