package nodetest

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/worldbackup/worldbackup/internal/kubenode"
	"github.com/worldbackup/worldbackup/internal/promscrape"
	"github.com/worldbackup/worldbackup/internal/stacktest"
	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/program/deploy"
)

// TestMetricsOnNode: worldbackup:metrics.enabled deploys the exporter
// (WorldMetrics: a Deployment and a Service, the config Secret read-only, no
// token) through `pulumi up`, which waits for it to be ready; scraped once
// through the API server's service proxy, as Prometheus would scrape the
// Service, it serves the backup `pulumi up` just made: the server's newest
// successful run's time and size, labelled with the cluster, and the status
// page lists the server.
func TestMetricsOnNode(t *testing.T) {
	node := kubenode.Require(t)
	tools := stacktest.Require(t)
	ns := namespace(t, node, kubenode.NamespaceOptions{})
	cfg := stackConfig(node, ns, "r1")
	cfg["worldbackup:metrics.enabled"] = "true"
	cfg["worldbackup:metrics.maxAge"] = "26h"
	stack := tools.InlineStack(t, "node", deploy.Program, cfg)
	res, backup := up(t, node, ns, stack)
	jobComplete(t, node, ns.Name, backup.jobName)
	ms, ok := res.Outputs["metrics"].Value.([]any)
	if !ok || len(ms) != 1 {
		t.Fatalf("stack output metrics = %v, want one exporter", res.Outputs["metrics"].Value)
	}
	m := ms[0].(map[string]any)
	svc, _ := m["serviceName"].(string)
	port, _ := m["portName"].(string)
	if svc == "" || port != jobapi.MetricsPortName || m["namespace"] != ns.Name {
		t.Fatalf("metrics output %v: want the Service in %s and its port %s", m, ns.Name, jobapi.MetricsPortName)
	}

	get := func(path string) string {
		t.Helper()
		b, err := node.Client.CoreV1().Services(ns.Name).ProxyGet("http", svc, port, path, nil).DoRaw(t.Context())
		if err != nil {
			t.Fatalf("GET %s of Service %s/%s: %v\npods:\n%s", path, ns.Name, svc, err, node.PodLogs(t, ns.Name, ""))
		}
		return string(b)
	}
	fams, err := promscrape.Parse(strings.NewReader(get("/metrics")))
	if err != nil {
		t.Fatalf("the exporter's /metrics does not parse: %v", err)
	}
	value := func(name string) (float64, bool) {
		return fams.Value(name, map[string]string{"server": "lobby", "cluster": "node"})
	}
	if v, ok := value("worldbackup_backup_last_successful_timestamp_seconds"); !ok || v <= 0 {
		t.Errorf("worldbackup_backup_last_successful_timestamp_seconds{server=lobby,cluster=node} = %v (%v), want the backup's time", v, ok)
	}
	if v, ok := value("worldbackup_backup_last_size_bytes"); !ok || v != float64(backup.sizeBytes) {
		t.Errorf("worldbackup_backup_last_size_bytes = %v (%v), want the backup's %d", v, ok, backup.sizeBytes)
	}
	if v, ok := value("worldbackup_backup_max_age_seconds"); !ok || v != 26*3600 {
		t.Errorf("worldbackup_backup_max_age_seconds = %v (%v), want %s", v, ok, strconv.Itoa(26*3600))
	}
	if page := get("/"); !strings.Contains(page, "lobby") {
		t.Errorf("the status page does not list lobby:\n%s", fmt.Sprintf("%.2000s", page))
	}
}
