package provider

import (
	"context"

	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/internal/settle"
	"github.com/worldbackup/worldbackup/provider/jobspec"
	"github.com/worldbackup/worldbackup/provider/naming"
)

// JobInputs are the inputs every Job component shares (WorldBackup,
// WorldRestore, WorldBackupSchedule through its WorldBackupArgs, and the
// next kinds): each component's args embed it, so each input is declared,
// described (Annotate) and checked (shared, problems.job) once;
// pulumi-go-provider merges an embedded struct's Annotate into the
// component's schema, and a component's own Annotate may describe a field
// again for its Job (e.g. what deadline bounds).
//
// A value of the Job is a Pulumi input (pulumi.StringInput, pulumi.IntInput,
// ...; nil = unset, the default), so another resource's output can be
// passed. What decides which resources exist or their options is plain:
// server, securityMode, skipAwait, timeout, replaceUnready, preflight,
// kubeContext, Kubeconfig.
type JobInputs struct {
	Server             string                  `pulumi:"server"`
	RunID              pulumi.StringInput      `pulumi:"runId"`
	Image              pulumi.StringInput      `pulumi:"image"`
	BackupClaimName    pulumi.StringInput      `pulumi:"backupClaimName,optional"`
	Namespace          pulumi.StringInput      `pulumi:"namespace,optional"`
	ServiceAccountName pulumi.StringInput      `pulumi:"serviceAccountName,optional"`
	BackupRoot         pulumi.StringInput      `pulumi:"backupRoot,optional"`
	WorldRoot          pulumi.StringInput      `pulumi:"worldRoot,optional"`
	WorldClaimName     pulumi.StringInput      `pulumi:"worldClaimName,optional"`
	Deadline           pulumi.StringInput      `pulumi:"deadline,optional"`
	CPULimit           pulumi.StringInput      `pulumi:"cpuLimit,optional"`
	MemoryLimit        pulumi.StringInput      `pulumi:"memoryLimit,optional"`
	SecurityMode       *SecurityMode           `pulumi:"securityMode,optional"`
	RunAsUser          pulumi.IntInput         `pulumi:"runAsUser,optional"`
	RunAsGroup         pulumi.IntInput         `pulumi:"runAsGroup,optional"`
	FSGroup            pulumi.IntInput         `pulumi:"fsGroup,optional"`
	TTLAfterFinished   pulumi.StringInput      `pulumi:"ttlAfterFinished,optional"`
	BackoffLimit       pulumi.IntInput         `pulumi:"backoffLimit,optional"`
	NodeName           pulumi.StringInput      `pulumi:"nodeName,optional"`
	NodeSelector       pulumi.StringMapInput   `pulumi:"nodeSelector,optional"`
	GamePodSelector    pulumi.StringMapInput   `pulumi:"gamePodSelector,optional"`
	GamePodAffinity    pulumi.StringInput      `pulumi:"gamePodAffinity,optional"`
	Tolerations        []TolerationArgs        `pulumi:"tolerations,optional"`
	PriorityClassName  pulumi.StringInput      `pulumi:"priorityClassName,optional"`
	ImagePullSecrets   pulumi.StringArrayInput `pulumi:"imagePullSecrets,optional"`
	Labels             pulumi.StringMapInput   `pulumi:"labels,optional"`
	Annotations        pulumi.StringMapInput   `pulumi:"annotations,optional"`
	SkipAwait          bool                    `pulumi:"skipAwait,optional"`
	Timeout            string                  `pulumi:"timeout,optional"`
	ReplaceUnready     *bool                   `pulumi:"replaceUnready,optional"`
	Preflight          *bool                   `pulumi:"preflight,optional"`
	KubeContext        string                  `pulumi:"kubeContext,optional"`
	Notify             *NotifyArgs             `pulumi:"notify,optional"`
	// Kubeconfig is the kubeconfig the preflight and the pod watchdog use,
	// a path or the file's contents, in place of the Kubernetes provider's
	// ("" = the provider's kubeconfig input, else the ambient one). Go
	// programs only: it has no pulumi tag, so it is no input of the plugin
	// and never reaches the state.
	Kubeconfig string

	// target is the Kubernetes provider the Job goes to, set by the
	// component's constructor (targetOf) before the inputs are checked.
	target kubeTarget
}

