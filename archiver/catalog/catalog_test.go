package catalog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/worldbackup/worldbackup/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func open(t *testing.T, url string) *DB {
	t.Helper()
	db, err := Open(t.Context(), url, hclog.NewNullLogger())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(db.Close)
	return db
}

// migrated opens a fresh, migrated catalog.
func migrated(t *testing.T) *DB {
	t.Helper()
	db := open(t, pgtest.URL(t))
	if _, err := db.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return db
}

func record(runID, server string, finished time.Time) Record {
	return Record{
		RunID:       runID,
		Server:      server,
		ArchiveRef:  "/backups/" + server + "/" + runID + ".tar.zst",
		SizeBytes:   1234,
		SHA256:      strings.Repeat("ab", 32),
		Compression: "zstd",
		FileCount:   56,
		StartedAt:   finished.Add(-time.Minute),
		FinishedAt:  finished,
	}
}

func TestMigrateIdempotent(t *testing.T) {
	db := open(t, pgtest.URL(t))
	applied, err := db.Migrate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	all, err := loadMigrations(migrationFS)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != len(all) || applied[0] != "0001_world_backups" {
		t.Fatalf("first Migrate applied %v, want all %d embedded migrations starting with 0001_world_backups", applied, len(all))
	}
	again, err := db.Migrate(t.Context())
	if err != nil || len(again) != 0 {
		t.Fatalf("second Migrate applied %v (err %v), want nothing", again, err)
	}
	var n int
	if err := db.pool.QueryRow(t.Context(), "SELECT count(*) FROM schema_migrations").Scan(&n); err != nil || n != len(all) {
		t.Fatalf("schema_migrations has %d rows (err %v), want %d", n, err, len(all))
	}
}

func TestMigrateConcurrent(t *testing.T) {
	url := pgtest.URL(t)
	const n = 4
	results := make([][]string, n)
	errs := make([]error, n)
	dbs := make([]*DB, n)
	for i := range dbs {
		dbs[i] = open(t, url)
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i], errs[i] = dbs[i].Migrate(t.Context()) })
	}
	wg.Wait()
	total := 0
	for i := range n {
		if errs[i] != nil {
			t.Errorf("Migrate %d: %v", i, errs[i])
		}
		total += len(results[i])
	}
	all, _ := loadMigrations(migrationFS)
	if total != len(all) {
		t.Errorf("concurrent Migrate calls applied %d migrations in total (%v), want each of the %d exactly once", total, results, len(all))
	}
}

func TestMigrateFailureRollsBack(t *testing.T) {
	db := open(t, pgtest.URL(t))
	bad := fstest.MapFS{
		"migrations/0001_ok.sql":  {Data: []byte("CREATE TABLE t1 (x int); CREATE TABLE t1b (y int);")},
		"migrations/0002_bad.sql": {Data: []byte("CREATE TABLE t2 (x nosuchtype);")},
	}
	applied, err := db.migrate(t.Context(), bad)
	if err == nil || !strings.Contains(err.Error(), "0002_bad") {
		t.Fatalf("migrate = %v, %v; want an error naming 0002_bad", applied, err)
	}
	var n int
	if err := db.pool.QueryRow(t.Context(), "SELECT count(*) FROM pg_tables WHERE tablename IN ('t1', 't1b', 'schema_migrations')").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d tables left by a failed migration set (err=%v), want none", n, err)
	}
	// The good file alone applies, both statements of it.
	delete(bad, "migrations/0002_bad.sql")
	if applied, err := db.migrate(t.Context(), bad); err != nil || fmt.Sprint(applied) != "[0001_ok]" {
		t.Fatalf("migrate = %v, %v; want [0001_ok]", applied, err)
	}
	if err := db.pool.QueryRow(t.Context(), "SELECT count(*) FROM pg_tables WHERE tablename IN ('t1', 't1b')").Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d of 2 tables after the good migration (err=%v)", n, err)
	}
}

