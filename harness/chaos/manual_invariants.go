package chaos

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/intent"
)

// Check 11, manual payments (manual.go):
//
//   - an authorization's 201 names the one PaymentIntent that holds it,
//     and the payment row and that PaymentIntent agree: still
//     requires_capture, succeeded with what was captured, or canceled
//     (by a cancel key, or by Stripe once the authorization window
//     closed) with nothing captured;
//   - a capture answered 200 captured what its client asked (the whole
//     authorization when it named no amount), as the payment row and the
//     PaymentIntent say, and the capture Stripe executed was that key's
//     own (its paymentsd_capture_intent metadata names the key's intent);
//     a cancel answered 200 left the PaymentIntent canceled with nothing
//     captured;
//   - a capture or cancel refused was refused for its reason: nothing
//     capturable, nothing cancelable, or more asked than authorized;
//   - per payment, at most one capture key and never a capture and a
//     cancel were answered 200: captured once, never after a cancel.
//
// Refunds of a captured payment are judged by check 6, against what was
// captured.

// held reports whether pi ever held the card's money: authorized,
// captured, or an authorization canceled.
func held(pi stripefake.PaymentIntent) bool {
	switch pi.Status {
	case stripefake.StatusSucceeded, statusRequiresCapture, statusCanceled:
		return true
	}
	return false
}

// checkAuthorized checks a manual payment's 201 against its payment row
// and its PaymentIntents.
func checkAuthorized(c *Check, in *Intent, k *KeyRow, p *PaymentRow, pis []stripefake.PaymentIntent) {
	var body struct {
		ID            string `json:"id"`
		Status        string `json:"status"`
		CaptureMethod string `json:"capture_method"`
	}
	_ = json.Unmarshal(k.ResponseBody, &body)
	var holding []stripefake.PaymentIntent
	for _, pi := range pis {
		if held(pi) {
			holding = append(holding, pi)
		}
	}
	switch {
	case body.ID != p.PublicID || body.Status != statusRequiresCapture || body.CaptureMethod != "manual":
		c.Failf("key %s: stored body %s does not describe authorized payment %d", in.Key, k.ResponseBody, p.ID)
	case p.CaptureMethod != "manual":
		c.Failf("key %s: payment %d asked for manual capture, but is %s", in.Key, p.ID, p.CaptureMethod)
	case len(holding) != 1 || p.PaymentIntentID == nil || holding[0].ID != *p.PaymentIntentID:
		c.Failf("key %s: payment %d records %s, PaymentIntents holding the card are %v", in.Key, p.ID,
			deref(p.PaymentIntentID), piIDs(holding))
	default:
		pi := holding[0]
		if pi.CaptureMethod != "manual" || pi.Status != p.Status && !(pi.Status == statusCanceled && p.Status == statusCanceled) ||
			pi.AmountReceived != p.AmountCaptured {
			c.Failf("key %s: payment %d is %s with %d captured, its PaymentIntent %s is %s (%s) with %d received",
				in.Key, p.ID, p.Status, p.AmountCaptured, pi.ID, pi.Status, pi.CaptureMethod, pi.AmountReceived)
		}
	}
}

