package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Statements reads pg_stat_statements over a connection to the bench
// database (the extension's view lives there). Every reading is one
// transaction in that database, which the commit accounting subtracts.
type Statements struct {
	conn *pgx.Conn
}

// statementStats is one pg_stat_statements entry.
type statementStats struct {
	query   string
	calls   int64
	totalMs float64
	// The shared buffers the statement found in the pool (hit), read
	// from the kernel or the disk (read), changed (dirtied), and wrote out
	// itself to make room (written); the write-ahead log it made, and the
	// whole pages in it (full-page images: the first change of a page
	// after a checkpoint).
	blocksHit, blocksRead, blocksDirtied, blocksWritten int64
	walFPI, walBytes                                    int64
}

// snapshot is pg_stat_statements at one moment, by query id.
type snapshot map[int64]statementStats

// EnableStatements creates pg_stat_statements in the bench database at
// benchURL and checks that it works, which it only does when the server
// preloads it (shared_preload_libraries). It returns nil and the reason when
// it is not available.
func EnableStatements(ctx context.Context, benchURL string) (*Statements, string) {
	conn, reason := connectWithExtension(ctx, benchURL, "pg_stat_statements")
	if conn == nil {
		return nil, reason
	}
	s := &Statements{conn: conn}
	if _, err := s.snapshot(ctx); err != nil {
		_, _ = conn.Exec(ctx, "DROP EXTENSION IF EXISTS pg_stat_statements")
		_ = conn.Close(ctx)
		return nil, "not loadable (the server does not have it in shared_preload_libraries): " + firstLine(err)
	}
	return s, "enabled"
}

// Close closes the connection.
func (s *Statements) Close(ctx context.Context) {
	if s != nil {
		_ = s.conn.Close(ctx)
	}
}

// snapshot reads every entry of the bench database but its own queries.
func (s *Statements) snapshot(ctx context.Context) (snapshot, error) {
	rows, err := s.conn.Query(ctx, `
		SELECT queryid, calls, total_exec_time, shared_blks_hit, shared_blks_read, shared_blks_dirtied,
		       shared_blks_written, wal_fpi, wal_bytes::bigint, query
		FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND query NOT LIKE '%pg_stat_statements%'`)
	if err != nil {
		return nil, err
	}
	snap := snapshot{}
	for rows.Next() {
		var (
			id int64
			st statementStats
		)
		if err := rows.Scan(&id, &st.calls, &st.totalMs, &st.blocksHit, &st.blocksRead, &st.blocksDirtied,
			&st.blocksWritten, &st.walFPI, &st.walBytes, &st.query); err != nil {
			return nil, err
		}
		snap[id] = st
	}
	return snap, rows.Err()
}

// Snapshot is snapshot for a Statements that may be nil (disabled).
func (s *Statements) Snapshot(ctx context.Context) (snapshot, error) {
	if s == nil {
		return nil, nil
	}
	snap, err := s.snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("error reading pg_stat_statements: %w", err)
	}
	return snap, nil
}

// Readings is how many transactions a Snapshot costs in the bench database.
func (s *Statements) Readings() int {
	if s == nil {
		return 0
	}
	return 1
}

// addDelta adds what happened between a and b to sum.
func addDelta(sum, a, b snapshot) {
	for id, st := range b {
		prev := a[id]
		if st.calls == prev.calls {
			continue
		}
		acc := sum[id].plus(st, 1).plus(prev, -1)
		acc.query = st.query
		sum[id] = acc
	}
}

// plus is s with sign times b's counters added (its query is s's).
func (s statementStats) plus(b statementStats, sign int64) statementStats {
	s.calls += sign * b.calls
	s.totalMs += float64(sign) * b.totalMs
	s.blocksHit += sign * b.blocksHit
	s.blocksRead += sign * b.blocksRead
	s.blocksDirtied += sign * b.blocksDirtied
	s.blocksWritten += sign * b.blocksWritten
	s.walFPI += sign * b.walFPI
	s.walBytes += sign * b.walBytes
	return s
}

// commits counts COMMIT statements in a delta.
func (snap snapshot) commits() int64 {
	var n int64
	for _, st := range snap {
		if strings.EqualFold(strings.TrimSpace(st.query), "commit") {
			n += st.calls
		}
	}
	return n
}

// top returns the n statements with the most execution time, with their
// calls per request.
func (snap snapshot) top(n, requests int) []Statement {
	var total float64
	list := make([]Statement, 0, len(snap))
	for _, st := range snap {
		total += st.totalMs
		list = append(list, Statement{Query: oneLine(st.query), Calls: st.calls, TotalMs: st.totalMs,
			MeanMs: st.totalMs / float64(st.calls)})
	}
	slices.SortFunc(list, func(a, b Statement) int {
		switch {
		case a.TotalMs > b.TotalMs:
			return -1
		case a.TotalMs < b.TotalMs:
			return 1
		}
		return strings.Compare(a.Query, b.Query)
	})
	list = list[:min(n, len(list))]
	for i := range list {
		if requests > 0 {
			list[i].PerRequest = float64(list[i].Calls) / float64(requests)
		}
		if total > 0 {
			list[i].ShareOfTime = list[i].TotalMs / total
		}
	}
	return list
}

// oneLine squeezes a query's white space for a table cell.
func oneLine(q string) string {
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > 160 {
		q = q[:157] + "..."
	}
	return q
}

// firstLine is an error message's first line.
// connectWithExtension opens a reading connection to the bench database and
// creates extension there. It returns nil and the reason when either fails.
// The connection speaks the simple protocol: one round trip and one
// transaction per query, with no statement preparation, so the accounting
// knows exactly what its readings cost.
func connectWithExtension(ctx context.Context, benchURL, extension string) (*pgx.Conn, string) {
	cfg, err := pgx.ParseConfig(benchURL)
	if err != nil {
		return nil, err.Error()
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, "could not connect: " + err.Error()
	}
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS "+extension); err != nil {
		_ = conn.Close(ctx)
		return nil, "CREATE EXTENSION " + extension + " failed: " + firstLine(err)
	}
	return conn, ""
}

func firstLine(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return msg
}
