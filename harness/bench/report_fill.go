package bench

import (
	"cmp"
	"fmt"
	"strings"
	"time"
)

// fillSection renders "Ten million keys": the filled point against the
// empty database's, the reaper around it and the sizes after it. It writes
// nothing when no fill ran.
func fillSection(b *strings.Builder, r *Results) {
	f := r.Filled
	if f == nil {
		return
	}
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	m := f.Made
	w("## Ten million keys\n\n")
	if f.Keys != FillKeys {
		w("This run filled **%s** keys; the issue's figure, and `make bench-fill`'s default, is %s.\n\n",
			formatCount(int64(f.Keys)), formatCount(FillKeys))
	}
	w("The point at %d connections measured again once the database holds **%s finished keys** and what the\n",
		cmp.Or(f.Conns, TargetConns), formatCount(m.Keys))
	w("service leaves behind them (`harness/bench/fill.go`): %s payments (%s declined) and %s refunds, %s audit\n",
		formatCount(m.Payments), percent(float64(m.Declined), float64(m.PaymentKeys)), formatCount(m.Refunds), formatCount(m.AuditRecords))
	w("records, %s receipts, %s Stripe events and %s tombstones, spread over %d users. The keys' times run over the\n",
		formatCount(m.Receipts), formatCount(m.StripeEvents), formatCount(m.Tombstones), r.Users)
	w("key retention before the fill, and 1%% of them (%s keys, as many tombstones) are past it: the reaper's\n", formatCount(m.Backlog))
	w("backlog. Filled in **%s** (inserting %s, vacuuming %s, building the indexes %s)%s.\n\n",
		round(f.Took), round(f.Insert), round(f.Vacuum), round(f.Index), sizeAfter(f))
	if !f.Measured() {
		w("The filled point was not measured: the run stopped after the fill.\n\n")
		return
	}
	w("The service and the bare service were stopped for the fill, which drops the indexes and builds them\n")
	w("again, and started again after it, the service with `PAYMENTSD_REAPER_INTERVAL=%s` (its default is a\n", shortDuration(f.ReaperInterval.Duration()))
	w("minute) so that its reaper runs several times during the filled runs. Fresh payments use random UUIDv4\n")
	w("keys, as on the empty database, so each lands on a random page of the full unique index; replays cycle over\n")
	w("**%s filled keys** spread evenly over the whole index (payments and refunds, stored 201 or 402) rather\n", formatCount(int64(f.ReplayKeys)))
	w("than the %d hot keys per user of the empty runs; right before each replay run they were read once through\n", r.ReplayKeys)
	w("the bare service, unmeasured, so that neither run pays alone for the cache the fill and the fresh runs left\n")
	w("cold (the first replay run did, before, and the second found its keys hot). ")
	if p := f.Prewarm; p.Skipped == "" {
		w("The fill builds its indexes behind\n")
		w("the buffer pool's back, while a service that has been taking payments holds the indexes each payment\n")
		w("touches at a random page (its key's, its tombstone's, its lease token's and its PaymentIntent's: `%s`, %s),\n",
			strings.Join(HotIndexes, "`, `"), formatBytes(p.Bytes))
		w("so those were loaded into shared_buffers with pg_prewarm before the runs, as they would be in that steady state. ")
	} else {
		w("The indexes each payment touches at a random\n")
		w("page were not prewarmed (%s): the fresh runs read them cold. ", p.Skipped)
	}
	if f.abba() {
		w("What the fill leaves is a\n")
		w("database no service has run on: beyond those indexes, the pages a payment writes (heap pages with the room\n")
		w("the reaper freed, the tables' and indexes' right edges) are cold, and the fill ends with a checkpoint,\n")
		w("after which the first write of every page goes into the WAL whole; a service at this size is past both.\n")
		w("So fresh payments ran once through the bare service and once through the service, unmeasured, before\n")
		n := f.judgedRuns()
		w("the measured runs. Then, as at the judged point, **%d runs a side %s**, each side's\n", n, abbaOrder(n))
		w("runs read as one: fresh payments bare, service, service, bare, and so on; fresh.sql; replays service,\n")
		w("bare, bare, service, and so on. Unlike the empty database's, the fresh runs are not preceded by a vacuum:\n")
		w("they meet the dead rows that the reaper and each other leave, as a service does between autovacuums,\n")
		w("which at this size come once a fifth of a table has changed; each replay run is.\n")
	} else {
		w("The runs, in order: bare\n")
		w("fresh, service fresh, fresh.sql, service replays, bare replays. Unlike the empty database's, the fresh runs\n")
		w("are not preceded by a vacuum: they meet the dead rows that the reaper and each other leave, as a service\n")
		w("does between autovacuums, which at this size come once a fifth of a table has changed; each replay run is.\n")
		if r.abba() {
			w("Each is a single run; the empty database's figures beside them are the judged point's, %d runs a side\n", r.judgedRuns())
			w("in ABBA order read as one (see the method below).\n")
		}
	}
	w("\n")
	w("%s\n", FilledTable(r))
	if f.Costs != nil {
		w("What a request of each side cost the database, here and on the empty database, is under\n")
		w("\"What a request costs the database\" below.\n\n")
	}

	w("Judged (also in the targets above):\n\n")
	for _, t := range filledTargets(r) {
		w("- %s: %s — %s\n", t.Name, t.Measured, mark(t.Met))
	}
	w("\n")

	w("### The reaper\n\n")
	w("The service's reaper ran every %s (`PAYMENTSD_REAPER_INTERVAL`), each run moving the keys past the %s key\n",
		shortDuration(f.ReaperInterval.Duration()), shortDuration(f.KeyRetention.Duration()))
	w("retention to tombstones and deleting the tombstones past theirs (90 days), up to 100,000 of each.\n\n")
	if c := f.CatchUp; c != nil {
		w("- **After the fill** the backlog was %s keys and %s tombstones. ", formatCount(c.BacklogBefore), formatCount(c.TombstoneBacklogBefore))
		if f.CaughtUp {
			w("The restarted service's reaper worked it off (%s keys\n  reaped) within %s of the fill's end, the service's start included, before the measured runs began.\n",
				formatCount(c.Reaped), round(c.Seconds))
		} else {
			w("The runner stopped waiting for the reaper after %s\n  (%s keys reaped; %s keys and %s tombstones left) and measured anyway.\n",
				round(c.Seconds), formatCount(c.Reaped), formatCount(c.BacklogAfter), formatCount(c.TombstoneBacklogAfter))
		}
	}
	if s := f.Window; s != nil {
		win := s.window()
		w("- **During the filled runs** (%s): keys created %.1f/s (the benchmark's), reaped %.1f/s, came due %.1f/s;\n",
			round(s.Seconds), win.CreatedPerSecond(), win.ReapedPerSecond(), win.DuePerSecond())
		w("  backlog %s → %s keys, %s → %s tombstones. **Keeps up: %s** (", formatCount(s.BacklogBefore), formatCount(s.BacklogAfter),
			formatCount(s.TombstoneBacklogBefore), formatCount(s.TombstoneBacklogAfter), yesNo(f.keepsUp()))
		w("its backlog may be one run behind at most: what comes due over two of\n  its intervals). Keys come due at the rate they were created a retention earlier, the fill's; the\n")
		w("  benchmark's own keys come due only a retention after the run.\n\n")
	}

	if len(f.Sizes) > 0 {
		w("### Sizes after the filled runs\n\n")
		sizeTable(b, f.Sizes)
		w("\nThe fill holds a day of tombstones; a service in a steady state holds 90 days of them (the tombstone\n")
		w("retention), so the tombstones' table and primary key are 90 times the size shown there.\n\n")
	}
}

