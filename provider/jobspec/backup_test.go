package jobspec_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/pod-security-admission/api"

	"github.com/worldbackup/worldbackup/provider/internal/jobtest"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

func restrictedBackup() jobspec.Backup {
	b := jobtest.DefaultBackup()
	b.Identity = jobspec.Identity{Mode: jobspec.Restricted, RunAsUser: 1000, RunAsGroup: 1000, FSGroup: 1000}
	return b
}

// TestBuildBackupContract checks every row of the Job contract on the default
// (baseline) backup Job.
func TestBuildBackupContract(t *testing.T) {
	job := jobspec.BuildBackup(jobtest.DefaultBackup())
	pod := job.Spec.Template.Spec
	tests := []contractRow{
		{"name and namespace", func(t *testing.T) {
			eq(t, "name", job.Name, "survival-backup-20250601-0300")
			eq(t, "namespace", job.Namespace, "minecraft")
			if errs := validation.IsDNS1123Label(job.Name); len(errs) > 0 {
				t.Fatalf("name %q: %v", job.Name, errs)
			}
		}},
		{"world claim read-only at /world", func(t *testing.T) {
			v := volume(t, job, jobspec.WorldVolumeName)
			eq(t, "world volume", v.PersistentVolumeClaim, &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "world-survival-0", ReadOnly: true})
			eq(t, "world mount", mountAt(t, job, jobspec.WorldVolumeName), corev1.VolumeMount{Name: jobspec.WorldVolumeName, MountPath: "/world", ReadOnly: true})
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
		{"exactly these volumes", func(t *testing.T) {
			var names []string
			for _, v := range pod.Volumes {
				names = append(names, v.Name)
			}
			eq(t, "volumes", names, []string{"world", "backups", "config", "tmp"})
			eq(t, "mounts", len(container(t, job).VolumeMounts), 4)
		}},
		{"archiver command line", func(t *testing.T) {
			c := container(t, job)
			eq(t, "command", c.Command, []string{"/usr/local/bin/archiver"})
			eq(t, "args", c.Args, []string{"backup", "--server", "survival", "--run-id", "20250601-0300",
				"--namespace", "minecraft", "--world", "/world", "--config", "/etc/felis/felis.toml", "--archive-root", "/backups",
				"--format", "chunked", "--log-format", "json"})
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
	tests = append(tests, sharedContract(job, jobspec.ComponentBackup, "20250601-0300")...)
	for _, tt := range tests {
		t.Run(tt.name, tt.check)
	}
}

// TestBuildBackupVariants checks how each input changes the Job.
func TestBuildBackupVariants(t *testing.T) {
	tests := []struct {
		name   string
		modify func(b *jobspec.Backup)
		check  func(t *testing.T, job *batchv1.Job)
	}{
		{"former owner, gzip and excludes in args", func(b *jobspec.Backup) {
			b.FormerOwner = "Notch"
			b.Compression, b.Format = "gzip", "tar"
			b.Excludes = []string{"*.jar", "logs/"}
		}, func(t *testing.T, job *batchv1.Job) {
			eq(t, "args", container(t, job).Args, []string{"backup", "--server", "survival", "--run-id", "20250601-0300",
				"--former-owner", "Notch", "--namespace", "minecraft", "--world", "/world", "--config", "/etc/felis/felis.toml", "--archive-root", "/backups",
				"--compression", "gzip", "--format", "tar", "--exclude", "*.jar", "--exclude", "logs/", "--log-format", "json"})
		}},
		{"custom paths reach mounts and args", func(b *jobspec.Backup) {
			b.WorldRoot, b.BackupRoot, b.ConfigMountPath = "/data/world", "/data/archives", "/run/felis"
		}, func(t *testing.T, job *batchv1.Job) {
			eq(t, "world mount", mountAt(t, job, jobspec.WorldVolumeName).MountPath, "/data/world")
			eq(t, "backup mount", mountAt(t, job, jobspec.BackupVolumeName).MountPath, "/data/archives")
			eq(t, "config mount", mountAt(t, job, jobspec.ConfigVolumeName).MountPath, "/run/felis")
			args := strings.Join(container(t, job).Args, " ")
			for _, want := range []string{"--world /data/world", "--archive-root /data/archives", "--config /run/felis/felis.toml"} {
				if !strings.Contains(args, want) {
					t.Fatalf("args %q lack %q", args, want)
				}
			}
		}},
		{"rcon: password Secret mounted 0400, its path in args, never its value", func(b *jobspec.Backup) {
			b.Rcon = &jobspec.Rcon{Address: "mc-minecraft-rcon:25575", SecretName: "mc-minecraft-rcon", SecretKey: "rcon-password", Required: true}
		}, func(t *testing.T, job *batchv1.Job) {
			args := strings.Join(container(t, job).Args, " ")
			if !strings.Contains(args, "--rcon mc-minecraft-rcon:25575 --rcon-password-file /etc/felis-rcon/rcon-password") || strings.Contains(args, "rcon-required") {
				t.Fatalf("args %q", args)
			}
			m := mountAt(t, job, jobspec.RconVolumeName)
			eq(t, "rcon mount", m.MountPath, jobspec.RconMountPath)
			eq(t, "rcon mount read-only", m.ReadOnly, true)
			v := volume(t, job, jobspec.RconVolumeName)
			if v.Secret == nil || v.Secret.SecretName != "mc-minecraft-rcon" || *v.Secret.DefaultMode != 0o400 ||
				len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != "rcon-password" {
				t.Fatalf("rcon volume %+v", v)
			}
			if job.Spec.Template.Spec.AutomountServiceAccountToken == nil || *job.Spec.Template.Spec.AutomountServiceAccountToken {
				t.Fatal("the token is mounted")
			}
			for _, e := range container(t, job).Env {
				t.Fatalf("env %v: nothing goes through the environment", e)
			}
		}},
		{"rcon not required", func(b *jobspec.Backup) {
			b.Rcon = &jobspec.Rcon{Address: "survival:25575", SecretName: "s", SecretKey: "k"}
		}, func(t *testing.T, job *batchv1.Job) {
			if !slices.Contains(container(t, job).Args, "--rcon-required=false") {
				t.Fatalf("args %q", container(t, job).Args)
			}
		}},
		{"retention prunes after the run", func(b *jobspec.Backup) {
			b.Retention = &jobspec.Retention{KeepLast: 3, KeepDaily: 7, KeepWithin: "30d", MinKeep: 2}
		}, func(t *testing.T, job *batchv1.Job) {
			args := strings.Join(container(t, job).Args, " ")
			if !strings.Contains(args, "--keep-last 3 --keep-daily 7 --keep-within 30d --min-keep 2 --log-format json") || strings.Contains(args, "--keep-hourly") {
				t.Fatalf("args %q", args)
			}
		}},
		{"skipAwait annotates the Job only", func(b *jobspec.Backup) { b.Await = jobspec.Await{Skip: true} }, func(t *testing.T, job *batchv1.Job) {
			eq(t, "job skipAwait", job.Annotations["pulumi.com/skipAwait"], "true")
			if _, ok := job.Spec.Template.Annotations["pulumi.com/skipAwait"]; ok {
				t.Fatal("pod template has pulumi.com/skipAwait")
			}
			if _, ok := job.Annotations["pulumi.com/replaceUnready"]; ok {
				t.Fatal("Job has pulumi.com/replaceUnready without asking for it")
			}
		}},
		{"extra labels and annotations, ours win", func(b *jobspec.Backup) {
			b.Labels = map[string]string{"team": "ops", jobspec.LabelServer: "spoofed"}
			b.Annotations = map[string]string{"note": "x", jobspec.AnnotationRunID: "spoofed"}
		}, func(t *testing.T, job *batchv1.Job) {
			for _, l := range []map[string]string{job.Labels, job.Spec.Template.Labels} {
				eq(t, "team label", l["team"], "ops")
				eq(t, "server label", l[jobspec.LabelServer], "survival")
			}
			for _, a := range []map[string]string{job.Annotations, job.Spec.Template.Annotations} {
				eq(t, "note annotation", a["note"], "x")
				eq(t, "run-id annotation", a[jobspec.AnnotationRunID], "20250601-0300")
			}
		}},
		{"node name", func(b *jobspec.Backup) { b.Placement = jobspec.Placement{NodeName: "node-a"} }, func(t *testing.T, job *batchv1.Job) {
			eq(t, "nodeName", job.Spec.Template.Spec.NodeName, "node-a")
			eq(t, "affinity", job.Spec.Template.Spec.Affinity, (*corev1.Affinity)(nil))
		}},
		{"node selector as required affinity", func(b *jobspec.Backup) {
			b.Placement = jobspec.Placement{NodeSelector: map[string]string{"zone": "a", "kubernetes.io/hostname": "node-a"}}
		}, func(t *testing.T, job *batchv1.Job) {
			spec := job.Spec.Template.Spec
			eq(t, "nodeSelector", len(spec.NodeSelector), 0)
			eq(t, "affinity", spec.Affinity, &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{
						{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-a"}},
						{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}},
					},
				}}},
			}})
		}},
		{"restricted identity", func(b *jobspec.Backup) { *b = restrictedBackup() }, func(t *testing.T, job *batchv1.Job) {
			eq(t, "pod securityContext", job.Spec.Template.Spec.SecurityContext, &corev1.PodSecurityContext{
				RunAsUser:           new(int64(1000)),
				RunAsGroup:          new(int64(1000)),
				RunAsNonRoot:        new(true),
				FSGroup:             new(int64(1000)),
				FSGroupChangePolicy: new(corev1.FSGroupChangeOnRootMismatch),
				SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			})
			eq(t, "container securityContext", container(t, job).SecurityContext, &corev1.SecurityContext{
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				Privileged:               new(false),
				RunAsNonRoot:             new(true),
				AllowPrivilegeEscalation: new(false),
				ReadOnlyRootFilesystem:   new(true),
				SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			})
		}},
		{"baseline with fsGroup", func(b *jobspec.Backup) { b.Identity.FSGroup = 2000 }, func(t *testing.T, job *batchv1.Job) {
			eq(t, "fsGroup", job.Spec.Template.Spec.SecurityContext.FSGroup, new(int64(2000)))
		}},
		{"limits below default requests cap the requests", func(b *jobspec.Backup) {
			b.Resources = jobspec.Resources{CPULimit: resource.MustParse("50m"), MemoryLimit: resource.MustParse("100Mi")}
		}, func(t *testing.T, job *batchv1.Job) {
			r := container(t, job).Resources
			eq(t, "cpu request", r.Requests.Cpu().String(), "50m")
			eq(t, "memory request", r.Requests.Memory().String(), "100Mi")
		}},
		{"durations round up to seconds", func(b *jobspec.Backup) {
			b.Deadline = 90*time.Second + time.Millisecond
			b.TTLAfterFinished = 10*time.Second + time.Millisecond
			b.BackoffLimit = 0
		}, func(t *testing.T, job *batchv1.Job) {
			eq(t, "activeDeadlineSeconds", *job.Spec.ActiveDeadlineSeconds, int64(91))
			eq(t, "ttlSecondsAfterFinished", *job.Spec.TTLSecondsAfterFinished, int32(11))
			eq(t, "backoffLimit", *job.Spec.BackoffLimit, int32(0))
		}},
		{"run ID with upper case gets a hashed valid name", func(b *jobspec.Backup) { b.RunID = "Nightly.2025_06" }, func(t *testing.T, job *batchv1.Job) {
			if !strings.HasPrefix(job.Name, "survival-backup-nightly-2025-06-") || len(job.Name) > 63 {
				t.Fatalf("name = %q", job.Name)
			}
			eq(t, "run-id annotation", job.Spec.Template.Annotations[jobspec.AnnotationRunID], "Nightly.2025_06")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := jobtest.DefaultBackup()
			tt.modify(&b)
			tt.check(t, jobspec.BuildBackup(b))
		})
	}
}

