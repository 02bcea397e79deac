package extract

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestMarkerBinding: in both layouts the marker a restore writes is bound
// to the world it moved in with (a rerun does nothing, also after the world
// changed), and a planted one naming the same run and checksum is refused
// without touching the world.
func TestMarkerBinding(t *testing.T) {
	for _, layout := range []Layout{LayoutBeside, LayoutInside} {
		t.Run(string(layout), func(t *testing.T) {
			archive, sum := newWorldArchive(t)
			o := Options{Archive: archive, SHA256: sum, Replace: true, RunID: "run-1", Layout: layout}

			s := newScene(t, true)
			o.Into = s.world
			if res, err := Restore(t.Context(), nil, o); err != nil || res.WorldState != StateReplaced {
				t.Fatalf("restore: %+v, %v", res, err)
			}
			must(t, os.WriteFile(filepath.Join(s.world, "level.dat"), []byte("played since"), 0o644))
			if res, err := Restore(t.Context(), nil, o); err != nil || res.WorldState != StateAlreadyRestored {
				t.Fatalf("rerun: %+v, %v; want already restored", res, err)
			}

			planted := newScene(t, true)
			o.Into = planted.world
			must(t, os.WriteFile(filepath.Join(planted.world, MarkerName),
				fmt.Appendf(nil, `{"run_id":"run-1","sha256":%q,"restored_at":"2026-11-30T00:00:00Z","inode":12345}`, sum), 0o644))
			before := worldState(t, planted.world)
			_, err := Restore(t.Context(), nil, o)
			if !errors.Is(err, ErrMarkerNotBound) || WorldState(err) != StateUnchanged {
				t.Fatalf("restore over a planted marker: %v; want ErrMarkerNotBound, world unchanged", err)
			}
			if d := diffSnapshots(before, worldState(t, planted.world)); d != "" {
				t.Fatalf("the refused restore changed the world:\n%s", d)
			}
		})
	}
}

// TestMarkerKeyedOnRunID: the marker's run ID alone makes a restore skip:
// the same run ID with another archive (a restore Job re-created with a
// newer backup's archive) leaves the world as it is; a planted marker
// naming the run with another checksum is refused, not skipped over; a new
// run ID restores.
func TestMarkerKeyedOnRunID(t *testing.T) {
	first, firstSum := newWorldArchive(t)
	other, otherSum := writeArchive(t, zstdBytes(t, buildTar(t, reg("level.dat", "other level"))))
	for _, tc := range []struct {
		name      string
		runID     string
		planted   bool
		wantErr   error
		wantState string
	}{
		{"same run, other archive", "run-1", false, nil, StateAlreadyRestored},
		{"same run, other archive, planted marker", "run-1", true, ErrMarkerNotBound, StateUnchanged},
		{"new run, other archive", "run-2", false, nil, StateReplaced},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScene(t, true)
			if tc.planted {
				must(t, os.WriteFile(filepath.Join(s.world, MarkerName),
					fmt.Appendf(nil, `{"run_id":"run-1","sha256":%q,"restored_at":"2026-11-30T00:00:00Z","inode":12345}`, firstSum), 0o644))
			} else if res, err := Restore(t.Context(), nil, Options{Archive: first, SHA256: firstSum, Into: s.world, Replace: true, RunID: "run-1"}); err != nil || res.WorldState != StateReplaced {
				t.Fatalf("first restore: %+v, %v", res, err)
			}
			before := worldState(t, s.world)
			res, err := Restore(t.Context(), nil, Options{Archive: other, SHA256: otherSum, Into: s.world, Replace: true, RunID: tc.runID})
			state := res.WorldState
			if err != nil {
				state = WorldState(err)
			}
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) || state != tc.wantState {
				t.Fatalf("restore of another archive with run ID %s: %+v, %v; want %v, world %s", tc.runID, res, err, tc.wantErr, tc.wantState)
			}
			if want := (Restored{Archive: first, SHA256: firstSum}); tc.wantState == StateAlreadyRestored && res.Restored != want {
				t.Errorf("Restored = %+v, want %+v: the archive the world holds", res.Restored, want)
			}
			changed := diffSnapshots(before, worldState(t, s.world)) != ""
			if changed != (tc.wantState == StateReplaced) {
				t.Errorf("world changed: %v, want %v", changed, tc.wantState == StateReplaced)
			}
		})
	}
}

// TestRestoreGone: a restore whose run is gone (Options.Gone) does nothing
// when the world's marker names its run ID, and is refused with Gone
// otherwise, the world untouched; a gone run with an archive, or without a
// target, is invalid.
func TestRestoreGone(t *testing.T) {
	archive, sum := newWorldArchive(t)
	errGone := errors.New("run gone")
	s := newScene(t, true)
	if res, err := Restore(t.Context(), nil, Options{Archive: archive, SHA256: sum, Into: s.world, Replace: true, RunID: "run-1"}); err != nil {
		t.Fatalf("first restore: %+v, %v", res, err)
	}
	before := worldState(t, s.world)
	for _, tc := range []struct {
		name, runID string
		wantErr     error
		wantState   string
	}{
		{"the restore done before", "run-1", nil, StateAlreadyRestored},
		{"a restore that never ran", "run-2", errGone, StateUnchanged},
		{"no run ID", "", errGone, StateUnchanged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Restore(t.Context(), nil, Options{Into: s.world, Replace: true, RunID: tc.runID, Gone: errGone})
			state := res.WorldState
			if err != nil {
				state = WorldState(err)
			}
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) || state != tc.wantState {
				t.Fatalf("Restore = %+v, %v; want %v, world %s", res, err, tc.wantErr, tc.wantState)
			}
			if tc.wantErr == nil && res.Restored.SHA256 != sum {
				t.Errorf("already restored reports sha256 %q, want the marker's %q", res.Restored.SHA256, sum)
			}
			if d := diffSnapshots(before, worldState(t, s.world)); d != "" {
				t.Fatalf("the world changed:\n%s", d)
			}
		})
	}
	t.Run("an archive with a gone run", func(t *testing.T) {
		for _, o := range []Options{
			{Archive: archive, Into: s.world, Gone: errGone},
			{SHA256: sum, Into: s.world, Gone: errGone},
			{Gone: errGone},
		} {
			if err := o.Validate(); err == nil {
				t.Errorf("Validate(%+v) = nil, want an error", o)
			}
		}
	})
}
