package provider

import (
	"cmp"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/utilities"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/internal/kubeobj"
	"github.com/worldbackup/worldbackup/provider/internal/settle"
	"github.com/worldbackup/worldbackup/provider/observe"
	"github.com/worldbackup/worldbackup/provider/preflight"
)

// jobType is the Pulumi type token of a Kubernetes Job.
const jobType = "kubernetes:batch/v1:Job"

// jobPlan is the Job a component registers: built now from known inputs
// (Job), or later, when inputs unknown at preview resolve (Later).
type jobPlan struct {
	// Job is the Job built from known inputs; nil: see Later.
	Job *batchv1.Job
	// RunID and ArchiveRef are the component's outputs of a known Job.
	RunID, ArchiveRef string
	// Secret: some input was secret; the Job's spec is then secret in the
	// state (the inputs of a later Job are secret as their Output is).
	Secret bool
	// Deps are the resources the inputs came from: the Job depends on them.
	Deps []pulumi.Resource
	// Later is an Output of a jobResult, when Job is nil. It rejects with
	// the component's *InputError when the resolved inputs are invalid.
	Later pulumi.AnyOutput
	// Timeout is the Job's create and update timeout.
	Timeout time.Duration
	// Preflight says whether and through which cluster the component looks
	// at its known Job (observeJob).
	Preflight preflightSettings
	// gate, when set, is the Gate the Job is created through (Gate.through).
	gate *Gate
}

// jobResult is a Job built once its inputs resolved, with the component's
// outputs.
type jobResult struct {
	Job               *batchv1.Job
	RunID, ArchiveRef string
	Preflight         preflightSettings
}

// props returns the Pulumi inputs of the plan's Job: its JSON form, the
// spec secret when an input was.
func (pl jobPlan) props() (pulumi.Map, error) {
	if pl.Job == nil {
		return kubeobj.Later(pl.Later, "Job", func(v any) any { return v.(jobResult).Job }), nil
	}
	props, err := jobInputs(pl.Job)
	if err != nil {
		return nil, err
	}
	if pl.Secret {
		props["spec"] = pulumi.ToSecret(props["spec"])
	}
	return props, nil
}

// outputs returns the outputs every Job component has, each resolved once
// res is registered.
func (pl jobPlan) outputs(res pulumi.Resource) jobOutputs {
	if pl.Job != nil {
		return jobOutputs{
			JobName:    knownAfter(res, pl.Job.Name),
			Namespace:  knownAfter(res, pl.Job.Namespace),
			RunID:      knownAfter(res, pl.RunID),
			ArchiveRef: knownAfter(res, pl.ArchiveRef),
		}
	}
	get := func(f func(jobResult) string) pulumi.StringOutput {
		return pulumi.All(res.URN(), pl.Later).ApplyT(func(v []any) string { return f(v[1].(jobResult)) }).(pulumi.StringOutput)
	}
	return jobOutputs{
		JobName:    get(func(r jobResult) string { return r.Job.Name }),
		Namespace:  get(func(r jobResult) string { return r.Job.Namespace }),
		RunID:      get(func(r jobResult) string { return r.RunID }),
		ArchiveRef: get(func(r jobResult) string { return r.ArchiveRef }),
	}
}

// kubeResource is the state of a registered Kubernetes object (a Job, a
// CronJob, the exporter's Deployment and Service) whose outputs the
// components do not read: only its URN orders what follows it. The
// pulumi-kubernetes SDK's typed resources would make every binary that
// imports the provider compile its batch/v1, core/v1 (which batch/v1
// imports) and meta/v1 packages: core/v1 alone takes over a minute of
// one CPU, on the path of every test binary above the provider.
type kubeResource struct {
	pulumi.CustomResourceState
}

// registerJob registers job as a pulumi-kubernetes Job named name with the
// same inputs and default options (the SDK's plugin version) that
// batchv1.NewJob would send, plus opts.
func registerJob(ctx *pulumi.Context, name string, job *batchv1.Job, opts ...pulumi.ResourceOption) (*kubeResource, error) {
	return registerPlannedJob(ctx, name, jobPlan{Job: job}, opts...)
}

