// Package worldbackup is the Go API of the worldbackup components in the
// shape of Pulumi's Go SDKs: worldbackup.NewWorldBackup(ctx, name,
// &worldbackup.WorldBackupArgs{...}, opts...), args by pointer with every
// input at the top level (no nested JobInputs), plain options as values
// (SecurityMode: worldbackup.SecurityModeRestricted) or pulumi.BoolRef, and
// errors that name the resource.
//
// It is a thin layer over package provider, where the components live (the
// plugin serves the same constructors to TypeScript, Python and YAML): each
// Args struct is copied field by field, by name, into provider's args, so
// both always take the same inputs, checked, defaulted and documented once
// there (see the schema's descriptions, or provider's Annotate methods).
// The components and nested types are provider's (type aliases).
package worldbackup

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/provider"
)

// The components (their outputs: JobName, Namespace, RunID, ArchiveRef,
// Status, SHA256, SizeBytes, CronJobName).
type (
	WorldBackup         = provider.WorldBackup
	WorldRestore        = provider.WorldRestore
	WorldPrune          = provider.WorldPrune
	WorldBackupSchedule = provider.WorldBackupSchedule
	WorldVerify         = provider.WorldVerify
	WorldVerifySchedule = provider.WorldVerifySchedule
	WorldMetrics        = provider.WorldMetrics
)

// The nested inputs, their enums and a component's input problems.
type (
	RconArgs       = provider.RconArgs
	NotifyArgs     = provider.NotifyArgs
	EncryptionArgs = provider.EncryptionArgs
	RetentionArgs  = provider.RetentionArgs
	StoreArgs      = provider.StoreArgs
	TolerationArgs = provider.TolerationArgs
	SecurityMode   = provider.SecurityMode
	Compression    = provider.Compression
	Format         = provider.Format
	InputError     = provider.InputError
	Problem        = provider.Problem
	// Gates are a program's concurrency caps, one per cluster: the
	// WorldBackups that set Concurrency share one (WorldBackupArgs.Gates).
	Gates = provider.Gates
)

// The enum values.
const (
	SecurityModeBaseline   = provider.SecurityModeBaseline
	SecurityModeRestricted = provider.SecurityModeRestricted
	CompressionZstd        = provider.CompressionZstd
	CompressionGzip        = provider.CompressionGzip
	CompressionNone        = provider.CompressionNone
	FormatTar              = provider.FormatTar
	FormatChunked          = provider.FormatChunked
)

// WorldBackupArgs are the inputs of a WorldBackup (see
// provider.WorldBackupArgs and provider.JobInputs for each one's meaning and
// default). Server, RunId and Image are required.
type WorldBackupArgs struct {
	Server             string
	RunId              pulumi.StringInput
	Image              pulumi.StringInput
	BackupClaimName    pulumi.StringInput
	Namespace          pulumi.StringInput
	ServiceAccountName pulumi.StringInput
	BackupRoot         pulumi.StringInput
	WorldRoot          pulumi.StringInput
	WorldClaimName     pulumi.StringInput
	Deadline           pulumi.StringInput
	CpuLimit           pulumi.StringInput
	MemoryLimit        pulumi.StringInput
	SecurityMode       SecurityMode
	RunAsUser          pulumi.IntInput
	RunAsGroup         pulumi.IntInput
	FsGroup            pulumi.IntInput
	TtlAfterFinished   pulumi.StringInput
	BackoffLimit       pulumi.IntInput
	NodeName           pulumi.StringInput
	NodeSelector       pulumi.StringMapInput
	GamePodSelector    pulumi.StringMapInput
	GamePodAffinity    pulumi.StringInput
	Tolerations        []TolerationArgs
	PriorityClassName  pulumi.StringInput
	ImagePullSecrets   pulumi.StringArrayInput
	Labels             pulumi.StringMapInput
	Annotations        pulumi.StringMapInput
	SkipAwait          bool
	Timeout            string
	ReplaceUnready     *bool
	Preflight          *bool
	KubeContext        string
	Kubeconfig         string

	FormerOwner      pulumi.StringInput
	ConfigSecretName pulumi.StringInput
	ConfigMountPath  pulumi.StringInput
	Compression      Compression
	Format           Format
	Excludes         pulumi.StringArrayInput
	Rcon             *RconArgs
	Retention        *RetentionArgs
	Store            *StoreArgs
	Notify           *NotifyArgs
	Encryption       *EncryptionArgs
	Concurrency      *int
	Gates            *Gates
}

