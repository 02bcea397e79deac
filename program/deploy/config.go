package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider"
)

// Namespace is the Pulumi config namespace the program reads: the project
// name in Pulumi.yaml.
const Namespace = "worldbackup"

// DefaultCluster is the cluster used when worldbackup:clusters is unset: the
// ambient kubeconfig's current context.
const DefaultCluster = "default"

// Config is the program's stack config, parsed and validated once.
type Config struct {
	Image        string
	BackupClaim  string
	RunID        string // the trigger; each backup's run ID is derived from it
	Servers      []Server
	Clusters     []Cluster
	Restores     []Restore
	RenderDir    string // non-empty: GitOps render mode
	SecurityMode string
	SkipAwait    bool
	// SharedCatalog says the clusters' config Secrets name one catalog
	// (worldbackup:sharedCatalog, default true): see checkSharedCatalog.
	SharedCatalog bool
	// Gates, when set, are the clusters' concurrency caps shared with other
	// program runs (SharedProgram); not read from the config.
	Gates *provider.Gates
	// Retention is the stack-wide prune after each backup; a server's own
	// retention replaces it.
	Retention *Retention
	// Store is the stack-wide S3 archive store (nil: the folder store on
	// BackupClaim); a server's own store replaces it.
	Store *Store
	// Format is the stack-wide archive format, tar or chunked ("": the
	// component's default, chunked); a server's own format replaces it.
	Format string
	// Notify is the webhook every Job posts its failures (or, with
	// onSuccess, every outcome) to; nil: none.
	Notify *Notify
	// Metrics declares the catalog's exporter (a WorldMetrics) in each
	// cluster; nil: none.
	Metrics *Metrics
	// ImagePullSecrets are the docker-registry Secrets every pod of the
	// program (its Jobs, CronJobs and exporter) pulls the image with.
	ImagePullSecrets []string
}

// Metrics is worldbackup:metrics: the exporter of each cluster (see
// provider.WorldMetricsArgs), declared when Enabled.
type Metrics struct {
	Enabled bool `json:"enabled"`
	// MaxAge: a server whose newest successful run is older is stale
	// (default: the exporter's).
	MaxAge string `json:"maxAge,omitempty"`
	// ConfigSecretName is the Secret of felis.toml the exporter reads
	// (default: the Jobs'); give one that logs in as the read-only role.
	ConfigSecretName string `json:"configSecretName,omitempty"`
}

// Notify is worldbackup:notify: the Secret key holding a webhook URL.
type Notify struct {
	SecretName string `json:"secretName"`
	Key        string `json:"key"`
	OnSuccess  bool   `json:"onSuccess,omitempty"`
}

// Store is an S3-compatible archive store (see provider.StoreArgs for the
// defaults). The credentials stay in the Secret CredentialsSecretName.
type Store struct {
	URL                   string `json:"url,omitempty"`
	Endpoint              string `json:"endpoint,omitempty"`
	Region                string `json:"region,omitempty"`
	PathStyle             bool   `json:"pathStyle,omitempty"`
	CredentialsSecretName string `json:"credentialsSecretName,omitempty"`
	AccessKeyKey          string `json:"accessKeyKey,omitempty"`
	SecretKeyKey          string `json:"secretKeyKey,omitempty"`
}

// Rcon is how a server's backup quiesces it over RCON (see
// provider.RconArgs for the defaults).
type Rcon struct {
	ChartRelease string `json:"chartRelease,omitempty"`
	Address      string `json:"address,omitempty"`
	SecretName   string `json:"secretName,omitempty"`
	SecretKey    string `json:"secretKey,omitempty"`
	Required     *bool  `json:"required,omitempty"`
}

// Encryption is the Secret key of a server's age identity (see
// provider.EncryptionArgs): its backups are encrypted to it, its restores
// read with it.
type Encryption struct {
	SecretName string `json:"secretName"`
	SecretKey  string `json:"secretKey,omitempty"`
}

// Retention is the prune after a backup (see provider.RetentionArgs).
type Retention struct {
	KeepLast    int    `json:"keepLast,omitempty"`
	KeepHourly  int    `json:"keepHourly,omitempty"`
	KeepDaily   int    `json:"keepDaily,omitempty"`
	KeepWeekly  int    `json:"keepWeekly,omitempty"`
	KeepMonthly int    `json:"keepMonthly,omitempty"`
	KeepYearly  int    `json:"keepYearly,omitempty"`
	KeepWithin  string `json:"keepWithin,omitempty"`
	MinKeep     int    `json:"minKeep"`
	Grace       string `json:"grace,omitempty"`
}

