package provider

import (
	"sync"
	"testing"

	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/worldbackup/worldbackup/provider/internal/jobtest"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

func validVerify() WorldVerifyArgs {
	return WorldVerifyArgs{
		JobInputs: JobInputs{
			Server:          "survival",
			RunID:           pulumi.String("verify-20250601"),
			Image:           pulumi.String("ghcr.io/worldbackup/worldbackup-archiver:v0.1.0"),
			BackupClaimName: pulumi.String("world-backups"),
		},
		ArchiveRef: pulumi.String("/backups/survival/20250601-0300.tar.zst"),
		SHA256:     pulumi.String(jobtest.SHA256),
	}
}

func TestWorldVerifyRegistersOneJob(t *testing.T) {
	tests := []struct {
		name string
		args func() WorldVerifyArgs
		want func() jobspec.Verify
		// archiveRef is the output: empty by run without a cluster, which
		// would report the run's archive.
		archiveRef string
	}{
		{"required inputs take the contract's defaults", validVerify, jobtest.DefaultVerify, "/backups/survival/20250601-0300.tar.zst"},
		{"sample, scratch claim, restricted", func() WorldVerifyArgs {
			a := validVerify()
			a.ChunkSample, a.ScratchSize, a.ScratchStorageClassName = pulumi.String("10%"), pulumi.String("40Gi"), pulumi.String("fast")
			a.SecurityMode = new(SecurityModeRestricted)
			return a
		}, func() jobspec.Verify {
			v := jobtest.DefaultVerify()
			v.Chunks = "10%"
			v.Scratch = jobspec.Scratch{Size: resource.MustParse("40Gi"), StorageClassName: "fast"}
			v.Identity = jobspec.Identity{Mode: jobspec.Restricted, RunAsUser: 1000, RunAsGroup: 1000, FSGroup: 1000}
			return v
		}, "/backups/survival/20250601-0300.tar.zst"},
		{"by run, encrypted: the default config Secret and mount", func() WorldVerifyArgs {
			a := validVerify()
			a.ArchiveRef, a.SHA256, a.FromRun, a.FromServer = nil, nil, pulumi.String("latest"), pulumi.String("lobby")
			a.Encryption = &EncryptionArgs{SecretName: pulumi.String("survival-key")}
			return a
		}, func() jobspec.Verify {
			v := jobtest.DefaultVerify()
			v.ArchiveRef, v.SHA256 = "", ""
			v.ByRun = jobspec.ByRun{FromRun: "latest", FromServer: "lobby", ConfigSecretName: "felis-config", ConfigMountPath: "/etc/felis"}
			v.Encryption = &jobspec.Encryption{SecretName: "survival-key", SecretKey: DefaultEncryptionSecretKey}
			return v
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got outputs
			var wg sync.WaitGroup
			m, err := runMocked(t, func(ctx *pulumi.Context) error {
				c, err := NewWorldVerify(ctx, "check", tt.args())
				if err != nil {
					return err
				}
				captureOutputs(&wg, &got, c.JobName, c.Namespace, c.RunID, c.ArchiveRef)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			checkOneJob(t, m, WorldVerifyType, "check", "35m0s", jobspec.BuildVerify(tt.want()))
			if got != (outputs{jobName: "survival-verify-verify-20250601", namespace: "minecraft", runID: "verify-20250601",
				archiveRef: tt.archiveRef}) {
				t.Fatalf("outputs %+v", got)
			}
		})
	}
}

func TestWorldVerifyInvalidInputs(t *testing.T) {
	tests := []struct {
		name       string
		modify     func(a *WorldVerifyArgs)
		wantInputs []string
		wantText   string
	}{
		{"no archive, no checksum", func(a *WorldVerifyArgs) { a.ArchiveRef, a.SHA256 = nil, nil }, []string{"sha256", "archiveRef"}, "2 invalid inputs"},
		{"archive outside the backup root", func(a *WorldVerifyArgs) { a.ArchiveRef = pulumi.String("/data/x.tar.zst") }, []string{"archiveRef"}, "not under backupRoot"},
		{"s3 archive without a store", func(a *WorldVerifyArgs) { a.ArchiveRef = pulumi.String("s3://b/k.tar.zst") }, []string{"archiveRef"}, "store is not set"},
		{"bad sample", func(a *WorldVerifyArgs) { a.ChunkSample = pulumi.String("150%") }, []string{"chunkSample"}, "at most 100%"},
		{"zero sample", func(a *WorldVerifyArgs) { a.ChunkSample = pulumi.String("0") }, []string{"chunkSample"}, "above 0"},
		{"bad scratch size", func(a *WorldVerifyArgs) { a.ScratchSize = pulumi.String("lots") }, []string{"scratchSize"}, "quantity"},
		{"negative scratch size", func(a *WorldVerifyArgs) { a.ScratchSize = pulumi.String("-1Gi") }, []string{"scratchSize"}, "greater than zero"},
		{"scratch size in thousandths", func(a *WorldVerifyArgs) { a.ScratchSize = pulumi.String("500m") }, []string{"scratchSize"},
			`scratchSize "500m" is below the minimum 64Mi, which no run can work with: m means thousandths, so 500m is a fraction of a byte: write Mi or Gi`},
		{"scratch size in bytes", func(a *WorldVerifyArgs) { a.ScratchSize = pulumi.String("16000") }, []string{"scratchSize"}, "a plain number counts bytes"},
		{"bad storage class", func(a *WorldVerifyArgs) { a.ScratchStorageClassName = pulumi.String("Fast SSD") }, []string{"scratchStorageClassName"}, ""},
		{"a world root", func(a *WorldVerifyArgs) { a.WorldRoot = pulumi.String("/world") }, []string{"worldRoot"}, "mounts no world"},
		{"a world claim", func(a *WorldVerifyArgs) { a.WorldClaimName = pulumi.String("world-survival-0") }, []string{"worldClaimName"}, "mounts no world"},
		{"backup root on the scratch", func(a *WorldVerifyArgs) {
			a.BackupRoot, a.ArchiveRef = pulumi.String("/scratch"), pulumi.String("/scratch/survival/r.tar.zst")
		}, []string{"backupRoot"}, "overlaps the scratch volume"},
		{"bad server", func(a *WorldVerifyArgs) { a.Server = "Survival" }, []string{"server"}, "<server>-verify-<suffix>"},
		{"fromRun with archiveRef and sha256", func(a *WorldVerifyArgs) { a.FromRun = pulumi.String("latest") }, []string{"archiveRef", "sha256"},
			`remove fromRun to verify this archive`},
		{"fromRun not a run reference", func(a *WorldVerifyArgs) {
			a.ArchiveRef, a.SHA256, a.FromRun = nil, nil, pulumi.String("../x")
		}, []string{"fromRun"}, `neither "latest" nor a run ID`},
		{"configMountPath without fromRun", func(a *WorldVerifyArgs) { a.ConfigMountPath = pulumi.String("/c") }, []string{"configMountPath"}, "only by a verify by run"},
		{"fromRun with the config on the scratch", func(a *WorldVerifyArgs) {
			a.ArchiveRef, a.SHA256, a.FromRun, a.ConfigMountPath = nil, nil, pulumi.String("latest"), pulumi.String("/scratch/c")
		}, []string{"configMountPath"}, "overlaps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := validVerify()
			tt.modify(&a)
			checkComponentInputError(t, a.Validate, func(ctx *pulumi.Context) error {
				_, err := NewWorldVerify(ctx, "check", a)
				return err
			}, tt.wantInputs, []string{tt.wantText})
		})
	}
}

// TestWorldVerifySchemaThroughInfer serves NewWorldVerify with
// infer.ComponentF, the way the plugin does, and checks its token and that
// every input and output is documented.
func TestWorldVerifySchemaThroughInfer(t *testing.T) {
	res := schemaOf(t, infer.ComponentF(NewWorldVerify), WorldVerifyType)
	checkDocumented(t, res,
		[]string{"server", "runId", "archiveRef", "sha256", "chunkSample", "scratchSize", "scratchStorageClassName",
			"image", "backupClaimName", "namespace", "serviceAccountName", "backupRoot", "worldRoot", "worldClaimName",
			"deadline", "cpuLimit", "memoryLimit", "securityMode", "runAsUser", "runAsGroup", "fsGroup", "ttlAfterFinished",
			"backoffLimit", "nodeName", "nodeSelector", "labels", "annotations", "skipAwait", "timeout", "gamePodSelector",
			"gamePodAffinity", "replaceUnready", "preflight", "store", "kubeContext", "imagePullSecrets", "tolerations",
			"priorityClassName", "notify", "fromRun", "fromServer", "configSecretName", "configMountPath", "encryption"},
		[]string{"image", "runId", "server"},
		[]string{"jobName", "namespace", "runId", "archiveRef", "status", "chunksChecked", "problems"})
}
