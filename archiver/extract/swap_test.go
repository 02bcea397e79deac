package extract

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// newWorldArchive is the archive the crash tests restore.
func newWorldArchive(tb testing.TB) (string, string) {
	return writeArchive(tb, zstdBytes(tb, buildTar(tb,
		reg("level.dat", "new level"), reg("region/r.0.0.mca", "new region"), reg("newdir/x", "x"), sym("latest", "region/r.0.0.mca"))))
}

// worldState is a snapshot of DIR without DIR itself.
func worldState(tb testing.TB, dir string) map[string]string {
	m := snapshot(tb, dir)
	delete(m, ".")
	return m
}

// crashAt extracts the new world into a staging folder, runs steps (the part
// of the swap done before the "crash"), and abandons everything as a killed
// process would. It returns the scene and the old and new world states.
func crashAt(t *testing.T, layout Layout, steps func(tg *target, st *staging)) (s scene, old, neu map[string]string) {
	t.Helper()
	archive, sum := newWorldArchive(t)
	ref := filepath.Join(t.TempDir(), "ref")
	if _, err := Restore(t.Context(), nil, Options{Archive: archive, SHA256: sum, Into: ref}); err != nil {
		t.Fatal(err)
	}
	neu = worldState(t, ref)

	s = newScene(t, true)
	old = worldState(t, s.world)
	tg, err := openTarget(s.world, layout, hclog.NewNullLogger())
	must(t, err)
	st, err := tg.newStaging()
	must(t, err)
	f, err := os.Open(archive)
	must(t, err)
	defer f.Close()
	var res Result
	o := Options{Archive: archive, SHA256: sum}.withDefaults()
	must(t, extract(t.Context(), f, st, o, &res))
	steps(tg, st)
	st.root.Close()
	tg.close()
	return s, old, neu
}

// recoverOnly opens the target again and runs the recovery a rerun starts with.
func recoverOnly(t *testing.T, s scene, layout Layout) {
	t.Helper()
	tg, err := openTarget(s.world, layout, hclog.NewNullLogger())
	must(t, err)
	defer tg.close()
	if err := tg.recover(); err != nil {
		t.Fatalf("recover: %v", err)
	}
}

func assertClean(t *testing.T, s scene, layout Layout) {
	t.Helper()
	var names []string
	base := s.tmp
	if layout == LayoutInside {
		base = s.world
	}
	entries, err := os.ReadDir(base)
	must(t, err)
	for _, e := range entries {
		if strings.Contains(e.Name(), "worldbackup") || strings.HasSuffix(e.Name(), ".previous") {
			names = append(names, e.Name())
		}
	}
	if len(names) > 0 {
		t.Errorf("leftovers after recovery: %v", names)
	}
}

