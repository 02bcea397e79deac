package provider

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/worldbackup/worldbackup/provider/internal/jobtest"
)

// This file holds the test helpers that WorldBackup's and WorldRestore's
// tests share: the mock monitor and the checks every component that is one
// Job must pass.

// mocks records every resource registration.
type mocks struct {
	mu        sync.Mutex
	resources []pulumi.MockResourceArgs
}

func (m *mocks) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resources = append(m.resources, args)
	id := ""
	if args.Custom {
		id = args.Name + "-id"
	}
	return id, args.Inputs, nil
}

func (m *mocks) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	return args.Args, nil
}

// ofType returns the recorded registrations of type typ.
func (m *mocks) ofType(typ string) []pulumi.MockResourceArgs {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []pulumi.MockResourceArgs
	for _, r := range m.resources {
		if r.TypeToken == typ {
			out = append(out, r)
		}
	}
	return out
}

func runMocked(t *testing.T, program pulumi.RunFunc) (*mocks, error) {
	t.Helper()
	m := &mocks{}
	err := pulumi.RunErr(program, pulumi.WithMocks("project", "stack", m))
	return m, err
}

type outputs struct{ jobName, namespace, runID, archiveRef string }

// captureOutputs records a component's outputs once they resolve.
func captureOutputs(wg *sync.WaitGroup, into *outputs, jobName, namespace, runID, archiveRef pulumi.StringOutput) {
	wg.Add(1)
	pulumi.All(jobName, namespace, runID, archiveRef).ApplyT(func(v []any) error {
		defer wg.Done()
		*into = outputs{v[0].(string), v[1].(string), v[2].(string), v[3].(string)}
		return nil
	})
}

// checkOneJob checks that m holds exactly the component typ named name and
// its one Job, registered as the custom resource name+"-job" under the
// component, with the SDK's default provider version, wantTimeout as its
// create and update timeout, and want's JSON object as its inputs.
func checkOneJob(t *testing.T, m *mocks, typ, name, wantTimeout string, want *batchv1.Job) {
	t.Helper()
	kind := typ[strings.LastIndex(typ, ":")+1:]
	comps := m.ofType(typ)
	if len(comps) != 1 || comps[0].Custom {
		t.Fatalf("components = %+v, want one %s", comps, kind)
	}
	jobs := m.ofType("kubernetes:batch/v1:Job")
	if len(jobs) != 1 || len(m.resources) != 2 {
		t.Fatalf("registered %d resources with %d Jobs, want the component and one Job", len(m.resources), len(jobs))
	}
	job := jobs[0]
	rpc := job.RegisterRPC
	if job.Name != name+"-job" || !job.Custom {
		t.Fatalf("Job registered as %q (custom %v), want custom %s-job", job.Name, job.Custom, name)
	}
	if want := "urn:pulumi:stack::project::" + typ + "::" + name; rpc.GetParent() != want {
		t.Fatalf("Job parent = %q, want %q", rpc.GetParent(), want)
	}
	if rpc.GetVersion() != "4.32.0" {
		t.Fatalf("Job provider version = %q, want 4.32.0 (the SDK's default)", rpc.GetVersion())
	}
	// A Job is one run: any change replaces it, the old one deleted first.
	if got := rpc.GetReplaceOnChanges(); !slices.Equal(got, []string{"*"}) {
		t.Fatalf("Job replaceOnChanges = %q, want [*]", got)
	}
	if !rpc.GetDeleteBeforeReplace() {
		t.Fatal("Job is not deleteBeforeReplace")
	}
	ct := rpc.GetCustomTimeouts()
	if ct.GetCreate() != wantTimeout || ct.GetUpdate() != wantTimeout {
		t.Fatalf("custom timeouts = %+v, want create/update %s", ct, wantTimeout)
	}
	for _, key := range []resource.PropertyKey{"apiVersion", "kind", "metadata", "spec"} {
		if !job.Inputs.HasValue(key) {
			t.Fatalf("Job inputs lack %q", key)
		}
	}
	if job.Inputs.HasValue("status") {
		t.Fatal("Job inputs have a status")
	}
	if !jobtest.SameJSON(t, "Job inputs", jobtest.JSONObject(t, job.Inputs.Mappable()), jobtest.JobObject(t, want)) {
		t.FailNow()
	}
}

