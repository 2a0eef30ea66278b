package phases

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
)

// Config tunes an Engine.
type Config struct {
	// LeaseTimeout is how long a lease lasts without renewal; after it, a
	// stale in-progress key may be taken over. Every commit renews it.
	LeaseTimeout time.Duration
	// InstanceID names the serving process whose runs hold leases; a lease
	// whose instance stopped heartbeating for DeadAfter is stale at once.
	// The zero UUID (tests, one-off tools) leaves leases to time out.
	InstanceID uuid.UUID
	// DeadAfter is how long an instance may miss heartbeats before its
	// leases may be taken over.
	DeadAfter time.Duration
	// Hooks injects faults for tests; production leaves it zero.
	Hooks Hooks
	// Observer is told what the engine does; nil observes nothing.
	Observer Observer
	// Limit, when set, may refuse any user's key about to be created (a
	// rate limit); a request's own Admit is asked first.
	Limit Limit
	// MaxUnfinished caps the unfinished keys one user may have; a new key
	// beyond it is refused with ReasonTooManyUnfinished. Zero means 1000.
	MaxUnfinished int
	// StaleAt, when set, is the time at which this engine judges whether a
	// lease is stale, instead of the database's now(): a clock seam for
	// tests, which hand a later time rather than sleep until a lease runs
	// out. Production leaves it nil.
	StaleAt func() time.Time
}

// ReasonTooManyUnfinished is the RefusedError reason of the unfinished-key cap.
const ReasonTooManyUnfinished = "too_many_unfinished"

// Hooks are fault-injection points for crash tests. A hook that returns an
// error makes the run stop right there, as if the process had died: no
// cleanup, the lease stays held until it goes stale.
type Hooks struct {
	// AfterCommit runs after each phase transaction commits, with the
	// recovery point it committed.
	AfterCommit func(ctx context.Context, point RecoveryPoint) error
	// AfterCall runs after a step's foreign call returned, before its result
	// is recorded, with the recovery point the step leaves.
	AfterCall func(ctx context.Context, point RecoveryPoint) error
}

// Engine drives idempotency keys through their flows.
type Engine struct {
	pool    *db.Pool
	queries *dbsqlc.Queries
	flows   map[string]AnyFlow
	cfg     Config
}

// New returns an engine over pool. Register flows before serving.
func New(pool *db.Pool, cfg Config) *Engine {
	if cfg.LeaseTimeout <= 0 {
		cfg.LeaseTimeout = 90 * time.Second
	}
	if cfg.DeadAfter <= 0 {
		cfg.DeadAfter = 15 * time.Second
	}
	if cfg.MaxUnfinished <= 0 {
		cfg.MaxUnfinished = 1000
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	return &Engine{pool: pool, queries: dbsqlc.New(), flows: map[string]AnyFlow{}, cfg: cfg}
}

// Register adds flow under its name. It refuses a malformed flow or a second
// flow of the same name, so a service with a broken flow does not start.
// Register every flow before serving.
func (e *Engine) Register(flow AnyFlow) error {
	if err := flow.validate(); err != nil {
		return err
	}
	if _, ok := e.flows[flow.FlowName()]; ok {
		return fmt.Errorf("flow %q is registered already", flow.FlowName())
	}
	e.flows[flow.FlowName()] = flow
	return nil
}

// LeaseTimeout is the configured lease length.
func (e *Engine) LeaseTimeout() time.Duration { return e.cfg.LeaseTimeout }

// StaleAt is the time at which leases are judged stale: nil for the
// database's now() (see Config.StaleAt).
func (e *Engine) StaleAt() *time.Time {
	if e.cfg.StaleAt == nil {
		return nil
	}
	t := e.cfg.StaleAt()
	return &t
}

// DeadAfter is how long an instance may miss heartbeats before its leases
// are stale.
func (e *Engine) DeadAfter() time.Duration { return e.cfg.DeadAfter }

// lockedBy is the instance to record as a lease's holder.
func (e *Engine) lockedBy() uuid.NullUUID {
	return uuid.NullUUID{UUID: e.cfg.InstanceID, Valid: e.cfg.InstanceID != uuid.Nil}
}

// errInProgress is the answer for a key a live run holds: a live run
// usually finishes within a second, and a crashed one is taken over once
// its lease is stale.
func errInProgress() error { return &InProgressError{RetryAfter: time.Second} }

// flowFor is the flow registered under name.
func (e *Engine) flowFor(name string) (AnyFlow, error) {
	flow, ok := e.flows[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownFlow, name)
	}
	return flow, nil
}

