package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// PatroniEvent is one break of the cluster and what followed, as the
// controller saw it, and, after the run, as the clients saw it.
type PatroniEvent struct {
	Kind string
	// Via is how the service reaches the cluster.
	Via                  string
	OldLeader, NewLeader string
	// At is the kill (or the switchover's command); ElectedAt when a new
	// leader ran; RoutedAt when HAProxy sent writes to it; HealthyAt when
	// every node ran again as leader or replica.
	At, ElectedAt, RoutedAt, HealthyAt time.Time
	Err                                string
	// FirstCreated is the first 201 for a payment once the new leader ran;
	// OldCreated counts the 201s between At and then (the old leader still
	// served writes), the last at LastOldCreated. Unavailable is the
	// longest stretch of answers from At to FirstCreated that were all 5xx
	// or transport errors, and UnavailableN how many; Answers counts every
	// answer from At to FirstCreated by label.
	FirstCreated   time.Time
	OldCreated     int
	LastOldCreated time.Time
	Unavailable    time.Duration
	UnavailableN   int
	Answers        map[string]int
	// Internal counts the service's 500s from At to the next event (or the
	// end of the run): none is expected.
	Internal int
}

// patroniEvents breaks the cluster three times in turn, starting a sixth
// of the way into the run (see FailoverPatroniSync). Once begun, every
// event is carried through and the cluster left whole, whatever the length
// of the run (ctx's deadline); only an interrupted run (ctx cancelled)
// stops between two events.
func (c *Controller) patroniEvents(ctx context.Context) {
	p := c.Patroni
	select {
	case <-ctx.Done():
		return
	case <-time.After(c.Cfg.Duration / 6):
	}
	bg := context.Background()
	kinds := []string{"kill leader's Patroni + postmaster", "kill leader's Patroni only", "patronictl switchover"}
	for i, kind := range kinds {
		if i > 0 && errors.Is(ctx.Err(), context.Canceled) {
			return // interrupted (not the load's end): the cluster is whole
		}
		ev := &PatroniEvent{Kind: kind, Via: "HAProxy"}
		if c.Cfg.PgBouncer {
			ev.Via = "PgBouncer (transaction pooling) -> HAProxy"
		}
		// Check 8: no serve process up at any event exits on its own.
		for _, pid := range c.Fleet.Pids() {
			if !slices.Contains(c.Failover.UpAtStop, pid) {
				c.Failover.UpAtStop = append(c.Failover.UpAtStop, pid)
			}
		}
		c.Failover.Patroni = append(c.Failover.Patroni, ev)
		if err := c.patroniEvent(bg, p, i, ev); err != nil {
			ev.Err = err.Error()
			c.Events.Logf(EventHarnessErr, "patroni event (%c) %s: %v", 'a'+i, kind, err)
			return
		}
		if i == 0 {
			c.Failover.StoppedAt = ev.At
		}
		c.Failover.PromotedAt = ev.ElectedAt
		time.Sleep(3 * time.Second) // the service shows its recovery before the next event
	}
}