// checkAction checks one finished capture or cancel key against the
// payment it names, that payment's PaymentIntent and what its client was
// told.
func checkAction(c *Check, in *Intent, k *KeyRow, snap *Snapshot, piByID map[string]stripefake.PaymentIntent) {
	code := int(*k.ResponseCode)
	checkAnswered(c, in, k)
	var body struct {
		ID             string `json:"id"`
		Status         any    `json:"status"` // a string for a payment, a number for a problem
		AmountCaptured int64  `json:"amount_captured"`
		Type           string `json:"type"`
	}
	if err := json.Unmarshal(k.ResponseBody, &body); err != nil {
		c.Failf("%s key %s: stored body is not JSON: %v", in.Action, in.Key, err)
		return
	}
	p := snap.PaymentsByPublicID[in.PaymentID]
	if p == nil {
		c.Failf("%s key %s: payment %s does not exist", in.Action, in.Key, in.PaymentID)
		return
	}
	var pi stripefake.PaymentIntent
	if p.PaymentIntentID != nil {
		pi = piByID[*p.PaymentIntentID]
	}
	slug := body.Type[strings.LastIndex(body.Type, "/")+1:]
	switch {
	case code == http.StatusOK && in.Action == ActionCapture:
		want := in.Amount
		if want == 0 {
			want = p.Amount
		}
		switch {
		case body.ID != p.PublicID || body.Status != "succeeded" || body.AmountCaptured != want:
			c.Failf("capture key %s asked for %d, answered %s", in.Key, want, k.ResponseBody)
		case p.Status != "succeeded" || p.AmountCaptured != want:
			c.Failf("capture key %s captured %d, but payment %d is %s with %d captured", in.Key, want, p.ID, p.Status, p.AmountCaptured)
		case pi.Status != stripefake.StatusSucceeded || pi.AmountReceived != want:
			c.Failf("capture key %s captured %d, but PaymentIntent %s is %s with %d received", in.Key, want, pi.ID, pi.Status, pi.AmountReceived)
		case pi.Metadata[intent.MetadataCaptureIntent] != intent.Intent{Namespace: snap.Namespace, UserID: in.User.UserID, Key: in.Key}.ID():
			c.Failf("capture key %s answered 200, but PaymentIntent %s was captured by intent %q", in.Key, pi.ID, pi.Metadata[intent.MetadataCaptureIntent])
		}
	case code == http.StatusOK:
		switch {
		case body.ID != p.PublicID || body.Status != statusCanceled || body.AmountCaptured != 0:
			c.Failf("cancel key %s answered %s", in.Key, k.ResponseBody)
		case p.Status != statusCanceled || p.AmountCaptured != 0:
			c.Failf("cancel key %s canceled payment %d, which is %s with %d captured", in.Key, p.ID, p.Status, p.AmountCaptured)
		case pi.Status != statusCanceled || pi.AmountReceived != 0:
			c.Failf("cancel key %s canceled payment %d, but PaymentIntent %s is %s with %d received", in.Key, p.ID, pi.ID, pi.Status, pi.AmountReceived)
		}
	case in.Action == ActionCapture && slug == slugExceedsCapture:
		if in.Amount <= p.Amount {
			c.Failf("capture key %s asked for %d of %d authorized and was refused: %s", in.Key, in.Amount, p.Amount, k.ResponseBody)
		}
	case in.Action == ActionCapture && slug == slugNotCapturable, in.Action == ActionCancel && slug == slugNotCancelable:
	default:
		c.Failf("%s key %s finished with %d: %s", in.Action, in.Key, code, k.ResponseBody)
	}
}

// checkManual is check 11's view across keys: per payment, at most one
// capture and never a capture and a cancel answered 200.
func checkManual(c *Check, intents []*Intent, snap *Snapshot) {
	won := map[string][]*Intent{} // payment id → its capture and cancel keys that finished 200
	for _, in := range intents {
		if in.Action == "" {
			continue
		}
		c.Checked++
		rows := snap.Keys[UserKey{in.User.UserID, in.Key}]
		if len(rows) == 1 && rows[0].ResponseCode != nil && *rows[0].ResponseCode == http.StatusOK {
			won[in.PaymentID] = append(won[in.PaymentID], in)
		}
	}
	for id, ins := range won {
		if len(ins) > 1 {
			keys := make([]string, len(ins))
			for i, in := range ins {
				keys[i] = string(in.Action) + " " + in.Key
			}
			c.Failf("payment %s: %d keys succeeded: %v", id, len(ins), keys)
		}
	}
}

// ManualCounts is what became of the run's manual payments.
type ManualCounts struct {
	// Authorized counts the manual payments whose card was authorized;
	// Captured, PartlyCaptured, Canceled and Held what they are now
	// (Canceled: by a cancel key or by Stripe when the window closed).
	Authorized, Captured, PartlyCaptured, Canceled, Held int
	// Races counts captures raced by a cancel; CaptureWon those the
	// capture won.
	Races, CaptureWon int
}

// countManual counts the manual payments and the races.
func countManual(intents []*Intent, snap *Snapshot) ManualCounts {
	var m ManualCounts
	for _, p := range snap.Payments {
		if p.CaptureMethod != "manual" || p.PaymentIntentID == nil || p.Status == "failed" {
			continue
		}
		m.Authorized++
		switch {
		case p.Status == "succeeded" && p.AmountCaptured < p.Amount:
			m.PartlyCaptured++
		case p.Status == "succeeded":
			m.Captured++
		case p.Status == statusCanceled:
			m.Canceled++
		case p.Status == statusRequiresCapture:
			m.Held++
		}
	}
	for _, in := range intents {
		if in.Action == ActionCapture && in.Rival != nil {
			m.Races++
			if in.Status == http.StatusOK {
				m.CaptureWon++
			}
		}
	}
	return m
}

// print writes the manual payments' rows of the report.
func (m ManualCounts) print(row func(name, format string, args ...any)) {
	row("manual payments authorized", "%d: captured %d, in part %d, canceled %d (by a key or on expiry), still held %d",
		m.Authorized, m.Captured, m.PartlyCaptured, m.Canceled, m.Held)
	row("captures raced by a cancel", "%d (the capture won %d)", m.Races, m.CaptureWon)
}
