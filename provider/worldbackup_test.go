package provider

import (
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"

	"github.com/worldbackup/worldbackup/provider/internal/jobtest"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

func validArgs() WorldBackupArgs {
	return WorldBackupArgs{
		JobInputs: JobInputs{
			Server:          "survival",
			RunID:           pulumi.String("20250601-0300"),
			Image:           pulumi.String("ghcr.io/worldbackup/worldbackup-archiver:v0.1.0"),
			BackupClaimName: pulumi.String("world-backups"),
		},
	}
}

func TestWorldBackupRegistersOneJob(t *testing.T) {
	tests := []struct {
		name        string
		args        func() WorldBackupArgs
		want        func() jobspec.Backup
		wantTimeout string
		wantRef     string
	}{
		{
			name:        "defaults",
			args:        validArgs,
			want:        jobtest.DefaultBackup,
			wantTimeout: "35m0s",
			wantRef:     "/backups/_chunked/runs/survival/20250601-0300.manifest",
		},
		{
			name: "every input set, restricted",
			args: func() WorldBackupArgs {
				a := validArgs()
				a.FormerOwner = pulumi.String("Notch")
				a.Namespace = pulumi.String("games")
				a.ServiceAccountName = pulumi.String("backup-sa")
				a.ConfigSecretName = pulumi.String("felis-prod")
				a.ConfigMountPath = pulumi.String("/run/felis")
				a.BackupRoot = pulumi.String("/archives")
				a.WorldRoot = pulumi.String("/data/world")
				a.WorldClaimName = pulumi.String("survival-data")
				a.Deadline = pulumi.String("1h")
				a.CPULimit = pulumi.String("2")
				a.MemoryLimit = pulumi.String("2Gi")
				a.SecurityMode = new(SecurityMode("restricted"))
				a.RunAsUser = pulumi.Int(1001)
				a.RunAsGroup = pulumi.Int(1002)
				a.TTLAfterFinished = pulumi.String("90s")
				a.BackoffLimit = pulumi.Int(0)
				a.Compression, a.Format = new(Compression("gzip")), new(FormatTar)
				a.Excludes = pulumi.ToStringArray([]string{"*.jar"})
				a.NodeSelector = pulumi.ToStringMap(map[string]string{"kubernetes.io/hostname": "node-a"})
				a.Labels = pulumi.ToStringMap(map[string]string{"team": "ops"})
				a.Annotations = pulumi.ToStringMap(map[string]string{"note": "weekly"})
				a.SkipAwait = true
				a.Timeout = "2h"
				return a
			},
			want: func() jobspec.Backup {
				b := jobtest.DefaultBackup()
				b.FormerOwner = "Notch"
				b.Namespace = "games"
				b.ServiceAccountName = "backup-sa"
				b.ConfigSecretName = "felis-prod"
				b.ConfigMountPath = "/run/felis"
				b.BackupRoot = "/archives"
				b.WorldRoot = "/data/world"
				b.WorldClaimName = "survival-data"
				b.Deadline = time.Hour
				b.Resources = jobspec.Resources{CPULimit: k8sresource.MustParse("2"), MemoryLimit: k8sresource.MustParse("2Gi")}
				b.Identity = jobspec.Identity{Mode: jobspec.Restricted, RunAsUser: 1001, RunAsGroup: 1002, FSGroup: 1002}
				b.TTLAfterFinished = 90 * time.Second
				b.BackoffLimit = 0
				b.Compression, b.Format = "gzip", "tar"
				b.Excludes = []string{"*.jar"}
				b.Placement.NodeSelector = map[string]string{"kubernetes.io/hostname": "node-a"}
				b.Labels = map[string]string{"team": "ops"}
				b.Annotations = map[string]string{"note": "weekly"}
				b.Await = jobspec.Await{Skip: true}
				return b
			},
			wantTimeout: "2h0m0s",
			wantRef:     "/archives/survival/20250601-0300.tar.gz",
		},
		{
			name: "restricted defaults to the game's UID and GID",
			args: func() WorldBackupArgs {
				a := validArgs()
				a.SecurityMode = new(SecurityMode("restricted"))
				a.Compression, a.Format = new(Compression("none")), new(FormatTar)
				a.NodeName = pulumi.String("node-b")
				return a
			},
			want: func() jobspec.Backup {
				b := jobtest.DefaultBackup()
				b.Identity = jobspec.Identity{Mode: jobspec.Restricted, RunAsUser: 1000, RunAsGroup: 1000, FSGroup: 1000}
				b.Compression, b.Format = "none", "tar"
				b.Placement.NodeName = "node-b"
				return b
			},
			wantTimeout: "35m0s",
			wantRef:     "/backups/survival/20250601-0300.tar",
		},
		{
			name: "lifecycle inputs: no replaceUnready, required affinity to a custom game pod, a TTL",
			args: func() WorldBackupArgs {
				a := validArgs()
				a.ReplaceUnready = new(false)
				a.GamePodAffinity = pulumi.String("required")
				a.GamePodSelector = pulumi.ToStringMap(map[string]string{"app": "survival"})
				a.TTLAfterFinished = pulumi.String("1h")
				a.BackoffLimit = pulumi.Int(3)
				a.Preflight = new(false)
				a.KubeContext = "prod"
				return a
			},
			want: func() jobspec.Backup {
				b := jobtest.DefaultBackup()
				b.Await = jobspec.Await{}
				b.Placement = jobspec.Placement{GamePod: map[string]string{"app": "survival"}, GamePodAffinity: jobspec.AffinityRequired}
				b.TTLAfterFinished = time.Hour
				b.BackoffLimit = 3
				return b
			},
			wantTimeout: "35m0s",
			wantRef:     "/backups/_chunked/runs/survival/20250601-0300.manifest",
		},
		{
			name: "skipAwait turns replaceUnready off",
			args: func() WorldBackupArgs {
				a := validArgs()
				a.SkipAwait = true
				a.GamePodAffinity = pulumi.String("none")
				return a
			},
			want: func() jobspec.Backup {
				b := jobtest.DefaultBackup()
				b.Await = jobspec.Await{Skip: true}
				b.Placement.GamePodAffinity = jobspec.AffinityNone
				return b
			},
			wantTimeout: "35m0s",
			wantRef:     "/backups/_chunked/runs/survival/20250601-0300.manifest",
		},
		{
			name: "chunked given explicitly: archiveRef is the run's manifest, no compression passed",
			args: func() WorldBackupArgs {
				a := validArgs()
				a.Format = new(FormatChunked)
				return a
			},
			want: func() jobspec.Backup {
				b := jobtest.DefaultBackup()
				b.Format, b.Compression = "chunked", ""
				return b
			},
			wantTimeout: "35m0s",
			wantRef:     "/backups/_chunked/runs/survival/20250601-0300.manifest",
		},
		{
			name: "tar given explicitly",
			args: func() WorldBackupArgs {
				a := validArgs()
				a.Format = new(FormatTar)
				a.Compression = new(CompressionGzip)
				return a
			},
			want: func() jobspec.Backup {
				b := jobtest.DefaultBackup()
				b.Compression, b.Format = "gzip", "tar"
				return b
			},
			wantTimeout: "35m0s",
			wantRef:     "/backups/survival/20250601-0300.tar.gz",
		},
		{
			name: "baseline fsGroup 0 is omitted",
			args: func() WorldBackupArgs {
				a := validArgs()
				a.FSGroup = pulumi.Int(0)
				a.RunAsUser = pulumi.Int(0)
				return a
			},
			want:        jobtest.DefaultBackup,
			wantTimeout: "35m0s",
			wantRef:     "/backups/_chunked/runs/survival/20250601-0300.manifest",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got outputs
			var wg sync.WaitGroup
			m, err := runMocked(t, func(ctx *pulumi.Context) error {
				wb, err := NewWorldBackup(ctx, "backup", tt.args())
				if err != nil {
					return err
				}
				captureOutputs(&wg, &got, wb.JobName, wb.Namespace, wb.RunID, wb.ArchiveRef)
				return nil
			})
			if err != nil {
				t.Fatalf("NewWorldBackup: %v", err)
			}
			wg.Wait()

			checkOneJob(t, m, WorldBackupType, "backup", tt.wantTimeout, jobspec.BuildBackup(tt.want()))

			want := tt.want()
			wantOut := outputs{jobspec.BackupJobName(want.Server, want.RunID), want.Namespace, want.RunID, tt.wantRef}
			if got != wantOut {
				t.Fatalf("outputs = %+v, want %+v", got, wantOut)
			}
		})
	}
}

