package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/worldbackup/worldbackup/internal/gameserver"
	"github.com/worldbackup/worldbackup/internal/pgtest"
	"github.com/worldbackup/worldbackup/jobapi"
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

	r := archiver(t, e.tarBackupArgs("q1", "--rcon", gs.Addr(), "--rcon-password-file", pwFile)...)
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

// hostileRcon is the server of issue 22 item 3b, a real TCP server on
// loopback speaking raw RCON packets: the first connection logs in with
// any password, answers save-off and closes; every later connection (the
// archiver re-dialling for save-on) gets its login answered by an endless
// stream of empty packets. redialed is closed at the second connection.
func hostileRcon(t *testing.T) (addr string, redialed <-chan struct{}) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	packet := func(c net.Conn) (int32, error) {
		var hdr [12]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return 0, err
		}
		n := binary.LittleEndian.Uint32(hdr[0:])
		if n < 10 || n > 1<<16 {
			return 0, errors.New("bad packet")
		}
		if _, err := io.CopyN(io.Discard, c, int64(n-8)); err != nil {
			return 0, err
		}
		return int32(binary.LittleEndian.Uint32(hdr[4:])), nil
	}
	send := func(c net.Conn, id, typ int32, payload string) error {
		b := make([]byte, 14+len(payload))
		binary.LittleEndian.PutUint32(b[0:], uint32(10+len(payload)))
		binary.LittleEndian.PutUint32(b[4:], uint32(id))
		binary.LittleEndian.PutUint32(b[8:], uint32(typ))
		copy(b[12:], payload)
		_, err := c.Write(b)
		return err
	}
	go func() {
		for n := 1; ; n++ {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				id, err := packet(c) // the login
				if err != nil {
					return
				}
				if n > 1 {
					once.Do(func() { close(ch) })
					for send(c, id, 0, "") == nil {
						time.Sleep(time.Millisecond)
					}
					return
				}
				if send(c, id, 2, "") != nil {
					return
				}
				if id, err := packet(c); err == nil { // save-off
					send(c, id, 0, "Automatic saving is now disabled")
				}
			})
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String(), ch
}

