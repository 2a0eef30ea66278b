package refunds

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/ids"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/problem"
)

// View is a refund as the API shows it.
type View struct {
	ID             string    `json:"id"`
	PaymentID      string    `json:"payment_id"`
	Amount         int64     `json:"amount"`
	Currency       string    `json:"currency"`
	Status         string    `json:"status"`
	Reason         *string   `json:"reason"`
	StripeRefundID *string   `json:"stripe_refund_id"`
	CreatedAt      time.Time `json:"created_at"`
}

// ViewOf returns the API view of r.
func ViewOf(r *dbsqlc.Refund) *View {
	return &View{
		ID: ID(r), PaymentID: ids.Format(ids.Payment, r.PaymentPublicID), Amount: r.Amount, Currency: r.Currency, Status: r.Status,
		Reason: r.Reason, StripeRefundID: r.StripeRefundID, CreatedAt: r.CreatedAt.UTC(),
	}
}

// ID is the public id of refund r.
func ID(r *dbsqlc.Refund) string { return ids.Format(ids.Refund, r.PublicID) }

// Location is the URL of the refund whose public id is id.
func Location(id string) string { return "/refunds/" + id }

func createdResponse(r *dbsqlc.Refund) *phases.Response {
	body, _ := json.Marshal(ViewOf(r)) // strings, numbers and a time: cannot fail
	body = append(body, '\n')          // like every JSON answer
	return &phases.Response{
		Status:  http.StatusCreated,
		Headers: map[string]string{"Content-Type": "application/json", "Location": Location(ID(r))},
		Body:    body,
	}
}

func notRefundable(paymentID string, status string) *phases.Response {
	p := problem.New(problem.PaymentNotRefundable, fmt.Sprintf("Payment %s is %s: only a succeeded (captured) payment can be refunded.", paymentID, status))
	p.PaymentID = paymentID
	return problemResponse(p)
}

func exceedsPayment(paymentID string, amount, remaining int64) *phases.Response {
	detail := fmt.Sprintf("A refund of %d exceeds the %d that remains refundable of payment %s (counting refunds still in flight).",
		amount, remaining, paymentID)
	if remaining == 0 {
		detail = fmt.Sprintf("Nothing remains refundable of payment %s (counting refunds still in flight).", paymentID)
	}
	p := problem.New(problem.RefundExceedsPayment, detail)
	p.PaymentID = paymentID
	return problemResponse(p)
}

// rejected is the answer to a refund Stripe refused: refund-rejected with
// Stripe's message, or payment-charged-back for a charged-back payment,
// which is no mistake of the client's request: the cardholder has the money
// back already, and must not be paid back another way.
func rejected(r *dbsqlc.Refund, out *Outcome) *phases.Response {
	paymentID := ids.Format(ids.Payment, r.PaymentPublicID)
	p := problem.New(problem.RefundRejected, out.Message)
	if out.Code == CodeChargeDisputed {
		p = problem.New(problem.PaymentChargedBack, fmt.Sprintf("Payment %s was charged back: the cardholder's bank took its amount "+
			"back through a dispute, so it cannot be refunded as well. Nothing was refunded.", paymentID))
	}
	p.PaymentID, p.RefundID, p.ProcessorCode = paymentID, ID(r), out.Code
	return problemResponse(p)
}

func problemResponse(p *problem.Problem) *phases.Response {
	return &phases.Response{
		Status:  p.Status,
		Headers: map[string]string{"Content-Type": problem.ContentType},
		Body:    append(p.JSON(), '\n'),
	}
}
