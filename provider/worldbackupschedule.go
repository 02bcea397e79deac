package provider

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // timeZone is checked wherever the program runs

	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/utilities"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/internal/kubeobj"
	"github.com/worldbackup/worldbackup/provider/internal/settle"
	"github.com/worldbackup/worldbackup/provider/jobspec"
	"github.com/worldbackup/worldbackup/provider/naming"
	"github.com/worldbackup/worldbackup/provider/preflight"
)

// WorldBackupScheduleType is the Pulumi type token of WorldBackupSchedule.
const WorldBackupScheduleType = "worldbackup:index:WorldBackupSchedule"

// Defaults of the schedule inputs.
const (
	DefaultStartingDeadline = "10m"
	DefaultJobsHistory      = 3
)

// WorldBackupScheduleArgs are the inputs of a WorldBackupSchedule: those of
// a WorldBackup (its runId, skipAwait, replaceUnready and timeout are not
// used: each scheduled run's ID is its Job's name, and Pulumi does not await
// the Jobs a CronJob creates) and the schedule's own. The backup's values
// may be Pulumi inputs as for a WorldBackup; the schedule's own are plain.
type WorldBackupScheduleArgs struct {
	// WorldBackupArgs are the inputs of the backup Job each run is; its
	// runId, skipAwait, timeout, replaceUnready, preflight, kubeContext and
	// concurrency are ignored (and not in the plugin's schema:
	// InputsNotTaken).
	WorldBackupArgs
	ScheduleInputs
}

// ScheduleInputs are the inputs of a CronJob beyond its Job's, the same for
// WorldBackupSchedule and WorldVerifySchedule. They are plain values.
type ScheduleInputs struct {
	// Schedule is the cron expression, e.g. "0 4 * * *", or a spread macro
	// such as @daily-random (required; see naming.SpreadSchedule).
	Schedule string `pulumi:"schedule"`
	// Spread shifts Schedule by a stable offset within this window, a Go
	// duration of whole minutes up to 24h ("" = none).
	Spread string `pulumi:"spread,optional"`
	// SpreadKey is what the offset is derived from (default
	// naming.SpreadKey(namespace, server)); the program gives its cluster.
	SpreadKey string `pulumi:"spreadKey,optional"`
	// TimeZone is an IANA time zone, e.g. Europe/Berlin ("" = the
	// controller's, usually UTC).
	TimeZone string `pulumi:"timeZone,optional"`
	// StartingDeadline: a run that could not start within this long of its
	// time is skipped (default 10m).
	StartingDeadline string `pulumi:"startingDeadline,optional"`
	// SuccessfulJobsHistory, FailedJobsHistory: finished Jobs kept (default 3).
	SuccessfulJobsHistory *int `pulumi:"successfulJobsHistory,optional"`
	FailedJobsHistory     *int `pulumi:"failedJobsHistory,optional"`
	// Suspend stops new runs without deleting the CronJob.
	Suspend bool `pulumi:"suspend,optional"`
}

// WorldBackupSchedule is a backup that runs on a schedule: a Kubernetes
// CronJob whose Jobs have the same pod as a WorldBackup's.
type WorldBackupSchedule struct {
	pulumi.ResourceState

	// CronJobName is the CronJob's name, <server>-sched.
	CronJobName pulumi.StringOutput `pulumi:"cronJobName"`
	Namespace   pulumi.StringOutput `pulumi:"namespace"`
	// CronSchedule is the CronJob's schedule: Schedule with its spread.
	CronSchedule pulumi.StringOutput `pulumi:"cronSchedule"`
}

// NewWorldBackupSchedule validates args and registers a WorldBackupSchedule
// with its one child, a kubernetes:batch/v1:CronJob named name+"-cronjob".
func NewWorldBackupSchedule(ctx *pulumi.Context, name string, args WorldBackupScheduleArgs, opts ...pulumi.ResourceOption) (*WorldBackupSchedule, error) {
	comp := &WorldBackupSchedule{}
	out, err := registerCronJob(ctx, WorldBackupScheduleType, name, comp, args.WorldBackupArgs, func(b WorldBackupArgs) (plannedCronJob, error) {
		a := args
		a.WorldBackupArgs = b
		bj, s, pf, err := a.resolve()
		if err != nil {
			return plannedCronJob{}, err
		}
		cj := jobspec.BuildBackupSchedule(bj, s)
		return plannedCronJob{CronJob: cj, Preflight: pf, Requirements: backupRequirements(templateJob(cj), bj)}, nil
	}, opts...)
	if err != nil {
		return nil, err
	}
	comp.CronJobName, comp.Namespace, comp.CronSchedule = out.CronJobName, out.Namespace, out.CronSchedule
	return comp, nil
}

