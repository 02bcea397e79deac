package provider

import (
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// DefaultCompression is the default of the compression input, the
// archiver's.
const DefaultCompression = jobapi.DefaultCompression

// DefaultFormat is the default of the format input, the archiver's.
const DefaultFormat = jobapi.DefaultFormat

// WorldBackupArgs are the inputs of a WorldBackup: those of every Job
// (JobInputs) and the backup's own. The same struct serves Go programs and
// the component-provider plugin. A value of the Job is a Pulumi input, so
// another resource's output can be passed; nil (or "") takes the default
// documented on each field (see Annotate).
type WorldBackupArgs struct {
	JobInputs
	FormerOwner      pulumi.StringInput      `pulumi:"formerOwner,optional"`
	ConfigSecretName pulumi.StringInput      `pulumi:"configSecretName,optional"`
	ConfigMountPath  pulumi.StringInput      `pulumi:"configMountPath,optional"`
	Compression      *Compression            `pulumi:"compression,optional"`
	Format           *Format                 `pulumi:"format,optional"`
	Excludes         pulumi.StringArrayInput `pulumi:"excludes,optional"`
	Rcon             *RconArgs               `pulumi:"rcon,optional"`
	Retention        *RetentionArgs          `pulumi:"retention,optional"`
	// Store is the S3 store in place of the backup claim; whether it is set
	// is plain (it decides the Job's volumes), its settings are inputs.
	Store *StoreArgs `pulumi:"store,optional"`
	// Encryption is the Secret key of the age identity the archive is
	// encrypted to; whether it is set is plain (it decides the Job's
	// volumes and the archive's name).
	Encryption *EncryptionArgs `pulumi:"encryption,optional"`
	// Concurrency caps how many of the program's backups on the same
	// cluster run at once (see Gate); plain: it decides how the Job is
	// created. Every backup on a cluster that sets it must set the same.
	Concurrency *int `pulumi:"concurrency,optional"`
	// Gates are the program's concurrency caps, shared by all its backups:
	// needed with Concurrency. Go programs only (the plugin sets its own):
	// it has no pulumi tag, so it is no input of the plugin.
	Gates *Gates
}

// backupValues are the settled inputs of a WorldBackup that only it has, as
// plain values with their defaults.
type backupValues struct {
	FormerOwner, ConfigSecretName, ConfigMountPath, Compression, Format string
	Excludes                                                            []string
	World                                                               worldPaths
	// CompressionSet: the compression input is given (not the default).
	CompressionSet bool
}

// values returns the settled inputs of a that only WorldBackup has, and the
// world paths, with their defaults.
func (a WorldBackupArgs) values() backupValues {
	v := backupValues{
		FormerOwner:      str(a.FormerOwner),
		ConfigSecretName: str(a.ConfigSecretName),
		ConfigMountPath:  str(a.ConfigMountPath),
		Compression:      enumString(a.Compression),
		Format:           enumString(a.Format),
		Excludes:         strs(a.Excludes),
		World:            a.JobInputs.worldPaths(),
	}
	v.CompressionSet = v.Compression != ""
	setDefault(&v.ConfigSecretName, DefaultConfigSecretName)
	setDefault(&v.ConfigMountPath, DefaultConfigMountPath)
	setDefault(&v.Compression, DefaultCompression)
	setDefault(&v.Format, DefaultFormat)
	return v
}

// Validate reports every missing or invalid input of a (after defaults) in
// one *InputError, each problem naming the input and the fix; nil when a is
// valid. NewWorldBackup calls it before registering anything.
func (a WorldBackupArgs) Validate() error {
	_, err := a.Job()
	return err
}

// Job returns the backup Job builder's arguments of a: its inputs with their
// defaults, validated (the same *InputError as Validate).
func (a WorldBackupArgs) Job() (jobspec.Backup, error) {
	a, err := settleSync("worldbackup", a)
	if err != nil {
		return jobspec.Backup{}, err
	}
	r, err := a.resolve()
	return r.Job, err
}

// resolve applies the defaults, validates and returns the Job builder's
// arguments and the Pulumi timeout.
func (a WorldBackupArgs) resolve() (resolvedBackup, error) {
	v := a.values()
	p := &problems{component: "worldbackup"}
	runID := str(a.RunID)

	p.server("server", a.Server, jobapi.KindBackup)
	p.runID("runId", a.Server, jobapi.KindBackup, runID)
	if err := jobapi.CheckFormerOwner(v.FormerOwner); err != nil {
		p.addf("formerOwner", "is invalid: %s", err)
	}
	j, store := p.common(a.JobInputs, a.Store, storeWhole, v.World, jobRules{run: "backup", baselineCaps: "DAC_OVERRIDE", fsGroupNeed: fsGroupForSecret})
	p.dnsSubdomain("configSecretName", v.ConfigSecretName)
	enc := a.Encryption.resolve(p)
	rcon := a.Rcon.resolve(p, a.Server)
	mounts := notifyMounts(j, encryptionMounts(enc, storeMounts(store, v.World.BackupRoot,
		mount{"worldRoot", v.World.WorldRoot},
		mount{"configMountPath", v.ConfigMountPath},
	)))
	if rcon != nil {
		mounts = append(mounts, mount{"the RCON password folder", jobspec.RconMountPath})
	}
	p.mountPaths(mounts...)
	_, compressionErr := jobapi.Extension(v.Compression)
	if compressionErr != nil {
		p.addf("compression", "%q is not supported: use zstd, gzip or none", v.Compression)
	}
	switch {
	case jobapi.CheckFormat(v.Format) != nil:
		p.addf("format", "%q is not supported: use %s", v.Format, strings.Join(jobapi.Formats(), " or "))
	case !jobapi.TakesCompression(v.Format) && v.CompressionSet && compressionErr == nil:
		format := "format is chunked"
		if enumString(a.Format) == "" {
			format = "format is not set, so it is chunked, the default"
		}
		p.addf("compression", "is set to %q, but %s: %s: remove compression, or set format to tar",
			v.Compression, format, jobapi.ChunkedCompresses)
	}
	if v.Format == jobapi.FormatChunked {
		v.Compression = "" // not the chunked format's: the Job passes none
	}
	for i, e := range v.Excludes {
		if e == "" {
			p.addf("excludes", "item %d is empty: remove it or give a glob, e.g. *.jar or cache/", i)
			continue
		}
		p.text("excludes", e, 4096)
		// The archiver's rule: what it would refuse at run time is refused here.
		if _, _, err := jobapi.ParseExclude(e); err != nil {
			p.addf("excludes", "item %d: %s", i, err)
		}
	}
	retention := a.Retention.resolve(p)
	if j.Deadline > 0 {
		p.graceCovers(retention, j.Deadline, "deadline", "")
	}
	if c := a.Concurrency; c != nil {
		switch {
		case *c < 1 || *c > MaxConcurrency:
			p.addf("concurrency", "is %d: it caps how many backups run at once on the cluster, from 1 to %d (leave it out for no cap)", *c, MaxConcurrency)
		case a.SkipAwait:
			p.addf("concurrency", "caps the backups that `pulumi up` waits for, and with skipAwait it waits for none: remove concurrency or skipAwait")
		case a.Preflight != nil && !*a.Preflight:
			p.addf("concurrency", "needs the preflight, which is off: the cap watches each Job through the cluster the preflight asks; remove concurrency, or preflight: false")
		}
	}

	if err := p.err(); err != nil {
		return resolvedBackup{}, err
	}
	archiveRef, err := jobapi.SealedArchiveRef(v.World.BackupRoot, a.Server, runID, v.Format, v.Compression, enc != nil)
	if store != nil {
		archiveRef, err = s3ArchiveRefOf(store.URL, a.Server, runID, v.Format, v.Compression, enc != nil)
	}
	if err != nil { // unreachable: every part was validated above
		return resolvedBackup{}, err
	}
	return resolvedBackup{
		Job: jobspec.Backup{
			Job:              a.job(j, v.World),
			FormerOwner:      v.FormerOwner,
			ConfigSecretName: v.ConfigSecretName,
			ConfigMountPath:  v.ConfigMountPath,
			Compression:      v.Compression,
			Format:           v.Format,
			Excludes:         v.Excludes,
			Store:            store,
			Rcon:             rcon,
			Retention:        retention,
			Encryption:       enc,
		},
		Timeout:    j.Timeout,
		ArchiveRef: archiveRef,
		Preflight:  j.Preflight,
	}, nil
}

// resolvedBackup is a validated WorldBackup: the Job builder's arguments,
// the Pulumi create/update timeout and the predicted archive path.
type resolvedBackup struct {
	Job        jobspec.Backup
	Timeout    time.Duration
	ArchiveRef string
	Preflight  preflightSettings
}
