package testutil

import (
	"os"
	"testing"
)

// PoolerURLVar names the environment variable that sends every test
// database's pool through a connection pooler: the URL of a PgBouncer in
// transaction pooling mode in front of TEST_DATABASE_URL's server
// (scripts/pgbouncer.sh run prints and sets one), whose database each test
// replaces with its own. The databases are still created, cloned and
// dropped over TEST_DATABASE_URL itself, directly, as a pooler cannot
// create or drop one; so are the migrations, which take a session-level
// lock, and the databases NewEmptyDB makes for the commands that migrate.
// TEST_QUERY_EXEC_MODE applies to it too; without it, the URL should carry
// default_query_exec_mode (the script's does).
const PoolerURLVar = "TEST_POOLER_URL"

// poolServerURL is the server a test database's pool connects to: the
// pooler of TEST_POOLER_URL when it is set, else admin.
func poolServerURL(t testing.TB, admin string) string {
	t.Helper()
	if url := os.Getenv(PoolerURLVar); url != "" {
		return withQueryExecMode(t, url)
	}
	return admin
}
