package jobspec

import (
	"maps"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ComponentSchedule is the app.kubernetes.io/component label of backup
// CronJobs.
const ComponentSchedule = "backup-schedule"

// RunIDEnv is the environment variable that carries a scheduled run's ID,
// the name of the Job the CronJob created, from the downward API to
// `archiver backup --run-id $(WB_RUN_ID)`. A retried pod of one scheduled run
// has the same ID, so it stays idempotent. It is not a secret.
const RunIDEnv = "WB_RUN_ID"

// jobNameLabel is the label the Job controller puts on a Job's pods.
const jobNameLabel = "batch.kubernetes.io/job-name"

// MaxScheduleNameLen is the longest CronJob name: the controller appends
// "-<11 digits>" to name its Jobs, which must fit in 63.
const MaxScheduleNameLen = 52

// Schedule holds the resolved arguments of a backup CronJob beyond those of
// its Job (Backup, whose RunID is ignored).
type Schedule struct {
	Cron             string        // e.g. "0 4 * * *"
	TimeZone         string        // IANA name; "" = the controller's
	StartingDeadline time.Duration // startingDeadlineSeconds
	SuccessfulJobs   int32         // successfulJobsHistoryLimit
	FailedJobs       int32         // failedJobsHistoryLimit
	Suspend          bool
}

// ScheduleName returns the CronJob's name for server.
func ScheduleName(server string) string { return server + "-sched" }

// BuildBackupSchedule returns the CronJob that runs b's backup Job on
// schedule s: the same pod as the on-demand Job (mounts, identity, no
// token), concurrencyPolicy Forbid, and the run ID of each run taken from
// its Job's name. The Job template has no replaceUnready or skipAwait:
// Pulumi does not await the Jobs a CronJob creates.
func BuildBackupSchedule(b Backup, s Schedule) *batchv1.CronJob {
	b.RunID = "$(" + RunIDEnv + ")"
	b.Await = Await{}
	job := BuildBackup(b)
	pod := job.Spec.Template
	delete(pod.Annotations, AnnotationRunID)
	pod.Labels = Labels(b.Server, ComponentSchedule, b.Labels)
	c := &pod.Spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: RunIDEnv, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['" + jobNameLabel + "']"},
	}})
	job.Spec.Template = pod
	jobAnnotations := maps.Clone(b.Annotations)
	var tz *string
	if s.TimeZone != "" {
		tz = new(s.TimeZone)
	}
	return &batchv1.CronJob{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        ScheduleName(b.Server),
			Namespace:   b.Namespace,
			Labels:      Labels(b.Server, ComponentSchedule, b.Labels),
			Annotations: maps.Clone(b.Annotations),
		},
		Spec: batchv1.CronJobSpec{
			Schedule:                   s.Cron,
			TimeZone:                   tz,
			StartingDeadlineSeconds:    new(Seconds(s.StartingDeadline)),
			ConcurrencyPolicy:          batchv1.ForbidConcurrent,
			Suspend:                    new(s.Suspend),
			SuccessfulJobsHistoryLimit: new(s.SuccessfulJobs),
			FailedJobsHistoryLimit:     new(s.FailedJobs),
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      Labels(b.Server, ComponentSchedule, b.Labels),
					Annotations: jobAnnotations,
				},
				Spec: job.Spec,
			},
		},
	}
}
