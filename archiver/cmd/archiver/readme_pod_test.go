package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/worldbackup/worldbackup/internal/pgtest"
	"github.com/worldbackup/worldbackup/jobapi"
)

// TestReadmeCatalogPod checks the one-off pod README.md's "Reaching the
// catalog from a laptop" gives kubectl run: its --overrides is a pod spec
// (strictly decoded), mounts the config Secret read-only where the
// archiver's default --config reads it, has no token, env or capability,
// and its args run `archiver list` against a real catalog.
func TestReadmeCatalogPod(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`kubectl -n \S+ run archiver-list [^\n]*\\\n\s+--image=(\S+) --overrides='([^']+)'`).FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no `kubectl run archiver-list ... --overrides='...'` command")
	}
	image := string(m[1])
	dec := json.NewDecoder(bytes.NewReader(m[2]))
	dec.DisallowUnknownFields()
	var pod corev1.Pod
	if err := dec.Decode(&pod); err != nil {
		t.Fatalf("the overrides are not a pod: %v", err)
	}
	spec := pod.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers", len(spec.Containers))
	}
	c := spec.Containers[0]
	if c.Image != image {
		t.Errorf("container image %q differs from --image %q", c.Image, image)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("the pod mounts a service-account token")
	}
	if len(c.Env)+len(c.EnvFrom) > 0 || len(c.Command) > 0 {
		t.Errorf("env %v, command %v: want the image's entrypoint and no environment", c.Env, c.Command)
	}
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("security context %+v: want every capability dropped, no escalation", sc)
	}
	if len(c.VolumeMounts) != 1 || len(spec.Volumes) != 1 || spec.Volumes[0].Secret == nil ||
		c.VolumeMounts[0].Name != spec.Volumes[0].Name || !c.VolumeMounts[0].ReadOnly {
		t.Fatalf("mounts %+v, volumes %+v: want the config Secret, read-only", c.VolumeMounts, spec.Volumes)
	}
	if got := path.Join(c.VolumeMounts[0].MountPath, jobapi.ConfigFileName); got != jobapi.DefaultConfigPath {
		t.Errorf("the Secret's %s is at %s, but the archiver reads %s by default", jobapi.ConfigFileName, got, jobapi.DefaultConfigPath)
	}
	if spec.Volumes[0].Secret.SecretName != "felis-config" {
		t.Errorf("secret %q, want the components' default felis-config", spec.Volumes[0].Secret.SecretName)
	}
	if len(c.Args) == 0 || c.Args[0] != "list" {
		t.Fatalf("args %q: want archiver list", c.Args)
	}
	// The pod's command, with the mounted file's path given explicitly.
	e := newEnv(t, pgtest.URL(t))
	if res := archiver(t, "migrate", "--config", e.config); res.code != 0 {
		t.Fatalf("migrate: %s", res.stderr)
	}
	res := archiver(t, append(append([]string{}, c.Args...), "--config", e.config)...)
	if res.code != 0 || !strings.Contains(res.stdout, "RUN ID") {
		t.Fatalf("archiver %q exited %d:\n%s%s", c.Args, res.code, res.stdout, res.stderr)
	}
}
