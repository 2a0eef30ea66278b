package bench

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// # What the database's connections were doing
//
// The CPU table (proccpu.go) says how long the CPUs sat idle per request,
// not why: with 32 requests in flight, an idle CPU means every one of them
// waited on something at once. pg_stat_activity says what the database's
// side of them was doing. Every waitInterval during each run of a side the
// harness reads it on a connection of its own and counts each client
// backend of the bench database by what it did at that moment: inside a
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

// waitQuery reads each client backend of the bench database that is in a
// statement or a transaction: its state and wait event.
const waitQuery = `SELECT state, coalesce(wait_event_type || ':' || wait_event, '')
FROM pg_stat_activity
WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()
  AND state IN ('active', 'idle in transaction')`

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
	case state == "idle in transaction":
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

// sampleWaits samples the bench database's backends every waitInterval
// until stop is closed, and returns what it saw; nothing when it cannot
// connect, as the other readings that cannot be taken give nothing.
func sampleWaits(ctx context.Context, dbURL string, stop <-chan struct{}) waitSum {
	var sum waitSum
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return sum
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tick := time.NewTicker(waitInterval)
	defer tick.Stop()
	for {
		if err := sum.sample(ctx, conn); err != nil {
			return waitSum{}
		}
		select {
		case <-stop:
			return sum
		case <-ctx.Done():
			return sum
		case <-tick.C:
		}
	}
}

// sample takes one sample on conn.
func (s *waitSum) sample(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, waitQuery)
	if err != nil {
		return err
	}
	var state, event string
	_, err = pgx.ForEachRow(rows, []any{&state, &event}, func() error {
		s.add(state, event)
		return nil
	})
	if err == nil {
		s.samples++
	}
	return err
}

// waitsDuring samples the bench database's backends while run runs, and
// adds what it saw to cost (nil: no sampling).
func waitsDuring[T any](ctx context.Context, dbURL string, cost *sideCost, run func() (T, error)) (T, error) {
	if cost == nil || dbURL == "" {
		return run()
	}
	stop, done := make(chan struct{}), make(chan waitSum, 1)
	go func() { done <- sampleWaits(ctx, dbURL, stop) }()
	v, err := run()
	close(stop)
	sum := <-done
	cost.waits.plus(sum)
	return v, err
}
