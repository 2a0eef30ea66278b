package chaos

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Cluster is the harness's own Postgres cluster, run by scripts/postgres.sh
// with PAYMENTSD_PGDATA and PAYMENTSD_PGPORT pointing away from the
// developer's cluster, so the harness may stop and start it at will.
type Cluster struct {
	Script string
	PGData string
	Port   int
	// AdminURL is the URL of the postgres database, once started.
	AdminURL string
}

// StartFresh stops the cluster if an earlier run left it up, keeps Port
// unless it is taken (a developer's cluster that took it first, or a
// connection's own end: see taken), in which case it takes the next free
// port, and starts it.
func (c *Cluster) StartFresh(ctx context.Context) error {
	if err := c.Stop(ctx); err != nil {
		return err
	}
	want := c.Port
	for taken(c.Port) {
		if c.Port >= want+100 {
			return fmt.Errorf("no free port in %d-%d for the chaos cluster", want, c.Port)
		}
		c.Port++
	}
	return c.Start(ctx)
}

// taken reports whether 127.0.0.1:port cannot be listened on, as Postgres
// would find it: a server listens there, or a connection holds it as its
// own end. The clusters' ports lie in Linux's range of ephemeral ports, so
// a client's connection (to the other cluster, say) can hold one, and a
// dial finds no server there while Postgres still fails to start on it
// ("Address already in use").
func taken(port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return true
	}
	ln.Close()
	return false
}

// Start starts the cluster (or finds it running) and waits until it answers.
func (c *Cluster) Start(ctx context.Context) error {
	out, err := c.script(ctx, "start")
	if err != nil {
		return err
	}
	c.AdminURL = strings.TrimSpace(out)
	return c.verifyOwn(ctx)
}

// verifyOwn makes sure the server answering on the port runs on the
// harness's data directory, not on a developer's cluster that took the port
// first: the harness drops databases and stops the server it talks to.
func (c *Cluster) verifyOwn(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.AdminURL)
	if err != nil {
		return fmt.Errorf("error connecting to the chaos cluster: %w", err)
	}
	defer conn.Close(ctx)
	var dir string
	if err := conn.QueryRow(ctx, "SELECT current_setting('data_directory')").Scan(&dir); err != nil {
		return fmt.Errorf("error reading the chaos cluster's data directory: %w", err)
	}
	want, err := filepath.EvalSymlinks(c.PGData)
	if err != nil {
		return err
	}
	if got, err := filepath.EvalSymlinks(dir); err != nil || got != want {
		return fmt.Errorf("port %d is served by the cluster in %s, not by the chaos cluster in %s: pick another -pgport", c.Port, dir, c.PGData)
	}
	return nil
}

// HoldPort keeps the cluster's port, while the cluster is down, from any
// other server: another run's cluster would otherwise take it and answer
// the serve processes, which trust the address. Until release is called it
// accepts each connection and closes it at once, as a host without a
// server refuses one.
func (c *Cluster) HoldPort() (release func(), err error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Port)))
	if err != nil {
		return nil, fmt.Errorf("error holding port %d of the stopped cluster: %w", c.Port, err)
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	return func() { ln.Close() }, nil
}

// Stop stops the cluster with pg_ctl -m fast.
func (c *Cluster) Stop(ctx context.Context) error {
	_, err := c.script(ctx, "stop")
	return err
}

func (c *Cluster) script(ctx context.Context, verb string) (string, error) {
	cmd := exec.CommandContext(ctx, c.Script, verb)
	cmd.Env = append(os.Environ(), "PAYMENTSD_PGDATA="+c.PGData, "PAYMENTSD_PGPORT="+strconv.Itoa(c.Port))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("scripts/postgres.sh %s: %w: %s", verb, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// CreateDatabase drops name if it exists and creates it afresh, and returns
// its URL.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) (string, error) {
	conn, err := pgx.Connect(ctx, c.AdminURL)
	if err != nil {
		return "", fmt.Errorf("error connecting to the chaos cluster: %w", err)
	}
	defer conn.Close(ctx)
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
		return "", fmt.Errorf("error dropping database %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return "", fmt.Errorf("error creating database %s: %w", name, err)
	}
	u, err := url.Parse(c.AdminURL)
	if err != nil {
		return "", fmt.Errorf("error parsing %s: %w", c.AdminURL, err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// OpenPool opens a small pool for the harness's own queries: it must not
// compete with the service for connections or CPU.
func OpenPool(ctx context.Context, dbURL string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 2
	return pgxpool.NewWithConfig(ctx, cfg)
}
