package provider

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	corev1 "k8s.io/api/core/v1"

	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// TestSchedulingOnEveryPod checks that tolerations, priorityClassName and
// imagePullSecrets reach the pod of every Job kind and the CronJob's
// template.
func TestSchedulingOnEveryPod(t *testing.T) {
	set := func(j *JobInputs) {
		j.Tolerations = []TolerationArgs{{Key: "games", Operator: "Exists", Effect: "NoSchedule"},
			{Key: "spot", Value: "true", Effect: "NoExecute", TolerationSeconds: new(60)}}
		j.PriorityClassName = pulumi.String("backups")
		j.ImagePullSecrets = pulumi.ToStringArray([]string{"ghcr-pull"})
	}
	want := []corev1.Toleration{
		{Key: "games", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: "spot", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(60))},
	}
	backup := validArgs()
	set(&backup.JobInputs)
	b, err := backup.Job()
	if err != nil {
		t.Fatal(err)
	}
	restore := validRestoreArgs()
	set(&restore.JobInputs)
	r, err := restore.Job()
	if err != nil {
		t.Fatal(err)
	}
	prune := WorldPruneArgs{JobInputs: validArgs().JobInputs, Retention: &RetentionArgs{KeepDaily: pulumi.Int(7), MinKeep: pulumi.Int(3)}}
	set(&prune.JobInputs)
	pr, err := prune.Job()
	if err != nil {
		t.Fatal(err)
	}
	schedule := WorldBackupScheduleArgs{WorldBackupArgs: backup, ScheduleInputs: ScheduleInputs{Schedule: "0 4 * * *"}}
	sb, ss, _, err := schedule.resolve()
	if err != nil {
		t.Fatal(err)
	}
	pods := map[string]corev1.PodSpec{
		"backup":   jobspec.BuildBackup(b).Spec.Template.Spec,
		"restore":  jobspec.BuildRestore(r).Spec.Template.Spec,
		"prune":    jobspec.BuildPrune(pr).Spec.Template.Spec,
		"schedule": jobspec.BuildBackupSchedule(sb, ss).Spec.JobTemplate.Spec.Template.Spec,
	}
	for kind, pod := range pods {
		if !reflect.DeepEqual(pod.Tolerations, want) || pod.PriorityClassName != "backups" ||
			!slices.Equal(pod.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "ghcr-pull"}}) {
			t.Errorf("%s pod: tolerations %+v, priorityClassName %q, imagePullSecrets %v", kind, pod.Tolerations, pod.PriorityClassName, pod.ImagePullSecrets)
		}
	}
}

// TestSchedulingProblems checks that each mistake in the scheduling inputs
// is named with its fix, all at once.
func TestSchedulingProblems(t *testing.T) {
	a := validArgs()
	a.Tolerations = []TolerationArgs{
		{Operator: "Equal", Value: "x"},
		{Key: "a", Operator: "Exists", Value: "x"},
		{Key: "b", Operator: "Matches"},
		{Key: "c", Effect: "NoRun"},
		{Key: "d", Effect: "NoSchedule", TolerationSeconds: new(5)},
	}
	a.PriorityClassName = pulumi.String("High_Priority")
	a.ImagePullSecrets = pulumi.ToStringArray([]string{""})
	err := a.Validate()
	var ie *InputError
	if !errors.As(err, &ie) {
		t.Fatalf("error = %v, want an *InputError", err)
	}
	wantInputs := []string{"tolerations[0]", "tolerations[1]", "tolerations[2]", "tolerations[3]", "tolerations[4]", "priorityClassName", "imagePullSecrets"}
	if !slices.Equal(ie.Inputs(), wantInputs) {
		t.Fatalf("inputs %q, want %q (%v)", ie.Inputs(), wantInputs, err)
	}
	for _, want := range []string{"has no key", "remove the value", `operator "Matches"`, `effect "NoRun"`, "only effect NoExecute", "item 0 is empty"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}
