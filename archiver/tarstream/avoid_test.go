//go:build linux

package tarstream

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/worldbackup/worldbackup/internal/testenv"
)

// avoidWorld is a world with a level.dat and a "backups" folder holding an
// archive, and the archive root outside it.
func avoidWorld(t *testing.T) (world, root string) {
	t.Helper()
	dir := t.TempDir()
	world, root = filepath.Join(dir, "world"), filepath.Join(dir, "backups")
	for _, d := range []string{filepath.Join(world, "world"), filepath.Join(world, "backups"), filepath.Join(root, "survival")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, data := range map[string]string{
		filepath.Join(world, "world/level.dat"):               "level",
		filepath.Join(root, "survival/old.tar.zst"):           "an archive",
		filepath.Join(root, "survival/.run.tar.zst.tmp-0123"): "this run's temp file",
	} {
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return world, root
}

// TestWriteSkipsTheArchiveFolder: a folder of the world that is the
// archive root, found by device and inode whatever its path, is skipped with
// a warning, so the archive never holds itself.
func TestWriteSkipsTheArchiveFolder(t *testing.T) {
	check := func(t *testing.T, world string, avoid []string) {
		t.Helper()
		var out, logs bytes.Buffer
		res, err := Write(t.Context(), &out, world, Options{Compression: None, Avoid: avoid,
			Log: hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true})})
		if err != nil {
			t.Fatal(err)
		}
		got := readArchive(t, out.Bytes(), None)
		if _, ok := got["world/level.dat"]; !ok {
			t.Errorf("the world's level.dat is missing: %v", got)
		}
		for name := range got {
			if strings.HasPrefix(name, "backups") {
				t.Errorf("the archive holds %q, from the archive folder", name)
			}
		}
		if res.Warnings != 1 || !strings.Contains(logs.String(), "it is the archive folder") {
			t.Errorf("%d warnings, logs:\n%s", res.Warnings, logs.String())
		}
	}
	t.Run("folder given by its path in the world", func(t *testing.T) {
		world, _ := avoidWorld(t)
		os.WriteFile(filepath.Join(world, "backups", "x.tar.zst"), []byte("archive"), 0o644)
		check(t, world, []string{filepath.Join(world, "backups")})
	})
	t.Run("bind mount of the archive root", func(t *testing.T) {
		testenv.RequireRoot(t, "bind-mounting the archive root into the world")
		world, root := avoidWorld(t)
		target := filepath.Join(world, "backups")
		if err := unix.Mount(root, target, "", unix.MS_BIND, ""); err != nil {
			testenv.Require(t, false, "cannot bind-mount: "+err.Error(), "run the tests with CAP_SYS_ADMIN")
		}
		// Registered after TempDir's cleanup, so it runs first.
		t.Cleanup(func() {
			if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
				t.Errorf("unmounting %s: %v", target, err)
			}
		})
		check(t, world, []string{root, filepath.Join(root, "survival")})
	})
}

func TestWriteRefusesTheArchiveFolderAsWorld(t *testing.T) {
	world, _ := avoidWorld(t)
	_, err := Write(t.Context(), &bytes.Buffer{}, world, Options{Avoid: []string{filepath.Join(world, "."), "/nonexistent"}})
	if !errors.Is(err, ErrSelfContaining) {
		t.Fatalf("Write: %v, want ErrSelfContaining", err)
	}
}

// The restore's marker, staging and previous folders at the top of a world
// are never archived; deeper names are ordinary.
func TestWriteLeavesOutRestoreFiles(t *testing.T) {
	world := t.TempDir()
	for _, p := range []string{".worldbackup-restored", ".worldbackup-previous/world/level.dat", "world/.worldbackup-restored", "level.dat"} {
		os.MkdirAll(filepath.Join(world, filepath.Dir(p)), 0o755)
		if err := os.WriteFile(filepath.Join(world, p), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	res, err := Write(t.Context(), &out, world, Options{Compression: None})
	if err != nil {
		t.Fatal(err)
	}
	got := readArchive(t, out.Bytes(), None)
	for _, name := range []string{".worldbackup-restored", ".worldbackup-previous/", ".worldbackup-previous/world/level.dat"} {
		if _, ok := got[name]; ok {
			t.Errorf("the archive holds %q", name)
		}
	}
	for _, name := range []string{"world/.worldbackup-restored", "level.dat"} {
		if _, ok := got[name]; !ok {
			t.Errorf("the archive lacks %q", name)
		}
	}
	if res.Excluded != 2 {
		t.Errorf("%d excluded, want 2", res.Excluded)
	}
}
