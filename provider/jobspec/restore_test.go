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

func restrictedRestore() jobspec.Restore {
	r := jobtest.DefaultRestore()
	r.Identity = jobspec.Identity{Mode: jobspec.Restricted, RunAsUser: 1000, RunAsGroup: 1000, FSGroup: 1000}
	return r
}

// TestBuildRestoreContract checks every row of the restore Job's contract on
// the default (baseline) restore Job.
func TestBuildRestoreContract(t *testing.T) {
	job := jobspec.BuildRestore(jobtest.DefaultRestore())
	pod := job.Spec.Template.Spec
	tests := []contractRow{
		{"name and namespace", func(t *testing.T) {
			eq(t, "name", job.Name, "survival-restore-restore-20250601")
			eq(t, "namespace", job.Namespace, "minecraft")
			if errs := validation.IsDNS1123Label(job.Name); len(errs) > 0 {
				t.Fatalf("name %q: %v", job.Name, errs)
			}
		}},
		{"world claim read-write at /world", func(t *testing.T) {
			v := volume(t, job, jobspec.WorldVolumeName)
			eq(t, "world volume", v.PersistentVolumeClaim, &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "world-survival-0"})
			eq(t, "world mount", mountAt(t, job, jobspec.WorldVolumeName), corev1.VolumeMount{Name: jobspec.WorldVolumeName, MountPath: "/world"})
		}},
		{"backup claim read-only at volume and mount, at /backups", func(t *testing.T) {
			v := volume(t, job, jobspec.BackupVolumeName)
			eq(t, "backup volume", v.PersistentVolumeClaim, &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "world-backups", ReadOnly: true})
			eq(t, "backup mount", mountAt(t, job, jobspec.BackupVolumeName), corev1.VolumeMount{Name: jobspec.BackupVolumeName, MountPath: "/backups", ReadOnly: true})
		}},
		{"no Secret, no config, no projected token", func(t *testing.T) {
			for _, v := range pod.Volumes {
				if v.Secret != nil || v.Projected != nil || v.ConfigMap != nil || v.HostPath != nil {
					t.Fatalf("volume %q is a %+v; the restore Job mounts claims and an emptyDir only", v.Name, v.VolumeSource)
				}
			}
			for _, m := range container(t, job).VolumeMounts {
				if m.Name == jobspec.ConfigVolumeName || strings.HasPrefix(m.MountPath, "/etc") || strings.HasPrefix(m.MountPath, "/var/run/secrets") {
					t.Fatalf("mount %+v looks like a config or token mount", m)
				}
			}
			if slices.Contains(container(t, job).Args, "--config") {
				t.Fatal("args pass --config")
			}
		}},
		{"exactly these volumes", func(t *testing.T) {
			var names []string
			for _, v := range pod.Volumes {
				names = append(names, v.Name)
			}
			eq(t, "volumes", names, []string{"world", "backups", "tmp"})
			eq(t, "mounts", len(container(t, job).VolumeMounts), 3)
		}},
		{"archiver command line", func(t *testing.T) {
			c := container(t, job)
			eq(t, "command", c.Command, []string{"/usr/local/bin/archiver"})
			eq(t, "args", c.Args, []string{"restore", "--run-id", "restore-20250601", "--archive", "/backups/survival/20250601-0300.tar.zst",
				"--sha256", jobtest.SHA256, "--into", "/world", "--replace", "--log-format", "json"})
			eq(t, "image", c.Image, "ghcr.io/worldbackup/worldbackup-archiver:v0.1.0")
			eq(t, "env", len(c.Env)+len(c.EnvFrom), 0)
		}},
		{"baseline container security context: CHOWN, DAC_OVERRIDE, FOWNER only", func(t *testing.T) {
			eq(t, "container securityContext", container(t, job).SecurityContext, &corev1.SecurityContext{
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"CHOWN", "DAC_OVERRIDE", "FOWNER"}},
				Privileged:               new(false),
				AllowPrivilegeEscalation: new(false),
				ReadOnlyRootFilesystem:   new(true),
				SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			})
		}},
	}
	tests = append(tests, sharedContract(job, jobspec.ComponentRestore, "restore-20250601")...)
	for _, tt := range tests {
		t.Run(tt.name, tt.check)
	}
}