// errRaced means the key changed between our read and our write (a
// concurrent insert won, or the lease went elsewhere); the caller reads again.
var errRaced = errors.New("raced on idempotency key")

// maxReads bounds the read-decide-write loop; each turn means another
// request changed the key in between, which can only happen a few times.
const maxReads = 3

// Execute answers req: a replay of the stored response, a refusal (key reused,
// in progress), or the result of driving the key's flow from wherever it
// stands.
//
// The key is read first, outside any transaction: a replay, the most common
// repeat, costs one indexed lookup and writes nothing; sent as the first
// request was (its Digest), it is answered without Prepare being called.
// A request Prepare refuses is refused whatever the store says, even when
// the store cannot be read. Reservation itself is never
// check-then-insert: it is an INSERT … ON CONFLICT DO NOTHING, or a
// conditional UPDATE of the lease, each of which decides atomically.
func (e *Engine) Execute(ctx context.Context, req *Request) (*Result, error) {
	flow, err := e.flowFor(req.Flow)
	if err != nil {
		return nil, err
	}
	for range maxReads {
		key, err := e.queries.IdempotencyKeyGetByUserKey(ctx, e.pool, &dbsqlc.IdempotencyKeyGetByUserKeyParams{
			UserID: req.UserID, IdempotencyKey: req.Key, RequestDigest: req.Digest,
		})
		switch {
		case errors.Is(err, db.ErrNotFound):
			if err := req.prepare(); err != nil {
				return nil, err
			}
			if req.Admit != nil {
				if err := req.Admit(ctx); err != nil {
					return nil, err
				}
			}
			if e.cfg.Limit != nil {
				if err := e.cfg.Limit(ctx, req.UserID); err != nil {
					return nil, err
				}
			}
			runCtx, cancel := detach(ctx, req.RunTimeout)
			res, err := flow.drive(runCtx, e, e.insertKey(req, flow.reserveAt()), true)
			cancel()
			if errors.Is(err, errRaced) {
				continue
			}
			return res, err
		case err != nil:
			// A request that could never succeed is told so, not to retry.
			if err := req.prepare(); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("error reading idempotency key: %w", err)
		}
		if same, err := req.madeKey(key); err != nil {
			return nil, err
		} else if !same {
			return nil, ErrKeyReused
		}
		res, err := e.resume(ctx, flow, key, req.RunTimeout)
		if errors.Is(err, errRaced) {
			continue
		}
		return res, err
	}
	return nil, errInProgress()
}

// detach is ctx without its cancellation, bounded by timeout; with no
// timeout, ctx as it is.
func detach(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(context.WithoutCancel(ctx), timeout)
}

// Resume drives the key with id from its recovery point without a client, as
// the completer does. It answers like Execute: the stored response if the key
// is finished, InProgressError if a live run holds it.
func (e *Engine) Resume(ctx context.Context, keyID int64) (*Result, error) {
	key, err := e.queries.IdempotencyKeyGetByID(ctx, e.pool, keyID)
	if err != nil {
		return nil, fmt.Errorf("error reading idempotency key: %w", err)
	}
	flow, err := e.flowFor(key.Flow)
	if err != nil {
		return nil, err
	}
	res, err := e.resume(ctx, flow, stateOf(key), 0)
	if errors.Is(err, errRaced) {
		return nil, errInProgress()
	}
	return res, err
}

// resume answers for an existing key with a matching fingerprint; a run it
// starts is detached as Request.RunTimeout says.
func (e *Engine) resume(ctx context.Context, flow AnyFlow, key *keyState, runTimeout time.Duration) (*Result, error) {
	if RecoveryPoint(key.RecoveryPoint) == Finished {
		return replay(key)
	}
	if !key.Parked {
		// Whether the current lease is stale (timed out, or its instance
		// dead) is the lease update's to decide, on the database's clock.
		runCtx, cancel := detach(ctx, runTimeout)
		res, err := flow.drive(runCtx, e, e.leaseKey(key.ID, key.Leased), false)
		cancel()
		if !errors.Is(err, errRaced) {
			return res, err
		}
	}
	// Parked for an operator (the state read says only whether, and the
	// answer needs why and since when), or the lease went elsewhere between
	// our read and our update: the whole key says whether it finished
	// meanwhile, awaits an operator, or another run holds it now.
	again, err := e.queries.IdempotencyKeyGetByID(ctx, e.pool, key.ID)
	if err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return nil, errRaced
		}
		return nil, fmt.Errorf("error reading idempotency key: %w", err)
	}
	if RecoveryPoint(again.RecoveryPoint) == Finished {
		return replay(stateOf(again))
	}
	if err := parkedError(again); err != nil {
		return nil, err
	}
	return nil, errInProgress()
}