// InputsNotTaken returns the inputs the component typ embeds (JobInputs, a
// schedule's WorldBackupArgs) but does not take, which the plugin's schema
// leaves out of it: a prune and a verify mount no world (its Go args refuse
// them); a schedule's runs take their run ID from their Job's name, are not
// awaited (so not capped) and have no preflight (its Go args ignore them); a scheduled verify verifies a run by reference,
// never a given archive.
func InputsNotTaken(typ string) []string {
	switch typ {
	case WorldPruneType, WorldVerifyType:
		return []string{"worldRoot", "worldClaimName"}
	case WorldBackupScheduleType:
		return []string{"runId", "skipAwait", "timeout", "replaceUnready", "preflight", "kubeContext", "concurrency"}
	case WorldVerifyScheduleType:
		return []string{"worldRoot", "worldClaimName", "runId", "skipAwait", "timeout", "replaceUnready", "preflight", "kubeContext",
			"archiveRef", "sha256"}
	}
	return nil
}

// Annotate describes the shared inputs in the plugin's schema, for every
// component that embeds JobInputs.
func (a *JobInputs) Annotate(an infer.Annotator) {
	an.Describe(&a.Server, "The game server's name: a DNS-1123 label of at most "+descMaxServerLen+" characters "+
		"(lowercase letters, digits, '-'), usually its StatefulSet name. It names the world claim "+
		"(unless worldClaimName is set) and the Job.")
	an.Describe(&a.RunID, "The run ID, the idempotency key of the run: 1 to "+descMaxRunIDLen+" characters from "+
		"A-Z a-z 0-9 . _ -, starting with a letter or digit. It names the Job (<server>-<kind>-<runId>, or its lowercase "+
		"form and a hash); one whose Job name ends in sched-<digits>, the form of a schedule's Jobs, is refused. A new runId "+
		"performs a new run; the same runId performs none.")
	an.Describe(&a.Image, "The archiver image, e.g. ghcr.io/worldbackup/worldbackup-archiver:v0.1.0. Its binary is "+
		"/usr/local/bin/archiver.")
	an.Describe(&a.BackupClaimName, "The PersistentVolumeClaim that holds the archives, mounted at backupRoot. "+
		"Required unless store is set (then not allowed: the Job mounts no backup claim).")
	an.Describe(&a.Namespace, "The namespace of the Job, where the world and backup claims live. Default: minecraft.")
	an.Describe(&a.ServiceAccountName, "The Job's service account (pre-existing, with no permissions needed; "+
		"its token is not mounted). Default: felis-restore.")
	an.Describe(&a.BackupRoot, "Where the backup claim is mounted: the archive root. Default: /backups. "+
		"Not allowed with store (the Job mounts no backup claim). "+descMountPath)
	an.Describe(&a.WorldRoot, "Where the world claim is mounted. Default: "+DefaultWorldRoot+". "+descMountPath)
	an.Describe(&a.WorldClaimName, "The world's PersistentVolumeClaim. "+
		"Default: world-<server>-0 (the StatefulSet claim of volume template world, ordinal 0).")
	an.Describe(&a.Deadline, "How long the run may take, a duration like 30m or 2h (activeDeadlineSeconds). Default: 30m.")
	an.Describe(&a.CPULimit, "The container's CPU limit (a Kubernetes quantity, at least "+MinCPULimit.String()+"); it requests 100m or "+
		"the limit if lower. Default: 1.")
	an.Describe(&a.MemoryLimit, "The container's memory limit (a Kubernetes quantity, at least "+MinMemoryLimit.String()+"); it requests 256Mi "+
		"or the limit if lower. Default: 1Gi.")
	an.Describe(&a.SecurityMode, "baseline (default) or restricted: the pod's identity. baseline: root with "+
		"every capability dropped except the few the Job needs; meets the baseline Pod Security Standard. "+
		"restricted: runs as runAsUser/runAsGroup (default 1000/1000, the game's UID/GID) with every "+
		"capability dropped and runAsNonRoot; meets the restricted Pod Security Standard. Both: no privilege "+
		"escalation, seccomp RuntimeDefault, read-only root filesystem.")
	an.Describe(&a.RunAsUser, "The UID the archiver runs as. Default: 0 in baseline mode, 1000 in "+
		"restricted mode (which refuses 0). A non-root UID in baseline mode needs fsGroup when the Job mounts a Secret "+
		"(the config, S3 credentials or encryption Secret: files owned by root, mode 0400): baseline's capabilities work only for root.")
	an.Describe(&a.RunAsGroup, "The GID the archiver runs as. Default: 0 in baseline mode, 1000 in restricted mode.")
	an.Describe(&a.FSGroup, "The pod's fsGroup: kubelet gives the writable volumes this group "+
		"(fsGroupChangePolicy OnRootMismatch). Omitted when 0. Default: omitted in baseline mode, runAsGroup "+
		"in restricted mode.")
	an.Describe(&a.TTLAfterFinished, "How long the finished Job is kept before Kubernetes deletes it, a "+
		"duration like 30m or 2h, at least 1s (ttlSecondsAfterFinished). Default: none, the Job stays until a new runId "+
		"replaces it. With a TTL, `pulumi refresh` (or `up --refresh`) after the deletion forgets the Job and the "+
		"next `pulumi up` creates it again with the same runId; the archiver then does nothing, but `pulumi up` "+
		"shows a create.")
	an.Describe(&a.BackoffLimit, "How many times a failed pod is retried (backoffLimit). Default: 0, so a failed "+
		"pod fails the Job at once (reason BackoffLimitExceeded) and `pulumi up` reports it with the archiver's "+
		"message. With more, a configuration error is retried too (10s, 20s, 40s… apart) before `pulumi up` "+
		"reports it.")
	an.Describe(&a.NodeName, "Runs the pod on this node (bypassing the scheduler), e.g. the node of a "+
		"ReadWriteOnce world volume. Exclusive with nodeSelector.")
	an.Describe(&a.NodeSelector, "Node labels the pod's node must have, rendered as a required node "+
		"affinity (so the pod lands where a ReadWriteOnce world volume can attach). Exclusive with nodeName.")
	an.Describe(&a.GamePodSelector, descGamePodSelector)
	an.Describe(&a.GamePodAffinity, descGamePodAffinity)
	an.Describe(&a.Tolerations, descTolerations)
	an.Describe(&a.PriorityClassName, "The pod's PriorityClass (pre-existing), e.g. so a backup is not preempted by batch work. Default: none.")
	an.Describe(&a.ImagePullSecrets, descImagePullSecrets)
	an.Describe(&a.Labels, descLabels)
	an.Describe(&a.Annotations, descAnnotations)
	an.Describe(&a.SkipAwait, "Do not wait for the Job to finish (annotation pulumi.com/skipAwait); "+
		"`pulumi up` then does not report the run's result. Default: false.")
	an.Describe(&a.Timeout, descTimeout)
	an.Describe(&a.ReplaceUnready, descReplaceUnready)
	an.Describe(&a.Preflight, descPreflight)
	an.Describe(&a.KubeContext, descKubeContext)
	an.Describe(&a.Notify, "A webhook (Slack- or Discord-compatible) the Job posts its outcome to, on failure or, with "+
		"onSuccess, always: {secretName, key} of the Secret that holds its URL, mounted as a file. Default: none.")
}

