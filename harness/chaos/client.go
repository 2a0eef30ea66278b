package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Clients drives the load: Config.Clients goroutines, each a client that
// sends one intent at a time and retries it until it has a definite answer
// or gives up.
type Clients struct {
	Cfg     *Config
	Users   []User
	Targets []string // base URLs of the serve processes
	Ledger  *Ledger
	HTTP    *http.Client
	// Events, when set, is told what Reconcile sends again.
	Events *Events
	// FinalOnAttention makes a 503 needs-attention final: the client stops
	// sending a key the service handed to an operator (lost history's
	// retries do; the load's clients retry until the run ends).
	FinalOnAttention bool
}

// NewHTTPClient is the clients' shared HTTP client. Its timeout exceeds the
// service's own request bound (the 10 s lease), so a slow answer arrives.
func NewHTTPClient(clients int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = clients
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

// Run runs the clients until stopNew is closed (then each finishes the
// intent it holds) or ctx ends (then each abandons it at once), and returns
// when all stopped.
func (c *Clients) Run(ctx context.Context, stopNew <-chan struct{}) {
	var wg sync.WaitGroup
	for i := range c.Cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.client(ctx, stopNew, i)
		}()
	}
	wg.Wait()
}

func (c *Clients) client(ctx context.Context, stopNew <-chan struct{}, idx int) {
	rng := rand.New(rand.NewPCG(c.Cfg.Seed, uint64(idx)+1))
	for n := 1; ; n++ {
		select {
		case <-stopNew:
			return
		case <-ctx.Done():
			return
		default:
		}
		in := c.newIntent(rng, idx, n)
		c.Ledger.Add(in)
		c.drive(ctx, rng, in)
		if in.Status == http.StatusCreated {
			refundable := paidAmount(in)
			if in.Manual {
				refundable = c.settle(ctx, rng, in)
			}
			if refundable > 0 && rng.Float64() < c.Cfg.Refund {
				c.refund(ctx, rng, in, refundable)
			}
		}
		c.Ledger.Update(func() { in.Done = true })
		if c.Cfg.Think > 0 {
			select {
			case <-stopNew:
				return
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(rng.Int64N(int64(c.Cfg.Think)))):
			}
		}
	}
}

// newIntent draws the n-th intent of client idx.
func (c *Clients) newIntent(rng *rand.Rand, idx, n int) *Intent {
	in := &Intent{
		Client:  idx,
		User:    c.Users[rng.IntN(len(c.Users))],
		Key:     fmt.Sprintf("chaos-%d-c%02d-%06d", c.Cfg.Seed, idx, n),
		Card:    CardVisa,
		Amount:  100 + rng.Int64N(99999-100+1),
		Started: time.Now(),
	}
	if rng.Float64() < c.Cfg.Decline {
		in.Card = CardDeclined
	}
	if rng.Float64() < c.Cfg.GiveUp {
		in.GiveUpAfter = 1 + rng.IntN(2)
	}
	body := map[string]any{"amount": in.Amount, "currency": "usd", "payment_method": in.Card}
	if rng.Float64() < c.Cfg.Manual {
		in.Manual = true
		body["capture_method"] = "manual"
	}
	if rng.IntN(2) == 0 {
		body["description"] = fmt.Sprintf("chaos client %d intent %d", idx, n)
	}
	in.Body, _ = json.Marshal(body)
	return in
}

// paidAmount is the amount of the payment in.Response describes.
func paidAmount(in *Intent) int64 {
	var payment struct {
		Amount int64 `json:"amount"`
	}
	_ = json.Unmarshal(in.Response, &payment)
	return payment.Amount
}

