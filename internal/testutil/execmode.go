package testutil

import (
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
)

// QueryExecModeVar names the environment variable that reruns the suite
// with every pool in one pgx query exec mode, as DATABASE_URL's
// default_query_exec_mode sets it: TEST_QUERY_EXEC_MODE=exec (or
// simple_protocol, cache_describe) is how paymentsd runs behind PgBouncer
// in transaction pooling mode, where no prepared statement outlives its
// transaction.
const QueryExecModeVar = "TEST_QUERY_EXEC_MODE"

// queryExecModes are the values pgx accepts for default_query_exec_mode.
var queryExecModes = []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"}

// withQueryExecMode returns raw with default_query_exec_mode set to
// TEST_QUERY_EXEC_MODE, or raw itself when that is unset.
func withQueryExecMode(t testing.TB, raw string) string {
	t.Helper()
	mode := os.Getenv(QueryExecModeVar)
	if mode == "" {
		return raw
	}
	if !slices.Contains(queryExecModes, mode) {
		t.Fatalf("%s=%q: want one of %s", QueryExecModeVar, mode, strings.Join(queryExecModes, ", "))
	}
	if !strings.Contains(raw, "://") {
		return raw + " default_query_exec_mode=" + mode // key=value form: the last setting wins
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("error parsing database URL: %v", err)
	}
	q := u.Query()
	q.Set("default_query_exec_mode", mode)
	u.RawQuery = q.Encode()
	return u.String()
}