func TestLoadMigrationsRejectsBadNames(t *testing.T) {
	for name, fsys := range map[string]fstest.MapFS{
		"unnumbered": {"migrations/init.sql": {Data: []byte("")}},
		"duplicate":  {"migrations/0001_a.sql": {Data: []byte("")}, "migrations/0001_b.sql": {Data: []byte("")}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := loadMigrations(fsys); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestInsertLookupList(t *testing.T) {
	db := migrated(t)
	ctx := t.Context()
	base := time.Date(2025, 3, 1, 12, 0, 0, 123456000, time.UTC)
	owner := "steve"
	r1 := record("run-b", "alpha", base.Add(2*time.Hour))
	r1.FormerOwner = &owner
	r2 := record("run-a", "alpha", base.Add(time.Hour))
	r3 := record("run-c", "beta", base)
	for _, r := range []Record{r1, r2, r3} {
		ok, err := db.Insert(ctx, r)
		if err != nil || !ok {
			t.Fatalf("Insert(%s) = %v, %v; want inserted", r.RunID, ok, err)
		}
	}

	got, err := db.Lookup(ctx, "run-b")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID == 0 || got.CreatedAt.IsZero() {
		t.Errorf("Lookup did not fill ID/CreatedAt: %+v", got)
	}
	want := r1
	want.ID, want.CreatedAt = got.ID, got.CreatedAt
	if !sameRecord(got, want) {
		t.Errorf("Lookup = %+v\nwant      %+v", got, want)
	}
	if got.FormerOwner == nil || *got.FormerOwner != "steve" {
		t.Errorf("FormerOwner = %v, want steve", got.FormerOwner)
	}
	if r, _ := db.Lookup(ctx, "run-a"); r.FormerOwner != nil {
		t.Errorf("FormerOwner of run-a = %q, want NULL", *r.FormerOwner)
	}

	for _, tc := range []struct {
		server string
		want   []string
	}{
		{"", []string{"run-c", "run-a", "run-b"}},
		{"alpha", []string{"run-a", "run-b"}},
		{"beta", []string{"run-c"}},
		{"gamma", nil},
	} {
		t.Run("list "+tc.server, func(t *testing.T) {
			rs, err := db.List(ctx, tc.server)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range rs {
				ids = append(ids, r.RunID)
			}
			if fmt.Sprint(ids) != fmt.Sprint(tc.want) {
				t.Errorf("List(%q) = %v, want %v (ordered by finished_at)", tc.server, ids, tc.want)
			}
		})
	}
}

func sameRecord(a, b Record) bool {
	eqPtr := (a.FormerOwner == nil) == (b.FormerOwner == nil) && (a.FormerOwner == nil || *a.FormerOwner == *b.FormerOwner)
	return a.ID == b.ID && a.RunID == b.RunID && a.Server == b.Server && a.Namespace == b.Namespace && eqPtr && a.ArchiveRef == b.ArchiveRef &&
		a.SizeBytes == b.SizeBytes && a.SHA256 == b.SHA256 && a.Compression == b.Compression &&
		a.FileCount == b.FileCount && a.StartedAt.Equal(b.StartedAt) && a.FinishedAt.Equal(b.FinishedAt) &&
		a.CreatedAt.Equal(b.CreatedAt)
}

func TestInsertConflictKeepsFirst(t *testing.T) {
	db := migrated(t)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	first := record("run-1", "alpha", now)
	if ok, err := db.Insert(ctx, first); err != nil || !ok {
		t.Fatalf("first Insert = %v, %v", ok, err)
	}
	second := first
	second.SizeBytes = 999
	second.SHA256 = strings.Repeat("cd", 32)
	ok, err := db.Insert(ctx, second)
	if err != nil || ok {
		t.Fatalf("second Insert of the same run = %v, %v; want false, nil", ok, err)
	}
	got, err := db.Lookup(ctx, "run-1")
	if err != nil || got.SizeBytes != 1234 || got.SHA256 != first.SHA256 {
		t.Fatalf("row after conflict = %+v (err %v), want the first one", got, err)
	}
	if rs, _ := db.List(ctx, ""); len(rs) != 1 {
		t.Fatalf("%d rows, want 1", len(rs))
	}
}

func TestInsertConcurrentSameRun(t *testing.T) {
	db := migrated(t)
	r := record("run-race", "alpha", time.Now())
	const n = 4
	var wg sync.WaitGroup
	oks := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { oks[i], errs[i] = db.Insert(t.Context(), r) })
	}
	wg.Wait()
	inserted := 0
	for i := range n {
		if errs[i] != nil {
			t.Errorf("Insert %d: %v", i, errs[i])
		}
		if oks[i] {
			inserted++
		}
	}
	if inserted != 1 {
		t.Errorf("%d concurrent Inserts of one run reported inserted, want exactly 1", inserted)
	}
}

func TestInsertRejectsBadRows(t *testing.T) {
	db := migrated(t)
	now := time.Now()
	for _, tc := range []struct {
		name       string
		mutate     func(*Record)
		constraint string
	}{
		{"uppercase sha256", func(r *Record) { r.SHA256 = strings.Repeat("AB", 32) }, "sha256"},
		{"short sha256", func(r *Record) { r.SHA256 = "abc" }, "sha256"},
		{"negative size", func(r *Record) { r.SizeBytes = -1 }, "size_bytes"},
		{"negative file count", func(r *Record) { r.FileCount = -1 }, "file_count"},
		{"unknown compression", func(r *Record) { r.Compression = "xz" }, "compression"},
		{"relative archive ref", func(r *Record) { r.ArchiveRef = "backups/x.tar.zst" }, "archive_ref"},
		{"s3 ref without a key", func(r *Record) { r.ArchiveRef = "s3://bucket/" }, "archive_ref"},
		{"other URL", func(r *Record) { r.ArchiveRef = "https://bucket/x.tar.zst" }, "archive_ref"},
		{"run id with slash", func(r *Record) { r.RunID = "a/b" }, "run_id"},
		{"server not a label", func(r *Record) { r.Server = "Alpha_1" }, "server"},
		{"finished before started", func(r *Record) { r.StartedAt = r.FinishedAt.Add(time.Second) }, "finished_at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := record("run-bad", "alpha", now)
			tc.mutate(&r)
			ok, err := db.Insert(t.Context(), r)
			if err == nil || ok {
				t.Fatalf("Insert = %v, %v; want a constraint violation", ok, err)
			}
			if !strings.Contains(err.Error(), tc.constraint) || !strings.Contains(err.Error(), "check constraint") {
				t.Errorf("error %q does not name the %s check constraint", err, tc.constraint)
			}
		})
	}
	if rs, err := db.List(t.Context(), ""); err != nil || len(rs) != 0 {
		t.Fatalf("rejected inserts left %d rows (err %v)", len(rs), err)
	}
}

