package bench

import "time"

// Filled is a run's filled point (issue 12, "flat as it grows"): the fill
// (fill.go), then the service and the bare service measured again at
// Conns on the filled database, the reaper around those runs and the
// sizes after them. `paymentsd-bench fill` records the fill, and
// `paymentsd-bench run-filled` the rest.
type Filled struct {
	// Keys is the number of keys asked for; Made what the fill made.
	Keys int      `json:"keys"`
	Made FillMade `json:"made"`
	// At is the fill's anchor; FirstKeyID and LastKeyID bound the filled
	// keys' ids (FillStats).
	At         time.Time `json:"at"`
	FirstKeyID int64     `json:"first_key_id"`
	LastKeyID  int64     `json:"last_key_id"`
	// Took is the whole fill; Insert, Vacuum and Index its parts.
	Took   Seconds `json:"took"`
	Insert Seconds `json:"insert"`
	Vacuum Seconds `json:"vacuum"`
	Index  Seconds `json:"index"`
	// AfterFill is the reaper's work list as the fill left it, with the
	// service stopped.
	AfterFill ReaperState `json:"after_fill"`

	// Conns is the connection count the filled point was measured at; 0
	// until it is.
	Conns int `json:"conns,omitempty"`
	// ReaperInterval is the service's PAYMENTSD_REAPER_INTERVAL during the
	// filled runs, KeyRetention its PAYMENTSD_KEY_RETENTION.
	ReaperInterval Seconds `json:"reaper_interval,omitempty"`
	KeyRetention   Seconds `json:"key_retention,omitempty"`
	// ReplayKeys is the number of filled keys the replays cycle over.
	ReplayKeys int `json:"replay_keys,omitempty"`
	// Prewarm is the hot indexes loaded into the buffer pool before the
	// filled runs (PrewarmHotIndexes).
	Prewarm    Prewarm `json:"prewarm"`
	Fresh      Load    `json:"fresh"`
	BareFresh  Load    `json:"bare_fresh"`
	Replay     Load    `json:"replay"`
	BareReplay Load    `json:"bare_replay"`
	// FreshCeiling is fresh.sql on the filled database; nil when skipped.
	FreshCeiling *Ceiling `json:"fresh_ceiling,omitempty"`
	// Costs is what each side's runs cost the database per request, as
	// at the empty database's point (Point.Costs).
	Costs *Costs `json:"db_cost,omitempty"`
	// CPU is what each side's runs cost the machine's CPUs per request,
	// as at the empty database's point (Point.CPU).
	CPU *CPUCosts `json:"cpu_cost,omitempty"`
	// Waits is what the database's backends were doing, as at the empty
	// database's point (Point.Waits).
	Waits *WaitCosts `json:"waits,omitempty"`
	// Checkpoints is where the measured runs fell in the server's
	// checkpoint cycle; nil when it could not be read.
	Checkpoints *Checkpoints `json:"checkpoints,omitempty"`
	// CatchUp is the reaper working off the fill's backlog once the
	// service was started again, from AfterFill until its backlogs were
	// down to what comes due between two of its runs (CaughtUp), or until
	// the runner stopped waiting.
	CatchUp  *ReaperSpan `json:"catch_up,omitempty"`
	CaughtUp bool        `json:"caught_up,omitempty"`
	// Window is the reaper over the measured runs, and KeepsUp whether it
	// kept up there (ReaperWindow.KeepsUp).
	Window  *ReaperSpan `json:"window,omitempty"`
	KeepsUp bool        `json:"keeps_up,omitempty"`
	// Sizes are every table and index after the filled runs (Sizes).
	Sizes []RelationSize `json:"sizes,omitempty"`
}

// Measured reports whether the filled point was measured.
func (f *Filled) Measured() bool { return f != nil && f.Conns > 0 }

// abba reports whether the filled point's pairs were measured as the
// judged point's are (measurer.abba); in results saved before that, each
// side is a single run.
func (f *Filled) abba() bool {
	return f.Measured() && f.judgedRuns() > 0
}

// judgedRuns is how many runs a side the filled point's pairs ran.
func (f *Filled) judgedRuns() int {
	return max(len(f.Fresh.Runs), len(f.Replay.Runs))
}