// Server is one world to back up, with optional per-server overrides of the
// component's inputs.
type Server struct {
	Name           string            `json:"name"`
	FormerOwner    string            `json:"formerOwner,omitempty"`
	WorldClaimName string            `json:"worldClaimName,omitempty"`
	NodeName       string            `json:"nodeName,omitempty"`
	NodeSelector   map[string]string `json:"nodeSelector,omitempty"`
	// GamePodAffinity is preferred (default), required or none: how the
	// Jobs are drawn to the node of the game pod <name>-0.
	GamePodAffinity string   `json:"gamePodAffinity,omitempty"`
	Excludes        []string `json:"excludes,omitempty"`
	Compression     string   `json:"compression,omitempty"`
	// Format replaces the stack-wide worldbackup:format for this server.
	Format       string `json:"format,omitempty"`
	SecurityMode string `json:"securityMode,omitempty"`
	RunAsUser    *int   `json:"runAsUser,omitempty"`
	RunAsGroup   *int   `json:"runAsGroup,omitempty"`
	FSGroup      *int   `json:"fsGroup,omitempty"`
	Deadline     string `json:"deadline,omitempty"`
	CPULimit     string `json:"cpuLimit,omitempty"`
	MemoryLimit  string `json:"memoryLimit,omitempty"`
	// Schedule is a cron expression: besides the on-demand backup, a
	// CronJob backs the server up on this schedule (in TimeZone).
	Schedule string `json:"schedule,omitempty"`
	TimeZone string `json:"timeZone,omitempty"`
	// Spread shifts Schedule by a stable offset within this window (a Go
	// duration), derived from the cluster and the server's name.
	Spread string `json:"spread,omitempty"`
	// Rcon quiesces the server while its world is read.
	Rcon *Rcon `json:"rcon,omitempty"`
	// Encryption encrypts the server's archives with the age identity of
	// a Secret (its backups, its schedule and its restores).
	Encryption *Encryption `json:"encryption,omitempty"`
	// Retention replaces the stack-wide worldbackup:retention for this server.
	Retention *Retention `json:"retention,omitempty"`
	// Store replaces the stack-wide worldbackup:store for this server.
	Store *Store `json:"store,omitempty"`
	// Prune declares a WorldPrune of this server's archives, apart from
	// any backup: a new prune runId prunes again.
	Prune *Prune `json:"prune,omitempty"`
	// Verify declares a WorldVerify of this run's backup: the archive it
	// wrote, restored into scratch space and checked down to the chunks;
	// with a schedule, a WorldVerifySchedule of the server's newest run.
	Verify *Verify `json:"verify,omitempty"`
}

// Verify is the verify of a server's backup of this run (see
// provider.WorldVerifyArgs): the chunk sample and the scratch volume. With
// Schedule, the server's newest run is verified on that schedule instead
// (provider.WorldVerifyScheduleArgs), whatever this run backs up.
type Verify struct {
	ChunkSample             string `json:"chunkSample,omitempty"`
	ScratchSize             string `json:"scratchSize,omitempty"`
	ScratchStorageClassName string `json:"scratchStorageClassName,omitempty"`
	Schedule                string `json:"schedule,omitempty"`
	TimeZone                string `json:"timeZone,omitempty"`
	Spread                  string `json:"spread,omitempty"`
}

// scheduled reports whether v verifies on a schedule.
func (v *Verify) scheduled() bool { return v != nil && v.Schedule != "" }

// Prune is one prune of a server's archives by its own rules (see
// provider.WorldPruneArgs): runId, the retention rules and dryRun.
type Prune struct {
	RunID  string `json:"runId"`
	DryRun bool   `json:"dryRun,omitempty"`
	Retention
}

// storeOf returns the store of server s: its own, else the stack-wide one
// (nil: the folder store on the backup claim).
func (c Config) storeOf(s Server) *Store {
	if s.Store != nil {
		return s.Store
	}
	return c.Store
}

// formatOf returns the archive format of server s: its own, else the
// stack-wide one ("": the component's default).
func (c Config) formatOf(s Server) string {
	if s.Format != "" {
		return s.Format
	}
	return c.Format
}

// server returns the server named name, or one with only that name when
// it is not listed (a restore of a server that is not backed up).
func (c Config) server(name string) Server {
	for _, s := range c.Servers {
		if s.Name == name {
			return s
		}
	}
	return Server{Name: name}
}

