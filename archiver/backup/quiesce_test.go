package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/jobapi"
)

// panickingStore is a store whose archive writer panics on its first
// write: on the goroutine that writes (a pack's, a stage's), not the run's.
type panickingStore struct{ *store.Mem }

func (p panickingStore) Put(ctx context.Context, key string, write func(io.Writer) error) (int64, error) {
	return p.Mem.Put(ctx, key, func(w io.Writer) error { return write(panicWriter{}) })
}

type panicWriter struct{}

func (panicWriter) Write([]byte) (int, error) { panic("boom: a store's writer") }

// markerQuiescer's resume writes a file: what the parent process checks.
type markerQuiescer struct{ path string }

func (q markerQuiescer) Quiesce(ctx context.Context, log hclog.Logger) (func(context.Context) error, error) {
	return func(context.Context) error { return os.WriteFile(q.path, []byte("save-on"), 0o644) }, nil
}

// TestPanicInAPipelineGoroutineResumes: a panic on a goroutine of the
// stream (the chunked format's pack writer, the tar format's hash-and-write
// stage) ends the process without the run's deferred calls; the game
// server's autosave must be turned back on all the same (crashguard). The
// run is a child process, which must crash, saying why, after resuming.
func TestPanicInAPipelineGoroutineResumes(t *testing.T) {
	if format := os.Getenv("WB_PANIC_CHILD"); format != "" {
		p := params(makeWorld(t))
		p.Format = format
		r := New(panickingStore{store.NewMem()}, newFakeCatalog(), hclog.NewNullLogger()).
			WithQuiescer(markerQuiescer{os.Getenv("WB_PANIC_MARKER")})
		_, err := r.Run(context.Background(), p)
		t.Fatalf("the run returned (%v) instead of crashing", err)
	}
	for _, format := range []string{jobapi.FormatChunked, jobapi.FormatTar} {
		t.Run(format, func(t *testing.T) {
			marker := filepath.Join(t.TempDir(), "resumed")
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestPanicInAPipelineGoroutineResumes$", "-test.count=1")
			cmd.Env = append(os.Environ(), "WB_PANIC_CHILD="+format, "WB_PANIC_MARKER="+marker)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), "boom: a store's writer") {
				t.Fatalf("the child did not crash on the panic (err %v):\n%s", err, out)
			}
			if b, err := os.ReadFile(marker); err != nil || string(b) != "save-on" {
				t.Fatalf("autosave was not turned back on before the crash (%v):\n%s", err, out)
			}
		})
	}
}

// TestSerialized: the quiesce lock is taken before the server is quiesced
// and released after it is resumed, or at once when quiescing fails or
// finds the server stopped; a lock that cannot be taken quiesces nothing.
func TestSerialized(t *testing.T) {
	for _, tc := range []struct {
		name    string
		q       fakeQuiescer
		lockErr error
		want    string
		wantErr string
	}{
		{name: "held from quiesce to resume", want: "[lock quiesce resume unlock]"},
		{name: "quiesce fails", q: fakeQuiescer{quiesceErr: errors.New("refused")}, want: "[lock quiesce unlock]", wantErr: "refused"},
		{name: "server stopped", q: fakeQuiescer{stopped: true}, want: "[lock quiesce unlock]"},
		{name: "lock not taken", lockErr: context.DeadlineExceeded, want: "[lock]", wantErr: "waiting for another run of the server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var events []string
			q := tc.q
			q.events = &events
			s := Serialized(&q, func(context.Context) (func(), error) {
				events = append(events, "lock")
				if tc.lockErr != nil {
					return nil, tc.lockErr
				}
				return func() { events = append(events, "unlock") }, nil
			})
			resume, err := s.Quiesce(t.Context(), hclog.NewNullLogger())
			if (tc.wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Quiesce: %v, want error %q", err, tc.wantErr)
			}
			if resume != nil {
				if err := resume(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			if got := fmt.Sprint(events); got != tc.want {
				t.Fatalf("events %s, want %s", got, tc.want)
			}
		})
	}
}
