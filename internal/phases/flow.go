package phases

import (
	"context"
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

// Step is one atomic phase.
type Step struct {
	// Call, when set, performs the step's single foreign side effect. The
	// engine runs it with no transaction open. An error from Call is an
	// ambiguous outcome: the engine releases the lease without moving the
	// recovery point and returns ErrAmbiguous, so the next run calls again.
	// Definite outcomes (a decline, say) are values for Apply to record.
	Call func(ctx context.Context, run *Run) (any, error)

	// Apply does the step's local work in the phase transaction and says
	// where the key goes next. It receives what Call returned (nil without a
	// Call). The engine writes the transition itself, fenced by the lease.
	Apply func(ctx context.Context, tx pgx.Tx, run *Run, called any) (Transition, error)
}

// Flow maps each recovery point but Finished to the step that leaves it.
type Flow map[RecoveryPoint]Step

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
// replay is byte-for-byte identical and never re-encoded.
type Response struct {
	Status  int               `json:"-"`
	Headers map[string]string `json:"-"`
	Body    []byte            `json:"-"`
}

// Run is one attempt to drive a key. Steps read the key (its request, its
// user, where it stands) and may stash values for later steps of the same run.
type Run struct {
	// Key is the key row as this run last wrote it.
	Key *dbsqlc.IdempotencyKey
	// Fresh is true for the run that created the key.
	Fresh bool
	// State carries what one step hands to the next within this run (a row
	// it just wrote, say), so a later step need not read it again. A resumed
	// run starts with none: steps must be able to load what they need.
	State any

	engine *Engine
	token  uuid.UUID
	// leasedAt is when this run last renewed its lease (before the commit
	// that renewed it began): the run starts no call after leasedAt plus
	// the lease length.
	leasedAt time.Time
}

// RecoveryPoint is where the run stands.
func (r *Run) RecoveryPoint() RecoveryPoint { return RecoveryPoint(r.Key.RecoveryPoint) }

// Age is how long ago the key was created; steps use it to respect a remote
// party's idempotency window.
func (r *Run) Age() time.Duration { return time.Since(r.Key.CreatedAt) }
