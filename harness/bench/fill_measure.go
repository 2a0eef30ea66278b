package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
)

// FilledRequest is a request a filled key answers: sent again by its user,
// it is a replay of the stored answer.
type FilledRequest struct {
	User User
	Key  string
	// Path is "/payments" or "/payments/{id}/refunds"; Body what a client
	// sends there (JSON).
	Path string
	Body []byte
	// Status is the stored answer's: 201, or 402 for a declined payment.
	Status int
}

// FilledRequests picks n of the keys a fill made, spread evenly over them
// (and so over the whole of every index on keys), for a replay scenario
// that reads the full index rather than a few hot pages of it: the
// benchmark's own "replay-N" keys sit side by side in the index, filled
// keys are random. (The filled keys' ids are reserved for them, so every
// id picked is a filled key's.) It picks among the keys younger than the retention
// less two hours, so a run in the two hours after the fill replays
// none that the reaper has taken. stats is what Fill returned; users the
// users it was given (for their API keys).
func FilledRequests(ctx context.Context, dbURL string, users []User, stats FillStats, retention time.Duration, n int) ([]FilledRequest, error) {
	byID := map[int64]User{}
	for _, u := range users {
		byID[u.ID] = u
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, fmt.Errorf("error connecting to %s: %w", redact(dbURL), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// The filled keys' ids run in time order; pick n ids evenly among
	// those finished after the cut-off.
	rows, err := conn.Query(ctx, `
		WITH young AS (
		    SELECT min(id) AS lo, max(id) AS hi FROM idempotency_keys
		    WHERE id BETWEEN $1 AND $2 AND finished_at > $3::timestamptz - make_interval(secs => $4)
		)
		SELECT k.user_id, k.idempotency_key, k.request_path, k.request_params, k.response_code
		FROM young CROSS JOIN generate_series(0, $5 - 1) AS i
		JOIN idempotency_keys AS k ON k.id = young.lo + (young.hi - young.lo) * i / greatest($5 - 1, 1)
		ORDER BY i`,
		stats.FirstKeyID, stats.LastKeyID, stats.At, (retention - 2*time.Hour).Seconds(), n)
	if err != nil {
		return nil, fmt.Errorf("error picking filled keys: %w", err)
	}
	defer rows.Close()
	var out []FilledRequest
	for rows.Next() {
		var r FilledRequest
		var userID int64
		var params map[string]any
		if err := rows.Scan(&userID, &r.Key, &r.Path, &params, &r.Status); err != nil {
			return nil, fmt.Errorf("error picking filled keys: %w", err)
		}
		u, ok := byID[userID]
		if !ok {
			return nil, fmt.Errorf("filled key %s belongs to user %d, who is not among the users given", r.Key, userID)
		}
		r.User = u
		if r.Body, err = ClientBody(params); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error picking filled keys: %w", err)
	}
	return out, nil
}

// ClientBody is the body a client sends for a filled key's stored params:
// the params, compact and with members sorted (the canonical form, for
// these plain values), less a refund's payment_id, which is in the path
// (it is deleted from params).
// The fill stores the digest of these bytes (fill_digest), so a replay of
// a filled key is known by it, as a replay of a key the service made.
func ClientBody(params map[string]any) ([]byte, error) {
	delete(params, "payment_id")
	return json.Marshal(params)
}

// RelationSize is one table or index of the service's schema.
type RelationSize struct {
	Name string `json:"name"`
	// Kind is "table" or "index"; Table names an index's table.
	Kind  string `json:"kind"`
	Table string `json:"table,omitempty"`
	// Rows is the planner's estimate (reltuples, as of the last VACUUM or
	// ANALYZE), or an exact count when RowsExact: for tables under 16 MB
	// and for those never vacuumed or analyzed.
	Rows      int64 `json:"rows"`
	RowsExact bool  `json:"rows_exact,omitempty"`
	// HeapBytes is a table's own size, TOAST, free space and visibility
	// maps included (pg_table_size); IndexBytes its indexes' (or the
	// index's own); TotalBytes both.
	HeapBytes  int64 `json:"heap_bytes"`
	IndexBytes int64 `json:"index_bytes"`
	TotalBytes int64 `json:"total_bytes"`
}

// smallTableBytes is the size under which Sizes counts a table's rows.
const smallTableBytes = 16 << 20

// Sizes lists every table of the database's schema (current_schema(), the
// one the service migrates) and its indexes: rows, heap and index bytes.
// Tables come biggest first, each followed by its indexes, biggest first.
func Sizes(ctx context.Context, dbURL string) ([]RelationSize, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, fmt.Errorf("error connecting to %s: %w", redact(dbURL), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `
		SELECT c.relname, c.reltuples::bigint, pg_table_size(c.oid), pg_indexes_size(c.oid),
		       coalesce((SELECT array_agg(i.relname ORDER BY pg_relation_size(i.oid) DESC, i.relname)
		                 FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = c.oid), '{}'),
		       coalesce((SELECT array_agg(i.reltuples::bigint ORDER BY pg_relation_size(i.oid) DESC, i.relname)
		                 FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = c.oid), '{}'),
		       coalesce((SELECT array_agg(pg_relation_size(i.oid) ORDER BY pg_relation_size(i.oid) DESC, i.relname)
		                 FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = c.oid), '{}')
		FROM pg_class c
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
		ORDER BY pg_total_relation_size(c.oid) DESC, c.relname`)
	if err != nil {
		return nil, fmt.Errorf("error reading relation sizes: %w", err)
	}
	type table struct {
		size      RelationSize
		indexes   []string
		rows      []int64
		bytes     []int64
		needCount bool
	}
	var tables []table
	for rows.Next() {
		var t table
		var reltuples int64
		if err := rows.Scan(&t.size.Name, &reltuples, &t.size.HeapBytes, &t.size.IndexBytes, &t.indexes, &t.rows, &t.bytes); err != nil {
			return nil, fmt.Errorf("error reading relation sizes: %w", err)
		}
		t.size.Kind, t.size.Rows = "table", reltuples
		t.size.TotalBytes = t.size.HeapBytes + t.size.IndexBytes
		t.needCount = reltuples < 0 || t.size.HeapBytes < smallTableBytes
		tables = append(tables, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading relation sizes: %w", err)
	}
	var out []RelationSize
	for _, t := range tables {
		if t.needCount {
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{t.size.Name}.Sanitize()).Scan(&t.size.Rows); err != nil {
				return nil, fmt.Errorf("error counting %s: %w", t.size.Name, err)
			}
			t.size.RowsExact = true
		}
		out = append(out, t.size)
		for i, name := range t.indexes {
			ix := RelationSize{Name: name, Kind: "index", Table: t.size.Name, Rows: t.rows[i], IndexBytes: t.bytes[i], TotalBytes: t.bytes[i]}
			if ix.Rows < 0 {
				ix.Rows = -1 // never vacuumed or analyzed: no estimate
			}
			out = append(out, ix)
		}
	}
	return out, nil
}

// WriteRelationSizes writes sizes as a plain text table, for logs.
func WriteRelationSizes(w io.Writer, sizes []RelationSize) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "relation\trows\theap\tindexes\ttotal\t")
	for _, s := range sizes {
		name, rows, heap := s.Name, "-", "-"
		if s.Rows >= 0 {
			rows = fmt.Sprint(s.Rows)
			if !s.RowsExact {
				rows = "~" + rows
			}
		}
		if s.Kind == "index" {
			name = "  " + name
		} else {
			heap = formatBytes(s.HeapBytes)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", name, rows, heap, formatBytes(s.IndexBytes), formatBytes(s.TotalBytes))
	}
	return tw.Flush()
}

func formatBytes(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

// ReaperBacklog counts the finished keys older than retention: the ones
// the reaper (workers.ReaperWorker, IdempotencyKeyReap) would move to
// tombstones if it ran now, by its own predicate, on the database's clock.
func ReaperBacklog(ctx context.Context, dbURL string, retention time.Duration) (int64, error) {
	r, err := ReadReaper(ctx, dbURL, retention, 0)
	return r.Backlog, err
}

// ReaperReading is the reaper's work list at one moment.
type ReaperReading struct {
	// At is the database's clock.
	At time.Time
	// Backlog is the finished keys past the key retention: reapable now.
	Backlog int64
	// TombstoneBacklog is the tombstones past the tombstone retention
	// (zero when ReadReaper was given none).
	TombstoneBacklog int64
	// KeysIssued is the idempotency key sequence's last value: keys
	// created so far, give or take inserts that were rolled back or found
	// their key taken.
	KeysIssued int64
	// Retention and TombstoneRetention are the ones the backlogs were
	// counted with.
	Retention, TombstoneRetention time.Duration
}

// ReadReaper reads the reaper's backlogs with the service's retentions
// (PAYMENTSD_KEY_RETENTION, 24 h by default, and
// workers.TombstoneRetentionDefault; zero skips the tombstones). It costs a
// scan of the finished-keys index's expired end, which is as long as the
// backlog.
func ReadReaper(ctx context.Context, dbURL string, retention, tombstoneRetention time.Duration) (ReaperReading, error) {
	r := ReaperReading{Retention: retention, TombstoneRetention: tombstoneRetention}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return r, fmt.Errorf("error connecting to %s: %w", redact(dbURL), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// One statement, one snapshot, one now().
	err = conn.QueryRow(ctx, `
		SELECT now(),
		       (SELECT count(*) FROM idempotency_keys
		        WHERE recovery_point = 'finished' AND finished_at < now() - make_interval(secs => $1)),
		       CASE WHEN $2 > 0 THEN (SELECT count(*) FROM idempotency_key_tombstones
		                              WHERE reaped_at < now() - make_interval(secs => $2)) ELSE 0 END,
		       (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM idempotency_keys_id_seq)`,
		retention.Seconds(), tombstoneRetention.Seconds()).Scan(&r.At, &r.Backlog, &r.TombstoneBacklog, &r.KeysIssued)
	if err != nil {
		return r, fmt.Errorf("error reading the reaper's backlog: %w", err)
	}
	return r, nil
}

// ReaperWindow is what the reaper did between two readings, against what
// the service created meanwhile.
type ReaperWindow struct {
	Window time.Duration
	// Created is the keys created in the window (by the sequence), Reaped
	// the keys the reaper moved to tombstones (tombstones reaped in the
	// window).
	Created, Reaped int64
	// Due is the keys that passed the retention during the window:
	// Reaped + BacklogAfter - BacklogBefore.
	Due                         int64
	BacklogBefore, BacklogAfter int64
	// TombstoneBacklogBefore and TombstoneBacklogAfter likewise.
	TombstoneBacklogBefore, TombstoneBacklogAfter int64
}

// CreatedPerSecond is the rate keys were created at in the window.
func (w ReaperWindow) CreatedPerSecond() float64 { return perSecond(w.Created, w.Window) }

// ReapedPerSecond is the rate the reaper reaped at in the window.
func (w ReaperWindow) ReapedPerSecond() float64 { return perSecond(w.Reaped, w.Window) }

// DuePerSecond is the rate keys came due in the window.
func (w ReaperWindow) DuePerSecond() float64 { return perSecond(w.Due, w.Window) }

// KeepsUp reports whether the reaper kept up in the window: its backlog
// did not grow, or is no more than one run behind, what comes due over two
// of its intervals (interval, PAYMENTSD_REAPER_INTERVAL). Between two runs
// the backlog grows by an interval's worth by design, and River starts a
// periodic run a little after its tick and the run takes time, so a
// reading just before a run may see slightly more than one interval's.
func (w ReaperWindow) KeepsUp(interval time.Duration) bool {
	return w.BacklogAfter <= w.BacklogBefore || float64(w.BacklogAfter) <= 2*w.DuePerSecond()*interval.Seconds()+1
}

func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// ReaperBetween compares two readings of ReadReaper, a before b, and
// counts the tombstones the reaper made between them (the tombstones'
// reaped_at is the reaper's clock).
func ReaperBetween(ctx context.Context, dbURL string, a, b ReaperReading) (ReaperWindow, error) {
	w := ReaperWindow{
		Window:        b.At.Sub(a.At),
		Created:       b.KeysIssued - a.KeysIssued,
		BacklogBefore: a.Backlog, BacklogAfter: b.Backlog,
		TombstoneBacklogBefore: a.TombstoneBacklog, TombstoneBacklogAfter: b.TombstoneBacklog,
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return w, fmt.Errorf("error connecting to %s: %w", redact(dbURL), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM idempotency_key_tombstones WHERE reaped_at > $1 AND reaped_at <= $2",
		a.At, b.At).Scan(&w.Reaped); err != nil {
		return w, fmt.Errorf("error counting the keys reaped: %w", err)
	}
	w.Due = w.Reaped + w.BacklogAfter - w.BacklogBefore
	return w, nil
}
