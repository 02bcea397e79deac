package main

import (
	"strings"
	"testing"
	"time"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/internal/pgtest"
)

// TestBackupWaitsForSlot: with --concurrency 1, a backup does nothing (no
// archive, no row) while another holds its group's one slot in the catalog,
// and runs once the slot is given back; the wait is logged and is not part
// of the run's duration. Flags that cannot make a cap are usage errors.
func TestBackupWaitsForSlot(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	db, err := catalog.Open(t.Context(), e.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	const group = "https://10.0.0.1:6443"
	release, err := db.Slots(group, 1).Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	_, done, stderr := startArchiver(t, e.backupArgs("slot-1", "--concurrency", "1", "--concurrency-group", group)...)
	const held = time.Second
	select {
	case err := <-done:
		t.Fatalf("the backup ended (%v) while the group's one slot was held:\n%s", err, stderr.String())
	case <-time.After(held):
	}
	if rs := rows(t, e.url); len(rs) != 0 {
		t.Fatalf("%d rows before the slot was free", len(rs))
	}
	if got := files(t, e.root); len(got) != 0 {
		t.Fatalf("the archive root holds %q before the slot was free", got)
	}
	release()
	select {
	case err := <-done:
		if code := exitCode(t, err); code != 0 {
			t.Fatalf("exited %d:\n%s", code, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("the backup did not run after the slot was free:\n%s", stderr.String())
	}
	log := stderr.String()
	for _, want := range []string{`"waiting for the run's turn"`, `"the run's turn has come"`, `"waited_seconds"`} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %s:\n%s", want, log)
		}
	}
	if rs := rows(t, e.url); len(rs) != 1 {
		t.Fatalf("%d rows after the slot was free, want 1", len(rs))
	}
	if d, ok := summary(t, e.tlog)["duration_seconds"].(float64); !ok || d >= held.Seconds() {
		t.Errorf("duration_seconds %v, want the run's own time, under the %s it waited", d, held)
	}
	// The slot is the run's: the next backup of the group takes it at once.
	if res := archiver(t, e.backupArgs("slot-2", "--concurrency", "1", "--concurrency-group", group)...); res.code != 0 {
		t.Fatalf("the next backup of the group exited %d:\n%s", res.code, res.stderr)
	}

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"too many", []string{"--concurrency", "1001", "--concurrency-group", "g"}, "from 1 to 1000"},
		{"negative", []string{"--concurrency", "-1", "--concurrency-group", "g"}, "from 1 to 1000"},
		{"no group", []string{"--concurrency", "2"}, "needs --concurrency-group"},
		{"a group without a cap", []string{"--concurrency-group", "g"}, "without --concurrency"},
		{"a group too long", []string{"--concurrency", "2", "--concurrency-group", strings.Repeat("g", 257)}, "more than 256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := archiver(t, e.backupArgs("slot-bad", tt.args...)...)
			if res.code != 2 || !strings.Contains(res.stderr, tt.want) {
				t.Errorf("exited %d, want 2 with an error that says %q:\n%s", res.code, tt.want, res.stderr)
			}
		})
	}
}