// backsUp reports whether the program backs server name up (it is in
// Servers): then a restore of it is preceded by a backup (preRestoreBackup).
func (c Config) backsUp(name string) bool {
	return slices.ContainsFunc(c.Servers, func(s Server) bool { return s.Name == name })
}

// Restore asks for one archive to be restored into a server's world. The
// archive ref and checksum come from the catalog (`archiver list`) or from a
// WorldBackup's archiveRef output and its row.
type Restore struct {
	Server     string `json:"server"`
	Cluster    string `json:"cluster,omitempty"` // required when there are several clusters
	ArchiveRef string `json:"archiveRef,omitempty"`
	SHA256     string `json:"sha256,omitempty"`
	// FromRun restores a recorded run in place of ArchiveRef and SHA256: a
	// run ID of FromServer (default Server), or latest, the newest
	// successful run when the restore Job runs (after this run's backup of
	// the server, when it makes one).
	FromRun    string `json:"fromRun,omitempty"`
	FromServer string `json:"fromServer,omitempty"`
	// RunID is the restore's own trigger: a new one restores again, and
	// only a new one, also when the archive changes (default: the
	// archive's checksum, or fromRun).
	RunID string `json:"runId,omitempty"`
	// Encryption replaces the server's encryption for this restore: the
	// identity that reads an encrypted run of another server (fromServer)
	// whose identity differs (nil: the server's own).
	Encryption *Encryption `json:"encryption,omitempty"`
}

// encryptionOf returns the encryption restore r reads its archive with: its
// own, else that of the server it restores into, s (nil: none).
func (r Restore) encryptionOf(s Server) *Encryption {
	if r.Encryption != nil {
		return r.Encryption
	}
	return s.Encryption
}

// byRun reports whether r restores a recorded run (fromRun).
func (r Restore) byRun() bool { return r.FromRun != "" }

// Cluster is one Kubernetes cluster the backups run in (or, in render mode,
// one sub-folder of rendered manifests).
type Cluster struct {
	Name       string `json:"name"`
	Context    string `json:"context,omitempty"`
	Kubeconfig string `json:"kubeconfig,omitempty"` // a path or the file's contents
	Namespace  string `json:"namespace,omitempty"`
	// Concurrency caps how many of the run's backups run at once in the
	// cluster (each backup's concurrency input, provider.Gate); 0: no cap
	// (the CLI's --parallel bounds them).
	Concurrency int `json:"concurrency,omitempty"`
}

var clusterName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)

// checkSharedCatalog refuses, when several clusters share one catalog, what
// would pick among one server's runs by name: the catalog keys a server's
// runs by its name, and every cluster backs up every server, so a prune
// (its retention and floor), a backup schedule (its run IDs are its Jobs'
// names, the same in every cluster), a verify schedule or a restore of the
// newest run of one cluster's world would see, keep, delete or restore the
// other clusters' worlds' runs too.
func (c Config) checkSharedCatalog(add func(format string, args ...any)) {
	if !c.SharedCatalog || len(c.Clusters) < 2 {
		return
	}
	var uses []string
	if c.Retention != nil {
		uses = append(uses, "worldbackup:retention")
	}
	for i, s := range c.Servers {
		if s.Retention != nil {
			uses = append(uses, fmt.Sprintf("servers[%d].retention", i))
		}
		if s.Prune != nil {
			uses = append(uses, fmt.Sprintf("servers[%d].prune", i))
		}
		if s.Schedule != "" {
			uses = append(uses, fmt.Sprintf("servers[%d].schedule", i))
		}
		if s.Verify.scheduled() {
			uses = append(uses, fmt.Sprintf("servers[%d].verify.schedule", i))
		}
	}
	for i, r := range c.Restores {
		if r.FromRun == jobapi.RunLatest {
			uses = append(uses, fmt.Sprintf("restores[%d].fromRun %s", i, jobapi.RunLatest))
		}
	}
	if len(uses) == 0 {
		return
	}
	add("%s: the %d clusters share one catalog (worldbackup:sharedCatalog, default true), which keys a server's runs by its name, "+
		"and each cluster backs up every server: a prune, a schedule or a restore of the newest run of one cluster's world would "+
		"also see, keep, delete or restore the other clusters' worlds' runs. Give each cluster a catalog of its own (a database, "+
		"or a schema: add search_path=<cluster> to the database URL in that cluster's felis.toml, after CREATE SCHEMA <cluster>), "+
		"then `pulumi config set worldbackup:sharedCatalog false`; or remove these settings",
		strings.Join(uses, ", "), len(c.Clusters))
}

