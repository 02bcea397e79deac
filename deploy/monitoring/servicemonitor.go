package monitoring

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/worldbackup/worldbackup/jobapi"
)

// ServiceMonitorConfig says which Service the ServiceMonitor scrapes.
type ServiceMonitorConfig struct {
	Meta ObjectMeta // Name defaults to "worldbackup-metrics"
	// Selector matches the exporter's Service labels. Default
	// app.kubernetes.io/name=worldbackup, app.kubernetes.io/component=metrics.
	Selector map[string]string
	// Namespaces the Service may be in; empty: the ServiceMonitor's own.
	Namespaces []string
	// Port is the name of the Service's port. Default "metrics".
	Port string
	// Interval between scrapes. Default 60s: the exporter reads the
	// catalog, whose runs change a few times a day.
	Interval time.Duration
	// Job is the job label the targets get, which the rules' exporter
	// alert selects on. Default DefaultExporterJob.
	Job string
}

func (c ServiceMonitorConfig) withDefaults() ServiceMonitorConfig {
	if c.Meta.Name == "" {
		c.Meta.Name = DefaultExporterJob
	}
	if c.Selector == nil {
		c.Selector = map[string]string{"app.kubernetes.io/name": "worldbackup", "app.kubernetes.io/component": jobapi.MetricsComponent}
	}
	if c.Port == "" {
		c.Port = jobapi.MetricsPortName
	}
	if c.Interval == 0 {
		c.Interval = time.Minute
	}
	if c.Job == "" {
		c.Job = DefaultExporterJob
	}
	return c
}

// Validate says what to fix in c (after defaults).
func (c ServiceMonitorConfig) Validate() error {
	var errs []error
	if len(c.Selector) == 0 {
		errs = append(errs, errors.New("monitoring: the ServiceMonitor's Selector is empty: it would scrape every Service"))
	}
	if c.Interval < time.Second || c.Interval%time.Second != 0 {
		errs = append(errs, fmt.Errorf("monitoring: ServiceMonitor Interval %v must be a whole number of seconds, at least 1s", c.Interval))
	}
	return errors.Join(errs...)
}

// ServiceMonitor is a monitoring.coreos.com/v1 ServiceMonitor.
type ServiceMonitor struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Metadata   ObjectMeta         `json:"metadata"`
	Spec       ServiceMonitorSpec `json:"spec"`
}

// ServiceMonitorSpec is the part of the operator's spec that is used.
type ServiceMonitorSpec struct {
	Selector          LabelSelector      `json:"selector"`
	NamespaceSelector *NamespaceSelector `json:"namespaceSelector,omitempty"`
	Endpoints         []Endpoint         `json:"endpoints"`
}

// LabelSelector selects by labels.
type LabelSelector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

// NamespaceSelector lists namespaces.
type NamespaceSelector struct {
	MatchNames []string `json:"matchNames"`
}

// Endpoint is one scraped port.
type Endpoint struct {
	Port        string       `json:"port"`
	Path        string       `json:"path"`
	Interval    string       `json:"interval"`
	Relabelings []Relabeling `json:"relabelings,omitempty"`
}

// Relabeling is one relabel config.
type Relabeling struct {
	TargetLabel string `json:"targetLabel"`
	Replacement string `json:"replacement"`
	Action      string `json:"action"`
}

// NewServiceMonitor returns the ServiceMonitor for c.
func NewServiceMonitor(c ServiceMonitorConfig) (ServiceMonitor, error) {
	c = c.withDefaults()
	if err := c.Validate(); err != nil {
		return ServiceMonitor{}, err
	}
	sm := ServiceMonitor{
		APIVersion: "monitoring.coreos.com/v1",
		Kind:       "ServiceMonitor",
		Metadata:   c.Meta,
		Spec: ServiceMonitorSpec{
			Selector: LabelSelector{MatchLabels: maps.Clone(c.Selector)},
			Endpoints: []Endpoint{{
				Port: c.Port, Path: "/metrics", Interval: promDuration(c.Interval),
				// The job label defaults to the Service's name; the
				// rules select the exporter by a fixed one.
				Relabelings: []Relabeling{{TargetLabel: "job", Replacement: c.Job, Action: "replace"}},
			}},
		},
	}
	if len(c.Namespaces) > 0 {
		sm.Spec.NamespaceSelector = &NamespaceSelector{MatchNames: c.Namespaces}
	}
	return sm, nil
}
