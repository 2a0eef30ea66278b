package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paymentsd/paymentsd/internal/ids"
)

// Lost history is the fault of a restore, or of a failover to a standby
// that lagged: the tail of commits after some point is gone, though Stripe
// kept what those requests made. Every Config.LostEvery (±20%) the
// controller takes a key of that tail (one whose client got its answer or
// gave up and moved on, made within the last Config.LostRetryAfter) and
// deletes, in one transaction, everything its requests committed: the key,
// its payment, the payment's refunds and their keys, their audit records,
// receipts, outbox rows and receipt jobs; or, for a refund key, the key,
// its refund and its audit records, the payment's refunded and reserved
// amounts given back. Half the time it prefers a payment whose Stripe key
// holds a replayed 500 (the hardest case: nothing but a lookup finds what
// that 500 charged). Config.LostRetryAfter later the intent's client sends
// the key again, with the same body, until it is answered, and then its
// lost refunds, to the payment the key names now (a payment handed to an
// operator keeps its refunds waiting for the operator too); by then the
// PaymentIntent is older than that delay and, the emulator's search
// lagging longer (Config.SearchLag), invisible to search.

// LostHistory is one lost-history fault: what was deleted and when.
type LostHistory struct {
	At time.Time
	// Victim is the intent whose key was chosen; Refunds are the refund
	// intents of a lost payment whose keys went with it.
	Victim  *Intent
	Refunds []*Intent
	// Spent is set when the payment's current Stripe key held a replayed
	// 500 (charge_attempt_spent_at).
	Spent bool
	// Payment and PaymentIntent are the lost payment's id and the
	// PaymentIntent it recorded ("" if none); Receipt is set when its
	// receipt had gone out.
	Payment       int64
	PaymentIntent string
	Receipt       bool
	// RetriedAt is when the client sent the key again.
	RetriedAt time.Time

	refundKeys map[string]bool // the refund keys deleted with the payment's
}

// what says what the fault deleted, for the event log.
func (f *LostHistory) what() string {
	if f.Victim.Refund {
		return "a refund of payment " + f.Victim.PaymentID
	}
	s := fmt.Sprintf("payment %d, %s, %d refund keys with it", f.Payment, orNone(f.PaymentIntent), len(f.Refunds))
	if f.Spent {
		s += "; its Stripe key holds a 500"
	}
	return s
}

// Lost injects lost-history faults and sends their keys again later.
type Lost struct {
	Cfg    *Config
	Pool   *pgxpool.Pool
	Ledger *Ledger
	// Resender sends the lost keys again, with a ledger of its own.
	Resender *Clients
	Events   *Events

	mu     sync.Mutex
	faults []*LostHistory
	taken  map[*Intent]bool
	wg     sync.WaitGroup
}

// Faults returns the faults injected so far.
func (l *Lost) Faults() []*LostHistory {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*LostHistory(nil), l.faults...)
}

// Run injects a fault every Config.LostEvery (±20%) until ctx ends. The
// retries it schedules go on after it returns: Wait waits for them.
func (l *Lost) Run(ctx context.Context, rng *rand.Rand) {
	l.mu.Lock()
	l.taken = map[*Intent]bool{}
	l.mu.Unlock()
	for {
		spread := int64(l.Cfg.LostEvery) * 2 / 5
		pause := l.Cfg.LostEvery - time.Duration(spread/2) + time.Duration(rng.Int64N(spread+1))
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		f, err := l.inject(ctx, rng)
		switch {
		case err != nil:
			l.Events.Logf(EventHarnessErr, "lost history: %v", err)
			continue
		case f == nil:
			l.Events.Logf(EventProgress, "lost history: no key to lose yet")
			continue
		}
		l.Events.Logf(EventLostHistory, "key %s lost (%s); its client sends it again in %s", f.Victim.Key, f.what(), l.Cfg.LostRetryAfter)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.retry(f, rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())))
		}()
	}
}

// Wait waits until every lost key was sent again and answered (or the
// resend's own bound passed).
func (l *Lost) Wait() { l.wg.Wait() }

// candidates lists the intents a fault may take: payments their client is
// done with (refunds included) and refunds of such payments, begun within
// the last LostRetryAfter, not taken before.
func (l *Lost) candidates(now time.Time) []*Intent {
	l.Ledger.mu.Lock()
	defer l.Ledger.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*Intent
	for _, in := range l.Ledger.intents {
		if in.Manual || in.Action != "" || in.Parent != nil && in.Parent.Manual {
			// What a loss does to an authorization and its capture is not
			// judged yet (lost_history_check.go): manual payments keep
			// their history.
			continue
		}
		done := in.Done
		if in.Refund {
			done = in.Parent != nil && in.Parent.Done && !l.taken[in.Parent]
		}
		if done && !l.taken[in] && now.Sub(in.Started) < l.Cfg.LostRetryAfter {
			out = append(out, in)
		}
	}
	return out
}

// inject takes one key and deletes its history; nil when no key can be
// taken now.
func (l *Lost) inject(ctx context.Context, rng *rand.Rand) (*LostHistory, error) {
	cands := l.candidates(time.Now())
	if len(cands) == 0 {
		return nil, nil
	}
	rng.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	preferSpent := rng.IntN(2) == 0
	if preferSpent {
		spent, err := l.spentOf(ctx, cands)
		if err != nil {
			return nil, err
		}
		cands = append(spent, cands...)
	}
	for i, in := range cands {
		if i == 20 {
			break
		}
		f, err := l.forget(ctx, in)
		if err != nil || f == nil {
			if err != nil {
				return nil, err
			}
			continue // leased by a live run, or never stored
		}
		l.Ledger.Update(func() {
			// The client's definite answers are gone with the rows.
			for _, lost := range append([]*Intent{in}, f.Refunds...) {
				if lost.Definite() {
					lost.Lost = "lost history"
				}
			}
		})
		l.mu.Lock()
		l.taken[in] = true
		if in.Refund {
			l.taken[in.Parent] = true // its payment stays: a lost refund of it is pending
		}
		for _, r := range f.Refunds {
			l.taken[r] = true
		}
		l.faults = append(l.faults, f)
		l.mu.Unlock()
		return f, nil
	}
	return nil, nil
}

