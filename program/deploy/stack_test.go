package deploy_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/internal/jobrun"
	"github.com/worldbackup/worldbackup/internal/pgtest"
	"github.com/worldbackup/worldbackup/internal/stacktest"
	"github.com/worldbackup/worldbackup/internal/worldgen"
	"github.com/worldbackup/worldbackup/program/deploy"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const testImage = "registry.example/worldbackup/archiver:test"

// baseConfig is two servers in two clusters, rendered into renderDir.
func baseConfig(renderDir, runID string) map[string]string {
	return map[string]string{
		"worldbackup:image":                  testImage,
		"worldbackup:backupClaim":            "backups",
		"worldbackup:runId":                  runID,
		"worldbackup:renderDir":              renderDir,
		"worldbackup:servers[0].name":        "lobby",
		"worldbackup:servers[1].name":        "survival",
		"worldbackup:servers[1].formerOwner": "steve",
		"worldbackup:clusters[0].name":       "eu",
		"worldbackup:clusters[1].name":       "us",
		"worldbackup:clusters[1].namespace":  "games",
	}
}

// rendered lists the Job manifests under dir, by cluster sub-folder.
func rendered(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*", "1-manifest", "batch_v1-job-*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return files
}

func readJob(t *testing.T, path string) *batchv1.Job {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	job, err := jobrun.ParseJob(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return job
}

type backupOut struct{ cluster, server, runID, namespace, jobName, archiveRef string }

func outputs(t *testing.T, out auto.OutputMap) []backupOut {
	t.Helper()
	list, ok := out["backups"].Value.([]any)
	if !ok {
		t.Fatalf("stack output backups is %T, want a list", out["backups"].Value)
	}
	var res []backupOut
	for _, e := range list {
		m := e.(map[string]any)
		s := func(k string) string { v, _ := m[k].(string); return v }
		res = append(res, backupOut{s("cluster"), s("server"), s("runId"), s("namespace"), s("jobName"), s("archiveRef")})
	}
	return res
}

// TestStackRenderLifecycle drives the real CLI and engine with the real
// Kubernetes provider in render mode: up, up unchanged, up with a new run
// ID, destroy.
func TestStackRenderLifecycle(t *testing.T) {
	tools := stacktest.Require(t)
	ctx := t.Context()
	renderDir := t.TempDir()
	stack := tools.InlineStack(t, "render", deploy.Program, baseConfig(renderDir, "r1"))

	up, err := stack.Up(ctx, optup.ProgressStreams(io.Discard))
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	files := rendered(t, renderDir)
	if len(files) != 4 {
		t.Fatalf("up rendered %d Job manifests, want 4 (2 servers × 2 clusters): %v", len(files), files)
	}
	outs := outputs(t, up.Outputs)
	if len(outs) != 4 {
		t.Fatalf("stack exports %d backups, want 4: %+v", len(outs), outs)
	}
	for _, o := range outs {
		want := filepath.Join(renderDir, o.cluster, "1-manifest", fmt.Sprintf("batch_v1-job-%s-%s.yaml", o.namespace, o.jobName))
		if !slices.Contains(files, want) {
			t.Errorf("backup %+v: no manifest at %s", o, want)
			continue
		}
		job := readJob(t, want)
		checkContract(t, job, o)
	}

	t.Run("up unchanged performs no run", func(t *testing.T) {
		res, err := stack.Up(ctx, optup.ProgressStreams(io.Discard))
		if err != nil {
			t.Fatalf("up: %v", err)
		}
		changes := *res.Summary.ResourceChanges
		for op, n := range changes {
			if op != "same" && n > 0 {
				t.Errorf("second up with the same run ID: %d resources %s, want all same (%v)", n, op, changes)
			}
		}
	})

	t.Run("new run ID replaces every Job", func(t *testing.T) {
		stacktest.SetConfig(t, stack, baseConfig(renderDir, "r2"))
		res, err := stack.Up(ctx, optup.ProgressStreams(io.Discard))
		if err != nil {
			t.Fatalf("up: %v", err)
		}
		if got := (*res.Summary.ResourceChanges)["replace"]; got != 4 {
			t.Errorf("up with a new run ID replaced %d resources, want 4 (%v)", got, *res.Summary.ResourceChanges)
		}
		files := rendered(t, renderDir)
		if len(files) != 4 {
			t.Fatalf("after the new run, %d Job manifests, want 4 (old ones removed): %v", len(files), files)
		}
		for _, f := range files {
			args := containerArgs(readJob(t, f))
			i := slices.Index(args, "--run-id")
			if i < 0 || i+1 == len(args) || !strings.HasSuffix(args[i+1], ".r2") {
				t.Errorf("%s does not run the new run r2: %v", f, args)
			}
		}
	})

	t.Run("destroy is clean", func(t *testing.T) {
		if _, err := stack.Destroy(ctx, optdestroy.ProgressStreams(io.Discard)); err != nil {
			t.Fatalf("destroy: %v", err)
		}
		if files := rendered(t, renderDir); len(files) != 0 {
			t.Errorf("destroy left manifests: %v", files)
		}
	})
}

func containerArgs(job *batchv1.Job) []string {
	return job.Spec.Template.Spec.Containers[0].Args
}

// checkContract checks the rendered Job against the Job contract: the parts
// that the component's unit tests check in depth, here as the real provider
// rendered them.
func checkContract(t *testing.T, job *batchv1.Job, o backupOut) {
	t.Helper()
	pod := job.Spec.Template.Spec
	args := strings.Join(containerArgs(job), " ")
	for _, want := range []string{"backup", "--server " + o.server, "--run-id " + o.runID, "--world /world", "--config /etc/felis/felis.toml", "--archive-root /backups"} {
		if !strings.Contains(args, want) {
			t.Errorf("%s: args %q lack %q", job.Name, args, want)
		}
	}
	if o.runID != deploy.RunID(o.cluster, o.server, strings.TrimPrefix(o.runID, o.cluster+"."+o.server+".")) {
		t.Errorf("%s: run ID %q is not derived from cluster and server", job.Name, o.runID)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("%s: automountServiceAccountToken is not false", job.Name)
	}
	if pod.RestartPolicy != "Never" {
		t.Errorf("%s: restartPolicy %q, want Never", job.Name, pod.RestartPolicy)
	}
	if job.Namespace != o.namespace {
		t.Errorf("%s: namespace %q, want %q", job.Name, job.Namespace, o.namespace)
	}
	if c := pod.Containers[0]; c.Image != testImage {
		t.Errorf("%s: image %q, want %q", job.Name, c.Image, testImage)
	}
	for _, e := range pod.Containers[0].Env {
		if strings.Contains(strings.ToLower(e.Value), "postgres://") {
			t.Errorf("%s: env %s carries a database URL", job.Name, e.Name)
		}
	}
	if strings.Contains(args, "postgres://") {
		t.Errorf("%s: args carry a database URL", job.Name)
	}
	// The lifecycle: a failed pod fails the Job at once (BackoffLimitExceeded,
	// which the provider's await recognises), the finished Job stays, and in
	// render mode there is no replaceUnready (no live Job to check).
	if bl := job.Spec.BackoffLimit; bl == nil || *bl != 0 {
		t.Errorf("%s: backoffLimit %v, want 0", job.Name, bl)
	}
	if ttl := job.Spec.TTLSecondsAfterFinished; ttl != nil {
		t.Errorf("%s: ttlSecondsAfterFinished %d, want none", job.Name, *ttl)
	}
	for _, r := range job.Spec.PodFailurePolicy.Rules {
		if r.Action == batchv1.PodFailurePolicyActionFailJob {
			t.Errorf("%s: a FailJob rule ends the Job with reason PodFailurePolicy, which pulumi up does not recognise", job.Name)
		}
	}
	if _, ok := job.Annotations["pulumi.com/replaceUnready"]; ok {
		t.Errorf("%s: replaceUnready in render mode", job.Name)
	}
	aff := pod.Affinity
	if aff == nil || aff.PodAffinity == nil || len(aff.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Errorf("%s: no preferred pod affinity to the game pod: %+v", job.Name, aff)
	} else if term := aff.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm; term.TopologyKey != "kubernetes.io/hostname" ||
		term.LabelSelector.MatchLabels["statefulset.kubernetes.io/pod-name"] != o.server+"-0" {
		t.Errorf("%s: pod affinity term %+v, want %s-0 on the same node", job.Name, term, o.server)
	}
}

// TestStackBadConfig: preview fails with a message that says what to fix.
func TestStackBadConfig(t *testing.T) {
	tools := stacktest.Require(t)
	renderDir := t.TempDir()
	tests := []struct {
		name string
		edit func(map[string]string)
		want string
	}{
		{"unknown key", func(c map[string]string) { c["worldbackup:runid"] = "x" }, "worldbackup:runid"},
		{"empty server list", func(c map[string]string) {
			delete(c, "worldbackup:servers[0].name")
			delete(c, "worldbackup:servers[1].name")
			delete(c, "worldbackup:servers[1].formerOwner")
		}, "servers is empty"},
		{"duplicate server", func(c map[string]string) { c["worldbackup:servers[1].name"] = "lobby" }, `"lobby" is listed twice`},
		{"clusters and renderDir", func(c map[string]string) { c["worldbackup:clusters[0].context"] = "prod" }, "renderDir is set"},
		{"unknown server field", func(c map[string]string) { c["worldbackup:servers[0].nmae"] = "x" }, `unknown field "nmae"`},
		{"missing image", func(c map[string]string) { delete(c, "worldbackup:image") }, "image is required"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig(renderDir, "bad")
			tc.edit(cfg)
			stack := tools.InlineStack(t, fmt.Sprintf("bad%d", i), deploy.Program, cfg)
			var out strings.Builder
			_, err := stack.Preview(t.Context(), optpreview.ProgressStreams(&out), optpreview.ErrorProgressStreams(&out))
			if err == nil {
				t.Fatalf("preview succeeded, want an error mentioning %q", tc.want)
			}
			if msg := err.Error() + out.String(); !strings.Contains(msg, tc.want) {
				t.Errorf("preview error does not mention %q:\n%s", tc.want, msg)
			}
		})
	}
}