// keys are the worldbackup: keys the program reads, as declared in Pulumi.yaml.
func keys() []string {
	return []string{"image", "backupClaim", "servers", "runId", "clusters", "restores", "renderDir", "securityMode", "skipAwait", "sharedCatalog", "retention", "store", "format", "notify", "metrics", "imagePullSecrets"}
}

// ParseConfig reads the program's config through get, which returns a fully
// qualified key's value (ctx.GetConfig in a program). present lists every
// config key of the stack when the caller knows them (the CLI passes them to
// a program in PULUMI_CONFIG), so that a key the program does not read is an
// error rather than silently ignored; without it, keys that differ from a
// known one only in case or separators (worldbackup:runid, run_id, run-id)
// are still caught. Every problem is reported at once, each naming the key
// and the fix.
func ParseConfig(get func(key string) (string, bool), present []string) (Config, error) {
	errs := unknownKeys(get, present)
	str := func(key string) string {
		v, _ := get(Namespace + ":" + key)
		return strings.TrimSpace(v)
	}
	c := Config{
		Image:        str("image"),
		BackupClaim:  str("backupClaim"),
		RunID:        str("runId"),
		RenderDir:    str("renderDir"),
		SecurityMode: str("securityMode"),
		Format:       str("format"),
	}
	c.SharedCatalog = true
	if v := str("sharedCatalog"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:sharedCatalog must be true or false, not %q", Namespace, v))
		}
		c.SharedCatalog = b
	}
	if v := str("skipAwait"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:skipAwait must be true or false, not %q", Namespace, v))
		}
		c.SkipAwait = b
	}
	if v := str("imagePullSecrets"); v != "" {
		if err := json.Unmarshal([]byte(v), &c.ImagePullSecrets); err != nil {
			errs = append(errs, fmt.Errorf("%s:imagePullSecrets must be a list of Secret names such as [ghcr-pull] "+
				"(set it with `pulumi config set --path '%s:imagePullSecrets[0]' ghcr-pull`): %w", Namespace, Namespace, err))
		}
	}
	if err := decodeList(str("servers"), "servers", &c.Servers); err != nil {
		errs = append(errs, err)
	}
	if err := decodeList(str("clusters"), "clusters", &c.Clusters); err != nil {
		errs = append(errs, err)
	}
	if err := decodeList(str("restores"), "restores", &c.Restores); err != nil {
		errs = append(errs, err)
	}
	// An object key left at {} (the project's default for retention and
	// store) is unset: no prune, the folder store, no notify, no exporter.
	for _, o := range []struct {
		key, example, set string
		decode            func(raw string) error
	}{
		{"retention", "{keepDaily: 7, keepWeekly: 4, minKeep: 3}", "retention.keepDaily' 7", func(raw string) error { return decodeObject(raw, &c.Retention) }},
		{"notify", "{secretName: felis-notify, key: url}", "notify.secretName' felis-notify", func(raw string) error { return decodeObject(raw, &c.Notify) }},
		{"store", "{url: s3://felis-backups/worlds, endpoint: http://minio.storage:9000, pathStyle: true, credentialsSecretName: felis-s3}",
			"store.url' s3://felis-backups/worlds", func(raw string) error { return decodeObject(raw, &c.Store) }},
		{"metrics", "{enabled: true, maxAge: 26h}", "metrics.enabled' true", func(raw string) error { return decodeObject(raw, &c.Metrics) }},
	} {
		if v := str(o.key); v != "" {
			if err := o.decode(v); err != nil {
				errs = append(errs, fmt.Errorf("%s:%s must be an object such as %s (set it with `pulumi config set --path '%s:%s`): %w", Namespace, o.key, o.example, Namespace, o.set, err))
			}
		}
	}
	if c.Metrics != nil && !c.Metrics.Enabled {
		c.Metrics = nil
	}
	c.withDefaults()
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// unknownKeys reports worldbackup: keys that the program does not read.
func unknownKeys(get func(string) (string, bool), present []string) []error {
	fold := func(k string) string {
		return strings.NewReplacer("_", "", "-", "", ".", "").Replace(strings.ToLower(k))
	}
	known := map[string]string{} // folded → proper
	for _, k := range keys() {
		known[fold(k)] = k
	}
	unknown := func(k string) error {
		if proper, ok := known[fold(k)]; ok {
			return fmt.Errorf("%s:%s is not a key this program reads: did you mean %s:%s?", Namespace, k, Namespace, proper)
		}
		return fmt.Errorf("%s:%s is not a key this program reads (it reads %s): remove it with `pulumi config rm %s:%s`",
			Namespace, k, strings.Join(keys(), ", "), Namespace, k)
	}
	var errs []error
	reported := map[string]bool{}
	for _, full := range present {
		name, ok := strings.CutPrefix(full, Namespace+":")
		if !ok || slices.Contains(keys(), name) {
			continue
		}
		reported[name] = true
		errs = append(errs, unknown(name))
	}
	for _, k := range keys() {
		snake := strings.ToLower(regexp.MustCompile(`([a-z])([A-Z])`).ReplaceAllString(k, "${1}_${2}"))
		for _, v := range []string{strings.ToLower(k), snake, strings.ReplaceAll(snake, "_", "-")} {
			if _, ok := get(Namespace + ":" + v); ok && v != k && !reported[v] {
				reported[v] = true
				errs = append(errs, unknown(v))
			}
		}
	}
	return errs
}

