package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// FailoverMode is how a failover run replicates to its standby.
type FailoverMode string

// The failover modes: none (the Postgres restart instead), a synchronous
// standby (a commit returns once the standby has it), an asynchronous one
// (a commit returns at once; the standby may lag).
const (
	FailoverOff   FailoverMode = ""
	FailoverSync  FailoverMode = "sync"
	FailoverAsync FailoverMode = "async"
)

// Pair is a failover run's Postgres: a primary and a streaming standby made
// from it with `pg_basebackup -R`, each a Cluster of its own, which the
// controller fails over mid-run as Patroni or a managed service would: the
// primary stopped hard, the standby promoted.
type Pair struct {
	Mode    FailoverMode
	Primary *Cluster
	Standby *Cluster

	// release frees the stopped primary's port (Cluster.HoldPort).
	release func()
}

// Start starts the primary afresh, makes the standby from it and starts it,
// and, for a synchronous pair, makes the primary wait for the standby on
// every commit. It returns once the standby streams (synchronously for a
// synchronous pair).
func (p *Pair) Start(ctx context.Context) error {
	if err := p.Standby.Stop(ctx); err != nil {
		return err
	}
	if err := p.Primary.StartFresh(ctx); err != nil {
		return err
	}
	for p.Standby.Port == p.Primary.Port || taken(p.Standby.Port) {
		p.Standby.Port++
	}
	if err := os.RemoveAll(p.Standby.PGData); err != nil {
		return err
	}
	if err := ownedByPostgres(p.Standby.PGData); err != nil {
		return err
	}
	// The standby is copied before synchronous_standby_names is set (an
	// earlier run may have left it set): once promoted, it has no standby
	// of its own to wait for.
	if err := exec1(ctx, p.Primary.AdminURL, "ALTER SYSTEM RESET synchronous_standby_names", "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	if _, err := pgTool(ctx, "pg_basebackup", "-D", p.Standby.PGData, "-R", "-X", "stream", "-c", "fast",
		"-h", "127.0.0.1", "-p", strconv.Itoa(p.Primary.Port), "-U", "postgres"); err != nil {
		return err
	}
	// The copy holds the primary's log; the standby starts its own.
	if err := os.Truncate(filepath.Join(p.Standby.PGData, "server.log"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := p.Standby.Start(ctx); err != nil {
		return err
	}
	if p.Mode == FailoverSync {
		if err := exec1(ctx, p.Primary.AdminURL, "ALTER SYSTEM SET synchronous_standby_names = '*'", "SELECT pg_reload_conf()"); err != nil {
			return err
		}
	}
	return p.waitStreaming(ctx)
}

// waitStreaming waits until the primary sees its standby streaming, in
// sync if the pair is synchronous.
func (p *Pair) waitStreaming(ctx context.Context) error {
	want := "async"
	if p.Mode == FailoverSync {
		want = "sync"
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var state string
		err := query1(ctx, p.Primary.AdminURL, `SELECT coalesce(max(sync_state), 'none') FROM pg_stat_replication
			WHERE state = 'streaming'`, &state)
		if err == nil && state == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the standby on port %d is not streaming (%s) after 30s (%s, %v; see %s/server.log)",
				p.Standby.Port, want, state, err, p.Standby.PGData)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// URL is the URL of database name that the service uses: both hosts, and
// only the one that accepts writes.
func (p *Pair) URL(name string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", p.Primary.Port, p.Standby.Port),
		Path:     "/" + name,
		RawQuery: "sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
	}
	return u.String()
}

// CutReplication stops the standby's WAL receiver, as a slow or broken
// link to an asynchronous standby would: from now on the primary commits
// what the standby will never have.
func (p *Pair) CutReplication(ctx context.Context) error {
	return exec1(ctx, p.Standby.AdminURL, "ALTER SYSTEM SET primary_conninfo = ''", "SELECT pg_reload_conf()")
}

// Lag is how many bytes of WAL the primary wrote that the standby did not
// receive, read just before the primary stops.
func (p *Pair) Lag(ctx context.Context) (int64, error) {
	var received string
	if err := query1(ctx, p.Standby.AdminURL, `SELECT coalesce(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())::text`, &received); err != nil {
		return 0, err
	}
	var lag int64
	err := query1(ctx, p.Primary.AdminURL, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint`, &lag, received)
	return lag, err
}

// StopPrimary stops the primary the hard way (pg_ctl stop -m immediate):
// no shutdown checkpoint, no goodbye to the clients or the standby. Its
// address then refuses connections until Stop, as a dead host's would.
func (p *Pair) StopPrimary(ctx context.Context) error {
	if _, err := pgTool(ctx, "pg_ctl", "-D", p.Primary.PGData, "-m", "immediate", "-w", "stop"); err != nil {
		return err
	}
	release, err := p.Primary.HoldPort()
	if err != nil {
		return err
	}
	p.release = release
	return nil
}

// Promote promotes the standby and waits until it accepts writes.
func (p *Pair) Promote(ctx context.Context) error {
	_, err := pgTool(ctx, "pg_ctl", "-D", p.Standby.PGData, "-w", "-t", "60", "promote")
	return err
}

// Stop stops both clusters (either may be down already).
func (p *Pair) Stop(ctx context.Context) error {
	if p.release != nil {
		p.release()
	}
	return errors.Join(p.Primary.Stop(ctx), p.Standby.Stop(ctx))
}

// pgBin is the directory of Postgres's programs, found as
// scripts/postgres.sh finds it.
func pgBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	if path, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(path), nil
	}
	return "", errors.New("no Postgres programs (pg_ctl, pg_basebackup) found: run scripts/postgres.sh start once to install them")
}

// pgTool runs one of Postgres's programs, as the postgres user when the
// harness runs as root (Postgres refuses root), and returns its output.
func pgTool(ctx context.Context, name string, args ...string) (string, error) {
	bin, err := pgBin()
	if err != nil {
		return "", err
	}
	path := filepath.Join(bin, name)
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// ownedByPostgres creates dir for the postgres user, as Postgres wants its
// data directory (mode 0700, its own).
func ownedByPostgres(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(dir, uid, gid)
}

// exec1 runs statements on a connection of its own.
func exec1(ctx context.Context, dbURL string, stmts ...string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// query1 reads one value on a connection of its own.
func query1(ctx context.Context, dbURL, sql string, dst any, args ...any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return conn.QueryRow(ctx, sql, args...).Scan(dst)
}