// TestInsertCommitOutcome: an insert's error wraps ErrCommitUnknown only
// when its COMMIT was sent and its answer did not come (pgtest.CommitCut
// cuts the connection there, after the server committed or without letting
// the COMMIT through); a failure before the COMMIT means nothing was
// recorded, and says nothing of the kind.
func TestInsertCommitOutcome(t *testing.T) {
	const pack = "aa00000000000000000000000000000000000000000000000000000000000000"
	insert := func(db *DB, r Record) error { _, err := db.Insert(t.Context(), r); return err }
	insertChunked := func(db *DB, r Record) error {
		r.Format = "chunked"
		r.ArchiveRef = "/backups/_chunked/runs/" + r.Server + "/" + r.RunID + ".manifest"
		added := int64(1)
		r.AddedBytes = &added
		_, err := db.InsertChunked(t.Context(), r, []string{pack})
		return err
	}
	for _, tt := range []struct {
		name string
		// via returns the catalog the insert goes through; the test's
		// own connects directly.
		via         func(t *testing.T, u string) *DB
		insert      func(db *DB, r Record) error
		mutate      func(r *Record)
		wantUnknown bool
		wantRow     bool
	}{
		{name: "committed, answer lost", via: cutAt(true), insert: insert, wantUnknown: true, wantRow: true},
		{name: "chunked: committed, answer lost", via: cutAt(true), insert: insertChunked, wantUnknown: true, wantRow: true},
		{name: "COMMIT not delivered", via: cutAt(false), insert: insert, wantUnknown: true},
		{name: "chunked: COMMIT not delivered", via: cutAt(false), insert: insertChunked, wantUnknown: true},
		{name: "a statement fails", via: func(t *testing.T, u string) *DB { return open(t, u) }, insert: insert,
			mutate: func(r *Record) { r.SHA256 = "bad" }},
		{name: "the server never answers", via: func(t *testing.T, u string) *DB {
			p := pgtest.NewProxy(t, pgtest.Target(t, u))
			db, err := OpenWith(t.Context(), p.URL(t, u), nil, Timeouts{Call: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(db.Close)
			p.Blackhole()
			return db
		}, insert: insert},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u := pgtest.URL(t)
			direct := open(t, u)
			if _, err := direct.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := direct.RegisterPack(t.Context(), pack, ""); err != nil {
				t.Fatal(err)
			}
			r := record("run-1", "alpha", time.Now())
			if tt.mutate != nil {
				tt.mutate(&r)
			}
			err := tt.insert(tt.via(t, u), r)
			if err == nil {
				t.Fatal("the insert succeeded")
			}
			if errors.Is(err, ErrCommitUnknown) != tt.wantUnknown {
				t.Errorf("error %q: wraps ErrCommitUnknown %v, want %v", err, !tt.wantUnknown, tt.wantUnknown)
			}
			_, lerr := direct.LookupSettled(t.Context(), r.RunID)
			if gotRow := lerr == nil; gotRow != tt.wantRow || !gotRow && !errors.Is(lerr, ErrNotFound) {
				t.Errorf("LookupSettled after the insert: %v; want a row: %v", lerr, tt.wantRow)
			}
		})
	}
}