// decodeList decodes a JSON list of objects strictly: an unknown field (a
// typo such as "nmae") is an error, not a silently ignored value.
// decodeObject decodes the JSON object raw into a new T at *into, refusing
// unknown fields; an empty object leaves *into nil.
func decodeObject[T comparable](raw string, into **T) error {
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	var v T
	if err := dec.Decode(&v); err != nil {
		return err
	}
	var zero T
	if v != zero {
		*into = &v
	}
	return nil
}

func decodeList[T any](raw, key string, into *[]T) error {
	if raw == "" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return fmt.Errorf("%s:%s must be a list of objects (set it with `pulumi config set --path`, or as a YAML list in Pulumi.<stack>.yaml): %w", Namespace, key, err)
	}
	return nil
}

func (c *Config) withDefaults() {
	if c.RunID == "" {
		c.RunID = "initial"
	}
	if c.SecurityMode == "" {
		c.SecurityMode = "baseline"
	}
	if len(c.Clusters) == 0 {
		c.Clusters = []Cluster{{Name: DefaultCluster}}
	}
}

// needsClaim reports whether a backup, prune or restore of c uses the
// backup claim: a server without an S3 store, or a restore of an archive
// path.
func (c Config) needsClaim() bool {
	for _, s := range c.Servers {
		if c.storeOf(s) == nil {
			return true
		}
	}
	for _, r := range c.Restores {
		if r.byRun() && c.storeOf(c.server(r.Server)) == nil || !r.byRun() && !strings.HasPrefix(r.ArchiveRef, "s3://") {
			return true
		}
	}
	return false
}

