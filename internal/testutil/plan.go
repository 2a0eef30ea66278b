package testutil

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// GenericPlans prepares each of stmts (PREPARE statements) on conn with
// plan_cache_mode = force_generic_plan, so that EXECUTE plans them as a
// prepared statement's generic plan, which is what pgx's cached
// statements come to after a few runs.
func GenericPlans(t testing.TB, conn *pgxpool.Conn, stmts ...string) {
	t.Helper()
	for _, stmt := range append([]string{`SET plan_cache_mode = force_generic_plan`}, stmts...) {
		if _, err := conn.Exec(context.Background(), stmt); err != nil {
			t.Fatalf("error running %q: %v", stmt, err)
		}
	}
}

// Explain is the plan of query (EXECUTE name(args), say) on conn, as text.
func Explain(t testing.TB, conn *pgxpool.Conn, query string) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), "EXPLAIN "+query)
	if err != nil {
		t.Fatalf("error explaining %q: %v", query, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("error reading the plan of %q: %v", query, err)
	}
	return strings.Join(lines, "\n")
}