// shared returns the shared inputs of a, which must be settled (every input
// prompt, see settle), as plain values.
func (a JobInputs) shared() sharedInputs {
	return sharedInputs{
		Namespace:          str(a.Namespace),
		ServiceAccountName: str(a.ServiceAccountName),
		Deadline:           str(a.Deadline),
		Timeout:            a.Timeout,
		TTLAfterFinished:   str(a.TTLAfterFinished),
		BackoffLimit:       optInt(a.BackoffLimit),
		CPULimit:           str(a.CPULimit),
		MemoryLimit:        str(a.MemoryLimit),
		SecurityMode:       enumString(a.SecurityMode),
		RunAsUser:          optInt(a.RunAsUser),
		RunAsGroup:         optInt(a.RunAsGroup),
		FSGroup:            optInt(a.FSGroup),
		NodeName:           str(a.NodeName),
		NodeSelector:       strMap(a.NodeSelector),
		GamePodSelector:    strMap(a.GamePodSelector),
		GamePodAffinity:    str(a.GamePodAffinity),
		Tolerations:        a.Tolerations,
		PriorityClassName:  str(a.PriorityClassName),
		ImagePullSecrets:   strs(a.ImagePullSecrets),
		Labels:             strMap(a.Labels),
		Annotations:        strMap(a.Annotations),
		SkipAwait:          a.SkipAwait,
		ReplaceUnready:     a.ReplaceUnready,
		Preflight:          a.Preflight,
		Kubeconfig:         a.Kubeconfig,
		KubeContext:        a.KubeContext,
		Target:             a.target,
	}
}

