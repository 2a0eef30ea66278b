package bench

// # What a request costs the database
//
// Throughput says how fast; it does not say why a point is slower than
// another. pg_stat_statements does, per statement and at the moment the
// statement ends: the shared buffers it found in the pool, read, dirtied
// and wrote out, and the write-ahead log it made, whole pages (full-page
// images) included. Summed over a side's runs and divided by the requests
// they answered, warm-up included (as the counters are), that is what one
// request costs the database (DBCost): the same figures for the service,
// the bare service and fresh.sql, on the empty database and the filled
// one, show whether a gap between two of them is the service's doing or
// the database's. What no statement does (autovacuum, the checkpointer)
// is not in them.

// DBCost is what the database did for one request of a side's runs, on
// average, by pg_stat_statements.
type DBCost struct {
	// Requests is the requests (payments, replays, fresh.sql
	// transactions) the figures are divided by.
	Requests int `json:"requests"`
	// Statements and ExecMs are the statements run and their execution
	// time.
	Statements float64 `json:"statements"`
	ExecMs     float64 `json:"exec_ms"`
	// BlocksHit, BlocksRead, BlocksDirtied and BlocksWritten are shared
	// buffers found in the pool, read into it, changed, and written out
	// by the statements themselves to make room.
	BlocksHit     float64 `json:"blocks_hit"`
	BlocksRead    float64 `json:"blocks_read"`
	BlocksDirtied float64 `json:"blocks_dirtied"`
	BlocksWritten float64 `json:"blocks_written"`
	// FullPageImages and WALBytes are the write-ahead log made: whole
	// pages, and all of it.
	FullPageImages float64 `json:"full_page_images"`
	WALBytes       float64 `json:"wal_bytes"`
}

// Sides are a point's figures by side of its runs; each nil when it was
// not measured.
type Sides[T any] struct {
	Fresh      *T `json:"fresh,omitempty"`
	BareFresh  *T `json:"bare_fresh,omitempty"`
	FreshSQL   *T `json:"fresh_sql,omitempty"`
	Replay     *T `json:"replay,omitempty"`
	BareReplay *T `json:"bare_replay,omitempty"`
	// The least SQL's: its bare service's runs and least.sql's.
	LeastFresh  *T `json:"least_fresh,omitempty"`
	LeastSQL    *T `json:"least_sql,omitempty"`
	LeastReplay *T `json:"least_replay,omitempty"`
}

// Costs are a point's DBCost by side; each nil when pg_stat_statements was
// not used.
type Costs = Sides[DBCost]

// CPUCosts are a point's CPUCost by side; each nil when /proc could not
// be read.
type CPUCosts = Sides[CPUCost]

// sideCost sums the statements of one side's runs and the requests they
// answered, and the machine's CPU time and the database's backends'
// waits over them.
type sideCost struct {
	delta    snapshot
	requests int
	cpu      cpuSum
	waits    waitSum
}

// add adds the statements run between a and b, and the requests answered
// meanwhile. A nil sideCost counts nothing.
func (c *sideCost) add(a, b snapshot, requests int) {
	if c == nil || b == nil {
		return
	}
	if c.delta == nil {
		c.delta = snapshot{}
	}
	addDelta(c.delta, a, b)
	c.requests += requests
}

// addCPU adds the CPU time used between a and b, and the requests
// answered meanwhile; nothing when either is missing or c is nil.
func (c *sideCost) addCPU(a, b *cpuReading, requests int) {
	if c != nil {
		c.cpu.add(a, b, requests)
	}
}

// cost is the sum per request; nil when nothing was counted.
func (c *sideCost) cost() *DBCost {
	if c == nil || c.delta == nil || c.requests == 0 {
		return nil
	}
	var sum statementStats
	for _, st := range c.delta {
		sum = sum.plus(st, 1)
	}
	n := float64(c.requests)
	return &DBCost{
		Requests: c.requests, Statements: float64(sum.calls) / n, ExecMs: sum.totalMs / n,
		BlocksHit: float64(sum.blocksHit) / n, BlocksRead: float64(sum.blocksRead) / n,
		BlocksDirtied: float64(sum.blocksDirtied) / n, BlocksWritten: float64(sum.blocksWritten) / n,
		FullPageImages: float64(sum.walFPI) / n, WALBytes: float64(sum.walBytes) / n,
	}
}

// costSums are the sideCosts of a point.
type costSums struct {
	fresh, bareFresh, freshSQL, replay, bareReplay sideCost
	leastFresh, leastSQL, leastReplay              sideCost
}

// costs is what the sums come to; nil when nothing was counted.
func (s *costSums) costs() *Costs {
	return sidesOf(s, (*sideCost).cost)
}

// cpuCosts is what the CPU time comes to; nil when none was read.
func (s *costSums) cpuCosts() *CPUCosts {
	return sidesOf(s, func(c *sideCost) *CPUCost { return c.cpu.cost() })
}

// waitCosts is what the samples of pg_stat_activity saw; nil when none
// was taken.
func (s *costSums) waitCosts() *WaitCosts {
	return sidesOf(s, func(c *sideCost) *Waits { return c.waits.waits() })
}

// sidesOf is of applied to each side's sum; nil when it gives nothing.
func sidesOf[T any](s *costSums, of func(*sideCost) *T) *Sides[T] {
	c := &Sides[T]{
		Fresh: of(&s.fresh), BareFresh: of(&s.bareFresh), FreshSQL: of(&s.freshSQL),
		Replay: of(&s.replay), BareReplay: of(&s.bareReplay),
		LeastFresh: of(&s.leastFresh), LeastSQL: of(&s.leastSQL), LeastReplay: of(&s.leastReplay),
	}
	if *c == (Sides[T]{}) {
		return nil
	}
	return c
}
