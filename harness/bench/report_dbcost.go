package bench

import (
	"fmt"
	"strings"
)

// dbCostSection shows what one request of each side cost the database at
// TargetConns (DBCost), on the empty database and, after a fill, on the
// filled one beside it. It writes nothing without pg_stat_statements.
func dbCostSection(b *strings.Builder, r *Results) {
	e, ok := r.point(TargetConns)
	if !ok || e.Costs == nil {
		return
	}
	var f *Costs
	if r.Filled.Measured() {
		f = r.Filled.Costs
	}
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("### What a request costs the database, at %d connections\n\n", TargetConns)
	w("Per request, over each side's runs (warm-up included), from pg_stat_statements: the time in statements,\n")
	w("the shared buffers found in the pool, read into it (from the kernel's cache or the disk) and changed, and the\n")
	w("write-ahead log made, with the whole pages in it (full-page images: the first change of a page after a\n")
	w("checkpoint goes into the log whole). ")
	sideTable(w, e.Costs, f, []sideColumn[DBCost]{
		{"ms in statements", "%.2f", func(c *DBCost) float64 { return c.ExecMs }},
		{"blocks found", "%.0f", func(c *DBCost) float64 { return c.BlocksHit }},
		{"blocks read", "%.2f", func(c *DBCost) float64 { return c.BlocksRead }},
		{"blocks changed", "%.2f", func(c *DBCost) float64 { return c.BlocksDirtied }},
		{"full-page images", "%.2f", func(c *DBCost) float64 { return c.FullPageImages }},
		{"WAL", "%.1f KiB", func(c *DBCost) float64 { return c.WALBytes / 1024 }},
	})
	if f != nil {
		fullPageNote(w, e.Costs, r.Filled)
		filledReplayNote(w, e, r.Filled)
	}
}

// filledReplayNote explains, with its figures, filled replays that fall
// short of the empty database's: whether the bare service, whose replay is
// the one indexed read and nothing else, fell as far, and what the read
// came to cost the database.
func filledReplayNote(w func(string, ...any), empty Point, fill *Filled) {
	ec, fc := empty.Costs.Replay, fill.Costs.Replay
	if ec == nil || fc == nil || empty.Replay.Throughput <= 0 || empty.BareReplay.Throughput <= 0 {
		return
	}
	service := fill.Replay.Throughput / empty.Replay.Throughput
	bare := fill.BareReplay.Throughput / empty.BareReplay.Throughput
	if service >= FilledRatio {
		return
	}
	w("Replays of filled keys kept %s of the empty database's throughput, and the bare service's %s of its own.\n",
		percent(service, 1), percent(bare, 1))
	w("A replay's one indexed read found %.1f buffers instead of %.1f (a deeper index, and the key's row one of\n", fc.BlocksHit, ec.BlocksHit)
	w("millions) and spent %.3f ms in its statement instead of %.3f, with %.2f blocks read from outside the pool.\n",
		fc.ExecMs, ec.ExecMs, fc.BlocksRead)
	if bare <= service+0.03 {
		w("That is the database's cost at this size: the bare service, which does nothing else, pays it as the\nservice does.\n\n")
	} else {
		w("The bare service lost less: the rest of the service's loss is its own.\n\n")
	}
}

// fullPageNote explains, with its figures, a filled database whose fresh
// payments write whole pages into the WAL where the empty one's do not.
func fullPageNote(w func(string, ...any), empty *Costs, fill *Filled) {
	filled := fill.Costs
	ef, ff := empty.Fresh, filled.Fresh
	if ef == nil || ff == nil || ff.FullPageImages < 0.5 || ff.FullPageImages < 2*ef.FullPageImages {
		return
	}
	w("On the filled database a fresh payment through the service wrote %.2f full-page images and %.1f KiB of\n",
		ff.FullPageImages, ff.WALBytes/1024)
	w("WAL, against %.2f and %.1f KiB on the empty one", ef.FullPageImages, ef.WALBytes/1024)
	if es, fs := empty.FreshSQL, filled.FreshSQL; es != nil && fs != nil {
		w(", and fresh.sql alone, the same statements with nothing\n")
		w("around them, %.2f and %.1f KiB against %.2f and %.1f KiB", fs.FullPageImages, fs.WALBytes/1024, es.FullPageImages, es.WALBytes/1024)
	}
	w(".\n\n")
	w("Every payment inserts into indexes on random values (the client's key, the PaymentIntent's id) at a\n")
	w("random page. On the empty database those indexes are a few pages, each written whole once after a\n")
	w("checkpoint and then in place; on the filled one they are hundreds of thousands of pages, and most\n")
	w("payments change one that has not been changed since the last checkpoint.")
	if c := fill.Checkpoints; c != nil {
		w(" That checkpoint was %s old when the\nmeasured runs began and %s when they ended", round(c.Before), round(c.After))
		if c.During {
			w(" (another came during them)")
		}
		w("; the server checkpoints at least\nevery %s (`checkpoint_timeout`).", round(c.Timeout))
	}
	w("\nThe share falls as the checkpoint ages (each page is written whole once per checkpoint, however often\n")
	w("it changes after), so averaged over a checkpoint interval a service at this size pays less than runs\n")
	w("this close to one do. It is the database's cost: the bare service's and fresh.sql's as much as the\n")
	w("service's.\n\n")
}

// sideColumn is a column of a sideTable: its heading, and its figure of a
// side, formatted.
type sideColumn[T any] struct {
	heading, format string
	of              func(*T) float64
}

// sideTable ends the paragraph before it, saying how to read the cells,
// and writes a table of a point's sides, a row each for those measured:
// each cell the empty database's figure and, when filled is not nil, an
// arrow to the filled one's.
func sideTable[T any](w func(string, ...any), empty, filled *Sides[T], columns []sideColumn[T]) {
	if filled != nil {
		w("Each cell is the empty database's figure, then the filled one's.")
	}
	w("\n\n| runs |")
	for _, c := range columns {
		w(" %s |", c.heading)
	}
	w("\n|---|%s\n", strings.Repeat("--:|", len(columns)))
	for _, s := range sideNames {
		ec, fc := sideOf(empty, s.side), sideOf(filled, s.side)
		if ec == nil && fc == nil {
			continue
		}
		w("| %s |", s.name)
		for _, c := range columns {
			one := func(v *T) string {
				if v == nil {
					return "–"
				}
				return fmt.Sprintf(c.format, c.of(v))
			}
			if filled == nil {
				w(" %s |", one(ec))
			} else {
				w(" %s → %s |", one(ec), one(fc))
			}
		}
		w("\n")
	}
	w("\n")
}

// sideNames are the sides of a point, by sideOf's numbering, in the order
// the tables show them.
var sideNames = []struct {
	name string
	side int
}{{"service fresh", 0}, {"bare fresh", 1}, {"least bare fresh", 5}, {"fresh.sql", 2}, {"least.sql", 6},
	{"service replays", 3}, {"bare replays", 4}, {"least bare replays", 7}}

// sideOf is side i of s (sideNames); nil when s is.
func sideOf[T any](s *Sides[T], i int) *T {
	if s == nil {
		return nil
	}
	return [...]*T{s.Fresh, s.BareFresh, s.FreshSQL, s.Replay, s.BareReplay, s.LeastFresh, s.LeastSQL, s.LeastReplay}[i]
}
