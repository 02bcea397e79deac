package jobspec_test

import (
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/pod-security-admission/api"

	"github.com/worldbackup/worldbackup/provider/internal/jobtest"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

func restrictedPrune() jobspec.Prune {
	p := jobtest.DefaultPrune()
	p.Identity = jobspec.Identity{Mode: jobspec.Restricted, RunAsUser: 1000, RunAsGroup: 1000, FSGroup: 1000}
	return p
}

// TestBuildPruneContract checks every row of the Job contract on the default
// (baseline) prune Job.
func TestBuildPruneContract(t *testing.T) {
	job := jobspec.BuildPrune(jobtest.DefaultPrune())
	pod := job.Spec.Template.Spec
	tests := []contractRow{
		{"name and namespace", func(t *testing.T) {
			eq(t, "name", job.Name, "survival-prune-prune-20250601")
			eq(t, "namespace", job.Namespace, "minecraft")
			if errs := validation.IsDNS1123Label(job.Name); len(errs) > 0 {
				t.Fatalf("name %q: %v", job.Name, errs)
			}
		}},
		{"backup claim read-write at /backups", func(t *testing.T) {
			v := volume(t, job, jobspec.BackupVolumeName)
			eq(t, "backup volume", v.PersistentVolumeClaim, &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "world-backups"})
			eq(t, "backup mount", mountAt(t, job, jobspec.BackupVolumeName), corev1.VolumeMount{Name: jobspec.BackupVolumeName, MountPath: "/backups"})
		}},
		{"config Secret read-only 0400 at /etc/felis", func(t *testing.T) {
			v := volume(t, job, jobspec.ConfigVolumeName)
			eq(t, "config volume", v.Secret, &corev1.SecretVolumeSource{SecretName: "felis-config", DefaultMode: new(int32(0o400))})
			eq(t, "config mount", mountAt(t, job, jobspec.ConfigVolumeName), corev1.VolumeMount{Name: jobspec.ConfigVolumeName, MountPath: "/etc/felis", ReadOnly: true})
		}},
		{"exactly these volumes: no world", func(t *testing.T) {
			var names []string
			for _, v := range pod.Volumes {
				names = append(names, v.Name)
			}
			eq(t, "volumes", names, []string{"backups", "config", "tmp"})
			eq(t, "mounts", len(container(t, job).VolumeMounts), 3)
		}},
		{"archiver command line", func(t *testing.T) {
			c := container(t, job)
			eq(t, "command", c.Command, []string{"/usr/local/bin/archiver"})
			eq(t, "args", c.Args, []string{"prune", "--server", "survival", "--namespace", "minecraft", "--config", "/etc/felis/felis.toml",
				"--archive-root", "/backups", "--keep-daily", "7", "--min-keep", "3", "--log-format", "json"})
			eq(t, "image", c.Image, "ghcr.io/worldbackup/worldbackup-archiver:v0.1.0")
			eq(t, "env", len(c.Env)+len(c.EnvFrom), 0)
		}},
		{"baseline container security context", func(t *testing.T) {
			eq(t, "container securityContext", container(t, job).SecurityContext, &corev1.SecurityContext{
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"DAC_OVERRIDE"}},
				Privileged:               new(false),
				AllowPrivilegeEscalation: new(false),
				ReadOnlyRootFilesystem:   new(true),
				SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			})
		}},
	}
	tests = append(tests, sharedContract(job, jobspec.ComponentPrune, "prune-20250601")...)
	for _, tt := range tests {
		t.Run(tt.name, tt.check)
	}
}

