package shard

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/blang/semver"
	"github.com/pulumi/pulumi/sdk/v3/go/auto"
)

// TestClearUnsaved: the unsaved mark goes only when the CLI ended by
// itself (its state saved): a success or an exit code, not a signal or a
// cancelled run.
func TestClearUnsaved(t *testing.T) {
	exitErr := func(script string) error {
		err := exec.CommandContext(t.Context(), "sh", "-c", script).Run()
		if err == nil {
			t.Fatalf("%s: no error", script)
		}
		return err
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		err   error
		clear bool
	}{
		{"success", t.Context(), nil, true},
		{"a failed update", t.Context(), exitErr("exit 255"), true},
		{"killed", t.Context(), exitErr("kill -9 $$"), false},
		{"cancelled", cancelled, exitErr("exit 1"), false},
		{"not started", t.Context(), errors.New("exec: not found"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{WorkDir: t.TempDir()}
			if err := o.markUnsaved("s"); err != nil {
				t.Fatal(err)
			}
			if err := o.clearUnsaved(tc.ctx, "s", tc.err); err != nil {
				t.Fatal(err)
			}
			if o.isUnsaved("s") == tc.clear {
				t.Errorf("after %v: unsaved %v, want %v", tc.err, !tc.clear, !tc.clear)
			}
		})
	}
}

// TestSameConfig: the config read back counts as the one wanted only with
// the same keys, secret flags and values (objects as JSON, in any layout).
func TestSameConfig(t *testing.T) {
	str := func(s string) *string { return &s }
	want := Config{"a:x": {Value: str(`[{"name":"s0","n":1}]`)}, "a:k": {Value: str("v"), Secret: true}}
	for _, tc := range []struct {
		name string
		old  auto.ConfigMap
		same bool
	}{
		{"the same, object in another layout", auto.ConfigMap{"a:x": {Value: `[ {"n": 1, "name": "s0"} ]`}, "a:k": {Value: "v", Secret: true}}, true},
		{"a value differs", auto.ConfigMap{"a:x": {Value: `[{"name":"s1","n":1}]`}, "a:k": {Value: "v", Secret: true}}, false},
		{"array order differs", auto.ConfigMap{"a:x": {Value: `[{"n":1,"name":"s0"},{"name":"s1"}]`}, "a:k": {Value: "v", Secret: true}}, false},
		{"no longer secret", auto.ConfigMap{"a:x": {Value: `[{"name":"s0","n":1}]`}, "a:k": {Value: "v"}}, false},
		{"a secret differs", auto.ConfigMap{"a:x": {Value: `[{"name":"s0","n":1}]`}, "a:k": {Value: "w", Secret: true}}, false},
		{"a key more", auto.ConfigMap{"a:x": {Value: `[{"name":"s0","n":1}]`}, "a:k": {Value: "v", Secret: true}, "a:y": {Value: "1"}}, false},
		{"a key less", auto.ConfigMap{"a:x": {Value: `[{"name":"s0","n":1}]`}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sameConfig(tc.old, want); got != tc.same {
				t.Errorf("sameConfig = %v, want %v", got, tc.same)
			}
		})
	}
}

// TestUpToDate: a shard is skipped only with a recorded fingerprint, the
// same last update, a program ID and no force.
func TestUpToDate(t *testing.T) {
	dir := t.TempDir()
	proj := t.TempDir()
	for p, b := range map[string]string{dir + "/Pulumi.s.yaml": "config: {}\n", proj + "/Pulumi.yaml": "name: p\n"} {
		if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := fakeCLI{}
	o := Options{WorkDir: dir, ProjectDir: proj, ProgramID: "b1", Pulumi: cmd}
	if o.upToDate("s", "t1", auto.ConfigMap{}, Config{}) {
		t.Fatal("up to date before any record")
	}
	if err := o.record("s", "t1"); err != nil {
		t.Fatal(err)
	}
	if !o.upToDate("s", "t1", auto.ConfigMap{}, Config{}) {
		t.Fatal("not up to date right after the record")
	}
	for _, tc := range []struct {
		name string
		mut  func(o *Options) string // the last update
	}{
		{"another last update", func(o *Options) string { return "t2" }},
		{"another program", func(o *Options) string { o.ProgramID = "b2"; return "t1" }},
		{"no program ID", func(o *Options) string { o.ProgramID = ""; return "t1" }},
		{"force", func(o *Options) string { o.Force = true; return "t1" }},
		{"another config", func(o *Options) string { return "t1" }},
		{"the stack file edited (last)", func(o *Options) string {
			if err := os.WriteFile(dir+"/Pulumi.s.yaml", []byte("config: {a: b}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			return "t1"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := o
			want := Config{}
			if tc.name == "another config" {
				s := "v"
				want = Config{"a:k": {Value: &s}}
			}
			if o.upToDate("s", tc.mut(&o), auto.ConfigMap{}, want) {
				t.Errorf("still up to date")
			}
		})
	}
}

// fakeCLI is a Pulumi CLI that only reports its version.
type fakeCLI struct{ auto.PulumiCommand }

func (fakeCLI) Version() semver.Version { return semver.MustParse("3.0.0") }
