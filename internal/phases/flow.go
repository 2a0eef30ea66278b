package phases

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/google/uuid"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
)

// RecoveryPoint names where a key stands: the step it runs next, or
// Finished. A run starts a new key at Started, where every flow's first
// step is; the key is stored where the run's first transaction leaves it
// (see reserveAt).
type RecoveryPoint string

// The recovery points every flow shares.
const (
	Started  RecoveryPoint = "started"
	Finished RecoveryPoint = "finished"
)

// Flow is one kind of idempotent request: a stable name, stored on every
// key it drives (so renaming a route strands nothing), and its steps in the
// order they run, each named for the recovery point the key stands at when
// it runs, the first at Started.
//
// S is what the steps of one run hand each other (the row a step wrote,
// say). A run that creates its key starts with S's zero value; a run that
// resumes a key past its first step starts from Load, which rebuilds S from
// what the earlier runs committed.
type Flow[S any] struct {
	Name string
	// Load rebuilds S for a run that resumes a key past its first step,
	// in the transaction that takes the key's lease. Nil leaves S zero.
	Load  func(ctx context.Context, tx db.Tx, run *Run) (S, error)
	Steps []Step[S]
}

// AnyFlow is a Flow of any state, as Engine.Register and api.Endpoint take
// it.
type AnyFlow interface {
	// FlowName is the flow's Name.
	FlowName() string
	validate() error
	reserveAt() RecoveryPoint
	drive(ctx context.Context, e *Engine, open opener, fresh bool) (*Result, error)
}

// FlowName is the flow's Name.
func (f Flow[S]) FlowName() string { return f.Name }

// Step is one atomic phase of a Flow[S], named for the recovery point the
// key stands at when it runs. Build it with Local or Foreign.
type Step[S any] struct {
	at    RecoveryPoint
	local func(ctx context.Context, tx db.Tx, run *Run, s *S) (Transition, error)
	call  func(ctx context.Context, run *Run, s *S) (recorder[S], error)
}

// recorder records a foreign call's result in the phase transaction after
// the call.
type recorder[S any] func(ctx context.Context, tx db.Tx, run *Run, s *S) (Transition, error)

// Local is a step with no foreign side effect: do works in the phase
// transaction and says whether the flow goes on or finishes. The engine
// runs consecutive local steps in one transaction.
func Local[S any](at RecoveryPoint, do func(ctx context.Context, tx db.Tx, run *Run, s *S) (Transition, error)) Step[S] {
	return Step[S]{at: at, local: do}
}

// Foreign is a step with one foreign side effect. call performs it with no
// transaction open; an error from call is an ambiguous outcome (the engine
// releases the lease without moving the recovery point, so the next run
// calls again), or a *NeedsAttentionError that parks the key. A definite
// outcome (a decline, say) is a value of T, which record stores in the next
// phase transaction.
func Foreign[S, T any](at RecoveryPoint,
	call func(ctx context.Context, run *Run, s *S) (T, error),
	record func(ctx context.Context, tx db.Tx, run *Run, s *S, got T) (Transition, error)) Step[S] {
	return Step[S]{at: at, call: func(ctx context.Context, run *Run, s *S) (recorder[S], error) {
		got, err := call(ctx, run, s)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, tx db.Tx, run *Run, s *S) (Transition, error) {
			return record(ctx, tx, run, s, got)
		}, nil
	}}
}

// validate refuses a flow the engine could not drive.
func (f Flow[S]) validate() error {
	if !validFlowName.MatchString(f.Name) {
		return fmt.Errorf("flow name %q is not a lowercase identifier", f.Name)
	}
	if len(f.Steps) == 0 || f.Steps[0].at != Started {
		return fmt.Errorf("flow %q does not start with a step at %q", f.Name, Started)
	}
	seen := map[RecoveryPoint]bool{}
	for _, step := range f.Steps {
		switch {
		case step.at == Finished:
			return fmt.Errorf("flow %q has a step at %q", f.Name, Finished)
		case !validPoint.MatchString(string(step.at)):
			return fmt.Errorf("flow %q: recovery point %q is not a lowercase identifier", f.Name, step.at)
		case seen[step.at]:
			return fmt.Errorf("flow %q has two steps at %q", f.Name, step.at)
		case step.local == nil && step.call == nil:
			return fmt.Errorf("flow %q: the step at %q was not built with Local or Foreign", f.Name, step.at)
		}
		seen[step.at] = true
	}
	return nil
}

// reserveAt is the recovery point a new key is inserted at: where the
// flow's leading local steps take it when each goes on, the point of its
// first foreign step. Those steps run in the transaction that inserts the
// key, so the key's row can say at once where that transaction leaves it:
// if it commits, their rows exist; if it fails, the key goes with them.
// One that ends elsewhere (a step finishes the key) writes where it ended.
// A flow that starts with a foreign step, or has none (its local steps
// must finish it), inserts at Started.
func (f Flow[S]) reserveAt() RecoveryPoint {
	for i, step := range f.Steps {
		if step.local == nil {
			if i == 0 {
				return Started
			}
			return step.at
		}
	}
	return Started
}

// stepAt is the index of the step at point.
func (f Flow[S]) stepAt(point RecoveryPoint) (int, error) {
	for i, step := range f.Steps {
		if step.at == point {
			return i, nil
		}
	}
	return 0, fmt.Errorf("flow %q has no step at recovery point %q", f.Name, point)
}

// validFlowName and validPoint are what the database accepts for flow
// names (the flow_name domain) and recovery points (recovery_point_name:
// no digits), migration 00035.
var (
	validFlowName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)
	validPoint    = regexp.MustCompile(`^[a-z][a-z_]{0,62}$`)
)

// Transition is what a step decides: go on to the flow's next step, or
// finish with a response that is stored for replays.
type Transition struct {
	finished bool
	response *Response
}

// Next goes on to the step after this one.
func Next() Transition { return Transition{} }

// FinishWith ends the flow: resp is stored and replayed for every later
// request with the same key.
func FinishWith(resp *Response) Transition { return Transition{finished: true, response: resp} }

// Response is a stored HTTP answer. Body holds the exact bytes sent, so a
// replay is byte-for-byte identical and never re-encoded.
type Response struct {
	Status  int               `json:"-"`
	Headers map[string]string `json:"-"`
	Body    []byte            `json:"-"`
}

// Run is one attempt to drive a key. Steps read the key (its request, its
// user, where it stands) from it.
type Run struct {
	// Key is the key row as this run last wrote it.
	Key *dbsqlc.IdempotencyKey
	// Fresh is true for the run that created the key.
	Fresh bool

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

// RecoveryPoint is where the run stands.
func (r *Run) RecoveryPoint() RecoveryPoint { return RecoveryPoint(r.Key.RecoveryPoint) }