// Validate reports every problem in c, each naming the config key to fix.
// Inputs that the WorldBackup component checks itself (image format, server
// name length, quantities) are left to it, so there is one rule per input.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s:"+format, append([]any{Namespace}, args...)...))
	}
	if c.Image == "" {
		add("image is required: build and push the archiver image with `make image-push REGISTRY=<registry>`, then `pulumi config set worldbackup:image <the reference it prints>`")
	}
	if c.BackupClaim == "" && c.needsClaim() {
		add("backupClaim is required (unless every server has an S3 store): `pulumi config set worldbackup:backupClaim <name of the PVC that receives the archives>`, or `pulumi config set --path 'worldbackup:store.url' s3://<bucket>/<prefix>` with its endpoint and credentialsSecretName")
	}
	if len(c.Servers) == 0 {
		add("servers is empty: list at least one server, e.g. `pulumi config set --path 'worldbackup:servers[0].name' lobby`")
	}
	seen := map[string]bool{}
	for i, s := range c.Servers {
		switch {
		case s.Name == "":
			add("servers[%d].name is required", i)
		case seen[s.Name]:
			add("servers[%d].name %q is listed twice: each server is backed up once per run, remove the duplicate", i, s.Name)
		}
		seen[s.Name] = true
		if s.Prune != nil && s.Prune.RunID == "" {
			add("servers[%d].prune.runId is required: it names the prune's Job, and a new one prunes again, e.g. `pulumi config set --path 'worldbackup:servers[%d].prune.runId' p1`", i, i)
		}
		if s.Verify != nil && !s.Verify.scheduled() && (c.RenderDir != "" || c.SkipAwait) {
			add("servers[%d].verify needs this run's backup recorded before the verify's Job looks it up, which `pulumi up` makes sure of only when it waits for the backup: unset worldbackup:renderDir and worldbackup:skipAwait, or verify the newest run on a schedule instead (servers[%d].verify.schedule, e.g. @daily-random), or remove servers[%d].verify", i, i, i)
		}
		if v := s.Verify; v != nil && !v.scheduled() && (v.TimeZone != "" || v.Spread != "") {
			add("servers[%d].verify.timeZone and .spread go with servers[%d].verify.schedule: set a schedule, or remove them", i, i)
		}
		if s.Schedule == "" && (s.TimeZone != "" || s.Spread != "") {
			add("servers[%d].timeZone and .spread go with servers[%d].schedule: set a schedule, or remove them", i, i)
		}
	}
	clusters := map[string]bool{}
	for i, cl := range c.Clusters {
		switch {
		case !clusterName.MatchString(cl.Name):
			add("clusters[%d].name %q must be a short DNS label (lowercase letters, digits and '-', at most 32): it names the provider, the render sub-folder and the run IDs", i, cl.Name)
		case clusters[cl.Name]:
			add("clusters[%d].name %q is listed twice: remove the duplicate", i, cl.Name)
		}
		clusters[cl.Name] = true
		switch {
		case cl.Concurrency < 0 || cl.Concurrency > provider.MaxConcurrency:
			add("clusters[%d].concurrency is %d: it caps how many backups run at once in the cluster, from 1 to %d (leave it out for no cap)", i, cl.Concurrency, provider.MaxConcurrency)
		case cl.Concurrency > 0 && (c.RenderDir != "" || c.SkipAwait):
			add("clusters[%d].concurrency caps the backups that `pulumi up` waits for, and with worldbackup:renderDir or worldbackup:skipAwait it waits for none: remove clusters[%d].concurrency, or unset renderDir and skipAwait", i, i)
		}
		if c.RenderDir != "" && (cl.Context != "" || cl.Kubeconfig != "") {
			add("clusters[%d] (%s) sets a context or kubeconfig, but renderDir is set: render mode writes manifests instead of deploying. Remove worldbackup:renderDir to deploy, or the cluster's context/kubeconfig to render", i, cl.Name)
		}
	}
	restored := map[string]bool{}
	for i, r := range c.Restores {
		switch {
		case r.Server == "":
			add("restores[%d] needs server: the server whose world is restored", i)
		case r.byRun() && (r.ArchiveRef != "" || r.SHA256 != ""):
			add("restores[%d] (%s) sets fromRun and archiveRef or sha256: the catalog gives the run's archive and checksum, remove archiveRef and sha256 (or fromRun)", i, r.Server)
		case !r.byRun() && (r.ArchiveRef == "" || r.SHA256 == ""):
			add("restores[%d] (%s) needs fromRun (a run ID, or %s for the server's newest run), or archiveRef and sha256 (from `archiver list`, or a backup's archiveRef output and its row)", i, r.Server, jobapi.RunLatest)
		case !r.byRun() && r.FromServer != "":
			add("restores[%d] (%s) sets fromServer without fromRun: set fromRun, or remove fromServer", i, r.Server)
		}
		if r.byRun() {
			if err := jobapi.CheckRunRef(r.FromRun); err != nil {
				add("restores[%d].fromRun: %s", i, err)
			}
		}
		if r.RunID != "" && jobapi.CheckRunID(r.RunID) != nil {
			add("restores[%d].runId %q: use 1 to %d characters from A-Z a-z 0-9 . _ -, starting with a letter or digit", i, r.RunID, jobapi.MaxRunIDLen)
		}
		if r.Cluster == "" && len(c.Clusters) > 1 {
			add("restores[%d] (%s) must name its cluster: there are %d clusters", i, r.Server, len(c.Clusters))
		}
		if r.Cluster != "" && !clusters[r.Cluster] {
			add("restores[%d].cluster %q is not one of worldbackup:clusters", i, r.Cluster)
		}
		key := c.clusterOf(r) + "/" + r.Server
		if restored[key] {
			add("restores[%d]: %s is restored twice in one run: keep one entry", i, r.Server)
		}
		restored[key] = true
		if c.SkipAwait && seen[r.Server] {
			add("skipAwait is true, but restores[%d] (%s) is ordered after this run's backup of %s: without waiting, the restore would start as soon as the backup Job is created and could replace the world before it is saved. Unset worldbackup:skipAwait for this run, or back up and restore in two runs", i, r.Server, r.Server)
		}
	}
	for i, r := range c.Restores {
		if strings.HasPrefix(r.ArchiveRef, "s3://") && c.storeOf(c.server(r.Server)) == nil {
			add("restores[%d] (%s): archiveRef %q is in an S3 store, but neither worldbackup:store nor the server's store is set: set one with its endpoint and credentialsSecretName", i, r.Server, r.ArchiveRef)
		}
		// A restore reads the store of the server it restores: a run of
		// another server configured with another store is out of its reach
		// (its Job would fail at run time, after the backups of this run).
		if from := r.FromServer; r.byRun() && from != "" && from != r.Server && slices.ContainsFunc(c.Servers, func(s Server) bool { return s.Name == from }) &&
			c.storeKey(c.server(from)) != c.storeKey(c.server(r.Server)) {
			add("restores[%d] (%s) restores a run of %s, whose archives are in another store than %s's (%s, against %s): a restore reads its own server's store; "+
				"give both servers the same store, or restore that run by archiveRef and sha256 with a store that holds it",
				i, r.Server, from, r.Server, storeName(c.storeKey(c.server(from))), storeName(c.storeKey(c.server(r.Server))))
		}
	}
	c.checkSharedCatalog(add)
	errs = append(errs, c.checkNames()...)
	errs = append(errs, c.checkRunIDs()...)
	errs = append(errs, c.checkGrace()...)
	if c.Format != "" && jobapi.CheckFormat(c.Format) != nil {
		add("format %q is not an archive format: use %s, e.g. `pulumi config set worldbackup:format %s`", c.Format, strings.Join(jobapi.Formats(), " or "), jobapi.FormatChunked)
	}
	for i, s := range c.Servers {
		if s.Format != "" && jobapi.CheckFormat(s.Format) != nil {
			add("servers[%d].format %q is not an archive format: use %s, or remove it for worldbackup:format", i, s.Format, strings.Join(jobapi.Formats(), " or "))
		}
		if s.Compression != "" && !jobapi.TakesCompression(c.formatOf(s)) {
			why := "the format is chunked"
			if c.formatOf(s) == "" {
				why = "neither servers[" + strconv.Itoa(i) + "].format nor worldbackup:format is set, so the format is chunked, the default"
			}
			add("servers[%d].compression is %q, but %s: %s: remove compression, or set servers[%d].format: tar",
				i, s.Compression, why, jobapi.ChunkedCompresses, i)
		}
	}
	if c.RenderDir != "" && !filepath.IsAbs(c.RenderDir) && strings.HasPrefix(c.RenderDir, "~") {
		add("renderDir %q: `~` is not expanded; use an absolute path or one relative to the project folder", c.RenderDir)
	}
	return errors.Join(errs...)
}

