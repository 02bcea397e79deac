package kubenode

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The fixed place where a node leaves what a later run needs to clean up
// after it: a lock held by the test binary owning the node, and the state
// file saying what the node changed on the host. /run is a tmpfs, so a reboot
// clears it together with everything it describes but the fixed host paths.
const (
	runDir    = "/run/worldbackup-kubenode"
	lockPath  = runDir + "/lock"
	statePath = runDir + "/state.json"
	reaperLog = runDir + "/reaper.log"
)

// hostPaths are the fixed host paths that the kubelet, containerd and the CNI
// plugins write whatever their flags say. Those that did not exist before
// the node started are removed with it.
var hostPaths = []string{
	"/var/lib/kubelet",
	"/var/log/containers",
	"/var/log/pods",
	"/var/lib/cni",
	"/run/containerd",
	"/run/netns",
	"/opt/containerd",
	"/var/run/kubernetes",
}

// sysctls are the kernel settings that the kubelet (kernel.*, vm.*) and the
// bridge plugin (ip_forward) change; the node restores them.
var sysctls = []string{
	"kernel.panic",
	"kernel.panic_on_oops",
	"vm.overcommit_memory",
	"net.ipv4.ip_forward",
}

// state is what the node changed on this host, saved before each change so
// that a crashed run can be undone by the next one (or by the reaper).
type state struct {
	Dir      string            `json:"dir"`     // the node's temp folder
	Bridge   string            `json:"bridge"`  // the bridge to delete
	Procs    []proc            `json:"procs"`   // processes started, in order
	Bins     []string          `json:"bins"`    // binaries whose processes are ours wherever they run (shims)
	Sysctls  map[string]string `json:"sysctls"` // original values
	Created  []string          `json:"created"` // fixed host paths that did not exist before
	Cgroup   string            `json:"cgroup"`  // the kubelet's cgroup root (cgroupRoot), the node's own
	OwnerPID int               `json:"ownerPid"`

	path string // the state file (statePath; a test's own elsewhere)
}

// proc is one started process, identified by PID and start time so that a
// reused PID is never killed.
type proc struct {
	Name  string `json:"name"`
	PID   int    `json:"pid"`
	Start uint64 `json:"start"` // /proc/PID/stat field 22
}

// save writes the state file atomically.
func (s *state) save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("saving the node state: %w", err)
	}
	return nil
}

func loadState(path string) (*state, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := state{path: path}
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return &s, nil
}

// lock takes the machine-wide node lock, waiting for another test binary's
// node to be torn down. The lock is released when the returned file is
// closed or the process dies (it is not inherited by children).
func lock() (*os.File, error) {
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", runDir, err)
	}
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the node lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("taking the node lock %s: %w", lockPath, err)
	}
	return f, nil
}