// cutAt returns a catalog whose row transactions go through a
// pgtest.CommitCut, applied or not.
func cutAt(applied bool) func(t *testing.T, u string) *DB {
	return func(t *testing.T, u string) *DB {
		cut := pgtest.NewCommitCut(t, pgtest.Target(t, u), &pgtest.CommitCut{Match: "INSERT INTO world_backups", Applied: applied})
		return open(t, cut.URL(t, u))
	}
}

// TestLookupSettled: an insert still under way (its COMMIT sent, its
// answer not back) is waited for: LookupSettled answers with its row once
// it commits, and "not found" once it rolls back, where Lookup answers "not
// found" at once; a writer that holds the table past lock_timeout fails the
// call instead of answering "not found".
func TestLookupSettled(t *testing.T) {
	for _, tt := range []struct {
		name    string
		end     func(ctx context.Context, tx pgx.Tx) error // nil: left open
		want    error
		wantErr string
	}{
		{name: "the insert commits", end: func(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) }},
		{name: "the insert rolls back", end: func(ctx context.Context, tx pgx.Tx) error { return tx.Rollback(ctx) }, want: ErrNotFound},
		{name: "the insert outlasts lock_timeout", wantErr: "lock timeout"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u := pgtest.URL(t)
			db, err := OpenWith(t.Context(), u, nil, Timeouts{Lock: 500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(db.Close)
			if _, err := db.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			writer, err := pgx.Connect(t.Context(), u)
			if err != nil {
				t.Fatal(err)
			}
			defer writer.Close(context.Background())
			tx, err := writer.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(context.Background())
			r := record("run-1", "alpha", time.Now())
			if _, err := tx.Exec(t.Context(), `INSERT INTO world_backups
				(run_id, server, archive_ref, size_bytes, sha256, compression, file_count, started_at, finished_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
				r.RunID, r.Server, r.ArchiveRef, r.SizeBytes, r.SHA256, r.Compression, r.FileCount, r.StartedAt, r.FinishedAt); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Lookup(t.Context(), r.RunID); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Lookup while the insert is under way: %v, want ErrNotFound", err)
			}
			type result struct {
				rec Record
				err error
			}
			done := make(chan result, 1)
			go func() {
				rec, err := db.LookupSettled(t.Context(), r.RunID)
				done <- result{rec, err}
			}()
			if tt.end != nil {
				select {
				case res := <-done:
					t.Fatalf("LookupSettled answered while the insert was under way: %+v, %v", res.rec, res.err)
				case <-time.After(200 * time.Millisecond):
				}
				if err := tt.end(t.Context(), tx); err != nil {
					t.Fatal(err)
				}
			}
			res := <-done
			switch {
			case tt.wantErr != "":
				if res.err == nil || errors.Is(res.err, ErrNotFound) || !strings.Contains(res.err.Error(), tt.wantErr) {
					t.Errorf("LookupSettled: %v, want an error saying %q, not ErrNotFound", res.err, tt.wantErr)
				}
			case tt.want != nil:
				if !errors.Is(res.err, tt.want) {
					t.Errorf("LookupSettled: %+v, %v; want %v", res.rec, res.err, tt.want)
				}
			case res.err != nil || res.rec.RunID != r.RunID || res.rec.SHA256 != r.SHA256:
				t.Errorf("LookupSettled: %+v, %v; want the committed row", res.rec, res.err)
			}
		})
	}
}

func TestLookupNotFound(t *testing.T) {
	db := migrated(t)
	_, err := db.Lookup(t.Context(), "never-ran")
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("Lookup of a missing run: %v, want ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), "never-ran") {
		t.Errorf("error %q does not name the run", err)
	}
}

func TestOpenErrorsHideThePassword(t *testing.T) {
	const pw = "Sup3rS3cretPw"
	for _, tc := range []struct{ name, url string }{
		{"unreachable", "postgres://felis:" + pw + "@127.0.0.1:1/felis?connect_timeout=2"},
		{"bad port", "postgres://felis:" + pw + "@127.0.0.1:notaport/felis"},
		{"bad escape", "postgres://felis:" + pw + "%zz@127.0.0.1:5432/felis"},
		{"keyword form unreachable", "host=127.0.0.1 port=1 user=felis password=" + pw + " dbname=felis connect_timeout=2"},
		{"keyword form broken quote", "host=127.0.0.1 user=felis password='" + pw},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := Open(t.Context(), tc.url, hclog.NewNullLogger())
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded")
			}
			if strings.Contains(err.Error(), pw) || strings.Contains(fmt.Sprintf("%+v", err), pw) {
				t.Errorf("error leaks the password: %v", err)
			}
			if strings.Contains(err.Error(), tc.url) {
				t.Errorf("error contains the URL: %v", err)
			}
		})
	}
}

func TestOpenWrongPassword(t *testing.T) {
	// A real authentication failure: a private server whose pg_hba.conf asks
	// every user but postgres for a password.
	s := pgtest.NewPrivate(t)
	admin := open(t, s.URL())
	ctx := t.Context()
	const right, wrong = "R1ght-Pw-123", "Wr0ng-Pw-456"
	var hba string
	if err := admin.pool.QueryRow(ctx, "SHOW hba_file").Scan(&hba); err != nil {
		t.Fatal(err)
	}
	conf := "host all postgres 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n"
	if err := os.WriteFile(hba, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SET password_encryption = 'scram-sha-256'", "CREATE ROLE felis LOGIN PASSWORD '" + right + "'", "SELECT pg_reload_conf()"} {
		if _, err := admin.pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	cfg, err := pgx.ParseConfig(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	url := func(pw string) string {
		return fmt.Sprintf("postgres://felis:%s@%s:%d/%s?sslmode=disable", pw, cfg.Host, cfg.Port, cfg.Database)
	}
	db, err := Open(ctx, url(wrong), hclog.NewNullLogger())
	if err == nil {
		db.Close()
		t.Fatal("Open with a wrong password succeeded")
	}
	if !strings.Contains(err.Error(), "password authentication failed") {
		t.Errorf("error %q does not say the password was refused", err)
	}
	if strings.Contains(err.Error(), wrong) {
		t.Errorf("error leaks the password: %v", err)
	}
	db = open(t, url(right))
	_, err = db.Lookup(ctx, "x") // world_backups does not exist yet
	if err == nil || strings.Contains(err.Error(), right) {
		t.Fatalf("Lookup error %v: want an error without the password", err)
	}
}

// TestCallsAreBounded: a server that accepts and never answers, one that
// stops answering mid-run, and a locked table each fail the call within its
// bound instead of hanging it.
func TestCallsAreBounded(t *testing.T) {
	short := Timeouts{Connect: 300 * time.Millisecond, Statement: 2 * time.Second, Lock: 200 * time.Millisecond, Call: time.Second}
	// connected is short with room to connect and migrate on a loaded
	// machine (a 300 ms connect through the proxy failed under a load of
	// 10), for the cases whose server answers until it is made not to.
	connected := short
	connected.Connect, connected.Call = 10*time.Second, 5*time.Second
	// within fails the test when fn takes far longer than its bound (10x:
	// a loose check that it is bounded at all, not a timing assertion).
	within := func(t *testing.T, fn func() error) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- fn() }()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("the call is still waiting after 30s")
			return nil
		}
	}

	t.Run("server accepts and never answers", func(t *testing.T) {
		hole := pgtest.NewBlackhole(t)
		err := within(t, func() error {
			db, err := OpenWith(t.Context(), "postgres://felis:pw@"+hole.Addr()+"/felis?sslmode=disable", nil, short)
			if err == nil {
				db.Close()
			}
			return err
		})
		if err == nil {
			t.Fatal("Open through a blackhole succeeded")
		}
		if !strings.Contains(err.Error(), "connecting to database") {
			t.Errorf("error %q", err)
		}
	})

	t.Run("server stops answering after connecting", func(t *testing.T) {
		u := pgtest.URL(t)
		// Migrated directly, with the default timeouts: under load the
		// migrations can take longer than short's second per call.
		direct, err := Open(t.Context(), u, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := direct.Migrate(t.Context()); err != nil {
			t.Fatal(err)
		}
		direct.Close()
		proxy := pgtest.NewProxy(t, pgtest.Target(t, u))
		db, err := OpenWith(t.Context(), proxy.URL(t, u), nil, connected)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		proxy.Blackhole()
		err = within(t, func() error {
			_, err := db.Insert(t.Context(), record("r1", "survival", time.Now()))
			return err
		})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Insert through a silent server: %v, want a deadline error", err)
		}
	})

	t.Run("locked table", func(t *testing.T) {
		u := pgtest.URL(t)
		db, err := OpenWith(t.Context(), u, nil, connected)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Migrate(t.Context()); err != nil {
			t.Fatal(err)
		}
		locker, err := pgx.Connect(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		defer locker.Close(context.Background())
		tx, err := locker.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(context.Background())
		if _, err := tx.Exec(t.Context(), "LOCK TABLE world_backups IN ACCESS EXCLUSIVE MODE"); err != nil {
			t.Fatal(err)
		}
		err = within(t, func() error {
			_, err := db.Insert(t.Context(), record("r1", "survival", time.Now()))
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "lock timeout") {
			t.Errorf("Insert into a locked table: %v, want a lock timeout", err)
		}
	})
}

// The defaults reach the server as runtime parameters.
func TestDefaultTimeouts(t *testing.T) {
	db := open(t, pgtest.URL(t))
	for name, want := range map[string]string{"statement_timeout": "1min", "lock_timeout": "15s"} {
		var got string
		if err := db.pool.QueryRow(t.Context(), "SHOW "+name).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	if got := db.pool.Config().ConnConfig.ConnectTimeout; got != DefaultConnectTimeout {
		t.Errorf("connect timeout %v, want %v", got, DefaultConnectTimeout)
	}
}

func TestPruneServer(t *testing.T) {
	db := migrated(t)
	ctx := t.Context()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, r := range []Record{record("a1", "alpha", t0), record("a2", "alpha", t0.Add(time.Hour)), record("b1", "beta", t0)} {
		if _, err := db.Insert(ctx, r); err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
	}
	t.Run("decide sees the server's rows oldest first", func(t *testing.T) {
		var seen []string
		deleted, err := db.PruneServer(ctx, "alpha", func(rs []Record) ([]string, error) {
			for _, r := range rs {
				seen = append(seen, r.RunID)
			}
			return nil, nil
		})
		if err != nil || len(deleted) != 0 {
			t.Fatalf("PruneServer = %v, %v; want nothing deleted", deleted, err)
		}
		if fmt.Sprint(seen) != "[a1 a2]" {
			t.Fatalf("decide saw %v, want [a1 a2]", seen)
		}
	})
	t.Run("an error from decide rolls back", func(t *testing.T) {
		_, err := db.PruneServer(ctx, "alpha", func([]Record) ([]string, error) { return []string{"a1"}, errors.New("boom") })
		if err == nil || !strings.Contains(err.Error(), "boom") {
			t.Fatalf("err = %v, want boom", err)
		}
		if _, err := db.Lookup(ctx, "a1"); err != nil {
			t.Fatalf("a1 after a failed prune: %v", err)
		}
	})
	t.Run("a run of another server is never deleted", func(t *testing.T) {
		_, err := db.PruneServer(ctx, "alpha", func([]Record) ([]string, error) { return []string{"b1"}, nil })
		if err == nil || !strings.Contains(err.Error(), "0 of 1 rows deleted") {
			t.Fatalf("err = %v, want a refusal", err)
		}
		if _, err := db.Lookup(ctx, "b1"); err != nil {
			t.Fatalf("b1: %v", err)
		}
	})
	t.Run("deletes and returns the rows", func(t *testing.T) {
		deleted, err := db.PruneServer(ctx, "alpha", func([]Record) ([]string, error) { return []string{"a1"}, nil })
		if err != nil || len(deleted) != 1 || deleted[0].RunID != "a1" || deleted[0].ArchiveRef != "/backups/alpha/a1.tar.zst" {
			t.Fatalf("PruneServer = %+v, %v; want a1's row", deleted, err)
		}
		if _, err := db.Lookup(ctx, "a1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a1 after prune: %v, want ErrNotFound", err)
		}
	})
	t.Run("two prunes of one server do not interleave", func(t *testing.T) {
		inFirst, release := make(chan struct{}), make(chan struct{})
		var wg sync.WaitGroup
		var secondSaw []string
		var secondErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := db.PruneServer(ctx, "alpha", func([]Record) ([]string, error) {
				close(inFirst)
				<-release
				return []string{"a2"}, nil
			})
			if err != nil {
				t.Errorf("first prune: %v", err)
			}
		}()
		<-inFirst
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, secondErr = db.PruneServer(ctx, "alpha", func(rs []Record) ([]string, error) {
				for _, r := range rs {
					secondSaw = append(secondSaw, r.RunID)
				}
				return nil, nil
			})
		}()
		// Another server's prune is not blocked meanwhile.
		if _, err := db.PruneServer(ctx, "beta", func([]Record) ([]string, error) { return nil, nil }); err != nil {
			t.Fatalf("prune of beta while alpha is pruned: %v", err)
		}
		// Wait until the second prune waits for the lock, then let the first go.
		for waiting := 0; waiting == 0; {
			if err := db.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		close(release)
		wg.Wait()
		if secondErr != nil {
			t.Fatalf("second prune: %v", secondErr)
		}
		if len(secondSaw) != 0 {
			t.Fatalf("the second prune saw %v: it ran before the first committed", secondSaw)
		}
	})
}
