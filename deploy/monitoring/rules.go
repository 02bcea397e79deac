// Package monitoring is what Prometheus and Grafana users install to watch
// worldbackup's backups, built from one definition each: the alert rules
// (rendered as a plain Prometheus rules file and as a Prometheus-operator
// PrometheusRule), the ServiceMonitor that scrapes the exporter (`archiver
// metrics`), and the Grafana dashboard (dashboards as code with
// grafana-foundation-sdk). The rendered files are checked in beside this
// package; `make monitoring` (go run ./deploy/monitoring/gen) rewrites them
// and TestGeneratedFilesUpToDate fails when they are stale. The metric names
// are the exporter's (archiver/README.md "The exporter": worldbackup_*).
package monitoring

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/worldbackup/worldbackup/jobapi"
)

// Alert names: what a receiver routes on and README's "Alerts" explains.
const (
	AlertStale               = "WorldBackupStale"
	AlertFailed              = "WorldBackupFailed"
	AlertScheduleNotRunning  = "WorldBackupScheduleNotRunning"
	AlertStoreGrowing        = "WorldBackupStoreGrowing"
	AlertArchivesMissing     = "WorldBackupArchivesMissing"
	AlertExporterDown        = "WorldBackupExporterDown"
	AlertVerifyFailed        = "WorldVerifyFailed"
	GroupName                = "worldbackup"
	DefaultExporterJob       = jobapi.DefaultMetricsName
	labelSeverity            = "severity"
	severityCritical         = "critical"
	severityWarning          = "warning"
	kubeStateScheduleMatcher = `label_app_kubernetes_io_name="worldbackup", label_app_kubernetes_io_component="backup-schedule"`
	kubeStateVerifyMatcher   = `label_app_kubernetes_io_name="worldbackup", label_app_kubernetes_io_component=~"verify|verify-schedule"`
)

// Config holds the thresholds of the rules. The zero value takes the
// defaults (withDefaults).
type Config struct {
	// DefaultMaxAge is how old a server's newest successful backup may be
	// when the exporter publishes no worldbackup_backup_max_age_seconds for
	// it (no schedule and no configured max age). Default 36h.
	DefaultMaxAge time.Duration
	// FailedWindow: a failed attempt within it fires WorldBackupFailed even
	// when a later attempt succeeded. Default 1h.
	FailedWindow time.Duration
	// StoreGrowthPerDay is how many bytes a server's store may grow in 24h
	// (net of prunes) before WorldBackupStoreGrowing fires. Default 20 GiB.
	StoreGrowthPerDay int64
	// ScheduleGrace is how long past its next scheduled time a backup
	// CronJob may go without starting a Job, and how long it may stay
	// suspended or its pod unschedulable. Default 1h.
	ScheduleGrace time.Duration
	// ExporterJob is the job label of the exporter's scrape targets (the
	// ServiceMonitor sets it; a plain scrape config names its job so).
	// Default "worldbackup-metrics".
	ExporterJob string
}

func (c Config) withDefaults() Config {
	if c.DefaultMaxAge == 0 {
		c.DefaultMaxAge = jobapi.DefaultMaxAge
	}
	if c.FailedWindow == 0 {
		c.FailedWindow = time.Hour
	}
	if c.StoreGrowthPerDay == 0 {
		c.StoreGrowthPerDay = 20 << 30
	}
	if c.ScheduleGrace == 0 {
		c.ScheduleGrace = time.Hour
	}
	if c.ExporterJob == "" {
		c.ExporterJob = DefaultExporterJob
	}
	return c
}

// Validate says what to fix in c (after defaults).
func (c Config) Validate() error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"DefaultMaxAge", c.DefaultMaxAge}, {"FailedWindow", c.FailedWindow}, {"ScheduleGrace", c.ScheduleGrace}} {
		if d.v < time.Second || d.v%time.Second != 0 {
			errs = append(errs, fmt.Errorf("monitoring: %s %v must be a whole number of seconds, at least 1s", d.name, d.v))
		}
	}
	if c.StoreGrowthPerDay < 0 {
		errs = append(errs, fmt.Errorf("monitoring: StoreGrowthPerDay %d must not be negative", c.StoreGrowthPerDay))
	}
	if strings.ContainsAny(c.ExporterJob, "\"\\\n") {
		errs = append(errs, fmt.Errorf("monitoring: ExporterJob %q must not hold quotes, backslashes or newlines", c.ExporterJob))
	}
	return errors.Join(errs...)
}

