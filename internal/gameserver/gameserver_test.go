package gameserver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/rcon"
)

// TestTornCopyIsDetected: a copy read while autosave rewrites the file is
// sooner or later torn; that is what makes the stand-in useful.
func TestTornCopyIsDetected(t *testing.T) {
	world := t.TempDir()
	s, err := Start(world, "127.0.0.1:0", "pw", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	path := filepath.Join(world, RegionPath)
	for i := 0; i < 20000; i++ {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Generation(b); errors.Is(err, ErrTorn) {
			return
		}
	}
	t.Fatal("20000 copies taken during autosave were all clean: the stand-in does not write like a server")
}

// TestQuiescedCopyIsClean: between save-off/save-all flush and save-on the
// file holds exactly the flushed generation, and autosave resumes after.
func TestQuiescedCopyIsClean(t *testing.T) {
	world := t.TempDir()
	s, err := Start(world, "127.0.0.1:0", "pw", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q, err := rcon.Quiesce(t.Context(), rcon.Config{Addr: s.Addr(), Password: "pw", Required: true}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		b, err := os.ReadFile(filepath.Join(world, RegionPath))
		if err != nil {
			t.Fatal(err)
		}
		g, err := Generation(b)
		if err != nil || g != s.Flushed() {
			t.Fatalf("copy %d while quiesced: generation %d, %v; want the flushed %d", i, g, err, s.Flushed())
		}
	}
	before := s.Writes()
	if err := q.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Writes() == before {
		if time.Now().After(deadline) {
			t.Fatal("autosave did not resume after save-on")
		}
		time.Sleep(time.Millisecond)
	}
	want := []string{"save-off", "save-all flush", "save-on"}
	if got := s.Commands(); len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("commands %q, want %q", got, want)
	}
}
