package provider

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/worldbackup/worldbackup/provider/jobspec"
	"github.com/worldbackup/worldbackup/provider/observe"
	"github.com/worldbackup/worldbackup/provider/preflight"
)

// observedOutputs are what the run reported in its termination message.
type observedOutputs struct {
	Status pulumi.StringOutput
	// ArchiveRef is the archive the run read or wrote: what a restore or
	// verify by run resolved.
	ArchiveRef pulumi.StringOutput
	SHA256     pulumi.StringOutput
	SizeBytes  pulumi.IntOutput
	// A verify's: the chunks it checked and the problems it found.
	ChunksChecked pulumi.IntOutput
	Problems      pulumi.IntOutput
}

// clientMaker makes the client a component observes its Job with
// (preflight.Client; a fake in tests).
type clientMaker func(preflight.Cluster) (kubernetes.Interface, error)

// resultReader returns what the observed run reported, once its Job is
// registered (the provider's await is over).
type resultReader func() observe.Summary

func noResult() observe.Summary { return observe.Summary{} }

// observeJob observes the child Job res of the plan pl and returns what its
// run reported. It observes only with the preflight on (off in render mode,
// where there is no cluster) and when the provider waits for the Job (not
// with skipAwait); otherwise the outputs are empty.
//
// At `pulumi up`, a watchdog fails the Job when its pod cannot start
// (observe.Watchdog), logging the cause on comp, so the provider's await
// ends then rather than at the Job's deadline; once the Job is registered
// the watchdog stops and the archiver's termination message is read. A Job
// built later (inputs that are Outputs) is observed once they resolve. At
// preview a known Job that already ran (the same run) gives its result, any
// other unknown outputs. A message that cannot be read leaves the outputs
// empty, with a warning saying why.
func observeJob(ctx *pulumi.Context, comp pulumi.Resource, res *kubeResource, pl jobPlan, newClient clientMaker) observedOutputs {
	if pl.Job == nil {
		reader := pl.Later.ApplyT(func(v any) resultReader {
			jr := v.(jobResult)
			if ctx.DryRun() {
				return noResult // not reached: a later Job is unknown at preview
			}
			return startObserving(ctx, comp, jr.Job, jr.Preflight, pl.Timeout, newClient)
		})
		return summaryOutputs(pulumi.All(res.URN(), reader), func(v any) observe.Summary { return v.([]any)[1].(resultReader)() })
	}
	if !observed(pl.Job, pl.Preflight) && pl.gate == nil {
		return knownObserved(res, observe.Summary{})
	}
	if ctx.DryRun() {
		if sum, ok := ranBefore(ctx.Context(), pl.Job, pl.Preflight, newClient); ok {
			return knownObserved(res, sum)
		}
		return summaryOutputs(pulumi.UnsafeUnknownOutput([]pulumi.Resource{res}), func(any) observe.Summary { return observe.Summary{} })
	}
	result := startObserving(ctx, comp, pl.Job, pl.Preflight, pl.Timeout, newClient)
	return summaryOutputs(res.URN(), func(any) observe.Summary { return result() })
}

// observed says whether job is observed: with the preflight on, and when
// the provider waits for it.
func observed(job *batchv1.Job, s preflightSettings) bool {
	return s.Enabled && job.Annotations[jobspec.AnnotationSkipAwait] != "true"
}

// ranBefore reads, at preview, the result of a Job of the same name that
// already ran; ok is false when there is none (or no cluster to ask).
func ranBefore(ctx context.Context, job *batchv1.Job, s preflightSettings, newClient clientMaker) (observe.Summary, bool) {
	if s.Pending {
		return observe.Summary{}, false
	}
	client, err := newClient(s.Cluster)
	if err != nil {
		return observe.Summary{}, false
	}
	rctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	sum, err := observe.Result(rctx, client, job.Namespace, job.Name)
	return sum, err == nil
}

