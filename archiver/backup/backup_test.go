package backup

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/archiver/tarstream"
	"github.com/worldbackup/worldbackup/jobapi"
)

var (
	_ Store   = (*store.Local)(nil)
	_ Store   = (*store.Mem)(nil)
	_ Catalog = (*catalog.DB)(nil)
	_ Catalog = (*fakeCatalog)(nil)
	_ Turn    = catalog.Slots{}
	_ Turn    = fakeTurn{}
)

// fakeCatalog is an in-memory Catalog.
type fakeCatalog struct {
	mu        sync.Mutex
	rows      map[string]catalog.Record
	inserts   int
	lookupErr error
	insertErr error
	onInsert  func()
}

func newFakeCatalog() *fakeCatalog { return &fakeCatalog{rows: map[string]catalog.Record{}} }

func (f *fakeCatalog) Lookup(ctx context.Context, runID string) (catalog.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lookupErr != nil {
		return catalog.Record{}, f.lookupErr
	}
	r, ok := f.rows[runID]
	if !ok {
		return catalog.Record{}, fmt.Errorf("run %q: %w", runID, catalog.ErrNotFound)
	}
	return r, nil
}

func (f *fakeCatalog) LookupSettled(ctx context.Context, runID string) (catalog.Record, error) {
	return f.Lookup(ctx, runID)
}

func (f *fakeCatalog) RegisterPack(ctx context.Context, id, storeRef string) error { return nil }

func (f *fakeCatalog) InsertChunked(ctx context.Context, r catalog.Record, packs []string) (bool, error) {
	return f.Insert(ctx, r)
}

func (f *fakeCatalog) LatestChunked(ctx context.Context, server, namespace string, in func(catalog.Record) bool) (catalog.Record, error) {
	return catalog.Record{}, catalog.ErrNotFound
}

func (f *fakeCatalog) NewestRuns(ctx context.Context, server, namespace string, limit int) ([]catalog.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var rs []catalog.Record
	for _, r := range f.rows {
		if (server == "" || r.Server == server) && r.In(namespace) {
			rs = append(rs, r)
		}
	}
	slices.SortFunc(rs, func(a, b catalog.Record) int { return b.FinishedAt.Compare(a.FinishedAt) })
	if limit > 0 && len(rs) > limit {
		rs = rs[:limit]
	}
	return rs, nil
}

func (f *fakeCatalog) Insert(ctx context.Context, r catalog.Record) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inserts++
	if f.onInsert != nil {
		f.onInsert()
	}
	if f.insertErr != nil {
		return false, f.insertErr
	}
	if _, ok := f.rows[r.RunID]; ok {
		return false, nil
	}
	r.ID = int64(len(f.rows) + 1)
	r.CreatedAt = time.Now()
	f.rows[r.RunID] = r
	return true, nil
}

// countingStore counts the Puts of a store.
type countingStore struct {
	*store.Mem
	mu   sync.Mutex
	puts int
}

func (c *countingStore) Put(ctx context.Context, key string, write func(io.Writer) error) (int64, error) {
	c.mu.Lock()
	c.puts++
	c.mu.Unlock()
	return c.Mem.Put(ctx, key, write)
}

func makeWorld(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"world/level.dat":           "level",
		"world/region/r.0.0.mca":    strings.Repeat("region", 10000),
		"world/playerdata/a.dat":    "player",
		"world_nether/DIM-1/x.mca":  "nether",
		"plugins/worldedit.jar":     "excluded",
		"logs/latest.log":           "excluded",
		"world/stats/deadbeef.json": `{"stats":{}}`,
	}
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func params(world string) Params {
	return Params{
		Server:      "survival",
		RunID:       "run-1",
		FormerOwner: "alice",
		World:       world,
		Compression: tarstream.Zstd,
		Excludes:    tarstream.DefaultExcludes,
		Format:      jobapi.FormatTar, // these tests read the tar archive; chunked_test.go has the chunked runs
	}
}

func newRunner(t *testing.T, s Store, c Catalog) (*Runner, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	return New(s, c, hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true})), &logs
}

