package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/intent"
)

// namespace is the world's deployment.
var namespace = uuid.MustParse("6f1c1a52-3c1e-4f7e-9a43-2b8f5d0c7e11")

// metadataOf is what paymentsd writes on user 7's key's PaymentIntents.
func metadataOf(key string) map[string]string {
	return intent.Intent{Namespace: namespace, UserID: 7, Key: key}.Metadata()
}

// world is a consistent run of two intents, a charge and a decline, that a
// test then breaks in one place.
func world() ([]*Intent, *Snapshot) {
	user := User{UserID: 7, APIKey: "k"}
	paid := []byte(`{"id":"pay_1","amount":500,"currency":"usd","status":"succeeded","stripe_payment_intent_id":"pi_a"}`)
	declined := []byte(`{"type":"https://paymentsd.dev/problems/card-declined","status":402,"payment_id":"pay_2"}`)
	refunded := []byte(`{"id":"re_1","payment_id":"pay_1","amount":200,"status":"succeeded"}`)
	intents := []*Intent{
		{User: user, Key: "a", Card: CardVisa, Amount: 500, Status: 201, Response: paid, MustExist: true},
		{User: user, Key: "b", Card: CardDeclined, Amount: 900, Status: 402, Response: declined, MustExist: true},
		{User: user, Key: "a-refund-1", Refund: true, PaymentID: "pay_1", Amount: 200, Status: 201, Response: refunded, MustExist: true},
	}
	intents[2].Parent = intents[0]
	code201, code402 := int32(201), int32(402)
	keyA, keyB, keyR, piA, reA := int64(10), int64(11), int64(12), "pi_a", "re_a"
	snap := &Snapshot{
		Namespace: namespace,
		Keys: map[UserKey][]*KeyRow{
			{7, "a"}:          {{ID: keyA, UserID: 7, Key: "a", RecoveryPoint: "finished", ResponseCode: &code201, ResponseBody: paid, Runs: 1}},
			{7, "b"}:          {{ID: keyB, UserID: 7, Key: "b", RecoveryPoint: "finished", ResponseCode: &code402, ResponseBody: declined, Runs: 2}},
			{7, "a-refund-1"}: {{ID: keyR, UserID: 7, Key: "a-refund-1", RecoveryPoint: "finished", ResponseCode: &code201, ResponseBody: refunded, Runs: 1}},
		},
		Payments: map[int64]*PaymentRow{
			1: {ID: 1, PublicID: "pay_1", UserID: 7, KeyID: &keyA, Amount: 500, Currency: "usd", PaymentMethod: CardVisa, Status: "succeeded", PaymentIntentID: &piA,
				AmountRefunded: 200, AmountReserved: 200, CaptureMethod: "automatic", AmountCaptured: 500},
			2: {ID: 2, PublicID: "pay_2", UserID: 7, KeyID: &keyB, Amount: 900, Currency: "usd", PaymentMethod: CardDeclined, Status: "failed",
				CaptureMethod: "automatic"},
		},
		Receipts: map[int64]int{1: 1},
		Outbox:   map[int64]int{},
		Intents: []stripefake.PaymentIntent{
			{ID: "pi_a", Amount: 500, Status: stripefake.StatusSucceeded, Metadata: metadataOf("a")},
			{ID: "pi_b", Amount: 900, Status: stripefake.StatusRequiresPaymentMethod, Metadata: metadataOf("b")},
		},
	}
	snap.PaymentsOf = map[int64][]*PaymentRow{keyA: {snap.Payments[1]}, keyB: {snap.Payments[2]}}
	snap.PaymentsByPublicID = map[string]*PaymentRow{"pay_1": snap.Payments[1], "pay_2": snap.Payments[2]}
	refund := &RefundRow{ID: 1, PublicID: "re_1", PaymentID: 1, KeyID: &keyR, Amount: 200, Status: "succeeded", StripeRefundID: &reA}
	snap.Refunds, snap.RefundsOf = map[int64]*RefundRow{1: refund}, map[int64]*RefundRow{keyR: refund}
	snap.StripeRefunds = []stripefake.Refund{{ID: reA, PaymentIntent: piA, Amount: 200, Status: stripefake.RefundSucceeded, Metadata: metadataOf("a-refund-1")}}
	return intents, snap
}

var drained = Drain{KeysDone: true, ReceiptsDone: true}

func TestVerifyPassesAConsistentRun(t *testing.T) {
	intents, snap := world()
	v := Verify(intents, snap, drained, time.Minute, nil)
	for _, c := range v.Checks {
		if !c.Passed() {
			t.Errorf("check %d failed: %v", c.N, c.Details)
		}
	}
	if v.FinishedWithClient != 3 || v.Succeeded != 1 || v.Failed != 1 || v.Resumed != 1 || v.StripeRefunds != 1 {
		t.Errorf("unexpected counts: %+v", v)
	}
}