// TestRenderedJobRunsArchiver takes a Job rendered by `pulumi up` and runs
// it as its contract says: its container's command against the archiver
// binary, its claims mapped to temp folders, its config Secret to a
// felis.toml pointing at a real PostgreSQL. The archive lands at the stack's
// exported archiveRef and the catalog row matches it.
func TestRenderedJobRunsArchiver(t *testing.T) {
	tools := stacktest.Require(t)
	ctx := t.Context()
	dbURL := pgtest.URL(t)
	archiver := buildArchiver(t)

	renderDir := t.TempDir()
	cfg := baseConfig(renderDir, "contract")
	stack := tools.InlineStack(t, "contract", deploy.Program, cfg)
	up, err := stack.Up(ctx, optup.ProgressStreams(io.Discard))
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	t.Cleanup(func() { _, _ = stack.Destroy(ctx, optdestroy.ProgressStreams(io.Discard)) })
	var o backupOut
	for _, b := range outputs(t, up.Outputs) {
		if b.cluster == "us" && b.server == "survival" {
			o = b
		}
	}
	job := readJob(t, filepath.Join(renderDir, o.cluster, "1-manifest", fmt.Sprintf("batch_v1-job-%s-%s.yaml", o.namespace, o.jobName)))

	world, backups := t.TempDir(), t.TempDir()
	if _, err := worldgen.Generate(world, worldgen.Options{Size: 8 << 20, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	before := treeDigest(t, world)
	pod := job.Spec.Template.Spec
	worldClaim, backupClaim, secret := "", "", ""
	for _, v := range pod.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ReadOnly:
			worldClaim = v.PersistentVolumeClaim.ClaimName
		case v.PersistentVolumeClaim != nil:
			backupClaim = v.PersistentVolumeClaim.ClaimName
		case v.Secret != nil:
			secret = v.Secret.SecretName
		}
	}
	if worldClaim != "world-survival-0" || backupClaim != "backups" || secret != "felis-config" {
		t.Fatalf("volumes: world claim %q, backup claim %q, secret %q; want world-survival-0 (read-only), backups, felis-config", worldClaim, backupClaim, secret)
	}
	felis := fmt.Sprintf("[database]\nurl = %q\n\n[archive]\ncompression = \"zstd\"\n", dbURL)
	res, err := jobrun.Run(ctx, job, jobrun.Options{
		Claims:   map[string]string{worldClaim: world, backupClaim: backups},
		Secrets:  map[string]map[string][]byte{secret: {"felis.toml": []byte(felis)}},
		Binaries: map[string]string{pod.Containers[0].Command[0]: archiver},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("the Job's container exited %d\nargs: %v\nstderr:\n%s", res.ExitCode, res.Args, res.Stderr)
	}
	if strings.Contains(res.Stderr, dbURL) {
		t.Error("the archiver logged the database URL")
	}

	// The exported archiveRef, mapped through the backup claim's mount.
	mount := res.Mounts["/backups"]
	if !strings.HasPrefix(o.archiveRef, "/backups/") {
		t.Fatalf("archiveRef %q is not under the backup mount /backups", o.archiveRef)
	}
	hostArchive := filepath.Join(mount.HostPath, strings.TrimPrefix(o.archiveRef, "/backups/"))
	st, err := os.Stat(hostArchive)
	if err != nil {
		t.Fatalf("no archive at the exported archiveRef %s (host %s): %v", o.archiveRef, hostArchive, err)
	}
	db, err := catalog.Open(ctx, dbURL, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	row, err := db.Lookup(ctx, o.runID)
	if err != nil {
		t.Fatalf("catalog row for run %s: %v", o.runID, err)
	}
	if row.Server != "survival" || row.FormerOwner == nil || *row.FormerOwner != "steve" {
		t.Errorf("row server %q former owner %v, want survival/steve", row.Server, row.FormerOwner)
	}
	// The default format, chunked: archiveRef is the run's manifest, whose
	// hash is the row's sha256; the row's size is the tar stream's.
	if row.Format != "chunked" || row.SizeBytes <= st.Size() || row.SHA256 != fileSHA256(t, hostArchive) {
		t.Errorf("row format %q size %d sha %s; the manifest is %d bytes, sha %s", row.Format, row.SizeBytes, row.SHA256, st.Size(), fileSHA256(t, hostArchive))
	}
	// The archiver records the path it wrote, which is the exported
	// archiveRef as seen through the mount.
	if row.ArchiveRef != hostArchive {
		t.Errorf("row archive_ref %q, want %q (archiveRef %q mapped)", row.ArchiveRef, hostArchive, o.archiveRef)
	}
	if after := treeDigest(t, world); after != before {
		t.Error("the Job changed the world it mounts read-only")
	}
	// GNU tar reads the run back through `archiver export`, as a user
	// restoring without the restore Job would.
	listing, err := exec.Command("bash", "-o", "pipefail", "-c", `"$0" export --archive "$1" --sha256 "$2" | tar -tf -`,
		archiver, hostArchive, row.SHA256).CombinedOutput()
	if err != nil || !strings.Contains(string(listing), "level.dat") {
		t.Errorf("archiver export | tar -tf -: %v\n%s", err, listing)
	}

	t.Run("the rendered restore Job brings the world back", func(t *testing.T) {
		cfg["worldbackup:restores[0].server"] = "survival"
		cfg["worldbackup:restores[0].cluster"] = o.cluster
		cfg["worldbackup:restores[0].archiveRef"] = o.archiveRef
		cfg["worldbackup:restores[0].sha256"] = row.SHA256
		stacktest.SetConfig(t, stack, cfg)
		up, err := stack.Up(ctx, optup.ProgressStreams(io.Discard))
		if err != nil {
			t.Fatalf("up: %v", err)
		}
		restores, ok := up.Outputs["restores"].Value.([]any)
		if !ok || len(restores) != 1 {
			t.Fatalf("stack exports restores %v, want one", up.Outputs["restores"].Value)
		}
		r := restores[0].(map[string]any)
		job := readJob(t, filepath.Join(renderDir, o.cluster, "1-manifest", fmt.Sprintf("batch_v1-job-%s-%s.yaml", r["namespace"], r["jobName"])))
		pod := job.Spec.Template.Spec
		for _, v := range pod.Volumes {
			if v.Secret != nil {
				t.Errorf("the restore Job mounts Secret %s: it must have no database access", v.Secret.SecretName)
			}
		}
		restored := filepath.Join(t.TempDir(), "world")
		if err := os.Mkdir(restored, 0o755); err != nil {
			t.Fatal(err)
		}
		res, err := jobrun.Run(ctx, job, jobrun.Options{
			Claims:   map[string]string{"world-survival-0": restored, backupClaim: backups},
			Binaries: map[string]string{pod.Containers[0].Command[0]: archiver},
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 0 {
			t.Fatalf("the restore Job's container exited %d\nargs: %v\nstderr:\n%s", res.ExitCode, res.Args, res.Stderr)
		}
		if got, want := treeDigest(t, restored, "logs", "cache", ".worldbackup-restored"), treeDigest(t, world, "logs", "cache"); got != want {
			t.Error("the restored world differs from the backed-up one")
		}

		// The same Job again, as after its deletion + refresh + up, a
		// replacement, or GitOps re-applying it: the world played since the
		// restore must survive.
		played := filepath.Join(restored, "played-since-restore.dat")
		if err := os.WriteFile(played, []byte("progress"), 0o644); err != nil {
			t.Fatal(err)
		}
		again, err := jobrun.Run(ctx, job, jobrun.Options{
			Claims:   map[string]string{"world-survival-0": restored, backupClaim: backups},
			Binaries: map[string]string{pod.Containers[0].Command[0]: archiver},
		})
		if err != nil {
			t.Fatal(err)
		}
		if again.ExitCode != 0 {
			t.Fatalf("the re-created restore Job exited %d, want 0 (already restored)\nstderr:\n%s", again.ExitCode, again.Stderr)
		}
		if b, err := os.ReadFile(played); err != nil || string(b) != "progress" {
			t.Fatalf("the re-created restore Job rolled the world back (%v): it must run once per restore entry", err)
		}
	})
}

func buildArchiver(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "archiver")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/worldbackup/worldbackup/archiver/cmd/archiver")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the archiver: %v\n%s", err, out)
	}
	return bin
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// treeDigest hashes every path, mode and content under dir, leaving out the
// top-level folders named in skip and jar files (the default excludes).
func treeDigest(t *testing.T, dir string, skip ...string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if slices.Contains(skip, rel) {
			if fi.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".jar") || (p == dir) {
			return nil
		}
		fmt.Fprintf(h, "%s %v %d\n", strings.TrimPrefix(p, dir), fi.Mode(), fi.Size())
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(h, f)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