// cronJobOutputs are the outputs of a schedule component, each known once
// its CronJob is registered.
type cronJobOutputs struct {
	CronJobName, Namespace, CronSchedule pulumi.StringOutput
}

// plannedCronJob is a schedule's CronJob and what the Jobs it starts need
// of the cluster.
type plannedCronJob struct {
	CronJob      *batchv1.CronJob
	Preflight    preflightSettings
	Requirements preflight.Requirements
}

// templateJob is the Job cj's template makes, named as cj: what the
// preflight looks at (its claims, service account and Secrets).
func templateJob(cj *batchv1.CronJob) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: cj.Name, Namespace: cj.Namespace}, Spec: cj.Spec.JobTemplate.Spec}
}

// registerCronJob settles the Job inputs job (their values known now, or
// later), builds the CronJob from them with build, checks that the cluster
// has what its Jobs need (the preflight, as a Job component's: a missing
// Secret or claim would leave every scheduled run stuck until its
// deadline), and registers the
// component comp of type typ with its one child, the CronJob named
// name+"-cronjob", and its outputs cronJobName, namespace and cronSchedule.
func registerCronJob[A any](ctx *pulumi.Context, typ, name string, comp pulumi.ComponentResource, job A,
	build func(A) (plannedCronJob, error), opts ...pulumi.ResourceOption) (cronJobOutputs, error) {
	kind := typ[strings.LastIndex(typ, ":")+1:] // e.g. WorldBackupSchedule
	st, err := settle.Now(ctx.Context(), ctx.DryRun(), job)
	if err != nil {
		return cronJobOutputs{}, fmt.Errorf("resolving the inputs of %s %q: %w", kind, name, err)
	}
	var props pulumi.Map
	var out cronJobOutputs
	// plan builds the CronJob and runs the preflight.
	plan := func(a A) (*batchv1.CronJob, error) {
		pc, err := build(a)
		if err != nil {
			return nil, err
		}
		if err := checkCluster(ctx, strings.ToLower(kind), pc.Preflight, pc.Requirements); err != nil {
			return nil, err
		}
		return pc.CronJob, nil
	}
	if st.Known {
		cj, err := plan(st.Args)
		if err != nil {
			return cronJobOutputs{}, err
		}
		if props, err = kubeobj.Inputs(cj, "CronJob", cj.Name); err != nil {
			return cronJobOutputs{}, err
		}
		if st.Secret {
			props["spec"] = pulumi.ToSecret(props["spec"])
		}
		out = cronJobOutputs{pulumi.String(cj.Name).ToStringOutput(), pulumi.String(cj.Namespace).ToStringOutput(),
			pulumi.String(cj.Spec.Schedule).ToStringOutput()}
	} else {
		later := settle.Later(job, func(a A) (any, error) { return plan(a) })
		props = kubeobj.Later(later, "CronJob", func(v any) any { return v })
		get := func(f func(*batchv1.CronJob) string) pulumi.StringOutput {
			return later.ApplyT(func(v any) string { return f(v.(*batchv1.CronJob)) }).(pulumi.StringOutput)
		}
		out = cronJobOutputs{get(func(c *batchv1.CronJob) string { return c.Name }), get(func(c *batchv1.CronJob) string { return c.Namespace }),
			get(func(c *batchv1.CronJob) string { return c.Spec.Schedule })}
	}
	if err := ctx.RegisterComponentResource(typ, name, comp, opts...); err != nil {
		return cronJobOutputs{}, fmt.Errorf("registering %s %q: %w", kind, name, err)
	}
	childOpts := []pulumi.ResourceOption{pulumi.Parent(comp)}
	if len(st.Deps) > 0 {
		childOpts = append(childOpts, pulumi.DependsOn(st.Deps))
	}
	var res kubeResource
	if err := ctx.RegisterResource("kubernetes:batch/v1:CronJob", name+"-cronjob", props, &res,
		utilities.PkgResourceDefaultOpts(childOpts)...); err != nil {
		return cronJobOutputs{}, fmt.Errorf("registering CronJob of %s %q: %w", kind, name, err)
	}
	after := func(o pulumi.StringOutput) pulumi.StringOutput {
		return pulumi.All(res.URN(), o).ApplyT(func(v []any) string { return v[1].(string) }).(pulumi.StringOutput)
	}
	out = cronJobOutputs{after(out.CronJobName), after(out.Namespace), after(out.CronSchedule)}
	if err := ctx.RegisterResourceOutputs(comp, pulumi.Map{"cronJobName": out.CronJobName, "namespace": out.Namespace,
		"cronSchedule": out.CronSchedule}); err != nil {
		return cronJobOutputs{}, fmt.Errorf("registering outputs of %s %q: %w", kind, name, err)
	}
	return out, nil
}

