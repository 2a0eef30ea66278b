package testutil

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// TEST_QUERY_EXEC_MODE goes into either form of URL, over what the URL
// says, and pgx reads it from there.
func TestQueryExecModeGoesIntoTheURL(t *testing.T) {
	t.Setenv(QueryExecModeVar, "simple_protocol")
	for _, raw := range []string{
		"postgres://u@127.0.0.1:5432/db?sslmode=disable&default_query_exec_mode=cache_statement",
		"host=127.0.0.1 user=u dbname=db default_query_exec_mode=cache_statement",
	} {
		cfg, err := pgxpool.ParseConfig(withQueryExecMode(t, raw))
		require.NoError(t, err)
		require.Equal(t, pgx.QueryExecModeSimpleProtocol, cfg.ConnConfig.DefaultQueryExecMode, raw)
		require.Equal(t, "db", cfg.ConnConfig.Database)
	}

	t.Setenv(QueryExecModeVar, "")
	raw := "postgres://u@127.0.0.1:5432/db"
	require.Equal(t, raw, withQueryExecMode(t, raw), "unset: the URL as it was")
}