// TestBuildRestoreVariants checks how each input changes the Job.
func TestBuildRestoreVariants(t *testing.T) {
	tests := []struct {
		name   string
		modify func(r *jobspec.Restore)
		check  func(t *testing.T, job *batchv1.Job)
	}{
		{"replace off, caps on", func(r *jobspec.Restore) {
			r.Replace = false
			r.MaxBytes = 8 << 30
			r.MaxEntries = 50000
		}, func(t *testing.T, job *batchv1.Job) {
			eq(t, "args", container(t, job).Args, []string{"restore", "--run-id", "restore-20250601", "--archive", "/backups/survival/20250601-0300.tar.zst",
				"--sha256", jobtest.SHA256, "--into", "/world", "--max-bytes", "8589934592", "--max-entries", "50000", "--log-format", "json"})
		}},
		{"custom paths reach mounts and args", func(r *jobspec.Restore) {
			r.WorldRoot, r.BackupRoot = "/data/world", "/data/archives"
			r.ArchiveRef = "/data/archives/survival/x.tar.gz"
		}, func(t *testing.T, job *batchv1.Job) {
			eq(t, "world mount", mountAt(t, job, jobspec.WorldVolumeName), corev1.VolumeMount{Name: jobspec.WorldVolumeName, MountPath: "/data/world"})
			eq(t, "backup mount", mountAt(t, job, jobspec.BackupVolumeName), corev1.VolumeMount{Name: jobspec.BackupVolumeName, MountPath: "/data/archives", ReadOnly: true})
			args := strings.Join(container(t, job).Args, " ")
			for _, want := range []string{"--into /data/world", "--archive /data/archives/survival/x.tar.gz"} {
				if !strings.Contains(args, want) {
					t.Fatalf("args %q lack %q", args, want)
				}
			}
		}},
		{"custom claims", func(r *jobspec.Restore) {
			r.WorldClaimName, r.BackupClaimName = "survival-data", "offsite"
		}, func(t *testing.T, job *batchv1.Job) {
			eq(t, "world claim", volume(t, job, jobspec.WorldVolumeName).PersistentVolumeClaim.ClaimName, "survival-data")
			eq(t, "backup claim", volume(t, job, jobspec.BackupVolumeName).PersistentVolumeClaim.ClaimName, "offsite")
		}},
		{"skipAwait annotates the Job only", func(r *jobspec.Restore) { r.Await = jobspec.Await{Skip: true} }, func(t *testing.T, job *batchv1.Job) {
			eq(t, "job skipAwait", job.Annotations["pulumi.com/skipAwait"], "true")
			if _, ok := job.Spec.Template.Annotations["pulumi.com/skipAwait"]; ok {
				t.Fatal("pod template has pulumi.com/skipAwait")
			}
			if _, ok := job.Annotations["pulumi.com/replaceUnready"]; ok {
				t.Fatal("Job has pulumi.com/replaceUnready without asking for it")
			}
		}},
		{"extra labels and annotations, ours win", func(r *jobspec.Restore) {
			r.Labels = map[string]string{"team": "ops", jobspec.LabelComponent: "spoofed"}
			r.Annotations = map[string]string{"note": "x", jobspec.AnnotationRunID: "spoofed"}
		}, func(t *testing.T, job *batchv1.Job) {
			for _, l := range []map[string]string{job.Labels, job.Spec.Template.Labels} {
				eq(t, "team label", l["team"], "ops")
				eq(t, "component label", l[jobspec.LabelComponent], "restore")
			}
			for _, a := range []map[string]string{job.Annotations, job.Spec.Template.Annotations} {
				eq(t, "note annotation", a["note"], "x")
				eq(t, "run-id annotation", a[jobspec.AnnotationRunID], "restore-20250601")
			}
		}},
		{"node name", func(r *jobspec.Restore) { r.Placement = jobspec.Placement{NodeName: "node-a"} }, func(t *testing.T, job *batchv1.Job) {
			eq(t, "nodeName", job.Spec.Template.Spec.NodeName, "node-a")
			eq(t, "affinity", job.Spec.Template.Spec.Affinity, (*corev1.Affinity)(nil))
		}},
		{"node selector as required affinity", func(r *jobspec.Restore) {
			r.Placement = jobspec.Placement{NodeSelector: map[string]string{"kubernetes.io/hostname": "node-a"}}
		}, func(t *testing.T, job *batchv1.Job) {
			eq(t, "affinity", job.Spec.Template.Spec.Affinity, jobspec.Affinity(jobspec.Placement{NodeSelector: map[string]string{"kubernetes.io/hostname": "node-a"}}))
		}},
		{"restricted identity: nothing added", func(r *jobspec.Restore) { *r = restrictedRestore() }, func(t *testing.T, job *batchv1.Job) {
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
		{"limits below default requests cap the requests", func(r *jobspec.Restore) {
			r.Resources = jobspec.Resources{CPULimit: resource.MustParse("50m"), MemoryLimit: resource.MustParse("100Mi")}
		}, func(t *testing.T, job *batchv1.Job) {
			rr := container(t, job).Resources
			eq(t, "cpu request", rr.Requests.Cpu().String(), "50m")
			eq(t, "memory request", rr.Requests.Memory().String(), "100Mi")
		}},
		{"durations round up to seconds", func(r *jobspec.Restore) {
			r.Deadline = 2*time.Hour + time.Millisecond
			r.TTLAfterFinished = time.Minute + time.Millisecond
			r.BackoffLimit = 0
		}, func(t *testing.T, job *batchv1.Job) {
			eq(t, "activeDeadlineSeconds", *job.Spec.ActiveDeadlineSeconds, int64(7201))
			eq(t, "ttlSecondsAfterFinished", *job.Spec.TTLSecondsAfterFinished, int32(61))
			eq(t, "backoffLimit", *job.Spec.BackoffLimit, int32(0))
		}},
		{"run ID with upper case gets a hashed valid name", func(r *jobspec.Restore) { r.RunID = "Rollback.2025_06" }, func(t *testing.T, job *batchv1.Job) {
			if !strings.HasPrefix(job.Name, "survival-restore-rollback-2025-06-") || len(job.Name) > 63 {
				t.Fatalf("name = %q", job.Name)
			}
			eq(t, "run-id annotation", job.Spec.Template.Annotations[jobspec.AnnotationRunID], "Rollback.2025_06")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := jobtest.DefaultRestore()
			tt.modify(&r)
			tt.check(t, jobspec.BuildRestore(r))
		})
	}
}

// TestBuildRestoreNewRunNewJob checks that the run ID reaches the Job name
// and the pod template, and the archive and checksum the args, so each
// replaces the Job; and that the same inputs give the same Job.
func TestBuildRestoreNewRunNewJob(t *testing.T) {
	a := jobspec.BuildRestore(jobtest.DefaultRestore())
	if again := jobspec.BuildRestore(jobtest.DefaultRestore()); !reflect.DeepEqual(a, again) {
		t.Fatal("BuildRestore is not deterministic")
	}
	r2 := jobtest.DefaultRestore()
	r2.RunID = "restore-20250602"
	b := jobspec.BuildRestore(r2)
	if a.Name == b.Name {
		t.Fatalf("two run IDs share the Job name %q", a.Name)
	}
	if reflect.DeepEqual(a.Spec.Template.Annotations, b.Spec.Template.Annotations) {
		t.Fatal("pod template annotations do not change with the run ID")
	}
	r3 := jobtest.DefaultRestore()
	r3.SHA256 = strings.Repeat("0", 64)
	if reflect.DeepEqual(a.Spec.Template, jobspec.BuildRestore(r3).Spec.Template) {
		t.Fatal("the pod template does not change with the checksum")
	}
	if jobspec.BuildRestore(jobtest.DefaultRestore()).Name == jobspec.BackupJobName("survival", "restore-20250601") {
		t.Fatal("a restore Job and a backup Job of the same run ID share a name")
	}
}

// TestBuildRestorePodSecurity evaluates the pod template against the Pod
// Security Standards at the latest version.
func TestBuildRestorePodSecurity(t *testing.T) {
	tests := []struct {
		name    string
		restore jobspec.Restore
		level   api.Level
		allowed bool
	}{
		{"baseline mode passes baseline", jobtest.DefaultRestore(), api.LevelBaseline, true},
		{"baseline mode fails restricted", jobtest.DefaultRestore(), api.LevelRestricted, false},
		{"restricted mode passes baseline", restrictedRestore(), api.LevelBaseline, true},
		{"restricted mode passes restricted", restrictedRestore(), api.LevelRestricted, true},
		{"restricted mode with node name passes restricted", func() jobspec.Restore {
			r := restrictedRestore()
			r.Placement.NodeName = "node-a"
			return r
		}(), api.LevelRestricted, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := jobspec.BuildRestore(tt.restore).Spec.Template
			agg := jobtest.PodSecurity(t, tmpl, tt.level)
			if agg.Allowed != tt.allowed {
				t.Fatalf("allowed = %v, want %v; forbidden: %v %v", agg.Allowed, tt.allowed, agg.ForbiddenReasons, agg.ForbiddenDetails)
			}
			if !tt.allowed {
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

// TestRestoreAndBackupShareHardening checks that the two Jobs differ only
// where the contract says they do: args, volumes and mounts, the component
// label, the run ID, and the capabilities added in baseline mode. Hardening
// added to one builder and forgotten in the other fails here.
func TestRestoreAndBackupShareHardening(t *testing.T) {
	for _, mode := range []string{"baseline", "restricted"} {
		t.Run(mode, func(t *testing.T) {
			b, r := jobtest.DefaultBackup(), jobtest.DefaultRestore()
			if mode == "restricted" {
				b, r = restrictedBackup(), restrictedRestore()
			}
			r.RunID = b.RunID
			backup, restore := jobspec.BuildBackup(b), jobspec.BuildRestore(r)
			// Blank out what legitimately differs.
			for _, j := range []*batchv1.Job{backup, restore} {
				j.Name = ""
				delete(j.Labels, jobspec.LabelComponent)
				delete(j.Spec.Template.Labels, jobspec.LabelComponent)
				spec := &j.Spec.Template.Spec
				spec.Volumes = nil
				c := &spec.Containers[0]
				c.Args, c.VolumeMounts = nil, nil
				c.SecurityContext.Capabilities.Add = nil
			}
			if !reflect.DeepEqual(backup, restore) {
				t.Fatalf("the Jobs differ beyond args, volumes, component and capabilities:\nbackup:  %+v\nrestore: %+v", backup, restore)
			}
		})
	}
}

func restoreByRun(from string) jobspec.Restore {
	r := jobtest.DefaultRestore()
	r.ArchiveRef, r.SHA256 = "", ""
	r.FromRun, r.ConfigSecretName, r.ConfigMountPath = from, "felis-config", "/etc/felis"
	return r
}

// TestBuildRestoreByRun checks the restore by run: the resolve init
// container alone mounts the config Secret and no world or backup claim;
// the extractor mounts no Secret and reads the resolved run read-only.
func TestBuildRestoreByRun(t *testing.T) {
	for _, tt := range []struct {
		name     string
		restore  jobspec.Restore
		wantInit []string
		wantMain []string
	}{
		{
			name: "latest, folder store", restore: restoreByRun("latest"),
			wantInit: []string{"resolve", "--server", "survival", "--namespace", "minecraft", "--from-run", "latest", "--config", "/etc/felis/felis.toml",
				"--within", "/backups", "--out", "/run/worldbackup/run.json", "--allow-gone", "--log-format", "json"},
			wantMain: []string{"restore", "--run-id", "restore-20250601", "--archive-from", "/run/worldbackup/run.json",
				"--into", "/world", "--replace", "--log-format", "json"},
		},
		{
			name: "a run ID of another server, S3 store", restore: func() jobspec.Restore {
				r := restoreByRun("2025-06-01T0300Z")
				r.FromServer = "lobby"
				r.Store = &jobspec.S3Store{Endpoint: "http://minio:9000", SecretName: "felis-s3", AccessKeyKey: "ak", SecretKeyKey: "sk"}
				return r
			}(),
			wantInit: []string{"resolve", "--server", "lobby", "--namespace", "minecraft", "--from-run", "2025-06-01T0300Z", "--config", "/etc/felis/felis.toml",
				"--within", "s3://", "--out", "/run/worldbackup/run.json", "--allow-gone", "--log-format", "json"},
			wantMain: []string{"restore", "--run-id", "restore-20250601", "--archive-from", "/run/worldbackup/run.json",
				"--into", "/world", "--replace", "--s3-endpoint", "http://minio:9000", "--s3-access-key-file", "/etc/felis-s3/access-key",
				"--s3-secret-key-file", "/etc/felis-s3/secret-key", "--log-format", "json"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) { checkByRun(t, jobspec.BuildRestore(tt.restore), tt.wantInit, tt.wantMain) })
	}
	t.Run("restricted mode passes restricted", func(t *testing.T) {
		r := restoreByRun("latest")
		r.Identity = restrictedRestore().Identity
		if agg := jobtest.PodSecurity(t, jobspec.BuildRestore(r).Spec.Template, api.LevelRestricted); !agg.Allowed {
			t.Fatalf("forbidden: %v %v", agg.ForbiddenReasons, agg.ForbiddenDetails)
		}
	})
	t.Run("by archive: no init container", func(t *testing.T) {
		if n := len(jobspec.BuildRestore(jobtest.DefaultRestore()).Spec.Template.Spec.InitContainers); n != 0 {
			t.Fatalf("init containers = %d, want 0", n)
		}
	})
}

// checkByRun checks a Job by run (a restore's or a verify's): the resolve
// init container, with wantInit as its args, alone mounts the config Secret
// and no world, backup claim or S3 credentials; the Job's container, with
// wantMain, mounts no Secret but the S3 store's and reads the resolved run
// read-only; neither has an environment.
func checkByRun(t *testing.T, job *batchv1.Job, wantInit, wantMain []string) {
	t.Helper()
	pod := job.Spec.Template.Spec
	if len(pod.InitContainers) != 1 {
		t.Fatalf("init containers = %d, want 1", len(pod.InitContainers))
	}
	init, main := pod.InitContainers[0], container(t, job)
	eq(t, "init name", init.Name, "resolve")
	eq(t, "init image", init.Image, main.Image)
	eq(t, "init args", init.Args, wantInit)
	eq(t, "main args", main.Args, wantMain)
	secretVolumes := map[string]bool{}
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			secretVolumes[v.Name] = true
		}
	}
	configMounted := false
	for _, m := range init.VolumeMounts {
		switch m.Name {
		case jobspec.WorldVolumeName, jobspec.BackupVolumeName, jobspec.S3VolumeName:
			t.Errorf("the init container mounts %q: it reads only the catalog", m.Name)
		case jobspec.ConfigVolumeName:
			configMounted = true
			eq(t, "config mount", m, corev1.VolumeMount{Name: "config", MountPath: "/etc/felis", ReadOnly: true})
		case jobspec.ResolvedVolumeName:
			eq(t, "init resolved mount", m, corev1.VolumeMount{Name: "resolved", MountPath: "/run/worldbackup"})
		default:
			t.Errorf("unexpected init mount %+v", m)
		}
	}
	if !configMounted {
		t.Error("the init container does not mount the config Secret")
	}
	for _, m := range main.VolumeMounts {
		if m.Name == jobspec.ConfigVolumeName || (secretVolumes[m.Name] && m.Name != jobspec.S3VolumeName) {
			t.Errorf("the extractor mounts the Secret volume %q: it must stay DB-blind", m.Name)
		}
		if m.Name == jobspec.ResolvedVolumeName {
			eq(t, "main resolved mount", m, corev1.VolumeMount{Name: "resolved", MountPath: "/run/worldbackup", ReadOnly: true})
		}
	}
	for _, c := range []corev1.Container{init, main} {
		if slices.Contains(c.Args, "--config") && c.Name != "resolve" {
			t.Errorf("%s passes --config", c.Name)
		}
		eq(t, c.Name+" env", len(c.Env)+len(c.EnvFrom), 0)
	}
	eq(t, "init capabilities", init.SecurityContext.Capabilities, &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}})
	eq(t, "init read-only root", *init.SecurityContext.ReadOnlyRootFilesystem, true)
	v := volume(t, job, jobspec.ResolvedVolumeName)
	if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Cmp(resource.MustParse("1Mi")) != 0 {
		t.Errorf("resolved volume %+v: want an emptyDir of at most 1Mi", v.VolumeSource)
	}
	eq(t, "config volume", volume(t, job, jobspec.ConfigVolumeName).Secret.SecretName, "felis-config")
}
