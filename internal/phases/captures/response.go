package captures

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/problem"
)

// okResponse is the answer of a capture or cancel that took: 200 and the
// payment as it now stands.
func okResponse(p *dbsqlc.Payment) *phases.Response {
	body, _ := json.Marshal(payments.ViewOf(p)) // strings, numbers and a time: cannot fail
	return &phases.Response{
		Status:  http.StatusOK,
		Headers: map[string]string{"Content-Type": "application/json"},
		Body:    append(body, '\n'),
	}
}

// refused is the stored 400 of an action the payment does not allow: it is
// not an authorization (any more), or another key claimed it first.
func refused(action Action, p *dbsqlc.Payment, claimed bool) *phases.Response {
	verb := "captured"
	if action == Cancel {
		verb = "canceled"
	}
	detail := fmt.Sprintf("Payment %s is %s (capture_method %s): only an authorized payment (requires_capture) can be %s.",
		payments.ID(p), p.Status, p.CaptureMethod, verb)
	if claimed {
		detail = fmt.Sprintf("Payment %s is being captured or canceled under another Idempotency-Key.", payments.ID(p))
	}
	return refusal(action, p, detail)
}

// refusal is the stored 400 of action on p, saying detail.
func refusal(action Action, p *dbsqlc.Payment, detail string) *phases.Response {
	t := problem.PaymentNotCapturable
	if action == Cancel {
		t = problem.PaymentNotCancelable
	}
	prob := problem.New(t, detail)
	prob.PaymentID = payments.ID(p)
	return problemResponse(prob)
}

// exceedsAuthorization is the stored 400 of a capture of more than was
// authorized.
func exceedsAuthorization(p *dbsqlc.Payment, amount int64) *phases.Response {
	prob := problem.New(problem.CaptureExceedsAuthorization,
		fmt.Sprintf("A capture of %d exceeds the %d authorized for payment %s.", amount, p.Amount, payments.ID(p)))
	prob.PaymentID = payments.ID(p)
	return problemResponse(prob)
}

func problemResponse(p *problem.Problem) *phases.Response {
	return &phases.Response{
		Status:  p.Status,
		Headers: map[string]string{"Content-Type": problem.ContentType},
		Body:    append(p.JSON(), '\n'),
	}
}
