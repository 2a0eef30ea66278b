package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/cli"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	// Bounded, so a serve that should have refused stops instead of hanging.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code := cli.Run(ctx, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// The CLI reads DATABASE_URL from the environment, so these tests set it and
// cannot run in parallel with each other.
func TestMigrateUsersAndServeRefusal(t *testing.T) {
	url := testutil.NewEmptyDB(t)
	require.Contains(t, url, "paymentsd_empty_")
	t.Setenv("DATABASE_URL", url)
	t.Setenv("STRIPE_API_BASE", "http://127.0.0.1:1")
	t.Setenv("PAYMENTSD_ADDR", "127.0.0.1:0")

	code, _, stderr := run(t, "serve")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "pending migrations")

	code, stdout, _ := run(t, "migrate", "status")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "pending")

	code, stdout, stderr = run(t, "migrate")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "00001_users.sql")

	code, stdout, _ = run(t, "migrate", "status")
	require.Equal(t, 0, code)
	require.NotContains(t, stdout, "pending")

	code, stdout, stderr = run(t, "users", "create", "--email", "ada@example.com")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, 1, strings.Count(stdout, "\n"), "exactly one JSON line")
	var user struct {
		UserID int64  `json:"user_id"`
		Email  string `json:"email"`
		APIKey string `json:"api_key"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &user))
	require.Equal(t, "ada@example.com", user.Email)
	require.NotZero(t, user.UserID)
	require.True(t, strings.HasPrefix(user.APIKey, "pd_"))
	require.NotContains(t, stderr, user.APIKey, "the key is printed once, to stdout only")

	code, _, stderr = run(t, "users", "create", "--email", "ada@example.com")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "exists already")

	code, _, _ = run(t, "bogus")
	require.Equal(t, 2, code)
}
