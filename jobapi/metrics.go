package jobapi

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// KindMetrics is the exporter's subcommand, `archiver metrics`: a
// long-running Deployment, not a Job kind (it is not in Kinds).
const KindMetrics = "metrics"

// The exporter's Kubernetes names, which its component sets and a
// ServiceMonitor selects: MetricsComponent is the app.kubernetes.io/component
// label of its Deployment, pods and Service, MetricsPortName the name of its
// container and Service port, DefaultMetricsName the Deployment's and
// Service's name by default (and the job its series are scraped as).
const (
	MetricsComponent   = "metrics"
	MetricsPortName    = "metrics"
	DefaultMetricsName = "worldbackup-metrics"
)

// MetricsTables are the catalog tables the exporter reads, as a GRANT
// lists them: its read-only role needs SELECT on each and nothing else
// (archiver/exporter/readonly_role.sql grants exactly these). The
// exporter's help, the WorldMetrics description and the catalog's reads
// quote this list.
const MetricsTables = "world_backups, world_backup_failures, world_prunes, world_retired_servers"

// DefaultMetricsPort is the port the exporter listens on by default.
const DefaultMetricsPort = 9090

// DefaultMetricsListen is --listen when it is not given.
var DefaultMetricsListen = ":" + strconv.Itoa(DefaultMetricsPort)

// Metrics is the request of `archiver metrics`: serve the catalog's
// Prometheus metrics and status page on Listen.
type Metrics struct {
	Config  string // felis.toml; "" = DefaultConfigPath
	Listen  string // host:port; "" = DefaultMetricsListen
	Cluster string // the cluster label of every series; may be ""

	// MaxAge is every server's allowed age of its newest successful run
	// (a Go duration, e.g. "36h"); "": none configured.
	MaxAge string
	// ServerMaxAges are "server=duration" pairs, over MaxAge; a server
	// named here is expected even before it has a run.
	ServerMaxAges []string

	LogFormat LogFormat // "" = LogAuto
}

// Kind returns KindMetrics.
func (Metrics) Kind() string { return KindMetrics }

// WithDefaults returns m as the archiver sees it.
func (m Metrics) WithDefaults() Metrics {
	setDefault(&m.Config, DefaultConfigPath)
	setDefault(&m.Listen, DefaultMetricsListen)
	if m.LogFormat == "" {
		m.LogFormat = LogAuto
	}
	return m
}

// Args returns the archiver's command line of m, the subcommand first.
func (m Metrics) Args() []string {
	a := args{KindMetrics}
	a.str(FlagConfig, m.Config)
	a.str(FlagListen, m.Listen)
	a.str(FlagCluster, m.Cluster)
	a.str(FlagMaxAge, m.MaxAge)
	for _, s := range m.ServerMaxAges {
		a.always(FlagServerMaxAge, s)
	}
	a.str(FlagLogFormat, string(m.LogFormat))
	return a
}

// Bind registers the exporter's flags on fs, storing into m.
func (m *Metrics) Bind(fs *flag.FlagSet) {
	fs.StringVar(&m.Config, FlagConfig, DefaultConfigPath, ConfigFileName+" (only [database] is read)")
	fs.StringVar(&m.Listen, FlagListen, DefaultMetricsListen, "host:port to serve /metrics and the status page / on")
	fs.StringVar(&m.Cluster, FlagCluster, "", "the cluster label of every series")
	fs.StringVar(&m.MaxAge, FlagMaxAge, "", "every server's allowed age of its newest successful run, e.g. 36h (default: none; the page uses "+DefaultMaxAge.String()+")")
	fs.Func(FlagServerMaxAge, "server=duration: one server's allowed age, over "+Flag(FlagMaxAge)+", repeatable; the server is expected even without a run", func(s string) error {
		m.ServerMaxAges = append(m.ServerMaxAges, s)
		return nil
	})
	bindLogFormat(fs, &m.LogFormat)
}

// Parsed finishes m after fs.Parse (nothing to do).
func (m *Metrics) Parsed(*flag.FlagSet) {}

// DefaultMaxAge is the age the status page and the alert rules judge a
// server by when no max age is configured for it.
const DefaultMaxAge = 36 * time.Hour

// ParseMaxAge parses a max age: a positive Go duration ("36h", "90m").
func ParseMaxAge(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("max age %q is not a positive duration such as 36h or 90m", s)
	}
	return d, nil
}

// ParseServerMaxAge parses "server=duration".
func ParseServerMaxAge(s string) (server string, d time.Duration, err error) {
	server, age, ok := strings.Cut(s, "=")
	if !ok {
		return "", 0, fmt.Errorf("%q is not server=duration, e.g. survival=26h", s)
	}
	if err := CheckServer(server); err != nil {
		return "", 0, fmt.Errorf("%q: %w", s, err)
	}
	if d, err = ParseMaxAge(age); err != nil {
		return "", 0, fmt.Errorf("%q: %w", s, err)
	}
	return server, d, nil
}

// CheckListen checks a listen address: [host]:port.
func CheckListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q is not host:port or :port", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return errors.New("listen port " + strconv.Quote(port) + " is not a number from 1 to 65535")
	}
	return nil
}