// checkNames refuses two entries that would declare the same Pulumi
// resource (resourceName: <cluster>-<server>, the same type), which
// preview would fail on with a duplicate URN that names no config key:
// clusters eu and eu-west with servers west-lobby and lobby both give
// eu-west-lobby. A server's schedule, prune and verify are named after its
// backup, so the backups and the restores are all there is to compare.
func (c Config) checkNames() []error {
	var errs []error
	for _, kind := range []struct {
		what    string
		entries func(yield func(cluster, entry, name string))
	}{
		{"backup", func(yield func(string, string, string)) {
			for ci, cl := range c.Clusters {
				for si, s := range c.Servers {
					yield(cl.Name, fmt.Sprintf("clusters[%d] (%s) with servers[%d] (%s)", ci, cl.Name, si, s.Name), resourceName(cl.Name, s.Name, ""))
				}
			}
			// The backups before restores (preRestoreBackup), told apart
			// from their cluster's own: a server named lobby-pre-restore
			// would share the name of lobby's.
			for ri, r := range c.Restores {
				if cl := c.clusterOf(r); cl != "" && c.backsUp(r.Server) {
					yield(cl+" (before a restore)", fmt.Sprintf("restores[%d] (%s in cluster %s, its backup before the restore)", ri, r.Server, cl),
						resourceName(cl, r.Server, suffixPreRestore))
				}
			}
		}},
		{"restore", func(yield func(string, string, string)) {
			for ri, r := range c.Restores {
				if cl := c.clusterOf(r); cl != "" && r.Server != "" {
					yield(cl, fmt.Sprintf("restores[%d] (%s in cluster %s)", ri, r.Server, cl), resourceName(cl, r.Server, suffixRestore))
				}
			}
		}},
	} {
		first := map[string]string{} // resource name → entry
		firstCluster := map[string]string{}
		kind.entries(func(cluster, entry, name string) {
			prev, dup := first[name]
			switch {
			case !dup:
				first[name], firstCluster[name] = entry, cluster
			case firstCluster[name] != cluster: // the same cluster's duplicates are refused as such
				errs = append(errs, fmt.Errorf("%s:%s and %s would both name the %s resource %q, which Pulumi refuses: rename a cluster or a server so that the names differ",
					Namespace, prev, entry, kind.what, name))
			}
		})
	}
	return errs
}

