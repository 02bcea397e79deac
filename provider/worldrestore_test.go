package provider

import (
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/internal/jobtest"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

func validRestoreArgs() WorldRestoreArgs {
	return WorldRestoreArgs{
		JobInputs: JobInputs{
			Server:          "survival",
			RunID:           pulumi.String("restore-20250601"),
			Image:           pulumi.String("ghcr.io/worldbackup/worldbackup-archiver:v0.1.0"),
			BackupClaimName: pulumi.String("world-backups"),
		},
		ArchiveRef: pulumi.String("/backups/survival/20250601-0300.tar.zst"),
		SHA256:     pulumi.String(jobtest.SHA256),
	}
}

func TestWorldRestoreRegistersOneJob(t *testing.T) {
	tests := []struct {
		name        string
		args        func() WorldRestoreArgs
		want        func() jobspec.Restore
		wantTimeout string
	}{
		{
			name:        "defaults",
			args:        validRestoreArgs,
			want:        jobtest.DefaultRestore,
			wantTimeout: "35m0s",
		},
		{
			name: "every input set, restricted",
			args: func() WorldRestoreArgs {
				a := validRestoreArgs()
				a.ArchiveRef = pulumi.String("/archives/creative/weekly.tar.gz")
				a.Replace = pulumi.Bool(false)
				a.Namespace = pulumi.String("games")
				a.ServiceAccountName = pulumi.String("restore-sa")
				a.BackupRoot = pulumi.String("/archives")
				a.WorldRoot = pulumi.String("/data/world")
				a.WorldClaimName = pulumi.String("survival-data")
				a.Deadline = pulumi.String("2h")
				a.CPULimit = pulumi.String("2")
				a.MemoryLimit = pulumi.String("2Gi")
				a.SecurityMode = new(SecurityMode("restricted"))
				a.RunAsUser = pulumi.Int(1001)
				a.RunAsGroup = pulumi.Int(1002)
				a.FSGroup = pulumi.Int(1003)
				a.TTLAfterFinished = pulumi.String("90s")
				a.BackoffLimit = pulumi.Int(0)
				a.MaxBytes = pulumi.String("8Gi")
				a.MaxEntries = pulumi.Int(50000)
				a.NodeSelector = pulumi.ToStringMap(map[string]string{"kubernetes.io/hostname": "node-a"})
				a.Labels = pulumi.ToStringMap(map[string]string{"team": "ops"})
				a.Annotations = pulumi.ToStringMap(map[string]string{"note": "rollback"})
				a.SkipAwait = true
				a.Timeout = "3h"
				return a
			},
			want: func() jobspec.Restore {
				r := jobtest.DefaultRestore()
				r.ArchiveRef = "/archives/creative/weekly.tar.gz"
				r.Replace = false
				r.Namespace = "games"
				r.ServiceAccountName = "restore-sa"
				r.BackupRoot = "/archives"
				r.WorldRoot = "/data/world"
				r.WorldClaimName = "survival-data"
				r.Deadline = 2 * time.Hour
				r.Resources = jobspec.Resources{CPULimit: k8sresource.MustParse("2"), MemoryLimit: k8sresource.MustParse("2Gi")}
				r.Identity = jobspec.Identity{Mode: jobspec.Restricted, RunAsUser: 1001, RunAsGroup: 1002, FSGroup: 1003}
				r.TTLAfterFinished = 90 * time.Second
				r.BackoffLimit = 0
				r.MaxBytes = 8 << 30
				r.MaxEntries = 50000
				r.Placement.NodeSelector = map[string]string{"kubernetes.io/hostname": "node-a"}
				r.Labels = map[string]string{"team": "ops"}
				r.Annotations = map[string]string{"note": "rollback"}
				r.Await = jobspec.Await{Skip: true}
				return r
			},
			wantTimeout: "3h0m0s",
		},
		{
			name: "restricted defaults to the game's UID and GID",
			args: func() WorldRestoreArgs {
				a := validRestoreArgs()
				a.SecurityMode = new(SecurityMode("restricted"))
				a.NodeName = pulumi.String("node-b")
				a.Replace = pulumi.Bool(true)
				return a
			},
			want: func() jobspec.Restore {
				r := jobtest.DefaultRestore()
				r.Identity = jobspec.Identity{Mode: jobspec.Restricted, RunAsUser: 1000, RunAsGroup: 1000, FSGroup: 1000}
				r.Placement.NodeName = "node-b"
				return r
			},
			wantTimeout: "35m0s",
		},
		{
			// No config Secret to read, so restricted mode may omit fsGroup.
			name: "restricted with fsGroup 0 omits it",
			args: func() WorldRestoreArgs {
				a := validRestoreArgs()
				a.SecurityMode = new(SecurityMode("restricted"))
				a.FSGroup = pulumi.Int(0)
				return a
			},
			want: func() jobspec.Restore {
				r := jobtest.DefaultRestore()
				r.Identity = jobspec.Identity{Mode: jobspec.Restricted, RunAsUser: 1000, RunAsGroup: 1000}
				return r
			},
			wantTimeout: "35m0s",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got outputs
			var wg sync.WaitGroup
			m, err := runMocked(t, func(ctx *pulumi.Context) error {
				wr, err := NewWorldRestore(ctx, "restore", tt.args())
				if err != nil {
					return err
				}
				captureOutputs(&wg, &got, wr.JobName, wr.Namespace, wr.RunID, wr.ArchiveRef)
				return nil
			})
			if err != nil {
				t.Fatalf("NewWorldRestore: %v", err)
			}
			wg.Wait()

			checkOneJob(t, m, WorldRestoreType, "restore", tt.wantTimeout, jobspec.BuildRestore(tt.want()))

			want := tt.want()
			wantOut := outputs{jobspec.RestoreJobName(want.Server, want.RunID), want.Namespace, want.RunID, want.ArchiveRef}
			if got != wantOut {
				t.Fatalf("outputs = %+v, want %+v", got, wantOut)
			}
		})
	}
}