// FillMade is what a fill inserted (FillStats).
type FillMade struct {
	Keys         int64 `json:"keys"`
	PaymentKeys  int64 `json:"payment_keys"`
	RefundKeys   int64 `json:"refund_keys"`
	Declined     int64 `json:"declined"`
	Payments     int64 `json:"payments"`
	Refunds      int64 `json:"refunds"`
	AuditRecords int64 `json:"audit_records"`
	Receipts     int64 `json:"receipts"`
	StripeEvents int64 `json:"stripe_events"`
	Tombstones   int64 `json:"tombstones"`
	// Backlog and TombstoneBacklog are the keys and tombstones past their
	// retentions at the fill's anchor.
	Backlog          int64 `json:"backlog"`
	TombstoneBacklog int64 `json:"tombstone_backlog"`
}

// ReaperState is one ReaperReading, as saved.
type ReaperState struct {
	At               time.Time `json:"at"`
	Backlog          int64     `json:"backlog"`
	TombstoneBacklog int64     `json:"tombstone_backlog"`
	KeysIssued       int64     `json:"keys_issued"`
}

// ReaperSpan is one ReaperWindow, as saved.
type ReaperSpan struct {
	Seconds                Seconds `json:"seconds"`
	Created                int64   `json:"created"`
	Reaped                 int64   `json:"reaped"`
	Due                    int64   `json:"due"`
	BacklogBefore          int64   `json:"backlog_before"`
	BacklogAfter           int64   `json:"backlog_after"`
	TombstoneBacklogBefore int64   `json:"tombstone_backlog_before"`
	TombstoneBacklogAfter  int64   `json:"tombstone_backlog_after"`
}

// window converts back, for its rates and KeepsUp.
func (s ReaperSpan) window() ReaperWindow {
	return ReaperWindow{
		Window: s.Seconds.Duration(), Created: s.Created, Reaped: s.Reaped, Due: s.Due,
		BacklogBefore: s.BacklogBefore, BacklogAfter: s.BacklogAfter,
		TombstoneBacklogBefore: s.TombstoneBacklogBefore, TombstoneBacklogAfter: s.TombstoneBacklogAfter,
	}
}

func spanOf(w ReaperWindow) *ReaperSpan {
	return &ReaperSpan{
		Seconds: Of(w.Window), Created: w.Created, Reaped: w.Reaped, Due: w.Due,
		BacklogBefore: w.BacklogBefore, BacklogAfter: w.BacklogAfter,
		TombstoneBacklogBefore: w.TombstoneBacklogBefore, TombstoneBacklogAfter: w.TombstoneBacklogAfter,
	}
}

func stateOf(r ReaperReading) ReaperState {
	return ReaperState{At: r.At, Backlog: r.Backlog, TombstoneBacklog: r.TombstoneBacklog, KeysIssued: r.KeysIssued}
}

// reading converts back, with the retentions it was read with.
func (s ReaperState) reading(retention, tombstoneRetention time.Duration) ReaperReading {
	return ReaperReading{At: s.At, Backlog: s.Backlog, TombstoneBacklog: s.TombstoneBacklog, KeysIssued: s.KeysIssued,
		Retention: retention, TombstoneRetention: tombstoneRetention}
}

// filledOf records a fill.
func filledOf(keys int, s FillStats, after ReaperReading) *Filled {
	return &Filled{
		Keys: keys,
		Made: FillMade{
			Keys: s.Keys, PaymentKeys: s.PaymentKeys, RefundKeys: s.RefundKeys, Declined: s.Declined,
			Payments: s.Payments, Refunds: s.Refunds, AuditRecords: s.AuditRecords, Receipts: s.Receipts,
			StripeEvents: s.StripeEvents, Tombstones: s.Tombstones, Backlog: s.Backlog, TombstoneBacklog: s.TombstoneBacklog,
		},
		At: s.At, FirstKeyID: s.FirstKeyID, LastKeyID: s.LastKeyID,
		Took: Of(s.Took), Insert: Of(s.Insert), Vacuum: Of(s.Vacuum), Index: Of(s.Index),
		AfterFill: stateOf(after),
	}
}

// stats is what FilledRequests needs of the fill.
func (f *Filled) stats() FillStats {
	return FillStats{At: f.At, Keys: f.Made.Keys, FirstKeyID: f.FirstKeyID, LastKeyID: f.LastKeyID}
}

// keepsUp is whether the reaper kept up over the filled runs, judged from
// the saved window by ReaperWindow.KeepsUp as it is now (the saved KeepsUp
// was judged when the run was made).
func (f *Filled) keepsUp() bool {
	if f.Window == nil || f.ReaperInterval == 0 {
		return f.KeepsUp
	}
	return f.Window.window().KeepsUp(f.ReaperInterval.Duration())
}
