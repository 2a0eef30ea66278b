package payments

import (
	"context"
	"errors"
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
// that a lookup waits its turn in a queue, and gives up with its request.
//
// A turn goes only to lookups still waiting when it comes: one that gave
// up leaves the queue without spending a turn, and a lookup whose turn
// would come after its deadline is refused at once (errSearchBusy), rather
// than queueing where it cannot be served. Turns booked ahead for lookups
// that then gave up would keep every later one waiting behind them.
const (
	// searchClauses is how many intents one query asks for.
	searchClauses = 10
	// searchInterval paces one process's searches: 10 a second, half
	// of Stripe's limit, leaving the rest to other processes and to
	// people searching the dashboard.
	searchInterval = 100 * time.Millisecond
)

// errSearchBusy refuses a lookup whose turn to search would come after its
// deadline: the outcome stays unknown, as for any failed search.
var errSearchBusy = errors.New("this process's Stripe searches are booked past the lookup's deadline")

// searchPool runs the pooled searches.
type searchPool struct {
	api     *client.API
	timeout time.Duration

	mu     sync.Mutex
	queue  []*searchWaiter // lookups waiting for a turn, oldest first
	pacing bool            // a goroutine hands out the turns
	next   time.Time       // when the next search may start
}

// searchWaiter is one lookup in the queue and, once done is closed, its
// batch's answer.
type searchWaiter struct {
	ctx      context.Context
	intentID string
	done     chan struct{}
	found    []*stripe.PaymentIntent
	err      error
}

func newSearchPool(api *client.API, timeout time.Duration) *searchPool {
	return &searchPool{api: api, timeout: timeout}
}

// search returns every PaymentIntent whose metadata names intent intentID,
// as Stripe's search index holds them now (of any namespace: the caller
// checks ownership). An error is the search's, a refusal for rate
// included, or errSearchBusy: it leaves the outcome unknown.
func (p *searchPool) search(ctx context.Context, intentID string) ([]*stripe.PaymentIntent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := &searchWaiter{ctx: ctx, intentID: intentID, done: make(chan struct{})}
	p.mu.Lock()
	p.prune()
	if deadline, ok := ctx.Deadline(); ok {
		ahead := len(p.queue)
		if turn := p.turnOf(ahead, time.Now()); !turn.Before(deadline) {
			p.mu.Unlock()
			return nil, fmt.Errorf("%w: %d lookups wait, and its turn would come %s after its deadline",
				errSearchBusy, ahead, turn.Sub(deadline).Round(time.Millisecond))
		}
	}
	p.queue = append(p.queue, w)
	if !p.pacing {
		p.pacing = true
		go p.pace()
	}
	p.mu.Unlock()
	select {
	case <-w.done:
	case <-ctx.Done():
		// Whatever the search, the lookup is over: a turn not yet
		// come is not spent on it (prune).
		return nil, ctx.Err()
	}
	if w.err != nil {
		return nil, w.err
	}
	var mine []*stripe.PaymentIntent
	for _, pi := range w.found {
		if pi.Metadata[intent.MetadataIntent] == intentID {
			mine = append(mine, pi)
		}
	}
	return mine, nil
}

// turnOf is when the search of the lookup queued behind ahead others
// would start, at now: the next turn, and one interval later for each
// full batch before it.
func (p *searchPool) turnOf(ahead int, now time.Time) time.Time {
	start := now
	if p.next.After(start) {
		start = p.next
	}
	return start.Add(time.Duration(ahead/searchClauses) * searchInterval)
}

// prune drops from the queue the lookups that gave up. p.mu is held.
func (p *searchPool) prune() {
	live := p.queue[:0]
	for _, w := range p.queue {
		if w.ctx.Err() == nil {
			live = append(live, w)
		}
	}
	clear(p.queue[len(live):])
	p.queue = live
}

// pace hands out the turns while lookups wait: at each, the oldest ones
// still waiting, up to searchClauses, share one search. A turn with no one
// left waiting is not taken, and pace stops until the next lookup.
func (p *searchPool) pace() {
	for {
		p.mu.Lock()
		now := time.Now()
		if wait := p.next.Sub(now); wait > 0 {
			p.mu.Unlock()
			time.Sleep(wait)
			continue
		}
		p.prune()
		if len(p.queue) == 0 {
			p.pacing = false
			p.mu.Unlock()
			return
		}
		n := min(len(p.queue), searchClauses)
		batch := make([]*searchWaiter, n)
		copy(batch, p.queue)
		clear(p.queue[:n])
		p.queue = p.queue[n:]
		p.next = now.Add(searchInterval)
		p.mu.Unlock()
		// Apart from the lookups: the search serves them all, whatever
		// becomes of the one whose context it carries.
		go p.run(context.WithoutCancel(batch[0].ctx), batch)
	}
}

// run asks Stripe for the batch's intents and hands each lookup the answer.
func (p *searchPool) run(ctx context.Context, batch []*searchWaiter) {
	clauses := make([]string, len(batch))
	for i, w := range batch {
		clauses[i] = fmt.Sprintf("metadata['%s']:'%s'", intent.MetadataIntent, w.intentID)
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	params := &stripe.PaymentIntentSearchParams{}
	params.Query = strings.Join(clauses, " OR ")
	params.Limit = stripe.Int64(100)
	params.Context = ctx
	iter := p.api.PaymentIntents.Search(params)
	var found []*stripe.PaymentIntent
	for iter.Next() {
		found = append(found, iter.PaymentIntent())
	}
	err := iter.Err()
	for _, w := range batch {
		w.found, w.err = found, err
		close(w.done)
	}
}
