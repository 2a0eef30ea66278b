package phases

import (
	"errors"
	"fmt"
	"time"
)

// ErrKeyReused means the key was already used for a different request.
var ErrKeyReused = errors.New("idempotency key reused with a different request")

// ErrLeaseLost means another run took the key over; this run wrote nothing
// after losing it.
var ErrLeaseLost = errors.New("idempotency key lease lost to another run")

// ErrUnknownFlow means no flow is registered under the request's (or the
// key's) flow name.
var ErrUnknownFlow = errors.New("no flow for request")

// InProgressError means the key is leased by a live run.
type InProgressError struct {
	// RetryAfter is the advised wait before retrying: a live run usually
	// finishes within it, and a crashed one is taken over once its lease
	// is stale.
	RetryAfter time.Duration
}

func (e *InProgressError) Error() string { return "idempotency key in progress" }

// AmbiguousError means a step's foreign call ended without a definite outcome.
// The key keeps its recovery point and its lease was released, so a retry
// resumes at once.
type AmbiguousError struct {
	Point RecoveryPoint
	Err   error
}

func (e *AmbiguousError) Error() string {
	return "outcome unknown at " + string(e.Point) + ": " + e.Err.Error()
}

func (e *AmbiguousError) Unwrap() error { return e.Err }

// NeedsAttentionError means no machine can settle the key: its outcome stayed
// unknown, or what the remote party answered cannot be reconciled. The key
// is parked for an operator and never run again automatically until it is
// settled (Engine.Settle). A step's Call returns it (through NeedsAttention)
// to park its key; Execute and Resume return it for a parked key.
type NeedsAttentionError struct {
	// Reason says why, for the operator; it never holds request data.
	Reason string
	// Conflict is set when what the remote party holds contradicts the
	// request (two objects of one intent, one that does not match): only an
	// operator may settle such a key. Otherwise the outcome is merely
	// unknown, and the remote party's own word (a webhook) may settle it.
	Conflict bool
	// Since is when the key was parked (zero while the step is parking it).
	Since time.Time
}

// NeedsAttention returns the error a step's Call returns to park its key
// when its outcome cannot be learned: Stripe's own word may still settle it.
func NeedsAttention(format string, args ...any) error {
	return &NeedsAttentionError{Reason: fmt.Sprintf(format, args...)}
}

// Conflict returns the error a step's Call returns to park its key when
// what the remote party holds contradicts the request: an operator's alone.
func Conflict(format string, args ...any) error {
	return &NeedsAttentionError{Reason: fmt.Sprintf(format, args...), Conflict: true}
}

// kind is how the key's row names why it is parked.
func (e *NeedsAttentionError) kind() string {
	if e.Conflict {
		return AttentionConflict
	}
	return AttentionUnknownOutcome
}

// Why a key awaits an operator, as its row stores it.
const (
	AttentionUnknownOutcome = "unknown_outcome"
	AttentionConflict       = "conflict"
)

// AlarmError means the remote party's word contradicts what is recorded, and
// was not applied: the event that brought it is kept as an alarm (logged,
// counted), and whatever the settler handed to an operator stays handed.
type AlarmError struct {
	Reason string
}

// Alarm returns the error a settler returns for an event it must not apply.
func Alarm(format string, args ...any) error {
	return &AlarmError{Reason: fmt.Sprintf(format, args...)}
}

func (e *AlarmError) Error() string { return "alarm: " + e.Reason }

func (e *NeedsAttentionError) Error() string { return "idempotency key needs attention: " + e.Reason }

// KeyInUseError means a reaped key cannot come back from its tombstone
// (Engine.Restore): live key KeyID holds its (user, idempotency key). The
// tombstone stays.
type KeyInUseError struct {
	KeyID int64
}

func (e *KeyInUseError) Error() string {
	return fmt.Sprintf("the reaped key's idempotency key is held by live key %d", e.KeyID)
}

// ErrNotAwaitingOperator means a key to settle does not exist or does not
// await an operator.
var ErrNotAwaitingOperator = errors.New("idempotency key does not await an operator")