// WorldRestoreArgs are the inputs of a WorldRestore (see
// provider.WorldRestoreArgs). Server, RunId and Image are required, and
// either ArchiveRef with Sha256 or FromRun (a run ID, or latest).
type WorldRestoreArgs struct {
	Server             string
	RunId              pulumi.StringInput
	Image              pulumi.StringInput
	BackupClaimName    pulumi.StringInput
	Namespace          pulumi.StringInput
	ServiceAccountName pulumi.StringInput
	BackupRoot         pulumi.StringInput
	WorldRoot          pulumi.StringInput
	WorldClaimName     pulumi.StringInput
	Deadline           pulumi.StringInput
	CpuLimit           pulumi.StringInput
	MemoryLimit        pulumi.StringInput
	SecurityMode       SecurityMode
	RunAsUser          pulumi.IntInput
	RunAsGroup         pulumi.IntInput
	FsGroup            pulumi.IntInput
	TtlAfterFinished   pulumi.StringInput
	BackoffLimit       pulumi.IntInput
	NodeName           pulumi.StringInput
	NodeSelector       pulumi.StringMapInput
	GamePodSelector    pulumi.StringMapInput
	GamePodAffinity    pulumi.StringInput
	Tolerations        []TolerationArgs
	PriorityClassName  pulumi.StringInput
	ImagePullSecrets   pulumi.StringArrayInput
	Labels             pulumi.StringMapInput
	Annotations        pulumi.StringMapInput
	SkipAwait          bool
	Timeout            string
	ReplaceUnready     *bool
	Preflight          *bool
	KubeContext        string
	Kubeconfig         string

	ArchiveRef       pulumi.StringInput
	Sha256           pulumi.StringInput
	Replace          pulumi.BoolInput
	MaxBytes         pulumi.StringInput
	MaxEntries       pulumi.IntInput
	Store            *StoreArgs
	Notify           *NotifyArgs
	Encryption       *EncryptionArgs
	FromRun          pulumi.StringInput
	FromServer       pulumi.StringInput
	ConfigSecretName pulumi.StringInput
	ConfigMountPath  pulumi.StringInput
}

// WorldPruneArgs are the inputs of a WorldPrune (see
// provider.WorldPruneArgs). Server, RunId, Image and Retention are
// required. A prune mounts no world: it has no WorldRoot or WorldClaimName.
type WorldPruneArgs struct {
	Server             string
	RunId              pulumi.StringInput
	Image              pulumi.StringInput
	BackupClaimName    pulumi.StringInput
	Namespace          pulumi.StringInput
	ServiceAccountName pulumi.StringInput
	BackupRoot         pulumi.StringInput
	Deadline           pulumi.StringInput
	CpuLimit           pulumi.StringInput
	MemoryLimit        pulumi.StringInput
	SecurityMode       SecurityMode
	RunAsUser          pulumi.IntInput
	RunAsGroup         pulumi.IntInput
	FsGroup            pulumi.IntInput
	TtlAfterFinished   pulumi.StringInput
	BackoffLimit       pulumi.IntInput
	NodeName           pulumi.StringInput
	NodeSelector       pulumi.StringMapInput
	GamePodSelector    pulumi.StringMapInput
	GamePodAffinity    pulumi.StringInput
	Tolerations        []TolerationArgs
	PriorityClassName  pulumi.StringInput
	ImagePullSecrets   pulumi.StringArrayInput
	Labels             pulumi.StringMapInput
	Annotations        pulumi.StringMapInput
	SkipAwait          bool
	Timeout            string
	ReplaceUnready     *bool
	Preflight          *bool
	KubeContext        string
	Kubeconfig         string

	ConfigSecretName pulumi.StringInput
	ConfigMountPath  pulumi.StringInput
	Retention        *RetentionArgs
	DryRun           bool
	BackupDeadline   pulumi.StringInput
	Store            *StoreArgs
	Notify           *NotifyArgs
}

