package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
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