// scheduledRunID stands in for the run ID while the backup inputs are
// validated; the CronJob passes each Job's name instead.
const scheduledRunID = "scheduled"

// Validate reports every missing or invalid input of a (after defaults) in
// one *InputError; nil when a is valid.
func (a WorldBackupScheduleArgs) Validate() error {
	b, err := settleSync("worldbackupschedule", a.WorldBackupArgs)
	if err != nil {
		return err
	}
	a.WorldBackupArgs = b
	_, _, _, err = a.resolve()
	return err
}

// resolve validates the backup inputs and the schedule's.
func (a WorldBackupScheduleArgs) resolve() (jobspec.Backup, jobspec.Schedule, preflightSettings, error) {
	b := a.WorldBackupArgs
	b.RunID, b.SkipAwait, b.ReplaceUnready, b.Timeout = pulumi.String(scheduledRunID), false, new(false), ""
	b.Concurrency = nil
	r, berr := b.resolve()
	p := &problems{component: "worldbackupschedule"}
	var bie *InputError
	if errors.As(berr, &bie) {
		p.list = append(p.list, bie.Problems...)
	} else if berr != nil {
		return jobspec.Backup{}, jobspec.Schedule{}, preflightSettings{}, berr
	}
	s := a.ScheduleInputs.resolve(p, r.Job.Namespace, b.Server, jobspec.ScheduleName(b.Server), naming.SpreadSchedule)
	if err := p.err(); err != nil {
		return jobspec.Backup{}, jobspec.Schedule{}, preflightSettings{}, err
	}
	return r.Job, s, r.Preflight, nil
}

// resolve validates the schedule inputs of the CronJob name of server in
// namespace and returns them with their defaults, the spread applied by
// spread (naming.SpreadSchedule for backups, naming.VerifySpreadSchedule for
// verifies, so that a server's two fire at different minutes).
func (a ScheduleInputs) resolve(p *problems, namespace, server, name string, spread func(string, time.Duration, string) (string, error)) jobspec.Schedule {
	s := jobspec.Schedule{Cron: strings.TrimSpace(a.Schedule), TimeZone: a.TimeZone, Suspend: a.Suspend,
		SuccessfulJobs: DefaultJobsHistory, FailedJobs: DefaultJobsHistory}
	var window time.Duration
	if a.Spread != "" {
		window, _ = p.duration("spread", a.Spread, time.Minute, naming.MaxSpread)
	}
	if p.required("schedule", s.Cron, `set a cron expression, e.g. "0 4 * * *" (04:00 every day), or `+naming.DailyRandom) {
		key := a.SpreadKey
		if key == "" {
			key = naming.SpreadKey(namespace, server)
		}
		expr, err := spread(s.Cron, window, key)
		if err != nil {
			p.addf("spread", "%s", err)
		} else if err := checkCron(expr); errors.Is(err, errCronTZ) {
			p.addf("schedule", "%q %s: remove the prefix and set timeZone instead, e.g. timeZone: Europe/Berlin", s.Cron, err)
		} else if err != nil {
			p.addf("schedule", "%q is not a cron expression (%s): use five fields (minute 0-59, hour 0-23, day-of-month 1-31, month 1-12, day-of-week 0-6), e.g. \"0 4 * * *\", or @hourly, @daily, @weekly, @monthly, or one of %s (a stable minute per server)", s.Cron, err, strings.Join(naming.SpreadMacros(), ", "))
		} else {
			s.Cron = expr
		}
	}
	if a.TimeZone != "" && !knownTimeZone(a.TimeZone, systemZoneinfo()) {
		p.addf("timeZone", "%q is not an IANA time zone (names are case-sensitive): use e.g. Europe/Berlin or UTC", a.TimeZone)
	}
	sd := a.StartingDeadline
	setDefault(&sd, DefaultStartingDeadline)
	if d, ok := p.duration("startingDeadline", sd, 10*time.Second, 24*time.Hour); ok {
		s.StartingDeadline = d
	}
	for _, h := range []struct {
		input string
		v     *int
		into  *int32
	}{{"successfulJobsHistory", a.SuccessfulJobsHistory, &s.SuccessfulJobs}, {"failedJobsHistory", a.FailedJobsHistory, &s.FailedJobs}} {
		if h.v == nil {
			continue
		}
		if *h.v < 0 || *h.v > 100 {
			p.addf(h.input, "%d is out of range: use 0 to 100", *h.v)
			continue
		}
		*h.into = int32(*h.v)
	}
	if extra := len(name) - jobspec.MaxScheduleNameLen; extra > 0 && len(server) <= naming.MaxServerLen {
		p.addf("server", "%q is too long for a schedule: the CronJob %s would have %d characters, at most %d are allowed: use a server name of at most %d characters",
			server, name, len(name), jobspec.MaxScheduleNameLen, len(server)-extra)
	}
	return s
}

