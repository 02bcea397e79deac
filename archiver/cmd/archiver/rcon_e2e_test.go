package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/worldbackup/worldbackup/internal/gameserver"
	"github.com/worldbackup/worldbackup/internal/pgtest"
)

const rconPassword = "s3cret-rcon-pw"

// startGame starts the stand-in server on e's world and writes the
// password file.
func startGame(t *testing.T, e *env) (*gameserver.Server, string) {
	t.Helper()
	// The generated world has a region file of its own there: the stand-in
	// writes a fresh one.
	if err := os.Remove(filepath.Join(e.world, "world", gameserver.RegionPath)); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	gs, err := gameserver.Start(filepath.Join(e.world, "world"), "127.0.0.1:0", rconPassword, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gs.Close() })
	pwFile := filepath.Join(t.TempDir(), "rcon-password")
	if err := os.WriteFile(pwFile, []byte(rconPassword+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	return gs, pwFile
}

// regionOf extracts the stand-in's region file from a zstd archive.
func regionOf(t *testing.T, archive string) []byte {
	t.Helper()
	out, err := exec.Command("tar", "--zstd", "-xOf", archive, "world/"+gameserver.RegionPath).Output()
	if err != nil {
		t.Fatalf("extracting the region file: %v", err)
	}
	return out
}

func TestBackupQuiescesOverRcon(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	gs, pwFile := startGame(t, e)

	r := archiver(t, e.backupArgs("q1", "--rcon", gs.Addr(), "--rcon-password-file", pwFile)...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if got := strings.Join(gs.Commands(), ","); got != "save-off,save-all flush,save-on" {
		t.Fatalf("commands %q, want save-off, save-all flush, save-on", got)
	}
	gen, err := gameserver.Generation(regionOf(t, e.archivePath("q1", ".tar.zst")))
	if err != nil {
		t.Fatalf("the archived region file: %v", err)
	}
	if gen != gs.Flushed() {
		t.Fatalf("archived generation %d, but save-all flush wrote %d", gen, gs.Flushed())
	}
	if strings.Contains(r.stderr, rconPassword) {
		t.Fatal("the log holds the rcon password")
	}
	if len(rows(t, e.url)) != 1 {
		t.Fatal("no row")
	}
}

func TestBackupRconFailures(t *testing.T) {
	tests := []struct {
		name      string
		args      func(addr, pwFile string) []string
		wantCode  int
		wantErr   string
		wantRun   bool   // the backup ran and was recorded
		wantCmds  string // commands the server received
		stopFirst bool   // the game server is down
	}{
		{name: "wrong password", args: func(addr, _ string) []string {
			bad := filepath.Join(os.TempDir(), "wb-bad-pw-"+strings.ReplaceAll(addr, ":", "-"))
			os.WriteFile(bad, []byte("wrong"), 0o400)
			return []string{"--rcon", addr, "--rcon-password-file", bad}
		}, wantCode: 1, wantErr: "password refused"},
		{name: "server down, required", stopFirst: true, args: func(addr, pw string) []string {
			return []string{"--rcon", addr, "--rcon-password-file", pw}
		}, wantCode: 1, wantErr: "unreachable"},
		{name: "server down, not required", stopFirst: true, args: func(addr, pw string) []string {
			return []string{"--rcon", addr, "--rcon-password-file", pw, "--rcon-required=false"}
		}, wantCode: 0, wantErr: "backing up without quiescing", wantRun: true},
		{name: "missing password file", args: func(addr, _ string) []string {
			return []string{"--rcon", addr, "--rcon-password-file", "/nonexistent/rcon-password"}
		}, wantCode: 2, wantErr: "reading the rcon password file"},
		{name: "address without password file", args: func(addr, _ string) []string {
			return []string{"--rcon", addr}
		}, wantCode: 2, wantErr: "--rcon needs --rcon-password-file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, pgtest.URL(t))
			generateWorld(t, e.world)
			gs, pwFile := startGame(t, e)
			addr := gs.Addr()
			if tt.stopFirst {
				gs.Close()
			}
			r := archiver(t, e.backupArgs("q1", tt.args(addr, pwFile)...)...)
			if r.code != tt.wantCode || !strings.Contains(r.stderr, tt.wantErr) {
				t.Fatalf("exit %d, want %d with %q:\n%s", r.code, tt.wantCode, tt.wantErr, r.stderr)
			}
			if got := len(rows(t, e.url)); (got == 1) != tt.wantRun {
				t.Fatalf("%d rows, want a run: %v", got, tt.wantRun)
			}
			if !tt.wantRun && len(files(t, filepath.Join(e.root, "survival"))) != 0 {
				t.Fatalf("a failed run left %v", files(t, filepath.Join(e.root, "survival")))
			}
			for _, c := range gs.Commands() {
				if c == "save-off" {
					t.Fatalf("save-off was sent: %v", gs.Commands())
				}
			}
			if strings.Contains(r.stderr, rconPassword) {
				t.Fatal("the log holds the rcon password")
			}
		})
	}
}

// TestBackupTerminatedTurnsAutosaveOn: SIGTERM (the Job's deadline, a
// deleted pod) in the middle of the walk still sends save-on.
func TestBackupTerminatedTurnsAutosaveOn(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	gs, pwFile := startGame(t, e)
	bigSparseFile(t, e.world, 64<<30)

	cmd, stderr := startBackup(t, e, "term", "--rcon", gs.Addr(), "--rcon-password-file", pwFile)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if code := exitCode(t, err); code != 1 {
		t.Fatalf("exit %d after SIGTERM, want 1:\n%s", code, stderr)
	}
	cmds := gs.Commands()
	if len(cmds) == 0 || cmds[0] != "save-off" || cmds[len(cmds)-1] != "save-on" {
		t.Fatalf("commands %q: want save-off first and save-on last", cmds)
	}
	if len(rows(t, e.url)) != 0 || slices.Contains(files(t, filepath.Join(e.root, "survival")), "term.tar.zst") {
		t.Fatal("a terminated run left an archive or a row")
	}
}
