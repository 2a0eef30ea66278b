package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// The failover modes under a real manager (CHAOS_FAILOVER=patroni-sync or
// patroni-async): etcd, three Patroni-managed Postgres nodes and HAProxy
// routing on Patroni's REST /primary, all run by scripts/patroni.sh; the
// service's DATABASE_URL names HAProxy. The controller, instead of
// promoting a standby itself, breaks the cluster three times in turn and
// lets Patroni elect, HAProxy route and the service follow:
//
//	(a) the leader's Patroni and its postmaster SIGKILLed: a dead host;
//	(b) only the leader's Patroni SIGKILLed: its Postgres runs on, still a
//	    writable primary, and only HAProxy's /primary check (the REST API
//	    died with Patroni) routes away from it; no watchdog fences it;
//	(c) patronictl switchover --force to a named candidate: the planned
//	    move, the old leader demoted cleanly.
//
// After (a) and (b) the dead Patroni is started again, as systemd would:
// the node rejoins as a replica (pg_rewind where it must). Each event waits
// until a new leader runs, HAProxy routes writes to it and the cluster is
// whole again before the next.
//
// The home-made modes (sync, async) stay: they kill nothing but promote at
// an instant the harness chooses, with a replication cut that makes an
// asynchronous standby lag on purpose, so they prove the re-adoption of
// answers a failover lost more sharply, and they prove the multi-host URL
// with target_session_attrs. These prove the service under a real
// manager's timings, a router in front, and a primary left running.
const (
	FailoverPatroniSync  FailoverMode = "patroni-sync"
	FailoverPatroniAsync FailoverMode = "patroni-async"
)

// Patroni reports whether m is a failover under Patroni.
func (m FailoverMode) Patroni() bool {
	return m == FailoverPatroniSync || m == FailoverPatroniAsync
}

// Async reports whether m replicates asynchronously: a failover may lose
// acknowledged commits, which a reconciling client then sends again.
func (m FailoverMode) Async() bool { return m == FailoverAsync || m == FailoverPatroniAsync }

// PatroniCluster is the cluster of scripts/patroni.sh: its directory holds
// cluster.env (the ports), each node's config, pid files and data.
type PatroniCluster struct {
	Script string
	Dir    string
	Sync   bool
	// FirstPort is the first port the script tries.
	FirstPort int
	// HAProxyPort is where the service connects; Nodes are n1, n2, ...
	HAProxyPort int
	Nodes       []string
	pgPort      map[string]int
	restPort    map[string]int
	http        *http.Client
}

