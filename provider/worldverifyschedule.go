package provider

import (
	"errors"

	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/jobspec"
	"github.com/worldbackup/worldbackup/provider/naming"
)

// WorldVerifyScheduleType is the Pulumi type token of WorldVerifySchedule.
const WorldVerifyScheduleType = "worldbackup:index:WorldVerifySchedule"

// WorldVerifyScheduleArgs are the inputs of a WorldVerifySchedule: those of
// a WorldVerify by run (its runId, archiveRef, sha256, skipAwait, timeout,
// replaceUnready, preflight and kubeContext are not used: each run verifies
// the run fromRun names when its Job starts, default the newest, and
// Pulumi does not await the Jobs a CronJob creates) and the schedule's own.
type WorldVerifyScheduleArgs struct {
	// WorldVerifyArgs are the inputs of the verify Job each run is; the
	// inputs above are ignored (and not in the plugin's schema:
	// InputsNotTaken). FromRun defaults to latest.
	WorldVerifyArgs
	ScheduleInputs
}

// WorldVerifySchedule is a verify that runs on a schedule: a Kubernetes
// CronJob whose Jobs are WorldVerify Jobs by run, each verifying the
// server's newest successful run (or the run fromRun names) as it is when
// the Job starts.
type WorldVerifySchedule struct {
	pulumi.ResourceState

	// CronJobName is the CronJob's name, <server>-vsched.
	CronJobName pulumi.StringOutput `pulumi:"cronJobName"`
	Namespace   pulumi.StringOutput `pulumi:"namespace"`
	// CronSchedule is the CronJob's schedule: Schedule with its spread.
	CronSchedule pulumi.StringOutput `pulumi:"cronSchedule"`
}

// NewWorldVerifySchedule validates args and registers a WorldVerifySchedule
// with its one child, a kubernetes:batch/v1:CronJob named name+"-cronjob".
func NewWorldVerifySchedule(ctx *pulumi.Context, name string, args WorldVerifyScheduleArgs, opts ...pulumi.ResourceOption) (*WorldVerifySchedule, error) {
	comp := &WorldVerifySchedule{}
	out, err := registerCronJob(ctx, WorldVerifyScheduleType, name, comp, args.WorldVerifyArgs, func(v WorldVerifyArgs) (plannedCronJob, error) {
		a := args
		a.WorldVerifyArgs = v
		vj, s, pf, err := a.resolve()
		if err != nil {
			return plannedCronJob{}, err
		}
		cj := jobspec.BuildVerifySchedule(vj, s)
		return plannedCronJob{CronJob: cj, Preflight: pf,
			Requirements: restoreRequirements(templateJob(cj), jobspec.Restore{Store: vj.Store, Encryption: vj.Encryption, ByRun: vj.ByRun})}, nil
	}, opts...)
	if err != nil {
		return nil, err
	}
	comp.CronJobName, comp.Namespace, comp.CronSchedule = out.CronJobName, out.Namespace, out.CronSchedule
	return comp, nil
}

// Validate reports every missing or invalid input of a (after defaults) in
// one *InputError; nil when a is valid.
func (a WorldVerifyScheduleArgs) Validate() error {
	v, err := settleSync("worldverifyschedule", a.WorldVerifyArgs)
	if err != nil {
		return err
	}
	a.WorldVerifyArgs = v
	_, _, _, err = a.resolve()
	return err
}

// resolve validates the verify inputs, as a verify by run (fromRun
// defaults to latest), and the schedule's.
func (a WorldVerifyScheduleArgs) resolve() (jobspec.Verify, jobspec.Schedule, preflightSettings, error) {
	v := a.WorldVerifyArgs
	v.RunID, v.SkipAwait, v.ReplaceUnready, v.Timeout = pulumi.String(scheduledRunID), false, new(false), ""
	if str(v.FromRun) == "" {
		v.FromRun = pulumi.String(jobapi.RunLatest)
	}
	r, verr := v.resolve()
	p := &problems{component: "worldverifyschedule"}
	var vie *InputError
	if errors.As(verr, &vie) {
		p.list = append(p.list, vie.Problems...)
	} else if verr != nil {
		return jobspec.Verify{}, jobspec.Schedule{}, preflightSettings{}, verr
	}
	s := a.ScheduleInputs.resolve(p, r.Job.Namespace, v.Server, jobspec.VerifyScheduleName(v.Server), naming.VerifySpreadSchedule)
	if err := p.err(); err != nil {
		return jobspec.Verify{}, jobspec.Schedule{}, preflightSettings{}, err
	}
	return r.Job, s, r.Preflight, nil
}

// Annotate describes WorldVerifySchedule and its outputs in the plugin's
// schema and sets its token to worldbackup:index:WorldVerifySchedule.
func (w *WorldVerifySchedule) Annotate(a infer.Annotator) {
	a.SetToken("index", "WorldVerifySchedule")
	a.Describe(w, "Verifies on a schedule: a Kubernetes CronJob whose Jobs are WorldVerify Jobs by run, each verifying "+
		"the server's newest successful run (fromRun: latest, the default, resolved when the Job starts) or the run "+
		"fromRun names, down to the chunks, in a scratch volume; concurrencyPolicy Forbid. Like a WorldVerify, the verify "+
		"is DB-blind, mounts no world and no token, and only its init container mounts the config Secret. A problem fails "+
		"that Job (exit 3, its termination message names the file and chunk): see it with "+
		"`kubectl get jobs -l app.kubernetes.io/component="+jobspec.ComponentVerifySchedule+"`, and alert on failed Jobs "+
		"(kube-state-metrics' kube_job_status_failed). Pulumi does not await the Jobs a CronJob creates.")
	a.Describe(&w.CronJobName, "The CronJob's metadata.name, <server>-vsched.")
	a.Describe(&w.Namespace, "The namespace of the CronJob.")
	a.Describe(&w.CronSchedule, "The CronJob's schedule: schedule with its spread applied (a *-random schedule as five fields).")
}

// Annotate describes the inputs whose meaning differs for a scheduled
// verify in the plugin's schema.
func (a *WorldVerifyScheduleArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.FromRun, "The run each scheduled Job verifies: "+jobapi.RunLatest+" (the default), the server's newest "+
		"successful run when the Job starts, or a run ID as `archiver list` shows it. An init container, the only one that "+
		"mounts the config Secret, finds it in the catalog; the verify itself stays DB-blind.")
	an.Describe(&a.Server, "The game server whose runs are verified: a DNS-1123 label short enough for the CronJob "+
		"<server>-vsched (at most "+descMaxScheduleLen+" characters). It names the CronJob.")
}