// parkedError is the answer for a whole key parked for an operator, or nil.
func parkedError(key *dbsqlc.IdempotencyKey) error {
	if key.NeedsAttentionAt == nil {
		return nil
	}
	reason := ""
	if key.LastError != nil {
		reason = *key.LastError
	}
	conflict := key.NeedsAttentionKind == nil || *key.NeedsAttentionKind == AttentionConflict
	return &NeedsAttentionError{Reason: reason, Conflict: conflict, Since: *key.NeedsAttentionAt}
}

// opener takes the lease in the first transaction of a run. It returns
// errRaced when it could not.
type opener func(ctx context.Context, tx db.Tx, token uuid.UUID) (*dbsqlc.IdempotencyKey, error)

// insertKey creates req's key with a lease, at point (its flow's
// reserveAt).
func (e *Engine) insertKey(req *Request, point RecoveryPoint) opener {
	return func(ctx context.Context, tx db.Tx, token uuid.UUID) (*dbsqlc.IdempotencyKey, error) {
		key, err := e.queries.IdempotencyKeyInsert(ctx, tx, &dbsqlc.IdempotencyKeyInsertParams{
			UserID:             req.UserID,
			IdempotencyKey:     req.Key,
			Flow:               req.Flow,
			RequestMethod:      req.Method,
			RequestPath:        req.Path,
			RequestParams:      req.Params,
			RequestFingerprint: req.Fingerprint,
			RequestDigest:      req.Digest,
			RecoveryPoint:      string(point),
			LockToken:          uuid.NullUUID{UUID: token, Valid: true},
			LockedBy:           e.lockedBy(),
			MaxUnfinished:      int32(e.cfg.MaxUnfinished),
		})
		if !errors.Is(err, db.ErrNotFound) {
			return key, err
		}
		// No row: the key exists now (a concurrent insert won), it was
		// reaped and its tombstone refuses it, or the user is at the cap.
		found, err := e.queries.IdempotencyKeyExists(ctx, tx, &dbsqlc.IdempotencyKeyExistsParams{
			UserID: req.UserID, IdempotencyKey: req.Key,
		})
		switch {
		case err != nil:
			return nil, fmt.Errorf("error reading idempotency key: %w", err)
		case found.KeyExists:
			return nil, errRaced
		case found.TombstoneResponseCode != nil:
			return nil, keyExpired(req, found)
		}
		return nil, &RefusedError{Reason: ReasonTooManyUnfinished, RetryAfter: 5 * time.Second}
	}
}

// leaseKey takes the lease of key id; wasLeased says whether a run held it
// when we read it, so that winning it is a takeover.
func (e *Engine) leaseKey(id int64, wasLeased bool) opener {
	return func(ctx context.Context, tx db.Tx, token uuid.UUID) (*dbsqlc.IdempotencyKey, error) {
		key, err := e.queries.IdempotencyKeyLease(ctx, tx, &dbsqlc.IdempotencyKeyLeaseParams{
			ID:               id,
			LockToken:        uuid.NullUUID{UUID: token, Valid: true},
			LockedBy:         e.lockedBy(),
			LeaseSeconds:     e.cfg.LeaseTimeout.Seconds(),
			DeadAfterSeconds: e.cfg.DeadAfter.Seconds(),
			Now:              e.StaleAt(),
		})
		if errors.Is(err, db.ErrNotFound) {
			return nil, errRaced
		}
		if err == nil && wasLeased {
			db.AfterCommit(ctx, e.cfg.Observer.LeaseTakenOver)
		}
		return key, err
	}
}

// Pool is the pool the engine works through.
func (e *Engine) Pool() *db.Pool { return e.pool }
