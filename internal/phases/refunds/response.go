package refunds

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/problem"
)

// View is a refund as the API shows it.
type View struct {
	ID             int64     `json:"id"`
	PaymentID      int64     `json:"payment_id"`
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
		ID: r.ID, PaymentID: r.PaymentID, Amount: r.Amount, Currency: r.Currency, Status: r.Status,
		Reason: r.Reason, StripeRefundID: r.StripeRefundID, CreatedAt: r.CreatedAt.UTC(),
	}
}

// Location is the URL of refund id.
func Location(id int64) string { return "/refunds/" + strconv.FormatInt(id, 10) }

func createdResponse(r *dbsqlc.Refund) *phases.Response {
	body, _ := json.Marshal(ViewOf(r)) // strings, numbers and a time: cannot fail
	body = append(body, '\n')          // like every JSON answer
	return &phases.Response{
		Status:  http.StatusCreated,
		Headers: map[string]string{"Content-Type": "application/json", "Location": Location(r.ID)},
		Body:    body,
	}
}

func notRefundable(paymentID int64, status string) *phases.Response {
	p := problem.New(problem.PaymentNotRefundable, fmt.Sprintf("Payment %d is %s: only a succeeded payment can be refunded.", paymentID, status))
	p.PaymentID = paymentID
	return problemResponse(p)
}

func exceedsPayment(paymentID, amount, remaining int64) *phases.Response {
	detail := fmt.Sprintf("A refund of %d exceeds the %d that remains refundable of payment %d (counting refunds still in flight).",
		amount, remaining, paymentID)
	if remaining == 0 {
		detail = fmt.Sprintf("Nothing remains refundable of payment %d (counting refunds still in flight).", paymentID)
	}
	p := problem.New(problem.RefundExceedsPayment, detail)
	p.PaymentID = paymentID
	return problemResponse(p)
}

func rejected(r *dbsqlc.Refund, out *Outcome) *phases.Response {
	p := problem.New(problem.RefundRejected, out.Message)
	p.PaymentID, p.RefundID, p.ProcessorCode = r.PaymentID, r.ID, out.Code
	return problemResponse(p)
}

func problemResponse(p *problem.Problem) *phases.Response {
	return &phases.Response{
		Status:  p.Status,
		Headers: map[string]string{"Content-Type": problem.ContentType},
		Body:    append(p.JSON(), '\n'),
	}
}