// FilledTable is the filled point beside the empty database's, as a
// Markdown table.
func FilledTable(r *Results) string {
	f := r.Filled
	if !f.Measured() {
		return ""
	}
	e, _ := r.point(f.Conns)
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("| %d connections | empty database | %s keys | filled / empty |\n|---|--:|--:|--:|\n", f.Conns, formatCount(f.Made.Keys))
	row := func(name string, empty, filled Load, unit string) {
		w("| %s %s | %.0f | %.0f | %s |\n", name, unit, empty.Throughput, filled.Throughput, percent(filled.Throughput, empty.Throughput))
		w("| %s p50 / p99 ms | %.2f / %.2f | %.2f / %.2f | %s |\n", name, empty.P50, empty.P99, filled.P50, filled.P99, times(filled.P99, empty.P99))
	}
	row("**service fresh**", e.Fresh, f.Fresh, "payments/s")
	row("bare fresh", e.BareFresh, f.BareFresh, "payments/s")
	if c := f.FreshCeiling; c != nil {
		w("| fresh.sql ceiling payments/s | %.0f | %.0f | %s |\n", e.FreshCeiling.TPS, c.TPS, percent(c.TPS, e.FreshCeiling.TPS))
	}
	row("**service replays**", e.Replay, f.Replay, "requests/s")
	row("bare replays", e.BareReplay, f.BareReplay, "requests/s")
	w("| service / bare, fresh | %s | %s | |\n", percent(e.Fresh.Throughput, e.BareFresh.Throughput), percent(f.Fresh.Throughput, f.BareFresh.Throughput))
	w("| service / bare, replays | %s | %s | |\n", percent(e.Replay.Throughput, e.BareReplay.Throughput), percent(f.Replay.Throughput, f.BareReplay.Throughput))
	return b.String()
}

