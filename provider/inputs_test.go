package provider

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/provider/internal/jobtest"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// claimType is the type of the resource whose output the tests pass as an
// input: the backup claim, as a program that creates it passes its name.
const claimType = "kubernetes:core/v1:PersistentVolumeClaim"

// registerClaim registers a mocked claim and returns its name as an output
// (the mocks echo the inputs as outputs).
func registerClaim(ctx *pulumi.Context, name string) (pulumi.StringOutput, error) {
	var claim struct {
		pulumi.CustomResourceState
		Name pulumi.StringOutput `pulumi:"name"`
	}
	if err := ctx.RegisterResource(claimType, "claim", pulumi.Map{"name": pulumi.String(name)}, &claim); err != nil {
		return pulumi.StringOutput{}, err
	}
	return claim.Name, nil
}

// unknownString is a string output unknown at preview.
func unknownString() pulumi.StringOutput {
	return pulumi.UnsafeUnknownOutput(nil).ApplyT(func(v any) string { return v.(string) }).(pulumi.StringOutput)
}

// jobDependsOn reports whether the registered Job depends on a resource of
// type typ (through DependsOn or an input's dependencies).
func jobDependsOn(m *mocks, typ string) bool {
	jobs := m.ofType("kubernetes:batch/v1:Job")
	if len(jobs) == 0 {
		return false
	}
	rpc := jobs[0].RegisterRPC
	deps := slices.Clone(rpc.GetDependencies())
	for _, pd := range rpc.GetPropertyDependencies() {
		deps = append(deps, pd.GetUrns()...)
	}
	return slices.ContainsFunc(deps, func(urn string) bool { return strings.Contains(urn, "::"+typ+"::") })
}