// RuleGroup is one group of a Prometheus rules file (and of a
// PrometheusRule's spec.groups).
type RuleGroup struct {
	Name  string `json:"name"`
	Rules []Rule `json:"rules"`
}

// Rule is one alerting rule.
type Rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// RulesFile is a Prometheus rules file (rule_files:).
type RulesFile struct {
	Groups []RuleGroup `json:"groups"`
}

// Groups returns the alert rules for cfg: the one definition that the
// rules file and the PrometheusRule render.
func Groups(cfg Config) ([]RuleGroup, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	defaultMaxAge := seconds(cfg.DefaultMaxAge)
	grace := seconds(cfg.ScheduleGrace)
	job := cfg.ExporterJob
	// The schedule's server, from kube-state-metrics' labels series of our
	// CronJobs (their app.kubernetes.io labels must be allowlisted; README).
	scheduleServer := `* on (namespace, cronjob) group_left (server)
    label_replace(
      max by (namespace, cronjob, label_worldbackup_dev_server) (kube_cronjob_labels{` + kubeStateScheduleMatcher + `}),
      "server", "$1", "label_worldbackup_dev_server", "(.*)")`
	podServer := `* on (namespace, pod) group_left (server)
    label_replace(
      max by (namespace, pod, label_worldbackup_dev_server) (kube_pod_labels{` + kubeStateScheduleMatcher + `}),
      "server", "$1", "label_worldbackup_dev_server", "(.*)")`

	rules := []Rule{
		{
			Alert: AlertStale,
			// The age of the newest successful run against the server's
			// allowed age (its schedule's interval x 1.5 or its configured
			// max age, from the exporter), else the default. A server that
			// never succeeded has timestamp 0: stale from the start.
			Expr: `(time() - worldbackup_backup_last_successful_timestamp_seconds)
  > on (job, instance, cluster, server) worldbackup_backup_max_age_seconds
or
(time() - worldbackup_backup_last_successful_timestamp_seconds) > ` + defaultMaxAge + `
  unless on (job, instance, cluster, server) worldbackup_backup_max_age_seconds`,
			Labels: map[string]string{labelSeverity: severityCritical},
			Annotations: map[string]string{
				"summary": "World backups of {{ $labels.server }} are stale",
				"description": `{{ if gt $value 1e9 }}{{ $labels.server }} (cluster {{ $labels.cluster }}) has no successful backup in the catalog.` +
					`{{ else }}The newest successful backup of {{ $labels.server }} (cluster {{ $labels.cluster }}) is {{ $value | humanizeDuration }} old, older than it may be.{{ end }}`,
				"runbook": "README.md#worldbackupstale",
			},
		},
		{
			Alert: AlertFailed,
			// The newest attempt failed, or one failed within the window
			// (a retry may have succeeded since).
			Expr: `worldbackup_backup_last_status == 0
or
increase(worldbackup_backup_failure_total[` + promDuration(cfg.FailedWindow) + `]) > 0`,
			Labels: map[string]string{labelSeverity: severityWarning},
			Annotations: map[string]string{
				"summary":     "A world backup of {{ $labels.server }} failed",
				"description": "A backup attempt of {{ $labels.server }} (cluster {{ $labels.cluster }}) failed in the last " + promDuration(cfg.FailedWindow) + ", or its newest attempt failed. `archiver list --server {{ $labels.server }}` shows the failed attempts and their reasons.",
				"runbook":     "README.md#worldbackupfailed",
			},
		},
		{
			Alert: AlertScheduleNotRunning,
			Expr: `(kube_cronjob_spec_suspend == 1)
  ` + scheduleServer,
			For:    promDuration(cfg.ScheduleGrace),
			Labels: map[string]string{labelSeverity: severityWarning, "reason": "suspended"},
			Annotations: map[string]string{
				"summary":     "The backup schedule of {{ $labels.server }} is suspended",
				"description": "CronJob {{ $labels.namespace }}/{{ $labels.cronjob }} has been suspended for more than " + promDuration(cfg.ScheduleGrace) + ": no backups of {{ $labels.server }} run.",
				"runbook":     "README.md#worldbackupschedulenotrunning",
			},
		},
		{
			Alert: AlertScheduleNotRunning,
			// kube-state-metrics' next schedule time follows the last
			// one the controller started: a time well past means a run
			// that did not start.
			Expr: `((time() - kube_cronjob_next_schedule_time) > ` + grace + `
  unless on (namespace, cronjob) (kube_cronjob_spec_suspend == 1))
  ` + scheduleServer,
			Labels: map[string]string{labelSeverity: severityWarning, "reason": "missed"},
			Annotations: map[string]string{
				"summary":     "The backup schedule of {{ $labels.server }} did not start a Job",
				"description": "CronJob {{ $labels.namespace }}/{{ $labels.cronjob }} was due {{ $value | humanizeDuration }} ago and started no Job.",
				"runbook":     "README.md#worldbackupschedulenotrunning",
			},
		},
		{
			Alert: AlertScheduleNotRunning,
			Expr: `(kube_pod_status_unschedulable == 1)
  ` + podServer,
			For:    promDuration(cfg.ScheduleGrace),
			Labels: map[string]string{labelSeverity: severityWarning, "reason": "unschedulable"},
			Annotations: map[string]string{
				"summary":     "A scheduled backup pod of {{ $labels.server }} cannot be scheduled",
				"description": "Pod {{ $labels.namespace }}/{{ $labels.pod }} of the backup schedule of {{ $labels.server }} has been unschedulable for more than " + promDuration(cfg.ScheduleGrace) + ".",
				"runbook":     "README.md#worldbackupschedulenotrunning",
			},
		},
		{
			Alert: AlertVerifyFailed,
			// A verify Job, on demand (WorldVerify) or scheduled
			// (WorldVerifySchedule), that failed: the verifying pod is
			// DB-blind, so its record is the Job's own, through
			// kube-state-metrics (the Jobs' labels must be allowlisted, as
			// the CronJobs' are; README). A failed Job stays failed until
			// the CronJob's history or its TTL removes it.
			Expr: `(max by (namespace, job_name) (kube_job_status_failed) > 0)
  * on (namespace, job_name) group_left (server)
    label_replace(
      max by (namespace, job_name, label_worldbackup_dev_server) (kube_job_labels{` + kubeStateVerifyMatcher + `}),
      "server", "$1", "label_worldbackup_dev_server", "(.*)")`,
			Labels: map[string]string{labelSeverity: severityCritical},
			Annotations: map[string]string{
				"summary": "A verify of {{ $labels.server }}'s backup failed",
				"description": "Verify Job {{ $labels.namespace }}/{{ $labels.job_name }} failed: the archive does not hold a world the game can load, " +
					"or could not be checked. Its termination message names the file and chunk: kubectl -n {{ $labels.namespace }} get pods -l job-name={{ $labels.job_name }} " +
					"-o jsonpath='{.items[0].status.containerStatuses[0].state.terminated.message}'",
				"runbook": "README.md#worldverifyfailed",
			},
		},
		{
			Alert:  AlertStoreGrowing,
			Expr:   `delta(worldbackup_store_bytes[1d]) > ` + strconv.FormatInt(cfg.StoreGrowthPerDay, 10),
			For:    "1h",
			Labels: map[string]string{labelSeverity: severityWarning},
			Annotations: map[string]string{
				"summary":     "The backup store of {{ $labels.server }} grows fast",
				"description": "What the store holds for {{ $labels.server }} (cluster {{ $labels.cluster }}) grew by {{ $value | humanize1024 }}B in a day, more than " + humanizeBytes(cfg.StoreGrowthPerDay) + ".",
				"runbook":     "README.md#worldbackupstoregrowing",
			},
		},
		{
			Alert: AlertArchivesMissing,
			// A prune found archives of recorded runs gone from the store
			// (a lifecycle rule, a volume rolled back, the wrong volume
			// mounted): they cannot be restored, and the exporter no longer
			// counts them, so WorldBackupStale may follow. The gauge is set
			// at each prune, so this fires at the prune that finds them.
			Expr:   `worldbackup_archives_missing > 0`,
			Labels: map[string]string{labelSeverity: severityCritical},
			Annotations: map[string]string{
				"summary": "Archives of {{ $labels.server }} are missing from the store",
				"description": "A prune found the archives of {{ $value }} recorded run(s) of {{ $labels.server }} (cluster {{ $labels.cluster }}) missing from the store: " +
					"they cannot be restored. `archiver list --server {{ $labels.server }}` names them (status missing).",
				"runbook": "README.md#worldbackuparchivesmissing",
			},
		},
		{
			Alert: AlertExporterDown,
			// Without the exporter every other worldbackup alert is blind:
			// a target that is down, no target at all, or an exporter that
			// cannot read the catalog.
			Expr: `up{job="` + job + `"} == 0
or
absent(up{job="` + job + `"})
or
worldbackup_exporter_catalog_up == 0`,
			For:    "5m",
			Labels: map[string]string{labelSeverity: severityCritical},
			Annotations: map[string]string{
				"summary":     "The worldbackup exporter is down or cannot read the catalog",
				"description": `{{ if $labels.instance }}{{ $labels.instance }}: {{ end }}the worldbackup exporter (job ` + job + `) is not scraped, down, or cannot read the catalog; backup alerts cannot fire while it is.`,
				"runbook":     "README.md#worldbackupexporterdown",
			},
		},
	}
	return []RuleGroup{{Name: GroupName, Rules: rules}}, nil
}

