package chaos

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// Webhooks in a run (-webhooks, on by default): the emulator sends its
// events to the serve processes' POST /webhooks/stripe, taking them in turn
// as a load balancer would, signed with webhookSecret, which every serve
// process gets as STRIPE_WEBHOOK_SECRET. The run's emulator chaos adds the
// webhook faults (DefaultFaults): deliveries late, twice, out of order, and
// first attempts lost. A delivery to a process that was just killed, or
// while Postgres restarts, fails and is retried.
//
// After the drain the harness waits until the emulator holds no
// authorization (AwaitAuthorizationsEnded), so that Stripe makes no event
// after the last one is delivered; then, within webhookSettle, until the
// emulator has no event left to deliver, reads its events (before the
// database, so that every event it saw delivered has committed), and
// checks:
//
//  9. every event the emulator made was delivered, and every event it
//     delivered is recorded exactly once in stripe_events, with its type
//     and object; stripe_events holds no other event. In an asynchronous
//     failover run, an event delivered before the promotion may be lost
//     with the commits the standby never received: counted, not a
//     violation.

// webhookSecret signs a run's webhook events.
const webhookSecret = "whsec_paymentsd_chaos"

// webhookSettle bounds the wait for the last deliveries after the drain.
const webhookSettle = 30 * time.Second

// webhookFlags registers the webhook flags on fs.
func webhookFlags(fs *flag.FlagSet, cfg *Config) {
	fs.BoolVar(&cfg.Webhooks, "webhooks", true, "the emulator sends its webhook events to the serve processes (round robin), with the webhook faults")
	fs.Float64Var(&cfg.Faults.PWebhookDelay, "p-webhook-delay", cfg.Faults.PWebhookDelay, "emulator: probability of a webhook event delivered late")
	fs.Int64Var(&cfg.Faults.WebhookDelayMS, "webhook-delay-ms", cfg.Faults.WebhookDelayMS, "emulator: upper bound of a late webhook event's delay")
	fs.Float64Var(&cfg.Faults.PWebhookDuplicate, "p-webhook-duplicate", cfg.Faults.PWebhookDuplicate, "emulator: probability of a webhook event delivered twice (half the time at once)")
	fs.Float64Var(&cfg.Faults.PWebhookReorder, "p-webhook-reorder", cfg.Faults.PWebhookReorder, "emulator: probability of a webhook event held back until a later one was sent")
	fs.Float64Var(&cfg.Faults.PWebhookLost, "p-webhook-lost", cfg.Faults.PWebhookLost, "emulator: probability of a webhook event's first delivery attempt lost")
}

// webhookArgs are the emulator's webhook flags for serve processes at
// addrs; none without webhooks.
func (c *Config) webhookArgs(addrs []string) []string {
	if !c.Webhooks {
		return nil
	}
	urls := make([]string, len(addrs))
	for i, a := range addrs {
		urls[i] = "http://" + a + "/webhooks/stripe"
	}
	return []string{"--webhook-url", strings.Join(urls, ","), "--webhook-secret", webhookSecret}
}

// withWebhookSecret adds STRIPE_WEBHOOK_SECRET to a serve process's
// environment when the run has webhooks.
func (c *Config) withWebhookSecret(env map[string]string) map[string]string {
	if c.Webhooks {
		env["STRIPE_WEBHOOK_SECRET"] = webhookSecret
	}
	return env
}

// freeAddrs returns n distinct loopback addresses on ports free a moment
// ago, none of them taken.
func freeAddrs(n int, taken ...string) ([]string, error) {
	var addrs []string
	for len(addrs) < n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		// Held open until all are chosen, so that none comes twice.
		defer ln.Close()
		if a := ln.Addr().String(); !slices.Contains(taken, a) {
			addrs = append(addrs, a)
		}
	}
	return addrs, nil
}