// WorldBackupScheduleArgs are the inputs of a WorldBackupSchedule: those of
// a WorldBackup's pod (see provider.WorldBackupScheduleArgs; each run's ID
// is its Job's name, and Pulumi does not await the runs, so there is no
// RunId, SkipAwait, Timeout, ReplaceUnready, Preflight or KubeContext) and
// the schedule's own. Server, Image and Schedule are required.
type WorldBackupScheduleArgs struct {
	Server             string
	Image              pulumi.StringInput
	BackupClaimName    pulumi.StringInput
	Namespace          pulumi.StringInput
	ServiceAccountName pulumi.StringInput
	BackupRoot         pulumi.StringInput
	WorldRoot          pulumi.StringInput
	WorldClaimName     pulumi.StringInput
	Deadline           pulumi.StringInput
	CpuLimit           pulumi.StringInput
	MemoryLimit        pulumi.StringInput
	SecurityMode       SecurityMode
	RunAsUser          pulumi.IntInput
	RunAsGroup         pulumi.IntInput
	FsGroup            pulumi.IntInput
	TtlAfterFinished   pulumi.StringInput
	BackoffLimit       pulumi.IntInput
	NodeName           pulumi.StringInput
	NodeSelector       pulumi.StringMapInput
	GamePodSelector    pulumi.StringMapInput
	GamePodAffinity    pulumi.StringInput
	Tolerations        []TolerationArgs
	PriorityClassName  pulumi.StringInput
	ImagePullSecrets   pulumi.StringArrayInput
	Labels             pulumi.StringMapInput
	Annotations        pulumi.StringMapInput

	FormerOwner      pulumi.StringInput
	ConfigSecretName pulumi.StringInput
	ConfigMountPath  pulumi.StringInput
	Compression      Compression
	Format           Format
	Excludes         pulumi.StringArrayInput
	Rcon             *RconArgs
	Retention        *RetentionArgs
	Store            *StoreArgs

	Schedule              string
	TimeZone              string
	StartingDeadline      string
	SuccessfulJobsHistory *int
	FailedJobsHistory     *int
	Suspend               bool
	Notify                *NotifyArgs
	Encryption            *EncryptionArgs
	Spread                string
	SpreadKey             string
}

// WorldVerifyArgs are the inputs of a WorldVerify (see
// provider.WorldVerifyArgs). Server, RunId and Image are required, and
// ArchiveRef with Sha256, or FromRun. A verify mounts no world: it has no
// WorldRoot or WorldClaimName.
type WorldVerifyArgs struct {
	Server             string
	RunId              pulumi.StringInput
	Image              pulumi.StringInput
	BackupClaimName    pulumi.StringInput
	Namespace          pulumi.StringInput
	ServiceAccountName pulumi.StringInput
	BackupRoot         pulumi.StringInput
	Deadline           pulumi.StringInput
	CpuLimit           pulumi.StringInput
	MemoryLimit        pulumi.StringInput
	SecurityMode       SecurityMode
	RunAsUser          pulumi.IntInput
	RunAsGroup         pulumi.IntInput
	FsGroup            pulumi.IntInput
	TtlAfterFinished   pulumi.StringInput
	BackoffLimit       pulumi.IntInput
	NodeName           pulumi.StringInput
	NodeSelector       pulumi.StringMapInput
	GamePodSelector    pulumi.StringMapInput
	GamePodAffinity    pulumi.StringInput
	Tolerations        []TolerationArgs
	PriorityClassName  pulumi.StringInput
	ImagePullSecrets   pulumi.StringArrayInput
	Labels             pulumi.StringMapInput
	Annotations        pulumi.StringMapInput
	SkipAwait          bool
	Timeout            string
	ReplaceUnready     *bool
	Preflight          *bool
	KubeContext        string
	Kubeconfig         string
	Notify             *NotifyArgs

	ArchiveRef              pulumi.StringInput
	Sha256                  pulumi.StringInput
	FromRun                 pulumi.StringInput
	FromServer              pulumi.StringInput
	ConfigSecretName        pulumi.StringInput
	ConfigMountPath         pulumi.StringInput
	ChunkSample             pulumi.StringInput
	ScratchSize             pulumi.StringInput
	ScratchStorageClassName pulumi.StringInput
	Store                   *StoreArgs
	Encryption              *EncryptionArgs
}

