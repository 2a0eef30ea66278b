package payments

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/problem"
)

// View is a payment as the API shows it.
type View struct {
	ID                    string  `json:"id"`
	Amount                int64   `json:"amount"`
	Currency              string  `json:"currency"`
	Status                string  `json:"status"`
	StripePaymentIntentID *string `json:"stripe_payment_intent_id"`
	Description           *string `json:"description"`
	// AmountRefunded is what succeeded refunds gave back, in minor units.
	AmountRefunded int64 `json:"amount_refunded"`
	// CaptureMethod is automatic or manual (authorized, then captured).
	CaptureMethod string `json:"capture_method"`
	// AmountCaptured is what was captured, in minor units: 0 until then.
	AmountCaptured int64 `json:"amount_captured"`
	// Disputed is set once the cardholder disputed the charge.
	Disputed  bool      `json:"disputed"`
	CreatedAt time.Time `json:"created_at"`
}

// ViewOf returns the API view of p.
func ViewOf(p *dbsqlc.Payment) *View {
	return &View{
		ID:                    ID(p),
		Amount:                p.Amount,
		Currency:              p.Currency,
		Status:                p.Status,
		StripePaymentIntentID: p.StripePaymentIntentID,
		Description:           p.Description,
		AmountRefunded:        p.AmountRefunded,
		CaptureMethod:         p.CaptureMethod,
		AmountCaptured:        p.AmountCaptured,
		Disputed:              p.DisputedAt != nil,
		CreatedAt:             p.CreatedAt.UTC(),
	}
}

// Location is the URL of the payment whose public id is id.
func Location(id string) string { return "/payments/" + id }

func createdResponse(p *dbsqlc.Payment) *phases.Response {
	body, _ := json.Marshal(ViewOf(p)) // strings, numbers and a time: cannot fail
	body = append(body, '\n')          // like every JSON answer
	return &phases.Response{
		Status:  http.StatusCreated,
		Headers: map[string]string{"Content-Type": "application/json", "Location": Location(ID(p))},
		Body:    body,
	}
}

func declinedResponse(p *dbsqlc.Payment, c *Charge) *phases.Response {
	prob := problem.New(problem.CardDeclined, c.Message)
	prob.PaymentID, prob.DeclineCode = ID(p), c.Code
	return problemResponse(prob)
}

func rejectedResponse(p *dbsqlc.Payment, c *Charge) *phases.Response {
	prob := problem.New(problem.PaymentRejected, c.Message)
	prob.PaymentID, prob.ProcessorCode = ID(p), c.Code
	return problemResponse(prob)
}

func problemResponse(p *problem.Problem) *phases.Response {
	return &phases.Response{
		Status:  p.Status,
		Headers: map[string]string{"Content-Type": problem.ContentType},
		Body:    append(p.JSON(), '\n'),
	}
}
