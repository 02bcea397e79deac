package jobspec_test

import (
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/pod-security-admission/api"

	"github.com/worldbackup/worldbackup/provider/internal/jobtest"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// TestBuildVerifyContract checks every row of the verify Job's contract on
// the default (baseline) verify Job.
func TestBuildVerifyContract(t *testing.T) {
	job := jobspec.BuildVerify(jobtest.DefaultVerify())
	pod := job.Spec.Template.Spec
	tests := []contractRow{
		{"name", func(t *testing.T) { eq(t, "name", job.Name, "survival-verify-verify-20250601") }},
		{"no world: the archive is verified, not the live world", func(t *testing.T) {
			for _, v := range pod.Volumes {
				if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "world-survival-0" || v.Name == jobspec.WorldVolumeName {
					t.Fatalf("volume %q mounts the world", v.Name)
				}
			}
		}},
		{"backup claim read-only at volume and mount", func(t *testing.T) {
			eq(t, "backup volume", volume(t, job, jobspec.BackupVolumeName).PersistentVolumeClaim,
				&corev1.PersistentVolumeClaimVolumeSource{ClaimName: "world-backups", ReadOnly: true})
			eq(t, "backup mount", mountAt(t, job, jobspec.BackupVolumeName), corev1.VolumeMount{Name: jobspec.BackupVolumeName, MountPath: "/backups", ReadOnly: true})
		}},
		{"scratch emptyDir of the default size at /scratch", func(t *testing.T) {
			v := volume(t, job, jobspec.ScratchVolumeName)
			if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.String() != "16Gi" {
				t.Fatalf("scratch volume = %+v, want an emptyDir with sizeLimit 16Gi", v.VolumeSource)
			}
			eq(t, "scratch mount", mountAt(t, job, jobspec.ScratchVolumeName), corev1.VolumeMount{Name: jobspec.ScratchVolumeName, MountPath: "/scratch"})
		}},
		{"no Secret, no config, no token mount", func(t *testing.T) {
			for _, v := range pod.Volumes {
				if v.Secret != nil || v.Projected != nil || v.ConfigMap != nil || v.HostPath != nil {
					t.Fatalf("volume %q is a %+v; the verify Job mounts a claim and emptyDirs only", v.Name, v.VolumeSource)
				}
			}
		}},
		{"exactly these volumes", func(t *testing.T) {
			volumes, mounts := volumeNames(t, job)
			eq(t, "volumes", volumes, []string{"backups", "scratch", "tmp"})
			eq(t, "mounts", mounts, []string{"backups", "scratch", "tmp"})
		}},
		{"archiver command line: DB-blind, world check into the scratch", func(t *testing.T) {
			c := container(t, job)
			eq(t, "args", c.Args, []string{"verify", "--archive", "/backups/survival/20250601-0300.tar.zst", "--sha256", jobtest.SHA256,
				"--world-check", "--scratch", "/scratch", "--log-format", "json"})
			eq(t, "env", len(c.Env)+len(c.EnvFrom), 0)
		}},
		{"baseline capabilities of the restore", func(t *testing.T) {
			eq(t, "caps", container(t, job).SecurityContext.Capabilities.Add, []corev1.Capability{"CHOWN", "DAC_OVERRIDE", "FOWNER"})
		}},
	}
	tests = append(tests, sharedContract(job, jobspec.ComponentVerify, "verify-20250601")...)
	for _, tt := range tests {
		t.Run(tt.name, tt.check)
	}
}

// TestBuildVerifyVariants checks how the verify's own inputs change the Job.
func TestBuildVerifyVariants(t *testing.T) {
	tests := []struct {
		name   string
		modify func(v *jobspec.Verify)
		check  func(t *testing.T, v jobspec.Verify)
	}{
		{"chunk sample reaches the args", func(v *jobspec.Verify) { v.Chunks = "10%" }, func(t *testing.T, v jobspec.Verify) {
			if args := strings.Join(container(t, jobspec.BuildVerify(v)).Args, " "); !strings.Contains(args, "--chunks 10% --scratch /scratch") {
				t.Fatalf("args %q lack the sample", args)
			}
		}},
		{"scratch size", func(v *jobspec.Verify) { v.Scratch.Size = resource.MustParse("40Gi") }, func(t *testing.T, v jobspec.Verify) {
			eq(t, "sizeLimit", volume(t, jobspec.BuildVerify(v), jobspec.ScratchVolumeName).EmptyDir.SizeLimit.String(), "40Gi")
		}},
		{"ephemeral claim", func(v *jobspec.Verify) {
			v.Scratch = jobspec.Scratch{Size: resource.MustParse("100Gi"), StorageClassName: "fast-ssd"}
		}, func(t *testing.T, v jobspec.Verify) {
			vol := volume(t, jobspec.BuildVerify(v), jobspec.ScratchVolumeName)
			if vol.EmptyDir != nil || vol.Ephemeral == nil {
				t.Fatalf("scratch volume = %+v, want an ephemeral claim", vol.VolumeSource)
			}
			spec := vol.Ephemeral.VolumeClaimTemplate.Spec
			eq(t, "class", *spec.StorageClassName, "fast-ssd")
			eq(t, "request", spec.Resources.Requests.Storage().String(), "100Gi")
			eq(t, "access", spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce})
		}},
		{"S3 store: credentials in place of the backup claim", func(v *jobspec.Verify) {
			v.ArchiveRef = "s3://felis-backups/worlds/survival/20250601-0300.tar.zst"
			v.Store = s3Store()
		}, func(t *testing.T, v jobspec.Verify) {
			job := jobspec.BuildVerify(v)
			eq(t, "args", container(t, job).Args, []string{"verify", "--archive", "s3://felis-backups/worlds/survival/20250601-0300.tar.zst",
				"--sha256", jobtest.SHA256, "--world-check", "--scratch", "/scratch",
				"--s3-endpoint", "http://minio.storage:9000", "--s3-region", "eu-central-1", "--s3-path-style",
				"--s3-access-key-file", "/etc/felis-s3/access-key", "--s3-secret-key-file", "/etc/felis-s3/secret-key",
				"--log-format", "json"})
			volumes, mounts := volumeNames(t, job)
			eq(t, "volumes", volumes, []string{"scratch", "tmp", "s3-credentials"})
			eq(t, "mounts", mounts, []string{"scratch", "tmp", "s3-credentials"})
			checkCredentialsMount(t, job)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := jobtest.DefaultVerify()
			tt.modify(&v)
			tt.check(t, v)
		})
	}
}

