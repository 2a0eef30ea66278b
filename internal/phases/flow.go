package phases

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
)

// RecoveryPoint names the next step of a key: the state that was committed
// last. Every flow starts at Started and ends at Finished.
type RecoveryPoint string

// The recovery points every flow shares.
const (
	Started  RecoveryPoint = "started"
	Finished RecoveryPoint = "finished"
)

// Step is one atomic phase. Build it with Local or Foreign: the engine runs
// its foreign call, if any, with no transaction open, and its local work in
// the phase transaction.
type Step struct {
	call  func(ctx context.Context, run *Run) (any, error)
	apply func(ctx context.Context, tx pgx.Tx, run *Run, called any) (Transition, error)
}

// Local is a step without a foreign side effect: apply does its work in the
// phase transaction and says where the key goes next. The engine fuses
// consecutive local steps into one transaction.
func Local(apply func(ctx context.Context, tx pgx.Tx, run *Run) (Transition, error)) Step {
	return Step{apply: func(ctx context.Context, tx pgx.Tx, run *Run, _ any) (Transition, error) {
		return apply(ctx, tx, run)
	}}
}

// Foreign is a step with one foreign side effect. call performs it with no
// transaction open; an error from call is an ambiguous outcome (the engine
// releases the lease without moving the recovery point, so the next run
// calls again), or a *NeedsAttentionError that parks the key. Definite
// outcomes (a decline, say) are values of T, which apply records in the phase
// transaction.
func Foreign[T any](call func(ctx context.Context, run *Run) (T, error),
	apply func(ctx context.Context, tx pgx.Tx, run *Run, called T) (Transition, error)) Step {
	return Step{
		call: func(ctx context.Context, run *Run) (any, error) { return call(ctx, run) },
		// The engine hands apply exactly what call returned.
		apply: func(ctx context.Context, tx pgx.Tx, run *Run, called any) (Transition, error) {
			return apply(ctx, tx, run, called.(T))
		},
	}
}

// Flow is one kind of idempotent request: a stable name, stored on every key
// it drives (so renaming a route strands nothing), and the step that leaves
// each recovery point but Finished.
type Flow struct {
	Name  string
	Steps map[RecoveryPoint]Step
}

// validate refuses a flow the engine could not drive.
func (f Flow) validate() error {
	if !validName.MatchString(f.Name) {
		return fmt.Errorf("flow name %q is not a lowercase identifier", f.Name)
	}
	if _, ok := f.Steps[Started]; !ok {
		return fmt.Errorf("flow %q has no step at %q", f.Name, Started)
	}
	for point, step := range f.Steps {
		switch {
		case point == Finished:
			return fmt.Errorf("flow %q has a step at %q", f.Name, Finished)
		case !validName.MatchString(string(point)):
			return fmt.Errorf("flow %q: recovery point %q is not a lowercase identifier", f.Name, point)
		case step.apply == nil:
			return fmt.Errorf("flow %q: the step at %q was not built with Local or Foreign", f.Name, point)
		}
	}
	return nil
}

// validName is what the database accepts for flow names and recovery points.
var validName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// Transition is what a step's Apply decides: move to a recovery point, or
// finish with a response that is stored for replays.
type Transition struct {
	next     RecoveryPoint
	response *Response
}

// AdvanceTo moves the key to point.
func AdvanceTo(point RecoveryPoint) Transition { return Transition{next: point} }

// FinishWith ends the flow: resp is stored and replayed for every later
// request with the same key.
func FinishWith(resp *Response) Transition { return Transition{next: Finished, response: resp} }

// Response is a stored HTTP answer. Body holds the exact bytes sent, so a
// replay is byte-for-byte identical and never re-encoded. Write its headers
// with WriteHeaders: a replayed Response may keep them as stored, with
// Headers nil.
type Response struct {
	Status  int               `json:"-"`
	Headers map[string]string `json:"-"`
	Body    []byte            `json:"-"`
	// stored is a replayed answer's headers as its key holds them, which
	// WriteHeaders reads without a map in between.
	stored []byte
}

// Run is one attempt to drive a key. Steps read the key (its request, its
// user, where it stands) and may stash values for later steps of the same run.
type Run struct {
	// Key is the key row as this run last wrote it.
	Key *dbsqlc.IdempotencyKey
	// Fresh is true for the run that created the key.
	Fresh bool
	// state carries what one step hands to the next within this run (see
	// Keep and Kept).
	state any

	engine *Engine
	token  uuid.UUID
	// leasedAt is when this run last renewed its lease (before the commit
	// that renewed it began): the run starts no call after leasedAt plus
	// the lease length.
	leasedAt time.Time
	// dbLeasedAt is the database's clock when the run took its lease, and
	// localLeasedAt this process's just before: Now reads the database's
	// clock from them.
	dbLeasedAt, localLeasedAt time.Time
}

// Now is the database's clock, read without a query: the database's time
// when the run took its lease plus the time elapsed here since (a monotonic
// reading). Steps compare it with times the database wrote (a key's
// created_at, say), so a skewed clock on this host cannot move a deadline.
func (r *Run) Now() time.Time {
	if r.dbLeasedAt.IsZero() {
		return time.Now()
	}
	return r.dbLeasedAt.Add(time.Since(r.localLeasedAt))
}

// Keep hands v to the run's later steps (a row a step just wrote, say), so
// they need not read it again. A resumed run starts with nothing kept: steps
// must be able to load what they need.
func Keep[T any](run *Run, v T) { run.state = v }

// Kept is what an earlier step of this run kept, if it is a T.
func Kept[T any](run *Run) (T, bool) {
	v, ok := run.state.(T)
	return v, ok
}

// RecoveryPoint is where the run stands.
func (r *Run) RecoveryPoint() RecoveryPoint { return RecoveryPoint(r.Key.RecoveryPoint) }

// Age is how long ago the key was created; steps use it to respect a remote
// party's idempotency window.
func (r *Run) Age() time.Duration { return time.Since(r.Key.CreatedAt) }
