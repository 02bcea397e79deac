package provider

import (
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// maxScratchSize is the largest scratchSize accepted.
var maxScratchSize = resource.MustParse("1Ei")

// WorldVerifyArgs are the inputs of a WorldVerify: those of every Job
// (JobInputs; worldRoot and worldClaimName are refused, a verify mounts no
// world) and the verify's own: the archive and its checksum (as in
// WorldRestore), the chunk sample and the scratch volume.
type WorldVerifyArgs struct {
	JobInputs
	ArchiveRef pulumi.StringInput `pulumi:"archiveRef,optional"`
	SHA256     pulumi.StringInput `pulumi:"sha256,optional"`
	// ByRunInputs verify a recorded run (a run ID, or latest) in place of
	// ArchiveRef and SHA256, as a restore by run does.
	ByRunInputs
	ChunkSample pulumi.StringInput `pulumi:"chunkSample,optional"`
	ScratchSize pulumi.StringInput `pulumi:"scratchSize,optional"`
	// ScratchStorageClassName makes the scratch volume an ephemeral claim
	// of this class; whether it is set decides the volume's kind, its
	// value is an input.
	ScratchStorageClassName pulumi.StringInput `pulumi:"scratchStorageClassName,optional"`
	// Store is the S3 store archiveRef is in, as in WorldRestoreArgs.
	Store *StoreArgs `pulumi:"store,optional"`
	// Encryption is the Secret key of the age identity an encrypted
	// archive is read with, as in WorldRestoreArgs.
	Encryption *EncryptionArgs `pulumi:"encryption,optional"`
}

// Validate reports every missing or invalid input of a (after defaults) in
// one *InputError; nil when a is valid.
func (a WorldVerifyArgs) Validate() error {
	_, err := a.Job()
	return err
}

// Job returns the verify Job builder's arguments of a, validated.
func (a WorldVerifyArgs) Job() (jobspec.Verify, error) {
	a, err := settleSync("worldverify", a)
	if err != nil {
		return jobspec.Verify{}, err
	}
	r, err := a.resolve()
	return r.Job, err
}

// resolvedVerify is a validated WorldVerify.
type resolvedVerify struct {
	Job       jobspec.Verify
	Timeout   time.Duration
	Preflight preflightSettings
}

// resolve applies the defaults, validates and returns the Job builder's
// arguments and the Pulumi timeout.
func (a WorldVerifyArgs) resolve() (resolvedVerify, error) {
	p := &problems{component: "worldverify"}
	for _, in := range []struct{ input, v string }{{"worldRoot", str(a.WorldRoot)}, {"worldClaimName", str(a.WorldClaimName)}} {
		if in.v != "" {
			p.addf(in.input, "is set, but a verify mounts no world (it checks the archive, restored into its scratch volume): remove it")
		}
	}
	w := a.JobInputs.worldPaths()
	archiveRef, sum := str(a.ArchiveRef), str(a.SHA256)
	p.server("server", a.Server, jobapi.KindVerify)
	p.runID("runId", a.Server, jobapi.KindVerify, str(a.RunID))
	rules := jobRules{run: "verify", baselineCaps: "CHOWN, DAC_OVERRIDE and FOWNER"}
	if a.Encryption != nil {
		rules.fsGroupNeed = fsGroupForEncryptionSecret
	}
	byRun, byRunMounts := p.byRun(jobapi.KindVerify, a.ByRunInputs.values(), archiveRef, sum, &rules)
	if byRun.FromRun == "" {
		p.sha256("sha256", sum)
	}
	j, store := p.common(a.JobInputs, a.Store, storeObject, w, rules)
	enc := a.Encryption.resolve(p)
	mounts := append(storeMounts(store, w.BackupRoot), mount{"the scratch volume", jobspec.ScratchPath})
	p.mountPaths(notifyMounts(j, encryptionMounts(enc, append(mounts, byRunMounts...)))...)
	if byRun.FromRun == "" {
		p.archiveIn("archiveRef", archiveRef, store, w.BackupRoot)
		p.encryptedNeedsKey("archiveRef", archiveRef, enc)
	}
	chunks := str(a.ChunkSample)
	if chunks != "" {
		if _, err := jobapi.ParseShare(chunks); err != nil {
			p.addf("chunkSample", "%s; or leave it unset to check every chunk", err)
		}
	}
	scratch := jobspec.Scratch{StorageClassName: str(a.ScratchStorageClassName)}
	if in := str(a.ScratchSize); in != "" {
		if q, ok := p.quantityAtLeast("scratchSize", in, "16Gi or 500Mi", MinScratchSize); ok {
			if q.Cmp(maxScratchSize) > 0 {
				p.addf("scratchSize", "%q is too large: use at most 1Ei", in)
			}
			scratch.Size = q
		}
	}
	if a.ScratchStorageClassName != nil && scratch.StorageClassName != "" {
		p.dnsSubdomain("scratchStorageClassName", scratch.StorageClassName)
	}
	if err := p.err(); err != nil {
		return resolvedVerify{}, err
	}
	job := a.job(j, w)
	job.WorldClaimName, job.WorldRoot = "", "" // no world
	return resolvedVerify{
		Job: jobspec.Verify{
			Job:        job,
			ArchiveRef: archiveRef,
			SHA256:     sum,
			Chunks:     chunks,
			Scratch:    scratch,
			ByRun:      byRun,
			Store:      store,
			Encryption: enc,
		},
		Timeout:   j.Timeout,
		Preflight: j.Preflight,
	}, nil
}
