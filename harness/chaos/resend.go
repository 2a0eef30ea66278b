package chaos

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Reconcile is what clients do after a failover lost commits, as a client
// that keeps its own record would: every key whose answer the database lost,
// or that the database acknowledged and then lost, is sent again with the
// same body until it is answered, payments first; a refund goes to the
// payment its payment key names now. It marks the lost answers (MarkLost),
// records each key's second sending in Intent.Resend, and returns how many
// keys it sent again.
func (c *Clients) Reconcile(ctx context.Context, pool *pgxpool.Pool, emu *Emulator, intents []*Intent) (int, error) {
	snap, err := TakeSnapshot(ctx, pool, emu)
	if err != nil {
		return 0, err
	}
	MarkLost(intents, snap)
	payments, refunds := ToResend(intents, snap)
	for i, in := range append(slices.Clone(payments), refunds...) {
		if i == maxDetails || c.Events == nil {
			break
		}
		why := in.Lost
		if why == "" {
			why = "no key row; answered " + strings.Join(in.Labels, ", ")
		}
		c.Events.Logf(EventProgress, "  sending %s again: %s", in.Key, why)
	}
	// A key that cannot be answered must not hold the run up for ever.
	ctx, cancel := context.WithTimeout(ctx, c.Cfg.Drain)
	defer cancel()
	groups := make([][]*Intent, len(payments))
	for i, in := range payments {
		groups[i] = []*Intent{in}
	}
	c.resend(ctx, groups, func(in *Intent) string { return in.PaymentID })
	if len(refunds) == 0 {
		return len(payments), nil
	}
	if snap, err = TakeSnapshot(ctx, pool, emu); err != nil {
		return 0, err
	}
	// A payment's refunds go one after the other, in their first order, so
	// each finds the refunds before it recorded.
	groups = groups[:0]
	at := map[*Intent]int{}
	for _, in := range refunds {
		i, ok := at[in.Parent]
		if !ok {
			i = len(groups)
			at[in.Parent] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], in)
	}
	c.resend(ctx, groups, func(in *Intent) string {
		if p := snap.Payments[snap.PaymentNow(in.Parent)]; p != nil {
			return p.PublicID
		}
		return ""
	})
	return len(payments) + len(refunds), nil
}

// resend sends each group's intents again, one after the other, to the
// payment paymentOf names (for a refund); groups run at once, Config.Clients
// at a time.
func (c *Clients) resend(ctx context.Context, groups [][]*Intent, paymentOf func(*Intent) string) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, c.Cfg.Clients)
	for i, group := range groups {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rng := rand.New(rand.NewPCG(c.Cfg.Seed, 0x5e5e0000+uint64(i)))
			for _, in := range group {
				again := &Intent{Client: in.Client, User: in.User, Key: in.Key, Refund: in.Refund, PaymentID: paymentOf(in),
					Parent: in.Parent, Body: in.Body, Card: in.Card, Amount: in.Amount, Started: time.Now()}
				c.Ledger.Add(again)
				c.drive(ctx, rng, again)
				in.Resend = again
			}
		}()
	}
	wg.Wait()
}

// afterFailover reconciles the keys a failover lost (Reconcile) and waits,
// within the drain bound again, for them to settle; a drain that does not
// end marks drain unfinished. It returns the recovery's facts but for the
// first 201 after the promotion, which the clients' ledger knows.
func afterFailover(ctx context.Context, rig *Rig, resender *Clients, pool *pgxpool.Pool, fo *Failover, drain *Drain,
	intents []*Intent) (*Recovery, error) {
	ev := rig.Events
	ev.Logf(EventPhase, "reconciling: sending again every key whose answer or row the failover lost")
	n, err := resender.Reconcile(ctx, pool, rig.Emulator, intents)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		done := make(chan struct{})
		close(done)
		again := WaitDrain(ctx, pool, ev, time.Now(), resender.Cfg.Drain, done)
		if !again.KeysDone {
			drain.KeysDone, drain.Unfinished = false, again.Unfinished
		}
		if !again.ReceiptsDone {
			drain.ReceiptsDone, drain.PendingReceipts = false, again.PendingReceipts
		}
	}
	ev.Logf(EventPhase, "%d keys sent again after the failover", n)
	return &Recovery{
		Mode: rig.Cfg.Failover, Failover: *fo, ExitedOnTheirOwn: rig.Fleet.ExitedOnTheirOwn(), Running: rig.Fleet.Pids(),
		HeartbeatInterval: heartbeatInterval,
	}, nil
}