// TestBuildVerifyPodSecurity evaluates the pod template against the Pod
// Security Standards, as the restore's.
func TestBuildVerifyPodSecurity(t *testing.T) {
	restricted := jobtest.DefaultVerify()
	restricted.Identity = jobspec.Identity{Mode: jobspec.Restricted, RunAsUser: 1000, RunAsGroup: 1000, FSGroup: 1000}
	ephemeral := restricted
	ephemeral.Scratch.StorageClassName = "standard"
	tests := []struct {
		name    string
		verify  jobspec.Verify
		level   api.Level
		allowed bool
	}{
		{"baseline mode passes baseline", jobtest.DefaultVerify(), api.LevelBaseline, true},
		{"baseline mode fails restricted", jobtest.DefaultVerify(), api.LevelRestricted, false},
		{"restricted mode passes restricted", restricted, api.LevelRestricted, true},
		{"restricted mode with an ephemeral claim passes restricted", ephemeral, api.LevelRestricted, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agg := jobtest.PodSecurity(t, jobspec.BuildVerify(tt.verify).Spec.Template, tt.level)
			if agg.Allowed != tt.allowed {
				t.Fatalf("allowed = %v, want %v; forbidden: %v %v", agg.Allowed, tt.allowed, agg.ForbiddenReasons, agg.ForbiddenDetails)
			}
		})
	}
}

