package db_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// maxTxAttempts is how often WithTx runs a body before giving up on
// serialization failures and deadlocks (db.maxTxAttempts).
const maxTxAttempts = 5

type testBundle struct {
	pool *db.Pool
}

// setup gives the test its own migrated database: WithTx commits.
func setup(t *testing.T) (*testBundle, context.Context) {
	t.Helper()
	return &testBundle{pool: testutil.NewDB(t)}, context.Background()
}

func (b *testBundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := b.pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

// insertUser inserts a user through the sqlc query the service uses.
func insertUser(ctx context.Context, q dbsqlc.DBTX, email, apiKey string) error {
	hash := sha256.Sum256([]byte(apiKey))
	_, err := dbsqlc.New().UserInsert(ctx, q, &dbsqlc.UserInsertParams{Email: email, ApiKeyHash: hash[:]})
	return err
}

// raise has the server fail a statement with SQLSTATE code.
func raise(ctx context.Context, q dbsqlc.DBTX, code string) error {
	_, err := q.Exec(ctx, "DO $$ BEGIN RAISE EXCEPTION 'raised for a test' USING ERRCODE = '"+code+"'; END $$")
	return err
}

// sqlState is err's SQLSTATE, or "" when it has none.
func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// closedPortConfig is a pool configuration for a server that is not there:
// a loopback port nothing listens on.
func closedPortConfig(t *testing.T, pool *db.Pool) *pgxpool.Config {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	cfg := pool.Driver().Config().Copy()
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", uint16(port)
	cfg.ConnConfig.Fallbacks = nil // sslmode=prefer would fall back to the real server
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	return cfg
}

func TestInterpretError(t *testing.T) {
	t.Parallel()

	t.Run("NoRowsIsNotFound", func(t *testing.T) {
		t.Parallel()
		b, ctx := setup(t)
		hash := sha256.Sum256([]byte("nobody"))
		_, err := dbsqlc.New().UserGetByAPIKeyHash(ctx, b.pool.Driver(), hash[:])
		require.ErrorIs(t, err, pgx.ErrNoRows)
		require.Equal(t, db.ErrNotFound, db.InterpretError(err))
		require.Equal(t, db.ErrNotFound, db.InterpretError(fmt.Errorf("error loading user: %w", err)))
	})

	t.Run("Nil", func(t *testing.T) {
		t.Parallel()
		require.NoError(t, db.InterpretError(nil))
	})

	t.Run("StatementErrorsPassThrough", func(t *testing.T) {
		t.Parallel()
		b, ctx := setup(t)
		require.NoError(t, insertUser(ctx, b.pool, "a@example.com", "key-a"))
		err := insertUser(ctx, b.pool, "a@example.com", "key-b")
		require.Error(t, err)
		require.Equal(t, err, db.InterpretError(err), "unchanged")
		require.NotErrorIs(t, db.InterpretError(err), db.ErrUnavailable)
		require.NotErrorIs(t, db.InterpretError(err), db.ErrNotFound)
	})

	t.Run("UnreachableStoreIsUnavailable", func(t *testing.T) {
		t.Parallel()
		b, ctx := setup(t)
		_, err := db.ConnectConfig(ctx, closedPortConfig(t, b.pool))
		require.Error(t, err)
		interpreted := db.InterpretError(err)
		require.ErrorIs(t, interpreted, db.ErrUnavailable)
		require.ErrorIs(t, interpreted, err, "the cause is kept")
		var connectErr *pgconn.ConnectError
		require.ErrorAs(t, interpreted, &connectErr)
	})
}

// TestTheEdgeTranslatesEveryQuery: a query run on the pool or on a
// transaction through the edge answers with the edge's errors, whichever
// way pgx reports them (a one-row Scan, a many-row Err, an Exec).
func TestTheEdgeTranslatesEveryQuery(t *testing.T) {
	t.Parallel()
	b, ctx := setup(t)
	hash := sha256.Sum256([]byte("nobody"))
	_, err := dbsqlc.New().UserGetByAPIKeyHash(ctx, b.pool, hash[:])
	require.Same(t, db.ErrNotFound, err, "on the pool")
	require.NoError(t, db.WithTx(ctx, b.pool, func(ctx context.Context, tx db.Tx) error {
		_, err := dbsqlc.New().UserGetByAPIKeyHash(ctx, tx, hash[:])
		require.Same(t, db.ErrNotFound, err, "in a transaction")
		return nil
	}))

	// A connection the server ends is unavailable, on Exec and on a
	// many-row query alike.
	var pid int
	err = db.WithTx(ctx, b.pool, func(ctx context.Context, tx db.Tx) error {
		require.NoError(t, tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))
		_, err := b.pool.Exec(ctx, "SELECT pg_terminate_backend($1)", pid)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, "SELECT 1")
		return err
	})
	require.ErrorIs(t, err, db.ErrUnavailable)
}