func registerPlannedJob(ctx *pulumi.Context, name string, pl jobPlan, opts ...pulumi.ResourceOption) (*kubeResource, error) {
	props, err := pl.props()
	if err != nil {
		return nil, err
	}
	if len(pl.Deps) > 0 {
		opts = append(opts, pulumi.DependsOn(pl.Deps))
	}
	var res kubeResource
	if err := ctx.RegisterResource(jobType, name, props, &res, utilities.PkgResourceDefaultOpts(opts)...); err != nil {
		return nil, fmt.Errorf("registering Job %q: %w", name, err)
	}
	return &res, nil
}

// registerChildJob registers the Job of pl as the child Job of the component
// parent, named name, with pl.Timeout as its create and update timeout (how
// long the Kubernetes provider waits for it to finish).
//
// Any change of the Job's inputs replaces it, deleting the old Job first:
// a Job is one run, so it is never updated in place (most of its spec is
// immutable, and an in-place update of a Job that its TTL or a GitOps tool
// deleted fails with "not found"). The same name comes back for the same
// run ID, and the archiver makes the new Job a no-op for a run that is
// already recorded (backup) or restored (restore).
func registerChildJob(ctx *pulumi.Context, parent pulumi.Resource, name string, pl jobPlan, opts ...pulumi.ResourceOption) (*kubeResource, error) {
	t := pl.Timeout.String()
	return registerPlannedJob(ctx, name, pl, append([]pulumi.ResourceOption{
		pulumi.Parent(parent),
		pulumi.Timeouts(&pulumi.CustomTimeouts{Create: t, Update: t}),
		pulumi.ReplaceOnChanges([]string{"*"}),
		pulumi.DeleteBeforeReplace(true),
	}, opts...)...)
}

// jobOutputs are the outputs of a component that is one Job, each known
// after the Job is registered, and what its run reported (observeJob).
type jobOutputs struct {
	JobName, Namespace, RunID, ArchiveRef pulumi.StringOutput
	Observed                              observedOutputs
}

// ownOutputs returns the outputs a kind of component has beyond those
// every Job component has (jobName, namespace, runId, status), taken from
// out: a kind plugs in what it differs in.
type ownOutputs func(out jobOutputs) pulumi.Map

// registerJobComponent registers comp as the component typ named name (opts
// its options) with the Job of pl as its one child, named name+"-job",
// observed through the cluster its preflight settings name (observeJob); it
// records and returns the outputs every component has (the Job's name and
// namespace, runID and the run's status) and the kind's own (own, e.g.
// archiveRef).
func registerJobComponent(ctx *pulumi.Context, typ, name string, comp pulumi.ComponentResource, pl jobPlan, own ownOutputs,
	opts ...pulumi.ResourceOption) (jobOutputs, error) {
	kind := typ[strings.LastIndex(typ, ":")+1:] // e.g. WorldBackup
	if err := ctx.RegisterComponentResource(typ, name, comp, opts...); err != nil {
		return jobOutputs{}, fmt.Errorf("registering %s %q: %w", kind, name, err)
	}
	var out jobOutputs
	if pl.gate != nil && !ctx.DryRun() {
		res, run, err := registerGated(ctx, comp, name+"-job", pl, preflight.Client)
		if err != nil {
			return jobOutputs{}, err
		}
		out = pl.outputs(res)
		out.Observed = summaryOutputsE(res.URN(), func(any) (observe.Summary, error) { return run.wait() })
	} else {
		res, err := registerChildJob(ctx, comp, name+"-job", pl)
		if err != nil {
			return jobOutputs{}, err
		}
		out = pl.outputs(res)
		out.Observed = observeJob(ctx, comp, res, pl, preflight.Client)
	}
	out.ArchiveRef = pulumi.All(out.ArchiveRef, out.Observed.ArchiveRef, out.Observed.Status).ApplyT(func(v []any) string {
		return archiveRefOf(v[0].(string), v[1].(string), jobapi.Status(v[2].(string)))
	}).(pulumi.StringOutput)
	outputs := pulumi.Map{
		"jobName":   out.JobName,
		"namespace": out.Namespace,
		"runId":     out.RunID,
		"status":    out.Observed.Status,
	}
	if own != nil {
		maps.Copy(outputs, own(out))
	}
	if err := ctx.RegisterResourceOutputs(comp, outputs); err != nil {
		return jobOutputs{}, fmt.Errorf("registering outputs of %s %q: %w", kind, name, err)
	}
	return out, nil
}