// job returns the resolved shared part of a Job from the validated shared
// settings j and the settled inputs a (with defaults applied by the caller
// to worldClaimName, worldRoot and backupRoot, passed in w).
func (a JobInputs) job(j jobSettings, w worldPaths) jobspec.Job {
	return jobspec.Job{
		Server:             a.Server,
		RunID:              str(a.RunID),
		Namespace:          j.Namespace,
		Image:              str(a.Image),
		ServiceAccountName: j.ServiceAccountName,
		WorldClaimName:     w.WorldClaimName,
		BackupClaimName:    str(a.BackupClaimName),
		WorldRoot:          w.WorldRoot,
		BackupRoot:         w.BackupRoot,
		Deadline:           j.Deadline,
		TTLAfterFinished:   j.TTLAfterFinished,
		BackoffLimit:       j.BackoffLimit,
		Resources:          j.Resources,
		Identity:           j.Identity,
		Placement:          j.Placement,
		Scheduling:         j.Scheduling,
		Labels:             j.Labels,
		Annotations:        j.Annotations,
		Await:              j.Await,
		Notify:             j.Notify,
	}
}

// worldPaths returns the settled world claim and mount inputs of a with
// their defaults.
func (a JobInputs) worldPaths() worldPaths {
	w := worldPaths{WorldClaimName: str(a.WorldClaimName), WorldRoot: str(a.WorldRoot), BackupRoot: str(a.BackupRoot)}
	setDefault(&w.BackupRoot, DefaultBackupRoot)
	setDefault(&w.WorldRoot, DefaultWorldRoot)
	if a.Server != "" {
		setDefault(&w.WorldClaimName, naming.WorldClaim(a.Server))
	}
	return w
}

// common checks the settled inputs every Job shares but server and runId
// (whose messages name the Job kind): image, the store input of the
// component (settled; nil: none, or a component without one) with role,
// backupClaimName and backupRoot against it, the shared settings
// (problems.job) and worldClaimName; the results are meaningful only when
// no problem was recorded. The store is nil without one.
func (p *problems) common(a JobInputs, st *StoreArgs, role storeRole, w worldPaths, r jobRules) (jobSettings, *jobspec.S3Store) {
	p.image("image", str(a.Image))
	store := st.resolve(p, role)
	p.backupClaim(str(a.BackupClaimName), str(a.BackupRoot), store)
	if store != nil && r.fsGroupNeed == "" {
		r.fsGroupNeed = fsGroupForS3Secret
	}
	sh := a.shared()
	if a.Server != "" && sh.GamePodSelector == nil {
		sh.GamePodSelector = map[string]string{jobspec.GamePodLabel: naming.GamePod(a.Server)}
	}
	j := p.job(sh.withDefaults(), r)
	if w.WorldClaimName != naming.WorldClaim(a.Server) { // the derived name is as valid as server
		p.dnsSubdomain("worldClaimName", w.WorldClaimName)
	}
	if n := a.Notify; n != nil {
		if p.required("notify.secretName", n.SecretName, "set it to the Secret that holds the webhook URL, e.g. felis-notify, or remove notify") {
			p.dnsSubdomain("notify.secretName", n.SecretName)
		}
		if p.required("notify.key", n.Key, "set it to the Secret's key that holds the webhook URL, e.g. url") {
			p.secretKey("notify.key", n.Key, "url")
		}
		j.Notify = &jobspec.Notify{SecretName: n.SecretName, Key: n.Key, Always: n.OnSuccess}
	}
	return j, store
}

