package provider

import (
	"context"
	"fmt"
	"sync"
	"time"

	k8sbatchv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/batch/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/worldbackup/worldbackup/provider/jobspec"
	"github.com/worldbackup/worldbackup/provider/observe"
	"github.com/worldbackup/worldbackup/provider/preflight"
)

// observedOutputs are what the run reported in its termination message.
type observedOutputs struct {
	Status    pulumi.StringOutput
	SHA256    pulumi.StringOutput
	SizeBytes pulumi.IntOutput
}

// clientMaker makes the client a component observes its Job with
// (preflight.Client; a fake in tests).
type clientMaker func(preflight.Cluster) (kubernetes.Interface, error)

// observeJob observes the child Job res (built from job) and returns what
// its run reported. It observes only with the preflight on (off in render
// mode, where there is no cluster) and when the provider waits for the Job
// (not with skipAwait); otherwise the outputs are empty.
//
// At `pulumi up`, a watchdog fails the Job when its pod cannot start
// (observe.Watchdog), logging the cause on comp, so the provider's await
// ends then rather than at the Job's deadline; once the Job is registered
// (the await is over) the watchdog stops and the archiver's termination
// message is read. At preview a Job that already ran (the same run) gives
// its result, a new one unknown outputs. A message that cannot be read
// leaves the outputs empty, with a warning saying why.
func observeJob(ctx *pulumi.Context, comp pulumi.Resource, res *k8sbatchv1.Job, job *batchv1.Job,
	s preflightSettings, timeout time.Duration, newClient clientMaker) observedOutputs {
	if !s.Enabled || job.Annotations[jobspec.AnnotationSkipAwait] == "true" {
		return knownObserved(res, observe.Summary{})
	}
	warn := func(msg string) {
		_ = ctx.Log.Warn(fmt.Sprintf("Job %s/%s: %s", job.Namespace, job.Name, msg), &pulumi.LogArgs{Resource: comp})
	}
	client, err := newClient(s.Cluster)
	if ctx.DryRun() {
		if err == nil {
			rctx, cancel := context.WithTimeout(ctx.Context(), preflightTimeout)
			defer cancel()
			if sum, err := observe.Result(rctx, client, job.Namespace, job.Name); err == nil {
				return knownObserved(res, sum)
			}
		}
		unknown := func() pulumi.AnyOutput { return pulumi.UnsafeUnknownOutput([]pulumi.Resource{res}).(pulumi.AnyOutput) }
		return observedOutputs{
			Status:    unknown().ApplyT(func(any) string { return "" }).(pulumi.StringOutput),
			SHA256:    unknown().ApplyT(func(any) string { return "" }).(pulumi.StringOutput),
			SizeBytes: unknown().ApplyT(func(any) int { return 0 }).(pulumi.IntOutput),
		}
	}
	if err != nil {
		warn("not observed (sha256, sizeBytes and status stay empty): " + err.Error())
		return knownObserved(res, observe.Summary{})
	}

	wctx, stop := context.WithTimeout(ctx.Context(), timeout)
	go observe.Watchdog{
		Client: client, Namespace: job.Namespace, Job: job.Name, Grace: observe.DefaultGrace,
		Report: func(msg string) { _ = ctx.Log.Error(msg, &pulumi.LogArgs{Resource: comp}) },
	}.Run(wctx)
	// The watchdog also stops by itself when the Job finishes, e.g. when its
	// registration fails and this is never called.
	result := sync.OnceValue(func() observe.Summary {
		stop()
		rctx, cancel := context.WithTimeout(ctx.Context(), preflightTimeout)
		defer cancel()
		sum, err := observe.Result(rctx, client, job.Namespace, job.Name)
		if err != nil {
			warn("sha256, sizeBytes and status stay empty: " + err.Error())
		}
		return sum
	})
	return observedOutputs{
		Status:    res.URN().ApplyT(func(pulumi.URN) string { return result().Status }).(pulumi.StringOutput),
		SHA256:    res.URN().ApplyT(func(pulumi.URN) string { return result().SHA256 }).(pulumi.StringOutput),
		SizeBytes: res.URN().ApplyT(func(pulumi.URN) int { return int(result().SizeBytes) }).(pulumi.IntOutput),
	}
}

// knownObserved returns sum's fields as outputs known once res is registered.
func knownObserved(res pulumi.Resource, sum observe.Summary) observedOutputs {
	return observedOutputs{
		Status:    knownAfter(res, sum.Status),
		SHA256:    knownAfter(res, sum.SHA256),
		SizeBytes: res.URN().ApplyT(func(pulumi.URN) int { return int(sum.SizeBytes) }).(pulumi.IntOutput),
	}
}