func TestCrashRecovery(t *testing.T) {
	for _, tc := range []struct {
		name   string
		layout Layout
		steps  func(t *testing.T, tg *target, st *staging)
		want   string // "old" or "new"
	}{
		{"beside during extraction", LayoutBeside, func(t *testing.T, tg *target, st *staging) {}, "old"},
		{"beside after moving the old world aside", LayoutBeside, func(t *testing.T, tg *target, st *staging) {
			must(t, tg.writeJournal(journal{Phase: phaseStash, Staging: st.name}))
			must(t, tg.stash(st.name))
		}, "old"},
		{"beside before moving the new world in", LayoutBeside, func(t *testing.T, tg *target, st *staging) {
			must(t, tg.writeJournal(journal{Phase: phaseStash, Staging: st.name}))
			must(t, tg.stash(st.name))
			must(t, tg.writeJournal(journal{Phase: phaseInstall, Staging: st.name}))
		}, "new"},
		{"beside before removing the old world", LayoutBeside, func(t *testing.T, tg *target, st *staging) {
			must(t, tg.writeJournal(journal{Phase: phaseStash, Staging: st.name}))
			must(t, tg.stash(st.name))
			must(t, tg.writeJournal(journal{Phase: phaseInstall, Staging: st.name}))
			must(t, tg.install(st.name))
		}, "new"},
		{"inside during extraction", LayoutInside, func(t *testing.T, tg *target, st *staging) {}, "old"},
		{"inside halfway through moving the old world aside", LayoutInside, func(t *testing.T, tg *target, st *staging) {
			must(t, tg.writeJournal(journal{Phase: phaseStash, Staging: st.name}))
			must(t, tg.base.Mkdir(tg.previous, 0o700))
			must(t, tg.base.Rename("level.dat", tg.previous+"/level.dat"))
		}, "old"},
		{"inside halfway through moving the new world in", LayoutInside, func(t *testing.T, tg *target, st *staging) {
			must(t, tg.writeJournal(journal{Phase: phaseStash, Staging: st.name}))
			must(t, tg.stash(st.name))
			must(t, tg.writeJournal(journal{Phase: phaseInstall, Staging: st.name}))
			must(t, tg.base.Rename(st.name+"/level.dat", "level.dat"))
			must(t, tg.base.Rename(st.name+"/newdir", "newdir"))
		}, "new"},
		{"inside before removing the old world", LayoutInside, func(t *testing.T, tg *target, st *staging) {
			must(t, tg.writeJournal(journal{Phase: phaseStash, Staging: st.name}))
			must(t, tg.stash(st.name))
			must(t, tg.writeJournal(journal{Phase: phaseInstall, Staging: st.name}))
			must(t, tg.install(st.name))
		}, "new"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, old, neu := crashAt(t, tc.layout, func(tg *target, st *staging) { tc.steps(t, tg, st) })
			recoverOnly(t, s, tc.layout)
			want := map[string]map[string]string{"old": old, "new": neu}[tc.want]
			if d := diffSnapshots(want, worldState(t, s.world)); d != "" {
				t.Errorf("after recovery DIR is not the %s world:\n%s", tc.want, d)
			}
			assertClean(t, s, tc.layout)

			// A full rerun then restores the new world whatever state it found.
			archive, sum := newWorldArchive(t)
			if _, err := Restore(t.Context(), nil, Options{Archive: archive, SHA256: sum, Into: s.world, Replace: true, Layout: tc.layout}); err != nil {
				t.Fatalf("rerun: %v", err)
			}
			if d := diffSnapshots(neu, worldState(t, s.world)); d != "" {
				t.Errorf("after the rerun DIR is not the new world:\n%s", d)
			}
			assertClean(t, s, tc.layout)
		})
	}
}

func TestForeignPreviousIsKept(t *testing.T) {
	for _, layout := range []Layout{LayoutBeside, LayoutInside} {
		t.Run(string(layout), func(t *testing.T) {
			s := newScene(t, true)
			prev := s.world + ".previous"
			if layout == LayoutInside {
				prev = filepath.Join(s.world, ".worldbackup-previous")
			}
			must(t, os.Mkdir(prev, 0o755))
			must(t, os.WriteFile(filepath.Join(prev, "precious"), []byte("someone's"), 0o644))
			before := snapshot(t, s.tmp)
			archive, sum := newWorldArchive(t)
			_, err := Restore(t.Context(), nil, Options{Archive: archive, SHA256: sum, Into: s.world, Replace: true, Layout: layout})
			if err == nil || !strings.Contains(err.Error(), "no restore journal") {
				t.Fatalf("got %v, want a refusal to touch a previous folder that is not ours", err)
			}
			if d := diffSnapshots(before, snapshot(t, s.tmp)); d != "" {
				t.Errorf("changed:\n%s", d)
			}
		})
	}
}

func TestConcurrentRestoreIsLockedOut(t *testing.T) {
	s := newScene(t, true)
	tg, err := openTarget(s.world, LayoutBeside, hclog.NewNullLogger())
	must(t, err)
	defer tg.close()
	archive, sum := newWorldArchive(t)
	_, err = Restore(t.Context(), nil, Options{Archive: archive, SHA256: sum, Into: s.world, Replace: true, Layout: LayoutBeside})
	if err == nil || !strings.Contains(err.Error(), "another restore") {
		t.Fatalf("got %v, want a refusal while another restore holds the lock", err)
	}
}

func TestAutoLayout(t *testing.T) {
	s := newScene(t, false)
	tg, err := openTarget(s.world, LayoutAuto, hclog.NewNullLogger())
	must(t, err)
	tg.close()
	if tg.layout != LayoutBeside {
		t.Errorf("layout for an ordinary folder = %s, want beside", tg.layout)
	}
	// A symlink to DIR is resolved, not replaced by the restore.
	link := filepath.Join(s.tmp, "link")
	must(t, os.Symlink("world", link))
	archive, sum := newWorldArchive(t)
	if _, err := Restore(t.Context(), nil, Options{Archive: archive, SHA256: sum, Into: link}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink to DIR was replaced: %v %v", fi, err)
	}
	if b, err := os.ReadFile(filepath.Join(s.world, "level.dat")); err != nil || string(b) != "new level" {
		t.Errorf("world/level.dat = %q, %v", b, err)
	}
}
