package jobrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestRewrite(t *testing.T) {
	mounts := map[string]Mount{
		"/etc":       {HostPath: "/h/etc"},
		"/etc/felis": {HostPath: "/h/felis"},
		"/world":     {HostPath: "/h/world"},
	}
	tests := []struct{ name, in, want string }{
		{"mount itself", "/world", "/h/world"},
		{"below a mount", "/world/region/r.0.0.mca", "/h/world/region/r.0.0.mca"},
		{"longest mount wins", "/etc/felis/felis.toml", "/h/felis/felis.toml"},
		{"flag with value", "--config=/etc/felis/felis.toml", "--config=/h/felis/felis.toml"},
		{"prefix that is not a path", "/worlds", "/worlds"},
		{"plain word", "backup", "backup"},
		{"flag without value", "--replace", "--replace"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := rewrite(tc.in, mounts); got != tc.want {
				t.Errorf("rewrite(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestRunMapsVolumesAndArgs(t *testing.T) {
	claim := t.TempDir()
	job := &batchv1.Job{}
	job.Spec.Template.Spec = corev1.PodSpec{
		Containers: []corev1.Container{{
			Name:    "c",
			Command: []string{"/usr/bin/cp-in-image"},
			Args:    []string{"/etc/conf/key", "/data/copied"},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "data", MountPath: "/data"},
				{Name: "conf", MountPath: "/etc/conf", ReadOnly: true},
			},
		}},
		Volumes: []corev1.Volume{
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "pvc"}}},
			{Name: "conf", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
		},
	}
	res, err := Run(t.Context(), job, Options{
		Claims:   map[string]string{"pvc": claim},
		Secrets:  map[string]map[string][]byte{"s": {"key": []byte("secret\n")}},
		Binaries: map[string]string{"/usr/bin/cp-in-image": "/bin/cp"},
	})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("cp: %v exit %d %s", err, res.ExitCode, res.Stderr)
	}
	if b, err := os.ReadFile(filepath.Join(claim, "copied")); err != nil || string(b) != "secret\n" {
		t.Errorf("the Secret's key copied to the claim: %q, %v", b, err)
	}
	if m := res.Mounts["/etc/conf"]; !m.ReadOnly || m.Volume != "conf" {
		t.Errorf("secret mount: %+v, want read-only volume conf", m)
	}
	if _, err := os.Stat(res.Mounts["/etc/conf"].HostPath); err == nil {
		t.Error("the Secret's files outlive the run: the scratch folder was not removed")
	}
}

func TestRunRefusesWhatItCannotMap(t *testing.T) {
	base := func() *batchv1.Job {
		j := &batchv1.Job{}
		j.Spec.Template.Spec = corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Command: []string{"/bin/x"},
				VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/v"}}}},
			Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "pvc"}}}},
		}
		return j
	}
	tests := []struct {
		name string
		edit func(*batchv1.Job, *Options)
		want string
	}{
		{"unknown claim", func(j *batchv1.Job, o *Options) { o.Claims = nil }, `no host folder stands in for claim "pvc"`},
		{"unknown binary", func(j *batchv1.Job, o *Options) { o.Binaries = nil }, `no host binary stands in for "/bin/x"`},
		{"valueFrom env", func(j *batchv1.Job, o *Options) {
			j.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{}}}
		}, "env X uses valueFrom"},
		{"no command", func(j *batchv1.Job, o *Options) { j.Spec.Template.Spec.Containers[0].Command = nil }, "container has no command"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := base()
			o := Options{Claims: map[string]string{"pvc": t.TempDir()}, Binaries: map[string]string{"/bin/x": "/bin/true"}}
			tc.edit(j, &o)
			_, err := Run(t.Context(), j, o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestParseJobRejectsOtherKinds(t *testing.T) {
	if _, err := ParseJob([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n")); err == nil || !strings.Contains(err.Error(), "not a batch/v1 Job") {
		t.Errorf("got %v", err)
	}
}
