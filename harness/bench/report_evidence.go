package bench

import (
	"fmt"
	"strings"
)

// evidencePoint is the point whose evidence the reports show: TargetConns,
// or else the first point that has any.
func evidencePoint(r *Results) (Point, bool) {
	if p, ok := r.point(TargetConns); ok && p.Evidence != nil {
		return p, true
	}
	for _, p := range r.Points {
		if p.Evidence != nil {
			return p, true
		}
	}
	return Point{}, false
}

// evidenceSummary is the summary's paragraph on the database's evidence:
// WAL, HOT share and indexes written per payment, the service beside the
// least SQL; empty without evidence.
func evidenceSummary(r *Results) string {
	p, ok := evidencePoint(r)
	if !ok {
		return ""
	}
	var parts []string
	for _, side := range []struct {
		name string
		e    *Evidence
	}{{"the service", p.Evidence.Service}, {"the least-SQL bare service", p.Evidence.Least}} {
		if side.e == nil {
			continue
		}
		tables, indexes := side.e.written()
		parts = append(parts, fmt.Sprintf("%s %.1f KiB of WAL, %s of its updates HOT, %d tables and %d indexes written",
			side.name, side.e.WALBytes/1024, hotText(side.e), tables, indexes))
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("**The database's evidence per fresh payment** at %d connections: %s (every table and index in the\nfull report).\n\n",
		p.Conns, strings.Join(parts, "; "))
}

// written counts the tables and the indexes that the payments wrote WAL
// records to (RelationEvidence.written).
func (e *Evidence) written() (tables, indexes int) {
	for _, r := range e.Relations {
		if !r.written() {
			continue
		}
		if r.Index {
			indexes++
		} else {
			tables++
		}
	}
	return tables, indexes
}

// evidenceSection is the full report's account of what each payment made
// the database write, table by table and index by index, for the service
// and for the least SQL.
func evidenceSection(b *strings.Builder, r *Results) {
	p, ok := evidencePoint(r)
	if !ok {
		return
	}
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("## The database's evidence per payment\n\n")
	w("What one fresh payment made the database write at %d connections, over the first fresh run of the service\n", p.Conns)
	w("and of the least-SQL bare service, each bracketed by readings taken once the counters settled (as the\n")
	w("commits above), divided by the payments created in the run, warm-up included. WAL is the WAL's advance\n")
	w("over the run (the cluster's, commit records and background included); by relation, pg_walinspect's\n")
	w("records of the bench database grouped by the relation of their first block, with the full-page images in\n")
	w("them. Row changes are pg_stat_user_tables' (an update is HOT when it writes no index entry: no indexed\n")
	w("column changed and the row's page had room); an index's blocks touched (found or read) are\n")
	w("pg_statio_user_indexes', its growth pg_relation_size's. Postgres counts no index entries written: an\n")
	w("index's WAL records are the nearest it tells. A relation is listed when the payments wrote a WAL record\n")
	w("or changed a row in it once in a hundred payments, or touched an index block once in twenty, and counted\n")
	w("as written at a WAL record in twenty; below that it is the background's (workers polling, heartbeats).\n\n")
	w("| runs | payments | WAL / payment | in tables | in indexes | full-page images | updates / payment | HOT share | tables written | indexes written |\n")
	w("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	sides := []struct {
		name string
		e    *Evidence
	}{{"service fresh", p.Evidence.Service}, {"least-SQL bare fresh", p.Evidence.Least}}
	for _, s := range sides {
		if s.e == nil {
			continue
		}
		var heap, index, fpi, upd float64
		for _, r := range s.e.Relations {
			if r.Index {
				index += r.WALBytes
			} else {
				heap += r.WALBytes
				upd += r.Updates
			}
			fpi += r.FPIBytes
		}
		tables, indexes := s.e.written()
		w("| %s | %d | %.1f KiB | %.1f KiB | %.1f KiB | %.1f KiB | %.2f | %s | %d | %d |\n",
			s.name, s.e.Payments, s.e.WALBytes/1024, heap/1024, index/1024, fpi/1024, upd, hotText(s.e), tables, indexes)
	}
	w("\n")
	for _, s := range sides {
		if s.e == nil {
			continue
		}
		w("### %s, relation by relation (per payment)\n\n", strings.ToUpper(s.name[:1])+s.name[1:])
		w("| relation | WAL records | WAL bytes | of them full-page images | inserts | updates | HOT updates | HOT share | index blocks touched | index growth, bytes |\n")
		w("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, r := range s.e.Relations {
			name := "`" + r.Name + "`"
			if r.Index {
				name = "↳ " + name
			}
			if r.Index {
				w("| %s | %.2f | %.0f | %.0f | | | | | %.2f | %.0f |\n", name, r.WALRecords, r.WALBytes, r.FPIBytes, r.Blocks, r.GrowthBytes)
				continue
			}
			share := "–"
			if v, ok := r.HOTShare(); ok {
				share = fmt.Sprintf("%.0f%%", 100*v)
			}
			w("| %s | %.2f | %.0f | %.0f | %.2f | %.2f | %.2f | %s | | |\n", name, r.WALRecords, r.WALBytes, r.FPIBytes, r.Inserts, r.Updates, r.HOTUpdates, share)
		}
		w("\n")
	}
}
