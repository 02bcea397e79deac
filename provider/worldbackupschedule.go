package provider

import (
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // timeZone is checked wherever the program runs

	k8sbatchv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/batch/v1"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/utilities"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// WorldBackupScheduleType is the Pulumi type token of WorldBackupSchedule.
const WorldBackupScheduleType = "worldbackup:index:WorldBackupSchedule"

// Defaults of the schedule inputs.
const (
	DefaultStartingDeadline = "10m"
	DefaultJobsHistory      = 3
)

// WorldBackupScheduleArgs are the inputs of a WorldBackupSchedule: those of
// a WorldBackup (its runId, skipAwait, replaceUnready and timeout are not
// used: each scheduled run's ID is its Job's name, and Pulumi does not await
// the Jobs a CronJob creates) and the schedule's own. The backup's values
// may be Pulumi inputs as for a WorldBackup; the schedule's own are plain (the
// component is served to Go programs only).
type WorldBackupScheduleArgs struct {
	Backup WorldBackupArgs
	// Schedule is the cron expression, e.g. "0 4 * * *" (required).
	Schedule string
	// TimeZone is an IANA time zone, e.g. Europe/Berlin ("" = the
	// controller's, usually UTC).
	TimeZone string
	// StartingDeadline: a run that could not start within this long of its
	// time is skipped (default 10m).
	StartingDeadline string
	// SuccessfulJobsHistory, FailedJobsHistory: finished Jobs kept (default 3).
	SuccessfulJobsHistory, FailedJobsHistory *int
	// Suspend stops new runs without deleting the CronJob.
	Suspend bool
}

// WorldBackupSchedule is a backup that runs on a schedule: a Kubernetes
// CronJob whose Jobs have the same pod as a WorldBackup's.
type WorldBackupSchedule struct {
	pulumi.ResourceState

	// CronJobName is the CronJob's name, <server>-sched.
	CronJobName pulumi.StringOutput `pulumi:"cronJobName"`
	Namespace   pulumi.StringOutput `pulumi:"namespace"`
}

// NewWorldBackupSchedule validates args and registers a WorldBackupSchedule
// with its one child, a kubernetes:batch/v1:CronJob named name+"-cronjob".
func NewWorldBackupSchedule(ctx *pulumi.Context, name string, args WorldBackupScheduleArgs, opts ...pulumi.ResourceOption) (*WorldBackupSchedule, error) {
	st, err := settleNow(ctx.Context(), ctx.DryRun(), args.Backup)
	if err != nil {
		return nil, fmt.Errorf("resolving the inputs of WorldBackupSchedule %q: %w", name, err)
	}
	var props pulumi.Map
	var cjName, cjNamespace pulumi.StringOutput
	if st.Known {
		args.Backup = st.Args
		b, s, err := args.resolve()
		if err != nil {
			return nil, err
		}
		cj := jobspec.BuildBackupSchedule(b, s)
		if props, err = objectInputs(cj, "CronJob", cj.Name); err != nil {
			return nil, err
		}
		if st.Secret {
			props["spec"] = pulumi.ToSecret(props["spec"])
		}
		cjName, cjNamespace = pulumi.String(cj.Name).ToStringOutput(), pulumi.String(cj.Namespace).ToStringOutput()
	} else {
		later := settleLater(args.Backup, func(b WorldBackupArgs) (any, error) {
			a := args
			a.Backup = b
			bj, s, err := a.resolve()
			if err != nil {
				return nil, err
			}
			return jobspec.BuildBackupSchedule(bj, s), nil
		})
		props = laterInputs(later, "CronJob", func(v any) any { return v })
		cjName = later.ApplyT(func(v any) string { return v.(*batchv1.CronJob).Name }).(pulumi.StringOutput)
		cjNamespace = later.ApplyT(func(v any) string { return v.(*batchv1.CronJob).Namespace }).(pulumi.StringOutput)
	}
	comp := &WorldBackupSchedule{}
	if err := ctx.RegisterComponentResource(WorldBackupScheduleType, name, comp, opts...); err != nil {
		return nil, fmt.Errorf("registering WorldBackupSchedule %q: %w", name, err)
	}
	childOpts := []pulumi.ResourceOption{pulumi.Parent(comp)}
	if len(st.Deps) > 0 {
		childOpts = append(childOpts, pulumi.DependsOn(st.Deps))
	}
	var res k8sbatchv1.CronJob
	if err := ctx.RegisterResource("kubernetes:batch/v1:CronJob", name+"-cronjob", props, &res,
		utilities.PkgResourceDefaultOpts(childOpts)...); err != nil {
		return nil, fmt.Errorf("registering CronJob of WorldBackupSchedule %q: %w", name, err)
	}
	after := func(o pulumi.StringOutput) pulumi.StringOutput {
		return pulumi.All(res.URN(), o).ApplyT(func(v []any) string { return v[1].(string) }).(pulumi.StringOutput)
	}
	comp.CronJobName, comp.Namespace = after(cjName), after(cjNamespace)
	if err := ctx.RegisterResourceOutputs(comp, pulumi.Map{"cronJobName": comp.CronJobName, "namespace": comp.Namespace}); err != nil {
		return nil, fmt.Errorf("registering outputs of WorldBackupSchedule %q: %w", name, err)
	}
	return comp, nil
}

// scheduledRunID stands in for the run ID while the backup inputs are
// validated; the CronJob passes each Job's name instead.
const scheduledRunID = "scheduled"

// resolve validates the backup inputs and the schedule's.
func (a WorldBackupScheduleArgs) resolve() (jobspec.Backup, jobspec.Schedule, error) {
	b := a.Backup
	b.RunID, b.SkipAwait, b.ReplaceUnready, b.Timeout = pulumi.String(scheduledRunID), false, new(false), ""
	r, berr := b.resolve()
	p := &problems{component: "worldbackupschedule"}
	var bie *InputError
	if errors.As(berr, &bie) {
		p.list = append(p.list, bie.Problems...)
	} else if berr != nil {
		return jobspec.Backup{}, jobspec.Schedule{}, berr
	}
	s := jobspec.Schedule{Cron: strings.TrimSpace(a.Schedule), TimeZone: a.TimeZone, Suspend: a.Suspend,
		SuccessfulJobs: DefaultJobsHistory, FailedJobs: DefaultJobsHistory}
	if p.required("schedule", s.Cron, `set a cron expression, e.g. "0 4 * * *" (04:00 every day)`) && !validCron(s.Cron) {
		p.addf("schedule", "%q is not a cron expression: use five fields (minute hour day-of-month month day-of-week), e.g. \"0 4 * * *\", or @hourly, @daily, @weekly, @monthly", s.Cron)
	}
	if a.TimeZone != "" {
		if _, err := time.LoadLocation(a.TimeZone); err != nil || a.TimeZone == "Local" {
			p.addf("timeZone", "%q is not an IANA time zone: use e.g. Europe/Berlin or UTC", a.TimeZone)
		}
	}
	sd := a.StartingDeadline
	setDefault(&sd, DefaultStartingDeadline)
	if d, ok := p.duration("startingDeadline", sd, 10*time.Second, 24*time.Hour); ok {
		s.StartingDeadline = d
	}
	for _, h := range []struct {
		input string
		v     *int
		into  *int32
	}{{"successfulJobsHistory", a.SuccessfulJobsHistory, &s.SuccessfulJobs}, {"failedJobsHistory", a.FailedJobsHistory, &s.FailedJobs}} {
		if h.v == nil {
			continue
		}
		if *h.v < 0 || *h.v > 100 {
			p.addf(h.input, "%d is out of range: use 0 to 100", *h.v)
			continue
		}
		*h.into = int32(*h.v)
	}
	if len(b.Server) > jobspec.MaxScheduleNameLen-len("-sched") {
		p.addf("server", "%q is too long for a schedule: the CronJob <server>-sched may have at most %d characters", b.Server, jobspec.MaxScheduleNameLen)
	}
	if err := p.err(); err != nil {
		return jobspec.Backup{}, jobspec.Schedule{}, err
	}
	return r.Job, s, nil
}

// validCron reports whether s looks like a cron schedule the CronJob
// controller accepts: five fields or a macro. The API server has the last
// word; this catches typos at preview.
func validCron(s string) bool {
	switch s {
	case "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly":
		return true
	}
	fields := strings.Fields(s)
	if len(fields) != 5 {
		return false
	}
	for _, f := range fields {
		if strings.Trim(f, "0123456789*/,-?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") != "" {
			return false
		}
	}
	return true
}
