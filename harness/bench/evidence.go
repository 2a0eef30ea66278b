package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// # The database's evidence per payment
//
// The design's cost is in what each payment makes the database write: the
// write-ahead log, row versions, index entries. Postgres tells it table by
// table and index by index. Around a side's first fresh run at each
// connection count (the service's, bracketed for the commit accounting,
// and the least-SQL bare's, bracketed alike), once the counters have
// settled, the harness reads:
//
//   - the WAL: its length between the two readings (the whole cluster's,
//     every record: commits, the background's), and pg_walinspect's
//     records of the bench database's relations grouped by the relation
//     of their first block, heap and index alike, with their full-page
//     images;
//   - each table's row changes (pg_stat_user_tables): inserts, updates,
//     and the updates that were HOT (heap-only: no index entry written,
//     which needs room on the row's page and no indexed column changed);
//   - each index's blocks touched (pg_statio_user_indexes) and its growth
//     in bytes (pg_relation_size), as Postgres keeps no count of index
//     entries written.
//
// Each is divided by the payments the run created, warm-up included, as
// the commit accounting divides. What autovacuum or the service's
// background wrote meanwhile is in the figures: it is work the payments
// made.

// Evidence is what the database shows of one side's fresh payments.
type Evidence struct {
	Payments int     `json:"payments"`
	Seconds  float64 `json:"seconds"`
	// WALBytes is the WAL written per payment, by the LSN's advance: every
	// record in the cluster, commit records and the background included.
	WALBytes float64 `json:"wal_bytes"`
	// Relations are the bench database's relations that WAL records or
	// row changes touched, heap and index, in the order tables then
	// their indexes.
	Relations []RelationEvidence `json:"relations"`
}

// RelationEvidence is one table's or index's share, per payment.
type RelationEvidence struct {
	// Name is schema.relation; Table, for an index, its table's.
	Name  string `json:"name"`
	Index bool   `json:"index,omitempty"`
	Table string `json:"table,omitempty"`
	// WALRecords, WALBytes and FPIBytes are the WAL records whose first
	// block is in this relation, their length and the full-page images
	// in them.
	WALRecords float64 `json:"wal_records"`
	WALBytes   float64 `json:"wal_bytes"`
	FPIBytes   float64 `json:"fpi_bytes"`
	// Inserts, Updates, HOTUpdates and Deletes are a table's row changes.
	Inserts    float64 `json:"inserts,omitempty"`
	Updates    float64 `json:"updates,omitempty"`
	HOTUpdates float64 `json:"hot_updates,omitempty"`
	Deletes    float64 `json:"deletes,omitempty"`
	// Blocks is an index's blocks touched (found in the pool or read);
	// GrowthBytes its growth in size.
	Blocks      float64 `json:"blocks,omitempty"`
	GrowthBytes float64 `json:"growth_bytes,omitempty"`
}

// touched reports whether the payments did anything to the relation worth
// a row of the report: a WAL record or a row change in a hundred
// payments, or an index block touched in twenty. The rest is the
// background's (the service's workers polling, their heartbeats), which
// the payments did not cause.
func (r RelationEvidence) touched() bool {
	return r.WALRecords >= 0.01 || r.Inserts >= 0.01 || r.Updates >= 0.01 || r.Deletes >= 0.01 || r.Blocks >= 0.05
}

// written reports whether the payments wrote the relation: a WAL record in
// twenty payments at least.
func (r RelationEvidence) written() bool { return r.WALRecords >= 0.05 }

// HOTShare is the share of a table's updates that were HOT; ok false when
// it had none.
func (r RelationEvidence) HOTShare() (float64, bool) {
	if r.Updates <= 0 {
		return 0, false
	}
	return r.HOTUpdates / r.Updates, true
}

// EvidenceSides are a point's evidence: the service's and the least-SQL
// bare service's fresh payments; each nil when not read.
type EvidenceSides struct {
	Service *Evidence `json:"service,omitempty"`
	Least   *Evidence `json:"least,omitempty"`
}

// relStats is one reading of every user table's and index's counters, by
// relation oid.
type relStats struct {
	reading Reading
	rels    map[uint32]relStat
}

type relStat struct {
	name, table                          string
	index                                bool
	ins, upd, hot, del, blocks, sizeByte int64
}

// evidenceReadings is the transactions one readStats commits in the bench
// database, for the commit accounting to take out.
const evidenceReadings = 1

