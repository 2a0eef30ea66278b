package bench

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// # What the database's connections were doing
//
// The CPU table (proccpu.go) says how long the CPUs sat idle per request,
// not why: with 32 requests in flight, an idle CPU means every one of them
// waited on something at once. pg_stat_activity says what the database's
// side of them was doing. Every waitInterval during each run of a side the
// harness reads it on a connection of its own, to another database of the
// server so that its reads reach neither the bench database's statements
// nor its commits, and counts each client backend of the bench database
// (the service's background workers' included) by what it did then: inside a
// statement and waiting on nothing Postgres tracks (on the CPU, or ready
// to be), inside a statement and waiting on an event (a lock, a buffer's
// content, I/O, the write-ahead log, the client), or idle inside a
// transaction (its client is between two of the transaction's statements).
// Over the samples, each count is the mean number of backends so occupied.
// Idle backends are not counted: they wait for their client's next
// statement, which is the time the application and the network take.

// waitInterval is how often the harness samples pg_stat_activity: each
// sample costs the server about half a millisecond, so 20 a second cost it
// about 1% of a core, on every side's runs alike.
const waitInterval = 50 * time.Millisecond

// waitQuery reads each client backend of database $1 that is in a
// statement or a transaction: its state and wait event.
const waitQuery = `SELECT state, coalesce(wait_event_type || ':' || wait_event, '')
FROM pg_stat_activity
WHERE datname = $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid()
  AND (state = 'active' OR state LIKE 'idle in transaction%')`

// waitSampleTimeout bounds one sample: a server that stops answering ends
// the sampling, not the run.
const waitSampleTimeout = time.Second

// waitTarget is where the sampler connects (url, any database of the
// server but the bench database) and the database it watches (db).
type waitTarget struct{ url, db string }

// Waits is what the bench database's client backends were doing during a
// side's runs, each figure the mean number of backends over the samples.
type Waits struct {
	Samples int `json:"samples"`
	// OnCPU is the backends inside a statement that waited on no event.
	OnCPU float64 `json:"on_cpu"`
	// IdleInTransaction is the backends idle inside a transaction.
	IdleInTransaction float64 `json:"idle_in_transaction"`
	// Events is the backends inside a statement that waited, by wait
	// event ("LWLock:WALWrite"), the most first.
	Events []WaitEvent `json:"events,omitempty"`
}

// WaitEvent is the mean number of backends waiting on one event.
type WaitEvent struct {
	Event    string  `json:"event"`
	Backends float64 `json:"backends"`
}

// Waiting is the backends inside a statement that waited on some event.
func (w *Waits) Waiting() float64 {
	var n float64
	for _, e := range w.Events {
		n += e.Backends
	}
	return n
}

// WaitCosts are a point's Waits by side; each nil when pg_stat_activity
// was not sampled.
type WaitCosts = Sides[Waits]

// waitSum counts what the samples of a side's runs saw.
type waitSum struct {
	samples, onCPU, idleInTx int
	events                   map[string]int
}

// add counts one backend's state and wait event.
func (s *waitSum) add(state, event string) {
	switch {
	case strings.HasPrefix(state, "idle in transaction"):
		s.idleInTx++
	case event == "":
		s.onCPU++
	default:
		if s.events == nil {
			s.events = map[string]int{}
		}
		s.events[event]++
	}
}

// plus adds the samples of o.
func (s *waitSum) plus(o waitSum) {
	s.samples += o.samples
	s.onCPU += o.onCPU
	s.idleInTx += o.idleInTx
	for e, n := range o.events {
		if s.events == nil {
			s.events = map[string]int{}
		}
		s.events[e] += n
	}
}

// waits is the sum as means over its samples; nil when none was taken.
func (s *waitSum) waits() *Waits {
	if s.samples == 0 {
		return nil
	}
	n := float64(s.samples)
	w := &Waits{Samples: s.samples, OnCPU: float64(s.onCPU) / n, IdleInTransaction: float64(s.idleInTx) / n}
	for e, c := range s.events {
		w.Events = append(w.Events, WaitEvent{Event: e, Backends: float64(c) / n})
	}
	slices.SortFunc(w.Events, func(a, b WaitEvent) int {
		return cmp.Or(cmp.Compare(b.Backends, a.Backends), cmp.Compare(a.Event, b.Event))
	})
	return w
}

// sampleWaits samples the watched database's backends every waitInterval
// until ctx ends, and returns what it saw: nothing when it cannot connect,
// as the other readings that cannot be taken give nothing, and the samples
// taken so far when one fails.
func sampleWaits(ctx context.Context, at waitTarget) waitSum {
	var sum waitSum
	conn, err := pgx.Connect(ctx, at.url)
	if err != nil {
		return sum
	}
	defer func() {
		closing, cancel := context.WithTimeout(context.WithoutCancel(ctx), waitSampleTimeout)
		defer cancel()
		_ = conn.Close(closing)
	}()
	tick := time.NewTicker(waitInterval)
	defer tick.Stop()
	for {
		if err := sum.sample(ctx, conn, at.db); err != nil {
			return sum
		}
		select {
		case <-ctx.Done():
			return sum
		case <-tick.C:
		}
	}
}

// sample takes one sample of database db's backends on conn, and adds it
// only whole: a sample cut off halfway would count some backends and not
// the others.
func (s *waitSum) sample(ctx context.Context, conn *pgx.Conn, db string) error {
	ctx, cancel := context.WithTimeout(ctx, waitSampleTimeout)
	defer cancel()
	rows, err := conn.Query(ctx, waitQuery, db)
	if err != nil {
		return err
	}
	one := waitSum{samples: 1}
	var state, event string
	if _, err := pgx.ForEachRow(rows, []any{&state, &event}, func() error {
		one.add(state, event)
		return nil
	}); err != nil {
		return err
	}
	s.plus(one)
	return nil
}

// waitsDuring samples the watched database's backends while run runs, and
// adds what it saw to cost (a nil cost or an empty target: no sampling).
func waitsDuring[T any](ctx context.Context, at waitTarget, cost *sideCost, run func() (T, error)) (T, error) {
	if cost == nil || at.url == "" || at.db == "" {
		return run()
	}
	sampling, stop := context.WithCancel(ctx)
	done := make(chan waitSum, 1)
	go func() { done <- sampleWaits(sampling, at) }()
	defer func() {
		stop()
		cost.waits.plus(<-done)
	}()
	return run()
}

// waitTarget is where the measurer's sampler connects (the admin database)
// and the database it watches (the bench database); empty, so no sampling,
// when either is unknown.
func (m *measurer) waitTarget() waitTarget {
	bench, err := pgx.ParseConfig(m.cfg.BenchURL)
	if err != nil || m.cfg.AdminURL == "" {
		return waitTarget{}
	}
	return waitTarget{url: m.cfg.AdminURL, db: bench.Database}
}
