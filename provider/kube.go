package provider

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	k8sbatchv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/batch/v1"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/utilities"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	batchv1 "k8s.io/api/batch/v1"
)

// jobType is the Pulumi type token of a Kubernetes Job.
const jobType = "kubernetes:batch/v1:Job"

// registerJob registers job as a pulumi-kubernetes Job named name with the
// same inputs and default options (the SDK's plugin version) that
// batchv1.NewJob would send, plus opts.
func registerJob(ctx *pulumi.Context, name string, job *batchv1.Job, opts ...pulumi.ResourceOption) (*k8sbatchv1.Job, error) {
	props, err := jobInputs(job)
	if err != nil {
		return nil, err
	}
	var res k8sbatchv1.Job
	if err := ctx.RegisterResource(jobType, name, props, &res, utilities.PkgResourceDefaultOpts(opts)...); err != nil {
		return nil, fmt.Errorf("registering Job %q: %w", name, err)
	}
	return &res, nil
}

// registerChildJob registers job as the child Job of the component parent,
// named name, with timeout as its create and update timeout (how long the
// Kubernetes provider waits for it to finish).
//
// Any change of the Job's inputs replaces it, deleting the old Job first:
// a Job is one run, so it is never updated in place (most of its spec is
// immutable, and an in-place update of a Job that its TTL or a GitOps tool
// deleted fails with "not found"). The same name comes back for the same
// run ID, and the archiver makes the new Job a no-op for a run that is
// already recorded (backup) or restored (restore).
func registerChildJob(ctx *pulumi.Context, parent pulumi.Resource, name string, job *batchv1.Job, timeout time.Duration) (*k8sbatchv1.Job, error) {
	t := timeout.String()
	return registerJob(ctx, name, job,
		pulumi.Parent(parent),
		pulumi.Timeouts(&pulumi.CustomTimeouts{Create: t, Update: t}),
		pulumi.ReplaceOnChanges([]string{"*"}),
		pulumi.DeleteBeforeReplace(true),
	)
}

// jobOutputs are the outputs of a component that is one Job, each known
// after the Job is registered.
type jobOutputs struct {
	JobName, Namespace, RunID, ArchiveRef pulumi.StringOutput
}

// registerJobComponent registers comp as the component typ named name (opts
// its options) with job as its one child, named name+"-job", with timeout as
// its create and update timeout; it records and returns the outputs every
// component has: the Job's name and namespace, runID and archiveRef (when
// not "").
func registerJobComponent(ctx *pulumi.Context, typ, name string, comp pulumi.ComponentResource, job *batchv1.Job,
	timeout time.Duration, runID, archiveRef string, opts ...pulumi.ResourceOption) (jobOutputs, error) {
	kind := typ[strings.LastIndex(typ, ":")+1:] // e.g. WorldBackup
	if err := ctx.RegisterComponentResource(typ, name, comp, opts...); err != nil {
		return jobOutputs{}, fmt.Errorf("registering %s %q: %w", kind, name, err)
	}
	res, err := registerChildJob(ctx, comp, name+"-job", job, timeout)
	if err != nil {
		return jobOutputs{}, err
	}
	out := jobOutputs{
		JobName:    knownAfter(res, job.Name),
		Namespace:  knownAfter(res, job.Namespace),
		RunID:      knownAfter(res, runID),
		ArchiveRef: knownAfter(res, archiveRef),
	}
	outputs := pulumi.Map{"jobName": out.JobName, "namespace": out.Namespace, "runId": out.RunID}
	if archiveRef != "" { // a prune writes no archive
		outputs["archiveRef"] = out.ArchiveRef
	}
	if err := ctx.RegisterResourceOutputs(comp, outputs); err != nil {
		return jobOutputs{}, fmt.Errorf("registering outputs of %s %q: %w", kind, name, err)
	}
	return out, nil
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
	return objectInputs(job, "Job", job.Name)
}

// objectInputs converts a Kubernetes object of kind (batch/v1) named name to
// Pulumi inputs through its JSON form, without status and null values.
func objectInputs(v any, kind, name string) (pulumi.Map, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding %s %q: %w", kind, name, err)
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, fmt.Errorf("decoding %s %q: %w", kind, name, err)
	}
	delete(obj, "status")
	obj["apiVersion"] = "batch/v1"
	obj["kind"] = kind
	return toInputMap(obj), nil
}

// toInputMap converts a decoded JSON object to a pulumi.Map, dropping nulls.
func toInputMap(m map[string]any) pulumi.Map {
	out := make(pulumi.Map, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if v := toInput(m[k]); v != nil {
			out[k] = v
		}
	}
	return out
}

// toInput converts a decoded JSON value (string, float64, bool, []any,
// map[string]any or nil) to a Pulumi input; nil for null.
func toInput(v any) pulumi.Input {
	switch v := v.(type) {
	case string:
		return pulumi.String(v)
	case float64:
		return pulumi.Float64(v)
	case bool:
		return pulumi.Bool(v)
	case []any:
		arr := make(pulumi.Array, 0, len(v))
		for _, e := range v {
			if in := toInput(e); in != nil {
				arr = append(arr, in)
			}
		}
		return arr
	case map[string]any:
		return toInputMap(v)
	default: // nil: JSON null
		return nil
	}
}