// TestOutputInputs: an input that is another resource's output gives the
// Job that the same plain value gives, depending on that resource, at
// preview (where it is checked at once) and at up (where it is checked when
// it resolves).
func TestOutputInputs(t *testing.T) {
	for _, tt := range []struct {
		name string
		run  func(*testing.T, pulumi.RunFunc) (*mocks, error)
	}{{"preview", runMockedPreview}, {"up", runMocked}} {
		t.Run(tt.name, func(t *testing.T) {
			var out outputs
			var wg sync.WaitGroup
			m, err := tt.run(t, func(ctx *pulumi.Context) error {
				claim, err := registerClaim(ctx, "world-backups")
				if err != nil {
					return err
				}
				a := validArgs()
				a.BackupClaimName = claim
				a.Preflight = new(false)
				a.Labels = pulumi.StringMap{"claim": claim}
				b, err := NewWorldBackup(ctx, "survival", a)
				if err != nil {
					return err
				}
				captureOutputs(&wg, &out, b.JobName, b.Namespace, b.RunID, b.ArchiveRef)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			want := jobtest.DefaultBackup()
			want.Labels = map[string]string{"claim": "world-backups"}
			jobs := m.ofType("kubernetes:batch/v1:Job")
			if len(jobs) != 1 {
				t.Fatalf("registered %d Jobs, want 1", len(jobs))
			}
			if !jobtest.SameJSON(t, "Job inputs", jobtest.JSONObject(t, jobs[0].Inputs.Mappable()), jobtest.JobObject(t, jobspec.BuildBackup(want))) {
				t.FailNow()
			}
			if !jobDependsOn(m, claimType) {
				t.Error("the Job does not depend on the claim whose name it takes")
			}
			if out.archiveRef != "/backups/_chunked/runs/survival/20250601-0300.manifest" || out.jobName != jobspec.BackupJobName("survival", "20250601-0300") {
				t.Errorf("outputs = %+v", out)
			}
		})
	}
}

// TestOutputInputErrors: an invalid value that is known at preview fails
// NewWorldBackup at once with today's *InputError; one that resolves later
// (at up) fails the Job's registration with the same message, naming the
// input.
func TestOutputInputErrors(t *testing.T) {
	construct := func(got *error) pulumi.RunFunc {
		return func(ctx *pulumi.Context) error {
			claim, err := registerClaim(ctx, "Bad_Claim")
			if err != nil {
				return err
			}
			a := validArgs()
			a.BackupClaimName = claim
			_, *got = NewWorldBackup(ctx, "survival", a)
			return *got
		}
	}
	const want = `backupClaimName "Bad_Claim" is invalid`

	var compErr error
	m, err := runMockedPreview(t, construct(&compErr))
	var ie *InputError
	if !errors.As(compErr, &ie) || !slices.Equal(ie.Inputs(), []string{"backupClaimName"}) || !strings.Contains(err.Error(), want) {
		t.Fatalf("preview: NewWorldBackup error = %v, want an *InputError of backupClaimName", compErr)
	}
	if n := len(m.ofType("kubernetes:batch/v1:Job")); n != 0 {
		t.Fatalf("preview: registered %d Jobs despite the invalid input", n)
	}

	compErr = nil
	_, err = runMocked(t, construct(&compErr))
	if compErr != nil {
		t.Fatalf("up: NewWorldBackup returned %v before the input resolved", compErr)
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("up: program error = %v, want one containing %q", err, want)
	}
}

// TestUnknownInputsAtPreview: with an input unknown at preview (a claim
// the same program creates), the component registers its Job, whose spec is
// unknown, with the default timeout, and checks the input when it resolves.
func TestUnknownInputsAtPreview(t *testing.T) {
	m, err := runMockedPreview(t, func(ctx *pulumi.Context) error {
		a := validArgs()
		a.BackupClaimName = unknownString()
		_, err := NewWorldBackup(ctx, "survival", a)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	jobs := m.ofType("kubernetes:batch/v1:Job")
	if len(jobs) != 1 {
		t.Fatalf("registered %d Jobs, want 1", len(jobs))
	}
	if spec := jobs[0].Inputs["spec"]; spec.IsObject() {
		t.Errorf("Job spec = %v, want unknown", spec)
	}
	if got := jobs[0].RegisterRPC.GetCustomTimeouts().GetCreate(); got != "35m0s" {
		t.Errorf("create timeout = %q, want 35m0s (deadline + margin)", got)
	}
}

// TestSecretSHA256: a secret sha256 keeps the Job's spec secret in the
// state, at preview and at up; the component's outputs are not secret.
func TestSecretSHA256(t *testing.T) {
	for _, tt := range []struct {
		name string
		run  func(*testing.T, pulumi.RunFunc) (*mocks, error)
	}{{"preview", runMockedPreview}, {"up", runMocked}} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := tt.run(t, func(ctx *pulumi.Context) error {
				a := validRestoreArgs()
				a.SHA256 = pulumi.ToSecret(pulumi.String(jobtest.SHA256)).(pulumi.StringOutput)
				a.Preflight = new(false)
				_, err := NewWorldRestore(ctx, "survival-restore", a)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			jobs := m.ofType("kubernetes:batch/v1:Job")
			if len(jobs) != 1 {
				t.Fatalf("registered %d Jobs, want 1", len(jobs))
			}
			spec := jobs[0].Inputs["spec"]
			if !spec.ContainsSecrets() {
				t.Fatalf("Job spec is not secret: %v", spec)
			}
			if strings.Contains(jobs[0].Inputs["metadata"].String(), jobtest.SHA256) {
				t.Error("the sha256 is in the Job's metadata")
			}
			if got := jobtest.JSONObject(t, resource.PropertyMap{"spec": spec}.Mappable()); !strings.Contains(jsonString(t, got), jobtest.SHA256) {
				t.Errorf("Job spec %v lacks the sha256", got)
			}
		})
	}
}

// TestRestoreTakesBackupArchiveRef: a restore declared after a backup
// takes the backup's ArchiveRef Output: it restores that archive and its
// Job depends on the backup's.
func TestRestoreTakesBackupArchiveRef(t *testing.T) {
	for _, tt := range []struct {
		name string
		run  func(*testing.T, pulumi.RunFunc) (*mocks, error)
	}{{"preview", runMockedPreview}, {"up", runMocked}} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := tt.run(t, func(ctx *pulumi.Context) error {
				ba := validArgs()
				ba.Preflight = new(false)
				b, err := NewWorldBackup(ctx, "survival", ba)
				if err != nil {
					return err
				}
				ra := validRestoreArgs()
				ra.Server = "creative"
				ra.ArchiveRef = b.ArchiveRef
				ra.Preflight = new(false)
				_, err = NewWorldRestore(ctx, "creative-restore", ra)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			var restore *pulumi.MockResourceArgs
			for _, j := range m.ofType("kubernetes:batch/v1:Job") {
				if j.Name == "creative-restore-job" {
					restore = &j
				}
			}
			if restore == nil {
				t.Fatal("no restore Job registered")
			}
			job := decodeJob(t, *restore, true)
			if args := job.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "/backups/_chunked/runs/survival/20250601-0300.manifest") {
				t.Errorf("restore args = %q, want the backup's archive", args)
			}
			deps := slices.Clone(restore.RegisterRPC.GetDependencies())
			for _, pd := range restore.RegisterRPC.GetPropertyDependencies() {
				deps = append(deps, pd.GetUrns()...)
			}
			if !slices.ContainsFunc(deps, func(u string) bool { return strings.HasSuffix(u, "::survival-job") }) {
				t.Errorf("restore Job dependencies = %q, want the backup's Job", deps)
			}
		})
	}
}

// TestJobInputsAreShared: WorldBackup and WorldRestore take the shared
// inputs from one embedded struct, so a Go program can set them once.
func TestJobInputsAreShared(t *testing.T) {
	shared := JobInputs{Server: "survival", RunID: pulumi.String("r1"), Image: pulumi.String("img:1"),
		BackupClaimName: pulumi.String("backups"), Namespace: pulumi.String("games")}
	b, err := WorldBackupArgs{JobInputs: shared}.Job()
	if err != nil {
		t.Fatal(err)
	}
	r, err := WorldRestoreArgs{JobInputs: shared, ArchiveRef: pulumi.String("/backups/survival/x.tar.zst"), SHA256: pulumi.String(jobtest.SHA256)}.Job()
	if err != nil {
		t.Fatal(err)
	}
	if b.Namespace != "games" || r.Namespace != "games" || b.Image != r.Image {
		t.Errorf("backup %+v and restore %+v do not share the inputs", b.Job, r.Job)
	}
}

func jsonString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBaselineNonRootNeedsFSGroup: baseline mode's capabilities work only
// for root, and it sets no fsGroup, so a non-root runAsUser could not read
// a Secret the Job mounts (root's, 0400): a Job that mounts one is refused
// without fsGroup, naming runAsUser and what to set; with fsGroup it gets
// that fsGroup. A restore of an archive mounts no Secret and is accepted.
func TestBaselineNonRootNeedsFSGroup(t *testing.T) {
	nonRoot := func(j *JobInputs, fsGroup int) {
		j.RunAsUser, j.RunAsGroup = pulumi.Int(1000), pulumi.Int(1000)
		if fsGroup != 0 {
			j.FSGroup = pulumi.Int(fsGroup)
		}
	}
	type job struct {
		id  jobspec.Identity
		err error
	}
	for _, tt := range []struct {
		name    string
		run     func(fsGroup int) job
		refused bool
	}{
		{"backup (config Secret)", func(fs int) job {
			a := validArgs()
			nonRoot(&a.JobInputs, fs)
			b, err := a.Job()
			return job{b.Identity, err}
		}, true},
		{"prune (config Secret)", func(fs int) job {
			a := validPrune()
			nonRoot(&a.JobInputs, fs)
			p, err := a.Job()
			return job{p.Identity, err}
		}, true},
		{"restore by run (config Secret)", func(fs int) job {
			a := validRestoreArgs()
			a.ArchiveRef, a.SHA256, a.FromRun = nil, nil, pulumi.String("latest")
			nonRoot(&a.JobInputs, fs)
			r, err := a.Job()
			return job{r.Identity, err}
		}, true},
		{"restore of an archive (no Secret)", func(fs int) job {
			a := validRestoreArgs()
			nonRoot(&a.JobInputs, fs)
			r, err := a.Job()
			return job{r.Identity, err}
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.run(0)
			var ie *InputError
			switch {
			case tt.refused && (!errors.As(got.err, &ie) || !slices.Equal(ie.Inputs(), []string{"runAsUser"}) ||
				!strings.Contains(got.err.Error(), "set fsGroup")):
				t.Fatalf("baseline, runAsUser 1000, no fsGroup: %v; want runAsUser refused, saying to set fsGroup", got.err)
			case !tt.refused && got.err != nil:
				t.Fatalf("baseline, runAsUser 1000, no fsGroup: %v; want it accepted", got.err)
			}
			got = tt.run(1000)
			want := jobspec.Identity{Mode: jobspec.Baseline, RunAsUser: 1000, RunAsGroup: 1000, FSGroup: 1000}
			if got.err != nil || got.id != want {
				t.Fatalf("baseline, runAsUser 1000, fsGroup 1000: %+v, %v; want %+v", got.id, got.err, want)
			}
		})
	}
}