// notifyMounts adds the folder of the webhook Secret to mounts when j posts
// to one: no other mount may be on it, above it or below it.
func notifyMounts(j jobSettings, mounts []mount) []mount {
	if j.Notify == nil {
		return mounts
	}
	return append(mounts, mount{"the webhook folder", jobapi.NotifyMountPath})
}

// NotifyArgs is the webhook a Job posts its run's outcome to (Slack- and
// Discord-compatible JSON): the Secret SecretName's key Key holds the URL,
// which the Job mounts as a file; the URL never reaches the Job's
// arguments, environment, log or the Pulumi state.
type NotifyArgs struct {
	SecretName string `pulumi:"secretName"`
	Key        string `pulumi:"key"`
	OnSuccess  bool   `pulumi:"onSuccess,optional"`
}

// Annotate names the type worldbackup:index:Notify and describes it.
func (n *NotifyArgs) Annotate(a infer.Annotator) {
	a.SetToken("index", "Notify")
	a.Describe(n, "A webhook the Job posts its run's outcome to: one JSON object with the same text under "+
		"\"text\" (Slack incoming webhooks) and \"content\" (Discord webhooks). Sent on failure, and with "+
		"onSuccess after every run; bounded to a few seconds, it never fails or delays the run beyond that.")
	a.Describe(&n.SecretName, "The Secret holding the webhook URL, in the Job's namespace, e.g. "+
		"`kubectl create secret generic felis-notify --from-literal=url=https://hooks.slack.com/services/...`.")
	a.Describe(&n.Key, "The Secret's key that holds the URL, e.g. url. Mounted read-only (0400) as a file; "+
		"the URL is never an argument or an environment variable.")
	a.Describe(&n.OnSuccess, "Notify after a successful run too. Default: false, failures only.")
}

// backupClaim checks backupClaimName and the user-given backupRoot (""
// when unset): the claim is required for the folder store; with an S3
// store, whose Job mounts no backup claim, neither is allowed.
func (p *problems) backupClaim(claim, root string, store *jobspec.S3Store) {
	switch {
	case store == nil:
		if p.required("backupClaimName", claim, "set it to the PersistentVolumeClaim that holds the archives, e.g. world-backups, or set store to archive into S3") {
			p.dnsSubdomain("backupClaimName", claim)
		}
		return
	case claim != "":
		p.addf("backupClaimName", "is set together with store: with an S3 store the Job mounts no backup claim; remove backupClaimName, or remove store to use the claim")
	}
	if root != "" {
		p.addf("backupRoot", "%q is set together with store: with an S3 store the Job mounts no backup claim, so there is no archive root; remove backupRoot, or remove store to use the backup claim", root)
	}
}

// worldPaths are the claim and mount inputs with their defaults.
type worldPaths struct {
	WorldClaimName, WorldRoot, BackupRoot string
}

// SecurityMode is the securityMode input: a schema enum.
type SecurityMode string

// The security modes (see jobspec.Baseline and jobspec.Restricted).
const (
	SecurityModeBaseline   SecurityMode = SecurityMode(jobspec.Baseline)
	SecurityModeRestricted SecurityMode = SecurityMode(jobspec.Restricted)
)

// Values lists the security modes in the schema.
func (SecurityMode) Values() []infer.EnumValue[SecurityMode] {
	return []infer.EnumValue[SecurityMode]{
		{Name: "Baseline", Value: SecurityModeBaseline, Description: "Root with every capability dropped except the few the Job needs (baseline Pod Security Standard)."},
		{Name: "Restricted", Value: SecurityModeRestricted, Description: "The game's non-root UID/GID with every capability dropped (restricted Pod Security Standard)."},
	}
}

