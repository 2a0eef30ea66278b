package testutil

import (
	"testing"
	"testing/fstest"

	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/db/migrations"
)

func TestMigrationsHash(t *testing.T) {
	t.Parallel()

	type inputs struct {
		fsys  fstest.MapFS
		goMig []*goose.Migration
		river int
	}
	goMigrations := func(versions ...int64) []*goose.Migration {
		var out []*goose.Migration
		for _, v := range versions {
			out = append(out, goose.NewGoMigration(v, nil, nil))
		}
		return out
	}
	base := func() inputs {
		return inputs{
			fsys: fstest.MapFS{
				"00001_users.sql":    {Data: []byte("CREATE TABLE users ();")},
				"00002_payments.sql": {Data: []byte("CREATE TABLE payments ();")},
			},
			goMig: goMigrations(3),
			river: 6,
		}
	}
	hash := func(t *testing.T, in inputs) string {
		t.Helper()
		h, err := migrationsHash(in.fsys, in.goMig, in.river)
		require.NoError(t, err)
		require.Len(t, h, 64)
		return h
	}
	baseHash := hash(t, base())

	t.Run("Stable", func(t *testing.T) {
		t.Parallel()
		in := base()
		require.Equal(t, baseHash, hash(t, in))
		in.goMig = goMigrations(3)
		require.Equal(t, baseHash, hash(t, in), "built afresh")
		in.goMig = append(goMigrations(7), goMigrations(3)...)
		other := base()
		other.goMig = goMigrations(3, 7)
		require.Equal(t, hash(t, other), hash(t, in), "the Go migrations' order does not count")
	})

	for _, tc := range []struct {
		name   string
		change func(in *inputs)
	}{
		{"SQLChanged", func(in *inputs) { in.fsys["00002_payments.sql"].Data = []byte("CREATE TABLE payments (id int);") }},
		{"SQLRenamed", func(in *inputs) {
			in.fsys["00003_payments.sql"] = in.fsys["00002_payments.sql"]
			delete(in.fsys, "00002_payments.sql")
		}},
		{"SQLAdded", func(in *inputs) { in.fsys["00004_refunds.sql"] = &fstest.MapFile{Data: []byte("SELECT 1;")} }},
		{"NameAndContentSplitElsewhere", func(in *inputs) {
			in.fsys = fstest.MapFS{
				"00001_users.sql":   {Data: []byte("CREATE TABLE users ();")},
				"00002_payments.sq": {Data: []byte("lCREATE TABLE payments ();")},
			}
		}},
		{"GoMigrationAdded", func(in *inputs) { in.goMig = goMigrations(3, 4) }},
		{"GoMigrationRenumbered", func(in *inputs) { in.goMig = goMigrations(4) }},
		{"RiverPinMoved", func(in *inputs) { in.river = 5 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := base() // its own files: base builds them afresh
			tc.change(&in)
			require.NotEqual(t, baseHash, hash(t, in))
		})
	}

	t.Run("UnknownRiverVersion", func(t *testing.T) {
		t.Parallel()
		in := base()
		_, err := migrationsHash(in.fsys, in.goMig, 100000)
		require.ErrorContains(t, err, "river has no schema version 100000")
	})

	// The template a test database is cloned from is named by this hash:
	// moving the River pin of db/migrations gets a new one.
	t.Run("RealMigrationsCoverTheRiverPin", func(t *testing.T) {
		t.Parallel()
		pinned, err := migrationsHash(migrations.FS, migrations.Go, migrations.RiverSchemaVersion)
		require.NoError(t, err)
		moved, err := migrationsHash(migrations.FS, migrations.Go, migrations.RiverSchemaVersion-1)
		require.NoError(t, err)
		require.NotEqual(t, pinned, moved)
		withoutGo, err := migrationsHash(migrations.FS, nil, migrations.RiverSchemaVersion)
		require.NoError(t, err)
		require.NotEqual(t, pinned, withoutGo)
	})
}