// refund refunds the payment paid.Response made, of which amount was
// captured, in one of three ways: all of it, a third of it, or three
// concurrent refunds of 40% each under their own keys, of which the
// service must refuse one.
func (c *Clients) refund(ctx context.Context, rng *rand.Rand, paid *Intent, amount int64) {
	var payment struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(paid.Response, &payment) != nil || payment.ID == "" {
		return
	}
	newRefund := func(i int, body map[string]any) *Intent {
		in := &Intent{Client: paid.Client, User: paid.User, Key: fmt.Sprintf("%s-refund-%d", paid.Key, i),
			Refund: true, PaymentID: payment.ID, Parent: paid, GiveUpAfter: paid.GiveUpAfter, Started: time.Now()}
		if a, ok := body["amount"].(int64); ok {
			in.Amount = a
		}
		in.Body, _ = json.Marshal(body)
		c.Ledger.Add(in)
		return in
	}
	switch rng.IntN(3) {
	case 0:
		c.drive(ctx, rng, newRefund(1, map[string]any{}))
	case 1:
		c.drive(ctx, rng, newRefund(1, map[string]any{"amount": max(amount/3, 1), "reason": "requested_by_customer"}))
	default:
		var wg sync.WaitGroup
		for i := range 3 {
			in := newRefund(i+1, map[string]any{"amount": max(amount*2/5, 1)})
			own := rand.New(rand.NewPCG(rng.Uint64(), uint64(i)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.drive(ctx, own, in)
			}()
		}
		wg.Wait()
	}
}

// drive sends the intent until it is answered definitely, the client gives
// up, or ctx ends.
func (c *Clients) drive(ctx context.Context, rng *rand.Rand, in *Intent) {
	for attempt := 1; ; attempt++ {
		a := c.post(ctx, c.Targets[rng.IntN(len(c.Targets))], in)
		c.Ledger.Answer(in, a.label)
		if a.status == http.StatusCreated && !in.Refund {
			c.Ledger.Created(time.Now())
		}
		if a.mustExist {
			in.MustExist = true
		}
		switch {
		case a.definite:
			c.Ledger.Finish(in, func(in *Intent) { in.Status, in.Response, in.Replayed = a.status, a.body, a.replayed })
			return
		case !a.retry:
			c.Ledger.Finish(in, func(in *Intent) { in.Unexpected = a.label + ": " + string(a.body) })
			return
		case in.GiveUpAfter > 0 && attempt >= in.GiveUpAfter:
			c.Ledger.Finish(in, func(in *Intent) { in.GaveUp = true })
			return
		}
		select {
		case <-ctx.Done():
			c.Ledger.Finish(in, func(in *Intent) { in.Abandoned = true })
			return
		case <-time.After(backoff(rng, attempt, a.retryAfter)):
		}
	}
}

// backoff is the pause after the attempt-th failure: exponential from 100 ms
// up to 3 s, with equal jitter, and never shorter than the server's
// Retry-After.
func backoff(rng *rand.Rand, attempt int, retryAfter time.Duration) time.Duration {
	base := min(100*time.Millisecond<<min(attempt-1, 8), 3*time.Second)
	d := base/2 + time.Duration(rng.Int64N(int64(base/2)+1))
	return max(d, retryAfter)
}

// attempt is the answer to one POST.
type attempt struct {
	label      string
	status     int
	body       []byte
	replayed   bool
	definite   bool
	retry      bool
	mustExist  bool
	retryAfter time.Duration
}

func (c *Clients) post(ctx context.Context, target string, in *Intent) attempt {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target+in.Path(), bytes.NewReader(in.Body))
	if err != nil {
		return attempt{label: "harness:" + err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+in.User.APIKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", in.Key)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return attempt{label: "net:" + transportKind(err), retry: true}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return attempt{label: "net:" + transportKind(err), retry: true}
	}
	a := attempt{status: resp.StatusCode, body: body, replayed: resp.Header.Get("Idempotent-Replayed") == "true"}
	slug := problemSlug(resp.Header.Get("Content-Type"), body)
	a.label = strconv.Itoa(a.status)
	if slug != "" {
		a.label += " " + slug
	}
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
		a.retryAfter = time.Duration(secs) * time.Second
	}
	switch s := a.status; {
	case s == http.StatusCreated, s == http.StatusPaymentRequired,
		s == http.StatusBadRequest && (slug == "payment-rejected" || strings.HasPrefix(slug, "refund-") ||
			slug == "payment-not-refundable" || slug == "payment-charged-back"),
		in.Action != "" && (s == http.StatusOK || s == http.StatusBadRequest && actionRefusal(slug)):
		a.definite, a.mustExist = true, true
	case s == http.StatusConflict:
		a.retry, a.mustExist = true, true
	case s == http.StatusServiceUnavailable && slug == "processor-unavailable":
		a.retry, a.mustExist = true, true
	case s == http.StatusServiceUnavailable && slug == "needs-attention" && c.FinalOnAttention:
		a.mustExist = true
	case s == http.StatusTooManyRequests, s >= 500:
		a.retry = true
	}
	return a
}

// problemSlug is the last segment of a problem+json body's type URI.
func problemSlug(contentType string, body []byte) string {
	if !strings.HasPrefix(contentType, "application/problem+json") {
		return ""
	}
	var p struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(body, &p) != nil {
		return ""
	}
	return p.Type[strings.LastIndex(p.Type, "/")+1:]
}

// transportKind names a failed request's transport error for the table.
func transportKind(err error) string {
	var nerr net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "eof"
	case errors.As(err, &nerr) && nerr.Timeout():
		return "timeout"
	}
	return "error"
}
