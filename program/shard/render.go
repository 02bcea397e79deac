package shard

// Render mode (worldbackup:renderDir) is where a fleet's size is felt:
// every resource is a file the Kubernetes provider writes into the render
// folder, nothing in a cluster. Two things follow from that, and only there:
//
//   - The shards run with PULUMI_SKIP_CHECKPOINTS: the state is saved once
//     when the CLI ends (also when the update fails), not after each step.
//     What a checkpoint protects is lost only when the CLI is killed; in
//     render mode the next up then recreates what the state missed, and
//     recreating a file overwrites it (the provider's create is a write, its
//     delete tolerates a missing file). The one thing it could not undo is
//     a file of a resource that the killed up created and that the next
//     config no longer declares. So a shard is marked unsaved while its CLI
//     runs, and a shard still marked at the next up or destroy is first
//     brought up again with the config it was killed with (its stack file
//     still holds it), which puts every file it wrote back in its state.
//   - An up whose shard has nothing new to do is skipped: after an up that
//     succeeded, the fleet records a fingerprint of what decided it (the
//     shard's stack file, the project file, the program's binary, the CLI's
//     version) and the stack's last update; the next up whose shard config
//     is the same (read back through the CLI, secrets compared in the clear
//     and never written) and whose fingerprint and last update match skips
//     the shard. That sees what `pulumi up` sees (neither looks at the
//     rendered files); Options.Force (fleet -force) runs every shard anyway.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
)

// envSkipCheckpoints is the CLI's switch that saves the state once, at the
// end of an update.
const envSkipCheckpoints = "PULUMI_SKIP_CHECKPOINTS"

// unsavedPath marks the shard name whose CLI is running without
// checkpoints (render mode).
func (o Options) unsavedPath(name string) string {
	return filepath.Join(o.WorkDir, name+".unsaved")
}

// appliedPath records the fingerprint of the shard name's last successful up.
func (o Options) appliedPath(name string) string {
	return filepath.Join(o.WorkDir, name+".applied")
}

// markUnsaved marks name as running without checkpoints.
func (o Options) markUnsaved(name string) error {
	return os.WriteFile(o.unsavedPath(name), []byte("the CLI of this shard ran without checkpoints and did not end: the next up or destroy brings it up again first\n"), 0o644)
}

// isUnsaved reports whether name's last CLI run was killed.
func (o Options) isUnsaved(name string) bool {
	_, err := os.Stat(o.unsavedPath(name))
	return err == nil
}

// clearUnsaved removes name's mark when its CLI ended by itself, so its
// state was saved: err is nil or a non-zero exit, not a signal or a
// cancelled context.
func (o Options) clearUnsaved(ctx context.Context, name string, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	var exit *exec.ExitError
	if err != nil && (!errors.As(err, &exit) || exit.ExitCode() < 0) {
		return nil
	}
	return os.Remove(o.unsavedPath(name))
}

// applied is what appliedPath holds.
type applied struct {
	Fingerprint string `json:"fingerprint"`
	LastUpdate  string `json:"lastUpdate"` // as `pulumi stack ls` gives it after the up
}

// fingerprint hashes what decides shard name's up besides its config
// values: its stack file (secrets only as ciphertext), the project file,
// the program's binary (Options.ProgramID) and the CLI's version.
func (o Options) fingerprint(name string) (string, error) {
	h := sha256.New()
	for _, p := range []string{o.stackFile(name), filepath.Join(o.ProjectDir, "Pulumi.yaml")} {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(p), len(b))
		h.Write(b)
	}
	fmt.Fprintf(h, "program %s\ncli %s\n", o.ProgramID, o.Pulumi.Version())
	return hex.EncodeToString(h.Sum(nil)), nil
}

// record writes name's fingerprint after a successful up.
func (o Options) record(name, lastUpdate string) error {
	fp, err := o.fingerprint(name)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(applied{Fingerprint: fp, LastUpdate: lastUpdate})
	return os.WriteFile(o.appliedPath(name), b, 0o644)
}

// upToDate reports whether shard name, whose stack's last update is
// lastUpdate and whose config is old, would be brought up with want and
// nothing else changed since its last successful up.
func (o Options) upToDate(name, lastUpdate string, old auto.ConfigMap, want Config) bool {
	if o.Force || o.ProgramID == "" || lastUpdate == "" || !sameConfig(old, want) {
		return false
	}
	b, err := os.ReadFile(o.appliedPath(name))
	if err != nil {
		return false
	}
	var a applied
	if json.Unmarshal(b, &a) != nil || a.LastUpdate != lastUpdate {
		return false
	}
	fp, err := o.fingerprint(name)
	return err == nil && fp == a.Fingerprint
}

// sameConfig reports whether old (as the CLI reads it back) holds exactly
// want: the same keys, secret flags and values, objects compared as JSON.
func sameConfig(old auto.ConfigMap, want Config) bool {
	if len(old) != len(want) {
		return false
	}
	for k, w := range want {
		o, ok := old[k]
		if !ok || o.Secret != w.Secret || w.Value == nil || !sameValue(o.Value, *w.Value) {
			return false
		}
	}
	return true
}

// sameValue compares two config texts, as JSON when both are JSON (the CLI
// prints an object in its own layout).
func sameValue(a, b string) bool {
	if a == b {
		return true
	}
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// ExecutableID is a hash of the running binary, the ProgramID of a fleet
// whose program is compiled in (a rebuilt program with other code differs).
func ExecutableID() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	f, err := os.Open(exe)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hashing %s: %w", exe, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
