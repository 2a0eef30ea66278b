package phases_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/api"
	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// The engine on its own, driving a toy flow that is neither payments nor
// refunds: a "shipment" that books a slot locally, calls a courier, calls an
// insurer, and records a label locally. Each test builds the flow's shape it
// needs from these parts.

// courier is the foreign party: it counts calls and fails on demand.
type courier struct {
	calls atomic.Int64
	fail  atomic.Int64 // the next fail calls answer errCourier
}

var errCourier = errors.New("courier unreachable")

func (c *courier) call(_ context.Context, run *phases.Run, _ *shipment) (string, error) {
	n := c.calls.Add(1)
	if c.fail.Load() > 0 {
		c.fail.Add(-1)
		return "", errCourier
	}
	return "booking-" + strconv.FormatInt(run.Key.ID, 10) + "-" + strconv.FormatInt(n, 10), nil
}

// commits counts phase commits through the engine's observer.
type commits struct {
	n        atomic.Int64
	takeover atomic.Int64
	parked   atomic.Int64
}

func (c *commits) PhaseCommitted(phases.RecoveryPoint, time.Duration) { c.n.Add(1) }
func (c *commits) CallDone(phases.RecoveryPoint, time.Duration)       {}
func (c *commits) LeaseTakenOver()                                    { c.takeover.Add(1) }
func (c *commits) NeedsAttention()                                    { c.parked.Add(1) }

type bundle struct {
	pool    *db.Pool
	engine  *phases.Engine
	courier *courier
	commits *commits
	userID  int64
	lease   time.Duration
	flows   []phases.AnyFlow
}

// later is a second engine over the same database, with the same flows,
// that judges leases d after the database's now(): what a run sees once d
// has passed, without sleeping through it.
func (b *bundle) later(d time.Duration) *phases.Engine {
	e := phases.New(b.pool, phases.Config{LeaseTimeout: b.lease, Observer: b.commits,
		StaleAt: func() time.Time { return time.Now().Add(d) }})
	for _, f := range b.flows {
		if err := e.Register(f); err != nil {
			panic(err)
		}
	}
	return e
}

// register registers flow with the bundle's engine, and remembers it for
// later engines.
func (b *bundle) register(flow phases.AnyFlow) error {
	b.flows = append(b.flows, flow)
	return b.engine.Register(flow)
}

// setup gives each test its own database, a user and an engine whose flows
// the test registers.
func setup(t *testing.T, cfg phases.Config) *bundle {
	t.Helper()
	pool := testutil.NewDB(t)
	_, err := pool.Exec(context.Background(), `CREATE TABLE shipment_log (key_id bigint, step text, note text)`)
	require.NoError(t, err)
	user, err := dbsqlc.New().UserInsert(context.Background(), pool, &dbsqlc.UserInsertParams{
		Email: "toy@example.com", ApiKeyHash: api.HashAPIKey(api.NewAPIKey()),
	})
	require.NoError(t, err)
	b := &bundle{pool: pool, courier: &courier{}, commits: &commits{}, userID: user.ID, lease: cfg.LeaseTimeout}
	cfg.Observer = b.commits
	b.engine = phases.New(pool, cfg)
	return b
}

// shipment is what the toy flow's steps hand each other: the courier's
// booking, once made.
type shipment struct{ booking string }

type step = phases.Step[shipment]

// shipmentFlow is the toy flow of steps. A resumed run finds the booking
// in the log.
func shipmentFlow(steps ...step) phases.Flow[shipment] {
	return phases.Flow[shipment]{Name: "shipment", Steps: steps,
		Load: func(ctx context.Context, tx db.Tx, run *phases.Run) (shipment, error) {
			var booking string
			err := tx.QueryRow(ctx, `SELECT note FROM shipment_log WHERE key_id = $1 AND step = 'courier'`, run.Key.ID).Scan(&booking)
			if errors.Is(err, db.ErrNotFound) {
				err = nil
			}
			return shipment{booking: booking}, err
		}}
}

// logStep is a local step at point that writes one row, noting the booking.
func logStep(at phases.RecoveryPoint, name string) step {
	return phases.Local(at, func(ctx context.Context, tx db.Tx, run *phases.Run, s *shipment) (phases.Transition, error) {
		_, err := tx.Exec(ctx, `INSERT INTO shipment_log VALUES ($1, $2, $3)`, run.Key.ID, name, s.booking)
		return phases.Next(), err
	})
}

