package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestHealth covers /healthz and /readyz.
func TestHealth(t *testing.T) {
	t.Parallel()

	// Health needs no user: the bundle is empty.
	type testBundle struct{}

	setupWith := func(t *testing.T, opts testutil.ServiceOptions) (*testutil.Service, *testBundle) {
		t.Helper()
		return testutil.StartService(t, opts), &testBundle{}
	}

	setup := func(t *testing.T) (*testutil.Service, *testBundle) {
		t.Helper()
		return setupWith(t, testutil.ServiceOptions{})
	}

	t.Run("ReadyzFailsWhenMigrationsAreBehind", func(t *testing.T) {
		t.Parallel()
		svc, _ := setup(t)
		require.Equal(t, http.StatusOK, svc.Do(t, http.MethodGet, "/readyz", "").Status)

		_, err := svc.Pool.Exec(context.Background(),
			"DELETE FROM goose_db_version WHERE version_id = (SELECT max(version_id) FROM goose_db_version)")
		require.NoError(t, err)
		resp := svc.Do(t, http.MethodGet, "/readyz", "")
		requireProblem(t, resp, http.StatusServiceUnavailable, "migrations-pending")
		require.Equal(t, http.StatusOK, svc.Do(t, http.MethodGet, "/healthz", "").Status)
	})

	// /readyz answers 503 while the instance's heartbeats cannot commit: a read
	// alone would not see a commit that never finishes.
	t.Run("ReadyzSaysSoWhenCommitsStall", func(t *testing.T) {
		t.Parallel()
		svc, _ := setupWith(t, testutil.ServiceOptions{HeartbeatInterval: 100 * time.Millisecond})
		ready := func() int { return svc.Do(t, http.MethodGet, "/readyz", "").Status }
		require.Equal(t, http.StatusOK, ready())

		ctx := context.Background()
		stall, err := svc.Pool.Driver().Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = stall.Rollback(ctx) }()
		_, err = stall.Exec(ctx, "SELECT 1 FROM instances FOR UPDATE")
		require.NoError(t, err)
		require.Eventually(t, func() bool { return ready() == http.StatusServiceUnavailable }, 5*time.Second, 50*time.Millisecond)
		requireProblem(t, svc.Do(t, http.MethodGet, "/readyz", ""), http.StatusServiceUnavailable, "store-unavailable")

		require.NoError(t, stall.Rollback(ctx))
		require.Eventually(t, func() bool { return ready() == http.StatusOK }, 5*time.Second, 50*time.Millisecond)
	})
}
