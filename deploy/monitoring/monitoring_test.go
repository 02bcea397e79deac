package monitoring

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/worldbackup/worldbackup/internal/promtest"

	"github.com/worldbackup/worldbackup/jobapi"
)

func TestGeneratedFilesUpToDate(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("%s: %v (run make monitoring)", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what deploy/monitoring renders: run make monitoring", name)
		}
	}
}

// The PrometheusRule carries exactly the rules file's groups.
func TestPrometheusRuleHasTheRulesFilesGroups(t *testing.T) {
	var rf RulesFile
	var pr PrometheusRule
	for name, v := range map[string]any{FileRules: &rf, FilePrometheusRule: &pr} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(b, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if len(rf.Groups) == 0 || !reflect.DeepEqual(rf.Groups, pr.Spec.Groups) {
		t.Errorf("%s's spec.groups differ from %s's groups", FilePrometheusRule, FileRules)
	}
	if pr.Kind != "PrometheusRule" || pr.APIVersion != "monitoring.coreos.com/v1" {
		t.Errorf("%s is a %s %s", FilePrometheusRule, pr.APIVersion, pr.Kind)
	}
}

func TestConfigThresholdsReachTheRules(t *testing.T) {
	groups, err := Groups(Config{DefaultMaxAge: 2 * time.Hour, FailedWindow: 90 * time.Minute, StoreGrowthPerDay: 1 << 30, ScheduleGrace: 10 * time.Minute, ExporterJob: "wb"})
	if err != nil {
		t.Fatal(err)
	}
	all := ""
	for _, r := range groups[0].Rules {
		all += r.Expr + "\n" + r.For + "\n"
	}
	for _, want := range []string{"> 7200", "[1h30m]", "> 1073741824", "10m", "> 600", `up{job="wb"}`} {
		if !strings.Contains(all, want) {
			t.Errorf("the rules do not hold %q:\n%s", want, all)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"sub-second max age", Config{DefaultMaxAge: 1500 * time.Millisecond}, "DefaultMaxAge"},
		{"negative window", Config{FailedWindow: -time.Hour}, "FailedWindow"},
		{"negative growth", Config{StoreGrowthPerDay: -1}, "StoreGrowthPerDay"},
		{"quote in job", Config{ExporterJob: `a"b`}, "ExporterJob"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Groups(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Groups: %v, want an error naming %s", err, tt.want)
			}
		})
	}
	if _, err := Groups(Config{}); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}

func TestServiceMonitor(t *testing.T) {
	sm, err := NewServiceMonitor(ServiceMonitorConfig{Namespaces: []string{"minecraft"}})
	if err != nil {
		t.Fatal(err)
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Port != jobapi.MetricsPortName || ep.Path != "/metrics" || ep.Relabelings[0].Replacement != DefaultExporterJob {
		t.Errorf("endpoint %+v", ep)
	}
	if sm.Spec.NamespaceSelector == nil || sm.Spec.NamespaceSelector.MatchNames[0] != "minecraft" {
		t.Errorf("namespace selector %+v", sm.Spec.NamespaceSelector)
	}
	if _, err := NewServiceMonitor(ServiceMonitorConfig{Selector: map[string]string{}}); err == nil {
		t.Error("an empty selector was taken")
	}
}

func TestPromtoolCheckRules(t *testing.T) {
	out, err := promtest.Promtool(t, ".", "check", "rules", "--lint=all", "--lint-fatal", FileRules)
	if err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", FileRules, err, out)
	}
	if !strings.Contains(out, "SUCCESS: 9 rules found") {
		t.Errorf("promtool check rules: %s", out)
	}
}

func TestPromtoolTestRules(t *testing.T) {
	out, err := promtest.Promtool(t, ".", "test", "rules", FileRulesTest)
	if err != nil {
		t.Fatalf("promtool test rules %s: %v\n%s", FileRulesTest, err, out)
	}
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules: %s", out)
	}
}

// Every alert (and every reason of one) has a unit test where it fires and
// one where it does not.
func TestEveryAlertFiresAndStaysQuietInTheUnitTests(t *testing.T) {
	b, err := os.ReadFile(FileRulesTest)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Tests []struct {
			Name  string `json:"name"`
			Cases []struct {
				Alert string `json:"alertname"`
				Exp   []struct {
					Labels map[string]string `json:"exp_labels"`
				} `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range f.Tests {
		for _, c := range tc.Cases {
			if len(c.Exp) == 0 {
				quiet[c.Alert] = true
			}
			for _, e := range c.Exp {
				fires[c.Alert+"/"+e.Labels["reason"]] = true
			}
		}
	}
	groups, err := Groups(Config{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range groups[0].Rules {
		key := r.Alert + "/" + r.Labels["reason"]
		if !fires[key] {
			t.Errorf("%s: no unit test in %s where it fires", key, FileRulesTest)
		}
		if !quiet[r.Alert] {
			t.Errorf("%s: no unit test in %s where it does not fire", r.Alert, FileRulesTest)
		}
		names = append(names, r.Alert)
	}
	for _, want := range []string{AlertStale, AlertFailed, AlertScheduleNotRunning, AlertStoreGrowing, AlertArchivesMissing, AlertExporterDown} {
		if !slices.Contains(names, want) {
			t.Errorf("no rule for %s", want)
		}
	}
}

// dashboardTargets returns every panel's query expressions from the
// dashboard JSON, by panel title.
func dashboardTargets(t *testing.T, b []byte) (titles []string, exprs map[string][]string) {
	t.Helper()
	var d struct {
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	exprs = map[string][]string{}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		titles = append(titles, p.Title)
		for _, tg := range p.Targets {
			exprs[p.Title] = append(exprs[p.Title], tg.Expr)
		}
	}
	return titles, exprs
}

func TestDashboardPanels(t *testing.T) {
	b, err := os.ReadFile(FileDashboard)
	if err != nil {
		t.Fatal(err)
	}
	titles, exprs := dashboardTargets(t, b)
	if len(titles) == 0 || titles[0] != "Last successful backup age" {
		t.Fatalf("the first panel is %q, want the last backup age", titles)
	}
	for _, want := range []string{"Failed attempts per hour", "Archive size", "Added by the newest backup", "Backup duration"} {
		if !slices.Contains(titles, want) {
			t.Errorf("no %q panel", want)
		}
	}
	for _, title := range titles {
		if len(exprs[title]) == 0 {
			t.Errorf("panel %q has no query", title)
		}
		for _, e := range exprs[title] {
			if !strings.Contains(e, `cluster=~"$cluster"`) {
				t.Errorf("panel %q: query %q ignores the cluster variable", title, e)
			}
		}
	}
}
