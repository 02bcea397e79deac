package main

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/worldbackup/worldbackup/internal/pgtest"
)

// TestRetireLeavesAServerOutOfStatus: a server that left the fleet makes
// status exit 1 until it is retired; retired, it is shown as such and not
// judged, unless a --server names it; its runs stay listed; a name the
// catalog does not know is refused (exit 2); --undo judges it again.
func TestRetireLeavesAServerOutOfStatus(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	args := e.tarBackupArgs("lobby-1")
	args[slices.Index(args, "survival")] = "lobby"
	if r := archiver(t, args...); r.code != 0 {
		t.Fatalf("backup of lobby: exit %d: %s", r.code, r.stderr)
	}
	e.tarBackups(t, "survival-1")
	shiftRun(t, e.url, "lobby-1", -30*24*time.Hour) // lobby left a month ago

	status := func(t *testing.T, extra ...string) (result, map[string]serverStatus) {
		t.Helper()
		r := archiver(t, append([]string{"status", "--config", e.config, "--log-format", "json", "--max-age", "26h", "--json"}, extra...)...)
		var st []serverStatus
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatalf("status: exit %d, stdout %s: %v", r.code, r.stdout, err)
		}
		byName := map[string]serverStatus{}
		for _, s := range st {
			byName[s.Server] = s
		}
		return r, byName
	}
	retire := func(t *testing.T, extra ...string) result {
		t.Helper()
		return archiver(t, append([]string{"retire", "--config", e.config, "--log-format", "json"}, extra...)...)
	}

	if r, st := status(t); r.code != 1 || st["lobby"].OK || !st["survival"].OK {
		t.Fatalf("before the retirement: exit %d, %+v; want 1, lobby stale", r.code, st)
	}
	r := retire(t, "--server", "lobby")
	if r.code != 0 || !strings.Contains(r.stdout, "lobby: retired at ") || !strings.Contains(r.stdout, "1 runs and 0 failed attempts") {
		t.Fatalf("retire: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}

	t.Run("status leaves it unjudged", func(t *testing.T) {
		r, st := status(t)
		if r.code != 0 || !st["lobby"].OK || st["lobby"].RetiredAt == nil || st["lobby"].NewestRun != "lobby-1" {
			t.Errorf("after the retirement: exit %d, %+v; want 0, lobby shown retired with its newest run", r.code, st)
		}
		table := archiver(t, "status", "--config", e.config, "--log-format", "json", "--max-age", "26h")
		if table.code != 0 || !regexp.MustCompile(`(?m)^lobby\s+lobby-1\s.*\sretired 20`).MatchString(table.stdout) {
			t.Errorf("table: exit %d\n%s", table.code, table.stdout)
		}
	})
	t.Run("a --server naming it judges it", func(t *testing.T) {
		if r, st := status(t, "--server", "lobby"); r.code != 1 || st["lobby"].OK || st["lobby"].RetiredAt != nil {
			t.Errorf("status --server lobby: exit %d, %+v; want 1, stale", r.code, st)
		}
	})
	t.Run("its runs stay", func(t *testing.T) {
		if r := archiver(t, "list", "--config", e.config, "--server", "lobby"); r.code != 0 || !strings.Contains(r.stdout, "lobby-1") {
			t.Errorf("list --server lobby: exit %d\n%s", r.code, r.stdout)
		}
	})
	t.Run("an unknown server is refused", func(t *testing.T) {
		r := retire(t, "--server", "lobyy")
		if r.code != 2 || !strings.Contains(r.stderr, "lobyy") || !strings.Contains(r.stderr, "no run and no failed attempt") {
			t.Errorf("retire --server lobyy: exit %d\n%s", r.code, r.stderr)
		}
		if r := retire(t); r.code != 2 || !strings.Contains(r.stderr, "--server is required") {
			t.Errorf("retire without --server: exit %d\n%s", r.code, r.stderr)
		}
		if r := retire(t, "--server", "Lobby"); r.code != 2 {
			t.Errorf("retire --server Lobby: exit %d\n%s", r.code, r.stderr)
		}
	})
	t.Run("undo", func(t *testing.T) {
		if r := retire(t, "--server", "lobby", "--undo"); r.code != 0 || !strings.Contains(r.stdout, "lobby: no longer retired") {
			t.Fatalf("retire --undo: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if r, st := status(t); r.code != 1 || st["lobby"].OK {
			t.Errorf("after --undo: exit %d, %+v; want 1, lobby stale again", r.code, st)
		}
	})
}
