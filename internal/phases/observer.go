package phases

import (
	"context"
	"time"
)

// Observer is told what the engine does, for metrics. Its methods must be
// fast and safe for concurrent use. What a transaction does is told once it
// commits (db.AfterCommit): a transaction that is retried or rolled back
// counts once or not at all.
type Observer interface {
	// PhaseCommitted reports a committed phase transaction and the
	// recovery point it reached.
	PhaseCommitted(point RecoveryPoint, took time.Duration)
	// CallDone reports a foreign call made from point, whatever its outcome.
	CallDone(point RecoveryPoint, took time.Duration)
	// LeaseTakenOver reports a lease taken from a stale run.
	LeaseTakenOver()
	// NeedsAttention reports a key parked for an operator.
	NeedsAttention()
}

type nopObserver struct{}

func (nopObserver) PhaseCommitted(RecoveryPoint, time.Duration) {}
func (nopObserver) CallDone(RecoveryPoint, time.Duration)       {}
func (nopObserver) LeaseTakenOver()                             {}
func (nopObserver) NeedsAttention()                             {}

// Limit decides whether a user may create one more key: a rate limit, say.
// It runs only for keys that do not exist yet, so retries and replays are
// never refused by it. A refusal should be an error the caller can map
// (such as *RefusedError).
type Limit func(ctx context.Context, userID int64) error

// RefusedError is a Limit's refusal, or the engine's own cap on a user's
// unfinished keys.
type RefusedError struct {
	// Reason says which limit refused, for the answer and for metrics.
	Reason     string
	RetryAfter time.Duration
}

func (e *RefusedError) Error() string { return "new idempotency key refused: " + e.Reason }