// TestBackupTerminatedWhileSaveOnRedials: the server closes after save-off
// and floods every redial's login. SIGTERM (the Job's deadline, a deleted
// pod) ends the save-on retry within its grace: the archiver exits 1, well
// before the pod's 30 s termination grace would end in SIGKILL, and its
// termination message says that autosave is OFF and how to turn it on.
func TestBackupTerminatedWhileSaveOnRedials(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	addr, redialed := hostileRcon(t)
	pwFile := filepath.Join(t.TempDir(), "rcon-password")
	if err := os.WriteFile(pwFile, []byte(rconPassword+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	cmd, done, stderr := startArchiver(t, e.backupArgs("redial", "--rcon", addr, "--rcon-password-file", pwFile)...)
	select {
	case <-redialed:
	case err := <-done:
		t.Fatalf("the backup exited (%v) before re-dialling for save-on:\n%s", err, stderr)
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatalf("the backup never re-dialled for save-on:\n%s", stderr)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The bound: the pod's termination grace period (30 s by default),
	// after which the kubelet kills with SIGKILL and no message is written.
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("still running 30 s after SIGTERM (it would be SIGKILLed without a termination message):\n%s", stderr)
	}
	if code := exitCode(t, err); code != 1 {
		t.Fatalf("exit %d after SIGTERM, want 1:\n%s", code, stderr)
	}
	s := summary(t, e.tlog)
	msg, _ := s["error"].(string)
	t.Logf("termination message error: %s", msg)
	if s["status"] != "failed" || !strings.Contains(msg, "autosave OFF") || !strings.Contains(msg, "save-on") {
		t.Fatalf("termination message %v: want failed, saying autosave is OFF and how to send save-on", s)
	}
	if strings.Contains(stderr.String()+msg, rconPassword) {
		t.Fatal("the output holds the rcon password")
	}
	if len(rows(t, e.url)) != 0 || slices.Contains(files(t, filepath.Join(e.root, "survival")), "redial.tar.zst") {
		t.Fatal("the run left an archive or a row")
	}
}

// TestBackupRconConfigErrors: RCON settings that can never work are
// configuration errors (exit 2) before anything runs, naming the flag or
// the felis.toml key, also with required = false (which before went on
// unquiesced and exited 0).
func TestBackupRconConfigErrors(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "rcon-password")
	long := filepath.Join(dir, "long-password")
	fifo := filepath.Join(dir, "fifo")
	for p, b := range map[string][]byte{pwFile: []byte(rconPassword + "\n"), long: bytes.Repeat([]byte("p"), 5000)} {
		if err := os.WriteFile(p, b, 0o400); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	withRcon := func(name, rcon string) string {
		p := filepath.Join(dir, name+".toml")
		writeConfig(t, p, fmt.Sprintf("[database]\nurl = %q\n[rcon]\n%s\n", e.url, rcon))
		return p
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"flag port not a number", []string{"--rcon", "127.0.0.1:abc", "--rcon-password-file", pwFile, "--rcon-required=false"},
			[]string{"--rcon", `"127.0.0.1:abc"`, "port must be a number from 1 to 65535"}},
		{"flag port too large", []string{"--rcon", "127.0.0.1:99999", "--rcon-password-file", pwFile, "--rcon-required=false"},
			[]string{"--rcon", "port must be"}},
		{"key port not a number", []string{"--config", withRcon("abc", fmt.Sprintf("address = \"127.0.0.1:abc\"\npassword_file = %q\nrequired = false", pwFile))},
			[]string{"abc.toml", "[rcon] address", "port must be"}},
		{"key port too large", []string{"--config", withRcon("big", fmt.Sprintf("address = \"127.0.0.1:99999\"\npassword_file = %q\nrequired = false", pwFile))},
			[]string{"big.toml", "[rcon] address", "port must be"}},
		{"password of 5000 bytes", []string{"--rcon", "127.0.0.1:25575", "--rcon-password-file", long},
			[]string{"--rcon-password-file", "larger than 4096 bytes"}},
		{"password file a device", []string{"--rcon", "127.0.0.1:25575", "--rcon-password-file", "/dev/zero"},
			[]string{"--rcon-password-file", "/dev/zero", "not a regular file"}},
		{"password file a fifo", []string{"--rcon", "127.0.0.1:25575", "--rcon-password-file", fifo},
			[]string{"--rcon-password-file", "not a regular file"}},
		{"key password file a device", []string{"--config", withRcon("dev", "address = \"127.0.0.1:25575\"\npassword_file = \"/dev/zero\"")},
			[]string{"dev.toml", "[rcon] password_file", "not a regular file"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := archiver(t, e.backupArgs(fmt.Sprintf("cfg%d", i), tt.args...)...)
			out := r.stderr
			if b, err := os.ReadFile(e.tlog); err == nil {
				out += string(b)
			}
			if r.code != 2 {
				t.Fatalf("exit %d, want 2:\n%s", r.code, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, rconPassword) {
				t.Error("the output holds the rcon password")
			}
		})
	}
	if n := len(rows(t, e.url)); n != 0 {
		t.Fatalf("%d runs recorded, want none", n)
	}
}

// TestChunkedBackupPlantedFIFO: a FIFO planted in a folder store at the
// previous chunked run's manifest blocked the backup in open(2) with the
// game's autosave off, past its deadline and SIGTERM (a blocked open heeds
// no context). Now it is refused at once: the run warns, stores every file
// again, and turns autosave back on.
func TestChunkedBackupPlantedFIFO(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	gs, pwFile := startGame(t, e)
	if r := archiver(t, e.backupArgs("c1")...); r.code != 0 {
		t.Fatalf("first backup: exit %d: %s", r.code, r.stderr)
	}
	key, err := jobapi.ManifestKey("survival", "c1")
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(e.root, key)
	if err := os.Remove(manifest); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	_, done, stderr := startArchiver(t, e.backupArgs("c2", "--rcon", gs.Addr(), "--rcon-password-file", pwFile)...)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("second backup: %v: %s", err, stderr)
		}
	case <-time.After(2 * time.Minute): // a hang guard, not a timing assert
		t.Fatalf("the backup blocked on the FIFO; commands so far %q", gs.Commands())
	}
	if got := strings.Join(gs.Commands(), ","); got != "save-off,save-all flush,save-on" {
		t.Fatalf("commands %q, want save-off, save-all flush, save-on", got)
	}
	if !strings.Contains(stderr.String(), "cannot be read") || !strings.Contains(stderr.String(), "not a regular file") {
		t.Fatalf("the log does not say the previous run cannot be read, as it is not a regular file:\n%s", stderr)
	}
}