// archiveNames lists the entries of a zstd archive.
func archiveNames(t *testing.T, b []byte) []string {
	t.Helper()
	dr, err := tarstream.Decompress(bytes.NewReader(b), tarstream.Zstd, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer dr.Close()
	var names []string
	tr := tar.NewReader(dr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

func TestRunRecordsArchive(t *testing.T) {
	world := makeWorld(t)
	mem := store.NewMem()
	cat := newFakeCatalog()
	r, logs := newRunner(t, mem, cat)
	s, err := r.Run(t.Context(), params(world))
	if err != nil {
		t.Fatalf("Run: %v\nlogs:\n%s", err, logs)
	}
	b, ok := mem.Bytes("survival/run-1.tar.zst")
	if !ok {
		t.Fatalf("no archive; store holds %v", mem.Keys())
	}
	sum := sha256.Sum256(b)
	rec := cat.rows["run-1"]
	want := catalog.Record{
		ID: rec.ID, RunID: "run-1", Server: "survival", FormerOwner: rec.FormerOwner,
		ArchiveRef: "mem://survival/run-1.tar.zst", SizeBytes: int64(len(b)), SHA256: hex.EncodeToString(sum[:]),
		Compression: "zstd", FileCount: 5, StartedAt: rec.StartedAt, FinishedAt: rec.FinishedAt, CreatedAt: rec.CreatedAt,
		Format: "tar", AddedBytes: rec.AddedBytes,
	}
	if rec.AddedBytes == nil || *rec.AddedBytes != int64(len(b)) {
		t.Errorf("added bytes %v, want the archive's %d", rec.AddedBytes, len(b))
	}
	if rec != want {
		t.Errorf("row %+v\nwant %+v", rec, want)
	}
	if rec.FormerOwner == nil || *rec.FormerOwner != "alice" {
		t.Errorf("former owner %v, want alice", rec.FormerOwner)
	}
	if rec.StartedAt.IsZero() || rec.FinishedAt.Before(rec.StartedAt) {
		t.Errorf("times %v .. %v", rec.StartedAt, rec.FinishedAt)
	}
	if s.Status != StatusDone || s.SHA256 != rec.SHA256 || s.SizeBytes != rec.SizeBytes || s.ArchiveRef != rec.ArchiveRef || s.FileCount != 5 {
		t.Errorf("summary %+v disagrees with row %+v", s, rec)
	}
	names := strings.Join(archiveNames(t, b), " ")
	if !strings.Contains(names, "world/level.dat") || strings.Contains(names, ".jar") || strings.Contains(names, "logs/") {
		t.Errorf("archive entries: %s", names)
	}
	if !strings.Contains(logs.String(), `"backup done"`) || !strings.Contains(logs.String(), `"mb_per_s"`) {
		t.Errorf("logs lack the done line:\n%s", logs)
	}
}

func TestRunNoFormerOwner(t *testing.T) {
	cat := newFakeCatalog()
	r, _ := newRunner(t, store.NewMem(), cat)
	p := params(makeWorld(t))
	p.FormerOwner = ""
	if _, err := r.Run(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	if fo := cat.rows["run-1"].FormerOwner; fo != nil {
		t.Fatalf("former owner %q, want NULL", *fo)
	}
}

func TestRunIdempotent(t *testing.T) {
	world := makeWorld(t)
	cs := &countingStore{Mem: store.NewMem()}
	cat := newFakeCatalog()
	r, logs := newRunner(t, cs, cat)
	first, err := r.Run(t.Context(), params(world))
	if err != nil {
		t.Fatal(err)
	}
	before, _ := cs.Bytes("survival/run-1.tar.zst")
	// The world changes; the same run ID must still do nothing.
	os.WriteFile(filepath.Join(world, "world/new.dat"), []byte("new"), 0o644)
	second, err := r.Run(t.Context(), params(world))
	if err != nil {
		t.Fatalf("rerun: %v", err)
	}
	if second.Status != StatusAlreadyRecorded {
		t.Errorf("rerun status %q, want %q", second.Status, StatusAlreadyRecorded)
	}
	if second.SHA256 != first.SHA256 || second.ArchiveRef != first.ArchiveRef || second.SizeBytes != first.SizeBytes {
		t.Errorf("rerun summary %+v does not describe the recorded run %+v", second, first)
	}
	after, _ := cs.Bytes("survival/run-1.tar.zst")
	if cs.puts != 1 || cat.inserts != 1 || len(cat.rows) != 1 || !bytes.Equal(before, after) || len(cs.Keys()) != 1 {
		t.Errorf("rerun wrote: %d puts, %d inserts, %d rows, keys %v", cs.puts, cat.inserts, len(cat.rows), cs.Keys())
	}
	if !strings.Contains(logs.String(), "already recorded") {
		t.Errorf("logs do not say the run was already recorded:\n%s", logs)
	}
}

func TestRunConcurrentAttempts(t *testing.T) {
	world := makeWorld(t)
	cs := &countingStore{Mem: store.NewMem()}
	cat := newFakeCatalog()
	r, _ := newRunner(t, cs, cat)
	var wg sync.WaitGroup
	results := make([]Summary, 4)
	errs := make([]error, 4)
	for i := range results {
		wg.Go(func() { results[i], errs[i] = r.Run(t.Context(), params(world)) })
	}
	wg.Wait()
	done := 0
	for i, s := range results {
		if errs[i] != nil {
			t.Errorf("attempt %d: %v", i, errs[i])
		}
		if s.Status == StatusDone {
			done++
		}
	}
	if done != 1 || cs.puts != 1 || len(cat.rows) != 1 || len(cs.Keys()) != 1 {
		t.Errorf("%d attempts did the run, %d puts, %d rows, keys %v; want exactly one", done, cs.puts, len(cat.rows), cs.Keys())
	}
}

func TestRunInsertFailureRemovesArchive(t *testing.T) {
	tests := []struct {
		name      string
		insertErr error
		cancel    bool
	}{
		{name: "insert error", insertErr: errors.New("connection refused")},
		// The run's context ends during the insert (SIGTERM): the archive is
		// removed all the same.
		{name: "canceled during insert", insertErr: context.Canceled, cancel: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := store.NewMem()
			cat := newFakeCatalog()
			cat.insertErr = tt.insertErr
			r, logs := newRunner(t, mem, cat)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tt.cancel {
				cat.onInsert = cancel
			}
			s, err := r.Run(ctx, params(makeWorld(t)))
			if !errors.Is(err, tt.insertErr) {
				t.Fatalf("Run: %v, want the insert's error", err)
			}
			if !strings.Contains(err.Error(), "archive removed") {
				t.Errorf("error %q does not say the archive was removed", err)
			}
			if keys := mem.Keys(); len(keys) != 0 {
				t.Errorf("archives left: %v", keys)
			}
			if s.Status != StatusFailed || s.Error == "" {
				t.Errorf("summary %+v, want failed with the error", s)
			}
			if !strings.Contains(logs.String(), "removed the unrecorded archive") {
				t.Errorf("logs:\n%s", logs)
			}
		})
	}
}

// TestRunInsertUnderALostLock: when the run's archive lock (the S3
// store's, in the catalog) was lost before the insert, another attempt may
// own the run's key now: the archive is kept, and the error says so; a
// lost quiesce lock leaves the key this run's, and its archive is removed.
func TestRunInsertUnderALostLock(t *testing.T) {
	tests := []struct {
		name, kind string
		keys       int
		says       string
	}{
		{"archive lock", "archive", 1, "was kept"},
		{"quiesce lock", "quiesce", 0, "archive removed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := store.NewMem()
			cat := newFakeCatalog()
			cat.insertErr = fmt.Errorf("inserting run: %w", &catalog.LockLostError{Kind: tt.kind, Name: "srv/run"})
			r, _ := newRunner(t, mem, cat)
			s, err := r.Run(t.Context(), params(makeWorld(t)))
			if !errors.Is(err, catalog.ErrLockLost) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("Run: %v, want ErrLockLost saying %q", err, tt.says)
			}
			if keys := mem.Keys(); len(keys) != tt.keys {
				t.Errorf("archives %v, want %d", keys, tt.keys)
			}
			if s.Status != StatusFailed {
				t.Errorf("summary %+v, want failed", s)
			}
		})
	}
}

func TestRunFailures(t *testing.T) {
	boom := errors.New("catalog down")
	tests := []struct {
		name    string
		params  func(p *Params)
		setup   func(c *fakeCatalog)
		ctx     func(ctx context.Context) context.Context
		wantErr string
	}{
		{name: "lookup fails", setup: func(c *fakeCatalog) { c.lookupErr = boom }, wantErr: "catalog down"},
		{name: "bad server", params: func(p *Params) { p.Server = "Survival_1" }, wantErr: "server name"},
		{name: "bad run ID", params: func(p *Params) { p.RunID = "../etc" }, wantErr: "run ID"},
		{name: "hidden run ID", params: func(p *Params) { p.RunID = ".x" }, wantErr: "run ID"},
		{name: "bad former owner", params: func(p *Params) { p.FormerOwner = "a\nb" }, wantErr: "former owner"},
		{name: "former owner not UTF-8", params: func(p *Params) { p.FormerOwner = "\xff" }, wantErr: "former owner"},
		{name: "bad compression", params: func(p *Params) { p.Compression = "xz" }, wantErr: "compression"},
		{name: "bad exclude", params: func(p *Params) { p.Excludes = []string{"["} }, wantErr: "exclude"},
		{name: "missing world", params: func(p *Params) { p.World = "/nonexistent/world" }, wantErr: "/nonexistent/world"},
		{
			name: "run ID of another server",
			setup: func(c *fakeCatalog) {
				c.rows["run-1"] = catalog.Record{RunID: "run-1", Server: "creative"}
			},
			wantErr: `already recorded for server "creative"`,
		},
		{
			name: "canceled",
			ctx: func(ctx context.Context) context.Context {
				ctx, cancel := context.WithCancel(ctx)
				cancel()
				return ctx
			},
			wantErr: "context canceled",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := store.NewMem()
			cat := newFakeCatalog()
			if tt.setup != nil {
				tt.setup(cat)
			}
			p := params(makeWorld(t))
			if tt.params != nil {
				tt.params(&p)
			}
			ctx := t.Context()
			if tt.ctx != nil {
				ctx = tt.ctx(ctx)
			}
			r, _ := newRunner(t, mem, cat)
			s, err := r.Run(ctx, p)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Run: %v, want an error containing %q", err, tt.wantErr)
			}
			if s.Status != StatusFailed {
				t.Errorf("status %q", s.Status)
			}
			if keys := mem.Keys(); len(keys) != 0 {
				t.Errorf("archives written: %v", keys)
			}
			if cat.inserts != 0 {
				t.Errorf("%d inserts", cat.inserts)
			}
		})
	}
}

