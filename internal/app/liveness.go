package app

import (
	"fmt"
	"sync/atomic"
	"time"
)

// liveness is when this instance last committed its heartbeat. /readyz
// reports the store unready once that is older than deadAfter, the age at
// which other instances take this one's leases over: a commit that cannot
// finish (a synchronous standby gone, a primary that stopped answering) then
// shows in the probe, which a read alone would not.
type liveness struct {
	last      atomic.Int64 // Unix nanoseconds; 0 before the first commit
	deadAfter time.Duration
}

// beat records a committed heartbeat.
func (l *liveness) beat() { l.last.Store(time.Now().UnixNano()) }

// check says why the store is not fit to serve, or nil.
func (l *liveness) check() error {
	last := l.last.Load()
	if last == 0 {
		return fmt.Errorf("no heartbeat has committed yet")
	}
	if age := time.Since(time.Unix(0, last)); age > l.deadAfter {
		return fmt.Errorf("no heartbeat has committed for %s", age.Round(time.Second))
	}
	return nil
}
