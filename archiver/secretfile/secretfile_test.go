package secretfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	if err := os.WriteFile(ok, []byte("key\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(ok, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{ok, link} {
		if b, err := Read(p, 4); err != nil || string(b) != "key\n" {
			t.Errorf("Read(%s) = %q, %v", p, b, err)
		}
	}
	if _, err := Read(ok, 3); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "larger than 3 bytes") {
		t.Errorf("oversized: %v", err)
	}
	if _, err := Read(filepath.Join(dir, "none"), 4); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, dir, "/dev/zero"} {
		done := make(chan error, 1)
		go func() { _, err := Read(p, 4096); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), p) {
				t.Errorf("Read(%s): %v", p, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Read(%s) blocks", p)
		}
	}
}