// readStats reads every user table's row changes and every user index's
// blocks and size, in one transaction, with the reading it goes with.
func (w *WAL) readStats(ctx context.Context, at Reading) (relStats, error) {
	s := relStats{reading: at, rels: map[uint32]relStat{}}
	err := pgx.BeginFunc(ctx, w.conn, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			SELECT relid::int8, schemaname || '.' || relname, '', false,
			       n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, 0::int8, 0::int8
			FROM pg_stat_user_tables
			UNION ALL
			SELECT s.indexrelid::int8, s.schemaname || '.' || s.indexrelname, s.schemaname || '.' || s.relname, true,
			       0, 0, 0, 0, s.idx_blks_read + s.idx_blks_hit, pg_relation_size(s.indexrelid)
			FROM pg_statio_user_indexes AS s`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				oid int64
				r   relStat
			)
			if err := rows.Scan(&oid, &r.name, &r.table, &r.index, &r.ins, &r.upd, &r.hot, &r.del, &r.blocks, &r.sizeByte); err != nil {
				return err
			}
			s.rels[uint32(oid)] = r
		}
		return rows.Err()
	})
	if err != nil {
		return s, fmt.Errorf("error reading the tables' and indexes' counters: %w", err)
	}
	return s, nil
}

// walByRelation is the WAL records of the bench database between two
// readings, by the oid of the relation of their first block.
type walByRelation map[uint32]struct{ records, bytes, fpi int64 }

// relationWAL reads the WAL records of the bench database between a and
// b, grouped by the relation of each record's first block (found by its
// file node), and the WAL's whole length between them.
func (w *WAL) relationWAL(ctx context.Context, a, b Reading) (walByRelation, int64, error) {
	byRel := walByRelation{}
	var total int64
	if a.LSN == b.LSN {
		return byRel, 0, nil
	}
	if err := w.conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff($2::text::pg_lsn, $1::text::pg_lsn)::int8`, a.LSN, b.LSN).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("error reading the WAL's length: %w", err)
	}
	rows, err := w.conn.Query(ctx, `
		WITH r AS (
			SELECT substring(block_ref FROM 'rel [0-9]+/[0-9]+/([0-9]+)')::oid AS node,
			       record_length, fpi_length
			FROM pg_get_wal_records_info($1::text::pg_lsn, $2::text::pg_lsn)
			WHERE block_ref LIKE $3
		)
		SELECT c.oid::int8, count(*), sum(r.record_length)::int8, sum(r.fpi_length)::int8
		FROM r JOIN pg_class AS c ON pg_relation_filenode(c.oid) = r.node
		GROUP BY c.oid`, a.LSN, b.LSN, w.db)
	if err != nil {
		return nil, 0, fmt.Errorf("error reading the WAL by relation: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			oid int64
			v   struct{ records, bytes, fpi int64 }
		)
		if err := rows.Scan(&oid, &v.records, &v.bytes, &v.fpi); err != nil {
			return nil, 0, err
		}
		byRel[uint32(oid)] = v
	}
	return byRel, total, rows.Err()
}

// evidenceOf is the evidence of payments created between two readings of
// the counters (a, b) and the WAL between them.
func evidenceOf(a, b relStats, wal walByRelation, total int64, payments int) *Evidence {
	if payments <= 0 {
		return nil
	}
	n := float64(payments)
	e := &Evidence{Payments: payments, Seconds: b.reading.At.Sub(a.reading.At).Seconds(), WALBytes: float64(total) / n}
	for oid, after := range b.rels {
		before := a.rels[oid]
		v := wal[oid]
		r := RelationEvidence{
			Name: after.name, Index: after.index, Table: after.table,
			WALRecords: float64(v.records) / n, WALBytes: float64(v.bytes) / n, FPIBytes: float64(v.fpi) / n,
			Inserts: float64(after.ins-before.ins) / n, Updates: float64(after.upd-before.upd) / n,
			HOTUpdates: float64(after.hot-before.hot) / n, Deletes: float64(after.del-before.del) / n,
			Blocks: float64(after.blocks-before.blocks) / n, GrowthBytes: float64(after.sizeByte-before.sizeByte) / n,
		}
		if !r.touched() {
			continue
		}
		e.Relations = append(e.Relations, r)
	}
	// Tables by name, each followed by its indexes by name.
	key := func(r RelationEvidence) string {
		if r.Index {
			return r.Table + "\x01" + r.Name
		}
		return r.Name + "\x00"
	}
	slices.SortFunc(e.Relations, func(x, y RelationEvidence) int {
		kx, ky := key(x), key(y)
		switch {
		case kx < ky:
			return -1
		case kx > ky:
			return 1
		}
		return 0
	})
	return e
}

// evidenceBracket reads the evidence of a run: call it with the reading
// taken once the counters settled before the run; the returned function
// takes the one after it, with the payments the run created. Both are
// no-ops returning nil without pg_walinspect (w nil) or when a reading
// fails, which is logged: the evidence is a figure, not a target.
func (m *measurer) evidenceBracket(ctx context.Context, start Reading) func(end Reading, payments int) *Evidence {
	if m.wal == nil {
		return func(Reading, int) *Evidence { return nil }
	}
	before, err := m.wal.readStats(ctx, start)
	if err != nil {
		logf(m.cfg.Log, "  %v", err)
		return func(Reading, int) *Evidence { return nil }
	}
	return func(end Reading, payments int) *Evidence {
		after, err := m.wal.readStats(ctx, end)
		if err != nil {
			logf(m.cfg.Log, "  %v", err)
			return nil
		}
		wal, total, err := m.wal.relationWAL(ctx, start, end)
		if err != nil {
			logf(m.cfg.Log, "  %v", err)
			return nil
		}
		if m.watcher != nil {
			m.watcher.Touched()
		}
		e := evidenceOf(before, after, wal, total, payments)
		if e != nil {
			logf(m.cfg.Log, "  evidence        %.1f KiB of WAL per payment, %s of updates HOT", e.WALBytes/1024, hotText(e))
		}
		return e
	}
}

// hotShare is the share of all the updates of a side's payments that were
// HOT; ok false when there were none.
func (e *Evidence) hotShare() (float64, bool) {
	var upd, hot float64
	for _, r := range e.Relations {
		upd += r.Updates
		hot += r.HOTUpdates
	}
	if upd <= 0 {
		return 0, false
	}
	return hot / upd, true
}

// hotText is hotShare as a percentage, "–" when there were no updates.
func hotText(e *Evidence) string {
	if s, ok := e.hotShare(); ok {
		return strconv.FormatFloat(100*s, 'f', 0, 64) + "%"
	}
	return "–"
}
