package db_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/db"
)

func TestSequenceFloor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		timeline, floor int64
	}{{0, 0}, {1, 0}, {2, 1 << 40}, {3, 2 << 40}, {8192, 8191 << 40}} {
		require.Equal(t, tc.floor, db.SequenceFloor(tc.timeline), "timeline %d", tc.timeline)
	}
}

// conn is a connection of its own on the bundle's database, as the pool's
// AfterConnect gets one.
func (b *testBundle) conn(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.ConnectConfig(context.Background(), b.pool.Driver().Config().ConnConfig.Copy())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func (b *testBundle) nextval(t *testing.T, seq string) int64 {
	t.Helper()
	var v int64
	require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT nextval($1::regclass)", seq).Scan(&v))
	return v
}

// Defect: after a failover to an asynchronous standby lost the last commits,
// the new primary handed their payment ids out again, and a client's refund
// of its lost payment refunded another client's. Now ids on a new timeline
// start past all the old one could have handed out.
func TestSkipSequencesMovesEverySequencePastTheFloorOnce(t *testing.T) {
	t.Parallel()
	b, ctx := setup(t)
	first := b.nextval(t, "payments_id_seq")
	const floor = int64(3) << 40

	var wg sync.WaitGroup
	for range 4 {
		conn := b.conn(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			require.NoError(t, db.SkipSequences(ctx, conn, floor))
		}()
	}
	wg.Wait()
	for _, seq := range []string{"payments_id_seq", "refunds_id_seq", "idempotency_keys_id_seq", "users_id_seq"} {
		require.Equal(t, floor+1, b.nextval(t, seq), seq)
	}
	require.Less(t, first, floor)

	// Again, or with a lower floor: nothing moves back.
	require.NoError(t, db.SkipSequences(ctx, b.conn(t), floor))
	require.NoError(t, db.SkipSequences(ctx, b.conn(t), 1<<40))
	require.Equal(t, floor+2, b.nextval(t, "payments_id_seq"))
}

func TestFollowTimelineKeepsIDsAboveTheServersTimelineFloor(t *testing.T) {
	t.Parallel()
	b, ctx := setup(t)
	conn := b.conn(t)
	var walFile string
	require.NoError(t, conn.QueryRow(ctx, "SELECT pg_walfile_name(pg_current_wal_lsn())").Scan(&walFile))
	timeline, err := strconv.ParseInt(walFile[:8], 16, 64)
	require.NoError(t, err)

	require.NoError(t, db.FollowTimeline(ctx, conn))
	require.Greater(t, b.nextval(t, "payments_id_seq"), db.SequenceFloor(timeline))
}

func TestParseConfigFollowsTheTimelineAndBoundsEachHost(t *testing.T) {
	t.Parallel()
	cfg, err := db.ParseConfig("postgres://u@h1:5432,h2:5433/d?target_session_attrs=read-write")
	require.NoError(t, err)
	require.NotNil(t, cfg.AfterConnect)
	require.Equal(t, db.DefaultConnectTimeout, cfg.ConnConfig.ConnectTimeout)
	require.EqualValues(t, db.DefaultMaxConns, cfg.MaxConns)
	hosts := []string{cfg.ConnConfig.Host}
	for _, fb := range cfg.ConnConfig.Fallbacks {
		hosts = append(hosts, fb.Host)
	}
	require.Contains(t, hosts, "h2", "both hosts are tried")
	require.NotNil(t, cfg.ConnConfig.ValidateConnect, "only a host that accepts writes is kept")

	cfg, err = db.ParseConfig("postgres://u@h1/d?connect_timeout=2&pool_max_conns=3")
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, cfg.ConnConfig.ConnectTimeout)
	require.EqualValues(t, 3, cfg.MaxConns)
}