// cronMacros are the schedule macros the components take besides five
// fields (ParseStandard's, but @every, which a CronJob's cron dialect
// documents not).
var cronMacros = []string{"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}

// checkCron reports whether s is a schedule the API server accepts for a
// CronJob: five fields, each in its range (minute 0-59, hour 0-23,
// day-of-month 1-31, month 1-12 or JAN-DEC, day-of-week 0-6 or SUN-SAT), or
// a macro. The API server parses it with the same parser,
// robfig/cron/v3's ParseStandard, and refuses TZ= and CRON_TZ=, for which
// the CronJob has the timeZone field: so preview refuses what `pulumi up`
// would have the API server refuse. Its errors say what is wrong, not the
// fix.
func checkCron(s string) error {
	switch {
	case strings.Contains(s, "TZ"):
		return errCronTZ
	case strings.HasPrefix(s, "@"):
		if !slices.Contains(cronMacros, s) {
			return fmt.Errorf("%s is not a macro the components take", s)
		}
		return nil
	case len(strings.Fields(s)) != 5:
		return fmt.Errorf("has %d fields, not 5", len(strings.Fields(s)))
	}
	sched, err := cron.ParseStandard(s)
	if err != nil {
		return err
	}
	// What the parser takes but no one means: a step past its field's
	// range (*/90 in minutes fires only at minute 0) and a date that never
	// comes (30 2: February 30), which leaves the CronJob idle forever.
	for i, field := range strings.Fields(s) {
		for part := range strings.SplitSeq(field, ",") {
			_, step, ok := strings.Cut(part, "/")
			if n, err := strconv.Atoi(step); ok && err == nil && n >= cronSpans[i].size {
				return fmt.Errorf("steps by %d in the %s field, whose range is %s: it fires only at the range's start", n, cronSpans[i].name, cronSpans[i].values)
			}
		}
	}
	if sched.Next(time.Now()).IsZero() {
		return errors.New("names no date that comes (such as 30 2 for February 30): the CronJob would never start a Job")
	}
	return nil
}

// cronSpans are the fields of a five-field schedule: name, value range and
// its size.
var cronSpans = [5]struct {
	name, values string
	size         int
}{{"minute", "0-59", 60}, {"hour", "0-23", 24}, {"day-of-month", "1-31", 31}, {"month", "1-12", 12}, {"day-of-week", "0-6", 7}}

// timeZonePart is what the API server takes for each /-separated part of
// a CronJob's timeZone (k8s.io/kubernetes pkg/apis/batch/validation,
// validTimeZoneCharacters).
var timeZonePart = regexp.MustCompile(`^[A-Za-z.\-_0-9+]{1,14}$`)

// knownTimeZone reports whether the API server takes name as a CronJob's
// timeZone: its rules for each part (no . or .., no leading -, at most 14
// of the characters timeZonePart allows), not Local in any case, and a zone
// that time.LoadLocation loads. The API server runs on Linux, where zone
// names are file names and case-sensitive; where the program runs they may
// not be (macOS's file system takes europe/berlin for Europe/Berlin), so a
// name that zoneinfo, the system's zone folder, holds in another spelling
// is refused (nil: no system folder; the embedded zones, which time/tzdata
// registers, are case-sensitive already).
func knownTimeZone(name string, zoneinfo fs.FS) bool {
	for part := range strings.SplitSeq(name, "/") {
		if part == "." || part == ".." || strings.HasPrefix(part, "-") || !timeZonePart.MatchString(part) {
			return false
		}
	}
	if strings.EqualFold(name, "Local") {
		return false
	}
	if _, err := time.LoadLocation(name); err != nil {
		return false
	}
	return zoneinfo == nil || spelt(zoneinfo, name)
}

// spelt reports whether zoneinfo, a zone folder, holds name in no other
// spelling than name's own: each part as it is, or in no spelling at all
// (LoadLocation found the zone elsewhere: UTC is built in, others in the
// embedded zones).
func spelt(zoneinfo fs.FS, name string) bool {
	dir := "."
	for part := range strings.SplitSeq(name, "/") {
		entries, err := fs.ReadDir(zoneinfo, dir)
		if err != nil {
			return true // a folder we cannot list: LoadLocation's word stands
		}
		if slices.ContainsFunc(entries, func(e fs.DirEntry) bool { return e.Name() == part }) {
			dir = path.Join(dir, part)
			continue
		}
		return !slices.ContainsFunc(entries, func(e fs.DirEntry) bool { return strings.EqualFold(e.Name(), part) })
	}
	return true
}

// systemZoneinfo is the system's zone folder that time.LoadLocation reads
// first, or nil when there is none.
func systemZoneinfo() fs.FS {
	for _, dir := range []string{"/usr/share/zoneinfo", "/usr/share/lib/zoneinfo", "/usr/lib/locale/TZ"} {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return os.DirFS(dir)
		}
	}
	return nil
}