// TestRunCleansKilledAttempt: the temp data of an earlier attempt that died
// without its lock is removed before the run writes.
func TestRunCleansKilledAttempt(t *testing.T) {
	mem := store.NewMem()
	key := "survival/run-1.tar.zst"
	started := make(chan struct{})
	proceed := make(chan struct{})
	stale := make(chan error, 1)
	go func() {
		_, err := mem.Put(t.Context(), key, func(w io.Writer) error {
			w.Write([]byte("partial archive of a dead attempt"))
			close(started)
			<-proceed
			return nil
		})
		stale <- err
	}()
	<-started
	r, logs := newRunner(t, mem, newFakeCatalog())
	if _, err := r.Run(t.Context(), params(makeWorld(t))); err != nil {
		t.Fatal(err)
	}
	close(proceed)
	if err := <-stale; !errors.Is(err, store.ErrDiscarded) {
		t.Errorf("the stale attempt's Put: %v, want ErrDiscarded", err)
	}
	if !strings.Contains(logs.String(), "removed temp files of an earlier attempt") {
		t.Errorf("logs:\n%s", logs)
	}
	b, _ := mem.Bytes(key)
	if len(archiveNames(t, b)) == 0 {
		t.Error("archive is empty")
	}
}

func TestProgressLogs(t *testing.T) {
	var logs safeBuffer
	r := New(store.NewMem(), newFakeCatalog(), hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true}))
	prog := new(tarstream.Progress)
	prog.Files.Store(3)
	prog.InputBytes.Store(5 << 20)
	stop := r.progress(r.log, prog, time.Now().Add(-time.Second), time.Millisecond)
	for !strings.Contains(logs.String(), `"progress"`) {
		select {
		case <-t.Context().Done():
			t.Fatal("no progress line")
		case <-time.After(time.Millisecond):
		}
	}
	stop()
	line := logs.String()
	for _, kv := range []string{`"files":3`, `"bytes":5242880`, `"mb_per_s":`} {
		if !strings.Contains(line, kv) {
			t.Errorf("progress line lacks %s: %s", kv, line)
		}
	}
}