// patroniEvent carries out event i (a, b, c) and waits for its end.
func (c *Controller) patroniEvent(ctx context.Context, p *PatroniCluster, i int, ev *PatroniEvent) error {
	old, ms := p.Leader(ctx, "")
	if old == "" {
		return fmt.Errorf("no leader to break: %v", ms)
	}
	ev.OldLeader = old
	letter := 'a' + rune(i)
	switch i {
	case 0, 1:
		ev.At = time.Now()
		pid, err := p.kill(filepath.Join(old, "patroni.pid"))
		if err != nil {
			return fmt.Errorf("killing %s's Patroni: %w", old, err)
		}
		what := fmt.Sprintf("Patroni (pid %d)", pid)
		if i == 0 {
			pm, err := p.kill(filepath.Join(old, "data", "postmaster.pid"))
			if err != nil {
				return fmt.Errorf("killing %s's postmaster: %w", old, err)
			}
			what += fmt.Sprintf(" and postmaster (pid %d)", pm)
		}
		c.Events.Logf(EventPrimaryStop, "patroni (%c): SIGKILLed leader %s's %s", letter, old, what)
	case 2:
		candidate := ""
		for _, m := range ms {
			if m.Name != old && (m.Role == "sync_standby" || !p.Sync && candidate == "") {
				candidate = m.Name
			}
		}
		if candidate == "" {
			return fmt.Errorf("no switchover candidate: %v", ms)
		}
		ev.At = time.Now()
		c.Events.Logf(EventPrimaryStop, "patroni (%c): patronictl switchover --leader %s --candidate %s --force", letter, old, candidate)
		out, err := p.script(ctx, "ctl", "switchover", "--leader", old, "--candidate", candidate, "--force")
		if err != nil {
			return err
		}
		if !strings.Contains(out, "witched over") {
			return fmt.Errorf("patronictl switchover: %s", strings.TrimSpace(out))
		}
	}
	deadline := ev.At.Add(90 * time.Second)
	for ev.NewLeader == "" {
		if time.Now().After(deadline) {
			return fmt.Errorf("no new leader 90s after the event")
		}
		if l, _ := p.Leader(ctx, ""); l != "" && l != old {
			ev.NewLeader, ev.ElectedAt = l, time.Now()
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.Events.Logf(EventPromote, "patroni (%c): %s leads, %s after the event", letter, ev.NewLeader,
		ev.ElectedAt.Sub(ev.At).Round(time.Millisecond))
	if i < 2 {
		// As systemd would: the dead Patroni comes back; the node rejoins.
		if _, err := p.script(ctx, "start-node", old); err != nil {
			return err
		}
		c.Events.Logf(EventPhase, "patroni (%c): %s's Patroni started again", letter, old)
	}
	for ev.RoutedAt.IsZero() || ev.HealthyAt.IsZero() {
		if time.Now().After(deadline) {
			_, ms := p.Leader(ctx, "")
			_, why := p.healthy(ms)
			return fmt.Errorf("the cluster is not whole 90s after the event: %s; %d standbys stream from %s",
				why, p.streaming(ctx, p.pgPort[ev.NewLeader]), ev.NewLeader)
		}
		if ev.RoutedAt.IsZero() && p.RoutesTo(ctx) == p.pgPort[ev.NewLeader] {
			ev.RoutedAt = time.Now()
		}
		if ms, err := p.Members(ctx, ""); err == nil && ev.HealthyAt.IsZero() {
			if ok, _ := p.healthy(ms); ok && p.streaming(ctx, p.pgPort[ev.NewLeader]) == len(p.Nodes)-1 {
				ev.HealthyAt = time.Now()
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.Events.Logf(EventPhase, "patroni (%c): HAProxy routes to %s %s after the event; the cluster whole after %s", letter,
		ev.NewLeader, ev.RoutedAt.Sub(ev.At).Round(time.Millisecond), ev.HealthyAt.Sub(ev.At).Round(time.Millisecond))
	return nil
}

// checkPatroniEvents is check 8's part in a Patroni run: each of the three
// events happened, the cluster was whole again after it, and the service
// answered no 500 meanwhile (a failover is a 503, store-unavailable).
func checkPatroniEvents(c *Check, r *Recovery) {
	if !r.Mode.Patroni() {
		return
	}
	for i := range 3 {
		c.Checked++
		switch {
		case i >= len(r.Failover.Patroni):
			c.Failf("Patroni event (%c) did not happen", 'a'+rune(i))
		case r.Failover.Patroni[i].Err != "":
			c.Failf("Patroni event (%c) %s failed: %s", 'a'+rune(i), r.Failover.Patroni[i].Kind, r.Failover.Patroni[i].Err)
		case r.Failover.Patroni[i].Internal > 0:
			c.Failf("Patroni event (%c) %s: the service answered %d 500s after it (see the serve logs)",
				'a'+rune(i), r.Failover.Patroni[i].Kind, r.Failover.Patroni[i].Internal)
		}
	}
}

// measurePatroni fills each event's recovery as the clients saw it: the
// first 201 after it and the stretches of answers that were all
// unavailable, from the ledger's answers.
func measurePatroni(rec *Recovery, l *Ledger) {
	answers := l.timeline()
	for i, ev := range rec.Failover.Patroni {
		if ev.At.IsZero() {
			continue
		}
		next := time.Now()
		if i+1 < len(rec.Failover.Patroni) && !rec.Failover.Patroni[i+1].At.IsZero() {
			next = rec.Failover.Patroni[i+1].At
		}
		for _, a := range answers {
			if !a.at.Before(ev.At) && a.at.Before(next) && strings.HasPrefix(a.label, "500") {
				ev.Internal++
			}
		}
	}
	for _, ev := range rec.Failover.Patroni {
		if ev.At.IsZero() {
			continue
		}
		elected := ev.ElectedAt
		if elected.IsZero() {
			elected = ev.At
		}
		ev.FirstCreated, _ = l.FirstCreatedAfter(elected)
		ev.OldCreated, ev.LastOldCreated = l.createdBetween(ev.At, elected)
		end := ev.FirstCreated
		if end.IsZero() {
			end = time.Now()
		}
		ev.Answers = map[string]int{}
		var runStart time.Time
		runN := 0
		closeRun := func(at time.Time) {
			if runN > 0 && at.Sub(runStart) > ev.Unavailable {
				ev.Unavailable, ev.UnavailableN = at.Sub(runStart), runN
			}
			runN = 0
		}
		for _, a := range answers {
			if a.at.Before(ev.At) || a.at.After(end) {
				continue
			}
			ev.Answers[a.label]++
			if unavailable(a.label) {
				if runN == 0 {
					runStart = a.at
				}
				runN++
				continue
			}
			closeRun(a.at)
		}
		closeRun(end)
	}
}

// createdBetween counts the 201s for payments from from to to, and says
// when the last came.
func (l *Ledger) createdBetween(from, to time.Time) (n int, last time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, at := range l.created {
		if !at.Before(from) && at.Before(to) {
			n++
			if at.After(last) {
				last = at
			}
		}
	}
	return n, last
}

// unavailable reports whether an answer says the service could not serve
// at all: a 5xx, or no HTTP answer.
func unavailable(label string) bool {
	return strings.HasPrefix(label, "5") || strings.HasPrefix(label, "net:")
}

// stampedAnswer is one attempt's answer and when it came.
type stampedAnswer struct {
	at    time.Time
	label string
}

// timeline returns every answer in the order they came.
func (l *Ledger) timeline() []stampedAnswer {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.stamps)
	sort.SliceStable(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

// printPatroni writes each event of a Patroni failover run.
func printPatroni(row func(name, format string, args ...any), rec *Recovery) {
	for i, ev := range rec.Failover.Patroni {
		if i == 0 {
			row("the service connects through", "%s", ev.Via)
		}
		name := fmt.Sprintf("(%c) %s", 'a'+rune(i), ev.Kind)
		if ev.Err != "" {
			row(name, "FAILED: %s", ev.Err)
			continue
		}
		since := func(t time.Time) string {
			if t.IsZero() {
				return "never"
			}
			return t.Sub(ev.At).Round(10 * time.Millisecond).String()
		}
		row(name, "%s -> %s", ev.OldLeader, ev.NewLeader)
		row("  new leader running", "%s after the event (Patroni's part)", since(ev.ElectedAt))
		row("  HAProxy routes writes to it", "%s", since(ev.RoutedAt))
		row("  cluster whole again", "%s (every other node streams from the new leader)", since(ev.HealthyAt))
		if ev.FirstCreated.IsZero() {
			row("  time to recover", "NEVER: no 201 after the event")
		} else {
			row("  time to recover", "%s (event -> first 201 once the new leader ran)", since(ev.FirstCreated))
		}
		if ev.OldCreated > 0 {
			row("  201s before the new leader", "%d, the last %s after the event (the old leader still took writes)",
				ev.OldCreated, since(ev.LastOldCreated))
		}
		row("  only 5xx/transport errors for", "%s (longest stretch, %d answers)", ev.Unavailable.Round(10*time.Millisecond), ev.UnavailableN)
		var parts []string
		for _, label := range slices.Sorted(maps.Keys(ev.Answers)) {
			parts = append(parts, fmt.Sprintf("%s: %d", label, ev.Answers[label]))
		}
		row("  answers until then", "%s", strings.Join(parts, ", "))
		row("  500s from the service", "%d (from the event to the next; see the serve logs)", ev.Internal)
	}
}
