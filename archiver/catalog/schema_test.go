package catalog

import (
	"net/url"
	"testing"
	"time"

	"github.com/worldbackup/worldbackup/internal/pgtest"
)

// TestSchemasSeparateCatalogs: two clusters that back up servers of the
// same names keep their catalogs apart in one database with a schema each
// (search_path in the database URL, as README's multi-cluster section
// says): each migrates its own tables, and a server's runs, its newest run
// and its packs are those of its own cluster.
func TestSchemasSeparateCatalogs(t *testing.T) {
	ctx := t.Context()
	base := pgtest.URL(t)
	admin := open(t, base)
	if _, err := admin.pool.Exec(ctx, `CREATE SCHEMA eu; CREATE SCHEMA us`); err != nil {
		t.Fatal(err)
	}
	inSchema := func(schema string) *DB {
		t.Helper()
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		db := open(t, u.String())
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatalf("Migrate in schema %s: %v", schema, err)
		}
		return db
	}
	eu, us := inSchema("eu"), inSchema("us")
	now := time.Now().UTC().Truncate(time.Second)
	for _, c := range []struct {
		db  *DB
		run string
		at  time.Time
	}{{eu, "eu.survival.r1", now.Add(-time.Hour)}, {us, "us.survival.r1", now}} {
		if ok, err := c.db.Insert(ctx, record(c.run, "survival", c.at)); err != nil || !ok {
			t.Fatalf("Insert %s: %v, %v", c.run, ok, err)
		}
	}
	for name, c := range map[string]struct {
		db   *DB
		want string
	}{"eu": {eu, "eu.survival.r1"}, "us": {us, "us.survival.r1"}} {
		t.Run(name, func(t *testing.T) {
			runs, err := c.db.List(ctx, "survival")
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != 1 || runs[0].RunID != c.want {
				t.Errorf("List(survival) = %d runs %v, want only %s", len(runs), runs, c.want)
			}
		})
	}
	var tables int
	if err := admin.pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables
		WHERE table_schema = 'public' AND table_name IN ('world_backups', 'schema_migrations')`).Scan(&tables); err != nil || tables != 0 {
		t.Errorf("public holds %d of the catalog's tables (err %v), want none: each schema has its own", tables, err)
	}
}