// decodeJob decodes the inputs of a registered Job as a batch/v1 Job;
// strict refuses fields a Job does not have.
func decodeJob(t *testing.T, reg pulumi.MockResourceArgs, strict bool) batchv1.Job {
	t.Helper()
	b, err := json.Marshal(reg.Inputs.Mappable())
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if strict {
		dec.DisallowUnknownFields()
	}
	var job batchv1.Job
	if err := dec.Decode(&job); err != nil {
		t.Fatalf("inputs do not decode as a Job: %v", err)
	}
	return job
}

// checkComponentInputError checks that validate fails and that construct,
// run under mocks, fails with an *InputError of exactly wantInputs, messages
// containing wantText, and registers nothing.
func checkComponentInputError(t *testing.T, validate func() error, construct pulumi.RunFunc, wantInputs, wantText []string) {
	t.Helper()
	if err := validate(); err == nil {
		t.Fatal("Validate() = nil, want an error")
	}
	m, err := runMocked(t, construct)
	var ie *InputError
	if !errors.As(err, &ie) {
		t.Fatalf("error = %v, want an *InputError", err)
	}
	if !slices.Equal(ie.Inputs(), wantInputs) {
		t.Fatalf("inputs with problems = %q, want %q (%v)", ie.Inputs(), wantInputs, err)
	}
	for _, want := range wantText {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not contain %q", err, want)
		}
	}
	for _, p := range ie.Problems {
		if !strings.HasPrefix(p.Message, p.Input+" ") {
			t.Fatalf("message %q does not start with its input %q", p.Message, p.Input)
		}
	}
	if len(m.resources) != 0 {
		t.Fatalf("registered %d resources despite invalid inputs", len(m.resources))
	}
}

// checkExplicitProvider checks that the Job of the component construct
// registers uses the Kubernetes provider passed with pulumi.Provider or
// pulumi.Providers, and the default provider when none is passed.
func checkExplicitProvider(t *testing.T, providerArgs *kubernetes.ProviderArgs, construct func(ctx *pulumi.Context, opts ...pulumi.ResourceOption) error) {
	const providerURN = "urn:pulumi:stack::project::pulumi:providers:kubernetes::"
	tests := []struct {
		name         string
		opts         func(p *kubernetes.Provider) []pulumi.ResourceOption
		wantProvider string
	}{
		{"pulumi.Provider", func(p *kubernetes.Provider) []pulumi.ResourceOption {
			return []pulumi.ResourceOption{pulumi.Provider(p)}
		}, providerURN + "cluster-a::cluster-a-id"},
		{"pulumi.Providers", func(p *kubernetes.Provider) []pulumi.ResourceOption {
			return []pulumi.ResourceOption{pulumi.Providers(p)}
		}, providerURN + "cluster-a::cluster-a-id"},
		{"no provider: the default", func(*kubernetes.Provider) []pulumi.ResourceOption { return nil }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := runMocked(t, func(ctx *pulumi.Context) error {
				p, err := kubernetes.NewProvider(ctx, "cluster-a", providerArgs)
				if err != nil {
					return err
				}
				return construct(ctx, tt.opts(p)...)
			})
			if err != nil {
				t.Fatal(err)
			}
			jobs := m.ofType("kubernetes:batch/v1:Job")
			if len(jobs) != 1 {
				t.Fatalf("Jobs = %d, want 1", len(jobs))
			}
			if jobs[0].Provider != tt.wantProvider {
				t.Fatalf("Job provider = %q, want %q", jobs[0].Provider, tt.wantProvider)
			}
		})
	}
}