// TestBuildBackupNewRunNewJob checks that the run ID reaches the Job name,
// the pod template's annotation and the archiver's args, so a new run ID
// replaces the Job, and that the same inputs give the same Job.
func TestBuildBackupNewRunNewJob(t *testing.T) {
	a := jobspec.BuildBackup(jobtest.DefaultBackup())
	if again := jobspec.BuildBackup(jobtest.DefaultBackup()); !reflect.DeepEqual(a, again) {
		t.Fatal("BuildBackup is not deterministic")
	}
	b2 := jobtest.DefaultBackup()
	b2.RunID = "20250602-0300"
	b := jobspec.BuildBackup(b2)
	if a.Name == b.Name {
		t.Fatalf("two run IDs share the Job name %q", a.Name)
	}
	if reflect.DeepEqual(a.Spec.Template.Annotations, b.Spec.Template.Annotations) {
		t.Fatal("pod template annotations do not change with the run ID")
	}
	if !slices.Contains(container(t, b).Args, "20250602-0300") {
		t.Fatalf("args %q lack the run ID", container(t, b).Args)
	}
}

// TestBuildBackupPodSecurity evaluates the pod template against the Pod
// Security Standards at the latest version.
func TestBuildBackupPodSecurity(t *testing.T) {
	tests := []struct {
		name    string
		backup  jobspec.Backup
		level   api.Level
		allowed bool
	}{
		{"baseline mode passes baseline", jobtest.DefaultBackup(), api.LevelBaseline, true},
		{"baseline mode fails restricted", jobtest.DefaultBackup(), api.LevelRestricted, false},
		{"restricted mode passes baseline", restrictedBackup(), api.LevelBaseline, true},
		{"restricted mode passes restricted", restrictedBackup(), api.LevelRestricted, true},
		{"restricted mode with node selector passes restricted", func() jobspec.Backup {
			b := restrictedBackup()
			b.Placement.NodeSelector = map[string]string{"kubernetes.io/hostname": "node-a"}
			return b
		}(), api.LevelRestricted, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := jobspec.BuildBackup(tt.backup).Spec.Template
			agg := jobtest.PodSecurity(t, tmpl, tt.level)
			if agg.Allowed != tt.allowed {
				t.Fatalf("allowed = %v, want %v; forbidden: %v %v", agg.Allowed, tt.allowed, agg.ForbiddenReasons, agg.ForbiddenDetails)
			}
			if !tt.allowed {
				// Baseline mode fails restricted for exactly its root identity
				// and its added capability, nothing else.
				got := strings.Join(agg.ForbiddenReasons, "; ")
				for _, want := range []string{"runAsNonRoot", "unrestricted capabilities"} {
					if !strings.Contains(got, want) {
						t.Fatalf("forbidden reasons %q lack %q", got, want)
					}
				}
			}
		})
	}
}