func TestIsUniqueViolation(t *testing.T) {
	t.Parallel()
	b, ctx := setup(t)
	require.NoError(t, insertUser(ctx, b.pool, "a@example.com", "key-a"))

	t.Run("MatchesTheViolatedConstraint", func(t *testing.T) {
		t.Parallel()
		err := insertUser(ctx, b.pool, "a@example.com", "key-b")
		require.True(t, db.IsUniqueViolation(err, "users_email_key"))
		require.True(t, db.IsUniqueViolation(fmt.Errorf("error creating user: %w", err), "users_email_key"), "wrapped")
		require.False(t, db.IsUniqueViolation(err, "users_api_key_hash_key"), "another constraint")

		err = insertUser(ctx, b.pool, "b@example.com", "key-a")
		require.True(t, db.IsUniqueViolation(err, "users_api_key_hash_key"))
		require.False(t, db.IsUniqueViolation(err, "users_email_key"))
	})

	t.Run("NothingElse", func(t *testing.T) {
		t.Parallel()
		err := insertUser(ctx, b.pool, "c", "key-c") // violates the email's CHECK
		require.Equal(t, "23514", sqlState(err))
		require.False(t, db.IsUniqueViolation(err, "users_email_key"))
		// The code alone, raised without a constraint, is not enough.
		err = raise(ctx, b.pool, "23505")
		require.Equal(t, "23505", sqlState(err))
		require.False(t, db.IsUniqueViolation(err, "users_email_key"))
		require.False(t, db.IsUniqueViolation(nil, "users_email_key"))
	})
}

func TestIsUnavailable(t *testing.T) {
	t.Parallel()

	t.Run("ClosedPort", func(t *testing.T) {
		t.Parallel()
		b, ctx := setup(t)
		_, err := db.ConnectConfig(ctx, closedPortConfig(t, b.pool))
		require.Error(t, err)
		require.True(t, db.IsUnavailable(err), "%v", err)
	})

	t.Run("ConnectionTerminatedByTheServer", func(t *testing.T) {
		t.Parallel()
		// The pid of a client's connection names its server connection
		// only without a pooler (TEST_POOLER_URL) between them.
		b, ctx := &testBundle{pool: testutil.NewDirectDBWith(t, nil)}, context.Background()
		conn, err := b.pool.Driver().Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		var pid uint32
		require.NoError(t, conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))
		var terminated bool
		// With a timeout, pg_terminate_backend returns once the backend is gone.
		require.NoError(t, b.pool.QueryRow(ctx, "SELECT pg_terminate_backend($1, 10000)", pid).Scan(&terminated))
		require.True(t, terminated)

		_, err = conn.Exec(ctx, "SELECT 1")
		require.Error(t, err)
		require.True(t, db.IsUnavailable(err), "%v", err)
		require.ErrorIs(t, db.InterpretError(err), db.ErrUnavailable)
	})

	t.Run("QueryTimedOut", func(t *testing.T) {
		t.Parallel()
		b, ctx := setup(t)
		ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		_, err := b.pool.Exec(ctx, "SELECT pg_sleep(10)")
		require.Error(t, err)
		require.True(t, db.IsUnavailable(err), "%v", err)
	})

	t.Run("ServerCodes", func(t *testing.T) {
		t.Parallel()
		b, ctx := setup(t)
		for code, unavailable := range map[string]bool{
			"08000": true, // connection exception
			"08006": true, // connection failure
			"57P01": true, // admin shutdown
			"57P02": true, // crash shutdown
			"57P03": true, // cannot connect now
			"53300": true, // too many connections
			"25006": true, // read-only transaction: a standby, or a primary being demoted
			"23505": false,
			"40001": false,
			"40P01": false,
			"42P01": false,
			"53100": false, // disk full: the statement failed, not the store
			"57014": false, // query canceled
		} {
			err := raise(ctx, b.pool, code)
			require.Equal(t, code, sqlState(err))
			require.Equal(t, unavailable, db.IsUnavailable(err), code)
			require.Equal(t, unavailable, db.IsUnavailable(fmt.Errorf("wrapped: %w", err)), code)
		}
	})

	t.Run("SentinelAndNil", func(t *testing.T) {
		t.Parallel()
		require.True(t, db.IsUnavailable(db.ErrUnavailable))
		require.True(t, db.IsUnavailable(fmt.Errorf("error loading: %w", db.ErrUnavailable)))
		require.False(t, db.IsUnavailable(errors.New("something else")))
		require.False(t, db.IsUnavailable(nil))
	})
}

