package db

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// A failover to an asynchronous standby, or a restore to a point in time,
// loses the last commits of the old timeline, and with them the last values
// the sequences handed out: the new primary would hand the same ids out
// again. A client holding a lost payment's id would then read, or refund,
// another payment that came to bear it. So on a new timeline every
// sequence starts past every id an earlier timeline could have handed out:
// timeline t hands out ids above (t-1)<<40, and one timeline would need
// more than a trillion ids to reach the next one's.

// timelineBits is how many ids one timeline owns: 1<<40.
const timelineBits = 40

// SequenceFloor is the first id that timeline t may hand out, less one.
func SequenceFloor(timeline int64) int64 {
	if timeline <= 1 {
		return 0
	}
	return (timeline - 1) << timelineBits
}

// FollowTimeline moves every sequence of the current schema to its
// timeline's floor (SkipSequences) when the server's timeline is past the
// first. Connect runs it on every new connection before the pool hands the
// connection out, so no id is handed out on a new timeline before its
// sequences moved. On the first timeline, or on a standby, it costs one
// query.
func FollowTimeline(ctx context.Context, conn *pgx.Conn) error {
	var walFile *string
	err := conn.QueryRow(ctx, `SELECT CASE WHEN NOT pg_is_in_recovery() THEN pg_walfile_name(pg_current_wal_lsn()) END`).Scan(&walFile)
	if err != nil {
		return fmt.Errorf("error reading the server's timeline: %w", err)
	}
	if walFile == nil {
		return nil // a standby hands out no ids
	}
	// A WAL file's name begins with its timeline, in 8 hex digits.
	timeline, err := strconv.ParseInt((*walFile)[:min(8, len(*walFile))], 16, 64)
	if err != nil {
		return fmt.Errorf("error reading the timeline of WAL file %q: %w", *walFile, err)
	}
	if floor := SequenceFloor(timeline); floor > 0 {
		return SkipSequences(ctx, conn, floor)
	}
	return nil
}

// SkipSequences moves every sequence of the current schema that the user
// may update and that is below floor to floor, so its next value is above.
// A sequence that cannot reach floor (an integer one, as goose's own) is
// left alone: every id a client sees is a bigint.
// It holds an advisory lock meanwhile, so two connections never move a
// sequence back under an id already handed out.
func SkipSequences(ctx context.Context, conn *pgx.Conn, floor int64) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('paymentsd.skip_sequences'))`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT format('%I.%I', schemaname, sequencename) FROM pg_sequences
			WHERE schemaname = current_schema()
			  AND has_sequence_privilege(format('%I.%I', schemaname, sequencename), 'UPDATE')
			  AND coalesce(last_value, 0) < $1 AND max_value > $1`, floor)
		if err != nil {
			return err
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, name := range names {
			if _, err := tx.Exec(ctx, `SELECT setval($1::regclass, $2)`, name, floor); err != nil {
				return fmt.Errorf("error moving sequence %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("error moving the sequences to the timeline's floor %d: %w", floor, err)
	}
	return nil
}