// TestWorldRestoreInputsDecodeAsJob checks that the inputs the provider
// receives decode strictly as a batch/v1 Job equal to the builder's, and
// that its volumes keep their read-only flags through the conversion.
func TestWorldRestoreInputsDecodeAsJob(t *testing.T) {
	m, err := runMocked(t, func(ctx *pulumi.Context) error {
		_, err := NewWorldRestore(ctx, "restore", validRestoreArgs())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got := decodeJob(t, m.ofType("kubernetes:batch/v1:Job")[0], true)
	want := jobspec.BuildRestore(jobtest.DefaultRestore())
	if !reflect.DeepEqual(jobtest.JSONObject(t, &got), jobtest.JSONObject(t, want)) {
		t.Fatalf("decoded Job differs from the builder's:\n%+v\n%+v", got, want)
	}
	pod := got.Spec.Template.Spec
	for _, v := range pod.Volumes {
		switch {
		case v.Secret != nil:
			t.Fatalf("the registered Job mounts Secret volume %q", v.Name)
		case v.Name == jobspec.BackupVolumeName && !v.PersistentVolumeClaim.ReadOnly:
			t.Fatal("the backup claim is writable at the volume")
		case v.Name == jobspec.WorldVolumeName && v.PersistentVolumeClaim.ReadOnly:
			t.Fatal("the world claim is read-only at the volume")
		}
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Fatal("the registered Job mounts the service-account token")
	}
}

func TestWorldRestoreMissingInputs(t *testing.T) {
	tests := []struct {
		name       string
		modify     func(a *WorldRestoreArgs)
		wantInputs []string
		wantText   []string
	}{
		{"server", func(a *WorldRestoreArgs) { a.Server = "" }, []string{"server"},
			[]string{"worldrestore: server is required: set it to the game server's name"}},
		{"runId", func(a *WorldRestoreArgs) { a.RunID = pulumi.String("") }, []string{"runId"},
			[]string{"worldrestore: runId is required: set it to a unique ID"}},
		{"archiveRef", func(a *WorldRestoreArgs) { a.ArchiveRef = pulumi.String("") }, []string{"archiveRef"},
			[]string{"worldrestore: archiveRef is required: set it to the archive's path in the pod", "WorldBackup's archiveRef output"}},
		{"sha256", func(a *WorldRestoreArgs) { a.SHA256 = pulumi.String("") }, []string{"sha256"},
			[]string{"worldrestore: sha256 is required: set it to the archive's SHA-256", "archiver list"}},
		{"image", func(a *WorldRestoreArgs) { a.Image = pulumi.String("") }, []string{"image"},
			[]string{"worldrestore: image is required: set it to the archiver image"}},
		{"backupClaimName", func(a *WorldRestoreArgs) { a.BackupClaimName = pulumi.String("") }, []string{"backupClaimName"},
			[]string{"worldrestore: backupClaimName is required: set it to the PersistentVolumeClaim"}},
		{"all at once", func(a *WorldRestoreArgs) { *a = WorldRestoreArgs{} }, []string{"server", "runId", "sha256", "image", "backupClaimName", "archiveRef"},
			[]string{"worldrestore: 6 invalid inputs:\n  - server is required", "\n  - archiveRef is required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := validRestoreArgs()
			tt.modify(&args)
			checkRestoreInputError(t, args, tt.wantInputs, tt.wantText)
		})
	}
}

func TestWorldRestoreInvalidInputs(t *testing.T) {
	tests := []struct {
		name       string
		modify     func(a *WorldRestoreArgs)
		wantInputs []string
		wantText   string
	}{
		{"server not a label", func(a *WorldRestoreArgs) { a.Server = "Survival_1" }, []string{"server"}, "<server>-restore-<suffix>"},
		{"server too long for the Job name", func(a *WorldRestoreArgs) { a.Server = strings.Repeat("s", 47) }, []string{"server"}, "at most 46"},
		{"runId with slash", func(a *WorldRestoreArgs) { a.RunID = pulumi.String("../x") }, []string{"runId"}, `runId "../x" is invalid`},
		{"sha256 upper case", func(a *WorldRestoreArgs) { a.SHA256 = pulumi.String(strings.ToUpper(jobtest.SHA256)) }, []string{"sha256"}, `use the lower-case form "` + jobtest.SHA256 + `"`},
		{"sha256 too short", func(a *WorldRestoreArgs) { a.SHA256 = pulumi.String(jobtest.SHA256[:63]) }, []string{"sha256"}, "is not a SHA-256: use 64 hex digits"},
		{"sha256 not hex", func(a *WorldRestoreArgs) { a.SHA256 = pulumi.String(strings.Repeat("g", 64)) }, []string{"sha256"}, "is not a SHA-256"},
		{"archiveRef relative", func(a *WorldRestoreArgs) { a.ArchiveRef = pulumi.String("survival/x.tar.zst") }, []string{"archiveRef"}, "use the absolute path of the archive in the pod"},
		{"archiveRef unclean", func(a *WorldRestoreArgs) { a.ArchiveRef = pulumi.String("/backups/../etc/x.tar.zst") }, []string{"archiveRef"}, `clean form "/etc/x.tar.zst"`},
		{"archiveRef outside backupRoot", func(a *WorldRestoreArgs) { a.ArchiveRef = pulumi.String("/archives/survival/x.tar.zst") }, []string{"archiveRef"},
			`"/archives/survival/x.tar.zst" is not under backupRoot "/backups"`},
		{"archiveRef a sibling of backupRoot", func(a *WorldRestoreArgs) { a.ArchiveRef = pulumi.String("/backups2/x.tar.zst") }, []string{"archiveRef"}, "not under backupRoot"},
		{"archiveRef is backupRoot", func(a *WorldRestoreArgs) { a.ArchiveRef = pulumi.String("/backups") }, []string{"archiveRef"}, "not under backupRoot"},
		{"archiveRef in the world", func(a *WorldRestoreArgs) { a.ArchiveRef = pulumi.String("/world/x.tar.zst") }, []string{"archiveRef"}, "not under backupRoot"},
		{"archiveRef with newline", func(a *WorldRestoreArgs) { a.ArchiveRef = pulumi.String("/backups/x\n.tar.zst") }, []string{"archiveRef"}, "control characters"},
		{"backupRoot moved without archiveRef", func(a *WorldRestoreArgs) { a.BackupRoot = pulumi.String("/archives") }, []string{"archiveRef"}, `not under backupRoot "/archives"`},
		{"nested mounts", func(a *WorldRestoreArgs) { a.WorldRoot = pulumi.String("/backups/world") }, []string{"worldRoot"}, "overlaps backupRoot"},
		{"world on /tmp", func(a *WorldRestoreArgs) { a.WorldRoot = pulumi.String("/tmp") }, []string{"worldRoot"}, "overlaps the scratch folder"},
		{"relative backupRoot", func(a *WorldRestoreArgs) { a.BackupRoot = pulumi.String("backups") }, []string{"backupRoot"}, "absolute path"},
		{"worldClaimName invalid", func(a *WorldRestoreArgs) { a.WorldClaimName = pulumi.String("World") }, []string{"worldClaimName"}, "worldClaimName"},
		{"namespace invalid", func(a *WorldRestoreArgs) { a.Namespace = pulumi.String("mine.craft") }, []string{"namespace"}, `namespace "mine.craft" is invalid`},
		{"timeout below deadline", func(a *WorldRestoreArgs) { a.Timeout = "10m" }, []string{"timeout"}, "while the restore still runs"},
		{"deadline zero", func(a *WorldRestoreArgs) { a.Deadline = pulumi.String("0s") }, []string{"deadline"}, "too short"},
		{"memoryLimit zero", func(a *WorldRestoreArgs) { a.MemoryLimit = pulumi.String("0") }, []string{"memoryLimit"}, "greater than zero"},
		{"securityMode unknown", func(a *WorldRestoreArgs) { a.SecurityMode = new(SecurityMode("privileged")) }, []string{"securityMode"}, "use baseline (root with CHOWN, DAC_OVERRIDE and FOWNER only)"},
		{"restricted as root", func(a *WorldRestoreArgs) {
			a.SecurityMode = new(SecurityMode("restricted"))
			a.RunAsUser = pulumi.Int(0)
		}, []string{"runAsUser"}, "forbids"},
		{"maxBytes not a quantity", func(a *WorldRestoreArgs) { a.MaxBytes = pulumi.String("lots") }, []string{"maxBytes"}, "not a Kubernetes quantity"},
		{"maxBytes zero", func(a *WorldRestoreArgs) { a.MaxBytes = pulumi.String("0") }, []string{"maxBytes"}, "greater than zero"},
		{"maxBytes too large", func(a *WorldRestoreArgs) { a.MaxBytes = pulumi.String("9Ei") }, []string{"maxBytes"}, "too large"},
		{"maxBytes in thousandths", func(a *WorldRestoreArgs) { a.MaxBytes = pulumi.String("500m") }, []string{"maxBytes"}, "a fraction of a byte: write Mi or Gi"},
		{"maxBytes in bytes", func(a *WorldRestoreArgs) { a.MaxBytes = pulumi.String("64") }, []string{"maxBytes"}, "below the minimum 1Mi"},
		{"an encrypted archive without encryption", func(a *WorldRestoreArgs) { a.ArchiveRef = pulumi.String("/backups/survival/x.tar.zst.age") },
			[]string{"archiveRef"}, "is an encrypted archive (.age): set encryption"},
		{"fromRun Latest", func(a *WorldRestoreArgs) {
			a.ArchiveRef, a.SHA256, a.FromRun = nil, nil, pulumi.String("Latest")
		}, []string{"fromRun"}, `write "latest" in lower case`},
		{"maxEntries zero", func(a *WorldRestoreArgs) { a.MaxEntries = pulumi.Int(0) }, []string{"maxEntries"}, "out of range"},
		{"ttl zero", func(a *WorldRestoreArgs) { a.TTLAfterFinished = pulumi.String("0s") }, []string{"ttlAfterFinished"}, "at least 1s"},
		{"gamePodAffinity unknown", func(a *WorldRestoreArgs) { a.GamePodAffinity = pulumi.String("always") }, []string{"gamePodAffinity"}, "use preferred"},
		{"gamePodAffinity required with nodeName", func(a *WorldRestoreArgs) {
			a.GamePodAffinity = pulumi.String("required")
			a.NodeName = pulumi.String("n1")
		}, []string{"gamePodAffinity"}, "bypasses the scheduler"},
		{"gamePodAffinity required without selector", func(a *WorldRestoreArgs) {
			a.GamePodAffinity = pulumi.String("required")
			a.GamePodSelector = pulumi.ToStringMap(map[string]string{})
		}, []string{"gamePodSelector"}, "is empty"},
		{"gamePodSelector bad value", func(a *WorldRestoreArgs) { a.GamePodSelector = pulumi.ToStringMap(map[string]string{"app": "a b"}) }, []string{"gamePodSelector"}, `value "a b"`},
		{"replaceUnready with skipAwait", func(a *WorldRestoreArgs) { a.SkipAwait = true; a.ReplaceUnready = new(true) }, []string{"replaceUnready"}, "still running"},
		{"annotation skipAwait reserved", func(a *WorldRestoreArgs) {
			a.Annotations = pulumi.ToStringMap(map[string]string{"pulumi.com/skipAwait": "true"})
		}, []string{"annotations"}, "set by the component"},
		{"negative backoffLimit", func(a *WorldRestoreArgs) { a.BackoffLimit = pulumi.Int(-1) }, []string{"backoffLimit"}, "out of range"},
		{"nodeName and nodeSelector", func(a *WorldRestoreArgs) {
			a.NodeName = pulumi.String("n1")
			a.NodeSelector = pulumi.ToStringMap(map[string]string{"zone": "a"})
		}, []string{"nodeName"}, "set only one"},
		{"label reserved", func(a *WorldRestoreArgs) {
			a.Labels = pulumi.ToStringMap(map[string]string{"app.kubernetes.io/component": "x"})
		}, []string{"labels"}, "set by the component"},
		{"annotation reserved", func(a *WorldRestoreArgs) {
			a.Annotations = pulumi.ToStringMap(map[string]string{"worldbackup.dev/run-id": "x"})
		}, []string{"annotations"}, "set by the component"},
		{"fromRun with archiveRef and sha256", func(a *WorldRestoreArgs) { a.FromRun = pulumi.String("latest") }, []string{"archiveRef", "sha256"},
			`but so is fromRun "latest"`},
		{"fromRun not a run reference", func(a *WorldRestoreArgs) {
			a.FromRun, a.ArchiveRef, a.SHA256 = pulumi.String("../x"), nil, nil
		}, []string{"fromRun"}, `neither "latest" nor a run ID`},
		{"fromServer without fromRun", func(a *WorldRestoreArgs) { a.FromServer = pulumi.String("lobby") }, []string{"fromServer"}, "fromRun is not"},
		{"fromServer past the server-name rule", func(a *WorldRestoreArgs) {
			a.FromRun, a.ArchiveRef, a.SHA256 = pulumi.String("latest"), nil, nil
			a.FromServer = pulumi.String(strings.Repeat("s", 64))
		}, []string{"fromServer"}, "at most 63 lowercase letters"},
		{"fromServer not a label", func(a *WorldRestoreArgs) {
			a.FromRun, a.ArchiveRef, a.SHA256 = pulumi.String("latest"), nil, nil
			a.FromServer = pulumi.String("Lobby")
		}, []string{"fromServer"}, `fromServer "Lobby" is invalid: use the name of a backed-up server`},
		{"configSecretName without fromRun", func(a *WorldRestoreArgs) { a.ConfigSecretName = pulumi.String("c") }, []string{"configSecretName"}, "only by a restore by run"},
		{"fromRun in restricted mode without fsGroup", func(a *WorldRestoreArgs) {
			a.FromRun, a.ArchiveRef, a.SHA256 = pulumi.String("latest"), nil, nil
			a.SecurityMode = new(SecurityMode("restricted"))
			a.FSGroup = pulumi.Int(0)
		}, []string{"fsGroup"}, "read the config Secret"},
		{"fromRun with the config on the world", func(a *WorldRestoreArgs) {
			a.FromRun, a.ArchiveRef, a.SHA256 = pulumi.String("latest"), nil, nil
			a.ConfigMountPath = pulumi.String("/world/etc")
		}, []string{"worldRoot"}, "overlaps configMountPath"},
		{"several problems listed together", func(a *WorldRestoreArgs) {
			a.SHA256 = pulumi.String("abc")
			a.Deadline = pulumi.String("forever")
			a.ArchiveRef = pulumi.String("x.tar.zst")
		}, []string{"sha256", "deadline", "archiveRef"}, "3 invalid inputs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := validRestoreArgs()
			tt.modify(&args)
			checkRestoreInputError(t, args, tt.wantInputs, []string{tt.wantText})
		})
	}
}

func checkRestoreInputError(t *testing.T, args WorldRestoreArgs, wantInputs, wantText []string) {
	t.Helper()
	checkComponentInputError(t, args.Validate, func(ctx *pulumi.Context) error {
		_, err := NewWorldRestore(ctx, "restore", args)
		return err
	}, wantInputs, wantText)
}

func TestWorldRestoreValidArgs(t *testing.T) {
	if err := validRestoreArgs().Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
}

// TestWorldRestoreByRun: fromRun in place of archiveRef and sha256 gives the
// restore Job with the resolve init container and the config Secret's
// defaults.
func TestWorldRestoreByRun(t *testing.T) {
	a := validRestoreArgs()
	a.ArchiveRef, a.SHA256 = nil, nil
	a.FromRun, a.FromServer = pulumi.String("latest"), pulumi.String("lobby")
	r, err := a.Job()
	if err != nil {
		t.Fatalf("Job() = %v", err)
	}
	if r.FromRun != "latest" || r.FromServer != "lobby" || r.ConfigSecretName != DefaultConfigSecretName || r.ConfigMountPath != DefaultConfigMountPath {
		t.Fatalf("restore %+v: want fromRun latest of lobby, the default config Secret and mount", r)
	}
	pod := jobspec.BuildRestore(r).Spec.Template.Spec
	if len(pod.InitContainers) != 1 || !slices.Contains(pod.InitContainers[0].Args, "lobby") {
		t.Fatalf("init containers %+v: want the resolve of lobby", pod.InitContainers)
	}
	// fromServer names no Job: a server name of 63 characters, which the
	// archiver takes, is not held to the Job name's 46.
	long := strings.Repeat("s", jobapi.MaxServerLen)
	a.FromServer = pulumi.String(long)
	if r, err := a.Job(); err != nil || r.FromServer != long {
		t.Fatalf("fromServer of %d characters: %v", len(long), err)
	}
}

// TestWorldRestoreTakesWorldBackupOutputs chains the two components the way
// a program does: the restore's archiveRef is the backup's output, so the
// restore Job depends on the backup Job and restores the path it wrote.
func TestWorldRestoreTakesWorldBackupOutputs(t *testing.T) {
	m, err := runMocked(t, func(ctx *pulumi.Context) error {
		wb, err := NewWorldBackup(ctx, "backup", validArgs())
		if err != nil {
			return err
		}
		// The args are plain values: a Go program resolves the output first
		// (as the plugin does for its callers).
		var regErr error
		done := make(chan struct{})
		wb.ArchiveRef.ApplyT(func(ref string) error {
			defer close(done)
			a := validRestoreArgs()
			a.ArchiveRef = pulumi.String(ref)
			_, regErr = NewWorldRestore(ctx, "restore", a, pulumi.DependsOn([]pulumi.Resource{wb}))
			return nil
		})
		<-done
		return regErr
	})
	if err != nil {
		t.Fatal(err)
	}
	var restore pulumi.MockResourceArgs
	for _, j := range m.ofType("kubernetes:batch/v1:Job") {
		if j.Name == "restore-job" {
			restore = j
		}
	}
	job := decodeJob(t, restore, false)
	args := job.Spec.Template.Spec.Containers[0].Args
	if i := slices.Index(args, "--archive"); i < 0 || args[i+1] != "/backups/_chunked/runs/survival/20250601-0300.manifest" {
		t.Fatalf("restore args = %q, want --archive with the backup's archiveRef", args)
	}
	// Depending on a component means depending on its children: the Job.
	const backupJob = "urn:pulumi:stack::project::worldbackup:index:WorldBackup$kubernetes:batch/v1:Job::backup-job"
	comps := m.ofType(WorldRestoreType)
	if len(comps) != 1 || !slices.Contains(comps[0].RegisterRPC.GetDependencies(), backupJob) {
		t.Fatalf("the WorldRestore does not depend on the backup Job: %+v", comps)
	}
}

func TestWorldRestoreExplicitProvider(t *testing.T) {
	checkExplicitProvider(t, &kubernetes.ProviderArgs{}, func(ctx *pulumi.Context, opts ...pulumi.ResourceOption) error {
		_, err := NewWorldRestore(ctx, "restore", validRestoreArgs(), opts...)
		return err
	})
}

// TestWorldRestoreOutputsDependOnJob checks that a resource taking an
// output depends on the Job, so it waits for the restore during `pulumi up`.
func TestWorldRestoreOutputsDependOnJob(t *testing.T) {
	m, err := runMocked(t, func(ctx *pulumi.Context) error {
		wr, err := NewWorldRestore(ctx, "restore", validRestoreArgs())
		if err != nil {
			return err
		}
		var consumer pulumi.CustomResourceState
		return ctx.RegisterResource("test:index:Consumer", "consumer", pulumi.Map{"job": wr.JobName}, &consumer)
	})
	if err != nil {
		t.Fatal(err)
	}
	consumers := m.ofType("test:index:Consumer")
	if len(consumers) != 1 {
		t.Fatalf("consumers = %d, want 1", len(consumers))
	}
	const jobURN = "urn:pulumi:stack::project::worldbackup:index:WorldRestore$kubernetes:batch/v1:Job::restore-job"
	if deps := consumers[0].RegisterRPC.GetPropertyDependencies()["job"].GetUrns(); !slices.Contains(deps, jobURN) {
		t.Fatalf("job depends on %q, want %q among them", deps, jobURN)
	}
	if got := consumers[0].Inputs[resource.PropertyKey("job")].StringValue(); got != "survival-restore-restore-20250601" {
		t.Fatalf("job = %q", got)
	}
}

// TestWorldRestoreSchemaThroughInfer serves NewWorldRestore with
// infer.ComponentF, the way the plugin does, and checks its token and that
// every input and output is documented.
func TestWorldRestoreSchemaThroughInfer(t *testing.T) {
	res := schemaOf(t, infer.ComponentF(NewWorldRestore), WorldRestoreType)
	checkDocumented(t, res,
		[]string{"server", "runId", "archiveRef", "sha256", "replace", "image", "backupClaimName", "namespace",
			"serviceAccountName", "backupRoot", "worldRoot", "worldClaimName", "deadline", "cpuLimit",
			"memoryLimit", "securityMode", "runAsUser", "runAsGroup", "fsGroup", "ttlAfterFinished",
			"backoffLimit", "maxBytes", "maxEntries", "nodeName", "nodeSelector", "labels", "annotations",
			"skipAwait", "timeout", "gamePodSelector", "gamePodAffinity", "tolerations", "priorityClassName", "imagePullSecrets", "replaceUnready", "preflight",
			"store", "encryption", "kubeContext", "fromRun", "fromServer", "configSecretName", "configMountPath", "notify"},
		[]string{"image", "runId", "server"},
		[]string{"jobName", "namespace", "runId", "archiveRef", "status"})
	if !strings.Contains(res.InputProperties["replace"].Description, "Default: true") {
		t.Errorf("replace's description does not give its default: %q", res.InputProperties["replace"].Description)
	}
}

// TestNotifyInput: notify gives the Job its webhook Secret; a missing
// Secret name or a key a Secret cannot hold is an input error naming it.
func TestNotifyInput(t *testing.T) {
	a := validRestoreArgs()
	a.Notify = &NotifyArgs{SecretName: "felis-notify", Key: "url", OnSuccess: true}
	r, err := a.Job()
	if err != nil {
		t.Fatal(err)
	}
	if r.Notify == nil || *r.Notify != (jobspec.Notify{SecretName: "felis-notify", Key: "url", Always: true}) {
		t.Fatalf("notify = %+v", r.Notify)
	}
	for _, tt := range []struct {
		name      string
		notify    NotifyArgs
		wantInput string
		wantText  string
	}{
		{"key with a slash", NotifyArgs{SecretName: "felis-notify", Key: "a/b"}, "notify.key", `notify.key "a/b" is not a valid Secret key`},
		{"key dot", NotifyArgs{SecretName: "felis-notify", Key: "."}, "notify.key", `notify.key "." is not a valid Secret key (must not be '.')`},
		{"key dot-dot", NotifyArgs{SecretName: "felis-notify", Key: ".."}, "notify.key", "must not be '..'"},
		{"key starting with dot-dot", NotifyArgs{SecretName: "felis-notify", Key: "..url"}, "notify.key", "must not start with '..'"},
		{"no key", NotifyArgs{SecretName: "felis-notify"}, "notify.key", "notify.key is required"},
		{"no secret name", NotifyArgs{Key: "url"}, "notify.secretName", "notify.secretName is required: set it to the Secret that holds the webhook URL"},
		{"onSuccess alone", NotifyArgs{Key: "url", OnSuccess: true}, "notify.secretName", "notify.secretName is required"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := validRestoreArgs()
			a.Notify = &tt.notify
			checkRestoreInputError(t, a, []string{tt.wantInput}, []string{tt.wantText})
		})
	}
}
