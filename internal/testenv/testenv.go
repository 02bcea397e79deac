// Package testenv decides what a test does when something it needs from the
// machine is missing (root, a command, a service): under CI=true it fails,
// naming what is missing and the command that installs it, because CI must
// never pass by skipping; elsewhere it skips with the same words, so a
// developer without root or a package can still run the rest.
package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// InCI reports whether the tests run in CI (CI=true), where nothing may skip.
func InCI() bool { return os.Getenv("CI") == "true" }

// Require fails (in CI) or skips (elsewhere) the test unless ok. what says
// what is missing, fix how to get it.
func Require(tb testing.TB, ok bool, what, fix string) {
	tb.Helper()
	if ok {
		return
	}
	msg := what
	if fix != "" {
		msg += ": " + fix
	}
	if InCI() {
		tb.Fatalf("%s (required when CI=true)", msg)
		return
	}
	tb.Skip(msg)
}

// RequireRoot needs the test process to run as root.
func RequireRoot(tb testing.TB, why string) {
	tb.Helper()
	Require(tb, os.Geteuid() == 0, "needs root ("+why+")", "run the tests as root, e.g. sudo -E make test")
}

// RequireCommands needs every command on PATH; pkg is the Debian package
// list that provides them.
func RequireCommands(tb testing.TB, pkg string, names ...string) {
	tb.Helper()
	var missing []string
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			missing = append(missing, n)
		}
	}
	Require(tb, len(missing) == 0, "not on PATH: "+strings.Join(missing, ", "), "apt-get install -y "+pkg)
}
