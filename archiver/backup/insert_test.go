package backup

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/chunked"
	"github.com/worldbackup/worldbackup/archiver/prune"
	"github.com/worldbackup/worldbackup/archiver/retention"
	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/internal/pgtest"
	"github.com/worldbackup/worldbackup/jobapi"
)

// TestRunInsertAnswerLost: the row's transaction is cut at its COMMIT by a
// proxy in front of the real PostgreSQL (pgtest.CommitCut), so the insert
// fails whether or not the server committed. The run looks itself up again
// before it removes anything a row may point at:
//   - committed: the run is done, its archive (tar) or manifest and packs
//     (chunked) there, and the Job's retry finds the run recorded;
//   - not committed: what it wrote is removed, as for any failed insert;
//   - the catalog silent after the cut: what it wrote is kept and the error
//     says so; committed, the retry finds the run recorded with its
//     archive, and not committed, a prune removes it all (manifest or
//     archive as an orphan, packs as packs no run references).
func TestRunInsertAnswerLost(t *testing.T) {
	for _, tt := range []struct {
		name            string
		format          string
		applied, silent bool
	}{
		{name: "tar, committed, answer lost", format: jobapi.FormatTar, applied: true},
		{name: "chunked, committed, answer lost", format: jobapi.FormatChunked, applied: true},
		{name: "tar, not committed", format: jobapi.FormatTar},
		{name: "chunked, not committed", format: jobapi.FormatChunked},
		{name: "tar, committed, then the catalog silent", format: jobapi.FormatTar, applied: true, silent: true},
		{name: "chunked, committed, then the catalog silent", format: jobapi.FormatChunked, applied: true, silent: true},
		{name: "tar, not committed, then the catalog silent", format: jobapi.FormatTar, silent: true},
		{name: "chunked, not committed, then the catalog silent", format: jobapi.FormatChunked, silent: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u := pgtest.URL(t)
			direct, err := catalog.Open(t.Context(), u, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(direct.Close)
			if _, err := direct.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			cut := pgtest.NewCommitCut(t, pgtest.Target(t, u),
				&pgtest.CommitCut{Match: "INSERT INTO world_backups", Applied: tt.applied, Silent: tt.silent})
			// Short bounds: a silent catalog fails the lookup in seconds.
			viaCut, err := catalog.OpenWith(t.Context(), cut.URL(t, u), nil, catalog.Timeouts{Connect: 2 * time.Second, Call: 4 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(viaCut.Close)
			root := t.TempDir()
			st, err := store.NewLocal(root)
			if err != nil {
				t.Fatal(err)
			}
			p := params(makeWorld(t))
			p.Format = tt.format
			p.ProgressInterval = time.Hour
			key, err := jobapi.SealedRunKey(p.Server, p.RunID, p.Format, string(p.Compression), false)
			if err != nil {
				t.Fatal(err)
			}
			packs := func() []string {
				t.Helper()
				ps, err := filepath.Glob(filepath.Join(root, "_chunked", "packs", "*", "*"))
				if err != nil {
					t.Fatal(err)
				}
				return ps
			}
			exists := func(p string) bool {
				_, err := os.Stat(p)
				return err == nil
			}

			r, logs := newRunner(t, st, viaCut)
			s, err := r.Run(t.Context(), p)
			if !cut.Cut() {
				t.Fatalf("the proxy cut nothing; Run: %v", err)
			}
			rec, lerr := direct.Lookup(t.Context(), p.RunID)
			if tt.applied != (lerr == nil) {
				t.Fatalf("row after the cut: %+v, %v; want one: %v", rec, lerr, tt.applied)
			}
			switch {
			case !tt.silent && tt.applied:
				if err != nil || s.Status != StatusDone || s.ArchiveRef != rec.ArchiveRef || s.SHA256 != rec.SHA256 {
					t.Fatalf("Run: %+v, %v; want done, as the row %+v records", s, err, rec)
				}
				if !strings.Contains(logs.String(), "answer to the insert was lost") {
					t.Errorf("logs do not say the answer was lost:\n%s", logs)
				}
			case !tt.silent:
				if err == nil || !strings.Contains(err.Error(), "archive removed") {
					t.Fatalf("Run: %v; want it failed, its archive removed", err)
				}
				if exists(st.Ref(key)) || len(packs()) != 0 {
					t.Fatalf("left after the removal: archive %v, packs %v", exists(st.Ref(key)), packs())
				}
				return
			default:
				if err == nil || !strings.Contains(err.Error(), "kept "+st.Ref(key)) || s.Status != StatusFailed {
					t.Fatalf("Run: %+v, %v; want it failed, saying what it kept", s, err)
				}
				if !strings.Contains(logs.String(), "kept what the run wrote") {
					t.Errorf("logs do not say what was kept:\n%s", logs)
				}
				if !exists(st.Ref(key)) || tt.format == jobapi.FormatChunked && len(packs()) == 0 {
					t.Fatalf("kept: archive %v, packs %v; want both", exists(st.Ref(key)), packs())
				}
			}

			if tt.applied {
				// The row points at what the run wrote, whole.
				if tt.format == jobapi.FormatChunked {
					m, err := chunked.Open(t.Context(), st, key, rec.SHA256)
					if err == nil {
						_, err = chunked.Verify(t.Context(), st, m, 1, 0)
					}
					if err != nil {
						t.Fatalf("the recorded run does not verify: %v", err)
					}
				} else if !exists(rec.ArchiveRef) {
					t.Fatalf("the row points at %s, which is gone", rec.ArchiveRef)
				}
				// The Job's retry.
				s2, err := New(st, direct, hclog.NewNullLogger()).Run(t.Context(), p)
				if err != nil || s2.Status != StatusAlreadyRecorded || !exists(rec.ArchiveRef) {
					t.Fatalf("retry: %+v, %v (archive there: %v); want already recorded, its archive there", s2, err, exists(rec.ArchiveRef))
				}
				return
			}
			// Not recorded, and kept: a prune past the grace period removes
			// it all, under the run's lock.
			rep, err := prune.Prune(t.Context(), direct, st, prune.Options{Server: p.Server,
				Policy: retention.Policy{Last: 5, MinKeep: 1}, Grace: time.Nanosecond}, hclog.NewNullLogger())
			if err != nil {
				t.Fatalf("Prune: %v", err)
			}
			if exists(st.Ref(key)) || len(packs()) != 0 {
				t.Fatalf("after the prune (%+v): archive %v, packs %v; want none", rep, exists(st.Ref(key)), packs())
			}
			if _, err := direct.Lookup(t.Context(), p.RunID); !errors.Is(err, catalog.ErrNotFound) {
				t.Errorf("a row after the prune: %v", err)
			}
		})
	}
}
