package provider

import (
	"reflect"
	"testing"

	pbatchv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/batch/v1"
	pcorev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	pmetav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/worldbackup/worldbackup/jobapi"
)

// TestRegisterJobMatchesNewJob registers the same Job twice, once through
// the SDK's typed batchv1.NewJob and once through registerJob's generic
// conversion, and checks that the provider receives identical inputs and
// options.
func TestRegisterJobMatchesNewJob(t *testing.T) {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "pi",
			Namespace:   "minecraft",
			Labels:      map[string]string{"app": "pi"},
			Annotations: map[string]string{"pulumi.com/skipAwait": "true"},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:            new(int32(4)),
			ActiveDeadlineSeconds:   new(int64(1800)),
			TTLSecondsAfterFinished: new(int32(0)),
			PodReplacementPolicy:    new(batchv1.Failed),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"run": "r1"}},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: new(false),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsUser:      new(int64(0)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:    "pi",
						Image:   "perl",
						Command: []string{"perl", "-e", "print 1"},
						Resources: corev1.ResourceRequirements{
							Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
						},
						SecurityContext: &corev1.SecurityContext{
							Capabilities:           &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
							ReadOnlyRootFilesystem: new(true),
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "world", MountPath: "/world", ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{
						{Name: "world", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "w", ReadOnly: true}}},
						{Name: "config", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s", DefaultMode: new(int32(0o400))}}},
						{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: new(resource.MustParse("64Mi"))}}},
					},
				},
			},
		},
	}
	typed := &pbatchv1.JobArgs{
		Metadata: &pmetav1.ObjectMetaArgs{
			Name:        pulumi.String("pi"),
			Namespace:   pulumi.String("minecraft"),
			Labels:      pulumi.StringMap{"app": pulumi.String("pi")},
			Annotations: pulumi.StringMap{"pulumi.com/skipAwait": pulumi.String("true")},
		},
		Spec: &pbatchv1.JobSpecArgs{
			BackoffLimit:            pulumi.Int(4),
			ActiveDeadlineSeconds:   pulumi.Int(1800),
			TtlSecondsAfterFinished: pulumi.Int(0),
			PodReplacementPolicy:    pulumi.String("Failed"),
			Template: &pcorev1.PodTemplateSpecArgs{
				Metadata: &pmetav1.ObjectMetaArgs{Annotations: pulumi.StringMap{"run": pulumi.String("r1")}},
				Spec: &pcorev1.PodSpecArgs{
					RestartPolicy:                pulumi.String("Never"),
					AutomountServiceAccountToken: pulumi.Bool(false),
					SecurityContext: &pcorev1.PodSecurityContextArgs{
						RunAsUser:      pulumi.Int(0),
						SeccompProfile: &pcorev1.SeccompProfileArgs{Type: pulumi.String("RuntimeDefault")},
					},
					Containers: pcorev1.ContainerArray{&pcorev1.ContainerArgs{
						Name:    pulumi.String("pi"),
						Image:   pulumi.String("perl"),
						Command: pulumi.StringArray{pulumi.String("perl"), pulumi.String("-e"), pulumi.String("print 1")},
						Resources: &pcorev1.ResourceRequirementsArgs{
							Limits: pulumi.StringMap{"cpu": pulumi.String("1"), "memory": pulumi.String("1Gi")},
						},
						SecurityContext: &pcorev1.SecurityContextArgs{
							Capabilities:           &pcorev1.CapabilitiesArgs{Drop: pulumi.StringArray{pulumi.String("ALL")}},
							ReadOnlyRootFilesystem: pulumi.Bool(true),
						},
						VolumeMounts: pcorev1.VolumeMountArray{&pcorev1.VolumeMountArgs{
							Name: pulumi.String("world"), MountPath: pulumi.String("/world"), ReadOnly: pulumi.Bool(true),
						}},
					}},
					Volumes: pcorev1.VolumeArray{
						&pcorev1.VolumeArgs{Name: pulumi.String("world"), PersistentVolumeClaim: &pcorev1.PersistentVolumeClaimVolumeSourceArgs{
							ClaimName: pulumi.String("w"), ReadOnly: pulumi.Bool(true),
						}},
						&pcorev1.VolumeArgs{Name: pulumi.String("config"), Secret: &pcorev1.SecretVolumeSourceArgs{
							SecretName: pulumi.String("s"), DefaultMode: pulumi.Int(0o400),
						}},
						&pcorev1.VolumeArgs{Name: pulumi.String("tmp"), EmptyDir: &pcorev1.EmptyDirVolumeSourceArgs{
							SizeLimit: pulumi.String("64Mi"),
						}},
					},
				},
			},
		},
	}

	var typedJob *pbatchv1.Job
	var genericJob *kubeResource
	m, err := runMocked(t, func(ctx *pulumi.Context) error {
		var err error
		if typedJob, err = pbatchv1.NewJob(ctx, "typed", typed); err != nil {
			return err
		}
		genericJob, err = registerJob(ctx, "generic", job)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	jobs := m.ofType("kubernetes:batch/v1:Job")
	if len(jobs) != 2 {
		t.Fatalf("Jobs = %d, want 2", len(jobs))
	}
	byName := map[string]pulumi.MockResourceArgs{}
	for _, j := range jobs {
		byName[j.Name] = j
	}
	want, got := byName["typed"], byName["generic"]
	if !reflect.DeepEqual(got.Inputs, want.Inputs) {
		t.Fatalf("inputs differ:\ngeneric: %v\ntyped:   %v", got.Inputs, want.Inputs)
	}
	if got.RegisterRPC.GetVersion() != want.RegisterRPC.GetVersion() || got.Provider != want.Provider || got.Custom != want.Custom {
		t.Fatalf("options differ: version %q/%q provider %q/%q custom %v/%v",
			got.RegisterRPC.GetVersion(), want.RegisterRPC.GetVersion(), got.Provider, want.Provider, got.Custom, want.Custom)
	}
	if typedJob == nil || genericJob == nil {
		t.Fatal("a registration returned no resource")
	}
}

// TestArchiveRefOf: a component's archiveRef is the archive its inputs
// name, else the one its run reported; a restore that found its world
// already restored by its run ID reports the archive the world holds, not
// the (newer) one its re-created Job was given.
func TestArchiveRefOf(t *testing.T) {
	const planned, held = "/backups/survival/new.tar.zst", "/backups/survival/old.tar.zst"
	tests := []struct {
		name              string
		planned, observed string
		status            jobapi.Status
		want              string
	}{
		{"restored the archive named", planned, planned, jobapi.StatusRestored, planned},
		{"a restore by run: the run resolved it", "", held, jobapi.StatusRestored, held},
		{"not observed (skipAwait)", planned, "", "", planned},
		{"already restored from another archive", planned, held, jobapi.StatusAlreadyRestored, held},
		{"already restored, a marker that does not say", planned, "", jobapi.StatusAlreadyRestored, ""},
		{"a backup", planned, planned, jobapi.StatusDone, planned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := archiveRefOf(tt.planned, tt.observed, tt.status); got != tt.want {
				t.Errorf("archiveRefOf(%q, %q, %q) = %q, want %q", tt.planned, tt.observed, tt.status, got, tt.want)
			}
		})
	}
}
