package payments

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/stripe/stripe-go/v79"
	"github.com/stripe/stripe-go/v79/client"

	"github.com/paymentsd/paymentsd/internal/intent"
)

// Stripe answers search beyond about 20 requests a second per account with
// 429 rate_limit (docs.stripe.com/search, "Rate limits"), and after a
// history loss every new payment is looked up by search before its first
// send. So searches are pooled: one query asks for several intents at once
// (clauses joined by OR, at most searchClauses), and one process starts a
// search at most every searchInterval. An idle charger searches at once;
// under load, the intents that arrive before the next search may start
// share it: 100 new payments a second cost 10 searches a second. Beyond
// that a lookup waits its turn, and gives up with its request.
const (
	// searchClauses is how many intents one query asks for.
	searchClauses = 10
	// searchInterval paces one process's searches: 10 a second, half
	// of Stripe's limit, leaving the rest to other processes and to
	// people searching the dashboard.
	searchInterval = 100 * time.Millisecond
)

// searchPool runs the pooled searches.
type searchPool struct {
	api     *client.API
	timeout time.Duration

	mu   sync.Mutex
	open *searchBatch // taking intents until its search starts or it is full
	next time.Time    // when the next search may start
}

// searchBatch is one query's intents and, once done is closed, its answer.
type searchBatch struct {
	intents []string
	waiting int // callers still waiting: none left, no search
	done    chan struct{}
	found   []*stripe.PaymentIntent
	err     error
}

func newSearchPool(api *client.API, timeout time.Duration) *searchPool {
	return &searchPool{api: api, timeout: timeout}
}

// search returns every PaymentIntent whose metadata names intent intentID,
// as Stripe's search index holds them now (of any namespace: the caller
// checks ownership). An error is the search's: a refusal for rate
// included, it leaves the outcome unknown.
func (p *searchPool) search(ctx context.Context, intentID string) ([]*stripe.PaymentIntent, error) {
	p.mu.Lock()
	batch := p.open
	if batch == nil {
		batch = &searchBatch{done: make(chan struct{})}
		p.open = batch
		// Runs apart from this request: the batch serves the others
		// that join it, whatever becomes of this one.
		go p.run(context.WithoutCancel(ctx), batch)
	}
	batch.intents = append(batch.intents, intentID)
	batch.waiting++
	if len(batch.intents) == searchClauses {
		p.open = nil
	}
	p.mu.Unlock()
	select {
	case <-batch.done:
	case <-ctx.Done():
		p.mu.Lock()
		batch.waiting--
		p.mu.Unlock()
		return nil, ctx.Err()
	}
	if batch.err != nil {
		return nil, batch.err
	}
	var mine []*stripe.PaymentIntent
	for _, pi := range batch.found {
		if pi.Metadata[intent.MetadataIntent] == intentID {
			mine = append(mine, pi)
		}
	}
	return mine, nil
}

// run waits for batch's turn, closes it to newcomers and asks Stripe for
// its intents.
func (p *searchPool) run(ctx context.Context, batch *searchBatch) {
	p.mu.Lock()
	start := time.Now()
	if p.next.After(start) {
		start = p.next
	}
	p.next = start.Add(searchInterval)
	p.mu.Unlock()
	time.Sleep(time.Until(start))

	p.mu.Lock()
	if p.open == batch {
		p.open = nil
	}
	clauses := make([]string, len(batch.intents))
	for i, id := range batch.intents {
		clauses[i] = fmt.Sprintf("metadata['%s']:'%s'", intent.MetadataIntent, id)
	}
	abandoned := batch.waiting == 0
	p.mu.Unlock()
	defer close(batch.done)
	if abandoned {
		// Every caller gave up while it waited its turn (under a load
		// above the pace): a search now would spend the budget for no
		// one.
		batch.err = context.Canceled
		return
	}

	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	params := &stripe.PaymentIntentSearchParams{}
	params.Query = strings.Join(clauses, " OR ")
	params.Limit = stripe.Int64(100)
	params.Context = ctx
	iter := p.api.PaymentIntents.Search(params)
	for iter.Next() {
		batch.found = append(batch.found, iter.PaymentIntent())
	}
	batch.err = iter.Err()
}
