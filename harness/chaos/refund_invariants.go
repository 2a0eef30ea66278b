package chaos

import (
	"encoding/json"
	"net/http"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/intent"
)

// checkRefund checks one finished refund key against its refund row and
// what its client was told.
func checkRefund(c *Check, in *Intent, k *KeyRow, snap *Snapshot) {
	code := int(*k.ResponseCode)
	checkAnswered(c, in, k)
	r := snap.RefundsOf[k.ID]
	if in.Parent != nil && r != nil {
		// After a failover lost commits, a payment id the client holds may
		// name nothing, or be handed out again to another payment.
		if paid := snap.PaymentNow(in.Parent); r.PaymentID != paid {
			c.Failf("refund key %s refunded payment %d, but its payment (key %s) is %d", in.Key, r.PaymentID, in.Parent.Key, paid)
		}
	}
	var body struct {
		ID     string `json:"id"`
		Amount int64  `json:"amount"`
		Status any    `json:"status"`
		Type   string `json:"type"`
	}
	if err := json.Unmarshal(k.ResponseBody, &body); err != nil {
		c.Failf("refund key %s: stored body is not JSON: %v", in.Key, err)
		return
	}
	switch {
	case code == http.StatusCreated && (r == nil || r.PublicID != body.ID || r.StripeRefundID == nil || r.Status == "failed"):
		c.Failf("refund key %s answered 201 %s, but its refund row is %+v", in.Key, k.ResponseBody, r)
	case code == http.StatusCreated && in.Amount != 0 && r.Amount != in.Amount:
		c.Failf("refund key %s asked for %d, refund %d is for %d", in.Key, in.Amount, r.ID, r.Amount)
	case code == http.StatusBadRequest && r != nil && r.Status != "failed":
		c.Failf("refund key %s answered 400 %s, but refund %d is %s", in.Key, k.ResponseBody, r.ID, r.Status)
	}
}

// checkRefunds checks Stripe's refunds against the service's: each refund
// intent made at most one Stripe Refund, which its refund row records; per
// payment, what Stripe refunded is what the succeeded refunds say, within
// the amount, and what the payment reserves is what its refunds hold. A
// refund intent in awaiting was lost with its payment, which awaits an
// operator: its Refund has no row until the operator settles the payment
// and its client sends it again.
func checkRefunds(c *Check, snap *Snapshot, v *Verdict, awaiting map[string]bool) {
	refundOfIntent := map[string]*RefundRow{}
	for uk, rows := range snap.Keys {
		for _, k := range rows {
			if r := snap.RefundsOf[k.ID]; r != nil {
				refundOfIntent[intent.Intent{Namespace: snap.Namespace, UserID: uk.UserID, Key: uk.Key}.ID()] = r
			}
		}
	}
	perIntent := map[string][]stripefake.Refund{}
	refundedAtStripe := map[string]int64{} // by PaymentIntent
	for _, sr := range snap.StripeRefunds {
		c.Checked++
		v.StripeRefunds++
		perIntent[sr.Metadata[intent.MetadataIntent]] = append(perIntent[sr.Metadata[intent.MetadataIntent]], sr)
		if sr.Status != stripefake.RefundFailed {
			refundedAtStripe[sr.PaymentIntent] += sr.Amount
		}
		r, ok := refundOfIntent[sr.Metadata[intent.MetadataIntent]]
		switch {
		case sr.Metadata[intent.MetadataNamespace] == snap.Namespace.String() && !ok && awaiting[sr.Metadata[intent.MetadataIntent]]:
		case sr.Metadata[intent.MetadataNamespace] != snap.Namespace.String() || !ok:
			c.Failf("Stripe Refund %s (%d) has no refund of this deployment: %v", sr.ID, sr.Amount, sr.Metadata)
		case r.Amount != sr.Amount:
			c.Failf("Stripe Refund %s is for %d, refund %d for %d", sr.ID, sr.Amount, r.ID, r.Amount)
		case r.StripeRefundID != nil && *r.StripeRefundID != sr.ID:
			c.Failf("Stripe Refund %s, but refund %d records %s", sr.ID, r.ID, *r.StripeRefundID)
		}
	}
	for id, srs := range perIntent {
		if len(srs) > 1 {
			c.Failf("refund intent %s made %d Stripe Refunds", id, len(srs))
		}
	}
	succeeded, reserved := map[int64]int64{}, map[int64]int64{}
	for _, r := range snap.Refunds {
		if r.Status == "succeeded" {
			succeeded[r.PaymentID] += r.Amount
		}
		if r.Status != "failed" {
			reserved[r.PaymentID] += r.Amount
		}
	}
	for _, p := range snap.Payments {
		if p.PaymentIntentID == nil {
			continue
		}
		c.Checked++
		atStripe := refundedAtStripe[*p.PaymentIntentID]
		switch {
		case atStripe > p.AmountCaptured:
			c.Failf("payment %d (%d captured of %d) was refunded %d at Stripe", p.ID, p.AmountCaptured, p.Amount, atStripe)
		case atStripe != p.AmountRefunded || p.AmountRefunded != succeeded[p.ID]:
			c.Failf("payment %d: refunded %d at Stripe, amount_refunded %d, succeeded refunds %d",
				p.ID, atStripe, p.AmountRefunded, succeeded[p.ID])
		case p.AmountReserved != reserved[p.ID]:
			c.Failf("payment %d reserves %d, its refunds that did not fail hold %d", p.ID, p.AmountReserved, reserved[p.ID])
		}
		if p.AmountRefunded > 0 {
			v.RefundedPayments++
		}
	}
}