// WorldVerifyScheduleArgs are the inputs of a WorldVerifySchedule: those of
// a WorldVerify's pod by run (see provider.WorldVerifyScheduleArgs; FromRun
// defaults to latest, and there is no RunId, ArchiveRef, Sha256, SkipAwait,
// Timeout, ReplaceUnready, Preflight or KubeContext) and the schedule's
// own. Server, Image and Schedule are required.
type WorldVerifyScheduleArgs struct {
	Server             string
	Image              pulumi.StringInput
	BackupClaimName    pulumi.StringInput
	Namespace          pulumi.StringInput
	ServiceAccountName pulumi.StringInput
	BackupRoot         pulumi.StringInput
	Deadline           pulumi.StringInput
	CpuLimit           pulumi.StringInput
	MemoryLimit        pulumi.StringInput
	SecurityMode       SecurityMode
	RunAsUser          pulumi.IntInput
	RunAsGroup         pulumi.IntInput
	FsGroup            pulumi.IntInput
	TtlAfterFinished   pulumi.StringInput
	BackoffLimit       pulumi.IntInput
	NodeName           pulumi.StringInput
	NodeSelector       pulumi.StringMapInput
	GamePodSelector    pulumi.StringMapInput
	GamePodAffinity    pulumi.StringInput
	Tolerations        []TolerationArgs
	PriorityClassName  pulumi.StringInput
	ImagePullSecrets   pulumi.StringArrayInput
	Labels             pulumi.StringMapInput
	Annotations        pulumi.StringMapInput
	Notify             *NotifyArgs

	FromRun                 pulumi.StringInput
	FromServer              pulumi.StringInput
	ConfigSecretName        pulumi.StringInput
	ConfigMountPath         pulumi.StringInput
	ChunkSample             pulumi.StringInput
	ScratchSize             pulumi.StringInput
	ScratchStorageClassName pulumi.StringInput
	Store                   *StoreArgs
	Encryption              *EncryptionArgs

	Schedule              string
	TimeZone              string
	StartingDeadline      string
	SuccessfulJobsHistory *int
	FailedJobsHistory     *int
	Suspend               bool
	Spread                string
	SpreadKey             string
}

// WorldMetricsArgs are the inputs of a WorldMetrics, the catalog's
// Prometheus exporter and status page (see provider.WorldMetricsArgs).
// Image is required.
type WorldMetricsArgs struct {
	Image              pulumi.StringInput
	Namespace          pulumi.StringInput
	Name               string
	ServiceAccountName pulumi.StringInput
	ConfigSecretName   pulumi.StringInput
	ConfigMountPath    pulumi.StringInput
	Cluster            pulumi.StringInput
	MaxAge             string
	ServerMaxAges      map[string]string
	Port               *int
	RunAsUser          *int
	RunAsGroup         *int
	CpuLimit           pulumi.StringInput
	MemoryLimit        pulumi.StringInput
	NodeSelector       pulumi.StringMapInput
	Tolerations        []TolerationArgs
	PriorityClassName  pulumi.StringInput
	ImagePullSecrets   pulumi.StringArrayInput
	Labels             pulumi.StringMapInput
	Annotations        pulumi.StringMapInput
}

// NewWorldBackup registers a WorldBackup: one backup run, a Kubernetes Job
// (provider.NewWorldBackup). Invalid inputs give an error naming the
// resource that wraps a *InputError listing them all.
func NewWorldBackup(ctx *pulumi.Context, name string, args *WorldBackupArgs, opts ...pulumi.ResourceOption) (*WorldBackup, error) {
	return construct(ctx, "WorldBackup", name, args, provider.NewWorldBackup, opts)
}

// NewWorldRestore registers a WorldRestore: one restore of an archive into a
// server's world, a Kubernetes Job with no database access
// (provider.NewWorldRestore).
func NewWorldRestore(ctx *pulumi.Context, name string, args *WorldRestoreArgs, opts ...pulumi.ResourceOption) (*WorldRestore, error) {
	return construct(ctx, "WorldRestore", name, args, provider.NewWorldRestore, opts)
}

// NewWorldPrune registers a WorldPrune: one prune of a server's archives by
// a retention policy (provider.NewWorldPrune).
func NewWorldPrune(ctx *pulumi.Context, name string, args *WorldPruneArgs, opts ...pulumi.ResourceOption) (*WorldPrune, error) {
	return construct(ctx, "WorldPrune", name, args, provider.NewWorldPrune, opts)
}