// startObserving starts the watchdog of job (at `pulumi up`) and returns the
// reader of its result, which stops the watchdog. Without observation, or
// without a client, the result is empty.
func startObserving(ctx *pulumi.Context, comp pulumi.Resource, job *batchv1.Job, s preflightSettings,
	timeout time.Duration, newClient clientMaker) resultReader {
	if !observed(job, s) {
		return noResult
	}
	warn := func(msg string) {
		_ = ctx.Log.Warn(fmt.Sprintf("Job %s/%s: %s", job.Namespace, job.Name, msg), &pulumi.LogArgs{Resource: comp})
	}
	client, err := newClient(s.Cluster)
	if err != nil {
		warn("not observed (sha256, sizeBytes and status stay empty): " + err.Error())
		return noResult
	}
	// The timeout runs from when the watchdog first sees the Job, not from
	// now: the engine may create it much later in a large update.
	wctx, stop := context.WithCancel(ctx.Context())
	startWatchdog(wctx, ctx, comp, client, job, timeout)
	// The watchdog also stops by itself when the Job finishes, e.g. when its
	// registration fails and the reader is never called.
	return sync.OnceValue(func() observe.Summary {
		stop()
		sum, err := readResult(ctx, client, job)
		if err != nil {
			warn("sha256, sizeBytes and status stay empty: " + err.Error())
		}
		return sum
	})
}

// startWatchdog watches job until wctx ends (or the Job finishes), failing
// it when its pod cannot start; what it finds is logged on comp.
func startWatchdog(wctx context.Context, ctx *pulumi.Context, comp pulumi.Resource, client kubernetes.Interface, job *batchv1.Job,
	timeout time.Duration) {
	go observe.Watchdog{
		Client: client, Namespace: job.Namespace, Job: job.Name, Grace: observe.DefaultGrace, Timeout: timeout,
		Report: func(msg string) { _ = ctx.Log.Error(msg, &pulumi.LogArgs{Resource: comp}) },
		Warn:   func(msg string) { _ = ctx.Log.Warn(msg, &pulumi.LogArgs{Resource: comp}) },
	}.Run(wctx)
}

// readResult reads what job's run reported (observe.Result), within
// preflightTimeout.
func readResult(ctx *pulumi.Context, client kubernetes.Interface, job *batchv1.Job) (observe.Summary, error) {
	rctx, cancel := context.WithTimeout(ctx.Context(), preflightTimeout)
	defer cancel()
	return observe.Result(rctx, client, job.Namespace, job.Name)
}

// knownObserved returns sum's fields as outputs known once res is registered.
func knownObserved(res pulumi.Resource, sum observe.Summary) observedOutputs {
	return summaryOutputs(res.URN(), func(any) observe.Summary { return sum })
}

// summaryOutputs returns the fields of the summary that sum gives for the
// value of after, as outputs that resolve when after does (and stay unknown
// while it is).
func summaryOutputs(after pulumi.Output, sum func(any) observe.Summary) observedOutputs {
	return summaryOutputsE(after, func(v any) (observe.Summary, error) { return sum(v), nil })
}

// summaryOutputsE is summaryOutputs whose sum may fail: every output then
// rejects with its error.
func summaryOutputsE(after pulumi.Output, sum func(any) (observe.Summary, error)) observedOutputs {
	s := after.ApplyT(sum)
	return observedOutputs{
		Status:        s.ApplyT(func(v any) string { return string(v.(observe.Summary).Status) }).(pulumi.StringOutput),
		ArchiveRef:    s.ApplyT(func(v any) string { return v.(observe.Summary).ArchiveRef }).(pulumi.StringOutput),
		SHA256:        s.ApplyT(func(v any) string { return v.(observe.Summary).SHA256 }).(pulumi.StringOutput),
		SizeBytes:     s.ApplyT(func(v any) int { return int(v.(observe.Summary).SizeBytes) }).(pulumi.IntOutput),
		ChunksChecked: s.ApplyT(func(v any) int { return int(v.(observe.Summary).ChunksChecked) }).(pulumi.IntOutput),
		Problems:      s.ApplyT(func(v any) int { return v.(observe.Summary).ProblemsTotal }).(pulumi.IntOutput),
	}
}
