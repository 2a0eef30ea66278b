package chaos

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// EventKind classifies what the harness did or saw.
type EventKind string

// The kinds of events the table counts.
const (
	EventKill    EventKind = "sigkill"
	EventRestart EventKind = "restart"
	EventExit    EventKind = "unexpected-exit"
	EventPGStop  EventKind = "postgres-stop"
	EventPGStart EventKind = "postgres-start"
	// A failover: the standby cut off (async), the primary stopped, the
	// standby promoted.
	EventReplicationCut EventKind = "replication-cut"
	EventPrimaryStop    EventKind = "primary-stop"
	EventPromote        EventKind = "promote"
	// A key's committed history deleted (lost_history.go).
	EventLostHistory EventKind = "lost-history"
	EventFaults      EventKind = "faults"
	EventPhase       EventKind = "phase"
	EventProgress    EventKind = "progress"
	EventHarnessErr  EventKind = "harness-error"
)

// Events is the run's timestamped log of injections and milestones. It
// writes every event to the console and to the event log file at once, so
// an event can be matched with the process logs by its wall-clock time.
type Events struct {
	start time.Time
	mu    sync.Mutex
	out   []io.Writer
	count map[EventKind]int
}

// NewEvents starts the clock of the run; events are written to out.
func NewEvents(out ...io.Writer) *Events {
	return &Events{start: time.Now(), out: out, count: map[EventKind]int{}}
}

// Logf records one event.
func (e *Events) Logf(kind EventKind, format string, args ...any) {
	now := time.Now()
	line := fmt.Sprintf("[%7.2fs %s] %-15s %s\n", now.Sub(e.start).Seconds(),
		now.Format("15:04:05.000"), kind, fmt.Sprintf(format, args...))
	e.mu.Lock()
	defer e.mu.Unlock()
	e.count[kind]++
	for _, w := range e.out {
		_, _ = io.WriteString(w, line)
	}
}

// Count is how many events of kind were logged.
func (e *Events) Count(kind EventKind) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.count[kind]
}

// Since is the time elapsed since the run started.
func (e *Events) Since() time.Duration { return time.Since(e.start) }
