package bench

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// WAL counts the writing transactions of the bench database from the
// write-ahead log, with pg_walinspect (Postgres 15 and later, superuser):
// the distinct transaction ids of the WAL records that touch one of its
// relations between two readings. Unlike the cluster's transaction-id
// counter it sees nothing of other databases, so other work on the server
// does not blur it.
//
// Of those it also counts the phase commits: the transactions that wrote
// the idempotency_keys table. Every phase commit fences the key row, and
// nothing else writes it, so they are the commits of the request path;
// the rest is the service's background work (the outbox's jobs).
type WAL struct {
	conn *pgx.Conn
	// db matches the block references of the bench database's relations
	// ("rel <tablespace>/<database>/<relation> …"), keys those of the
	// idempotency_keys table.
	db, keys string
}

// Writes is what the WAL shows between two readings.
type Writes struct {
	// All counts the transactions that wrote to the bench database.
	All int64
	// Phases counts those that wrote idempotency_keys.
	Phases int64
}

// EnableWAL creates pg_walinspect in the bench database at benchURL. It
// returns nil and the reason when that is not possible.
func EnableWAL(ctx context.Context, benchURL string) (*WAL, string) {
	conn, reason := connectWithExtension(ctx, benchURL, "pg_walinspect")
	if conn == nil {
		return nil, reason
	}
	var db, keys uint32
	err := conn.QueryRow(ctx, `SELECT oid, pg_relation_filenode('idempotency_keys') FROM pg_database
		WHERE datname = current_database()`).Scan(&db, &keys)
	if err != nil {
		_ = conn.Close(ctx)
		return nil, firstLine(err)
	}
	return &WAL{conn: conn, db: fmt.Sprintf("%% rel %%/%d/%%", db), keys: fmt.Sprintf("%% rel %%/%d/%d %%", db, keys)}, "enabled"
}

// Close closes the connection.
func (w *WAL) Close(ctx context.Context) {
	if w != nil {
		_ = w.conn.Close(ctx)
	}
}

// Writes counts the transactions that wrote to the bench database between
// readings a and b. It fails when the WAL in between was already recycled
// (a checkpoint in between can do that).
func (w *WAL) Writes(ctx context.Context, a, b Reading) (Writes, error) {
	var n Writes
	if a.LSN == b.LSN {
		// Nothing was written anywhere (pg_walinspect refuses an empty range).
		return n, nil
	}
	err := w.conn.QueryRow(ctx, `
		SELECT count(DISTINCT xid::text::bigint),
		       count(DISTINCT xid::text::bigint) FILTER (WHERE block_ref LIKE $4)
		FROM pg_get_wal_records_info($1::text::pg_lsn, $2::text::pg_lsn)
		WHERE xid <> '0'::xid AND block_ref LIKE $3`, a.LSN, b.LSN, w.db, w.keys).Scan(&n.All, &n.Phases)
	if err != nil {
		return n, fmt.Errorf("error reading the WAL: %w", err)
	}
	return n, nil
}
