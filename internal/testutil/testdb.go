// Package testutil builds what the tests run against: a fresh, migrated
// Postgres database per test, the Stripe emulator, and the whole service
// over real HTTP. Tests never skip for want of Postgres: they fail.
package testutil

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/paymentsd/paymentsd/db/migrations"
	"github.com/paymentsd/paymentsd/internal/db"
)

// AdminURL is the Postgres server the tests use: TEST_DATABASE_URL, else
// DATABASE_URL. `make test` always sets one (starting a throwaway cluster
// when the environment has none). TEST_QUERY_EXEC_MODE, when set, goes
// into the URL (see withQueryExecMode), so every pool and every process a
// test opens from it runs in that mode.
func AdminURL(t testing.TB) string {
	for _, name := range []string{"TEST_DATABASE_URL", "DATABASE_URL"} {
		if url := os.Getenv(name); url != "" {
			return withQueryExecMode(t, url)
		}
	}
	t.Fatal("set TEST_DATABASE_URL or DATABASE_URL to a Postgres server the tests may create databases on (`make test` does)")
	return ""
}

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
	dbCounter    atomic.Int64
)

// NewEmptyDB creates a database with no schema at all, dropped when the test
// ends, and returns its URL: for tests of migrating and of refusing to serve
// an unmigrated database.
func NewEmptyDB(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	admin := AdminURL(t)
	name := fmt.Sprintf("paymentsd_empty_%d_%d", os.Getpid(), dbCounter.Add(1))
	conn := adminConn(t, admin)
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("error creating test database: %v", err)
	}
	t.Cleanup(func() {
		conn := adminConn(t, admin)
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	return urlWithDatabase(t, admin, name)
}

// urlWithDatabase returns url with its database replaced by name. pgx's
// ConnString returns the string a config was parsed from, so the URL is
// rewritten instead.
func urlWithDatabase(t testing.TB, raw, name string) string {
	t.Helper()
	if !strings.Contains(raw, "://") {
		return raw + " dbname=" + name // key=value form: the last setting wins
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("error parsing database URL: %v", err)
	}
	u.Path = "/" + name
	q := u.Query()
	q.Del("dbname")
	u.RawQuery = q.Encode()
	return u.String()
}

// NewDB returns a pool on a fresh database cloned from a migrated template,
// dropped when the test ends, through TEST_POOLER_URL's pooler when it is
// set. Each test owns its database, so tests that
// commit (as phases do) run in parallel without seeing each other.
func NewDB(t testing.TB) *db.Pool {
	t.Helper()
	return newDB(t, false, nil)
}

// NewDBInMode is NewDB with the pool sending its statements in mode, as a
// pool behind PgBouncer in transaction pooling mode must
// (pgx.QueryExecModeExec or pgx.QueryExecModeSimpleProtocol): whatever
// TEST_QUERY_EXEC_MODE or the URL says.
func NewDBInMode(t testing.TB, mode pgx.QueryExecMode) *db.Pool {
	t.Helper()
	return NewDBWith(t, func(cfg *pgxpool.Config) { cfg.ConnConfig.DefaultQueryExecMode = mode })
}

// NewDBWith is NewDB, with configure (when not nil) applied to the pool's
// configuration before the pool opens: a query exec mode, a tracer.
func NewDBWith(t testing.TB, configure func(*pgxpool.Config)) *db.Pool {
	t.Helper()
	return newDB(t, false, configure)
}

// NewDirectDBWith is NewDBWith connected to the server itself, never
// through TEST_POOLER_URL: for a test of what only a direct connection
// can do (LISTEN, pgx's cache_statement mode).
func NewDirectDBWith(t testing.TB, configure func(*pgxpool.Config)) *db.Pool {
	t.Helper()
	return newDB(t, true, configure)
}

// newDB is NewDB, direct or through TEST_POOLER_URL's pooler when it is
// set, with configure (when not nil) applied to the pool's configuration.
func newDB(t testing.TB, direct bool, configure func(*pgxpool.Config)) *db.Pool {
	t.Helper()
	ctx := context.Background()
	admin := AdminURL(t)
	templateOnce.Do(func() { templateName, templateErr = ensureTemplate(ctx, admin) })
	if templateErr != nil {
		t.Fatalf("error preparing template database: %v", templateErr)
	}

	name := fmt.Sprintf("paymentsd_test_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6, dbCounter.Add(1))
	conn := adminConn(t, admin)
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE "+templateName); err != nil {
		t.Fatalf("error creating test database: %v", err)
	}
	t.Cleanup(func() {
		conn := adminConn(t, admin)
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("error dropping test database: %v", err)
		}
	})

	server := admin
	if !direct {
		server = poolServerURL(t, admin)
	}
	cfg := PoolConfig(t, server, name)
	if configure != nil {
		configure(cfg)
	}
	pool, err := db.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("error connecting to test database: %v", err)
	}
	t.Cleanup(pool.Close)
	// A clone is a copy of one database: like a staging copy of production,
	// it must get a namespace of its own, or tests sharing an emulator would
	// send each other's Stripe keys.
	if _, err := pool.Exec(ctx, "UPDATE deployment SET namespace = gen_random_uuid()"); err != nil {
		t.Fatalf("error giving the test database its own namespace: %v", err)
	}
	return pool
}

