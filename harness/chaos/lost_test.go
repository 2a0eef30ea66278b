package chaos

import (
	"net/http"
	"testing"
	"time"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// readopted is the world after a failover lost key a's commits and a
// reconciling client sent it again: the key was stored anew and made
// payment 3, which adopted Stripe's PaymentIntent pi_a; the refund of
// payment 1 became a refund of payment 3.
func readopted() ([]*Intent, *Snapshot) {
	intents, snap := world()
	paid := []byte(`{"id":"pay_3","amount":500,"currency":"usd","status":"succeeded","stripe_payment_intent_id":"pi_a"}`)
	k := snap.Keys[UserKey{7, "a"}][0]
	k.ID, k.ResponseBody = 20, paid
	p := snap.Payments[1]
	delete(snap.Payments, 1)
	p.ID, p.PublicID, p.KeyID = 3, "pay_3", &k.ID
	snap.Payments[3] = p
	snap.PaymentsOf = map[int64][]*PaymentRow{20: {p}, 11: {snap.Payments[2]}}
	snap.PaymentsByPublicID = map[string]*PaymentRow{"pay_3": p, "pay_2": snap.Payments[2]}
	snap.Receipts = map[int64]int{3: 1}
	snap.Refunds[1].PaymentID = 3
	return intents, snap
}

// resent records that the client sent in's key again and got what its key
// stores now.
func resent(in *Intent, snap *Snapshot) {
	k := snap.Keys[UserKey{in.User.UserID, in.Key}][0]
	in.Resend = &Intent{Key: in.Key, Status: int(*k.ResponseCode), Response: k.ResponseBody}
}

var promoted = Failover{StoppedAt: time.Unix(100, 0), PromotedAt: time.Unix(101, 0), UpAtStop: []int{11, 12}}

// recovered is a failover the service came through: it answered 201 after
// the promotion, both processes heartbeat, River leads, and the completer
// and a receipt ran on the new primary.
func recovered(mode FailoverMode, snap *Snapshot) *Recovery {
	after := promoted.PromotedAt.Add(time.Second)
	snap.Service = ServiceRows{
		HeartbeatAge: map[int]time.Duration{11: time.Second, 12: 0},
		Leader:       "leader",
		LastFinished: map[string]time.Time{"completer": after, "receipt": after},
	}
	return &Recovery{Mode: mode, Failover: promoted, FirstCreated: after, Running: []int{11, 12}, HeartbeatInterval: time.Second}
}

func requireChecks(t *testing.T, v *Verdict, failing ...int) {
	t.Helper()
	for _, c := range v.Checks {
		want := false
		for _, n := range failing {
			want = want || n == c.N
		}
		if c.Passed() == want {
			t.Errorf("check %d (%s): passed %v, want %v; %v", c.N, c.Name, c.Passed(), !want, c.Details)
		}
	}
}

func TestMarkLostFindsAnswersTheDatabaseNoLongerHolds(t *testing.T) {
	t.Parallel()
	intents, snap := world()
	if lost := MarkLost(intents, snap); len(lost) != 0 {
		t.Fatalf("nothing was lost, MarkLost found %v", lost)
	}

	intents, snap = readopted()
	delete(snap.Keys, UserKey{7, "b"})
	lost := MarkLost(intents, snap)
	if len(lost) != 2 || lost[0].Key != "a" || lost[1].Key != "b" {
		t.Fatalf("lost: %v", lost)
	}
	if intents[0].Lost != "the key stores another answer (201)" || intents[1].Lost != "no key row" || intents[2].Lost != "" {
		t.Errorf("why: %q, %q, %q", intents[0].Lost, intents[1].Lost, intents[2].Lost)
	}
}

func TestToResendChoosesWhatAReconcilingClientSendsAgain(t *testing.T) {
	t.Parallel()
	intents, snap := world()
	user := intents[0].User
	// A lost payment and its refund; an acknowledged key that was lost;
	// a key that never reached the store; one whose charge Stripe holds
	// though its row was lost and its client gave up; and a refund that
	// was told its lost payment does not exist.
	delete(snap.Keys, UserKey{7, "a"})
	delete(snap.Keys, UserKey{7, "a-refund-1"})
	acked := &Intent{User: user, Key: "acked", MustExist: true, GaveUp: true}
	never := &Intent{User: user, Key: "never", GaveUp: true}
	charged := &Intent{User: user, Key: "charged", GaveUp: true}
	snap.Intents = append(snap.Intents, stripefake.PaymentIntent{ID: "pi_c", Status: stripefake.StatusSucceeded, Metadata: metadataOf("charged")})
	told404 := &Intent{User: user, Key: "a-refund-2", Refund: true, Parent: intents[0], Unexpected: "404 not-found"}
	refused := &Intent{User: user, Key: "a-refund-3", Refund: true, Parent: intents[0], Status: http.StatusBadRequest,
		Response: []byte(`{"type":"https://paymentsd.dev/problems/refund-exceeds-payment"}`), MustExist: true}
	intents = append(intents, acked, never, charged, told404, refused)
	MarkLost(intents, snap)

	payments, refunds := ToResend(intents, snap)
	if keys := keysOf(payments); len(keys) != 3 || keys[0] != "a" || keys[1] != "acked" || keys[2] != "charged" {
		t.Errorf("payments sent again: %v", keys)
	}
	if keys := keysOf(refunds); len(keys) != 2 || keys[0] != "a-refund-1" || keys[1] != "a-refund-2" {
		t.Errorf("refunds sent again: %v", keys)
	}
}

// A refund refused before the failover, its refusal lost: final for its
// client, never sent again, and nothing was refunded for it.
func TestVerifyAcceptsALostRefusalNothingRefunded(t *testing.T) {
	t.Parallel()
	intents, snap := readopted()
	refused := &Intent{User: intents[0].User, Key: "a-refund-3", Refund: true, Parent: intents[0], Status: http.StatusBadRequest,
		Response: []byte(`{"type":"https://paymentsd.dev/problems/refund-exceeds-payment"}`), MustExist: true}
	intents = append(intents, refused)
	MarkLost(intents, snap)
	resent(intents[0], snap)
	v := Verify(intents, snap, drained, time.Minute, recovered(FailoverAsync, snap))
	requireChecks(t, v)
	if refused.Lost != "no key row" || v.LostRefusals != 1 || v.LostAnswers != 2 {
		t.Errorf("refusal lost %q; lost refusals %d, lost answers %d", refused.Lost, v.LostRefusals, v.LostAnswers)
	}

	snap.StripeRefunds = append(snap.StripeRefunds, stripefake.Refund{ID: "re_z", PaymentIntent: "pi_a", Amount: 100,
		Status: stripefake.RefundSucceeded, Metadata: metadataOf("a-refund-3")})
	requireChecks(t, Verify(intents, snap, drained, time.Minute, recovered(FailoverAsync, snap)), 6, 7)
}

func keysOf(ins []*Intent) []string {
	var keys []string
	for _, in := range ins {
		keys = append(keys, in.Key)
	}
	return keys
}

func TestVerifyAcceptsALostPaymentReadoptedFromStripe(t *testing.T) {
	t.Parallel()
	intents, snap := readopted()
	MarkLost(intents, snap)
	resent(intents[0], snap)
	v := Verify(intents, snap, drained, time.Minute, recovered(FailoverAsync, snap))
	requireChecks(t, v)
	if v.LostAnswers != 1 || v.LostPayments != 1 || v.Readopted != 1 || v.Resent != 1 {
		t.Errorf("counts: lost %d (payments %d), re-adopted %d, resent %d", v.LostAnswers, v.LostPayments, v.Readopted, v.Resent)
	}
}

func TestVerifyFailsWhatAFailoverMustNotDo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		mode    FailoverMode
		failing []int
		breakIt func(in []*Intent, s *Snapshot, r *Recovery)
	}{
		{"a synchronous standby lost an answer", FailoverSync, []int{7}, func([]*Intent, *Snapshot, *Recovery) {}},
		{"charged again", FailoverAsync, []int{2, 3, 6, 7}, func(_ []*Intent, s *Snapshot, _ *Recovery) {
			pi := "pi_again"
			s.Payments[3].PaymentIntentID = &pi
			s.Keys[UserKey{7, "a"}][0].ResponseBody = []byte(`{"id":"pay_3","amount":500,"status":"succeeded","stripe_payment_intent_id":"pi_again"}`)
			s.Intents = append(s.Intents, stripefake.PaymentIntent{ID: pi, Amount: 500, Status: stripefake.StatusSucceeded, Metadata: metadataOf("a")})
		}},
		{"answered otherwise than the resend", FailoverAsync, []int{2}, func(in []*Intent, _ *Snapshot, _ *Recovery) {
			in[0].Resend.Status = http.StatusServiceUnavailable
		}},
		{"declined, lost, then answered 201", FailoverAsync, []int{2, 7}, func(in []*Intent, s *Snapshot, _ *Recovery) {
			in[0].Status, in[0].Card = http.StatusPaymentRequired, CardDeclined
		}},
		{"no failover", FailoverAsync, []int{8}, func(_ []*Intent, _ *Snapshot, r *Recovery) { r.Failover.PromotedAt = time.Time{} }},
		{"never recovered", FailoverAsync, []int{8}, func(_ []*Intent, _ *Snapshot, r *Recovery) { r.FirstCreated = time.Time{} }},
		{"a process exited", FailoverAsync, []int{8}, func(_ []*Intent, _ *Snapshot, r *Recovery) { r.ExitedOnTheirOwn = []int{12} }},
		{"heartbeats stopped", FailoverAsync, []int{8}, func(_ []*Intent, s *Snapshot, _ *Recovery) { s.Service.HeartbeatAge[11] = time.Minute }},
		{"not registered", FailoverAsync, []int{8}, func(_ []*Intent, s *Snapshot, _ *Recovery) { delete(s.Service.HeartbeatAge, 12) }},
		{"no River leader", FailoverAsync, []int{8}, func(_ []*Intent, s *Snapshot, _ *Recovery) { s.Service.Leader = "" }},
		{"completer stopped", FailoverAsync, []int{8}, func(_ []*Intent, s *Snapshot, r *Recovery) {
			s.Service.LastFinished["completer"] = r.Failover.StoppedAt
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			intents, snap := readopted()
			MarkLost(intents, snap)
			resent(intents[0], snap)
			rec := recovered(tc.mode, snap)
			tc.breakIt(intents, snap, rec)
			requireChecks(t, Verify(intents, snap, drained, time.Minute, rec), tc.failing...)
		})
	}
}

func TestFirstAfter(t *testing.T) {
	t.Parallel()
	at := func(s int64) time.Time { return time.Unix(s, 0) }
	times := []time.Time{at(5), at(1), at(9), at(3)}
	if got, ok := firstAfter(times, at(3)); !ok || !got.Equal(at(5)) {
		t.Errorf("first after 3: %v %v", got, ok)
	}
	if _, ok := firstAfter(times, at(9)); ok {
		t.Error("nothing after 9")
	}
}