// clusterOf returns the cluster r restores in: its own, or the only one
// when it names none ("" when it names none among several).
func (c Config) clusterOf(r Restore) string {
	if r.Cluster == "" && len(c.Clusters) == 1 {
		return c.Clusters[0].Name
	}
	return r.Cluster
}

// deadline is a backup deadline and the config key that sets it.
type deadline struct {
	d    time.Duration
	name string
}

// longestDeadlines returns the longest backup deadline of the servers of
// each store (by storeKey): what a prune of that store must wait for.
func (c Config) longestDeadlines() map[string]deadline {
	longest := map[string]deadline{}
	for i, s := range c.Servers {
		d, name := s.Deadline, fmt.Sprintf("servers[%d].deadline", i)
		if d == "" {
			d, name = provider.DefaultDeadline, fmt.Sprintf("servers[%d].deadline (not set: the default)", i)
		}
		v, err := time.ParseDuration(d)
		if k := c.storeKey(s); err == nil && v > longest[k].d {
			longest[k] = deadline{v, name}
		}
	}
	return longest
}

// checkGrace refuses a prune grace shorter than the longest deadline of
// the backups into the same store (jobapi.CheckGrace): the retention after
// each backup (a server's own, or worldbackup:retention) and a server's
// prune. A prune removes the store's unreferenced packs, whichever server
// wrote them, so every backup into the store counts. A grace or deadline
// that does not parse is left to the component, which names it.
func (c Config) checkGrace() []error {
	longest := c.longestDeadlines()
	var errs []error
	reported := map[string]bool{}
	check := func(key, grace string, s Server) {
		g, shown, ok := jobapi.GraceOf(grace)
		if !ok {
			return
		}
		l := longest[c.storeKey(s)]
		if err := jobapi.CheckGrace(g, l.d, l.name); err != nil && !reported[key] {
			reported[key] = true
			errs = append(errs, fmt.Errorf("%s:%s %s %w", Namespace, key, shown, err))
		}
	}
	for i, s := range c.Servers {
		switch {
		case s.Retention != nil:
			check(fmt.Sprintf("servers[%d].retention.grace", i), s.Retention.Grace, s)
		case c.Retention != nil:
			check("retention.grace", c.Retention.Grace, s)
		}
		if s.Prune != nil {
			check(fmt.Sprintf("servers[%d].prune.grace", i), s.Prune.Grace, s)
		}
	}
	return errs
}

// storeName is storeKey's key in words.
func storeName(key string) string {
	if key == "" {
		return "the backup claim"
	}
	return key
}

// storeKey names the store server s backs up into: its S3 store's
// endpoint and URL, or "" for the backup claim.
func (c Config) storeKey(s Server) string {
	if st := c.storeOf(s); st != nil {
		return st.Endpoint + " " + st.URL
	}
	return ""
}

// checkRunIDs refuses a run ID that the program derives (RunID:
// <cluster>.<server>.<trigger>) longer than a run ID may be, naming the
// config key whose value is part of it: the component's own error would
// quote the whole ID and name none.
func (c Config) checkRunIDs() []error {
	var errs []error
	check := func(cl Cluster, server, trigger, key string) {
		if id := RunID(cl.Name, server, trigger); len(id) > jobapi.MaxRunIDLen {
			errs = append(errs, fmt.Errorf("%s:%s makes the run ID %s of cluster %q and server %q %d characters long, over %d: "+
				"shorten %s:%s, or the cluster's or the server's name", Namespace, key, id, cl.Name, server, len(id), jobapi.MaxRunIDLen, Namespace, key))
		}
	}
	for _, cl := range c.Clusters {
		for i, s := range c.Servers {
			check(cl, s.Name, c.RunID, "runId")
			if s.Verify != nil && !s.Verify.scheduled() {
				check(cl, s.Name, c.RunID+".verify", "runId")
			}
			if s.Prune != nil && s.Prune.RunID != "" {
				check(cl, s.Name, s.Prune.RunID, fmt.Sprintf("servers[%d].prune.runId", i))
			}
		}
	}
	for i, r := range c.Restores {
		key := fmt.Sprintf("restores[%d].runId", i)
		if r.RunID == "" && r.byRun() {
			key = fmt.Sprintf("restores[%d].fromRun", i)
		}
		saved := c.backsUp(r.Server)
		for _, cl := range c.Clusters {
			if cl.Name == c.clusterOf(r) {
				check(cl, r.Server, r.trigger(), key)
				if saved { // the backup before the restore (preRestoreBackup)
					check(cl, r.Server, r.preTrigger(), key)
				}
			}
		}
	}
	return errs
}
