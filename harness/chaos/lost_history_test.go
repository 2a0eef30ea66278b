package chaos

import (
	"net/http"
	"testing"
	"time"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// createdAt is when pi_a and re_a were made; lostAt when key a's history
// was lost, three minutes later; retriedAt when its client sent it again.
var (
	createdAt = time.Unix(1_000_000, 0)
	lostAt    = createdAt.Add(3 * time.Minute)
	retriedAt = lostAt.Add(2*time.Minute + 30*time.Second)
)

// lostA is the world after key a's history (its payment 1, its refund key
// and refund) was lost and its client sent both keys again: payment 3
// adopted pi_a, refund 1 moved to it. in.Lost is set as the injector sets
// it, and each key's second sending got what the key stores now.
func lostA() ([]*Intent, *Snapshot, *LostHistory) {
	intents, snap := readopted()
	snap.Intents[0].Created, snap.StripeRefunds[0].Created = createdAt, createdAt
	a, refund := intents[0], intents[2]
	refund.Response = []byte(`{"id":"re_1","payment_id":"pay_1","amount":200,"status":"succeeded","stripe_refund_id":"re_a"}`)
	snap.Keys[UserKey{7, refund.Key}][0].ResponseBody = []byte(`{"id":"re_1","payment_id":"pay_3","amount":200,"status":"succeeded","stripe_refund_id":"re_a"}`)
	for _, in := range []*Intent{a, refund} {
		in.Lost = "lost history"
		resent(in, snap)
	}
	f := &LostHistory{At: lostAt, RetriedAt: retriedAt, Victim: a, Refunds: []*Intent{refund}, Payment: 1,
		PaymentIntent: "pi_a", Receipt: true}
	return intents, snap, f
}

func TestLostHistoryReadoptedPassesAndCounts(t *testing.T) {
	intents, snap, f := lostA()
	v := Verify(intents, snap, drained, time.Minute, nil)
	requireChecks(t, v)
	c, s := checkLostHistory([]*LostHistory{f}, snap)
	if !c.Passed() || c.Checked != 2 {
		t.Fatalf("check 10: %d checked, %v", c.Checked, c.Details)
	}
	if s.Ended[LostReadopted] != 2 || s.ReceiptsAgain != 1 || s.Hidden != 1 || s.MinAge != 5*time.Minute+30*time.Second {
		t.Errorf("summary %+v", s)
	}
}

// The defect 70e3608 fixed, as the harness sees it: the retry found
// nothing and charged again under the next Stripe key.
func TestLostHistoryChargedAgainFails(t *testing.T) {
	intents, snap, f := lostA()
	pi2 := "pi_a2"
	snap.Intents = append(snap.Intents, stripefake.PaymentIntent{ID: pi2, Amount: 500, Status: stripefake.StatusSucceeded,
		Metadata: metadataOf("a"), Created: retriedAt.Add(time.Minute)})
	snap.Payments[3].PaymentIntentID = &pi2
	k := snap.Keys[UserKey{7, "a"}][0]
	k.ResponseBody = []byte(`{"id":"pay_3","amount":500,"currency":"usd","status":"succeeded","stripe_payment_intent_id":"pi_a2"}`)
	resent(intents[0], snap)
	v := Verify(intents, snap, drained, time.Minute, nil)
	requireChecks(t, v, 2, 3, 6)
	c, s := checkLostHistory([]*LostHistory{f}, snap)
	if c.Passed() || s.Ended[LostViolation] != 1 {
		t.Errorf("check 10 passed a second charge: %+v", s)
	}
}

func TestLostHistoryKeyNeverSentAgainFails(t *testing.T) {
	intents, snap, f := lostA()
	intents[0].Resend = nil
	if c, _ := checkLostHistory([]*LostHistory{f}, snap); c.Passed() {
		t.Error("check 10 passed a lost key its client never sent again")
	}
}

func TestLostHistoryAnsweredOtherwiseFails(t *testing.T) {
	intents, snap, f := lostA()
	intents[0].Resend.Status = http.StatusPaymentRequired
	if c, _ := checkLostHistory([]*LostHistory{f}, snap); c.Passed() {
		t.Error("check 10 passed a 201 answered 402 after the loss")
	}
}

// A refund refused, lost with its payment and not sent again: final for
// its client, and nothing may be refunded for it.
func TestLostHistoryRefusalKeptOnlyWhenNothingRefunded(t *testing.T) {
	intents, snap, f := lostA()
	refusal := &Intent{User: intents[0].User, Key: "a-refund-2", Refund: true, Parent: intents[0], Status: http.StatusBadRequest,
		Response: []byte(`{"status":400}`), Lost: "lost history"}
	f.Refunds = append(f.Refunds, refusal)
	c, s := checkLostHistory([]*LostHistory{f}, snap)
	if !c.Passed() || s.Ended[LostRefusal] != 1 {
		t.Fatalf("check 10: %v, %+v", c.Details, s)
	}
	snap.StripeRefunds = append(snap.StripeRefunds, stripefake.Refund{ID: "re_x", Amount: 1, Metadata: metadataOf("a-refund-2")})
	if c, _ := checkLostHistory([]*LostHistory{f}, snap); c.Passed() {
		t.Error("check 10 passed a lost refusal that refunded")
	}
}

// parkedA is lostA with key a handed to an operator when sent again (a
// lookup too long to page through): payment 3 pending, its refund key not
// sent again, Stripe's re_a without a row until the operator settles it.
func parkedA() ([]*Intent, *Snapshot, *LostHistory) {
	intents, snap, f := lostA()
	k := snap.Keys[UserKey{7, "a"}][0]
	at, why := retriedAt, "more than 10000 PaymentIntents were created in the lookup's window"
	k.RecoveryPoint, k.ResponseCode, k.ResponseBody, k.NeedsAttention, k.LastError = "payment_created", nil, nil, &at, &why
	p := snap.Payments[3]
	p.Status, p.PaymentIntentID, p.AmountRefunded, p.AmountReserved = "pending", nil, 0, 0
	snap.Receipts = map[int64]int{}
	refund := intents[2]
	delete(snap.Keys, UserKey{7, refund.Key})
	snap.Refunds, snap.RefundsOf = map[int64]*RefundRow{}, map[int64]*RefundRow{}
	intents[0].Resend = &Intent{Key: "a", Unexpected: "503 needs-attention: {}"}
	refund.Resend, refund.AwaitsOperator = nil, true
	return intents, snap, f
}

func TestLostHistoryRefundsOfAParkedPaymentAwaitTheOperator(t *testing.T) {
	intents, snap, f := parkedA()
	v := Verify(intents, snap, drained, time.Minute, nil)
	requireChecks(t, v)
	if len(v.NeedsAttention) != 2 {
		t.Errorf("needs attention: %v", v.NeedsAttention)
	}
	c, s := checkLostHistory([]*LostHistory{f}, snap)
	if !c.Passed() || s.Ended[LostParked] != 2 {
		t.Errorf("check 10: %v, %+v", c.Details, s)
	}

	// Not marked as waiting, the refund is a key lost for good.
	intents[2].AwaitsOperator = false
	requireChecks(t, Verify(intents, snap, drained, time.Minute, nil), 1, 6)
	if c, _ := checkLostHistory([]*LostHistory{f}, snap); c.Passed() {
		t.Error("check 10 passed a lost refund never sent again")
	}
}