// Events returns every webhook event the emulator made.
func (e *Emulator) Events(ctx context.Context) ([]stripefake.Event, error) {
	var evs []stripefake.Event
	return evs, e.do(ctx, "GET", "/_fake/events", nil, &evs)
}

// EventRow is a stripe_events row.
type EventRow struct {
	ID       string
	Type     string
	ObjectID *string
	Outcome  string
	Reason   *string
}

// Webhooks is what became of a run's webhook events.
type Webhooks struct {
	// Events are the emulator's, read before Rows.
	Events []stripefake.Event
	// Rows are stripe_events, by event id.
	Rows map[string]*EventRow
	// Pending is how many events were still undelivered after the wait.
	Pending int64
	// Waited is how long the wait for the last deliveries took.
	Waited time.Duration
	// AlarmedByFailover counts alarms an asynchronous failover explains
	// (failover_alarms.go).
	AlarmedByFailover int
	// LostObjects are the PaymentIntents and Refunds a lost-history fault
	// left without their payment or refund (lostObjects): their succeeded
	// (authorized, pending) events are alarms by design.
	LostObjects map[string]bool
}

// SettleWebhooks waits, within webhookSettle, until the emulator has no
// event left to deliver, then reads its events and, after them,
// stripe_events.
func SettleWebhooks(ctx context.Context, emu *Emulator, pool *pgxpool.Pool, ev *Events) (*Webhooks, error) {
	w := &Webhooks{Rows: map[string]*EventRow{}}
	start := time.Now()
	for {
		st, err := emu.Stats(ctx)
		if err != nil {
			return nil, err
		}
		w.Pending = st["webhook_pending"]
		if w.Pending == 0 || time.Since(start) > webhookSettle {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	w.Waited = time.Since(start)
	ev.Logf(EventPhase, "webhooks: %d events still to deliver after %s", w.Pending, w.Waited.Round(time.Millisecond))
	var err error
	if w.Events, err = emu.Events(ctx); err != nil {
		return nil, err
	}
	rows, err := pool.Query(ctx, `SELECT id, type, object_id, outcome, reason FROM stripe_events`)
	if err != nil {
		return nil, fmt.Errorf("error reading stripe_events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		r := &EventRow{}
		if err := rows.Scan(&r.ID, &r.Type, &r.ObjectID, &r.Outcome, &r.Reason); err != nil {
			return nil, err
		}
		w.Rows[r.ID] = r
	}
	return w, rows.Err()
}

// checkWebhooks is check 9. rec is the failover's, in a failover run.
func checkWebhooks(w *Webhooks, rec *Recovery) (*Check, int) {
	c := &Check{N: 9, Name: "every webhook event delivered and recorded once"}
	lostByFailover := 0
	made := map[string]bool{}
	for _, e := range w.Events {
		c.Checked++
		made[e.ID] = true
		row := w.Rows[e.ID]
		switch {
		case e.Status != stripefake.EventDelivered:
			c.Failf("event %s (%s of %s) is %s after %d attempts: %s", e.ID, e.Type, e.ObjectID, e.Status, e.Attempts, e.LastError)
		case row == nil && rec != nil && rec.Mode.Async() && rec.Failover.Done() && e.DeliveredAt != nil &&
			e.DeliveredAt.Before(rec.Failover.PromotedAt):
			lostByFailover++
		case row == nil:
			c.Failf("event %s (%s of %s) was answered %d times, but is not in stripe_events", e.ID, e.Type, e.ObjectID, e.Answered)
		case row.Type != e.Type || deref(row.ObjectID) != e.ObjectID:
			c.Failf("event %s (%s of %s) is recorded as %s of %s", e.ID, e.Type, e.ObjectID, row.Type, deref(row.ObjectID))
		case alarmedByFailover(e, row, rec),
			row.Outcome == "alarm" && movesMoney(e.Type) && w.LostObjects[e.ObjectID]:
			w.AlarmedByFailover++
		case row.Outcome != "applied" && row.Outcome != "ignored":
			c.Failf("event %s (%s) is recorded but %s", e.ID, e.Type, row.Outcome)
		}
	}
	for id, row := range w.Rows {
		if !made[id] {
			c.Failf("stripe_events holds %s (%s), which the emulator never made", id, row.Type)
		}
	}
	return c, lostByFailover
}

// reasonShape turns an ignored event's reason into its kind: ids and
// numbers replaced.
var (
	stripeIDs = regexp.MustCompile(`\b(pi|re|ch|dp|evt|txn)_[A-Za-z0-9]+`)
	numbers   = regexp.MustCompile(`\b\d+\b`)
)

func reasonShape(reason string) string {
	return numbers.ReplaceAllString(stripeIDs.ReplaceAllString(reason, "${1}_…"), "N")
}

// print writes the webhooks section of the report.
func (w *Webhooks) print(out io.Writer, row func(name, format string, args ...any), f stripefake.AdminChaos, emu map[string]int64, lostByFailover int) {
	fmt.Fprintln(out, "webhooks (emulator -> serve processes, round robin)")
	row("webhook chaos", "p_webhook_delay %.2f (up to %d ms), p_webhook_duplicate %.2f, p_webhook_reorder %.2f, p_webhook_lost %.2f",
		f.PWebhookDelay, f.WebhookDelayMS, f.PWebhookDuplicate, f.PWebhookReorder, f.PWebhookLost)
	byStatus := map[string]int{}
	for _, e := range w.Events {
		byStatus[e.Status]++
	}
	row("events made", "%d (delivered %d, pending %d after waiting %s, dropped %d)", len(w.Events),
		byStatus[stripefake.EventDelivered], byStatus[stripefake.EventPending], w.Waited.Round(100*time.Millisecond),
		byStatus[stripefake.EventDropped])
	row("delivery attempts", "%d (retries %d, failed %d, answered 2xx %d)", emu["webhook_attempts"],
		emu["webhook_retries"], emu["webhook_failed_attempts"], emu["webhook_answered"])
	row("duplicates answered", "%d (deliveries answered after the event's first)", emu["webhook_answered"]-emu["webhook_delivered"])
	row("faults drawn", "delay %d, duplicate %d, reorder %d, lost %d", emu["webhook_delays"], emu["webhook_duplicates"],
		emu["webhook_reorders"], emu["webhook_lost"])
	outcomes, types := map[string]int{}, map[string]map[string]int{}
	reasons := map[string]int{}
	for _, r := range w.Rows {
		outcomes[r.Outcome]++
		if types[r.Type] == nil {
			types[r.Type] = map[string]int{}
		}
		types[r.Type][r.Outcome]++
		if r.Reason != nil {
			reasons[reasonShape(*r.Reason)]++
		}
	}
	row("recorded in stripe_events", "%d (applied %d, ignored %d)", len(w.Rows), outcomes["applied"], outcomes["ignored"])
	for _, t := range slices.Sorted(maps.Keys(types)) {
		row("  "+t, "applied %d, ignored %d", types[t]["applied"], types[t]["ignored"])
	}
	shapes := slices.Collect(maps.Keys(reasons))
	sort.Slice(shapes, func(i, j int) bool {
		if reasons[shapes[i]] != reasons[shapes[j]] {
			return reasons[shapes[i]] > reasons[shapes[j]]
		}
		return shapes[i] < shapes[j]
	})
	for i, s := range shapes {
		if i == 5 {
			row("  ignored because", "… %d more kinds", len(shapes)-5)
			break
		}
		row("  ignored because", "%s: %d", s, reasons[s])
	}
	if lostByFailover > 0 {
		row("lost by the failover", "%d (delivered before the promotion, not replicated)", lostByFailover)
	}
	if w.AlarmedByFailover > 0 {
		row("alarms the failover explains", "%d (PaymentIntent or Refund whose payment or refund was lost)", w.AlarmedByFailover)
	}
}