func TestWithTx(t *testing.T) {
	t.Parallel()

	// setupCounter adds a table of counters with rows 1 and 2 at zero.
	setupCounter := func(t *testing.T) (*testBundle, context.Context) {
		t.Helper()
		b, ctx := setup(t)
		b.exec(t, "CREATE TABLE counter (id int PRIMARY KEY, n int NOT NULL DEFAULT 0, touched int NOT NULL DEFAULT 0)")
		b.exec(t, "INSERT INTO counter (id) VALUES (1), (2)")
		return b, ctx
	}
	counter := func(t *testing.T, b *testBundle, column string, id int) int {
		t.Helper()
		var n int
		require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT "+column+" FROM counter WHERE id = $1", id).Scan(&n))
		return n
	}
	bump := func(ctx context.Context, tx db.Tx, id int) error {
		_, err := tx.Exec(ctx, "UPDATE counter SET n = n + 1 WHERE id = $1", id)
		return err
	}

	t.Run("CommitsAndReturnsTheValue", func(t *testing.T) {
		t.Parallel()
		b, ctx := setupCounter(t)
		n, err := db.WithTxV(ctx, b.pool, func(ctx context.Context, tx db.Tx) (int, error) {
			var n int
			err := tx.QueryRow(ctx, "UPDATE counter SET n = n + 1 WHERE id = 1 RETURNING n").Scan(&n)
			return n, err
		})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, 1, counter(t, b, "n", 1))
	})

	t.Run("RollsBackOnError", func(t *testing.T) {
		t.Parallel()
		b, ctx := setupCounter(t)
		errBody := errors.New("body failed")
		var attempts int
		err := db.WithTx(ctx, b.pool, func(ctx context.Context, tx db.Tx) error {
			attempts++
			require.NoError(t, bump(ctx, tx, 1))
			return errBody
		})
		require.ErrorIs(t, err, errBody)
		require.Equal(t, 1, attempts, "not retried")
		require.Zero(t, counter(t, b, "n", 1))
	})

	// A REPEATABLE READ body whose row another transaction updates after its
	// snapshot fails with 40001: WithTx runs it again, from a fresh
	// transaction, until it commits.
	t.Run("RetriesASerializationFailure", func(t *testing.T) {
		t.Parallel()
		b, ctx := setupCounter(t)
		var (
			attempts int
			failures []string
		)
		err := db.WithTx(ctx, b.pool, func(ctx context.Context, tx db.Tx) error {
			attempts++
			if _, err := tx.Exec(ctx, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
				return err
			}
			var n int
			if err := tx.QueryRow(ctx, "SELECT n FROM counter WHERE id = 1").Scan(&n); err != nil {
				return err // the snapshot is taken
			}
			if attempts <= 2 {
				// Another connection changes the row and commits.
				if _, err := b.pool.Exec(ctx, "UPDATE counter SET touched = touched + 1 WHERE id = 1"); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, "UPDATE counter SET n = $1 WHERE id = 1", n+1); err != nil {
				failures = append(failures, sqlState(err))
				return fmt.Errorf("error bumping the counter: %w", err) // wrapped, still retried
			}
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, 3, attempts)
		require.Equal(t, []string{"40001", "40001"}, failures)
		require.Equal(t, 1, counter(t, b, "n", 1), "the failed attempts wrote nothing")
		require.Equal(t, 2, counter(t, b, "touched", 1))
	})

	// Two bodies lock rows 1 and 2 in opposite orders: Postgres aborts one
	// with 40P01, WithTx runs it again, and both commit.
	t.Run("RetriesADeadlock", func(t *testing.T) {
		t.Parallel()
		b, ctx := setupCounter(t)
		var (
			attemptsA, attemptsB atomic.Int32
			pidA                 atomic.Uint32
			aHolds1, bHolds2     = make(chan struct{}), make(chan struct{})
			aWaits               = make(chan struct{})
			mu                   sync.Mutex
			failures             []string
		)
		failed := func(err error) error {
			mu.Lock()
			defer mu.Unlock()
			failures = append(failures, sqlState(err))
			return err
		}
		a := testutil.Go(t, func(testing.TB) error {
			return db.WithTx(ctx, b.pool, func(ctx context.Context, tx db.Tx) error {
				if err := bump(ctx, tx, 1); err != nil {
					return failed(err)
				}
				if attemptsA.Add(1) == 1 {
					var pid uint32
					if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
						return err
					}
					pidA.Store(pid)
					close(aHolds1)
					<-bHolds2
				}
				if err := bump(ctx, tx, 2); err != nil {
					return failed(err)
				}
				return nil
			})
		})
		bDone := testutil.Go(t, func(testing.TB) error {
			return db.WithTx(ctx, b.pool, func(ctx context.Context, tx db.Tx) error {
				if attemptsB.Add(1) == 1 {
					<-aHolds1
					if err := bump(ctx, tx, 2); err != nil {
						return failed(err)
					}
					close(bHolds2)
					<-aWaits
				} else if err := bump(ctx, tx, 2); err != nil {
					return failed(err)
				}
				if err := bump(ctx, tx, 1); err != nil {
					return failed(err)
				}
				return nil
			})
		})
		// B takes row 1 only once A waits for row 2, so the two deadlock.
		<-bHolds2
		testutil.WaitFor(t, 10*time.Second, 5*time.Millisecond, func() bool {
			var waiting bool
			require.NoError(t, b.pool.QueryRow(ctx,
				"SELECT coalesce(bool_or(wait_event_type = 'Lock'), false) FROM pg_stat_activity WHERE pid = $1",
				pidA.Load()).Scan(&waiting))
			return waiting
		})
		close(aWaits)

		require.NoError(t, a())
		require.NoError(t, bDone())
		// Usually one deadlock. On a loaded machine the victim's retry can
		// take row 1 back before the survivor, woken, does, and deadlock
		// again: each failure must be a deadlock, run again once.
		require.NotEmpty(t, failures)
		for _, code := range failures {
			require.Equal(t, "40P01", code, "failures: %v", failures)
		}
		require.EqualValues(t, 2+len(failures), attemptsA.Load()+attemptsB.Load(), "each deadlock's victim ran again")
		require.Equal(t, 2, counter(t, b, "n", 1))
		require.Equal(t, 2, counter(t, b, "n", 2))
	})

	t.Run("GivesUpAfterMaxAttempts", func(t *testing.T) {
		t.Parallel()
		for _, code := range []string{"40001", "40P01"} {
			b, ctx := setupCounter(t)
			var attempts int
			err := db.WithTx(ctx, b.pool, func(ctx context.Context, tx db.Tx) error {
				attempts++
				if err := bump(ctx, tx, 1); err != nil {
					return err
				}
				return raise(ctx, tx, code)
			})
			require.Equal(t, code, sqlState(err))
			require.Equal(t, maxTxAttempts, attempts, code)
			require.Zero(t, counter(t, b, "n", 1), code)
		}
	})

	t.Run("DoesNotRetryOtherErrors", func(t *testing.T) {
		t.Parallel()
		b, ctx := setupCounter(t)
		require.NoError(t, insertUser(ctx, b.pool, "a@example.com", "key-a"))
		var attempts int
		err := db.WithTx(ctx, b.pool, func(ctx context.Context, tx db.Tx) error {
			attempts++
			return insertUser(ctx, tx, "a@example.com", "key-"+strconv.Itoa(attempts))
		})
		require.True(t, db.IsUniqueViolation(err, "users_email_key"), "%v", err)
		require.Equal(t, 1, attempts)
	})

	t.Run("StopsRetryingWhenTheContextEnds", func(t *testing.T) {
		t.Parallel()
		b, ctx := setupCounter(t)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var attempts int
		err := db.WithTx(ctx, b.pool, func(ctx context.Context, tx db.Tx) error {
			attempts++
			err := raise(ctx, tx, "40001")
			cancel()
			return err
		})
		require.Error(t, err)
		require.Equal(t, 1, attempts)
	})
}