// TestBuildPruneVariants checks how each input changes the Job.
func TestBuildPruneVariants(t *testing.T) {
	tests := []struct {
		name   string
		modify func(p *jobspec.Prune)
		check  func(t *testing.T, job *batchv1.Job)
	}{
		{"every rule, grace and dry run in args", func(p *jobspec.Prune) {
			p.Retention = jobspec.Retention{KeepLast: 3, KeepHourly: 24, KeepDaily: 7, KeepWeekly: 4, KeepMonthly: 12, KeepYearly: 2,
				KeepWithin: "30d", MinKeep: 2, Grace: "2h"}
			p.DryRun = true
		}, func(t *testing.T, job *batchv1.Job) {
			eq(t, "args", container(t, job).Args, []string{"prune", "--server", "survival", "--namespace", "minecraft", "--config", "/etc/felis/felis.toml",
				"--archive-root", "/backups", "--keep-last", "3", "--keep-hourly", "24", "--keep-daily", "7", "--keep-weekly", "4",
				"--keep-monthly", "12", "--keep-yearly", "2", "--keep-within", "30d", "--min-keep", "2", "--grace", "2h",
				"--dry-run", "--log-format", "json"})
		}},
		{"custom paths reach mounts and args", func(p *jobspec.Prune) {
			p.BackupRoot, p.ConfigMountPath = "/data/archives", "/run/felis"
		}, func(t *testing.T, job *batchv1.Job) {
			eq(t, "backup mount", mountAt(t, job, jobspec.BackupVolumeName).MountPath, "/data/archives")
			eq(t, "config mount", mountAt(t, job, jobspec.ConfigVolumeName).MountPath, "/run/felis")
			args := strings.Join(container(t, job).Args, " ")
			for _, want := range []string{"--archive-root /data/archives", "--config /run/felis/felis.toml"} {
				if !strings.Contains(args, want) {
					t.Fatalf("args %q lack %q", args, want)
				}
			}
		}},
		{"node name", func(p *jobspec.Prune) { p.Placement = jobspec.Placement{NodeName: "node-a"} }, func(t *testing.T, job *batchv1.Job) {
			eq(t, "nodeName", job.Spec.Template.Spec.NodeName, "node-a")
			eq(t, "affinity", job.Spec.Template.Spec.Affinity, (*corev1.Affinity)(nil))
		}},
		{"skipAwait annotates the Job only", func(p *jobspec.Prune) { p.Await = jobspec.Await{Skip: true} }, func(t *testing.T, job *batchv1.Job) {
			eq(t, "job skipAwait", job.Annotations["pulumi.com/skipAwait"], "true")
			if _, ok := job.Spec.Template.Annotations["pulumi.com/skipAwait"]; ok {
				t.Fatal("pod template has pulumi.com/skipAwait")
			}
		}},
		{"a new run ID, a new Job", func(p *jobspec.Prune) { p.RunID = "Weekly.2025_06" }, func(t *testing.T, job *batchv1.Job) {
			if !strings.HasPrefix(job.Name, "survival-prune-weekly-2025-06-") || len(job.Name) > 63 {
				t.Fatalf("name = %q", job.Name)
			}
			eq(t, "run-id annotation", job.Spec.Template.Annotations[jobspec.AnnotationRunID], "Weekly.2025_06")
			if slices.Contains(container(t, job).Args, "Weekly.2025_06") {
				t.Fatal("the run ID reaches the args: prune takes none")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := jobtest.DefaultPrune()
			tt.modify(&p)
			tt.check(t, jobspec.BuildPrune(p))
		})
	}
}

// TestBuildPrunePodSecurity evaluates the pod template against the Pod
// Security Standards at the latest version.
func TestBuildPrunePodSecurity(t *testing.T) {
	tests := []struct {
		name    string
		prune   jobspec.Prune
		level   api.Level
		allowed bool
	}{
		{"baseline mode passes baseline", jobtest.DefaultPrune(), api.LevelBaseline, true},
		{"baseline mode fails restricted", jobtest.DefaultPrune(), api.LevelRestricted, false},
		{"restricted mode passes baseline", restrictedPrune(), api.LevelBaseline, true},
		{"restricted mode passes restricted", restrictedPrune(), api.LevelRestricted, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agg := jobtest.PodSecurity(t, jobspec.BuildPrune(tt.prune).Spec.Template, tt.level)
			if agg.Allowed != tt.allowed {
				t.Fatalf("allowed = %v, want %v; forbidden: %v %v", agg.Allowed, tt.allowed, agg.ForbiddenReasons, agg.ForbiddenDetails)
			}
		})
	}
}
