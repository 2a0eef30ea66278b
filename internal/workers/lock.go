package workers

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
)

// completerLock names the advisory lock a completer run holds: derived from
// a fixed name, so it is the same in every process and unlikely to be any
// other application's.
var completerLock = lockKey("paymentsd completer run")

// lockKey is an advisory lock key for name.
func lockKey(name string) int64 {
	sum := sha256.Sum256([]byte(name))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// unlockTimeout bounds releasing a run's lock, so a dead connection cannot
// hold the run (and a shutdown) up.
const unlockTimeout = 5 * time.Second

// runLocked runs f while this process holds the session-level advisory lock
// key, on a connection it keeps for the run: it waits, as long as ctx lets
// it, while another session holds the lock, so two runs never overlap.
//
// The lock lives as long as its session: should the connection die while f
// runs, another run may start beside this one. What f does must therefore
// stay safe on its own (the completer's keys are leased and fenced); the
// lock keeps runs from overlapping, it does not make them correct.
func runLocked(ctx context.Context, pool *pgxpool.Pool, key int64, f func(ctx context.Context) error) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("error acquiring a connection for the run lock: %w", err)
	}
	q := dbsqlc.New()
	if err := q.AdvisoryLock(ctx, conn, key); err != nil {
		conn.Release() // a connection broken by the cancelled wait is dropped
		return fmt.Errorf("error taking the run lock: %w", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
		defer cancel()
		if _, err := q.AdvisoryUnlock(ctx, conn, key); err != nil {
			// Ending the session releases its locks; the pool drops a
			// closed connection instead of reusing it.
			_ = conn.Conn().Close(ctx)
		}
		conn.Release()
	}()
	return f(ctx)
}
