package jobspec_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/pod-security-admission/api"

	"github.com/worldbackup/worldbackup/provider/internal/jobtest"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

func schedule() jobspec.Schedule {
	return jobspec.Schedule{Cron: "0 4 * * *", TimeZone: "Europe/Berlin", StartingDeadline: 10 * time.Minute, SuccessfulJobs: 3, FailedJobs: 3}
}

func TestBuildBackupSchedule(t *testing.T) {
	b := jobtest.DefaultBackup()
	b.Await = jobspec.Await{ReplaceUnready: true}
	cj := jobspec.BuildBackupSchedule(b, schedule())
	job := jobspec.BuildBackup(jobtest.DefaultBackup())
	pod := cj.Spec.JobTemplate.Spec.Template.Spec
	c := pod.Containers[0]

	eq(t, "name", cj.Name, "survival-sched")
	if errs := validation.IsDNS1123Label(cj.Name); len(errs) > 0 || len(cj.Name) > jobspec.MaxScheduleNameLen {
		t.Fatalf("name %q: %v", cj.Name, errs)
	}
	eq(t, "schedule", cj.Spec.Schedule, "0 4 * * *")
	eq(t, "time zone", *cj.Spec.TimeZone, "Europe/Berlin")
	eq(t, "concurrency", cj.Spec.ConcurrencyPolicy, batchv1.ForbidConcurrent)
	eq(t, "starting deadline", *cj.Spec.StartingDeadlineSeconds, int64(600))
	eq(t, "history", [2]int32{*cj.Spec.SuccessfulJobsHistoryLimit, *cj.Spec.FailedJobsHistoryLimit}, [2]int32{3, 3})

	i := slices.Index(c.Args, "--run-id")
	if i < 0 || c.Args[i+1] != "$(WB_RUN_ID)" {
		t.Fatalf("args %q: want --run-id $(WB_RUN_ID)", c.Args)
	}
	if len(c.Env) != 1 || c.Env[0].Name != jobspec.RunIDEnv || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef == nil ||
		c.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.labels['batch.kubernetes.io/job-name']" {
		t.Fatalf("env %+v: want the run ID from the Job's name through the downward API", c.Env)
	}
	// The same pod as the on-demand Job otherwise: mounts, volumes, identity, no token.
	eq(t, "volumes", pod.Volumes, job.Spec.Template.Spec.Volumes)
	eq(t, "mounts", c.VolumeMounts, job.Spec.Template.Spec.Containers[0].VolumeMounts)
	eq(t, "security", c.SecurityContext, job.Spec.Template.Spec.Containers[0].SecurityContext)
	eq(t, "token", *pod.AutomountServiceAccountToken, false)
	eq(t, "backoff", *cj.Spec.JobTemplate.Spec.BackoffLimit, *job.Spec.BackoffLimit)
	for k := range cj.Spec.JobTemplate.Annotations {
		if strings.HasPrefix(k, "pulumi.com/") {
			t.Fatalf("the Job template has %s: Pulumi does not await scheduled Jobs", k)
		}
	}
	eq(t, "component", cj.Spec.JobTemplate.Spec.Template.Labels[jobspec.LabelComponent], jobspec.ComponentSchedule)

	// The pod passes Pod Security like the on-demand Job: restricted mode
	// passes restricted.
	rcj := jobspec.BuildBackupSchedule(restrictedBackup(), schedule())
	if agg := jobtest.PodSecurity(t, rcj.Spec.JobTemplate.Spec.Template, api.LevelRestricted); !agg.Allowed {
		t.Fatalf("restricted mode's CronJob pod fails restricted: %v", agg.ForbiddenReasons)
	}
	if agg := jobtest.PodSecurity(t, cj.Spec.JobTemplate.Spec.Template, api.LevelBaseline); !agg.Allowed {
		t.Fatalf("baseline mode's CronJob pod fails baseline: %v", agg.ForbiddenReasons)
	}
}

// TestIsScheduledJobName: the names a schedule's CronJob gives its Jobs
// (<cronjob>-<minutes>) are recognized whatever the server, and an
// on-demand Job's usual names are not.
func TestIsScheduledJobName(t *testing.T) {
	for _, tt := range []struct {
		name string
		want bool
	}{
		{jobspec.ScheduleName("survival") + "-29412345", true},
		{jobspec.VerifyScheduleName("survival") + "-29412345", true},
		{jobspec.ScheduleName("a-backup") + "-29412345", true},
		{"a-backup-sched-29412345", true},
		{"survival-backup-20250601-0300", false},
		{"survival-backup-sched", false},
		{"survival-backup-sched-2a", false},
		{"survival-restore-restore-20250601", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := jobspec.IsScheduledJobName(tt.name); got != tt.want {
				t.Fatalf("IsScheduledJobName(%q) = %v, want %v", tt.name, got, tt.want)
			}
		})
	}
}
