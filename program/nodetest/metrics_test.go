package nodetest

import (
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"

	"github.com/worldbackup/worldbackup/internal/kubenode"
	"github.com/worldbackup/worldbackup/internal/promscrape"
	"github.com/worldbackup/worldbackup/jobapi"
)

// scrapeExporter scrapes the exporter that worldbackup:metrics.enabled
// deployed (WorldMetrics: a Deployment and a Service, the config Secret
// read-only, no token; `pulumi up` waited for it to be ready) once, through
// the API server's service proxy as Prometheus would scrape the Service,
// and checks that its status page lists lobby. It returns the series.
func scrapeExporter(t *testing.T, node *kubenode.Node, ns *kubenode.Namespace, out auto.OutputMap) promscrape.Families {
	t.Helper()
	ms, ok := out["metrics"].Value.([]any)
	if !ok || len(ms) != 1 {
		t.Fatalf("stack output metrics = %v, want one exporter", out["metrics"].Value)
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
	if page := get("/"); !strings.Contains(page, "lobby") {
		t.Errorf("the status page does not list lobby:\n%.2000s", page)
	}
	return fams
}
