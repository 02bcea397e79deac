package provider

import (
	"path"
	"strings"
	"time"
	"unicode"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// DefaultReplace is the default of WorldRestore's replace input: restoring
// over the existing world is what a restore is for.
const DefaultReplace = true

// maxMaxBytes is the largest maxBytes accepted (an int64 holds 8 Ei);
// minMaxBytes the smallest: a world holds at least level.dat and a region,
// and a smaller bound (500m is half a byte) refuses every archive as a
// bomb.
var (
	maxMaxBytes = resource.MustParse("1Ei")
	minMaxBytes = resource.MustParse("1Mi")
)

// maxMaxEntries is the largest maxEntries accepted.
const maxMaxEntries = 1 << 40

// WorldRestoreArgs are the inputs of a WorldRestore: those of every Job
// (JobInputs) and the restore's own. The same struct serves Go programs and
// the component-provider plugin. A value of the Job is a Pulumi input, so
// another resource's output can be passed (a WorldBackup's ArchiveRef, a
// secret sha256); nil (or "") takes the default documented on each field
// (see Annotate).
type WorldRestoreArgs struct {
	JobInputs
	ArchiveRef pulumi.StringInput `pulumi:"archiveRef,optional"`
	SHA256     pulumi.StringInput `pulumi:"sha256,optional"`
	// ByRunInputs restore a recorded run (a run ID, or latest) in place of
	// ArchiveRef and SHA256: the Job's init container finds it in the
	// catalog through the config Secret.
	ByRunInputs
	Replace    pulumi.BoolInput   `pulumi:"replace,optional"`
	MaxBytes   pulumi.StringInput `pulumi:"maxBytes,optional"`
	MaxEntries pulumi.IntInput    `pulumi:"maxEntries,optional"`
	// Store is the S3 store archiveRef is in, in place of the backup claim;
	// whether it is set is plain (it decides the Job's volumes), its
	// settings are inputs.
	Store *StoreArgs `pulumi:"store,optional"`
	// Encryption is the Secret key of the age identity an encrypted
	// archive is read with; whether it is set is plain.
	Encryption *EncryptionArgs `pulumi:"encryption,optional"`

	// sha256FromOutput: the sha256 given is another resource's output (a
	// WorldBackup's), set by NewWorldRestore, so that an empty one says why.
	sha256FromOutput bool
}

// Validate reports every missing or invalid input of a (after defaults) in
// one *InputError, each problem naming the input and the fix; nil when a is
// valid. NewWorldRestore calls it before registering anything.
func (a WorldRestoreArgs) Validate() error {
	_, err := a.Job()
	return err
}

// Job returns the restore Job builder's arguments of a: its inputs with their
// defaults, validated (the same *InputError as Validate).
func (a WorldRestoreArgs) Job() (jobspec.Restore, error) {
	a, err := settleSync("worldrestore", a)
	if err != nil {
		return jobspec.Restore{}, err
	}
	r, err := a.resolve()
	return r.Job, err
}

// resolve applies the defaults, validates and returns the Job builder's
// arguments and the Pulumi timeout.
func (a WorldRestoreArgs) resolve() (resolvedRestore, error) {
	w := a.JobInputs.worldPaths()
	p := &problems{component: "worldrestore"}
	archiveRef, sum, maxBytesIn := str(a.ArchiveRef), str(a.SHA256), str(a.MaxBytes)
	replace := optBool(a.Replace)
	if replace == nil {
		replace = new(DefaultReplace)
	}

	p.server("server", a.Server, jobapi.KindRestore)
	p.runID("runId", a.Server, jobapi.KindRestore, str(a.RunID))
	rules := jobRules{run: "restore", baselineCaps: "CHOWN, DAC_OVERRIDE and FOWNER"}
	if a.Encryption != nil {
		rules.fsGroupNeed = fsGroupForEncryptionSecret
	}
	byRun, mounts := p.byRun(jobapi.KindRestore, a.ByRunInputs.values(), archiveRef, sum, &rules, mount{"worldRoot", w.WorldRoot})
	if byRun.FromRun == "" {
		if sum == "" && a.sha256FromOutput {
			p.addf("sha256", "is empty, and it is another resource's output: a WorldBackup's sha256 is empty when no cluster "+
				"reported its run (the Kubernetes provider renders, preflight is false or skipAwait is set), so there is no "+
				"checksum to check the archive against. Give the checksum of a recorded run instead (the sha256 column of "+
				"`archiver list --server %s --json`), or declare this restore once that backup has run on a cluster", a.Server)
		} else {
			p.sha256("sha256", sum)
		}
	}
	// Without fromRun the restore needs no config Secret, so restricted
	// mode needs no fsGroup, but for the encryption Secret or the S3
	// credentials Secret (common adds that need).
	j, store := p.common(a.JobInputs, a.Store, storeObject, w, rules)
	enc := a.Encryption.resolve(p)
	p.mountPaths(notifyMounts(j, encryptionMounts(enc, storeMounts(store, w.BackupRoot, mounts...)))...)
	if byRun.FromRun == "" {
		p.archiveIn("archiveRef", archiveRef, store, w.BackupRoot)
		p.encryptedNeedsKey("archiveRef", archiveRef, enc)
	}
	var maxBytes int64
	if maxBytesIn != "" {
		if q, ok := p.quantityAtLeast("maxBytes", maxBytesIn, "64Gi or 500Mi", minMaxBytes); ok {
			if q.Cmp(maxMaxBytes) > 0 {
				p.addf("maxBytes", "%q is too large: use at most 1Ei", maxBytesIn)
			}
			maxBytes = q.Value()
		}
	}
	var maxEntries int64
	if n := optInt(a.MaxEntries); n != nil {
		if *n < 1 || *n > maxMaxEntries {
			p.addf("maxEntries", "%d is out of range: use 1 to %d, or leave it unset for the archiver's default (%d)", *n, maxMaxEntries, jobapi.DefaultMaxEntries)
		}
		maxEntries = int64(*n)
	}

	if err := p.err(); err != nil {
		return resolvedRestore{}, err
	}
	return resolvedRestore{
		Job: jobspec.Restore{
			Job:        a.job(j, w),
			ArchiveRef: archiveRef,
			SHA256:     sum,
			Replace:    *replace,
			MaxBytes:   maxBytes,
			MaxEntries: maxEntries,
			Store:      store,
			Encryption: enc,
			ByRun:      byRun,
		},
		Timeout:   j.Timeout,
		Preflight: j.Preflight,
	}, nil
}

// ByRunInputs are the inputs of a restore or a verify by run: FromRun, a
// run ID or latest of FromServer (default: the server), which the Job's
// init container resolves through the config Secret ConfigSecretName
// mounted at ConfigMountPath.
type ByRunInputs struct {
	FromRun          pulumi.StringInput `pulumi:"fromRun,optional"`
	FromServer       pulumi.StringInput `pulumi:"fromServer,optional"`
	ConfigSecretName pulumi.StringInput `pulumi:"configSecretName,optional"`
	ConfigMountPath  pulumi.StringInput `pulumi:"configMountPath,optional"`
}

// values are b's values, as given.
func (b ByRunInputs) values() jobspec.ByRun {
	return jobspec.ByRun{FromRun: str(b.FromRun), FromServer: str(b.FromServer),
		ConfigSecretName: str(b.ConfigSecretName), ConfigMountPath: str(b.ConfigMountPath)}
}

// byRun checks the inputs of a restore or verify (kind) by run, in, against
// the archive it was given (archiveRef and sum): with fromRun, neither may
// be set, the config Secret and its mount take their defaults, and rules
// need the fsGroup that lets the init container read the Secret; without
// it, the other by-run inputs may not be set. It returns the settled
// by-run arguments and mounts with the by-run Job's own added.
func (p *problems) byRun(kind string, in jobspec.ByRun, archiveRef, sum string, rules *jobRules, mounts ...mount) (jobspec.ByRun, []mount) {
	if in.FromRun == "" {
		for _, v := range []struct{ input, v string }{{"fromServer", in.FromServer}, {"configSecretName", in.ConfigSecretName}, {"configMountPath", in.ConfigMountPath}} {
			if v.v != "" {
				p.addf(v.input, "is set, but fromRun is not: it is used only by a %s by run (fromRun: a run ID or %s); set fromRun, or remove %s", kind, jobapi.RunLatest, v.input)
			}
		}
		return in, mounts
	}
	// The init container reads the config Secret: restricted mode needs
	// the fsGroup that lets it (the same as the encryption Secret's).
	rules.fsGroupNeed = fsGroupForSecret
	setDefault(&in.ConfigSecretName, DefaultConfigSecretName)
	setDefault(&in.ConfigMountPath, DefaultConfigMountPath)
	if err := jobapi.CheckRunRef(in.FromRun); err != nil {
		p.addf("fromRun", "%s", err)
	}
	// fromServer names no Job, only the server whose run is looked up:
	// the archiver's rule of a server name, not the Job name's.
	if in.FromServer != "" && jobapi.CheckServer(in.FromServer) != nil {
		p.addf("fromServer", "%q is invalid: use the name of a backed-up server, at most %d lowercase letters, digits and '-', starting and ending with a letter or digit",
			in.FromServer, jobapi.MaxServerLen)
	}
	p.dnsSubdomain("configSecretName", in.ConfigSecretName)
	mounts = append(mounts, mount{"configMountPath", in.ConfigMountPath}, mount{"the resolved-run folder", jobapi.ResolvedMountPath})
	for _, v := range []struct{ input, v string }{{"archiveRef", archiveRef}, {"sha256", sum}} {
		if v.v != "" {
			p.addf(v.input, "is set, but so is fromRun %q, whose archive and checksum the catalog gives: remove %s, or remove fromRun to %s this archive", in.FromRun, v.input, kind)
		}
	}
	return in, mounts
}

// resolvedRestore is a validated WorldRestore: the Job builder's arguments
// and the Pulumi create/update timeout.
type resolvedRestore struct {
	Job       jobspec.Restore
	Timeout   time.Duration
	Preflight preflightSettings
}

// sha256 checks a required SHA-256 in lowercase hex.
func (p *problems) sha256(input, sum string) {
	if !p.required(input, sum, "set it to the archive's SHA-256 as the catalog recorded it (the sha256 column of `archiver list`): 64 lowercase hex digits; or restore by run instead: set fromRun to a run ID or "+jobapi.RunLatest+" and remove archiveRef") {
		return
	}
	switch lower := strings.ToLower(sum); {
	case jobapi.IsSHA256(sum):
	case jobapi.IsSHA256(lower):
		p.addf(input, "%q has upper-case letters: use the lower-case form %q", sum, lower)
	default:
		p.addf(input, "%q is not a SHA-256: use 64 hex digits (0-9, a-f), as the sha256 column of `archiver list` shows it", sum)
	}
}

// archiveIn checks the archive ref given as input: with store an s3:// URL
// in that store, else a path under the backup claim's root (an s3:// URL
// without store says to set store).
func (p *problems) archiveIn(input, ref string, store *jobspec.S3Store, root string) {
	switch {
	case store != nil:
		if p.required(input, ref, "set it to the archive's s3:// URL: a WorldBackup's archiveRef output or the archive_ref column of `archiver list`") {
			p.s3ArchiveRef(input, ref, store.URL)
		}
	case strings.HasPrefix(ref, "s3://"):
		p.addf(input, "%q is in an S3 store, but store is not set: set store (its endpoint, region, pathStyle and credentialsSecretName) so the Job can read it", ref)
	default:
		p.archiveRef(input, ref, root)
	}
}

// archiveRef checks a required archive path: absolute, clean and strictly
// under root, where the Job mounts the backup claim (when root itself is a
// valid mount path; mountPaths reports it otherwise).
func (p *problems) archiveRef(input, ref, root string) {
	rootOK := strings.HasPrefix(root, "/") && root != "/" && path.Clean(root) == root
	const example = "/backups/survival/2025-06-01T0300Z.tar.zst"
	if !p.required(input, ref, "set it to the archive's path in the pod, under backupRoot: a WorldBackup's archiveRef output or the archive_ref column of `archiver list`, e.g. "+example+"; or restore by run instead: set fromRun to a run ID or "+jobapi.RunLatest) {
		return
	}
	switch {
	case !strings.HasPrefix(ref, "/"):
		p.addf(input, "%q is invalid: use the absolute path of the archive in the pod, under backupRoot, e.g. %s", ref, example)
	case path.Clean(ref) != ref:
		p.addf(input, "%q is invalid: use the clean form %q", ref, path.Clean(ref))
	case strings.IndexFunc(ref, unicode.IsControl) >= 0:
		p.addf(input, "%q is invalid: remove control characters (newlines, tabs, NUL)", ref)
	case rootOK && !strings.HasPrefix(ref, root+"/"):
		p.addf(input, "%q is not under backupRoot %q, where the Job mounts the backup claim: give the archive's path below it (e.g. %s/survival/<runId>.tar.zst), or set backupRoot to the mount path the backup ran with",
			ref, root, root)
	}
}