// TestBuildVerifyByRun: a verify by run resolves the run in its init
// container, as a restore by run does, and verifies the resolved archive.
func TestBuildVerifyByRun(t *testing.T) {
	v := jobtest.DefaultVerify()
	v.ArchiveRef, v.SHA256 = "", ""
	v.ByRun = jobspec.ByRun{FromRun: "latest", ConfigSecretName: "felis-config", ConfigMountPath: "/etc/felis"}
	checkByRun(t, jobspec.BuildVerify(v),
		[]string{"resolve", "--server", "survival", "--namespace", "minecraft", "--from-run", "latest", "--config", "/etc/felis/felis.toml",
			"--within", "/backups", "--out", "/run/worldbackup/run.json", "--log-format", "json"},
		[]string{"verify", "--archive-from", "/run/worldbackup/run.json", "--world-check", "--scratch", "/scratch", "--log-format", "json"})
	t.Run("restricted mode passes restricted", func(t *testing.T) {
		r := v
		r.Identity = jobspec.Identity{Mode: jobspec.Restricted, RunAsUser: 1000, RunAsGroup: 1000, FSGroup: 1000}
		if agg := jobtest.PodSecurity(t, jobspec.BuildVerify(r).Spec.Template, api.LevelRestricted); !agg.Allowed {
			t.Fatalf("forbidden: %v %v", agg.ForbiddenReasons, agg.ForbiddenDetails)
		}
	})
}

// TestBuildVerifySchedule: the verify CronJob's Jobs are verifies by run
// of the server's newest run, with the on-demand verify's pod otherwise.
func TestBuildVerifySchedule(t *testing.T) {
	v := jobtest.DefaultVerify()
	v.ArchiveRef, v.SHA256 = "", ""
	v.ByRun = jobspec.ByRun{ConfigSecretName: "felis-config", ConfigMountPath: "/etc/felis"}
	v.Await = jobspec.Await{ReplaceUnready: true}
	cj := jobspec.BuildVerifySchedule(v, schedule())
	eq(t, "name", cj.Name, "survival-vsched")
	if errs := validation.IsDNS1123Label(cj.Name); len(errs) > 0 || len(cj.Name) > jobspec.MaxScheduleNameLen {
		t.Fatalf("name %q: %v", cj.Name, errs)
	}
	eq(t, "schedule", cj.Spec.Schedule, "0 4 * * *")
	eq(t, "concurrency", cj.Spec.ConcurrencyPolicy, batchv1.ForbidConcurrent)
	eq(t, "component", cj.Spec.JobTemplate.Spec.Template.Labels[jobspec.LabelComponent], jobspec.ComponentVerifySchedule)
	for k := range cj.Spec.JobTemplate.Annotations {
		if strings.HasPrefix(k, "pulumi.com/") {
			t.Fatalf("the Job template has %s: Pulumi does not await scheduled Jobs", k)
		}
	}
	if _, ok := cj.Spec.JobTemplate.Spec.Template.Annotations[jobspec.AnnotationRunID]; ok {
		t.Fatal("the pod template carries the on-demand run ID")
	}
	job := &batchv1.Job{Spec: cj.Spec.JobTemplate.Spec}
	checkByRun(t, job,
		[]string{"resolve", "--server", "survival", "--namespace", "minecraft", "--from-run", "latest", "--config", "/etc/felis/felis.toml",
			"--within", "/backups", "--out", "/run/worldbackup/run.json", "--log-format", "json"},
		[]string{"verify", "--archive-from", "/run/worldbackup/run.json", "--world-check", "--scratch", "/scratch", "--log-format", "json"})
	v.FromRun = "survival-r7"
	if args := jobspec.BuildVerifySchedule(v, schedule()).Spec.JobTemplate.Spec.Template.Spec.InitContainers[0].Args; !slices.Contains(args, "survival-r7") {
		t.Errorf("a schedule of one run ID: resolve args %q", args)
	}
	if agg := jobtest.PodSecurity(t, cj.Spec.JobTemplate.Spec.Template, api.LevelBaseline); !agg.Allowed {
		t.Fatalf("baseline mode's CronJob pod fails baseline: %v", agg.ForbiddenReasons)
	}
}