// TestWorldBackupInputsDecodeAsJob checks that the inputs the provider
// receives decode strictly as a batch/v1 Job equal to the builder's.
func TestWorldBackupInputsDecodeAsJob(t *testing.T) {
	m, err := runMocked(t, func(ctx *pulumi.Context) error {
		_, err := NewWorldBackup(ctx, "backup", validArgs())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got := decodeJob(t, m.ofType("kubernetes:batch/v1:Job")[0], true)
	want := jobspec.BuildBackup(jobtest.DefaultBackup())
	// Quantities compare by their canonical form.
	if !reflect.DeepEqual(jobtest.JSONObject(t, &got), jobtest.JSONObject(t, want)) {
		t.Fatalf("decoded Job differs from the builder's:\n%+v\n%+v", got, want)
	}
}

func TestWorldBackupMissingInputs(t *testing.T) {
	tests := []struct {
		name       string
		modify     func(a *WorldBackupArgs)
		wantInputs []string
		wantText   []string
	}{
		{"server", func(a *WorldBackupArgs) { a.Server = "" }, []string{"server"},
			[]string{"worldbackup: server is required: set it to the game server's name"}},
		{"runId", func(a *WorldBackupArgs) { a.RunID = pulumi.String("") }, []string{"runId"},
			[]string{"worldbackup: runId is required: set it to a unique ID of this run"}},
		{"image", func(a *WorldBackupArgs) { a.Image = pulumi.String("") }, []string{"image"},
			[]string{"worldbackup: image is required: set it to the archiver image, e.g. ghcr.io/"}},
		{"backupClaimName", func(a *WorldBackupArgs) { a.BackupClaimName = pulumi.String("") }, []string{"backupClaimName"},
			[]string{"worldbackup: backupClaimName is required: set it to the PersistentVolumeClaim"}},
		{"all at once", func(a *WorldBackupArgs) { *a = WorldBackupArgs{} }, []string{"server", "runId", "image", "backupClaimName"},
			[]string{"worldbackup: 4 invalid inputs:\n  - server is required", "\n  - backupClaimName is required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := validArgs()
			tt.modify(&args)
			checkInputError(t, args, tt.wantInputs, tt.wantText)
		})
	}
}

func TestWorldBackupInvalidInputs(t *testing.T) {
	tests := []struct {
		name       string
		modify     func(a *WorldBackupArgs)
		wantInputs []string
		wantText   string
	}{
		{"server not a label", func(a *WorldBackupArgs) { a.Server = "Survival_1" }, []string{"server"}, `server "Survival_1" is invalid`},
		{"server too long for the Job name", func(a *WorldBackupArgs) { a.Server = strings.Repeat("s", 47) }, []string{"server"}, "at most 46"},
		{"runId with slash", func(a *WorldBackupArgs) { a.RunID = pulumi.String("../x") }, []string{"runId"}, `runId "../x" is invalid`},
		{"runId too long", func(a *WorldBackupArgs) { a.RunID = pulumi.String(strings.Repeat("r", 129)) }, []string{"runId"}, "1 to 128 characters"},
		{"image with space", func(a *WorldBackupArgs) { a.Image = pulumi.String("ghcr.io/x y") }, []string{"image"}, "no spaces"},
		{"image with an upper-case repository", func(a *WorldBackupArgs) { a.Image = pulumi.String("ghcr.io/MyOrg/archiver:v1") }, []string{"image"}, "must be lowercase"},
		{"image with a placeholder left in", func(a *WorldBackupArgs) { a.Image = pulumi.String("ghcr.io/<you>/archiver:v1") }, []string{"image"}, "not an image reference the kubelet can pull"},
		{"image with an empty tag", func(a *WorldBackupArgs) { a.Image = pulumi.String("archiver:") }, []string{"image"}, "not an image reference the kubelet can pull"},
		{"runId latest", func(a *WorldBackupArgs) { a.RunID = pulumi.String("Latest") }, []string{"runId"}, "spelling of \"latest\""},
		{"configMountPath on the webhook folder", func(a *WorldBackupArgs) {
			a.ConfigMountPath = pulumi.String("/etc/felis-notify")
			a.Notify = &NotifyArgs{SecretName: "felis-notify", Key: "url"}
		}, []string{"configMountPath"}, "overlaps the webhook folder"},
		{"worldRoot under the RCON folder", func(a *WorldBackupArgs) {
			a.WorldRoot = pulumi.String("/etc/felis-rcon/world")
			a.Rcon = &RconArgs{}
		}, []string{"worldRoot"}, "overlaps the RCON password folder"},
		{"backupClaimName invalid", func(a *WorldBackupArgs) { a.BackupClaimName = pulumi.String("Backups!") }, []string{"backupClaimName"}, `backupClaimName "Backups!" is invalid`},
		{"namespace invalid", func(a *WorldBackupArgs) { a.Namespace = pulumi.String("mine.craft") }, []string{"namespace"}, `namespace "mine.craft" is invalid`},
		{"worldClaimName invalid", func(a *WorldBackupArgs) { a.WorldClaimName = pulumi.String("World") }, []string{"worldClaimName"}, "worldClaimName"},
		{"formerOwner with newline", func(a *WorldBackupArgs) { a.FormerOwner = pulumi.String("a\nb") }, []string{"formerOwner"}, "control characters"},
		{"relative worldRoot", func(a *WorldBackupArgs) { a.WorldRoot = pulumi.String("world") }, []string{"worldRoot"}, "absolute path"},
		{"unclean backupRoot", func(a *WorldBackupArgs) { a.BackupRoot = pulumi.String("/backups/") }, []string{"backupRoot"}, `clean form "/backups"`},
		{"root configMountPath", func(a *WorldBackupArgs) { a.ConfigMountPath = pulumi.String("/") }, []string{"configMountPath"}, "a folder of its own"},
		{"nested mounts", func(a *WorldBackupArgs) { a.BackupRoot = pulumi.String("/world/backups") }, []string{"worldRoot"}, `overlaps backupRoot`},
		{"mount on /tmp", func(a *WorldBackupArgs) { a.ConfigMountPath = pulumi.String("/tmp") }, []string{"configMountPath"}, "overlaps the scratch folder"},
		{"deadline not a duration", func(a *WorldBackupArgs) { a.Deadline = pulumi.String("30") }, []string{"deadline"}, `deadline "30" has no unit: give a duration like 30m (minutes) or 30s (seconds)`},
		{"deadline zero", func(a *WorldBackupArgs) { a.Deadline = pulumi.String("0s") }, []string{"deadline"}, "too short"},
		{"ttl negative", func(a *WorldBackupArgs) { a.TTLAfterFinished = pulumi.String("-1m") }, []string{"ttlAfterFinished"}, "too short"},
		{"ttl zero", func(a *WorldBackupArgs) { a.TTLAfterFinished = pulumi.String("0s") }, []string{"ttlAfterFinished"}, "at least 1s"},
		{"gamePodAffinity unknown", func(a *WorldBackupArgs) { a.GamePodAffinity = pulumi.String("always") }, []string{"gamePodAffinity"}, "use preferred"},
		{"gamePodAffinity required with nodeName", func(a *WorldBackupArgs) {
			a.GamePodAffinity = pulumi.String("required")
			a.NodeName = pulumi.String("n1")
		}, []string{"gamePodAffinity"}, "bypasses the scheduler"},
		{"gamePodAffinity required without selector", func(a *WorldBackupArgs) {
			a.GamePodAffinity = pulumi.String("required")
			a.GamePodSelector = pulumi.ToStringMap(map[string]string{})
		}, []string{"gamePodSelector"}, "is empty"},
		{"gamePodSelector bad value", func(a *WorldBackupArgs) { a.GamePodSelector = pulumi.ToStringMap(map[string]string{"app": "a b"}) }, []string{"gamePodSelector"}, `value "a b"`},
		{"replaceUnready with skipAwait", func(a *WorldBackupArgs) { a.SkipAwait = true; a.ReplaceUnready = new(true) }, []string{"replaceUnready"}, "still running"},
		{"annotation skipAwait reserved", func(a *WorldBackupArgs) {
			a.Annotations = pulumi.ToStringMap(map[string]string{"pulumi.com/skipAwait": "true"})
		}, []string{"annotations"}, "set by the component"},
		{"annotation waitFor refused", func(a *WorldBackupArgs) {
			a.Annotations = pulumi.ToStringMap(map[string]string{"pulumi.com/waitFor": "jsonpath={.metadata.name}"})
		}, []string{"annotations"}, `key "pulumi.com/waitFor" changes how the Kubernetes provider awaits or deletes the Job`},
		{"annotation deletionPropagationPolicy refused", func(a *WorldBackupArgs) {
			a.Annotations = pulumi.ToStringMap(map[string]string{"pulumi.com/deletionPropagationPolicy": "orphan"})
		}, []string{"annotations"}, `key "pulumi.com/deletionPropagationPolicy" changes how`},
		{"timeout below deadline", func(a *WorldBackupArgs) { a.Timeout = "10m" }, []string{"timeout"}, "shorter than deadline"},
		{"timeout not a duration", func(a *WorldBackupArgs) { a.Timeout = "soon" }, []string{"timeout"}, "is not a duration: give a number with a unit"},
		{"cpuLimit invalid", func(a *WorldBackupArgs) { a.CPULimit = pulumi.String("one") }, []string{"cpuLimit"}, "not a Kubernetes quantity"},
		{"memoryLimit zero", func(a *WorldBackupArgs) { a.MemoryLimit = pulumi.String("0") }, []string{"memoryLimit"}, "greater than zero"},
		{"memoryLimit in thousandths", func(a *WorldBackupArgs) { a.MemoryLimit = pulumi.String("512m") }, []string{"memoryLimit"},
			`memoryLimit "512m" is below the minimum 64Mi, which no run can work with: m means thousandths, so 512m is a fraction of a byte: write Mi or Gi, e.g. 512Mi or 2Gi`},
		{"memoryLimit in bytes", func(a *WorldBackupArgs) { a.MemoryLimit = pulumi.String("512") }, []string{"memoryLimit"}, "a plain number counts bytes: write Mi or Gi"},
		{"memoryLimit below the minimum", func(a *WorldBackupArgs) { a.MemoryLimit = pulumi.String("32Mi") }, []string{"memoryLimit"}, `"32Mi" is below the minimum 64Mi`},
		{"cpuLimit in thousandths", func(a *WorldBackupArgs) { a.CPULimit = pulumi.String("1m") }, []string{"cpuLimit"},
			`cpuLimit "1m" is below the minimum 100m, which no run can work with: m means thousandths of a CPU: write 1 for one CPU`},
		{"cpuLimit below the minimum", func(a *WorldBackupArgs) { a.CPULimit = pulumi.String("0.05") }, []string{"cpuLimit"}, "below the minimum 100m"},
		{"runId naming a scheduled run's Job", func(a *WorldBackupArgs) { a.Server, a.RunID = "a", pulumi.String("sched-29412345") }, []string{"runId"},
			`runId "sched-29412345" names the Job a-backup-sched-29412345, which has the form of a scheduled run's Job`},
		{"runId naming a scheduled verify's Job", func(a *WorldBackupArgs) { a.RunID = pulumi.String("nightly-vsched-29412345") }, []string{"runId"},
			"survival-backup-nightly-vsched-29412345"},
		{"worldRoot over the archiver binary", func(a *WorldBackupArgs) { a.WorldRoot = pulumi.String("/usr/local/bin") }, []string{"worldRoot"},
			`worldRoot "/usr/local/bin" would hide /usr/local/bin/archiver, which the archiver's container needs`},
		{"worldRoot over /usr", func(a *WorldBackupArgs) { a.WorldRoot = pulumi.String("/usr") }, []string{"worldRoot"}, "would hide /usr/local/bin/archiver"},
		{"backupRoot over the CA bundle", func(a *WorldBackupArgs) { a.BackupRoot = pulumi.String("/etc") }, []string{"backupRoot"}, "would hide /etc/ssl/certs/ca-certificates.crt"},
		{"worldRoot below /proc", func(a *WorldBackupArgs) { a.WorldRoot = pulumi.String("/proc/world") }, []string{"worldRoot"}, `"/proc/world" would hide /proc`},
		{"configMountPath below /dev", func(a *WorldBackupArgs) { a.ConfigMountPath = pulumi.String("/dev/felis") }, []string{"configMountPath"}, "would hide /dev"},
		{"securityMode unknown", func(a *WorldBackupArgs) { a.SecurityMode = new(SecurityMode("privileged")) }, []string{"securityMode"}, "use baseline"},
		{"restricted as root", func(a *WorldBackupArgs) {
			a.SecurityMode = new(SecurityMode("restricted"))
			a.RunAsUser = pulumi.Int(0)
		}, []string{"runAsUser"}, "forbids"},
		{"restricted without fsGroup", func(a *WorldBackupArgs) { a.SecurityMode = new(SecurityMode("restricted")); a.FSGroup = pulumi.Int(0) }, []string{"fsGroup"}, "config Secret"},
		{"restricted group 0", func(a *WorldBackupArgs) {
			a.SecurityMode = new(SecurityMode("restricted"))
			a.RunAsGroup = pulumi.Int(0)
		}, []string{"runAsGroup"}, "fsGroup defaults to 0"},
		{"negative runAsGroup", func(a *WorldBackupArgs) { a.RunAsGroup = pulumi.Int(-1) }, []string{"runAsGroup"}, "out of range"},
		{"negative backoffLimit", func(a *WorldBackupArgs) { a.BackoffLimit = pulumi.Int(-1) }, []string{"backoffLimit"}, "out of range"},
		{"compression unknown", func(a *WorldBackupArgs) { a.Compression = new(Compression("xz")) }, []string{"compression"}, `compression "xz" is not supported`},
		{"format unknown", func(a *WorldBackupArgs) { a.Format = new(Format("zip")) }, []string{"format"}, `format "zip" is not supported: use chunked or tar`},
		{"compression with chunked", func(a *WorldBackupArgs) {
			a.Format = new(FormatChunked)
			a.Compression = new(CompressionZstd)
		}, []string{"compression"}, "but format is chunked: compression is a setting of the tar format: chunked compresses each blob with zstd when that helps: remove compression, or set format to tar"},
		{"compression without format: chunked, the default", func(a *WorldBackupArgs) {
			a.Compression = new(CompressionGzip)
		}, []string{"compression"}, `compression is set to "gzip", but format is not set, so it is chunked, the default`},
		{"empty exclude", func(a *WorldBackupArgs) { a.Excludes = pulumi.ToStringArray([]string{"*.jar", ""}) }, []string{"excludes"}, "item 1 is empty"},
		{"exclude not a glob", func(a *WorldBackupArgs) { a.Excludes = pulumi.ToStringArray([]string{"*.jar", "[abc"}) }, []string{"excludes"}, `item 1: exclude pattern "[abc" is not a glob`},
		{"exclude only a slash", func(a *WorldBackupArgs) { a.Excludes = pulumi.ToStringArray([]string{"/"}) }, []string{"excludes"}, `item 0: exclude pattern "/" matches nothing`},
		{"exclude only dot slash", func(a *WorldBackupArgs) { a.Excludes = pulumi.ToStringArray([]string{"./"}) }, []string{"excludes"}, `exclude pattern "./" matches nothing`},
		{"nodeName and nodeSelector", func(a *WorldBackupArgs) {
			a.NodeName = pulumi.String("n1")
			a.NodeSelector = pulumi.ToStringMap(map[string]string{"zone": "a"})
		}, []string{"nodeName"}, "set only one"},
		{"nodeSelector bad value", func(a *WorldBackupArgs) { a.NodeSelector = pulumi.ToStringMap(map[string]string{"zone": "a b"}) }, []string{"nodeSelector"}, `value "a b"`},
		{"label reserved", func(a *WorldBackupArgs) {
			a.Labels = pulumi.ToStringMap(map[string]string{"app.kubernetes.io/name": "x"})
		}, []string{"labels"}, "set by the component"},
		{"label value invalid", func(a *WorldBackupArgs) {
			a.Labels = pulumi.ToStringMap(map[string]string{"team": strings.Repeat("x", 64)})
		}, []string{"labels"}, "value"},
		{"label key invalid", func(a *WorldBackupArgs) { a.Labels = pulumi.ToStringMap(map[string]string{"bad key": "x"}) }, []string{"labels"}, `key "bad key"`},
		{"annotation reserved", func(a *WorldBackupArgs) {
			a.Annotations = pulumi.ToStringMap(map[string]string{"worldbackup.dev/run-id": "x"})
		}, []string{"annotations"}, "set by the component"},
		{"rcon bad address", func(a *WorldBackupArgs) { a.Rcon = &RconArgs{Address: pulumi.String("survival")} }, []string{"rcon.address"}, "want host:port"},
		{"rcon bad port", func(a *WorldBackupArgs) { a.Rcon = &RconArgs{Address: pulumi.String("survival:99999")} }, []string{"rcon.address"}, "1 to 65535"},
		{"rcon port not a number", func(a *WorldBackupArgs) { a.Rcon = &RconArgs{Address: pulumi.String("127.0.0.1:abc")} }, []string{"rcon.address"}, "1 to 65535"},
		{"concurrency zero", func(a *WorldBackupArgs) { a.Concurrency = new(0) }, []string{"concurrency"}, "from 1 to 1000"},
		{"concurrency too high", func(a *WorldBackupArgs) { a.Concurrency = new(1001) }, []string{"concurrency"}, "is 1001"},
		{"concurrency with skipAwait", func(a *WorldBackupArgs) { a.Concurrency = new(2); a.SkipAwait = true }, []string{"concurrency"}, "waits for none"},
		{"concurrency without the preflight", func(a *WorldBackupArgs) { a.Concurrency = new(2); a.Preflight = new(false) }, []string{"concurrency"}, "needs the preflight"},
		{"rcon bad secret key", func(a *WorldBackupArgs) { a.Rcon = &RconArgs{SecretKey: pulumi.String("a/b")} }, []string{"rcon.secretKey"}, "not a valid Secret key"},
		{"rcon secret key dot-dot", func(a *WorldBackupArgs) { a.Rcon = &RconArgs{SecretKey: pulumi.String("..")} }, []string{"rcon.secretKey"}, `rcon.secretKey ".." is not a valid Secret key (must not be '..')`},
		{"encryption secret key dot", func(a *WorldBackupArgs) {
			a.Encryption = &EncryptionArgs{SecretName: pulumi.String("survival-encryption"), SecretKey: pulumi.String(".")}
		}, []string{"encryption.secretKey"}, `encryption.secretKey "." is not a valid Secret key (must not be '.')`},
		{"retention without rule", func(a *WorldBackupArgs) { a.Retention = &RetentionArgs{MinKeep: pulumi.Int(2)} }, []string{"retention"}, "no keep rule"},
		{"retention without floor", func(a *WorldBackupArgs) { a.Retention = &RetentionArgs{KeepLast: pulumi.Int(2)} }, []string{"retention.minKeep"}, "at least 1"},
		{"retention bad within", func(a *WorldBackupArgs) {
			a.Retention = &RetentionArgs{KeepWithin: pulumi.String("3 days"), MinKeep: pulumi.Int(1)}
		}, []string{"retention.keepWithin"}, "not a duration"},
		{"retention zero grace", func(a *WorldBackupArgs) {
			a.Retention = &RetentionArgs{KeepLast: pulumi.Int(1), MinKeep: pulumi.Int(1), Grace: pulumi.String("0h")}
		}, []string{"retention.grace"}, "positive"},
		{"retention grace below the deadline", func(a *WorldBackupArgs) {
			a.Deadline = pulumi.String("2h")
			a.Retention = &RetentionArgs{KeepLast: pulumi.Int(1), MinKeep: pulumi.Int(1), Grace: pulumi.String("30m")}
		}, []string{"retention.grace"}, `retention.grace "30m" is shorter than deadline 2h: a prune could remove what a backup still running has written (it keeps only what is younger than grace); set the grace to at least 2h, or shorten deadline`},
		{"retention default grace below the deadline", func(a *WorldBackupArgs) {
			a.Deadline = pulumi.String("90m")
			a.Retention = &RetentionArgs{KeepLast: pulumi.Int(1), MinKeep: pulumi.Int(1)}
		}, []string{"retention.grace"}, "retention.grace (not set: the default 1h) is shorter than deadline 1h30m"},
		{"several problems listed together", func(a *WorldBackupArgs) {
			a.Image = pulumi.String("")
			a.Compression = new(Compression("xz"))
			a.Deadline = pulumi.String("forever")
		}, []string{"image", "deadline", "compression"}, "3 invalid inputs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := validArgs()
			tt.modify(&args)
			checkInputError(t, args, tt.wantInputs, []string{tt.wantText})
		})
	}
}

// checkInputError runs NewWorldBackup on args under mocks and checks that it
// fails with exactly wantInputs, messages containing wantText, and that
// nothing was registered.
func checkInputError(t *testing.T, args WorldBackupArgs, wantInputs, wantText []string) {
	t.Helper()
	checkComponentInputError(t, args.Validate, func(ctx *pulumi.Context) error {
		_, err := NewWorldBackup(ctx, "backup", args)
		return err
	}, wantInputs, wantText)
}

func TestWorldBackupValidArgs(t *testing.T) {
	if err := validArgs().Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	for _, tt := range []struct {
		name   string
		modify func(a *WorldBackupArgs)
	}{
		{"limits at their minimums", func(a *WorldBackupArgs) { a.MemoryLimit, a.CPULimit = pulumi.String("64Mi"), pulumi.String("100m") }},
		{"limits in other units", func(a *WorldBackupArgs) { a.MemoryLimit, a.CPULimit = pulumi.String("1G"), pulumi.String("0.5") }},
		{"retention grace equal to the deadline", func(a *WorldBackupArgs) {
			a.Deadline = pulumi.String("2h")
			a.Retention = &RetentionArgs{KeepLast: pulumi.Int(1), MinKeep: pulumi.Int(1), Grace: pulumi.String("2h")}
		}},
		{"excludes of every form", func(a *WorldBackupArgs) {
			a.Excludes = pulumi.ToStringArray([]string{"*.jar", "cache/", "/logs/", "./region/r.[0-9]*.mca"})
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := validArgs()
			tt.modify(&a)
			if err := a.Validate(); err != nil {
				t.Fatalf("Validate() = %v", err)
			}
		})
	}
}

func TestWorldBackupTwoServers(t *testing.T) {
	var a, b outputs
	var wg sync.WaitGroup
	m, err := runMocked(t, func(ctx *pulumi.Context) error {
		for _, s := range []struct {
			server string
			into   *outputs
		}{{"survival", &a}, {"creative", &b}} {
			args := validArgs()
			args.Server = s.server
			wb, err := NewWorldBackup(ctx, s.server, args)
			if err != nil {
				return err
			}
			captureOutputs(&wg, s.into, wb.JobName, wb.Namespace, wb.RunID, wb.ArchiveRef)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	jobs := m.ofType("kubernetes:batch/v1:Job")
	if len(jobs) != 2 {
		t.Fatalf("Jobs = %d, want 2", len(jobs))
	}
	names := map[string]bool{}
	claims := map[string]bool{}
	for _, j := range jobs {
		job := decodeJob(t, j, false)
		names[job.Name] = true
		claims[job.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName] = true
		if !strings.HasSuffix(j.RegisterRPC.GetParent(), "::"+strings.TrimSuffix(j.Name, "-job")) {
			t.Fatalf("Job %q has parent %q", j.Name, j.RegisterRPC.GetParent())
		}
	}
	if !names["survival-backup-20250601-0300"] || !names["creative-backup-20250601-0300"] {
		t.Fatalf("Job names = %v", names)
	}
	if !claims["world-survival-0"] || !claims["world-creative-0"] {
		t.Fatalf("world claims = %v", claims)
	}
	if a.jobName == b.jobName || a.archiveRef == b.archiveRef {
		t.Fatalf("outputs collide: %+v and %+v", a, b)
	}
	if b.archiveRef != "/backups/_chunked/runs/creative/20250601-0300.manifest" {
		t.Fatalf("archiveRef = %q", b.archiveRef)
	}
}

func TestWorldBackupExplicitProvider(t *testing.T) {
	checkExplicitProvider(t, &kubernetes.ProviderArgs{Namespace: pulumi.String("minecraft")}, func(ctx *pulumi.Context, opts ...pulumi.ResourceOption) error {
		_, err := NewWorldBackup(ctx, "backup", validArgs(), opts...)
		return err
	})
}

// TestWorldBackupTwoClusters is the multi-cluster case: one program, two
// providers, each Job on its own cluster.
func TestWorldBackupTwoClusters(t *testing.T) {
	m, err := runMocked(t, func(ctx *pulumi.Context) error {
		for _, c := range []string{"east", "west"} {
			p, err := kubernetes.NewProvider(ctx, c, &kubernetes.ProviderArgs{})
			if err != nil {
				return err
			}
			if _, err := NewWorldBackup(ctx, "backup-"+c, validArgs(), pulumi.Provider(p)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, j := range m.ofType("kubernetes:batch/v1:Job") {
		got[j.Name] = j.Provider
	}
	want := map[string]string{
		"backup-east-job": "urn:pulumi:stack::project::pulumi:providers:kubernetes::east::east-id",
		"backup-west-job": "urn:pulumi:stack::project::pulumi:providers:kubernetes::west::west-id",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Job providers = %v, want %v", got, want)
	}
}

// TestWorldBackupOutputsDependOnJob checks that a resource taking archiveRef
// depends on the Job, so it waits for the backup during `pulumi up`.
func TestWorldBackupOutputsDependOnJob(t *testing.T) {
	m, err := runMocked(t, func(ctx *pulumi.Context) error {
		wb, err := NewWorldBackup(ctx, "backup", validArgs())
		if err != nil {
			return err
		}
		var consumer pulumi.CustomResourceState
		return ctx.RegisterResource("test:index:Consumer", "consumer", pulumi.Map{"ref": wb.ArchiveRef}, &consumer)
	})
	if err != nil {
		t.Fatal(err)
	}
	consumers := m.ofType("test:index:Consumer")
	if len(consumers) != 1 {
		t.Fatalf("consumers = %d, want 1", len(consumers))
	}
	rpc := consumers[0].RegisterRPC
	const jobURN = "urn:pulumi:stack::project::worldbackup:index:WorldBackup$kubernetes:batch/v1:Job::backup-job"
	if deps := rpc.GetPropertyDependencies()["ref"].GetUrns(); !slices.Contains(deps, jobURN) {
		t.Fatalf("ref depends on %q, want %q among them", deps, jobURN)
	}
	if got := consumers[0].Inputs["ref"].StringValue(); got != "/backups/_chunked/runs/survival/20250601-0300.manifest" {
		t.Fatalf("ref = %q", got)
	}
}

func TestWorldBackupRconAndRetention(t *testing.T) {
	tests := []struct {
		name string
		rcon *RconArgs
		want jobspec.Rcon
	}{
		{"defaults from the server", &RconArgs{}, jobspec.Rcon{Address: "survival:25575", SecretName: "survival-rcon", SecretKey: "rcon-password", Required: true}},
		{"itzg chart release", &RconArgs{ChartRelease: pulumi.String("mc")}, jobspec.Rcon{Address: "mc-minecraft-rcon:25575", SecretName: "mc-minecraft-rcon", SecretKey: "rcon-password", Required: true}},
		{"explicit, not required", &RconArgs{Address: pulumi.String("10.0.0.5:25576"), SecretName: pulumi.String("pw"), SecretKey: pulumi.String("password"), Required: pulumi.Bool(false)},
			jobspec.Rcon{Address: "10.0.0.5:25576", SecretName: "pw", SecretKey: "password"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := validArgs()
			args.Rcon = tt.rcon
			args.Retention = &RetentionArgs{KeepDaily: pulumi.Int(7), MinKeep: pulumi.Int(3)}
			r, err := args.resolve()
			if err != nil {
				t.Fatal(err)
			}
			if r.Job.Rcon == nil || *r.Job.Rcon != tt.want {
				t.Fatalf("rcon %+v, want %+v", r.Job.Rcon, tt.want)
			}
			if r.Job.Retention == nil || r.Job.Retention.KeepDaily != 7 || r.Job.Retention.MinKeep != 3 {
				t.Fatalf("retention %+v", r.Job.Retention)
			}
		})
	}
	r, err := validArgs().resolve()
	if err != nil || r.Job.Rcon != nil || r.Job.Retention != nil {
		t.Fatalf("without the inputs: rcon %v retention %v err %v; want neither", r.Job.Rcon, r.Job.Retention, err)
	}
}
