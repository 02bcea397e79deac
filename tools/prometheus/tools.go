//go:build tools

// Package tools pins Prometheus and promtool, which the monitoring tests run
// (promtool check rules and test rules over the alert rules; a real
// Prometheus that scrapes the exporter), built by scripts/prometheus.sh.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