// sizeTable lists the tables biggest first, each followed by its indexes,
// down to the tables that hold less than 1% of the database, which are
// summed in one line.
func sizeTable(b *strings.Builder, sizes []RelationSize) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	var total int64
	for _, s := range sizes {
		if s.Kind == "table" {
			total += s.TotalBytes
		}
	}
	w("| relation | rows | heap | indexes | total | share |\n|---|--:|--:|--:|--:|--:|\n")
	var restTables int
	var restBytes int64
	show := false
	for _, s := range sizes {
		if s.Kind == "table" {
			show = s.TotalBytes*100 >= total
			if !show {
				restTables++
				restBytes += s.TotalBytes
				continue
			}
		}
		if !show {
			continue
		}
		rows := "–"
		if s.Rows >= 0 {
			rows = formatCount(s.Rows)
			if !s.RowsExact {
				rows = "~" + rows
			}
		}
		if s.Kind == "index" {
			w("| ↳ `%s` | %s | | %s | | %s |\n", s.Name, rows, formatBytes(s.IndexBytes), percent(float64(s.IndexBytes), float64(total)))
		} else {
			w("| **`%s`** | %s | %s | %s | %s | %s |\n", s.Name, rows, formatBytes(s.HeapBytes), formatBytes(s.IndexBytes),
				formatBytes(s.TotalBytes), percent(float64(s.TotalBytes), float64(total)))
		}
	}
	if restTables > 0 {
		w("| %d smaller table%s | | | | %s | %s |\n", restTables, plural(restTables), formatBytes(restBytes), percent(float64(restBytes), float64(total)))
	}
	w("| **all** | | | | **%s** | |\n", formatBytes(total))
}

// sizeAfter says how big the database was after the filled runs.
func sizeAfter(f *Filled) string {
	var total int64
	for _, s := range f.Sizes {
		if s.Kind == "table" {
			total += s.TotalBytes
		}
	}
	if total == 0 {
		return ""
	}
	return fmt.Sprintf("; after the filled runs the service's tables and indexes held **%s**", formatBytes(total))
}

// times is a as a multiple of b: "1.08×".
func times(a, b float64) string {
	if b <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func round(s Seconds) time.Duration {
	d := s.Duration()
	if d >= 10*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}

func yesNo(v bool) string {
	if v {
		return "yes"
	}
	return "no"
}

// shortDuration writes d without zero units: 24h, 5s, 1m30s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
