package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Checkpoints is where the filled runs fell in the server's checkpoint
// cycle. After a checkpoint the first change of every page goes into the
// WAL whole (a full-page image), so on a database whose indexes are far
// bigger than what a run changes, the cost of a write depends on how long
// ago the last checkpoint was: the report gives it beside the cost.
type Checkpoints struct {
	// Before and After are the age of the server's last checkpoint when
	// the measured runs began and when they ended.
	Before Seconds `json:"before"`
	After  Seconds `json:"after"`
	// During says whether a checkpoint came during the runs.
	During bool `json:"during,omitempty"`
	// Timeout is checkpoint_timeout, the longest the server goes between
	// two checkpoints (max_wal_size may bring one sooner).
	Timeout Seconds `json:"timeout"`
}

// checkpointReading is the server's last checkpoint, read at At: its time
// (to the second) and its place in the WAL, which tells two checkpoints of
// one second apart.
type checkpointReading struct {
	At, Last time.Time
	LSN      string
	Timeout  time.Duration
}

// readCheckpoint reads the last checkpoint of the server at dbURL, from
// its control file (pg_control_checkpoint, superuser or pg_monitor).
func readCheckpoint(ctx context.Context, dbURL string) (checkpointReading, error) {
	var r checkpointReading
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return r, fmt.Errorf("error connecting to %s: %w", redact(dbURL), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var timeout float64
	err = conn.QueryRow(ctx, `
		SELECT now(), c.checkpoint_time, c.checkpoint_lsn::text,
		       s.setting::float8 * CASE s.unit WHEN 'min' THEN 60 ELSE 1 END
		FROM pg_control_checkpoint() AS c, pg_settings AS s
		WHERE s.name = 'checkpoint_timeout'`).Scan(&r.At, &r.Last, &r.LSN, &timeout)
	if err != nil {
		return r, fmt.Errorf("error reading the last checkpoint: %w", err)
	}
	r.Timeout = time.Duration(timeout * float64(time.Second))
	return r, nil
}

// checkpointsOf is where runs between readings a and b fell.
func checkpointsOf(a, b checkpointReading) *Checkpoints {
	return &Checkpoints{
		Before: Of(a.At.Sub(a.Last)), After: Of(b.At.Sub(b.Last)),
		During: b.LSN != a.LSN, Timeout: Of(a.Timeout),
	}
}
