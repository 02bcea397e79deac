package turn

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestGranted: an empty file waits, one that holds "granted" (as the kubelet
// writes an annotation's value, with or without a newline) grants; a file
// that is missing, not a regular file, too big or holds anything else is an
// error that says what the file should be, and is read bounded.
func TestGranted(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o444); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file("target", "granted"), link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		want    bool
		wantErr string
	}{
		{"empty: not yet", file("empty", ""), false, ""},
		{"granted", file("granted", "granted"), true, ""},
		{"granted with a newline", file("granted-nl", "granted\n"), true, ""},
		{"through a symlink, as the kubelet's files are", link, true, ""},
		{"another value", file("other", "later"), false, `holds "later", not the pod's worldbackup.dev/turn annotation`},
		{"too big", file("big", strings.Repeat("x", 1<<20)), false, "holds more than 256 bytes"},
		{"missing", filepath.Join(dir, "nope"), false, "no such file"},
		{"a folder", dir, false, "not a regular file"},
		{"a FIFO: refused, not waited on", fifo, false, "not a regular file"},
		{"a device", "/dev/zero", false, "not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := File{Path: tt.path}.Granted()
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one that says %q", err, tt.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case got != tt.want:
				t.Errorf("granted %v, want %v", got, tt.want)
			}
		})
	}
}

// TestWait: Wait returns once the file is granted, after it was empty; it
// ends with the context's cause when the turn never comes, and at once when
// the file goes wrong.
func TestWait(t *testing.T) {
	t.Run("granted later", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "turn")
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		f := File{Path: p, Poll: 5 * time.Millisecond}
		done := make(chan error, 1)
		go func() { done <- f.Wait(t.Context()) }()
		select {
		case err := <-done:
			t.Fatalf("Wait returned %v before the turn was granted", err)
		case <-time.After(50 * time.Millisecond):
		}
		// The kubelet replaces the file's target atomically; a rename does too.
		tmp := p + ".new"
		if err := os.WriteFile(tmp, []byte("granted"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, p); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Wait did not return after the turn was granted")
		}
	})
	t.Run("never granted: the context's cause", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "turn")
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		cause := errors.New("the Job's deadline")
		ctx, cancel := context.WithTimeoutCause(t.Context(), 30*time.Millisecond, cause)
		defer cancel()
		err := File{Path: p, Poll: 5 * time.Millisecond}.Wait(ctx)
		if !errors.Is(err, cause) || !strings.Contains(err.Error(), "waiting for the run's turn") {
			t.Errorf("error %v, want the context's cause, said as a wait for the turn", err)
		}
	})
	t.Run("the file goes away: an error at once", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "turn")
		err := File{Path: p, Poll: time.Hour}.Wait(t.Context())
		if err == nil || !strings.Contains(err.Error(), "no such file") {
			t.Errorf("error %v, want the missing file", err)
		}
	})
}
