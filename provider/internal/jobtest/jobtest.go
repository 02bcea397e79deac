// Package jobtest holds what the provider's tests share: the builders'
// arguments for the required inputs with every default of the Job contract
// (written out by hand, so a changed default fails the tests), JSON
// comparison of Jobs and Pod Security Standard evaluation. Only tests import
// it.
package jobtest

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// SHA256 is the archive checksum of DefaultRestore.
const SHA256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

// DefaultBackup is the resolved backup of the required inputs server
// survival, runId 20250601-0300, image ghcr.io/worldbackup/worldbackup-archiver:v0.1.0
// and backupClaimName world-backups, with the contract's defaults.
func DefaultBackup() jobspec.Backup {
	return jobspec.Backup{
		Job:              defaultJob("20250601-0300"),
		ConfigSecretName: "felis-config",
		ConfigMountPath:  "/etc/felis",
		Compression:      "",
		Format:           "chunked",
	}
}

// defaultJob is the resolved shared part of DefaultBackup and
// DefaultRestore with runID.
func defaultJob(runID string) jobspec.Job {
	return jobspec.Job{
		Server:             "survival",
		RunID:              runID,
		Namespace:          "minecraft",
		Image:              "ghcr.io/worldbackup/worldbackup-archiver:v0.1.0",
		ServiceAccountName: "felis-restore",
		WorldClaimName:     "world-survival-0",
		BackupClaimName:    "world-backups",
		WorldRoot:          "/world",
		BackupRoot:         "/backups",
		Deadline:           30 * time.Minute,
		BackoffLimit:       0,
		Resources:          jobspec.Resources{CPULimit: resource.MustParse("1"), MemoryLimit: resource.MustParse("1Gi")},
		Identity:           jobspec.Identity{Mode: jobspec.Baseline},
		Placement: jobspec.Placement{
			GamePod:         map[string]string{"statefulset.kubernetes.io/pod-name": "survival-0"},
			GamePodAffinity: jobspec.AffinityPreferred,
		},
		Await: jobspec.Await{ReplaceUnready: true},
	}
}

// DefaultRestore is the resolved restore of the required inputs server
// survival, runId restore-20250601, archiveRef
// /backups/survival/20250601-0300.tar.zst, sha256 SHA256, image
// ghcr.io/worldbackup/worldbackup-archiver:v0.1.0 and backupClaimName world-backups, with
// the contract's defaults.
func DefaultRestore() jobspec.Restore {
	return jobspec.Restore{
		Job:        defaultJob("restore-20250601"),
		ArchiveRef: "/backups/survival/20250601-0300.tar.zst",
		SHA256:     SHA256,
		Replace:    true,
	}
}

// DefaultVerify is the resolved verify of the required inputs server
// survival, runId verify-20250601, image ghcr.io/worldbackup/worldbackup-archiver:v0.1.0,
// backupClaimName world-backups, archiveRef
// /backups/survival/20250601-0300.tar.zst and sha256 SHA256, with the
// contract's defaults (the world claim is not the verify's).
func DefaultVerify() jobspec.Verify {
	j := defaultJob("verify-20250601")
	j.WorldClaimName, j.WorldRoot = "", ""
	return jobspec.Verify{
		Job:        j,
		ArchiveRef: "/backups/survival/20250601-0300.tar.zst",
		SHA256:     SHA256,
	}
}

// DefaultPrune is the resolved prune of the required inputs server
// survival, runId prune-20250601, image ghcr.io/worldbackup/worldbackup-archiver:v0.1.0,
// backupClaimName world-backups and retention {keepDaily: 7, minKeep: 3},
// with the contract's defaults.
func DefaultPrune() jobspec.Prune {
	return jobspec.Prune{
		Job:              defaultJob("prune-20250601"),
		ConfigSecretName: "felis-config",
		ConfigMountPath:  "/etc/felis",
		Retention:        jobspec.Retention{KeepDaily: 7, MinKeep: 3},
	}
}

// JSONObject returns v's JSON form decoded into a map (numbers as float64).
func JSONObject(t testing.TB, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// JobObject returns the JSON object of job as the Kubernetes provider
// receives it: without status.
func JobObject(t testing.TB, job *batchv1.Job) map[string]any {
	t.Helper()
	m := JSONObject(t, job)
	delete(m, "status")
	return m
}

// SameJSON reports (t.Errorf) with both sides indented when got and want
// differ, and returns whether they are equal.
func SameJSON(t testing.TB, what string, got, want any) bool {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return true
	}
	g, _ := json.MarshalIndent(got, "", "  ")
	w, _ := json.MarshalIndent(want, "", "  ")
	t.Errorf("%s differ:\ngot:  %s\nwant: %s", what, g, w)
	return false
}

// PodSecurity evaluates the pod template tmpl against the Pod Security
// Standard level at its latest version.
func PodSecurity(t testing.TB, tmpl corev1.PodTemplateSpec, level api.Level) policy.AggregateCheckResult {
	t.Helper()
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks())
	if err != nil {
		t.Fatal(err)
	}
	results := evaluator.EvaluatePod(api.LevelVersion{Level: level, Version: api.LatestVersion()}, &tmpl.ObjectMeta, &tmpl.Spec)
	return policy.AggregateCheckResults(results)
}
