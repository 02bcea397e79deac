package jobspec_test

import (
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/pod-security-admission/api"

	"github.com/worldbackup/worldbackup/provider/internal/jobtest"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// s3Store is an S3 store on a self-hosted server with every setting given.
func s3Store() *jobspec.S3Store {
	return &jobspec.S3Store{
		URL:          "s3://felis-backups/worlds",
		Endpoint:     "http://minio.storage:9000",
		Region:       "eu-central-1",
		PathStyle:    true,
		SecretName:   "felis-s3",
		AccessKeyKey: "AWS_ACCESS_KEY_ID",
		SecretKeyKey: "AWS_SECRET_ACCESS_KEY",
	}
}

// volumeNames returns the names of job's volumes and of its mounts.
func volumeNames(t *testing.T, job *batchv1.Job) (volumes, mounts []string) {
	t.Helper()
	for _, v := range job.Spec.Template.Spec.Volumes {
		volumes = append(volumes, v.Name)
	}
	for _, m := range container(t, job).VolumeMounts {
		mounts = append(mounts, m.Name)
	}
	return volumes, mounts
}

// checkCredentialsMount checks that job mounts only the credentials
// Secret's two keys, read-only, 0400, at the files the args name.
func checkCredentialsMount(t *testing.T, job *batchv1.Job) {
	t.Helper()
	eq(t, "credentials volume", volume(t, job, jobspec.S3VolumeName).Secret, &corev1.SecretVolumeSource{
		SecretName:  "felis-s3",
		DefaultMode: new(int32(0o400)),
		Items: []corev1.KeyToPath{
			{Key: "AWS_ACCESS_KEY_ID", Path: "access-key"},
			{Key: "AWS_SECRET_ACCESS_KEY", Path: "secret-key"},
		},
	})
	eq(t, "credentials mount", mountAt(t, job, jobspec.S3VolumeName),
		corev1.VolumeMount{Name: jobspec.S3VolumeName, MountPath: "/etc/felis-s3", ReadOnly: true})
	c := container(t, job)
	eq(t, "env", len(c.Env)+len(c.EnvFrom), 0)
	for _, a := range c.Args {
		if strings.Contains(a, "AWS_") {
			t.Fatalf("args %q name a key of the Secret: they must name only the mounted files", c.Args)
		}
	}
}

// TestBuildBackupS3Store checks the backup Job of an S3 store: --store and
// the --s3-* settings as arguments, the credentials from the mounted
// Secret, and no backup claim.
func TestBuildBackupS3Store(t *testing.T) {
	tests := []struct {
		name     string
		store    *jobspec.S3Store
		wantArgs []string
	}{
		{"every setting", s3Store(), []string{"--store", "s3://felis-backups/worlds",
			"--s3-endpoint", "http://minio.storage:9000", "--s3-region", "eu-central-1", "--s3-path-style",
			"--s3-access-key-file", "/etc/felis-s3/access-key", "--s3-secret-key-file", "/etc/felis-s3/secret-key"}},
		{"AWS defaults", func() *jobspec.S3Store {
			s := s3Store()
			s.Endpoint, s.Region, s.PathStyle = "", "", false
			return s
		}(), []string{"--store", "s3://felis-backups/worlds",
			"--s3-access-key-file", "/etc/felis-s3/access-key", "--s3-secret-key-file", "/etc/felis-s3/secret-key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := jobtest.DefaultBackup()
			b.Store = tt.store
			job := jobspec.BuildBackup(b)
			want := append([]string{"backup", "--server", "survival", "--run-id", "20250601-0300", "--namespace", "minecraft",
				"--world", "/world", "--config", "/etc/felis/felis.toml"}, tt.wantArgs...)
			want = append(want, "--format", "chunked", "--log-format", "json")
			eq(t, "args", container(t, job).Args, want)
			volumes, mounts := volumeNames(t, job)
			eq(t, "volumes", volumes, []string{"world", "config", "tmp", "s3-credentials"})
			eq(t, "mounts", mounts, []string{"world", "config", "tmp", "s3-credentials"})
			checkCredentialsMount(t, job)
			if slices.Contains(container(t, job).Args, "--archive-root") {
				t.Fatal("an S3 backup passes --archive-root")
			}
		})
	}
}

// TestBuildRestoreS3Store checks the restore Job of an s3:// archive: the
// --s3-* settings, the credentials Secret, still no config Secret (no
// database), no token and no backup claim.
func TestBuildRestoreS3Store(t *testing.T) {
	r := jobtest.DefaultRestore()
	r.ArchiveRef = "s3://felis-backups/worlds/survival/20250601-0300.tar.zst"
	r.Store = s3Store()
	job := jobspec.BuildRestore(r)
	eq(t, "args", container(t, job).Args, []string{"restore", "--run-id", "restore-20250601",
		"--archive", "s3://felis-backups/worlds/survival/20250601-0300.tar.zst", "--sha256", jobtest.SHA256,
		"--into", "/world", "--replace",
		"--s3-endpoint", "http://minio.storage:9000", "--s3-region", "eu-central-1", "--s3-path-style",
		"--s3-access-key-file", "/etc/felis-s3/access-key", "--s3-secret-key-file", "/etc/felis-s3/secret-key",
		"--log-format", "json"})
	volumes, mounts := volumeNames(t, job)
	eq(t, "volumes", volumes, []string{"world", "tmp", "s3-credentials"})
	eq(t, "mounts", mounts, []string{"world", "tmp", "s3-credentials"})
	checkCredentialsMount(t, job)
	eq(t, "token", *job.Spec.Template.Spec.AutomountServiceAccountToken, false)
}

// TestBuildPruneS3Store checks the prune Job of an S3 store: --store and
// the --s3-* settings as arguments, the credentials from the mounted
// Secret, the config Secret (the catalog), and no backup claim.
func TestBuildPruneS3Store(t *testing.T) {
	p := jobtest.DefaultPrune()
	p.Store = s3Store()
	job := jobspec.BuildPrune(p)
	eq(t, "args", container(t, job).Args, []string{"prune", "--server", "survival", "--namespace", "minecraft", "--config", "/etc/felis/felis.toml",
		"--store", "s3://felis-backups/worlds",
		"--s3-endpoint", "http://minio.storage:9000", "--s3-region", "eu-central-1", "--s3-path-style",
		"--s3-access-key-file", "/etc/felis-s3/access-key", "--s3-secret-key-file", "/etc/felis-s3/secret-key",
		"--keep-daily", "7", "--min-keep", "3", "--log-format", "json"})
	volumes, mounts := volumeNames(t, job)
	eq(t, "volumes", volumes, []string{"config", "tmp", "s3-credentials"})
	eq(t, "mounts", mounts, []string{"config", "tmp", "s3-credentials"})
	checkCredentialsMount(t, job)
	eq(t, "token", *job.Spec.Template.Spec.AutomountServiceAccountToken, false)
}

// TestS3StorePodSecurity evaluates the pods of an S3 store against the Pod
// Security Standards: the Secret volume changes nothing.
func TestS3StorePodSecurity(t *testing.T) {
	withStore := func(b jobspec.Backup) jobspec.Backup { b.Store = s3Store(); return b }
	restoreWithStore := func(r jobspec.Restore) jobspec.Restore {
		r.ArchiveRef, r.Store = "s3://felis-backups/worlds/survival/20250601-0300.tar.zst", s3Store()
		return r
	}
	pruneWithStore := func(p jobspec.Prune) jobspec.Prune { p.Store = s3Store(); return p }
	tests := []struct {
		name    string
		pod     corev1.PodTemplateSpec
		level   api.Level
		allowed bool
	}{
		{"backup baseline passes baseline", jobspec.BuildBackup(withStore(jobtest.DefaultBackup())).Spec.Template, api.LevelBaseline, true},
		{"backup baseline fails restricted", jobspec.BuildBackup(withStore(jobtest.DefaultBackup())).Spec.Template, api.LevelRestricted, false},
		{"backup restricted passes restricted", jobspec.BuildBackup(withStore(restrictedBackup())).Spec.Template, api.LevelRestricted, true},
		{"schedule restricted passes restricted",
			jobspec.BuildBackupSchedule(withStore(restrictedBackup()), schedule()).Spec.JobTemplate.Spec.Template, api.LevelRestricted, true},
		{"restore baseline passes baseline", jobspec.BuildRestore(restoreWithStore(jobtest.DefaultRestore())).Spec.Template, api.LevelBaseline, true},
		{"restore baseline fails restricted", jobspec.BuildRestore(restoreWithStore(jobtest.DefaultRestore())).Spec.Template, api.LevelRestricted, false},
		{"restore restricted passes restricted", jobspec.BuildRestore(restoreWithStore(restrictedRestore())).Spec.Template, api.LevelRestricted, true},
		{"prune baseline passes baseline", jobspec.BuildPrune(pruneWithStore(jobtest.DefaultPrune())).Spec.Template, api.LevelBaseline, true},
		{"prune baseline fails restricted", jobspec.BuildPrune(pruneWithStore(jobtest.DefaultPrune())).Spec.Template, api.LevelRestricted, false},
		{"prune restricted passes restricted", jobspec.BuildPrune(pruneWithStore(restrictedPrune())).Spec.Template, api.LevelRestricted, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agg := jobtest.PodSecurity(t, tt.pod, tt.level)
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

// TestBuildBackupScheduleS3Store checks that the scheduled backup's pod is
// the on-demand S3 backup's: the credentials mounted, no backup claim.
func TestBuildBackupScheduleS3Store(t *testing.T) {
	b := jobtest.DefaultBackup()
	b.Store = s3Store()
	cj := jobspec.BuildBackupSchedule(b, schedule())
	job := jobspec.BuildBackup(b)
	pod := cj.Spec.JobTemplate.Spec.Template.Spec
	eq(t, "volumes", pod.Volumes, job.Spec.Template.Spec.Volumes)
	eq(t, "mounts", pod.Containers[0].VolumeMounts, job.Spec.Template.Spec.Containers[0].VolumeMounts)
	if i := slices.Index(pod.Containers[0].Args, "--store"); i < 0 || pod.Containers[0].Args[i+1] != "s3://felis-backups/worlds" {
		t.Fatalf("args %q: want --store s3://felis-backups/worlds", pod.Containers[0].Args)
	}
}
