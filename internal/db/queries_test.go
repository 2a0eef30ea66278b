package db_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestEveryQueryPrepares asks Postgres to prepare each statement sqlc
// generated, on the migrated schema, as pgx does before its first run:
// a statement Postgres refuses to plan fails here rather than in the
// test of whatever path first sends it. For example, a parameter that one
// place makes a domain (00035) and another its base type is refused at
// prepare time ("inconsistent types deduced for parameter").
func TestEveryQueryPrepares(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testutil.NewDB(t)
	conn, err := pool.Driver().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()

	statements := generatedStatements(t)
	prepared := 0
	for name, sql := range statements {
		_, err = conn.Conn().Prepare(ctx, "", sql)
		require.NoError(t, err, "%s", name)
		prepared++
	}
	require.GreaterOrEqual(t, prepared, 79, "the queries in dbsqlc (79 when this was written)")
}

// generatedStatements is every statement sqlc generated in dbsqlc, by the
// name of its constant (the query's name, its first letter lower-cased).
func generatedStatements(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("dbsqlc/*.sql.go")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	statements := map[string]string{}
	for _, file := range files {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		require.NoError(t, err)
		// sqlc writes each statement as a string constant named for its
		// query.
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok || len(spec.Values) != 1 {
				return true
			}
			lit, ok := spec.Values[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			sql, err := strconv.Unquote(lit.Value)
			require.NoError(t, err)
			statements[spec.Names[0].Name] = sql
			return true
		})
	}
	return statements
}