// spentOf returns the payment intents among cands whose current Stripe key
// holds a replayed server error: sent again after the loss, it replays
// that error, and only a lookup finds what it may have charged.
func (l *Lost) spentOf(ctx context.Context, cands []*Intent) ([]*Intent, error) {
	var users []int64
	var keys []string
	for _, in := range cands {
		if !in.Refund {
			users, keys = append(users, in.User.UserID), append(keys, in.Key)
		}
	}
	rows, err := l.Pool.Query(ctx, `SELECT k.user_id, k.idempotency_key FROM idempotency_keys k
		JOIN payments p ON p.idempotency_key_id = k.id
		JOIN unnest($1::bigint[], $2::text[]) AS c(user_id, key) ON c.user_id = k.user_id AND c.key = k.idempotency_key
		WHERE p.charge_attempt_spent_at IS NOT NULL`, users, keys)
	if err != nil {
		return nil, err
	}
	spent := map[UserKey]bool{}
	for rows.Next() {
		var uk UserKey
		if err := rows.Scan(&uk.UserID, &uk.Key); err != nil {
			return nil, err
		}
		spent[uk] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []*Intent
	for _, in := range cands {
		if !in.Refund && spent[UserKey{in.User.UserID, in.Key}] {
			out = append(out, in)
		}
	}
	return out, nil
}

// retry is the client's side of a fault: LostRetryAfter later it sends the
// key again until it is answered, then the lost refunds of the payment, one
// after the other, to the payment its key names now. A refusal is final
// for its client and is not sent again (checkLostHistory proves nothing
// was refunded for it).
func (l *Lost) retry(f *LostHistory, rng *rand.Rand) {
	time.Sleep(time.Until(f.At.Add(l.Cfg.LostRetryAfter)))
	ctx, cancel := context.WithTimeout(context.Background(), l.Cfg.Drain)
	defer cancel()
	f.RetriedAt = time.Now()
	if refusedOnce(f.Victim) {
		return
	}
	if again := l.resend(ctx, rng, f.Victim, f.Victim.PaymentID); strings.HasPrefix(again.Unexpected, "503 needs-attention") {
		// Parked: its refunds wait for the operator too.
		l.Ledger.Update(func() {
			for _, r := range f.Refunds {
				r.AwaitsOperator = !refusedOnce(r)
			}
		})
		return
	}
	if len(f.Refunds) == 0 {
		return
	}
	var now uuid.UUID
	err := l.Pool.QueryRow(ctx, `SELECT p.public_id FROM payments p JOIN idempotency_keys k ON k.id = p.idempotency_key_id
		WHERE k.user_id = $1 AND k.idempotency_key = $2`, f.Victim.User.UserID, f.Victim.Key).Scan(&now)
	paymentNow := ids.Format(ids.Payment, now)
	if err != nil {
		l.Events.Logf(EventHarnessErr, "lost history: the payment of key %s after its retry: %v", f.Victim.Key, err)
	}
	for _, r := range f.Refunds {
		if !refusedOnce(r) {
			l.resend(ctx, rng, r, paymentNow)
		}
	}
}

func (l *Lost) resend(ctx context.Context, rng *rand.Rand, in *Intent, paymentID string) *Intent {
	again := &Intent{Client: in.Client, User: in.User, Key: in.Key, Refund: in.Refund, PaymentID: paymentID,
		Parent: in.Parent, Body: in.Body, Card: in.Card, Amount: in.Amount, Started: time.Now()}
	l.Resender.Ledger.Add(again)
	l.Resender.drive(ctx, rng, again)
	l.Ledger.Update(func() { in.Resend = again })
	switch {
	case strings.HasPrefix(again.Unexpected, "503 needs-attention"):
		l.Events.Logf(EventLostHistory, "key %s sent again: handed to an operator (%s)", in.Key, again.Unexpected)
	case again.Status == 0:
		l.Events.Logf(EventHarnessErr, "lost history: key %s sent again was not answered: %v", in.Key, again.Labels)
	}
	return again
}

func orNone(s string) string {
	if s == "" {
		return "no PaymentIntent"
	}
	return s
}

// lostKeysBack waits until every lost key came back and was answered, then,
// within the drain bound again, for what they started to settle; a drain
// that does not end marks drain unfinished.
func lostKeysBack(ctx context.Context, l *Lost, pool *pgxpool.Pool, ev *Events, drain *Drain) {
	ev.Logf(EventPhase, "waiting for the lost keys to come back (%d lost, each %s after its loss)", len(l.Faults()), l.Cfg.LostRetryAfter)
	l.Wait()
	done := make(chan struct{})
	close(done)
	again := WaitDrain(ctx, pool, ev, time.Now(), l.Cfg.Drain, done)
	if !again.KeysDone {
		drain.KeysDone, drain.Unfinished = false, again.Unfinished
	}
	if !again.ReceiptsDone {
		drain.ReceiptsDone, drain.PendingReceipts = false, again.PendingReceipts
	}
}