// RulesYAML renders the rules for cfg as a Prometheus rules file.
func RulesYAML(cfg Config) ([]byte, error) {
	groups, err := Groups(cfg)
	if err != nil {
		return nil, err
	}
	return render(RulesFile{Groups: groups})
}

// ObjectMeta is the metadata of a rendered Prometheus-operator object.
type ObjectMeta struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
}

// PrometheusRule is a monitoring.coreos.com/v1 PrometheusRule.
type PrometheusRule struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Metadata   ObjectMeta         `json:"metadata"`
	Spec       PrometheusRuleSpec `json:"spec"`
}

// PrometheusRuleSpec holds the rule groups.
type PrometheusRuleSpec struct {
	Groups []RuleGroup `json:"groups"`
}

// NewPrometheusRule returns the rules for cfg as a PrometheusRule with meta
// (Name defaults to "worldbackup").
func NewPrometheusRule(cfg Config, meta ObjectMeta) (PrometheusRule, error) {
	groups, err := Groups(cfg)
	if err != nil {
		return PrometheusRule{}, err
	}
	if meta.Name == "" {
		meta.Name = "worldbackup"
	}
	return PrometheusRule{
		APIVersion: "monitoring.coreos.com/v1",
		Kind:       "PrometheusRule",
		Metadata:   meta,
		Spec:       PrometheusRuleSpec{Groups: groups},
	}, nil
}

func render(v any) ([]byte, error) {
	b, err := yaml.Marshal(v)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// seconds renders d as a PromQL number of seconds.
func seconds(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }

// promDuration renders d (whole seconds) as a Prometheus duration: 36h,
// 1h30m, 90s.
func promDuration(d time.Duration) string {
	s := int64(d / time.Second)
	var b strings.Builder
	for _, u := range []struct {
		n    int64
		unit string
	}{{86400 * 7, "w"}, {86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}} {
		if s >= u.n {
			fmt.Fprintf(&b, "%d%s", s/u.n, u.unit)
			s %= u.n
		}
	}
	if b.Len() == 0 {
		return "0s"
	}
	return b.String()
}

// humanizeBytes renders n in binary units for an annotation: 20 GiB.
func humanizeBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v, i := float64(n), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return strconv.FormatFloat(v, 'f', -1, 64) + " " + units[i]
}