// cleanStale undoes what a node left behind when its test binary died
// without tearing it down. Call it with the lock held.
func cleanStale(path string, log func(string, ...any)) error {
	s, err := loadState(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	log("kubenode: cleaning up after a node left by process %d (%s)", s.OwnerPID, s.Dir)
	return s.teardown(log)
}

// teardown undoes everything the state records and removes the state file:
// every process killed (the kubelet first, so it restarts nothing), every
// mount under the node's folders unmounted, the cgroups, bridge and fixed
// paths removed, the sysctls restored. It goes on after an error and
// reports them all.
func (s *state) teardown(log func(string, ...any)) error {
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	// The kubelet first, then the containers and their shims, then
	// containerd and the control plane, newest first.
	byName := func(name string) []proc {
		var ps []proc
		for _, p := range s.Procs {
			if p.Name == name {
				ps = append(ps, p)
			}
		}
		return ps
	}
	stopProcs(byName("kubelet"), 5*time.Second)
	keep(killCgroupTasks(s.Cgroup))
	keep(killByExe(s.Bins))
	rest := slices.Clone(s.Procs)
	slices.Reverse(rest)
	stopProcs(rest, 3*time.Second)  // the data is thrown away: no need for a graceful shutdown
	keep(killCgroupTasks(s.Cgroup)) // anything a dying shim left

	// Only the folders the node made: a fixed path that existed before may
	// belong to something else on the machine.
	roots := slices.Clone(s.Created)
	if s.Dir != "" {
		roots = append(roots, s.Dir)
	}
	keep(unmountUnder(roots))
	keep(removeCgroups(s.Cgroup))
	if s.Bridge != "" {
		if err := exec.Command("ip", "link", "show", s.Bridge).Run(); err == nil {
			if out, err := exec.Command("ip", "link", "delete", s.Bridge).CombinedOutput(); err != nil {
				keep(fmt.Errorf("deleting bridge %s: %v: %s", s.Bridge, err, out))
			}
		}
	}
	for _, k := range sysctls {
		if v, ok := s.Sysctls[k]; ok {
			keep(writeSysctl(k, v))
		}
	}
	for _, p := range s.Created {
		keep(os.RemoveAll(p))
	}
	if s.Dir != "" {
		keep(os.RemoveAll(s.Dir))
	}
	if len(errs) == 0 {
		keep(os.Remove(s.path))
	}
	err := errors.Join(errs...)
	if err != nil {
		log("kubenode: teardown left something behind: %v", err)
	}
	return err
}

// startTime is field 22 of /proc/PID/stat, the process's start time in
// clock ticks since boot; 0 when the process does not exist.
func startTime(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || f[0] == "Z" { // a zombie has exited
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}

func (p proc) alive() bool { return p.PID > 0 && startTime(p.PID) == p.Start }

// stopProcs sends SIGTERM to each live process's group (each was started as
// a group leader), waits up to grace for them all to exit, then kills what
// is left.
func stopProcs(ps []proc, grace time.Duration) {
	var live []proc
	for _, p := range ps {
		if p.alive() {
			_ = syscall.Kill(-p.PID, syscall.SIGTERM)
			live = append(live, p)
		}
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		live = slices.DeleteFunc(live, func(p proc) bool { return !p.alive() })
		if len(live) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, p := range live {
		if p.alive() {
			_ = syscall.Kill(-p.PID, syscall.SIGKILL)
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	}
	for _, p := range live {
		for i := 0; i < 50 && p.alive(); i++ {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// killByExe kills every process whose executable is one of bins (resolved
// paths): the containerd shims, which daemonize out of containerd's group.
func killByExe(bins []string) error {
	if len(bins) == 0 {
		return nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		exe, err := os.Readlink("/proc/" + e.Name() + "/exe")
		if err != nil {
			continue
		}
		if slices.Contains(bins, strings.TrimSuffix(exe, " (deleted)")) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return nil
}

// cgroupDirs lists every cgroup folder named root (and below it) in every
// v1 hierarchy and in a v2 mount, deepest first.
func cgroupDirs(root string) []string {
	if root == "" {
		return nil
	}
	var dirs []string
	tops, _ := filepath.Glob("/sys/fs/cgroup/*/" + root)
	if fi, err := os.Stat("/sys/fs/cgroup/" + root); err == nil && fi.IsDir() {
		tops = append(tops, "/sys/fs/cgroup/"+root)
	}
	for _, top := range tops {
		_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	return dirs
}

// killCgroupTasks kills every process in the kubelet's cgroups (the
// containers), a few rounds in case one forks while dying.
func killCgroupTasks(root string) error {
	for round := 0; round < 20; round++ {
		found := false
		for _, d := range cgroupDirs(root) {
			b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
					found = true
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		// A frozen cgroup (freezer) never lets SIGKILL through: thaw it.
		for _, d := range cgroupDirs(root) {
			if strings.Contains(d, "/freezer/") {
				_ = os.WriteFile(filepath.Join(d, "freezer.state"), []byte("THAWED"), 0o644)
			}
		}
		if !found {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("processes still running in the %s cgroups after SIGKILL", root)
}

// removeCgroups removes the kubelet's cgroup folders, deepest first.
func removeCgroups(root string) error {
	var errs []error
	for _, d := range cgroupDirs(root) {
		var err error
		for i := 0; i < 20; i++ {
			if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
				err = nil
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// unmountUnder detaches every mount whose mount point is at or below one of
// roots, deepest first.
func unmountUnder(roots []string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var points []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		for _, r := range roots {
			if mp == r || strings.HasPrefix(mp, strings.TrimSuffix(r, "/")+"/") {
				points = append(points, mp)
				break
			}
		}
	}
	f.Close()
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading /proc/self/mountinfo: %w", err)
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMount decodes the octal escapes (\040 for a space) of mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func sysctlPath(key string) string {
	return "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
}

func readSysctl(key string) (string, error) {
	b, err := os.ReadFile(sysctlPath(key))
	if err != nil {
		return "", fmt.Errorf("reading sysctl %s: %w", key, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func writeSysctl(key, value string) error {
	if cur, err := readSysctl(key); err == nil && cur == value {
		return nil
	}
	if err := os.WriteFile(sysctlPath(key), []byte(value), 0o644); err != nil {
		return fmt.Errorf("restoring sysctl %s=%s: %w", key, value, err)
	}
	return nil
}
