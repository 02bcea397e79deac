package catalog

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrationLockKey is the advisory lock that serialises migrations of one
// database ("worldbak" in ASCII).
const migrationLockKey int64 = 0x776f726c6462616b

var migrationName = regexp.MustCompile(`^(\d{4})_[a-z0-9_]+\.sql$`)

// migration is one embedded SQL file.
type migration struct {
	version string // file name without .sql, e.g. 0001_world_backups
	sql     string
}

// loadMigrations returns the embedded migrations in order.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, "migrations")
	if err != nil {
		return nil, fmt.Errorf("reading embedded migrations: %w", err)
	}
	var ms []migration
	seen := map[string]string{}
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration file %q is not named NNNN_name.sql", e.Name())
		}
		if prev, dup := seen[m[1]]; dup {
			return nil, fmt.Errorf("migrations %q and %q share number %s", prev, e.Name(), m[1])
		}
		seen[m[1]] = e.Name()
		b, err := fs.ReadFile(fsys, "migrations/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("reading migration %q: %w", e.Name(), err)
		}
		ms = append(ms, migration{version: strings.TrimSuffix(e.Name(), ".sql"), sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// Migrate applies the embedded migrations that the database has not seen,
// in order, and returns their versions (empty when it was up to date).
// Everything happens in one transaction holding an advisory lock, so a
// concurrent Migrate waits and then finds nothing to do, and a failing
// migration leaves the database as it was.
func (db *DB) Migrate(ctx context.Context) (applied []string, err error) {
	ctx, cancel := db.bound(ctx)
	defer cancel()
	return db.migrate(ctx, migrationFS)
}

// migrate applies the migrations found in fsys's migrations folder.
func (db *DB) migrate(ctx context.Context, fsys fs.FS) (applied []string, err error) {
	ms, err := loadMigrations(fsys)
	if err != nil {
		return nil, err
	}
	err = pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		applied = nil // BeginFunc does not retry, but keep fn self-contained
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLockKey); err != nil {
			return fmt.Errorf("taking the migration lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    text        PRIMARY KEY,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("creating schema_migrations: %w", err)
		}
		rows, _ := tx.Query(ctx, `SELECT version FROM schema_migrations`)
		done, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("reading schema_migrations: %w", err)
		}
		have := make(map[string]bool, len(done))
		for _, v := range done {
			have[v] = true
		}
		for _, m := range ms {
			if have[m.version] {
				continue
			}
			// No arguments: pgx uses the simple protocol, so a file may hold
			// several statements.
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("applying migration %s: %w", m.version, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, m.version); err != nil {
				return fmt.Errorf("recording migration %s: %w", m.version, err)
			}
			applied = append(applied, m.version)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("migrating the catalog: %w", err)
	}
	if len(applied) > 0 {
		db.log.Info("applied migrations", "versions", strings.Join(applied, ","))
	}
	return applied, nil
}
