package chaos

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// Report is everything the final table shows.
type Report struct {
	Cfg       *Config
	Intents   []*Intent
	Answers   []LabelCount
	Emulator  map[string]int64
	Events    *Events
	Load      time.Duration
	Drain     Drain
	Verdict   *Verdict
	WallClock time.Duration
	// Webhooks is what became of the webhook events (webhooks.go), and
	// WebhooksLostByFailover how many an asynchronous failover lost.
	Webhooks               *Webhooks
	WebhooksLostByFailover int
	// Lost is what became of the lost-history faults (lost_history.go).
	Lost *LostSummary
}

// emulatorOrder lists the emulator's counters in the order shown; any
// other counter follows.
var emulatorOrder = []string{
	"create_requests", "payment_intents_created", "faults_500", "lost_answers", "hangs", "latencies",
	"key_in_use", "replays", "declines", "searches", "retrieves", "invalid_requests", "idempotency_errors",
	"unauthorized", "hung_now",
}

// Print writes the table.
func (r *Report) Print(w io.Writer) {
	c := r.Cfg
	row := func(name, format string, args ...any) {
		fmt.Fprintf(w, "  %-34s %s\n", name, fmt.Sprintf(format, args...))
	}
	fmt.Fprintf(w, "\n== paymentsd chaos run: seed %d, %d clients, %d serve processes, %d users ==\n",
		c.Seed, c.Clients, c.Serve, c.Users)

	fmt.Fprintln(w, "run")
	row("load under faults", "%s", r.Load.Round(100*time.Millisecond))
	row("keys finished after faults stopped", "%s", drainText(r.Drain.KeysDone, r.Drain.KeysAfter, c.Drain))
	row("receipt outbox empty after that", "%s", drainText(r.Drain.ReceiptsDone, r.Drain.ReceiptsAfter, c.Drain))
	row("wall clock, setup to verdict", "%s", r.WallClock.Round(100*time.Millisecond))

	var attempts, maxAttempts, gaveUp, abandoned, unexpected int
	byStatus := map[int]int{}
	var latencies []time.Duration
	for _, in := range r.Intents {
		attempts += in.Attempts
		maxAttempts = max(maxAttempts, in.Attempts)
		switch {
		case in.Definite():
			byStatus[in.Status]++
			latencies = append(latencies, in.Ended.Sub(in.Started))
		case in.GaveUp:
			gaveUp++
		case in.Abandoned:
			abandoned++
		case in.Unexpected != "":
			unexpected++
		}
	}
	v := r.Verdict
	fmt.Fprintln(w, "clients")
	row("intents", "%d", len(r.Intents))
	row("attempts", "%d (%.2f per intent, at most %d)", attempts, float64(attempts)/float64(max(len(r.Intents), 1)), maxAttempts)
	row("definite answers", "%d (%s)", len(latencies), statusText(byStatus))
	row("gave up after 1-2 attempts", "%d", gaveUp)
	row("stopped at the end of the run", "%d", abandoned)
	row("unexpected final answers", "%d", unexpected)
	row("time to a definite answer", "%s", percentiles(latencies))
	row("keys finished: client answered", "%d", v.FinishedWithClient)
	row("keys finished: without the client", "%d (the completer, or a request the client left)", v.FinishedWithoutClient)
	row("intents that never reached a key", "%d (every attempt failed before the store)", v.NeverStored)
	row("keys driven by more than one run", "%d (at most %d runs)", v.Resumed, v.MaxRuns)
	row("refunds at Stripe", "%d (payments refunded: %d)", v.StripeRefunds, v.RefundedPayments)
	row("keys parked for an operator", "%d (never charged again; paymentsd keys list --state needs-attention)", len(v.NeedsAttention))
	for _, why := range v.NeedsAttention {
		row("  needs attention", "%s", why)
	}

	fmt.Fprintln(w, "answers by status (every attempt)")
	for _, a := range r.Answers {
		row(a.Label, "%d", a.Count)
	}

	fmt.Fprintln(w, "faults injected")
	row("SIGKILLs of serve processes", "%d", r.Events.Count(EventKill))
	row("serve restarts", "%d (of which after exiting on their own: %d)", r.Events.Count(EventRestart), r.Events.Count(EventExit))
	row("Postgres restarts", "%d", r.Events.Count(EventPGStart))
	if c.Failover != FailoverOff {
		row("Postgres failovers", "%d (%s standby)", r.Events.Count(EventPromote), c.Failover)
	}
	row("emulator chaos", "p_500 %.2f, p_500_charged %.2f, p_lost_answer %.2f, p_hang %.2f (%d ms), p_outlive_client %.2f (%d ms)",
		c.Faults.P500, c.Faults.P500Charged, c.Faults.PLostAnswer, c.Faults.PHang, c.Faults.HangForMS,
		c.Faults.POutliveClient, c.Faults.OutliveLatencyMS)
	row("", "p_idempotency_error %.2f, latency 0-%d ms, search lag %d ms",
		c.Faults.PIdempotencyError, c.Faults.MaxLatencyMS, c.Faults.SearchLagMS)
	names := make([]string, 0, len(r.Emulator))
	for name := range r.Emulator {
		if !slices.Contains(emulatorOrder, name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range append(slices.Clone(emulatorOrder), names...) {
		if n, ok := r.Emulator[name]; ok {
			row("emulator "+name, "%d", n)
		}
	}

	if r.Webhooks != nil {
		r.Webhooks.print(w, row, c.Faults, r.Emulator, r.WebhooksLostByFailover)
	}
	if rec := v.Recovery; rec != nil {
		printFailover(w, row, rec, v)
	}
	if r.Lost != nil {
		r.Lost.print(w, row, c)
	}

	fmt.Fprintln(w, "outcome")
	row("payments succeeded / failed", "%d / %d", v.Succeeded, v.Failed)
	row("PaymentIntents (succeeded)", "%d (%d)", v.PaymentIntents, v.SucceededIntents)
	row("receipts", "%d", v.Receipts)
	if c.Manual > 0 {
		v.Manual.print(row)
	}

	fmt.Fprintln(w, "invariants")
	slices.SortStableFunc(v.Checks, func(a, b *Check) int { return a.N - b.N })
	total := 0
	for _, ch := range v.Checks {
		verdict := "PASS"
		if !ch.Passed() {
			verdict = "FAIL"
		}
		total += ch.Violations
		fmt.Fprintf(w, "  %d %-56s %s  %d checked, %d violations\n", ch.N, ch.Name, verdict, ch.Checked, ch.Violations)
	}
	for _, ch := range v.Checks {
		for _, d := range ch.Details {
			fmt.Fprintf(w, "  violation %d: %s\n", ch.N, d)
		}
		if more := ch.Violations - len(ch.Details); more > 0 {
			fmt.Fprintf(w, "  violation %d: … and %d more\n", ch.N, more)
		}
	}
	if total == 0 {
		fmt.Fprintln(w, "verdict: PASS, 0 violations")
	} else {
		fmt.Fprintf(w, "verdict: FAIL, %d violations (logs in %s, database %s on port %d)\n", total, c.LogDir, c.Database, c.PGPort)
	}
}

func drainText(done bool, after, bound time.Duration) string {
	if !done {
		return fmt.Sprintf("NOT within %s", bound)
	}
	return fmt.Sprintf("%s (bound %s)", after.Round(10*time.Millisecond), bound)
}

func statusText(by map[int]int) string {
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, fmt.Sprintf("%d: %d", s, by[s]))
	}
	return strings.Join(parts, ", ")
}

func percentiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration {
		return ds[min(int(q*float64(len(ds))), len(ds)-1)].Round(time.Millisecond)
	}
	return fmt.Sprintf("p50 %s, p90 %s, p99 %s, max %s", at(0.50), at(0.90), at(0.99), ds[len(ds)-1].Round(time.Millisecond))
}

// printFailover writes the failover section: what the failover cost and
// what it lost.
func printFailover(w io.Writer, row func(name, format string, args ...any), rec *Recovery, v *Verdict) {
	fo := rec.Failover
	fmt.Fprintf(w, "failover (%s standby)\n", rec.Mode)
	if !fo.Done() {
		row("failover", "did not happen")
		return
	}
	if rec.Mode.Patroni() {
		printPatroni(row, rec)
	} else {
		if !fo.CutAt.IsZero() {
			row("replication cut", "%s before the primary stopped", fo.StoppedAt.Sub(fo.CutAt).Round(time.Millisecond))
		}
		row("standby behind at the stop", "%d bytes of WAL", fo.Behind)
		row("primary stop -> promotion", "%s (the failover manager's part)", fo.PromotedAt.Sub(fo.StoppedAt).Round(time.Millisecond))
		if rec.FirstCreated.IsZero() {
			row("time to recover", "NEVER: no 201 after the promotion")
		} else {
			row("promotion -> first 201", "%s (paymentsd's part)", rec.FirstCreated.Sub(fo.PromotedAt).Round(time.Millisecond))
			row("time to recover", "%s (primary stop -> first 201)", rec.Downtime().Round(time.Millisecond))
		}
	}
	row("answers lost by the failover", "%d (201s for payments: %d)", v.LostAnswers, v.LostPayments)
	row("lost answers re-adopted", "%d (same PaymentIntent or Refund, none charged again)", v.Readopted)
	row("lost refund refusals", "%d (final for their clients, not sent again; nothing refunded)", v.LostRefusals)
	row("keys sent again after the drain", "%d (as a reconciling client would)", v.Resent)
	row("refunds of payments it lost", "%d (answered 404, sent again to the re-adopted payment)", v.RefundsOfLostPayments)
	row("serve processes up at the stop", "%d (exited on their own during the run: %d)", len(fo.UpAtStop), len(rec.ExitedOnTheirOwn))
}
