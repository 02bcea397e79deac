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
