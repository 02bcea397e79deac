package catalog

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/worldbackup/worldbackup/internal/pgtest"
)

// retiredNames returns the names RetiredServers gives, sorted.
func retiredNames(t *testing.T, db *DB) []string {
	t.Helper()
	r, err := db.RetiredServers(t.Context())
	if err != nil {
		t.Fatalf("RetiredServers: %v", err)
	}
	return slices.Sorted(maps.Keys(r))
}

// TestRetire: a retirement holds until the server records a run or a
// failed attempt (by row id, whatever their clocks say), retiring again
// starts a new one, Unretire ends it, and a server without any row is
// refused.
func TestRetire(t *testing.T) {
	db := migrated(t)
	ctx := t.Context()
	now := time.Now()
	for i, server := range []string{"lobby", "survival", "lobby"} {
		if _, err := db.Insert(ctx, record(fmt.Sprintf("r-%d", i), server, now.Add(-time.Duration(10-i)*time.Hour))); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.RecordFailure(ctx, Failure{RunID: "f-1", Server: "lobby", StartedAt: now.Add(-time.Hour),
		FinishedAt: now.Add(-time.Hour), Reason: "disk full"}); err != nil {
		t.Fatal(err)
	}
	fail := func(t *testing.T, runID, server string, finished time.Time) {
		t.Helper()
		if err := db.RecordFailure(ctx, Failure{RunID: runID, Server: server, StartedAt: finished, FinishedAt: finished, Reason: "x"}); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := db.Retire(ctx, "creative"); !errors.Is(err, ErrUnknownServer) {
		t.Fatalf("Retire of a server without rows: %v, want ErrUnknownServer", err)
	}
	r, err := db.Retire(ctx, "lobby")
	if err != nil || r.Runs != 2 || r.Failures != 1 || r.Server != "lobby" || time.Since(r.RetiredAt) > time.Minute {
		t.Fatalf("Retire(lobby) = %+v, %v; want 2 runs, 1 failure, retired now", r, err)
	}
	if got := retiredNames(t, db); !slices.Equal(got, []string{"lobby"}) {
		t.Fatalf("retired %v, want [lobby]", got)
	}

	t.Run("the overview leaves out what it is told to", func(t *testing.T) {
		os, err := db.Overview(ctx, now, 5, 5, []string{"lobby"})
		if err != nil || len(os) != 1 || os[0].Server != "survival" {
			t.Fatalf("Overview leaving out lobby = %+v, %v; want survival only", os, err)
		}
		if os, err := db.Overview(ctx, now, 5, 5, nil); err != nil || len(os) != 2 {
			t.Fatalf("Overview = %+v, %v; want lobby and survival", os, err)
		}
	})
	t.Run("a failed attempt recorded later brings it back, whatever its clock", func(t *testing.T) {
		fail(t, "f-2", "lobby", now.Add(-48*time.Hour))
		if got := retiredNames(t, db); len(got) != 0 {
			t.Fatalf("retired %v after a new failed attempt, want none", got)
		}
	})
	t.Run("retiring again holds again", func(t *testing.T) {
		if _, err := db.Retire(ctx, "lobby"); err != nil {
			t.Fatal(err)
		}
		if got := retiredNames(t, db); !slices.Equal(got, []string{"lobby"}) {
			t.Fatalf("retired %v, want [lobby]", got)
		}
	})
	t.Run("another server's rows change nothing", func(t *testing.T) {
		fail(t, "f-3", "survival", now)
		if _, err := db.Insert(ctx, record("s-new", "survival", now)); err != nil {
			t.Fatal(err)
		}
		if got := retiredNames(t, db); !slices.Equal(got, []string{"lobby"}) {
			t.Fatalf("retired %v, want [lobby]", got)
		}
	})
	t.Run("a run recorded later brings it back", func(t *testing.T) {
		if _, err := db.Insert(ctx, record("l-new", "lobby", now.Add(-72*time.Hour))); err != nil {
			t.Fatal(err)
		}
		if got := retiredNames(t, db); len(got) != 0 {
			t.Fatalf("retired %v after a new run, want none", got)
		}
	})
	t.Run("unretire", func(t *testing.T) {
		if was, err := db.Unretire(ctx, "lobby"); err != nil || was {
			t.Fatalf("Unretire of a server that is back = %v, %v; want false", was, err)
		}
		if _, err := db.Retire(ctx, "survival"); err != nil {
			t.Fatal(err)
		}
		if was, err := db.Unretire(ctx, "survival"); err != nil || !was {
			t.Fatalf("Unretire(survival) = %v, %v; want true", was, err)
		}
		if got := retiredNames(t, db); len(got) != 0 {
			t.Fatalf("retired %v after Unretire, want none", got)
		}
		if was, err := db.Unretire(ctx, "creative"); err != nil || was {
			t.Fatalf("Unretire of an unknown server = %v, %v; want false, nil", was, err)
		}
	})
}

// TestRetiredServersOlderCatalogs: a catalog not migrated to
// world_retired_servers has no retired server; a role that may not read the
// table (an exporter's, granted before it existed) gets ErrNotPermitted.
func TestRetiredServersOlderCatalogs(t *testing.T) {
	t.Run("not migrated", func(t *testing.T) {
		db := open(t, pgtest.URL(t))
		older := fstest.MapFS{}
		err := fs.WalkDir(migrationFS, "migrations", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.Contains(p, "world_retired_servers") {
				return err
			}
			b, err := fs.ReadFile(migrationFS, p)
			older[p] = &fstest.MapFile{Data: b}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.migrate(t.Context(), older); err != nil {
			t.Fatal(err)
		}
		if got, err := db.RetiredServers(t.Context()); err != nil || len(got) != 0 {
			t.Fatalf("RetiredServers on a catalog without the table = %v, %v; want none, nil", got, err)
		}
	})
	t.Run("a role without SELECT on it", func(t *testing.T) {
		url := pgtest.URL(t)
		db := open(t, url)
		if _, err := db.Migrate(t.Context()); err != nil {
			t.Fatal(err)
		}
		ro := pgtest.Role(t, url, func(role, password, _ string) string {
			id := pgx.Identifier{role}.Sanitize()
			return fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD '%s'; GRANT USAGE ON SCHEMA public TO %[1]s;
				GRANT SELECT ON world_backups, world_backup_failures TO %[1]s;`, id, password)
		})
		_, err := open(t, ro).RetiredServers(t.Context())
		if !errors.Is(err, ErrNotPermitted) || !strings.Contains(err.Error(), "GRANT SELECT ON world_retired_servers") {
			t.Fatalf("RetiredServers without SELECT = %v; want ErrNotPermitted naming the GRANT", err)
		}
	})
}