type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunConcurrentCompressions: two attempts of one run with different
// compressions at once: the run lock is the run's, so one writes and
// records, the other finds the row; no archive is left without a row.
func TestRunConcurrentCompressions(t *testing.T) {
	world := makeWorld(t)
	for range 5 {
		mem := store.NewMem()
		cat := newFakeCatalog()
		r, _ := newRunner(t, mem, cat)
		var wg sync.WaitGroup
		results := make([]Summary, 2)
		errs := make([]error, 2)
		for i, c := range []tarstream.Compression{tarstream.Zstd, tarstream.Gzip} {
			wg.Go(func() {
				p := params(world)
				p.Compression = c
				results[i], errs[i] = r.Run(t.Context(), p)
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("attempt %d: %v", i, err)
			}
		}
		rec, ok := cat.rows["run-1"]
		if len(cat.rows) != 1 || !ok {
			t.Fatalf("rows %v, want one", cat.rows)
		}
		if keys := mem.Keys(); len(keys) != 1 || mem.Ref(keys[0]) != rec.ArchiveRef {
			t.Fatalf("archives %v, want only the recorded %s", keys, rec.ArchiveRef)
		}
	}
}

func TestRunEmptyWorld(t *testing.T) {
	tests := []struct {
		name     string
		world    func(t *testing.T) string
		excludes []string
	}{
		{name: "no files", world: func(t *testing.T) string {
			w := t.TempDir()
			os.MkdirAll(filepath.Join(w, "world", "region"), 0o755)
			return w
		}},
		{name: "everything excluded", world: makeWorld, excludes: []string{"*"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := params(tt.world(t))
			if tt.excludes != nil {
				p.Excludes = tt.excludes
			}
			mem := store.NewMem()
			cat := newFakeCatalog()
			r, _ := newRunner(t, mem, cat)
			s, err := r.Run(t.Context(), p)
			if !errors.Is(err, ErrEmptyWorld) || !strings.Contains(err.Error(), "--allow-empty") {
				t.Fatalf("Run: %v, want ErrEmptyWorld saying --allow-empty", err)
			}
			if s.Status != StatusFailed || len(mem.Keys()) != 0 || cat.inserts != 0 {
				t.Fatalf("status %s, archives %v, %d inserts: want failed, nothing written", s.Status, mem.Keys(), cat.inserts)
			}
			mustHaveNoTemps(t, mem, "survival/run-1.tar.zst")

			p.AllowEmpty = true
			s, err = r.Run(t.Context(), p)
			if err != nil || s.Status != StatusDone || s.FileCount != 0 || len(cat.rows) != 1 {
				t.Fatalf("with AllowEmpty: %v, summary %+v, rows %v", err, s, cat.rows)
			}
		})
	}
}

func mustHaveNoTemps(t *testing.T, s *store.Mem, key string) {
	t.Helper()
	if removed, err := s.CleanTemps(t.Context(), key); err != nil || len(removed) > 0 {
		t.Fatalf("temps of %s: %v %v", key, removed, err)
	}
}

// fakeQuiescer records the order of quiesce, resume and insert in events.
type fakeQuiescer struct {
	events     *[]string
	quiesceErr error
	resumeErr  error
	stopped    bool // the server is down: nothing to resume
}

func (q *fakeQuiescer) Quiesce(ctx context.Context, log hclog.Logger) (func(context.Context) error, error) {
	*q.events = append(*q.events, "quiesce")
	if q.quiesceErr != nil {
		return nil, q.quiesceErr
	}
	if q.stopped {
		return nil, nil
	}
	return func(context.Context) error {
		*q.events = append(*q.events, "resume")
		return q.resumeErr
	}, nil
}

// fakeTurn records its wait and its end in events; the wait returns err.
type fakeTurn struct {
	events *[]string
	err    error
}

func (f fakeTurn) Wait(ctx context.Context) (func(), error) {
	*f.events = append(*f.events, "turn")
	if f.err != nil {
		return nil, f.err
	}
	return func() { *f.events = append(*f.events, "end of turn") }, nil
}

// TestRunQuiesce: the game server is quiesced before the world is read and
// resumed once on every exit path after that, before the row is inserted;
// a run that waits for its turn does so before anything else (even the
// lookup of a recorded run) and ends it last, and a turn that fails fails
// the run with nothing read, quiesced or written.
func TestRunQuiesce(t *testing.T) {
	tests := []struct {
		name       string
		q          fakeQuiescer
		turn       *fakeTurn // nil: no turn to wait for
		params     func(p *Params)
		setup      func(c *fakeCatalog, mem *store.Mem)
		wantEvents string
		wantErr    string
		wantRow    bool
	}{
		{name: "resumed before the row", wantEvents: "[quiesce resume insert]", wantRow: true},
		{name: "server stopped", q: fakeQuiescer{stopped: true}, wantEvents: "[quiesce insert]", wantRow: true},
		{name: "quiesce fails: nothing read", q: fakeQuiescer{quiesceErr: errors.New("rcon password refused")},
			wantEvents: "[quiesce]", wantErr: "quiescing the game server: rcon password refused"},
		{name: "archive fails: resumed", params: func(p *Params) { p.World = "/nonexistent/world" },
			wantEvents: "[quiesce resume]", wantErr: "/nonexistent/world"},
		{name: "resume fails: no archive, no row", q: fakeQuiescer{resumeErr: errors.New("autosave still OFF")},
			wantEvents: "[quiesce resume]", wantErr: "turning autosave back on: autosave still OFF"},
		{name: "insert fails: resumed once", setup: func(c *fakeCatalog, _ *store.Mem) { c.insertErr = errors.New("db gone") },
			wantEvents: "[quiesce resume insert]", wantErr: "db gone"},
		{name: "already recorded: not quiesced", setup: func(c *fakeCatalog, _ *store.Mem) {
			c.rows["run-1"] = catalog.Record{RunID: "run-1", Server: "survival"}
		}, wantEvents: "[]", wantRow: true},
		{name: "the turn comes first and ends last", turn: &fakeTurn{}, wantEvents: "[turn quiesce resume insert end of turn]", wantRow: true},
		{name: "a failed run ends its turn", turn: &fakeTurn{}, setup: func(c *fakeCatalog, _ *store.Mem) { c.insertErr = errors.New("db gone") },
			wantEvents: "[turn quiesce resume insert end of turn]", wantErr: "db gone"},
		{name: "a recorded run waits for its turn too, then does nothing", turn: &fakeTurn{}, setup: func(c *fakeCatalog, _ *store.Mem) {
			c.rows["run-1"] = catalog.Record{RunID: "run-1", Server: "survival"}
		}, wantEvents: "[turn end of turn]", wantRow: true},
		{name: "the turn fails: nothing done", turn: &fakeTurn{err: errors.New("the Job's deadline")},
			wantEvents: "[turn]", wantErr: "the Job's deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var events []string
			mem := store.NewMem()
			cat := newFakeCatalog()
			cat.onInsert = func() { events = append(events, "insert") }
			if tt.setup != nil {
				tt.setup(cat, mem)
			}
			p := params(makeWorld(t))
			if tt.params != nil {
				tt.params(&p)
			}
			q := tt.q
			q.events = &events
			r, _ := newRunner(t, mem, cat)
			r = r.WithQuiescer(&q)
			if tt.turn != nil {
				turn := *tt.turn
				turn.events = &events
				r = r.WithTurn(turn)
			}
			s, err := r.Run(t.Context(), p)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Run: %v, want error %q", err, tt.wantErr)
			}
			if tt.wantErr != "" && (s.Status != StatusFailed || !strings.Contains(s.Error, tt.wantErr)) {
				t.Errorf("summary %+v, want failed with the error", s)
			}
			if got := fmt.Sprint(events); got != tt.wantEvents {
				t.Fatalf("events %s, want %s", got, tt.wantEvents)
			}
			_, hasRow := cat.rows["run-1"]
			if hasRow != tt.wantRow {
				t.Fatalf("row: %v, want %v", hasRow, tt.wantRow)
			}
			if keys := mem.Keys(); !tt.wantRow && len(keys) != 0 {
				t.Fatalf("a failed run left archives %v", keys)
			}
		})
	}
}
