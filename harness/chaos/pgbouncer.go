package chaos

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

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
