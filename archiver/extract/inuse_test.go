//go:build linux

package extract

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestWorldInUse(t *testing.T) {
	tests := []struct {
		name   string
		lock   func(t *testing.T, f *os.File) // nil: not locked
		inUse  bool
		nested bool // session.lock in world/ rather than in the folder itself
	}{
		{name: "no lock"},
		{name: "posix record lock (Java FileChannel.lock)", lock: ofdLock, inUse: true, nested: true},
		{name: "posix lock on the top folder's session.lock", lock: ofdLock, inUse: true},
		{name: "flock", lock: func(t *testing.T, f *os.File) {
			if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
				t.Fatal(err)
			}
		}, inUse: true, nested: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			world := dir
			if tt.nested {
				world = filepath.Join(dir, "world")
				if err := os.Mkdir(world, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			p := filepath.Join(world, "session.lock")
			if err := os.WriteFile(p, []byte("\u2603"), 0o644); err != nil {
				t.Fatal(err)
			}
			if tt.lock != nil {
				f, err := os.OpenFile(p, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				tt.lock(t, f)
			}
			err := WorldInUse(dir)
			if got := errors.Is(err, ErrInUse); got != tt.inUse {
				t.Fatalf("WorldInUse = %v, want in use: %v", err, tt.inUse)
			}
			if b, _ := os.ReadFile(p); string(b) != "\u2603" {
				t.Fatalf("session.lock changed: %q", b)
			}
		})
	}
	t.Run("missing folder", func(t *testing.T) {
		if err := WorldInUse(filepath.Join(t.TempDir(), "absent")); err != nil {
			t.Fatal(err)
		}
	})
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, p string)
	}{
		{"regular file", func(t *testing.T, p string) { must(t, os.WriteFile(p, nil, 0o644)) }},
		{"symlink loop", func(t *testing.T, p string) {
			must(t, os.Symlink(p+".b", p))
			must(t, os.Symlink(p, p+".b"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "world")
			tc.setup(t, p)
			err := WorldInUse(p)
			if !errors.Is(err, ErrNotFolder) || errors.Is(err, ErrInUse) {
				t.Fatalf("WorldInUse(%s) = %v, want an error wrapping ErrNotFolder and not ErrInUse", tc.name, err)
			}
		})
	}
}

// ofdLock takes a write lock the way another process's FileChannel.lock
// would look (an open-file-description lock conflicts with this process's
// own test, unlike a classic POSIX lock).
func ofdLock(t *testing.T, f *os.File) {
	t.Helper()
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreInUseAfterMarker: once a restore is done and the server runs
// on the restored world again (it holds session.lock), a rerun of the same
// run ID (a restore Job re-created after an image change, a TTL and
// refresh, GitOps) finds its marker and does nothing; a restore of another
// run ID is still refused as in use, the world untouched.
func TestRestoreInUseAfterMarker(t *testing.T) {
	for _, tt := range []struct {
		name      string
		runID     string
		wantInUse bool
		wantState string
	}{
		{"the same run ID", "run-1", false, StateAlreadyRestored},
		{"another run ID", "run-2", true, StateUnchanged},
		{"no run ID", "", true, StateUnchanged},
	} {
		t.Run(tt.name, func(t *testing.T) {
			archive, sum := newWorldArchive(t)
			s := newScene(t, true)
			o := Options{Archive: archive, SHA256: sum, Into: s.world, Replace: true, RunID: "run-1"}
			if res, err := Restore(t.Context(), nil, o); err != nil || res.WorldState != StateReplaced {
				t.Fatalf("restore: %+v, %v", res, err)
			}
			lock := filepath.Join(s.world, "session.lock")
			must(t, os.WriteFile(lock, []byte("\u2603"), 0o644))
			f, err := os.OpenFile(lock, os.O_RDWR, 0)
			must(t, err)
			defer f.Close()
			ofdLock(t, f)
			before := worldState(t, s.world)

			o.RunID = tt.runID
			res, err := Restore(t.Context(), nil, o)
			state := res.WorldState
			if err != nil {
				state = WorldState(err)
			}
			if errors.Is(err, ErrInUse) != tt.wantInUse || (!tt.wantInUse && err != nil) || state != tt.wantState {
				t.Fatalf("restore with the server running: %+v, %v; want in use %v, world %s", res, err, tt.wantInUse, tt.wantState)
			}
			if d := diffSnapshots(before, worldState(t, s.world)); d != "" {
				t.Fatalf("the world changed under the running server:\n%s", d)
			}
		})
	}
}
