package chaos

import (
	"testing"
	"time"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/intent"
)

// manualWorld is world() and an authorized payment of 1000 (key m), of
// which a capture key took 300 while a cancel key racing it was refused.
func manualWorld() ([]*Intent, *Snapshot) {
	intents, snap := world()
	user := intents[0].User
	authorized := []byte(`{"id":"pay_4","amount":1000,"currency":"usd","status":"requires_capture","capture_method":"manual","amount_captured":0}`)
	captured := []byte(`{"id":"pay_4","amount":1000,"currency":"usd","status":"succeeded","capture_method":"manual","amount_captured":300}`)
	refused := []byte(`{"type":"https://paymentsd.dev/problems/payment-not-cancelable","status":400}`)
	paid := &Intent{User: user, Key: "m", Card: CardVisa, Amount: 1000, Manual: true, Status: 201, Response: authorized, MustExist: true}
	capture := &Intent{User: user, Key: "m-capture-1", Action: ActionCapture, PaymentID: "pay_4", Parent: paid, Amount: 300,
		Status: 200, Response: captured, MustExist: true}
	cancel := &Intent{User: user, Key: "m-cancel-2", Action: ActionCancel, PaymentID: "pay_4", Parent: paid,
		Status: 400, Response: refused, MustExist: true}
	capture.Rival, cancel.Rival = cancel, capture
	intents = append(intents, paid, capture, cancel)

	code200, code201, code400 := int32(200), int32(201), int32(400)
	keyM, piM := int64(40), "pi_m"
	snap.Keys[UserKey{7, "m"}] = []*KeyRow{{ID: keyM, UserID: 7, Key: "m", RecoveryPoint: "finished", ResponseCode: &code201, ResponseBody: authorized, Runs: 1}}
	snap.Keys[UserKey{7, "m-capture-1"}] = []*KeyRow{{ID: 41, UserID: 7, Key: "m-capture-1", RecoveryPoint: "finished", ResponseCode: &code200, ResponseBody: captured, Runs: 1}}
	snap.Keys[UserKey{7, "m-cancel-2"}] = []*KeyRow{{ID: 42, UserID: 7, Key: "m-cancel-2", RecoveryPoint: "finished", ResponseCode: &code400, ResponseBody: refused, Runs: 1}}
	p := &PaymentRow{ID: 4, PublicID: "pay_4", UserID: 7, KeyID: &keyM, Amount: 1000, Currency: "usd", PaymentMethod: CardVisa,
		Status: "succeeded", PaymentIntentID: &piM, CaptureMethod: "manual", AmountCaptured: 300}
	snap.Payments[4], snap.PaymentsOf[keyM], snap.PaymentsByPublicID["pay_4"] = p, []*PaymentRow{p}, p
	snap.Receipts[4] = 1
	md := metadataOf("m")
	md[intent.MetadataCaptureIntent] = intent.Intent{Namespace: namespace, UserID: 7, Key: "m-capture-1"}.ID()
	snap.Intents = append(snap.Intents, stripefake.PaymentIntent{ID: piM, Amount: 1000, AmountReceived: 300, CaptureMethod: "manual",
		Status: stripefake.StatusSucceeded, Metadata: md})
	return intents, snap
}

func TestVerifyPassesManualPayments(t *testing.T) {
	t.Parallel()
	intents, snap := manualWorld()
	requireChecks(t, Verify(intents, snap, drained, time.Minute, nil))
}

func TestVerifyCatchesWhatACaptureMustNotDo(t *testing.T) {
	t.Parallel()
	lastIntent := func(s *Snapshot) *stripefake.PaymentIntent { return &s.Intents[len(s.Intents)-1] }
	for _, tc := range []struct {
		name    string
		failing []int
		breakIt func(in []*Intent, s *Snapshot)
	}{
		{"captured and canceled", []int{11}, func(in []*Intent, s *Snapshot) {
			code := int32(200)
			k := s.Keys[UserKey{7, "m-cancel-2"}][0]
			k.ResponseCode, k.ResponseBody = &code, []byte(`{"id":"pay_4","status":"canceled","amount_captured":0}`)
			in[len(in)-1].Status, in[len(in)-1].Response = 200, k.ResponseBody
		}},
		{"captured other than asked", []int{2, 11}, func(_ []*Intent, s *Snapshot) { lastIntent(s).AmountReceived = 1000 }},
		{"answered another key's capture", []int{11}, func(_ []*Intent, s *Snapshot) {
			lastIntent(s).Metadata[intent.MetadataCaptureIntent] = intent.Intent{Namespace: namespace, UserID: 7, Key: "m-capture-9"}.ID()
		}},
		{"answered a capture made outside paymentsd", []int{11}, func(_ []*Intent, s *Snapshot) {
			delete(lastIntent(s).Metadata, intent.MetadataCaptureIntent)
		}},
		{"payment row not captured", []int{2, 3, 4, 11}, func(_ []*Intent, s *Snapshot) {
			s.Payments[4].Status, s.Payments[4].AmountCaptured = "requires_capture", 0
		}},
		{"expired at Stripe, not in the row", []int{2, 11}, func(_ []*Intent, s *Snapshot) {
			pi := lastIntent(s)
			pi.Status, pi.AmountReceived = "canceled", 0
		}},
		{"authorized twice", []int{2, 3}, func(_ []*Intent, s *Snapshot) {
			s.Intents = append(s.Intents, stripefake.PaymentIntent{ID: "pi_m2", Amount: 1000, CaptureMethod: "manual",
				Status: "requires_capture", Metadata: metadataOf("m")})
		}},
		{"refused for no reason", []int{11}, func(_ []*Intent, s *Snapshot) {
			s.Keys[UserKey{7, "m-cancel-2"}][0].ResponseBody = []byte(`{"type":"https://paymentsd.dev/problems/invalid-request","status":400}`)
		}},
		{"receipt before capture", []int{4, 11}, func(_ []*Intent, s *Snapshot) {
			s.Payments[4].Status, s.Payments[4].AmountCaptured = "requires_capture", 0
			pi := lastIntent(s)
			pi.Status, pi.AmountReceived = "requires_capture", 0
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			intents, snap := manualWorld()
			tc.breakIt(intents, snap)
			requireChecks(t, Verify(intents, snap, drained, time.Minute, nil), tc.failing...)
		})
	}
}