// archiveRefOf is a component's archiveRef output: the archive its inputs
// name (planned), else the one its run reported (observed: a restore or
// verify by run has no archive among its inputs). A restore that found its
// world already restored by its run ID reports the archive the world
// holds, which a re-created Job's inputs may name another (a newer
// backup's): that one, even when its run could not say ("").
func archiveRefOf(planned, observed string, status jobapi.Status) string {
	if status == jobapi.StatusAlreadyRestored {
		return observed
	}
	return cmp.Or(planned, observed)
}

// laterTimeout is the Job's create/update timeout when its inputs are
// resolved later: the timeout input, else deadline + TimeoutMargin when
// deadline is known now, else the longest deadline + TimeoutMargin (the
// Job's own deadline still ends it in time). Invalid values are reported
// when the inputs resolve.
func laterTimeout(a JobInputs) time.Duration {
	if d, err := time.ParseDuration(a.Timeout); err == nil && a.Timeout != "" {
		return d
	}
	deadline := DefaultDeadline
	if a.Deadline != nil {
		s, ok := a.Deadline.(pulumi.String)
		switch {
		case !ok: // not known now
			deadline = ""
		case s != "":
			deadline = string(s)
		}
	}
	if d, err := time.ParseDuration(deadline); err == nil {
		return d + TimeoutMargin
	}
	return jobapi.MaxDeadline + TimeoutMargin
}

// knownAfter returns the known value v as an output that depends on res, so
// a resource that takes it waits for res (a component's outputs wait for its
// Job).
func knownAfter(res pulumi.Resource, v string) pulumi.StringOutput {
	return res.URN().ApplyT(func(pulumi.URN) string { return v }).(pulumi.StringOutput)
}

// jobInputs converts job to Pulumi inputs through its JSON form, the form the
// Kubernetes provider sends to the API server: apiVersion, kind, metadata and
// spec, without status and without null values.
func jobInputs(job *batchv1.Job) (pulumi.Map, error) {
	return kubeobj.Inputs(job, "Job", job.Name)
}

// plannedJob is a component's Job built from resolved inputs: the Job and
// the outputs known with it, its create/update timeout and what the
// preflight looks up.
type plannedJob struct {
	jobResult
	Timeout      time.Duration
	Requirements preflight.Requirements
}

// planJob settles args, the inputs of the component typ named name (shared
// its JobInputs), and plans its Job with build, which validates and builds
// it, for the Kubernetes provider that opts (the component's options) give
// its children (targetOf: in render mode the preflight and replaceUnready
// default to off; the preflight talks to the provider's cluster). When
// every input is known (at preview they are waited for), the Job is
// built now and the preflight checks the cluster (at preview and at up), so
// invalid inputs and a missing piece fail before anything is registered;
// otherwise the Job is built by the same build in an apply once the inputs
// resolve, checked by the same preflight there, and fails there naming the
// input or the piece.
func planJob[A any](ctx *pulumi.Context, typ, name string, args A, shared JobInputs, build func(A) (plannedJob, error),
	opts ...pulumi.ResourceOption) (jobPlan, error) {
	kind := typ[strings.LastIndex(typ, ":")+1:] // e.g. WorldBackup
	target, err := targetOf(ctx, opts)
	if err != nil {
		return jobPlan{}, fmt.Errorf("%s %q: %w", kind, name, err)
	}
	if ts, ok := any(&args).(targetSetter); ok {
		ts.setTarget(target)
	}
	s, err := settle.Now(ctx.Context(), ctx.DryRun(), args)
	if err != nil {
		return jobPlan{}, fmt.Errorf("resolving the inputs of %s %q: %w", kind, name, err)
	}
	pl := jobPlan{Secret: s.Secret, Deps: s.Deps}
	if !s.Known {
		pl.Timeout = laterTimeout(shared)
		pl.Later = settle.Later(args, func(a A) (any, error) {
			p, err := build(a)
			if err != nil {
				return nil, err
			}
			if err := checkCluster(ctx, strings.ToLower(kind), p.Preflight, p.Requirements); err != nil {
				return nil, err
			}
			return p.jobResult, nil
		})
		return pl, nil
	}
	p, err := build(s.Args)
	if err != nil {
		return jobPlan{}, err
	}
	pl.Job, pl.RunID, pl.ArchiveRef, pl.Timeout, pl.Preflight = p.Job, p.RunID, p.ArchiveRef, p.Timeout, p.Preflight
	if err := checkCluster(ctx, strings.ToLower(kind), p.Preflight, p.Requirements); err != nil {
		return jobPlan{}, err
	}
	return pl, nil
}