// Annotate gives the enum its token, worldbackup:index:SecurityMode.
func (m *SecurityMode) Annotate(a infer.Annotator) {
	a.SetToken("index", "SecurityMode")
	a.Describe(m, "The identity of a Job's pod.")
}

// Compression is WorldBackup's compression input: a schema enum.
type Compression string

// The archive compressions.
const (
	CompressionZstd Compression = jobapi.CompressionZstd
	CompressionGzip Compression = jobapi.CompressionGzip
	CompressionNone Compression = jobapi.CompressionNone
)

// Values lists the compressions in the schema.
func (Compression) Values() []infer.EnumValue[Compression] {
	return []infer.EnumValue[Compression]{
		{Name: "Zstd", Value: CompressionZstd, Description: "zstd, extension .tar.zst (the default)."},
		{Name: "Gzip", Value: CompressionGzip, Description: "gzip, extension .tar.gz."},
		{Name: "None", Value: CompressionNone, Description: "No compression, extension .tar."},
	}
}

// Annotate gives the enum its token, worldbackup:index:Compression.
func (c *Compression) Annotate(a infer.Annotator) {
	a.SetToken("index", "Compression")
	a.Describe(c, "The compression of a backup archive.")
}

// Format is WorldBackup's format input: a schema enum.
type Format string

// The archive formats.
const (
	FormatTar     Format = jobapi.FormatTar
	FormatChunked Format = jobapi.FormatChunked
)

// Values lists the formats in the schema.
func (Format) Values() []infer.EnumValue[Format] {
	return []infer.EnumValue[Format]{
		{Name: "Chunked", Value: FormatChunked, Description: "The tar stream kept as deduplicated blobs in packs, one manifest per run " +
			"(_chunked/runs/<server>/<runId>.manifest): a run stores only what changed since the server's previous chunked run (the default)."},
		{Name: "Tar", Value: FormatTar, Description: "One compressed tar archive per run, <server>/<runId>.tar.zst, which GNU tar reads alone."},
	}
}

// Annotate gives the enum its token, worldbackup:index:Format.
func (f *Format) Annotate(a infer.Annotator) {
	a.SetToken("index", "Format")
	a.Describe(f, "The archive format of a backup.")
}

// Reading settled inputs: after settle, every non-nil input of an args
// struct is one of the prompt types below; nil is an unset input.

func str(in pulumi.StringInput) string {
	if s, ok := in.(pulumi.String); ok {
		return string(s)
	}
	return ""
}

func optInt(in pulumi.IntInput) *int {
	if v, ok := in.(pulumi.Int); ok {
		return new(int(v))
	}
	return nil
}

func optBool(in pulumi.BoolInput) *bool {
	if v, ok := in.(pulumi.Bool); ok {
		return new(bool(v))
	}
	return nil
}

func strMap(in pulumi.StringMapInput) map[string]string {
	m, ok := in.(pulumi.StringMap)
	if !ok {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = str(v)
	}
	return out
}

func strs(in pulumi.StringArrayInput) []string {
	a, ok := in.(pulumi.StringArray)
	if !ok {
		return nil
	}
	out := make([]string, len(a))
	for i, v := range a {
		out[i] = str(v)
	}
	return out
}

// settleSync resolves args outside a Pulumi program (Validate, Job): every
// input must be prompt or an already known Output.
func settleSync[T any](component string, args T) (T, error) {
	s, err := settle.Now(context.Background(), true, args)
	if err != nil {
		return args, err
	}
	if !s.Known {
		return args, &InputError{Component: component, Problems: []Problem{{Input: "inputs",
			Message: "inputs hold an unknown Output: Validate and Job check known values only; the component's constructor checks the rest when it resolves"}}}
	}
	return s.Args, nil
}

// enumString returns the value of an optional enum input, "" when unset.
func enumString[E ~string](e *E) string {
	if e == nil {
		return ""
	}
	return string(*e)
}
