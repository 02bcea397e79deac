package deploy

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider"
)

func getter(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParseConfig(t *testing.T) {
	valid := func() map[string]string {
		return map[string]string{
			"worldbackup:image":       "img:1",
			"worldbackup:backupClaim": "backups",
			"worldbackup:servers":     `[{"name":"lobby","formerOwner":"alex"},{"name":"survival","runAsUser":1000}]`,
		}
	}
	t.Run("defaults", func(t *testing.T) {
		c, err := ParseConfig(getter(valid()), nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.RunID != "initial" || c.SecurityMode != "baseline" || len(c.Clusters) != 1 || c.Clusters[0].Name != DefaultCluster {
			t.Errorf("defaults not applied: %+v", c)
		}
		if c.Servers[0].FormerOwner != "alex" || c.Servers[1].RunAsUser == nil || *c.Servers[1].RunAsUser != 1000 {
			t.Errorf("servers parsed wrong: %+v", c.Servers)
		}
	})
	tests := []struct {
		name string
		edit func(map[string]string)
		want []string
	}{
		{"missing image and claim", func(m map[string]string) {
			delete(m, "worldbackup:image")
			delete(m, "worldbackup:backupClaim")
		}, []string{"worldbackup:image is required", "worldbackup:backupClaim is required"}},
		{"no servers", func(m map[string]string) { delete(m, "worldbackup:servers") }, []string{"servers is empty"}},
		{"empty list", func(m map[string]string) { m["worldbackup:servers"] = "[]" }, []string{"servers is empty"}},
		{"duplicate server", func(m map[string]string) { m["worldbackup:servers"] = `[{"name":"a"},{"name":"a"}]` }, []string{`servers[1].name "a" is listed twice`}},
		{"unnamed server", func(m map[string]string) { m["worldbackup:servers"] = `[{"formerOwner":"a"}]` }, []string{"servers[0].name is required"}},
		{"typo in a server", func(m map[string]string) { m["worldbackup:servers"] = `[{"nmae":"a"}]` }, []string{`unknown field "nmae"`}},
		{"not a list", func(m map[string]string) { m["worldbackup:servers"] = `lobby` }, []string{"servers must be a list of objects"}},
		{"bad skipAwait", func(m map[string]string) { m["worldbackup:skipAwait"] = "sometimes" }, []string{"skipAwait must be true or false"}},
		{"derived run ID too long", func(m map[string]string) {
			m["worldbackup:runId"] = strings.Repeat("r", 110) // default.survival.<110> is 127: only .verify passes 128
			m["worldbackup:servers"] = `[{"name":"survival","verify":{}}]`
		}, []string{"worldbackup:runId makes the run ID default.survival." + strings.Repeat("r", 110) + ".verify", "134 characters long, over 128"}},
		{"derived prune run ID too long", func(m map[string]string) {
			m["worldbackup:servers"] = `[{"name":"lobby","prune":{"runId":"` + strings.Repeat("p", 120) + `","keepLast":1}}]`
		}, []string{"worldbackup:servers[0].prune.runId makes the run ID default.lobby.", "shorten worldbackup:servers[0].prune.runId"}},
		{"derived restore run ID too long", func(m map[string]string) {
			m["worldbackup:restores"] = `[{"server":"lobby","fromRun":"` + strings.Repeat("f", 120) + `"}]`
		}, []string{"worldbackup:restores[0].fromRun makes the run ID default.lobby.restore-"}},
		{"derived run ID of the backup before a restore too long", func(m map[string]string) {
			// default.lobby.restore-<105> is 127; the backup before it,
			// default.lobby.pre-restore-<105>, 131.
			m["worldbackup:restores"] = `[{"server":"lobby","fromRun":"` + strings.Repeat("f", 105) + `"}]`
		}, []string{"worldbackup:restores[0].fromRun makes the run ID default.lobby.pre-restore-" + strings.Repeat("f", 105), "131 characters long"}},
		{"restore without checksum", func(m map[string]string) {
			m["worldbackup:restores"] = `[{"server":"lobby","archiveRef":"/backups/lobby/a.tar.zst"}]`
		}, []string{"restores[0] (lobby) needs fromRun (a run ID, or latest", "or archiveRef and sha256"}},
		{"restore by run with a checksum", func(m map[string]string) {
			m["worldbackup:restores"] = `[{"server":"lobby","fromRun":"latest","sha256":"` + strings.Repeat("a", 64) + `"}]`
		}, []string{"restores[0] (lobby) sets fromRun and archiveRef or sha256"}},
		{"restore by run, bad reference", func(m map[string]string) {
			m["worldbackup:restores"] = `[{"server":"lobby","fromRun":"a/b"}]`
		}, []string{"restores[0].fromRun: run \"a/b\" is neither"}},
		{"restore without cluster among several", func(m map[string]string) {
			m["worldbackup:clusters"] = `[{"name":"eu"},{"name":"us"}]`
			m["worldbackup:restores"] = `[{"server":"lobby","archiveRef":"/backups/a","sha256":"ab"}]`
		}, []string{"restores[0] (lobby) must name its cluster"}},
		{"restore by run of a server with another store", func(m map[string]string) {
			m["worldbackup:servers"] = `[{"name":"lobby"},{"name":"hub","store":{"url":"s3://other/worlds","credentialsSecretName":"other-s3"}}]`
			m["worldbackup:restores"] = `[{"server":"lobby","fromRun":"latest","fromServer":"hub"}]`
		}, []string{"restores[0] (lobby) restores a run of hub, whose archives are in another store than lobby's", "against the backup claim"}},
		{"restore by run, Latest", func(m map[string]string) {
			m["worldbackup:restores"] = `[{"server":"lobby","fromRun":"Latest"}]`
		}, []string{`write "latest" in lower case`}},
		{"restore to an unknown cluster", func(m map[string]string) {
			m["worldbackup:restores"] = `[{"server":"lobby","cluster":"mars","archiveRef":"/backups/a","sha256":"ab"}]`
		}, []string{`restores[0].cluster "mars" is not one of worldbackup:clusters`}},
		{"restored twice", func(m map[string]string) {
			m["worldbackup:restores"] = `[{"server":"lobby","archiveRef":"/backups/a","sha256":"ab"},{"server":"lobby","archiveRef":"/backups/b","sha256":"cd"}]`
		}, []string{"restores[1]: lobby is restored twice"}},
		{"unknown key", func(m map[string]string) { m["worldbackup:imag"] = "x" }, []string{"worldbackup:imag is not a key this program reads", "pulumi config rm worldbackup:imag"}},
		{"misspelt key", func(m map[string]string) { m["worldbackup:run_id"] = "x" }, []string{"did you mean worldbackup:runId?"}},
		{"context and renderDir", func(m map[string]string) {
			m["worldbackup:renderDir"] = "/tmp/out"
			m["worldbackup:clusters"] = `[{"name":"eu","context":"prod-eu"}]`
		}, []string{"clusters[0] (eu) sets a context or kubeconfig, but renderDir is set"}},
		{"skipAwait with a restore after this run's backup", func(m map[string]string) {
			m["worldbackup:skipAwait"] = "true"
			m["worldbackup:restores"] = `[{"server":"lobby","archiveRef":"/backups/a","sha256":"ab"}]`
		}, []string{"skipAwait is true, but restores[0] (lobby) is ordered after this run's backup of lobby"}},
		{"bad format", func(m map[string]string) { m["worldbackup:format"] = "zip" }, []string{`worldbackup:format "zip" is not an archive format: use chunked or tar`}},
		{"bad server format", func(m map[string]string) {
			m["worldbackup:servers"] = `[{"name":"lobby"},{"name":"survival","format":"Chunked"}]`
		}, []string{`worldbackup:servers[1].format "Chunked" is not an archive format`}},
		{"bad cluster name", func(m map[string]string) { m["worldbackup:clusters"] = `[{"name":"EU West"}]` }, []string{`clusters[0].name "EU West" must be a short DNS label`}},
		{"duplicate cluster", func(m map[string]string) { m["worldbackup:clusters"] = `[{"name":"eu"},{"name":"eu"}]` }, []string{`clusters[1].name "eu" is listed twice`}},
		{"negative concurrency", func(m map[string]string) { m["worldbackup:clusters"] = `[{"name":"eu","concurrency":-1}]` },
			[]string{"clusters[0].concurrency is -1: it caps how many backups run at once in the cluster, from 1 to 1000"}},
		{"concurrency over the bound", func(m map[string]string) { m["worldbackup:clusters"] = `[{"name":"eu","concurrency":5000}]` },
			[]string{"clusters[0].concurrency is 5000"}},
		{"concurrency in render mode", func(m map[string]string) {
			m["worldbackup:renderDir"] = "/tmp/out"
			m["worldbackup:clusters"] = `[{"name":"eu","concurrency":10}]`
		}, []string{"clusters[0].concurrency caps the backups that `pulumi up` waits for", "remove clusters[0].concurrency, or unset renderDir and skipAwait"}},
		{"timeZone without a schedule", func(m map[string]string) {
			m["worldbackup:servers"] = `[{"name":"lobby"},{"name":"survival","timeZone":"Europe/Berlin"}]`
		}, []string{"worldbackup:servers[1].timeZone and .spread go with servers[1].schedule: set a schedule, or remove them"}},
		{"spread without a schedule", func(m map[string]string) { m["worldbackup:servers"] = `[{"name":"lobby","spread":"2h"}]` },
			[]string{"servers[0].timeZone and .spread go with servers[0].schedule"}},
		{"backups of two clusters with one resource name", func(m map[string]string) {
			m["worldbackup:clusters"] = `[{"name":"eu"},{"name":"eu-west"}]`
			m["worldbackup:servers"] = `[{"name":"west-lobby"},{"name":"lobby"}]`
		}, []string{`worldbackup:clusters[0] (eu) with servers[0] (west-lobby) and clusters[1] (eu-west) with servers[1] (lobby) would both name the backup resource "eu-west-lobby", which Pulumi refuses: rename a cluster or a server`}},
		{"restores of two clusters with one resource name", func(m map[string]string) {
			m["worldbackup:clusters"] = `[{"name":"eu"},{"name":"eu-west"}]`
			m["worldbackup:restores"] = `[{"server":"west-hub","cluster":"eu","fromRun":"latest"},{"server":"hub","cluster":"eu-west","fromRun":"latest"}]`
		}, []string{`restores[0] (west-hub in cluster eu) and restores[1] (hub in cluster eu-west) would both name the restore resource "eu-west-hub-restore"`}},
		{"a server named as another's backup before a restore", func(m map[string]string) {
			m["worldbackup:servers"] = `[{"name":"lobby"},{"name":"lobby-pre-restore"}]`
			m["worldbackup:restores"] = `[{"server":"lobby","fromRun":"latest"}]`
		}, []string{`clusters[0] (default) with servers[1] (lobby-pre-restore) and restores[0] (lobby in cluster default, its backup before the restore) would both name the backup resource "default-lobby-pre-restore"`}},
		{"restored twice, once naming the only cluster", func(m map[string]string) {
			m["worldbackup:restores"] = `[{"server":"lobby","fromRun":"latest"},{"server":"lobby","cluster":"default","fromRun":"r1"}]`
		}, []string{"restores[1]: lobby is restored twice"}},
		{"retention grace below a deadline", func(m map[string]string) {
			m["worldbackup:servers"] = `[{"name":"lobby","deadline":"2h"},{"name":"survival"}]`
			m["worldbackup:retention"] = `{"keepLast":3,"minKeep":1,"grace":"30m"}`
		}, []string{`worldbackup:retention.grace "30m" is shorter than servers[0].deadline 2h: a prune could remove what a backup still running has written`, "set the grace to at least 2h, or shorten servers[0].deadline"}},
		{"default grace below a server's deadline", func(m map[string]string) {
			m["worldbackup:servers"] = `[{"name":"lobby","deadline":"3h","retention":{"keepLast":3,"minKeep":1}}]`
		}, []string{"worldbackup:servers[0].retention.grace (not set: the default 1h) is shorter than servers[0].deadline 3h"}},
		{"prune grace below another server's deadline into the same store", func(m map[string]string) {
			m["worldbackup:servers"] = `[{"name":"lobby","prune":{"runId":"p1","keepLast":3,"minKeep":1,"grace":"45m"}},{"name":"survival","deadline":"2h"}]`
		}, []string{`worldbackup:servers[0].prune.grace "45m" is shorter than servers[1].deadline 2h`}},
		{"concurrency with skipAwait", func(m map[string]string) {
			m["worldbackup:skipAwait"] = "true"
			m["worldbackup:clusters"] = `[{"name":"eu","concurrency":10}]`
		}, []string{"clusters[0].concurrency caps the backups that `pulumi up` waits for"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := valid()
			tc.edit(m)
			var present []string
			for k := range m {
				present = append(present, k)
			}
			_, err := ParseConfig(getter(m), present)
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestGraceAgainstDeadlines: a grace of at least the longest deadline into
// its store passes; a longer deadline into another store does not count.
func TestGraceAgainstDeadlines(t *testing.T) {
	for _, tt := range []struct{ name, servers, retention string }{
		{"defaults", `[{"name":"lobby","retention":{"keepLast":3,"minKeep":1}}]`, ""},
		{"grace equal to the deadline", `[{"name":"lobby","deadline":"2h"}]`, `{"keepLast":3,"minKeep":1,"grace":"2h"}`},
		{"grace in days", `[{"name":"lobby","deadline":"48h"}]`, `{"keepLast":3,"minKeep":1,"grace":"2d"}`},
		{"a longer deadline into another store", `[{"name":"lobby","prune":{"runId":"p1","keepLast":3,"minKeep":1,"grace":"45m"}},` +
			`{"name":"survival","deadline":"5h","store":{"url":"s3://other/x","credentialsSecretName":"s3"}}]`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := map[string]string{"worldbackup:image": "img:1", "worldbackup:backupClaim": "backups", "worldbackup:servers": tt.servers}
			if tt.retention != "" {
				m["worldbackup:retention"] = tt.retention
			}
			if _, err := ParseConfig(getter(m), nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Inline programs get no key list: a key that differs from a known one only
// in case or separators is still caught.
func TestParseConfigCatchesMisspeltKeysWithoutAKeyList(t *testing.T) {
	m := map[string]string{
		"worldbackup:image":       "img:1",
		"worldbackup:backupClaim": "backups",
		"worldbackup:servers":     `[{"name":"lobby"}]`,
		"worldbackup:runid":       "x",
	}
	_, err := ParseConfig(getter(m), nil)
	if err == nil || !strings.Contains(err.Error(), "worldbackup:runid is not a key this program reads: did you mean worldbackup:runId?") {
		t.Errorf("got %v", err)
	}
}

func TestRunIDIsUniquePerClusterAndServer(t *testing.T) {
	seen := map[string]bool{}
	for _, cl := range []string{"eu", "us"} {
		for _, s := range []string{"lobby", "survival"} {
			id := RunID(cl, s, "20261130")
			if seen[id] {
				t.Errorf("run ID %s repeats", id)
			}
			seen[id] = true
		}
	}
}

func TestSkipAwaitWithARestoreOfAServerNotBackedUp(t *testing.T) {
	m := map[string]string{
		"worldbackup:image":       "img:1",
		"worldbackup:backupClaim": "backups",
		"worldbackup:servers":     `[{"name":"lobby"}]`,
		"worldbackup:skipAwait":   "true",
		"worldbackup:restores":    `[{"server":"retired","archiveRef":"/backups/a","sha256":"ab"}]`,
	}
	if _, err := ParseConfig(getter(m), nil); err != nil {
		t.Fatalf("a restore no backup precedes was refused with skipAwait: %v", err)
	}
}

// TestComponentArgsByMode: deploying, each component gets the cluster's
// kubeconfig and context for its preflight and keeps its replaceUnready
// default; rendering, both are off (there is no cluster to ask).
func TestComponentArgsByMode(t *testing.T) {
	cl := Cluster{Name: "eu", Kubeconfig: "/etc/kube/eu", Context: "prod-eu"}
	r := Restore{Server: "lobby", ArchiveRef: "/backups/lobby/a.tar.zst", SHA256: strings.Repeat("a", 64)}
	tests := []struct {
		name           string
		renderDir      string
		wantPreflight  bool
		wantReplaceOff bool
	}{
		{"deploy", "", true, false},
		{"render", "/tmp/out", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Image: "img:1", BackupClaim: "backups", RunID: "r1", RenderDir: tt.renderDir,
				Servers: []Server{{Name: "lobby", GamePodAffinity: "required"}}, Restores: []Restore{r}}
			b := backupArgs(cfg, cl, cfg.Servers[0])
			w := restoreArgs(cfg, cl, r, pulumi.String(r.ArchiveRef))
			for _, got := range []struct {
				what                   string
				preflight, replace     *bool
				kubeconfig, ctx, affin string
			}{
				{"backup", b.Preflight, b.ReplaceUnready, b.Kubeconfig, b.KubeContext, promptString(b.GamePodAffinity)},
				{"restore", w.Preflight, w.ReplaceUnready, w.Kubeconfig, w.KubeContext, promptString(w.GamePodAffinity)},
			} {
				if got.preflight == nil || *got.preflight != tt.wantPreflight {
					t.Errorf("%s: preflight = %v, want %v", got.what, got.preflight, tt.wantPreflight)
				}
				if off := got.replace != nil && !*got.replace; off != tt.wantReplaceOff {
					t.Errorf("%s: replaceUnready = %v, want off %v", got.what, got.replace, tt.wantReplaceOff)
				}
				if got.kubeconfig != cl.Kubeconfig || got.ctx != cl.Context {
					t.Errorf("%s: kubeconfig %q context %q, want the cluster's", got.what, got.kubeconfig, got.ctx)
				}
				if got.affin != "required" {
					t.Errorf("%s: gamePodAffinity %q, want the server's", got.what, got.affin)
				}
			}
		})
	}
}

func TestRconAndRetention(t *testing.T) {
	m := map[string]string{
		"worldbackup:image":       "img:1",
		"worldbackup:backupClaim": "backups",
		"worldbackup:servers": `[{"name":"lobby","rcon":{"chartRelease":"lobby"}},` +
			`{"name":"survival","retention":{"keepLast":2,"minKeep":1}}]`,
		"worldbackup:retention": `{"keepDaily":7,"keepWeekly":4,"minKeep":3}`,
	}
	c, err := ParseConfig(getter(m), nil)
	if err != nil {
		t.Fatal(err)
	}
	lobby := backupArgs(c, c.Clusters[0], c.Servers[0])
	lj, err := lobby.Job()
	if err != nil {
		t.Fatalf("lobby's args: %v", err)
	}
	if lj.Rcon == nil || lj.Rcon.SecretName != "lobby-minecraft-rcon" || lj.Retention == nil || lj.Retention.KeepDaily != 7 || lj.Retention.MinKeep != 3 {
		t.Fatalf("lobby: rcon %+v retention %+v; want the chart's rcon and the stack-wide retention", lj.Rcon, lj.Retention)
	}
	survival := backupArgs(c, c.Clusters[0], c.Servers[1])
	sj, err := survival.Job()
	if err != nil {
		t.Fatalf("survival's args: %v", err)
	}
	if sj.Rcon != nil || sj.Retention == nil || sj.Retention.KeepLast != 2 || sj.Retention.KeepDaily != 0 {
		t.Fatalf("survival: rcon %+v retention %+v; want no rcon and its own retention", sj.Rcon, sj.Retention)
	}
	if err := lobby.Validate(); err != nil {
		t.Fatalf("lobby's args: %v", err)
	}

	m["worldbackup:retention"] = `{"keepDialy":7}`
	if _, err := ParseConfig(getter(m), nil); err == nil || !strings.Contains(err.Error(), "worldbackup:retention must be an object") {
		t.Fatalf("a typo in retention: %v", err)
	}
}

// TestFormat: worldbackup:format reaches every backup and schedule, a
// server's own format replaces it, and the component predicts the
// manifest's archiveRef; a server's compression with chunked, given or the
// default, is refused by the program naming the key, and by the component
// naming the input.
func TestFormat(t *testing.T) {
	m := map[string]string{
		"worldbackup:image":       "img:1",
		"worldbackup:backupClaim": "backups",
		"worldbackup:format":      "chunked",
		"worldbackup:servers":     `[{"name":"lobby"},{"name":"survival","format":"tar","compression":"gzip"}]`,
	}
	c, err := ParseConfig(getter(m), nil)
	if err != nil {
		t.Fatal(err)
	}
	cl := c.Clusters[0]
	for _, tt := range []struct {
		server     int
		wantFormat string
		wantRef    string
	}{
		{0, "chunked", "/backups/_chunked/runs/lobby/" + RunID(cl.Name, "lobby", c.RunID) + ".manifest"},
		{1, "tar", "/backups/survival/" + RunID(cl.Name, "survival", c.RunID) + ".tar.gz"},
	} {
		a := backupArgs(c, cl, c.Servers[tt.server])
		j, err := a.Job()
		if err != nil {
			t.Fatalf("%s: %v", c.Servers[tt.server].Name, err)
		}
		if j.Format != tt.wantFormat || j.Request().Format != tt.wantFormat {
			t.Errorf("%s: format %q, want %q", c.Servers[tt.server].Name, j.Format, tt.wantFormat)
		}
		ref, err := jobapi.ArchiveRef(j.BackupRoot, j.Server, j.RunID, j.Format, j.Compression)
		if err != nil || ref != tt.wantRef {
			t.Errorf("%s: archiveRef %q, %v; want %q", c.Servers[tt.server].Name, ref, err, tt.wantRef)
		}
	}
	creative := Server{Name: "creative", Compression: "none"}
	err = backupArgs(c, cl, creative).Validate()
	if err == nil || !strings.Contains(err.Error(), "compression") || !strings.Contains(err.Error(), "format is chunked") {
		t.Fatalf("creative (compression with the stack's chunked format): %v; want the component's refusal naming compression", err)
	}
	for _, tt := range []struct{ name, format, servers, want string }{
		{"the stack's chunked", "chunked", `[{"name":"lobby"},{"name":"creative","compression":"none"}]`,
			`worldbackup:servers[1].compression is "none", but the format is chunked: compression is a setting of the tar format`},
		{"the server's chunked", "tar", `[{"name":"creative","format":"chunked","compression":"zstd"}]`,
			`worldbackup:servers[0].compression is "zstd", but the format is chunked`},
		{"the default", "", `[{"name":"creative","compression":"gzip"}]`,
			`servers[0].compression is "gzip", but neither servers[0].format nor worldbackup:format is set, so the format is chunked, the default: ` +
				`compression is a setting of the tar format: chunked compresses each blob with zstd when that helps: remove compression, or set servers[0].format: tar`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := map[string]string{"worldbackup:image": "img:1", "worldbackup:backupClaim": "backups", "worldbackup:servers": tt.servers}
			if tt.format != "" {
				m["worldbackup:format"] = tt.format
			}
			if _, err := ParseConfig(getter(m), nil); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseConfig: %v; want an error containing %q", err, tt.want)
			}
		})
	}
	m["worldbackup:format"] = "tar"
	m["worldbackup:servers"] = `[{"name":"creative","compression":"none"}]`
	if _, err := ParseConfig(getter(m), nil); err != nil {
		t.Fatalf("compression with the stack's tar: %v", err)
	}
}

func TestRetentionDefaultIsNone(t *testing.T) {
	c, err := ParseConfig(getter(map[string]string{
		"worldbackup:image": "img:1", "worldbackup:backupClaim": "backups",
		"worldbackup:servers": `[{"name":"lobby"}]`, "worldbackup:retention": "{}",
	}), nil)
	if err != nil || c.Retention != nil {
		t.Fatalf("retention %+v, err %v: the project default {} means no prune", c.Retention, err)
	}
}

func TestScheduleIsDeclared(t *testing.T) {
	c, err := ParseConfig(getter(map[string]string{
		"worldbackup:image": "img:1", "worldbackup:backupClaim": "backups",
		"worldbackup:servers": `[{"name":"lobby","schedule":"0 4 * * *","timeZone":"UTC"}]`,
	}), nil)
	if err != nil || c.Servers[0].Schedule != "0 4 * * *" || c.Servers[0].TimeZone != "UTC" {
		t.Fatalf("servers %+v, err %v", c.Servers, err)
	}
}

func TestStore(t *testing.T) {
	const sum = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	m := map[string]string{
		"worldbackup:image": "img:1",
		"worldbackup:servers": `[{"name":"lobby"},` +
			`{"name":"survival","store":{"url":"s3://other/worlds","credentialsSecretName":"other-s3"}}]`,
		"worldbackup:store":    `{"url":"s3://felis-backups/worlds","endpoint":"http://minio.storage:9000","pathStyle":true,"credentialsSecretName":"felis-s3"}`,
		"worldbackup:restores": `[{"server":"lobby","archiveRef":"s3://felis-backups/old/lobby/x.tar.zst","sha256":"` + sum + `"}]`,
	}
	c, err := ParseConfig(getter(m), nil)
	if err != nil {
		t.Fatalf("no backupClaim with a store for every server: %v", err)
	}
	lobby := backupArgs(c, c.Clusters[0], c.Servers[0])
	if lobby.Store == nil || promptString(lobby.Store.URL) != "s3://felis-backups/worlds" || promptString(lobby.Store.CredentialsSecretName) != "felis-s3" || lobby.BackupClaimName != nil {
		t.Fatalf("lobby: store %+v, claim %v; want the stack-wide store and no claim", lobby.Store, lobby.BackupClaimName)
	}
	survival := backupArgs(c, c.Clusters[0], c.Servers[1])
	if survival.Store == nil || promptString(survival.Store.URL) != "s3://other/worlds" || promptString(survival.Store.Endpoint) != "" {
		t.Fatalf("survival: store %+v; want its own store", survival.Store)
	}
	restore := restoreArgs(c, c.Clusters[0], c.Restores[0], pulumi.String(c.Restores[0].ArchiveRef))
	if restore.Store == nil || promptString(restore.Store.Endpoint) != "http://minio.storage:9000" || restore.Store.URL != nil || restore.BackupClaimName != nil {
		t.Fatalf("restore: store %+v, claim %v; want the server's store settings without its url, no claim", restore.Store, restore.BackupClaimName)
	}
	if ps, _ := restore.Store.PathStyle.(pulumi.Bool); !bool(ps) {
		t.Fatalf("restore: pathStyle %v, want true", restore.Store.PathStyle)
	}
	for what, err := range map[string]error{"lobby": lobby.Validate(), "survival": survival.Validate(), "restore": restore.Validate()} {
		if err != nil {
			t.Fatalf("%s's args: %v", what, err)
		}
	}

	t.Run("a server without a store needs the claim", func(t *testing.T) {
		m := maps.Clone(m)
		m["worldbackup:store"] = "{}"
		_, err := ParseConfig(getter(m), nil)
		if err == nil || !strings.Contains(err.Error(), "worldbackup:backupClaim is required (unless every server has an S3 store)") {
			t.Fatalf("err = %v", err)
		}
		if !strings.Contains(err.Error(), `restores[0] (lobby): archiveRef "s3://felis-backups/old/lobby/x.tar.zst" is in an S3 store, but neither`) {
			t.Fatalf("err = %v, want the restore's missing store", err)
		}
	})
	t.Run("a typo in store", func(t *testing.T) {
		m := maps.Clone(m)
		m["worldbackup:store"] = `{"ulr":"s3://x"}`
		if _, err := ParseConfig(getter(m), nil); err == nil || !strings.Contains(err.Error(), "worldbackup:store must be an object") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("an archive path is restored from the claim", func(t *testing.T) {
		m := maps.Clone(m)
		m["worldbackup:backupClaim"] = "backups"
		m["worldbackup:restores"] = `[{"server":"lobby","archiveRef":"/backups/lobby/x.tar.zst","sha256":"` + sum + `"}]`
		c, err := ParseConfig(getter(m), nil)
		if err != nil {
			t.Fatal(err)
		}
		r := restoreArgs(c, c.Clusters[0], c.Restores[0], pulumi.String(c.Restores[0].ArchiveRef))
		if r.Store != nil || promptString(r.BackupClaimName) != "backups" {
			t.Fatalf("restore: store %+v, claim %v; want the claim", r.Store, r.BackupClaimName)
		}
	})
	t.Run("a prune of a server with a store prunes the store", func(t *testing.T) {
		m := maps.Clone(m)
		m["worldbackup:servers"] = `[{"name":"lobby","prune":{"runId":"p1","keepLast":2,"minKeep":1}},` +
			`{"name":"survival","store":{"url":"s3://other/worlds","credentialsSecretName":"other-s3"},"prune":{"runId":"p1","keepLast":2,"minKeep":1}}]`
		c, err := ParseConfig(getter(m), nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []struct{ url, secret string }{{"s3://felis-backups/worlds", "felis-s3"}, {"s3://other/worlds", "other-s3"}} {
			a := pruneArgs(c, c.Clusters[0], c.Servers[i], c.longestDeadlines())
			if a.Store == nil || promptString(a.Store.URL) != want.url || promptString(a.Store.CredentialsSecretName) != want.secret || a.BackupClaimName != nil {
				t.Fatalf("prune of %s: store %+v, claim %v; want the backup's store %s and no claim", c.Servers[i].Name, a.Store, a.BackupClaimName, want.url)
			}
			if err := a.Validate(); err != nil {
				t.Fatalf("prune of %s: %v", c.Servers[i].Name, err)
			}
		}
	})
}

func TestPruneIsDeclared(t *testing.T) {
	m := map[string]string{
		"worldbackup:image": "img:1", "worldbackup:backupClaim": "backups",
		"worldbackup:servers": `[{"name":"lobby","securityMode":"restricted","prune":{"runId":"p1","keepLast":2,"minKeep":1,"grace":"2h","dryRun":true}}]`,
	}
	c, err := ParseConfig(getter(m), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := pruneArgs(c, c.Clusters[0], c.Servers[0], c.longestDeadlines())
	if promptString(a.RunID) != RunID(DefaultCluster, "lobby", "p1") || a.Retention.KeepLast != pulumi.Int(2) ||
		promptString(a.Retention.Grace) != "2h" || !a.DryRun || *a.SecurityMode != provider.SecurityModeRestricted ||
		promptString(a.BackupClaimName) != "backups" || a.WorldClaimName != nil || a.Store != nil {
		t.Fatalf("prune args %+v", a)
	}
	if err := a.Validate(); err != nil {
		t.Fatalf("prune args: %v", err)
	}

	m["worldbackup:servers"] = `[{"name":"lobby","prune":{"keepLast":2,"minKeep":1}}]`
	if _, err := ParseConfig(getter(m), nil); err == nil || !strings.Contains(err.Error(), "servers[0].prune.runId is required") {
		t.Fatalf("a prune without runId: %v", err)
	}

	m["worldbackup:servers"] = `[{"name":"lobby","verify":{"chunkSample":"10%","scratchSize":"40Gi"}}]`
	cfg, err := ParseConfig(getter(m), nil)
	if err != nil || cfg.Servers[0].Verify == nil || *cfg.Servers[0].Verify != (Verify{ChunkSample: "10%", ScratchSize: "40Gi"}) {
		t.Fatalf("a verify: %+v, %v", cfg.Servers, err)
	}
	m["worldbackup:skipAwait"] = "true"
	if _, err := ParseConfig(getter(m), nil); err == nil || !strings.Contains(err.Error(), "servers[0].verify needs this run's backup recorded") {
		t.Fatalf("a verify with skipAwait: %v", err)
	}
	m["worldbackup:servers"] = `[{"name":"lobby","verify":{"schedule":"@daily-random","timeZone":"Europe/Berlin"}}]`
	if cfg, err := ParseConfig(getter(m), nil); err != nil || !cfg.Servers[0].Verify.scheduled() {
		t.Fatalf("a scheduled verify with skipAwait (it verifies a run by reference): %+v, %v", cfg.Servers, err)
	}
	delete(m, "worldbackup:skipAwait")
	m["worldbackup:servers"] = `[{"name":"lobby","encryption":{"secretName":"lobby-age","secretKey":"key.txt"},"verify":{"chunkSample":"10%"}}]`
	if _, err := ParseConfig(getter(m), nil); err != nil {
		t.Fatalf("a verify of an encrypted server: %v", err)
	}
	m["worldbackup:servers"] = `[{"name":"lobby","verify":{"timeZone":"UTC"}}]`
	if _, err := ParseConfig(getter(m), nil); err == nil || !strings.Contains(err.Error(), "servers[0].verify.timeZone and .spread go with servers[0].verify.schedule") {
		t.Fatalf("a verify time zone without a schedule: %v", err)
	}
}

// TestPruneTakesTheLongestDeadlineOfItsStore: a server's prune gets the
// longest deadline of the backups into its store as backupDeadline, so a
// grace that covers the servers' short deadlines (the node tests' 2m) is
// accepted by the component, and one that does not is refused.
func TestPruneTakesTheLongestDeadlineOfItsStore(t *testing.T) {
	for _, tt := range []struct {
		name, servers, want string
	}{
		{"short deadlines, a grace that covers them",
			`[{"name":"lobby","deadline":"2m","prune":{"runId":"p1","keepLast":2,"minKeep":1,"grace":"2m"}}]`, "2m"},
		{"the longest of the store's servers",
			`[{"name":"lobby","deadline":"2m","prune":{"runId":"p1","keepLast":2,"minKeep":1,"grace":"45m"}},{"name":"survival","deadline":"45m"}]`, "45m"},
		{"the default deadline",
			`[{"name":"lobby","prune":{"runId":"p1","keepLast":2,"minKeep":1}}]`, "30m"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig(getter(map[string]string{"worldbackup:image": "img:1", "worldbackup:backupClaim": "backups",
				"worldbackup:servers": tt.servers}), nil)
			if err != nil {
				t.Fatal(err)
			}
			a := pruneArgs(c, c.Clusters[0], c.Servers[0], c.longestDeadlines())
			if got := promptString(a.BackupDeadline); got != tt.want {
				t.Errorf("backupDeadline %q, want %q", got, tt.want)
			}
			if err := a.Validate(); err != nil {
				t.Fatalf("prune args: %v", err)
			}
		})
	}
}

// promptString is the value of a prompt string input ("" for any other).
func promptString(in pulumi.StringInput) string {
	s, _ := in.(pulumi.String)
	return string(s)
}

// TestRestoreByRunArgs: a restore entry with fromRun gives the component
// fromRun (and fromServer) with no archive or checksum, a run ID of its
// own per entry, and the server's S3 store when it has one.
func TestRestoreByRunArgs(t *testing.T) {
	cl := Cluster{Name: "eu"}
	cfg := Config{Image: "img:1", BackupClaim: "backups", RunID: "r1", Servers: []Server{{Name: "lobby"},
		{Name: "vault", Encryption: &Encryption{SecretName: "vault-age", SecretKey: "key.txt"}}}}
	for _, tt := range []struct {
		name    string
		r       Restore
		wantRun string
	}{
		{"latest", Restore{Server: "lobby", FromRun: "latest"}, "eu.lobby.restore-latest"},
		{"latest again, a new runId", Restore{Server: "lobby", FromRun: "latest", RunID: "2"}, "eu.lobby.restore-2"},
		{"a run ID of another server", Restore{Server: "lobby", FromRun: "eu.hub.r7", FromServer: "hub"}, "eu.lobby.restore-eu.hub.r7"},
		{"latest of an encrypted server", Restore{Server: "vault", FromRun: "latest"}, "eu.vault.restore-latest"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg
			c.Restores = []Restore{tt.r}
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			a := restoreArgs(c, cl, tt.r, pulumi.String(tt.r.FromRun))
			j, err := a.Job()
			if err != nil {
				t.Fatalf("Job: %v", err)
			}
			if j.FromRun != tt.r.FromRun || j.FromServer != tt.r.FromServer || j.ArchiveRef != "" || j.SHA256 != "" || j.RunID != tt.wantRun {
				t.Fatalf("restore %+v: want fromRun %q of %q, run ID %q, no archive", j, tt.r.FromRun, tt.r.FromServer, tt.wantRun)
			}
			// A restore by run of an encrypted server reads it with its key.
			if got, want := j.Encryption != nil, tt.r.Server == "vault"; got != want {
				t.Fatalf("restore of %s: encryption %+v", tt.r.Server, j.Encryption)
			}
		})
	}
}

// TestNotifyConfig: worldbackup:notify reaches every Job's notify input.
func TestNotifyConfig(t *testing.T) {
	c, err := ParseConfig(getter(map[string]string{
		"worldbackup:image":       "img:1",
		"worldbackup:backupClaim": "backups",
		"worldbackup:servers":     `[{"name":"lobby"}]`,
		"worldbackup:notify":      `{"secretName":"felis-notify","key":"url","onSuccess":true}`,
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := backupArgs(c, c.Clusters[0], c.Servers[0]).Job()
	if err != nil {
		t.Fatal(err)
	}
	if b.Notify == nil || b.Notify.SecretName != "felis-notify" || b.Notify.Key != "url" || !b.Notify.Always {
		t.Fatalf("backup notify = %+v", b.Notify)
	}
	if _, err := ParseConfig(getter(map[string]string{"worldbackup:notify": `{"url":"https://x"}`}), nil); err == nil ||
		!strings.Contains(err.Error(), "notify must be an object") {
		t.Fatalf("a URL in the config: %v", err)
	}
}

// TestMetricsConfig: worldbackup:metrics declares the exporter only when
// enabled; a misspelt field is named with an example.
func TestMetricsConfig(t *testing.T) {
	base := map[string]string{"worldbackup:image": "img:1", "worldbackup:backupClaim": "backups", "worldbackup:servers": `[{"name":"lobby"}]`}
	for _, tt := range []struct {
		name, raw string
		want      *Metrics
		wantErr   string
	}{
		{"enabled", `{"enabled":true,"maxAge":"26h","configSecretName":"felis-reader"}`, &Metrics{Enabled: true, MaxAge: "26h", ConfigSecretName: "felis-reader"}, ""},
		{"disabled", `{"enabled":false,"maxAge":"26h"}`, nil, ""},
		{"empty", `{}`, nil, ""},
		{"misspelt", `{"enable":true}`, nil, "metrics must be an object such as {enabled: true, maxAge: 26h}"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := maps.Clone(base)
			m["worldbackup:metrics"] = tt.raw
			c, err := ParseConfig(getter(m), nil)
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case (c.Metrics == nil) != (tt.want == nil) || c.Metrics != nil && *c.Metrics != *tt.want:
				t.Fatalf("metrics %+v, want %+v", c.Metrics, tt.want)
			}
		})
	}
}

// TestServerLimitsHoldForEveryJob: a server's deadline, cpuLimit and
// memoryLimit are its restores', prunes' and verifies' too, not only its
// backups': a world that needs a longer deadline takes as long to restore.
func TestServerLimitsHoldForEveryJob(t *testing.T) {
	c, err := ParseConfig(getter(map[string]string{
		"worldbackup:image":       "img:1",
		"worldbackup:backupClaim": "backups",
		"worldbackup:servers": `[{"name":"vast","deadline":"3h","cpuLimit":"2","memoryLimit":"3Gi",` +
			`"prune":{"runId":"p1","keepLast":3,"grace":"3h"},"verify":{"schedule":"0 5 * * *"}}]`,
		"worldbackup:restores": `[{"server":"vast","fromRun":"latest"}]`,
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	cl, s := c.Clusters[0], c.Servers[0]
	for name, j := range map[string]provider.JobInputs{
		"backup":          backupArgs(c, cl, s).JobInputs,
		"restore":         restoreArgs(c, cl, c.Restores[0], pulumi.String("latest")).JobInputs,
		"prune":           pruneArgs(c, cl, s, c.longestDeadlines()).JobInputs,
		"verify":          verifyArgs(c, cl, s, nil).JobInputs,
		"verify schedule": verifyScheduleArgs(c, cl, s).JobInputs,
	} {
		t.Run(name, func(t *testing.T) {
			for input, got := range map[string]pulumi.StringInput{"deadline": j.Deadline, "cpuLimit": j.CPULimit, "memoryLimit": j.MemoryLimit} {
				want := map[string]string{"deadline": "3h", "cpuLimit": "2", "memoryLimit": "3Gi"}[input]
				if v, ok := got.(pulumi.String); !ok || string(v) != want {
					t.Errorf("%s = %v, want the server's %s", input, got, want)
				}
			}
		})
	}
}

// TestImagePullSecretsForEveryPod: worldbackup:imagePullSecrets reaches
// every pod the program makes (its Jobs, CronJobs and exporter), so a
// private registry needs one key; a value that is not a list of names is
// refused naming the key.
func TestImagePullSecretsForEveryPod(t *testing.T) {
	c, err := ParseConfig(getter(map[string]string{
		"worldbackup:image":            "ghcr.io/you/archiver:1",
		"worldbackup:backupClaim":      "backups",
		"worldbackup:imagePullSecrets": `["ghcr-pull","mirror-pull"]`,
		"worldbackup:metrics":          `{"enabled":true}`,
		"worldbackup:servers": `[{"name":"vast","schedule":"0 3 * * *",` +
			`"prune":{"runId":"p1","keepLast":3},"verify":{"schedule":"0 5 * * *"}}]`,
		"worldbackup:restores": `[{"server":"vast","fromRun":"latest"}]`,
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	cl, s := c.Clusters[0], c.Servers[0]
	want := []string{"ghcr-pull", "mirror-pull"}
	for name, got := range map[string]pulumi.StringArrayInput{
		"backup":          backupArgs(c, cl, s).ImagePullSecrets,
		"restore":         restoreArgs(c, cl, c.Restores[0], pulumi.String("latest")).ImagePullSecrets,
		"prune":           pruneArgs(c, cl, s, c.longestDeadlines()).ImagePullSecrets,
		"verify":          verifyArgs(c, cl, s, nil).ImagePullSecrets,
		"verify schedule": verifyScheduleArgs(c, cl, s).ImagePullSecrets,
		"metrics":         metricsArgs(c, cl).ImagePullSecrets,
	} {
		t.Run(name, func(t *testing.T) {
			arr, ok := got.(pulumi.StringArray)
			var names []string
			for _, v := range arr {
				if sv, ok := v.(pulumi.String); ok {
					names = append(names, string(sv))
				}
			}
			if !ok || !slices.Equal(names, want) {
				t.Errorf("imagePullSecrets = %#v, want %v", got, want)
			}
		})
	}

	_, err = ParseConfig(getter(map[string]string{
		"worldbackup:image": "img:1", "worldbackup:backupClaim": "backups",
		"worldbackup:imagePullSecrets": `ghcr-pull`,
	}), nil)
	if err == nil || !strings.Contains(err.Error(), "worldbackup:imagePullSecrets must be a list of Secret names") {
		t.Errorf("a bare name for imagePullSecrets: err = %v, want one naming the key", err)
	}
}

// TestSharedCatalogAcrossClusters: with several clusters sharing a catalog
// (the default), what picks among a server's runs by name (prunes,
// schedules, restores of the newest run) is refused, naming each setting
// and the fix; one cluster, or sharedCatalog false, takes them.
func TestSharedCatalogAcrossClusters(t *testing.T) {
	const two = `[{"name":"eu"},{"name":"us"}]`
	for _, tt := range []struct {
		name, clusters, shared string
		servers, retention     string
		restores               string
		want                   []string // empty: accepted
	}{
		{name: "backups only", clusters: two, servers: `[{"name":"survival"}]`},
		{name: "a prune", clusters: two, servers: `[{"name":"survival","prune":{"runId":"p1","keepLast":3,"minKeep":1}}]`,
			want: []string{"servers[0].prune: the 2 clusters share one catalog", "search_path=<cluster>", "worldbackup:sharedCatalog false"}},
		{name: "stack retention", clusters: two, servers: `[{"name":"survival"}]`, retention: `{"keepLast":3,"minKeep":1}`,
			want: []string{"worldbackup:retention: the 2 clusters"}},
		{name: "schedules", clusters: two, servers: `[{"name":"lobby"},{"name":"survival","schedule":"@daily-random","verify":{"schedule":"@daily-random"}}]`,
			want: []string{"servers[1].schedule, servers[1].verify.schedule: the 2 clusters"}},
		{name: "restore of the newest run", clusters: two, servers: `[{"name":"survival"}]`,
			restores: `[{"server":"survival","cluster":"us","fromRun":"latest"}]`,
			want:     []string{"restores[0].fromRun latest: the 2 clusters"}},
		{name: "restore by run ID", clusters: two, servers: `[{"name":"survival"}]`,
			restores: `[{"server":"survival","cluster":"us","fromRun":"eu.survival.initial"}]`},
		{name: "a catalog per cluster", clusters: two, shared: "false",
			servers: `[{"name":"survival","schedule":"@daily","prune":{"runId":"p1","keepLast":3,"minKeep":1}}]`},
		{name: "one cluster", clusters: `[{"name":"eu"}]`,
			servers: `[{"name":"survival","schedule":"@daily","prune":{"runId":"p1","keepLast":3,"minKeep":1}}]`},
		{name: "bad value", clusters: two, shared: "no", servers: `[{"name":"survival"}]`,
			want: []string{"sharedCatalog must be true or false"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := map[string]string{"worldbackup:image": "img:1", "worldbackup:backupClaim": "backups",
				"worldbackup:servers": tt.servers, "worldbackup:clusters": tt.clusters}
			for k, v := range map[string]string{"sharedCatalog": tt.shared, "retention": tt.retention, "restores": tt.restores} {
				if v != "" {
					m["worldbackup:"+k] = v
				}
			}
			_, err := ParseConfig(getter(m), nil)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want an error with %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
