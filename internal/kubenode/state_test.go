package kubenode

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/worldbackup/worldbackup/internal/testenv"
)

// TestTeardownUndoesEverything gives teardown a state file like a crashed
// node's (a process group, a container-like process in the node's cgroup,
// mounts under the node's folder and under a fixed path it created, a
// bridge, a changed sysctl) and checks that nothing is left, and that a
// process whose PID matches but start time does not (a reused PID) lives.
func TestTeardownUndoesEverything(t *testing.T) {
	testenv.RequireRoot(t, "teardown unmounts, deletes a bridge and cgroups and writes sysctls")
	testenv.RequireCommands(t, "iproute2 coreutils", "ip", "sleep")
	base := t.TempDir()
	s := &state{
		Dir:     filepath.Join(base, "node"),
		Bridge:  "wbktest0",
		Cgroup:  "worldbackup-kubenode-test",
		Created: []string{filepath.Join(base, "fixed")},
		Sysctls: map[string]string{},
		path:    filepath.Join(base, "state.json"),
	}
	for _, d := range []string{s.Dir + "/mnt", s.Created[0] + "/mnt"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("tmpfs", d, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatalf("mounting a tmpfs at %s: %v", d, err)
		}
	}
	t.Cleanup(func() { _ = unmountUnder([]string{base}) })

	if out, err := exec.Command("ip", "link", "add", s.Bridge, "type", "bridge").CombinedOutput(); err != nil {
		t.Fatalf("creating bridge: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "delete", s.Bridge).Run() })

	const key = "vm.overcommit_memory"
	orig, err := readSysctl(key)
	if err != nil {
		t.Fatal(err)
	}
	s.Sysctls[key] = orig
	changed := "1"
	if orig == "1" {
		changed = "0"
	}
	if err := os.WriteFile(sysctlPath(key), []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = writeSysctl(key, orig) })

	group := sleeper(t, true)
	s.Procs = append(s.Procs, proc{Name: "component", PID: group.Process.Pid, Start: startTime(group.Process.Pid)})
	reused := sleeper(t, false)
	s.Procs = append(s.Procs, proc{Name: "gone", PID: reused.Process.Pid, Start: startTime(reused.Process.Pid) + 1})

	hier, _ := filepath.Glob("/sys/fs/cgroup/pids/cgroup.procs")
	var cg string
	if len(hier) == 1 {
		cg = filepath.Join("/sys/fs/cgroup/pids", s.Cgroup, "pod1")
	} else {
		cg = filepath.Join("/sys/fs/cgroup", s.Cgroup, "pod1")
	}
	if err := os.MkdirAll(cg, 0o755); err != nil {
		t.Fatalf("creating cgroup %s: %v", cg, err)
	}
	container := sleeper(t, false)
	if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(container.Process.Pid)), 0o644); err != nil {
		t.Fatalf("moving a process into %s: %v", cg, err)
	}
	if err := s.save(); err != nil {
		t.Fatal(err)
	}

	if err := cleanStale(s.path, t.Logf); err != nil {
		t.Fatalf("teardown: %v", err)
	}

	for name, cmd := range map[string]sleeping{"component": group, "container": container} {
		if cmd.alive() {
			t.Errorf("the %s process %d is still running", name, cmd.Process.Pid)
		}
	}
	if !reused.alive() {
		t.Error("teardown killed a process whose PID was reused (start time differs)")
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), base) {
		t.Errorf("mounts left under %s", base)
	}
	for _, p := range []string{s.Dir, s.Created[0], filepath.Dir(cg), s.path} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s is still there", p)
		}
	}
	if exec.Command("ip", "link", "show", s.Bridge).Run() == nil {
		t.Errorf("bridge %s is still there", s.Bridge)
	}
	if v, _ := readSysctl(key); v != orig {
		t.Errorf("%s = %s, want it restored to %s", key, v, orig)
	}
	if err := cleanStale(s.path, t.Logf); err != nil {
		t.Errorf("a second cleanup with no state file: %v", err)
	}
}

// sleeping is a process that lives until killed (or the test ends).
type sleeping struct {
	*exec.Cmd
	done chan struct{} // closed once it has exited and been reaped
}

func sleeper(t *testing.T, group bool) sleeping {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: group}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := sleeping{cmd, make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-s.done
	})
	return s
}

func (s sleeping) alive() bool {
	select {
	case <-s.done:
		return false
	case <-time.After(2 * time.Second):
		return true
	}
}