// Start brings the cluster up afresh and returns the postgres database's
// URL through HAProxy.
func (p *PatroniCluster) Start(ctx context.Context) (string, error) {
	out, err := p.script(ctx, "start")
	if err != nil {
		return "", err
	}
	env, err := readEnvFile(filepath.Join(p.Dir, "cluster.env"))
	if err != nil {
		return "", err
	}
	p.http = &http.Client{Timeout: time.Second}
	p.pgPort, p.restPort = map[string]int{}, map[string]int{}
	n, _ := strconv.Atoi(env["NODES"])
	p.HAProxyPort, _ = strconv.Atoi(env["HAPROXY_PORT"])
	for i := 1; i <= n; i++ {
		name := "n" + strconv.Itoa(i)
		p.Nodes = append(p.Nodes, name)
		p.pgPort[name], _ = strconv.Atoi(env["PG_PORT_"+name])
		p.restPort[name], _ = strconv.Atoi(env["REST_PORT_"+name])
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	u, err := url.Parse(lines[len(lines)-1])
	if err != nil || p.HAProxyPort == 0 || n == 0 {
		return "", fmt.Errorf("scripts/patroni.sh start: unexpected output %q (%v)", out, err)
	}
	u.RawQuery = "sslmode=disable&connect_timeout=2"
	return u.String(), nil
}

// Stop stops every process of the cluster; the data stays.
func (p *PatroniCluster) Stop(ctx context.Context) error {
	_, err := p.script(ctx, "stop")
	return err
}

func (p *PatroniCluster) script(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, p.Script, args...)
	sync := "0"
	if p.Sync {
		sync = "1"
	}
	cmd.Env = append(os.Environ(), "PAYMENTSD_PATRONI_DIR="+p.Dir, "PAYMENTSD_PATRONI_SYNC="+sync,
		"PAYMENTSD_PATRONI_PORT="+strconv.Itoa(p.FirstPort))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("scripts/patroni.sh %s: %w: %s%s", strings.Join(args, " "), err,
			strings.TrimSpace(stdout.String()), strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// readEnvFile reads NAME=VALUE lines.
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	return env, sc.Err()
}

// PatroniMember is one member as Patroni's REST /cluster lists it.
type PatroniMember struct {
	Name     string `json:"name"`
	Role     string `json:"role"`
	State    string `json:"state"`
	Timeline int    `json:"timeline"`
	Lag      any    `json:"lag"`
}

func (m PatroniMember) leader() bool {
	return (m.Role == "leader" || m.Role == "master" || m.Role == "primary") && m.State == "running"
}

// Members lists the cluster's members, as the first node (but skip) whose
// REST API answers sees them in etcd.
func (p *PatroniCluster) Members(ctx context.Context, skip string) ([]PatroniMember, error) {
	var errs []error
	for _, n := range p.Nodes {
		if n == skip {
			continue
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/cluster", p.restPort[n]), nil)
		resp, err := p.http.Do(req)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var c struct {
			Members []PatroniMember `json:"members"`
		}
		err = json.NewDecoder(resp.Body).Decode(&c)
		resp.Body.Close()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		return c.Members, nil
	}
	return nil, fmt.Errorf("no Patroni REST API answers: %w", errors.Join(errs...))
}

// Leader is the running leader, if any.
func (p *PatroniCluster) Leader(ctx context.Context, skip string) (string, []PatroniMember) {
	ms, err := p.Members(ctx, skip)
	if err != nil {
		return "", nil
	}
	for _, m := range ms {
		if m.leader() {
			return m.Name, ms
		}
	}
	return "", ms
}

// healthy reports whether the cluster is whole: one running leader, every
// other node a running replica on its timeline with a known lag, one of
// them the sync standby in synchronous mode. why says what lacks.
func (p *PatroniCluster) healthy(ms []PatroniMember) (ok bool, why string) {
	var leader *PatroniMember
	for i := range ms {
		if ms[i].leader() {
			leader = &ms[i]
		}
	}
	replicas, sync := 0, false
	var parts []string
	for _, m := range ms {
		parts = append(parts, fmt.Sprintf("%s %s %s tl %d lag %v", m.Name, m.Role, m.State, m.Timeline, m.Lag))
		_, lagKnown := m.Lag.(float64)
		if leader != nil && (m.Role == "replica" || m.Role == "sync_standby") &&
			(m.State == "running" || m.State == "streaming") && lagKnown && m.Timeline == leader.Timeline {
			replicas++
			sync = sync || m.Role == "sync_standby"
		}
	}
	ok = leader != nil && replicas == len(p.Nodes)-1 && (!p.Sync || sync)
	return ok, strings.Join(parts, "; ")
}

// RoutesTo is the Postgres port HAProxy sends a new connection to, if that
// server accepts writes; 0 otherwise.
func (p *PatroniCluster) RoutesTo(ctx context.Context) int {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=1", p.HAProxyPort))
	if err != nil {
		return 0
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var port int
	if err := conn.QueryRow(ctx, "SELECT current_setting('port')::int WHERE NOT pg_is_in_recovery()").Scan(&port); err != nil {
		return 0
	}
	return port
}

// streaming is how many standbys stream from the Postgres on port, as its
// pg_stat_replication says; -1 if it cannot be read. Patroni's /cluster
// lists a replica as running, on the new timeline, before it streams (its
// replication slot on the new leader comes a loop later), and Patroni
// refuses a switchover to it then.
func (p *PatroniCluster) streaming(ctx context.Context, port int) int {
	var n int
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=1", port)
	if err := query1(ctx, url, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'", &n); err != nil {
		return -1
	}
	return n
}

// pid reads the first line of a pid file under the cluster's directory.
func (p *PatroniCluster) pid(rel string) (int, error) {
	b, err := os.ReadFile(filepath.Join(p.Dir, rel))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(line))
}

// kill SIGKILLs the process of a pid file.
func (p *PatroniCluster) kill(rel string) (int, error) {
	pid, err := p.pid(rel)
	if err != nil {
		return 0, err
	}
	return pid, syscall.Kill(pid, syscall.SIGKILL)
}

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

// startPatroni brings up the Patroni cluster (scripts/patroni.sh, in
// -pgdata from port -pgport on) and makes HAProxy's address the cluster's:
// the database is created through it and every process connects there.
func (r *Rig) startPatroni(ctx context.Context) error {
	cfg := r.Cfg
	r.Patroni = &PatroniCluster{Script: filepath.Join(cfg.Root, "scripts", "patroni.sh"), Dir: cfg.PGData,
		Sync: cfg.Failover == FailoverPatroniSync, FirstPort: cfg.PGPort}
	r.Events.Logf(EventPhase, "starting etcd, the Patroni nodes and HAProxy (scripts/patroni.sh)")
	adminURL, err := r.Patroni.Start(ctx)
	if err != nil {
		return err
	}
	cfg.PGPort = r.Patroni.HAProxyPort
	r.Cluster = &Cluster{PGData: cfg.PGData, Port: cfg.PGPort, AdminURL: adminURL}
	leader, _ := r.Patroni.Leader(ctx, "")
	r.Events.Logf(EventPhase, "patroni cluster %v up (leader %s, synchronous_mode %v); HAProxy on 127.0.0.1:%d",
		r.Patroni.Nodes, leader, r.Patroni.Sync, r.Patroni.HAProxyPort)
	return nil
}

// startPgBouncer puts PgBouncer in transaction pooling mode
// (scripts/pgbouncer.sh) in front of the database (of HAProxy, in a Patroni
// run) once it is migrated (goose needs a session), and points every later
// process there, in pgx's exec mode, as docs/configuration.md's "Behind
// PgBouncer" says. scripts/patroni.sh stop stops a Patroni run's, Teardown
// (stopPgBouncer) another's.
func (r *Rig) startPgBouncer(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, filepath.Join(r.Cfg.Root, "scripts", "pgbouncer.sh"), "start", r.DBURL)
	cmd.Env = append(os.Environ(), "PAYMENTSD_PGBOUNCER_DIR="+r.pgBouncerDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("scripts/pgbouncer.sh start: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	pooled, err := url.Parse(strings.TrimSpace(stdout.String()))
	if err != nil {
		return err
	}
	q := pooled.Query()
	q.Set("connect_timeout", "2")
	pooled.RawQuery = q.Encode()
	r.DBURL = pooled.String()
	r.Events.Logf(EventPhase, "PgBouncer (transaction pooling) in front of the database at %s", pooled.Host)
	return nil
}

// pgBouncerDir holds a run's PgBouncer: in a Patroni run's directory, which
// scripts/patroni.sh stop cleans, or in .tmp/chaos-pgbouncer.
func (r *Rig) pgBouncerDir() string {
	if r.Patroni != nil {
		return filepath.Join(r.Patroni.Dir, "pgbouncer")
	}
	return filepath.Join(r.Cfg.Root, ".tmp", "chaos-pgbouncer")
}

// stopPgBouncer stops the PgBouncer of a run that is not Patroni's.
func (r *Rig) stopPgBouncer(ctx context.Context) error {
	if !r.Cfg.PgBouncer || r.Patroni != nil {
		return nil
	}
	cmd := exec.CommandContext(ctx, filepath.Join(r.Cfg.Root, "scripts", "pgbouncer.sh"), "stop")
	cmd.Env = append(os.Environ(), "PAYMENTSD_PGBOUNCER_DIR="+r.pgBouncerDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("scripts/pgbouncer.sh stop: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