func TestLabelsTolerateInvalidValues(t *testing.T) {
	l := jobspec.Labels(strings.Repeat("s", 70), jobspec.ComponentBackup, nil)
	for _, k := range []string{jobspec.LabelInstance, jobspec.LabelServer} {
		if errs := validation.IsValidLabelValue(l[k]); len(errs) > 0 {
			t.Fatalf("label %s = %q: %v", k, l[k], errs)
		}
	}
}

// TestBackupArgsEmptyExcludes shows that excludes: [] reaches the archiver
// as an empty list (exclude nothing), not as no flag, which let the config
// file's list apply.
func TestBackupArgsEmptyExcludes(t *testing.T) {
	args := jobspec.BackupArgs(jobspec.Backup{Job: jobspec.Job{Server: "s", RunID: "r"}, ConfigMountPath: "/c", Compression: "zstd", Excludes: []string{}})
	if !slices.Contains(args, "--exclude=") {
		t.Fatalf("args %q: want --exclude= for an empty exclude list", args)
	}
}

// TestWithConcurrency: a capped backup's archiver waits for a slot of its
// group (the last flags), nothing else changes, and the Job it was given is
// not changed.
func TestWithConcurrency(t *testing.T) {
	orig := jobspec.BuildBackup(jobtest.DefaultBackup())
	before := orig.DeepCopy()
	job := jobspec.WithConcurrency(orig, 10, "context eu-1")
	if !reflect.DeepEqual(orig, before) {
		t.Fatal("WithConcurrency changed the Job it was given")
	}
	args := job.Spec.Template.Spec.Containers[0].Args
	if got, want := args[len(args)-4:], []string{"--concurrency", "10", "--concurrency-group", "context eu-1"}; !slices.Equal(got, want) {
		t.Errorf("the archiver's last args are %q, want %q", got, want)
	}
	job.Spec.Template.Spec.Containers[0].Args = args[:len(args)-4]
	if !reflect.DeepEqual(job, before) {
		t.Error("WithConcurrency changed more than the archiver's args")
	}
}