// errCronTZ is checkCron's error for a schedule with a TZ= or CRON_TZ=
// prefix.
var errCronTZ = errors.New("sets its time zone with TZ= or CRON_TZ=, which a CronJob refuses")

// Annotate describes WorldBackupSchedule and its outputs in the plugin's
// schema and sets its token to worldbackup:index:WorldBackupSchedule.
func (w *WorldBackupSchedule) Annotate(a infer.Annotator) {
	a.SetToken("index", "WorldBackupSchedule")
	a.Describe(w, "Backups on a schedule: a Kubernetes CronJob whose Jobs have the pod of a WorldBackup "+
		"(same mounts, identity, no token), concurrencyPolicy Forbid. The run ID of each run is its Job's "+
		"name (downward API, environment variable WB_RUN_ID, "+descFlag(jobapi.FlagRunID)+"), so a retried pod of one run is "+
		"idempotent. Pulumi does not await the Jobs a CronJob creates: see the last runs with "+
		"`archiver list --server <server>` or `kubectl get jobs -l app.kubernetes.io/component=backup-schedule`, "+
		"and alert with `archiver status --max-age`.")
	a.Describe(&w.CronJobName, "The CronJob's metadata.name, <server>-sched.")
	a.Describe(&w.Namespace, "The namespace of the CronJob.")
	a.Describe(&w.CronSchedule, "The CronJob's schedule: schedule with its spread applied (a *-random schedule as five fields).")
}

// Annotate describes the schedule inputs in the plugin's schema, for
// WorldBackupSchedule and WorldVerifySchedule.
func (a *ScheduleInputs) Annotate(an infer.Annotator) {
	an.Describe(&a.Schedule, "The cron expression (five fields, or @hourly, @daily, @weekly, @monthly), e.g. \"0 4 * * *\"; or "+
		strings.Join(naming.SpreadMacros(), ", ")+": once per hour, day, week or month at a minute derived from spreadKey "+
		"(stable for a server, different across servers), like k8up's.")
	an.Describe(&a.Spread, "Shift the schedule by a stable offset within this window, a duration like 30m or 2h, in whole minutes up to 24h, "+
		"e.g. 2h with \"0 2 * * *\" fires between 02:00 and 03:59, at the same minute for the same spreadKey every time. "+
		"The schedule's minute and hour must be single numbers (or its minute, for an hourly one with a spread of at most 1h). Default: none.")
	an.Describe(&a.SpreadKey, "What the spread's offset (or a *-random schedule's minute) is derived from, by SHA-256. "+
		"Default: <namespace>/<server>; give <cluster>/<server> when the same namespace and server exist in several clusters. "+
		"A WorldVerifySchedule's offset is half the period (or spread) away from a WorldBackupSchedule's of the same spreadKey, "+
		"so a server's verify and backup never fire at the same minute (@daily-random for both: twelve hours apart).")
	an.Describe(&a.TimeZone, "An IANA time zone the schedule is read in, e.g. Europe/Berlin. Default: the controller's (usually UTC).")
	an.Describe(&a.StartingDeadline, "A run that could not start within this long of its time is skipped, a duration like 10m or 1h "+
		"(startingDeadlineSeconds). Default: 10m.")
	an.Describe(&a.SuccessfulJobsHistory, "Finished successful Jobs kept (successfulJobsHistoryLimit). Default: 3.")
	an.Describe(&a.FailedJobsHistory, "Failed Jobs kept (failedJobsHistoryLimit). Default: 3.")
	an.Describe(&a.Suspend, "Stop new runs without deleting the CronJob. Default: false.")
}