// callStep calls the courier at point and records its booking.
func (b *bundle) callStep(at phases.RecoveryPoint, name string) step {
	return phases.Foreign(at, b.courier.call, func(ctx context.Context, tx db.Tx, run *phases.Run, s *shipment, booking string) (phases.Transition, error) {
		s.booking = booking
		_, err := tx.Exec(ctx, `INSERT INTO shipment_log VALUES ($1, $2, $3)`, run.Key.ID, name, booking)
		return phases.Next(), err
	})
}

// finish answers 201 with the key id.
func finish(at phases.RecoveryPoint) step {
	return phases.Local(at, func(ctx context.Context, tx db.Tx, run *phases.Run, _ *shipment) (phases.Transition, error) {
		return phases.FinishWith(&phases.Response{Status: 201, Body: []byte(`{"key":` + strconv.FormatInt(run.Key.ID, 10) + `}`)}), nil
	})
}

func (b *bundle) request(key string) *phases.Request {
	sum := sha256.Sum256([]byte(key))
	return &phases.Request{UserID: b.userID, Key: key, Flow: "shipment", Method: "POST", Path: "/shipments",
		Params: []byte(`{}`), Fingerprint: sum[:]}
}

func (b *bundle) steps(t *testing.T, key string) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(),
		`SELECT l.step FROM shipment_log l JOIN idempotency_keys k ON k.id = l.key_id WHERE k.idempotency_key = $1`, key)
	require.NoError(t, err)
	steps, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return steps
}

// keyColumn is one column of the row of key.
func keyColumn[T any](t *testing.T, b *bundle, key, column string) T {
	t.Helper()
	var v T
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT `+column+` FROM idempotency_keys WHERE idempotency_key = $1`, key).Scan(&v))
	return v
}

func (b *bundle) point(t *testing.T, key string) string {
	t.Helper()
	return keyColumn[string](t, b, key, "recovery_point")
}

func TestLocalStepsFuseAroundOneCall(t *testing.T) {
	t.Parallel()
	b := setup(t, phases.Config{})
	require.NoError(t, b.register(shipmentFlow(
		logStep(phases.Started, "slot"),
		logStep("slot_booked", "packed"),
		b.callStep("packed", "courier"),
		finish("shipped"),
	)))
	res, err := b.engine.Execute(context.Background(), b.request("k"))
	require.NoError(t, err)
	require.Equal(t, 201, res.Response.Status)
	require.EqualValues(t, 2, b.commits.n.Load(), "{reserve, slot, packed} and {courier, finish}")
	require.EqualValues(t, 1, b.courier.calls.Load())
	require.Equal(t, []string{"slot", "packed", "courier"}, b.steps(t, "k"))

	again, err := b.engine.Execute(context.Background(), b.request("k"))
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, res.Response.Body, again.Response.Body)
	require.EqualValues(t, 1, b.courier.calls.Load())
}

func TestTwoCallsInARowAndACallAtTheStart(t *testing.T) {
	t.Parallel()
	b := setup(t, phases.Config{})
	require.NoError(t, b.register(shipmentFlow(
		b.callStep(phases.Started, "courier"),
		b.callStep("booked", "insurer"),
		finish("insured"),
	)))
	res, err := b.engine.Execute(context.Background(), b.request("k"))
	require.NoError(t, err)
	require.Equal(t, 201, res.Response.Status)
	require.EqualValues(t, 3, b.commits.n.Load(), "{reserve}, {courier}, {insurer, finish}")
	require.EqualValues(t, 2, b.courier.calls.Load())
	require.Equal(t, []string{"courier", "insurer"}, b.steps(t, "k"))
}

func TestAmbiguousCallKeepsThePointAndTheNextRunCallsAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, phases.Config{})
	require.NoError(t, b.register(shipmentFlow(
		logStep(phases.Started, "slot"),
		b.callStep("slot_booked", "courier"),
		finish("shipped"),
	)))
	b.courier.fail.Store(1)
	_, err := b.engine.Execute(context.Background(), b.request("k"))
	var ambiguous *phases.AmbiguousError
	require.ErrorAs(t, err, &ambiguous)
	require.ErrorIs(t, err, errCourier)
	require.Equal(t, phases.RecoveryPoint("slot_booked"), ambiguous.Point)
	require.Equal(t, "slot_booked", b.point(t, "k"))
	var leased bool
	var lastError string
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT lock_token IS NOT NULL, last_error FROM idempotency_keys`).Scan(&leased, &lastError))
	require.False(t, leased, "the lease is released, so a retry resumes at once")
	require.Contains(t, lastError, "courier unreachable")

	res, err := b.engine.Execute(context.Background(), b.request("k"))
	require.NoError(t, err)
	require.False(t, res.Replayed)
	require.EqualValues(t, 2, b.courier.calls.Load())
	require.Equal(t, []string{"slot", "courier"}, b.steps(t, "k"), "the local step ran once")
}

