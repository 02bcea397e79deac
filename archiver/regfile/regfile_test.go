package regfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("content"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		wantErr error // nil: opens and reads "content"
	}{
		{"regular file", file, nil},
		{"symbolic link to one", link, nil},
		{"missing", filepath.Join(dir, "missing"), fs.ErrNotExist},
		{"fifo without a writer", fifo, ErrNotRegular},
		{"device", "/dev/zero", ErrNotRegular},
		{"folder", dir, ErrNotRegular},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				f, err := Open(tt.path)
				if err == nil {
					var b []byte
					b, err = io.ReadAll(f)
					f.Close()
					if err == nil && string(b) != "content" {
						err = errors.New("read " + string(b))
					}
				}
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute): // a hang guard, not a timing assert
				t.Fatal("Open blocked")
			}
			if (tt.wantErr == nil) != (err == nil) || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Fatalf("Open(%s): %v, want %v", tt.path, err, tt.wantErr)
			}
		})
	}
}