// PoolConfig returns a pool configuration for database name on the server
// at url.
func PoolConfig(t testing.TB, url, name string) *pgxpool.Config {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("error parsing database URL: %v", err)
	}
	cfg.ConnConfig.Database = name
	return cfg
}

func adminConn(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatalf("error connecting to Postgres at TEST_DATABASE_URL/DATABASE_URL: %v", err)
	}
	return conn
}

// ensureTemplate creates, once per migration set, a database holding the
// migrated schema. Its name carries a hash of the migrations (see
// migrationsHash), so a changed migration gets a new template; an advisory
// lock keeps parallel test processes from building the same one twice.
func ensureTemplate(ctx context.Context, admin string) (string, error) {
	hash, err := migrationsHash(migrations.FS, migrations.Go, migrations.RiverSchemaVersion)
	if err != nil {
		return "", fmt.Errorf("error hashing migrations: %w", err)
	}
	name := "paymentsd_template_" + hash[:16]

	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(72830153)"); err != nil {
		return "", err
	}
	defer conn.Exec(ctx, "SELECT pg_advisory_unlock(72830153)") //nolint:errcheck

	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	building := name + "_building"
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+building); err != nil {
		return "", err
	}
	cfg, err := pgxpool.ParseConfig(admin)
	if err != nil {
		return "", err
	}
	cfg.ConnConfig.Database = building
	pool, err := db.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", err
	}
	err = db.MigrateUp(ctx, pool)
	pool.Close()
	if err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+building+" RENAME TO "+name); err != nil {
		return "", err
	}
	return name, nil
}

// ConnectConfig opens a pool for cfg, closed when the test ends.
func ConnectConfig(t testing.TB, cfg *pgxpool.Config) *db.Pool {
	t.Helper()
	pool, err := db.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("error connecting: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// migrationsHash is the hex SHA-256 of everything that decides the migrated
// schema: every file of the embedded SQL migrations (name and content), the
// versions of the Go migrations, and the River schema version that the Go
// migration pins together with River's own SQL up to that version. The Go
// migrations' code is not embedded, so a changed River pin (or a River
// upgrade that changes its migrations) would otherwise reuse a stale
// template.
func migrationsHash(fsys fs.FS, goMigrations []*goose.Migration, riverSchemaVersion int) (string, error) {
	h := sha256.New()
	// Each part is written with its length, so no two different sets of
	// parts hash the same.
	write := func(kind string, parts ...string) {
		fmt.Fprintf(h, "%s %d\n", kind, len(parts))
		for _, p := range parts {
			fmt.Fprintf(h, "%d:%s\n", len(p), p)
		}
	}
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		write("file", path, string(b))
		return nil
	})
	if err != nil {
		return "", err
	}

	versions := make([]int64, 0, len(goMigrations))
	for _, m := range goMigrations {
		versions = append(versions, m.Version)
	}
	slices.Sort(versions)
	for _, v := range versions {
		write("go migration", strconv.FormatInt(v, 10))
	}

	migrator, err := rivermigrate.New(riverpgxv5.New(nil), nil)
	if err != nil {
		return "", err
	}
	write("river schema version", strconv.Itoa(riverSchemaVersion))
	pinned := false
	for _, m := range migrator.AllVersions() {
		if m.Version > riverSchemaVersion {
			break
		}
		write("river migration", strconv.Itoa(m.Version), m.Name, m.SQLUp)
		pinned = pinned || m.Version == riverSchemaVersion
	}
	if !pinned {
		return "", fmt.Errorf("river has no schema version %d", riverSchemaVersion)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