func TestVerifyCountsAParkedKeyWithoutFailing(t *testing.T) {
	intents, snap := world()
	now, why := time.Now(), "all 5 Stripe keys of the payment hold server errors"
	k := snap.Keys[UserKey{7, "b"}][0]
	k.RecoveryPoint, k.ResponseCode, k.ResponseBody, k.NeedsAttention, k.LastError = "payment_created", nil, nil, &now, &why
	snap.Payments[2].Status = "pending"
	intents[1].Status, intents[1].Response = 0, nil
	v := Verify(intents, snap, drained, time.Minute, nil)
	for _, c := range v.Checks {
		if !c.Passed() {
			t.Errorf("check %d failed: %v", c.N, c.Details)
		}
	}
	if len(v.NeedsAttention) != 1 || !strings.Contains(v.NeedsAttention[0], why) {
		t.Errorf("parked keys: %v", v.NeedsAttention)
	}
}

func TestVerifyCatchesEachViolation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		check   int
		breakIt func(in []*Intent, s *Snapshot, d *Drain)
	}{
		{"key missing though answered", 1, func(_ []*Intent, s *Snapshot, _ *Drain) { delete(s.Keys, UserKey{7, "a"}) }},
		{"key unfinished", 1, func(_ []*Intent, s *Snapshot, _ *Drain) { s.Keys[UserKey{7, "b"}][0].RecoveryPoint = "payment_created" }},
		{"key nobody sent", 1, func(_ []*Intent, s *Snapshot, _ *Drain) { s.Keys[UserKey{7, "zz"}] = []*KeyRow{{}} }},
		{"client told otherwise", 2, func(in []*Intent, _ *Snapshot, _ *Drain) { in[0].Response = []byte(`{}`) }},
		{"201 without a charge", 2, func(_ []*Intent, s *Snapshot, _ *Drain) { s.Intents[0].Status = "requires_payment_method" }},
		{"402 with a charge", 2, func(_ []*Intent, s *Snapshot, _ *Drain) { s.Intents[1].Status = stripefake.StatusSucceeded }},
		{"payment row pending", 2, func(_ []*Intent, s *Snapshot, _ *Drain) { s.Payments[1].Status = "pending" }},
		{"unexpected answer", 2, func(in []*Intent, _ *Snapshot, _ *Drain) { in[1].Unexpected = "422" }},
		{"charged twice", 3, func(_ []*Intent, s *Snapshot, _ *Drain) {
			s.Intents = append(s.Intents, stripefake.PaymentIntent{ID: "pi_c", Amount: 500, Status: stripefake.StatusSucceeded,
				Metadata: metadataOf("a")})
		}},
		{"orphan charge", 3, func(_ []*Intent, s *Snapshot, _ *Drain) {
			s.Intents = append(s.Intents, stripefake.PaymentIntent{ID: "pi_d", Status: stripefake.StatusSucceeded,
				Metadata: metadataOf("nobody-sent-this")})
		}},
		{"another deployment's charge", 3, func(_ []*Intent, s *Snapshot, _ *Drain) {
			s.Intents[0].Metadata = intent.Intent{Namespace: uuid.New(), UserID: 7, Key: "a"}.Metadata()
		}},
		{"parked key charged twice", 3, func(_ []*Intent, s *Snapshot, _ *Drain) {
			now := time.Now()
			s.Keys[UserKey{7, "a"}][0].NeedsAttention = &now
			s.Payments[1].Status = "pending"
			s.Intents = append(s.Intents, stripefake.PaymentIntent{ID: "pi_c", Amount: 500, Status: stripefake.StatusSucceeded,
				Metadata: metadataOf("a")})
		}},
		{"refunded twice", 6, func(_ []*Intent, s *Snapshot, _ *Drain) {
			s.StripeRefunds = append(s.StripeRefunds, stripefake.Refund{ID: "re_b", PaymentIntent: "pi_a", Amount: 200,
				Status: stripefake.RefundSucceeded, Metadata: metadataOf("a-refund-1")})
		}},
		{"refund not recorded", 6, func(_ []*Intent, s *Snapshot, _ *Drain) { s.Payments[1].AmountRefunded = 0 }},
		{"refund answered but failed", 2, func(_ []*Intent, s *Snapshot, _ *Drain) { s.Refunds[1].Status = "failed" }},
		{"another payment refunded", 2, func(_ []*Intent, s *Snapshot, _ *Drain) {
			// Payment 1's id was handed out again after a failover: the
			// refund landed on the payment of key b.
			s.Refunds[1].PaymentID = 2
		}},
		{"receipt missing", 4, func(_ []*Intent, s *Snapshot, _ *Drain) { delete(s.Receipts, 1) }},
		{"receipt for a decline", 4, func(_ []*Intent, s *Snapshot, _ *Drain) { s.Receipts[2] = 1 }},
		{"receipt left in the outbox", 4, func(_ []*Intent, s *Snapshot, _ *Drain) { s.Outbox[1] = 3 }},
		{"not drained", 5, func(_ []*Intent, _ *Snapshot, d *Drain) { d.ReceiptsDone = false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			intents, snap := world()
			d := drained
			tc.breakIt(intents, snap, &d)
			v := Verify(intents, snap, d, time.Minute, nil)
			// Other checks may see the same fault from their side too.
			if c := v.Checks[tc.check-1]; c.Passed() {
				t.Errorf("check %d passed; every check: %v", c.N, fmt.Sprint(v.Checks))
			}
		})
	}
}
