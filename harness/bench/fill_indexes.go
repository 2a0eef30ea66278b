package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Indexes are built once the rows are in, not row by row: Fill drops
// (dropIndexes) every index of the tables it fills, and the constraint an
// index backs, but the primary keys that foreign keys point at; inserts;
// and builds them again from their own definitions. Inserting into an index row by row costs
// several times what sorting the rows once does, and an index on random
// values (client keys, which look like UUIDs; intent ids; Stripe ids)
// costs a random page per insert once it outgrows the cache: row by row,
// a fill of 1 M keys took 116 s against 26 s, and the gap widens with size.
//
// A build is no denser than the service would leave the index: an index
// whose inserts come in key order (ids, times, per user) fills its pages to
// the B-tree's fillfactor either way, and one on random values is built at
// the density random inserts leave (leaves about 70% full: a full page
// splits in halves, which fill again before they split), WITH (fillfactor
// = 70), then reset, so that the definition ends as the migration made it.
// (Measured: 1 M random keys inserted one by one make an 84 MB index; built
// at 70, 84 MB; at the default 90, 65 MB.)
//
// randomIndexes are the indexes on random values, built at
// randomIndexFillFactor.
var randomIndexes = []string{
	"idempotency_keys_user_id_idempotency_key_key",
	"payments_stripe_payment_intent_id_key",
	"refunds_stripe_refund_id_key",
	"stripe_events_pkey",
	"idempotency_key_tombstones_pkey",
}

// randomIndexFillFactor is the leaf density a B-tree grown by random
// inserts settles at.
const randomIndexFillFactor = 70

// savedIndex is an index dropped for the fill: its definition, and the
// constraint it backed, if any.
type savedIndex struct {
	name, table string
	def         string // pg_get_indexdef
	constraint  string // "PRIMARY KEY" or "UNIQUE", or ""
	fillFactor  int    // to build it with, or 0
	built       bool
}

// dropIndexes drops the indexes of the filled tables that no foreign key
// needs, and the constraints they back, and returns how to build them
// again, the biggest first.
func dropIndexes(ctx context.Context, conn *pgx.Conn, log io.Writer) ([]fillJob, error) {
	rows, err := conn.Query(ctx, `
		SELECT i.relname, t.relname, pg_get_indexdef(i.oid),
		       coalesce(CASE c.contype WHEN 'p' THEN 'PRIMARY KEY' WHEN 'u' THEN 'UNIQUE' END, ''),
		       c.contype IS NOT NULL AND c.contype NOT IN ('p', 'u') OR i.reloptions IS NOT NULL
		FROM pg_index x
		JOIN pg_class i ON i.oid = x.indexrelid
		JOIN pg_class t ON t.oid = x.indrelid
		LEFT JOIN pg_constraint c ON c.conindid = i.oid AND c.conrelid = t.oid AND c.contype <> 'f'
		WHERE t.relname = ANY ($1) AND t.relnamespace = current_schema()::regnamespace
		  AND NOT EXISTS (SELECT 1 FROM pg_constraint f WHERE f.conindid = i.oid AND f.contype = 'f')
		ORDER BY array_position($1, t.relname::text), i.relname`, fillTables)
	if err != nil {
		return nil, fmt.Errorf("fill: error reading index definitions: %w", err)
	}
	var saved []*savedIndex
	for rows.Next() {
		var s savedIndex
		var special bool
		if err := rows.Scan(&s.name, &s.table, &s.def, &s.constraint, &special); err != nil {
			return nil, err
		}
		if special {
			fmt.Fprintf(log, "fill: %s is not a plain index; it stays in place\n", s.name)
			continue
		}
		if slices.Contains(randomIndexes, s.name) {
			s.fillFactor = randomIndexFillFactor
		}
		saved = append(saved, &s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("fill: error reading index definitions: %w", err)
	}
	var jobs []fillJob
	for _, s := range saved {
		drop := "DROP INDEX " + pgx.Identifier{s.name}.Sanitize()
		if s.constraint != "" {
			drop = "ALTER TABLE " + pgx.Identifier{s.table}.Sanitize() + " DROP CONSTRAINT " + pgx.Identifier{s.name}.Sanitize()
		}
		if _, err := conn.Exec(ctx, drop); err != nil {
			return jobs, fmt.Errorf("fill: error dropping %s for the fill: %w", s.name, err)
		}
		jobs = append(jobs, fillJob{what: s.name, index: s})
	}
	return jobs, nil
}

// create builds the index again as it was defined, and its constraint.
func (s *savedIndex) create(ctx context.Context, conn *pgx.Conn) error {
	name, table := pgx.Identifier{s.name}.Sanitize(), pgx.Identifier{s.table}.Sanitize()
	statements := []string{s.def}
	if s.fillFactor > 0 {
		def, where, partial := strings.Cut(s.def, " WHERE ")
		def = fmt.Sprintf("%s WITH (fillfactor = %d)", def, s.fillFactor)
		if partial {
			def += " WHERE " + where
		}
		statements = []string{def, "ALTER INDEX " + name + " RESET (fillfactor)"}
	}
	if s.constraint != "" {
		statements = append(statements, "ALTER TABLE "+table+" ADD CONSTRAINT "+name+" "+s.constraint+" USING INDEX "+name)
	}
	for _, st := range statements {
		if _, err := conn.Exec(ctx, st); err != nil {
			return fmt.Errorf("fill: error building %s again: %s: %w", s.name, st, err)
		}
	}
	s.built = true
	return nil
}

// restoreIndexes builds the indexes a failed fill left dropped, on a
// connection of its own (the fill's may be broken), so that the database
// keeps its constraints; it says so when it cannot.
func restoreIndexes(ctx context.Context, dbURL string, dropped []fillJob, log io.Writer) {
	var conn *pgx.Conn
	for _, j := range dropped {
		if j.index.built {
			continue
		}
		if conn == nil {
			var err error
			if conn, err = pgx.Connect(ctx, dbURL); err != nil {
				fmt.Fprintf(log, "fill: error restoring the indexes after a failed fill (the database is unfit to measure): %v\n", err)
				return
			}
			defer conn.Close(ctx)
		}
		if err := j.index.create(ctx, conn); err != nil {
			fmt.Fprintf(log, "%v (the database is unfit to measure)\n", err)
		}
	}
}