func TestResumeFromEachRecoveryPoint(t *testing.T) {
	t.Parallel()
	// The flow commits at slot_booked and at finished: the courier's record
	// fuses with the label and the finish.
	for _, crashAt := range []phases.RecoveryPoint{phases.Started, "slot_booked", phases.Finished} {
		t.Run(string(crashAt), func(t *testing.T) {
			t.Parallel()
			var crashed atomic.Bool
			errCrash := errors.New("crash")
			hooks := phases.Hooks{AfterCommit: func(_ context.Context, at phases.RecoveryPoint) error {
				if at == crashAt && crashed.CompareAndSwap(false, true) {
					return errCrash
				}
				return nil
			}}
			if crashAt == phases.Started {
				// Nothing commits at started in this flow: crash after the
				// call instead, before its result is recorded.
				hooks = phases.Hooks{AfterCall: func(context.Context, phases.RecoveryPoint) error {
					if crashed.CompareAndSwap(false, true) {
						return errCrash
					}
					return nil
				}}
			}
			b := setup(t, phases.Config{Hooks: hooks, LeaseTimeout: time.Hour})
			require.NoError(t, b.register(shipmentFlow(
				logStep(phases.Started, "slot"),
				b.callStep("slot_booked", "courier"),
				logStep("shipped", "label"),
				finish("labelled"),
			)))
			_, err := b.engine.Execute(context.Background(), b.request("k"))
			require.ErrorIs(t, err, errCrash)
			var id int64
			require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT id FROM idempotency_keys`).Scan(&id))

			// The dead run still holds its hour-long lease: an engine that
			// judges leases two hours on sees it stale, and resumes the key
			// without a client.
			later := b.later(2 * time.Hour)
			res, err := later.Resume(context.Background(), id)
			require.NoError(t, err)
			require.Equal(t, 201, res.Response.Status)
			require.Equal(t, []string{"slot", "courier", "label"}, b.steps(t, "k"), "each step's work committed once")
			calls := 1
			if crashAt == phases.Started {
				calls = 2 // the lost call is made again, under the same key, for the party to deduplicate
			}
			require.EqualValues(t, calls, b.courier.calls.Load())
			require.Equal(t, crashAt == phases.Finished, res.Replayed)
			if crashAt != phases.Finished {
				require.EqualValues(t, 1, b.commits.takeover.Load(), "the dead run's lease was taken over")
			}
		})
	}
}

func TestARunThatLostItsLeaseWritesNothing(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var stalled atomic.Bool
	b := setup(t, phases.Config{LeaseTimeout: time.Hour, Hooks: phases.Hooks{
		AfterCall: func(context.Context, phases.RecoveryPoint) error {
			if stalled.CompareAndSwap(false, true) {
				<-release
			}
			return nil
		}}})
	require.NoError(t, b.register(shipmentFlow(
		logStep(phases.Started, "slot"),
		b.callStep("slot_booked", "courier"),
		finish("shipped"),
	)))
	type answer struct {
		res *phases.Result
		err error
	}
	first := make(chan answer, 1)
	go func() {
		res, err := b.engine.Execute(context.Background(), b.request("k"))
		first <- answer{res, err}
	}()
	testutil.WaitFor(t, 5*time.Second, 5*time.Millisecond, stalled.Load)

	// Two hours on, by the clock leases are judged with, the stalled run's
	// lease is stale: another run takes the key over.
	res, err := b.later(2*time.Hour).Execute(context.Background(), b.request("k"))
	require.NoError(t, err, "the stale lease is taken over")
	require.Equal(t, 201, res.Response.Status)
	require.EqualValues(t, 1, b.commits.takeover.Load())
	close(release)
	// The stalled run's record is refused; it writes nothing, and answers
	// with what the key finished with meanwhile.
	a := <-first
	require.NoError(t, a.err)
	require.True(t, a.res.Replayed)
	require.Equal(t, res.Response.Body, a.res.Response.Body)
	require.Equal(t, []string{"slot", "courier"}, b.steps(t, "k"), "the stale run recorded nothing")
}

func TestConcurrentRunsOfOneKey(t *testing.T) {
	t.Parallel()
	b := setup(t, phases.Config{})
	gate := make(chan struct{})
	require.NoError(t, b.register(shipmentFlow(
		phases.Foreign(phases.Started, func(ctx context.Context, run *phases.Run, s *shipment) (string, error) {
			<-gate
			return b.courier.call(ctx, run, s)
		}, func(context.Context, db.Tx, *phases.Run, *shipment, string) (phases.Transition, error) {
			return phases.Next(), nil
		}),
		finish("shipped"),
	)))
	const n = 8
	var (
		wg         sync.WaitGroup
		created    atomic.Int64
		inProgress atomic.Int64
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := b.engine.Execute(context.Background(), b.request("k"))
			var busy *phases.InProgressError
			switch {
			case err == nil && !res.Replayed:
				created.Add(1)
			case errors.As(err, &busy):
				inProgress.Add(1)
			default:
				t.Errorf("unexpected: %v %v", res, err)
			}
		}()
	}
	// Let every racer reach the key before the winner's call returns.
	testutil.WaitFor(t, 5*time.Second, 5*time.Millisecond, func() bool { return inProgress.Load() == n-1 })
	close(gate)
	wg.Wait()
	require.EqualValues(t, 1, created.Load())
	require.EqualValues(t, 1, b.courier.calls.Load())
}

func TestATransactionRetryRunsApplyAgainOnTheCommittedState(t *testing.T) {
	t.Parallel()
	b := setup(t, phases.Config{})
	var applies atomic.Int64
	require.NoError(t, b.register(shipmentFlow(
		logStep(phases.Started, "slot"),
		phases.Local("slot_booked", func(ctx context.Context, tx db.Tx, run *phases.Run, _ *shipment) (phases.Transition, error) {
			if _, err := tx.Exec(ctx, `INSERT INTO shipment_log VALUES ($1, 'packed', '')`, run.Key.ID); err != nil {
				return phases.Transition{}, err
			}
			if applies.Add(1) == 1 {
				// As Postgres aborts a transaction it cannot serialize.
				return phases.Transition{}, &pgconn.PgError{Code: "40001", Message: "could not serialize access"}
			}
			return phases.Next(), nil
		}),
		finish("packed"),
	)))
	res, err := b.engine.Execute(context.Background(), b.request("k"))
	require.NoError(t, err)
	require.Equal(t, 201, res.Response.Status)
	require.EqualValues(t, 2, applies.Load(), "the whole transaction ran again")
	require.Equal(t, []string{"slot", "packed"}, b.steps(t, "k"), "the first try's writes rolled back")
	require.EqualValues(t, 1, b.commits.n.Load())
}

func TestAParkedKeyWaitsForItsSettlement(t *testing.T) {
	t.Parallel()
	b := setup(t, phases.Config{})
	require.NoError(t, b.register(shipmentFlow(
		phases.Foreign(phases.Started, func(context.Context, *phases.Run, *shipment) (string, error) {
			return "", phases.NeedsAttention("the courier lost the parcel")
		}, func(context.Context, db.Tx, *phases.Run, *shipment, string) (phases.Transition, error) {
			return phases.Next(), nil
		}),
		finish("shipped"),
	)))
	_, err := b.engine.Execute(context.Background(), b.request("k"))
	var parked *phases.NeedsAttentionError
	require.ErrorAs(t, err, &parked)
	require.EqualValues(t, 1, b.commits.parked.Load())

	_, err = b.engine.Execute(context.Background(), b.request("k"))
	require.ErrorAs(t, err, &parked, "never run again automatically")
	require.Equal(t, "the courier lost the parcel", parked.Reason)
	require.False(t, parked.Since.IsZero())

	var id int64
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT id FROM idempotency_keys`).Scan(&id))
	_, err = b.engine.Settle(context.Background(), id+1, nil)
	require.ErrorIs(t, err, phases.ErrNotAwaitingOperator)
	settled, err := b.engine.Settle(context.Background(), id, func(context.Context, db.Tx, *dbsqlc.IdempotencyKey) (*phases.Response, error) {
		return &phases.Response{Status: 410, Body: []byte(`{"lost":true}`)}, nil
	})
	require.NoError(t, err)
	res, err := b.engine.Execute(context.Background(), b.request("k"))
	require.NoError(t, err)
	require.True(t, res.Replayed)
	require.Equal(t, settled.Body, res.Response.Body)
}

func TestRegisterRefusesAFlowItCouldNotDrive(t *testing.T) {
	t.Parallel()
	b := setup(t, phases.Config{})
	flow := func(name string, steps ...step) phases.Flow[shipment] {
		return phases.Flow[shipment]{Name: name, Steps: steps}
	}
	for name, flow := range map[string]phases.Flow[shipment]{
		"bad name":       flow("Shipment!", finish(phases.Started)),
		"no steps":       flow("shipment"),
		"no start":       flow("shipment", finish("packed")),
		"finished step":  flow("shipment", logStep(phases.Started, "slot"), finish(phases.Finished)),
		"bare step":      flow("shipment", step{}),
		"bad point name": flow("shipment", logStep(phases.Started, "slot"), finish("Packed Up")),
		// The database's check on recovery points allows no digits.
		"digit in a point": flow("shipment", logStep(phases.Started, "slot"), finish("packed_v2")),
		"two steps at a point": flow("shipment", logStep(phases.Started, "slot"), logStep("packed", "box"),
			finish("packed")),
	} {
		require.Error(t, b.engine.Register(flow), name)
	}
	require.NoError(t, b.register(flow("shipment", finish(phases.Started))))
	require.ErrorContains(t, b.engine.Register(flow("shipment", finish(phases.Started))), "registered already")

	_, err := b.engine.Execute(context.Background(), &phases.Request{UserID: b.userID, Key: "x", Flow: "parcel"})
	require.ErrorIs(t, err, phases.ErrUnknownFlow)
}

// TestAResumedRunLoadsWhatEarlierRunsCommitted: a run that resumes a key
// past its first step starts from the flow's Load, so a later step reads
// what an earlier run's steps handed on.
func TestAResumedRunLoadsWhatEarlierRunsCommitted(t *testing.T) {
	t.Parallel()
	errCrash := errors.New("crash")
	var crashed atomic.Bool
	b := setup(t, phases.Config{LeaseTimeout: time.Hour, Hooks: phases.Hooks{
		AfterCommit: func(_ context.Context, at phases.RecoveryPoint) error {
			if at == "booked" && crashed.CompareAndSwap(false, true) {
				return errCrash
			}
			return nil
		}}})
	insurer := phases.Foreign("booked", func(context.Context, *phases.Run, *shipment) (string, error) {
		return "policy-1", nil
	}, func(ctx context.Context, tx db.Tx, run *phases.Run, _ *shipment, policy string) (phases.Transition, error) {
		_, err := tx.Exec(ctx, `INSERT INTO shipment_log VALUES ($1, 'insurer', $2)`, run.Key.ID, policy)
		return phases.Next(), err
	})
	require.NoError(t, b.register(shipmentFlow(
		b.callStep(phases.Started, "courier"),
		insurer,
		logStep("insured", "label"),
		finish("labelled"),
	)))
	_, err := b.engine.Execute(context.Background(), b.request("k"))
	require.ErrorIs(t, err, errCrash)

	res, err := b.later(2*time.Hour).Execute(context.Background(), b.request("k"))
	require.NoError(t, err)
	require.Equal(t, 201, res.Response.Status)
	var booking, label string
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT (SELECT note FROM shipment_log WHERE step = 'courier'), (SELECT note FROM shipment_log WHERE step = 'label')`).Scan(&booking, &label))
	require.NotEmpty(t, booking)
	require.Equal(t, booking, label, "the label step read the booking the first run's courier step made")
}

// TestAFlowThatEndsWithoutAnAnswerFails: a last step that goes on, or a
// finish with no response, is the flow's bug: the run fails and nothing of
// its transaction commits.
func TestAFlowThatEndsWithoutAnAnswerFails(t *testing.T) {
	t.Parallel()
	for name, last := range map[string]step{
		"goes on": logStep("slot_booked", "packed"),
		"finishes with nothing": phases.Local("slot_booked", func(context.Context, db.Tx, *phases.Run, *shipment) (phases.Transition, error) {
			return phases.FinishWith(nil), nil
		}),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, phases.Config{})
			require.NoError(t, b.register(shipmentFlow(logStep(phases.Started, "slot"), last)))
			_, err := b.engine.Execute(context.Background(), b.request("k"))
			require.Error(t, err)
			require.Empty(t, b.steps(t, "k"), "the reservation and its steps rolled back")
		})
	}
}
