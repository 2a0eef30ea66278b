package bench

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestEvidenceIsReadFromTheServer makes rows in a table with an index on
// a column that one update changes and another does not, and checks what
// the evidence reads: the inserts, the updates and the one that was HOT,
// the WAL of the table and of its index, and the index's growth.
func TestEvidenceIsReadFromTheServer(t *testing.T) {
	ctx := context.Background()
	url := testutil.NewEmptyDB(t)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(ctx) })
	// EnableWAL finds the keys' table by name; nothing else needs it.
	_, err = conn.Exec(ctx, `CREATE TABLE idempotency_keys (id int);
		CREATE TABLE things (id int PRIMARY KEY, tag int, note text) WITH (fillfactor = 50);
		CREATE INDEX things_tag_idx ON things (tag)`)
	require.NoError(t, err)
	wal, status := EnableWAL(ctx, url)
	require.Equal(t, "enabled", status)
	t.Cleanup(func() { wal.Close(ctx) })
	watcher, err := NewWatcher(ctx, testutil.AdminURL(t), "postgres")
	require.NoError(t, err)
	t.Cleanup(func() { watcher.Close(ctx) })

	m := &measurer{wal: wal}
	start, err := watcher.Read(ctx)
	require.NoError(t, err)
	bracket := m.evidenceBracket(ctx, start)
	_, err = conn.Exec(ctx, `INSERT INTO things SELECT g, g, 'x' FROM generate_series(1, 1000) AS g`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `UPDATE things SET note = 'y' WHERE id = 1`) // no indexed column: HOT
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `UPDATE things SET tag = 0 WHERE id = 2`) // an indexed column: not HOT
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
	require.NoError(t, err)

	var e *Evidence
	require.Eventually(t, func() bool {
		end, err := watcher.Read(ctx)
		require.NoError(t, err)
		e = bracket(end, 1000)
		for _, r := range e.Relations {
			if r.Name == "public.things" && r.Updates > 0 {
				return true
			}
		}
		return false
	}, 15*time.Second, 200*time.Millisecond)

	byName := map[string]RelationEvidence{}
	for _, r := range e.Relations {
		byName[r.Name] = r
	}
	things := byName["public.things"]
	require.InDelta(t, 1.0, things.Inserts, 1e-9)
	require.InDelta(t, 0.002, things.Updates, 1e-9)
	require.InDelta(t, 0.001, things.HOTUpdates, 1e-9)
	share, ok := things.HOTShare()
	require.True(t, ok)
	require.InDelta(t, 0.5, share, 1e-9)
	require.GreaterOrEqual(t, things.WALRecords, 1.0, "a record per insert at least")
	tag := byName["public.things_tag_idx"]
	require.True(t, tag.Index)
	require.Equal(t, "public.things", tag.Table)
	require.Greater(t, tag.WALRecords, 1.0, "an entry per insert, and one for the update that was not HOT")
	require.Positive(t, tag.GrowthBytes)
	require.Positive(t, e.WALBytes)
	tables, indexes := e.written()
	require.Equal(t, 1, tables)
	require.Equal(t, 2, indexes, "the primary key and the tag's index")
}

// TestEvidenceOfOrdersTablesThenTheirIndexes: each table comes before its
// indexes, and relations that nothing touched are left out.
func TestEvidenceOfOrdersTablesThenTheirIndexes(t *testing.T) {
	a := relStats{rels: map[uint32]relStat{
		1: {name: "s.b"}, 2: {name: "s.b_idx", table: "s.b", index: true}, 3: {name: "s.a"}, 4: {name: "s.idle"},
		5: {name: "s.a_pkey", table: "s.a", index: true},
	}}
	b := relStats{rels: map[uint32]relStat{
		1: {name: "s.b", ins: 10}, 2: {name: "s.b_idx", table: "s.b", index: true, blocks: 20}, 3: {name: "s.a", upd: 10, hot: 5},
		4: {name: "s.idle"}, 5: {name: "s.a_pkey", table: "s.a", index: true, blocks: 5, sizeByte: 8192},
	}}
	e := evidenceOf(a, b, walByRelation{3: {records: 10, bytes: 1000}}, 4096, 10)
	var names []string
	for _, r := range e.Relations {
		names = append(names, r.Name)
	}
	require.Equal(t, []string{"s.a", "s.a_pkey", "s.b", "s.b_idx"}, names)
	require.InDelta(t, 409.6, e.WALBytes, 1e-9)
	require.InDelta(t, 100.0, e.Relations[0].WALBytes, 1e-9)
	require.InDelta(t, 819.2, e.Relations[1].GrowthBytes, 1e-9)
	share, ok := e.hotShare()
	require.True(t, ok)
	require.InDelta(t, 0.5, share, 1e-9)
	require.Nil(t, evidenceOf(a, b, nil, 0, 0))
	// A WAL record in a thousand payments is the background's: left out.
	e = evidenceOf(a, b, walByRelation{4: {records: 1, bytes: 50}}, 4096, 1000)
	for _, r := range e.Relations {
		require.NotEqual(t, "s.idle", r.Name)
	}
}

// TestReportsShowTheEvidence: the summary gives the evidence in a line,
// the full report table by table and index by index.
func TestReportsShowTheEvidence(t *testing.T) {
	r := sample()
	r.Points[2].Evidence = &EvidenceSides{
		Service: &Evidence{Payments: 100, WALBytes: 9000, Relations: []RelationEvidence{
			{Name: "public.idempotency_keys", WALRecords: 3, WALBytes: 900, Inserts: 1, Updates: 2, HOTUpdates: 0.5},
			{Name: "public.idempotency_keys_pkey", Index: true, Table: "public.idempotency_keys", WALRecords: 3, WALBytes: 200, Blocks: 9, GrowthBytes: 16},
		}},
		Least: &Evidence{Payments: 120, WALBytes: 4096, Relations: []RelationEvidence{
			{Name: "leastsql.idempotency_keys", WALRecords: 2, WALBytes: 500, Inserts: 1, Updates: 1, HOTUpdates: 1},
			{Name: "leastsql.idempotency_keys_user_key", Index: true, Table: "leastsql.idempotency_keys", WALRecords: 1, WALBytes: 80},
		}},
	}
	summary := Summary(r, "docs/bench.svg", "docs/bench-report.md")
	require.Contains(t, summary, "the service 8.8 KiB of WAL, 25% of its updates HOT, 1 tables and 1 indexes written; "+
		"the least-SQL bare service 4.0 KiB of WAL, 100% of its updates HOT")
	full := Markdown(r, "bench.svg")
	require.Contains(t, full, "## The database's evidence per payment")
	require.Contains(t, full, "| service fresh | 100 | 8.8 KiB | 0.9 KiB | 0.2 KiB | 0.0 KiB | 2.00 | 25% | 1 | 1 |")
	require.Contains(t, full, "| ↳ `leastsql.idempotency_keys_user_key` | 1.00 | 80 | 0 | | | | | 0.00 | 0 |")
	require.Contains(t, full, "| `public.idempotency_keys` | 3.00 | 900 | 0 | 1.00 | 2.00 | 0.50 | 25% | | |")
}