// NewWorldBackupSchedule registers a WorldBackupSchedule: backups on a
// schedule, a Kubernetes CronJob (provider.NewWorldBackupSchedule).
func NewWorldBackupSchedule(ctx *pulumi.Context, name string, args *WorldBackupScheduleArgs, opts ...pulumi.ResourceOption) (*WorldBackupSchedule, error) {
	return construct(ctx, "WorldBackupSchedule", name, args, provider.NewWorldBackupSchedule, opts)
}

// NewWorldVerify registers a WorldVerify: one verify of an archive down to
// the chunks, a Kubernetes Job with no database access and no world
// (provider.NewWorldVerify).
func NewWorldVerify(ctx *pulumi.Context, name string, args *WorldVerifyArgs, opts ...pulumi.ResourceOption) (*WorldVerify, error) {
	return construct(ctx, "WorldVerify", name, args, provider.NewWorldVerify, opts)
}

// NewWorldVerifySchedule registers a WorldVerifySchedule: the newest run of
// a server verified on a schedule, a Kubernetes CronJob
// (provider.NewWorldVerifySchedule).
func NewWorldVerifySchedule(ctx *pulumi.Context, name string, args *WorldVerifyScheduleArgs, opts ...pulumi.ResourceOption) (*WorldVerifySchedule, error) {
	return construct(ctx, "WorldVerifySchedule", name, args, provider.NewWorldVerifySchedule, opts)
}

// NewWorldMetrics registers a WorldMetrics: the catalog's exporter, a
// Deployment and a Service (provider.NewWorldMetrics).
func NewWorldMetrics(ctx *pulumi.Context, name string, args *WorldMetricsArgs, opts ...pulumi.ResourceOption) (*WorldMetrics, error) {
	return construct(ctx, "WorldMetrics", name, args, provider.NewWorldMetrics, opts)
}

// construct converts args (this package's Args for kind) into the provider
// args D and calls the provider's constructor fn with them, naming the
// resource in any error.
func construct[S, D any, C pulumi.ComponentResource](ctx *pulumi.Context, kind, name string, args *S,
	fn func(*pulumi.Context, string, D, ...pulumi.ResourceOption) (C, error), opts []pulumi.ResourceOption) (C, error) {
	var a D
	var zero C
	if err := convert(&a, args, kind, name); err != nil {
		return zero, err
	}
	comp, err := fn(ctx, name, a, opts...)
	if err != nil {
		return zero, fmt.Errorf("%s %q: %w", kind, name, err)
	}
	return comp, nil
}

// convert copies the fields of *src (an Args struct of this package) into
// the provider args *dst, each into dst's field (or promoted field) of the
// same name, compared case-insensitively (RunId: RunID); a plain enum value
// goes to the pointer provider takes ("" = unset).
func convert(dst, src any, kind, name string) error {
	sv := reflect.ValueOf(src)
	if sv.IsNil() {
		return fmt.Errorf("%s %q: args are nil: give at least the required inputs", kind, name)
	}
	sv = sv.Elem()
	dv := reflect.ValueOf(dst).Elem()
	byName := fieldsByName(dv.Type())
	for i := range sv.NumField() {
		sf := sv.Type().Field(i)
		index, ok := byName[strings.ToLower(sf.Name)]
		if !ok {
			return fmt.Errorf("%s %q: provider's args have no field %s", kind, name, sf.Name) // caught by the tests
		}
		from, to := sv.Field(i), dv.FieldByIndex(index)
		switch {
		case from.Type().AssignableTo(to.Type()):
			to.Set(from)
		case to.Kind() == reflect.Pointer && from.Type().AssignableTo(to.Type().Elem()):
			if !from.IsZero() {
				p := reflect.New(to.Type().Elem())
				p.Elem().Set(from)
				to.Set(p)
			}
		default:
			return errors.New("worldbackup: field " + sf.Name + " does not convert") // caught by the tests
		}
	}
	return nil
}

// fieldsByName indexes the exported fields of the struct t, its embedded
// structs' promoted fields included, by lower-case name.
func fieldsByName(t reflect.Type) map[string][]int {
	out := map[string][]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			for k, idx := range fieldsByName(f.Type) {
				if _, own := out[k]; !own {
					out[k] = append([]int{i}, idx...)
				}
			}
			continue
		}
		out[strings.ToLower(f.Name)] = []int{i}
	}
	return out
}
