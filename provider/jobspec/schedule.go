package jobspec

import (
	"maps"
	"regexp"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/worldbackup/worldbackup/jobapi"
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

// Schedule holds the resolved arguments of a CronJob beyond those of its
// Job (a Backup or a Verify, whose RunID is ignored).
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

// ComponentVerifySchedule is the app.kubernetes.io/component label of
// verify CronJobs.
const ComponentVerifySchedule = "verify-schedule"

// VerifyScheduleName returns the verify CronJob's name for server. Its
// Jobs, <server>-vsched-<digits>, never take the name of a backup
// schedule's Job; an on-demand Job (<server>-<kind>-<suffix>) could, which
// the components refuse (IsScheduledJobName).
func VerifyScheduleName(server string) string { return server + "-vsched" }

// scheduledJobName matches the names of the Jobs that the CronJobs of
// ScheduleName and VerifyScheduleName create: the CronJob's name and the
// scheduled time in minutes (the CronJob controller's rule).
var scheduledJobName = regexp.MustCompile(`-v?sched-[0-9]+$`)

// IsScheduledJobName reports whether name has the form of a Job that a
// schedule's CronJob creates, for some server: an on-demand Job of that
// name could take a scheduled run's name (server a's runId
// sched-29412345 names a-backup-sched-29412345, a Job of server
// a-backup's schedule), and then one of the two cannot be created.
func IsScheduledJobName(name string) bool { return scheduledJobName.MatchString(name) }

// BuildBackupSchedule returns the CronJob that runs b's backup Job on
// schedule s: the same pod as the on-demand Job (mounts, identity, no
// token), concurrencyPolicy Forbid, and the run ID of each run taken from
// its Job's name. The Job template has no replaceUnready or skipAwait:
// Pulumi does not await the Jobs a CronJob creates.
func BuildBackupSchedule(b Backup, s Schedule) *batchv1.CronJob {
	b.RunID = "$(" + RunIDEnv + ")"
	b.Await = Await{}
	job := BuildBackup(b)
	c := &job.Spec.Template.Spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: RunIDEnv, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['" + jobNameLabel + "']"},
	}})
	return cronJob(ScheduleName(b.Server), b.Job, ComponentSchedule, job, s)
}

// BuildVerifySchedule returns the CronJob that verifies, on schedule s, the
// newest successful run of v's server (v.FromServer's, when set; v.FromRun
// when set, e.g. one run ID verified again and again): each Job is v's
// verify by run, its init container resolving the run when the Job starts.
// concurrencyPolicy Forbid; a verify that finds a problem fails its Job.
func BuildVerifySchedule(v Verify, s Schedule) *batchv1.CronJob {
	if v.FromRun == "" {
		v.FromRun = jobapi.RunLatest
	}
	v.RunID = ComponentVerifySchedule // names nothing: the controller names the Jobs
	v.Await = Await{}
	return cronJob(VerifyScheduleName(v.Server), v.Job, ComponentVerifySchedule, BuildVerify(v), s)
}

// cronJob returns the CronJob name that runs job (built from j) on schedule
// s, labelled component: job's pod, without the run ID of the on-demand
// Job.
func cronJob(name string, j Job, component string, job *batchv1.Job, s Schedule) *batchv1.CronJob {
	pod := job.Spec.Template
	delete(pod.Annotations, AnnotationRunID)
	pod.Labels = Labels(j.Server, component, j.Labels)
	job.Spec.Template = pod
	var tz *string
	if s.TimeZone != "" {
		tz = new(s.TimeZone)
	}
	return &batchv1.CronJob{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   j.Namespace,
			Labels:      Labels(j.Server, component, j.Labels),
			Annotations: maps.Clone(j.Annotations),
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
					Labels:      Labels(j.Server, component, j.Labels),
					Annotations: maps.Clone(j.Annotations),
				},
				Spec: job.Spec,
			},
		},
	}
}
