package deploy

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/provider/naming"
)

// recorder records every resource registration of a mocked program.
type recorder struct {
	mu   sync.Mutex
	regs []pulumi.MockResourceArgs
}

func (r *recorder) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.regs = append(r.regs, args)
	return args.Name + "-id", args.Inputs, nil
}

func (r *recorder) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	return args.Args, nil
}

// TestRestoreAfterBackupTakesItsArchiveRef: a restore of a server this
// program backs up is preceded by a backup of its own run
// (<cluster>.<server>.pre-<trigger>), which saves the world it replaces
// also when worldbackup:runId did not change (this run's backup then ran
// days ago); that backup starts after this run's backup. Both orders are
// data dependencies (the archiveRef Outputs), at preview and at up, and
// the restore Job restores the configured archive.
func TestRestoreAfterBackupTakesItsArchiveRef(t *testing.T) {
	sum := strings.Repeat("c", 64)
	cfg := Config{Image: "img:1", BackupClaim: "backups", RunID: "r1", SecurityMode: "baseline",
		Servers: []Server{{Name: "lobby", Rcon: &Rcon{}}},
		// keepLast 1: a prune in the backup before the restore would
		// remove the run that the restore reads next.
		Retention: &Retention{KeepLast: 1, MinKeep: 1},
		Clusters:  []Cluster{{Name: "default"}},
		Restores:  []Restore{{Server: "lobby", ArchiveRef: "/backups/lobby/old.tar.zst", SHA256: sum}},
		RenderDir: "/tmp/unused"} // render mode: no preflight against a cluster
	dependsOn := func(r *pulumi.MockResourceArgs, name string) bool {
		deps := slices.Clone(r.RegisterRPC.GetDependencies())
		for _, pd := range r.RegisterRPC.GetPropertyDependencies() {
			deps = append(deps, pd.GetUrns()...)
		}
		return slices.ContainsFunc(deps, func(u string) bool { return strings.HasSuffix(u, "::"+name) })
	}
	for _, dryRun := range []bool{true, false} {
		t.Run(map[bool]string{true: "preview", false: "up"}[dryRun], func(t *testing.T) {
			rec := &recorder{}
			err := pulumi.RunErr(func(ctx *pulumi.Context) error { return Deploy(ctx, cfg) },
				pulumi.WithMocks("project", "stack", rec), func(info *pulumi.RunInfo) { info.DryRun = dryRun })
			if err != nil {
				t.Fatal(err)
			}
			jobs := map[string]*pulumi.MockResourceArgs{}
			for i, r := range rec.regs {
				jobs[r.Name] = &rec.regs[i]
			}
			restore, pre, backup := jobs["default-lobby-restore-job"], jobs["default-lobby-pre-restore-job"], jobs["default-lobby-job"]
			if restore == nil || pre == nil || backup == nil {
				t.Fatalf("registered %d resources, want the backup's, the pre-restore backup's and the restore's Jobs", len(rec.regs))
			}
			b, _ := json.Marshal(restore.Inputs.Mappable())
			if !strings.Contains(string(b), `"/backups/lobby/old.tar.zst"`) {
				t.Errorf("the restore Job does not restore the configured archive: %s", b)
			}
			if !dependsOn(restore, "default-lobby-pre-restore-job") {
				t.Error("the restore Job does not wait for the backup before it")
			}
			if !dependsOn(pre, "default-lobby-job") {
				t.Error("the backup before the restore does not wait for this run's backup")
			}
			if !dryRun {
				b, _ := json.Marshal(pre.Inputs.Mappable())
				if want := `"default.lobby.pre-restore-` + sum[:12] + `"`; !strings.Contains(string(b), want) {
					t.Errorf("the backup before the restore is not run %s: %s", want, b)
				}
				// The restore wants the game server stopped: the
				// backup before it must not fail on that, nor prune.
				for _, want := range []string{`"--rcon-required=false"`} {
					if !strings.Contains(string(b), want) {
						t.Errorf("the backup before the restore lacks %s: %s", want, b)
					}
				}
				for _, unwanted := range []string{`"--keep-last"`, `"--min-keep"`} {
					if strings.Contains(string(b), unwanted) {
						t.Errorf("the backup before the restore prunes (%s): %s", unwanted, b)
					}
				}
				// This run's backup keeps the server's settings.
				bb, _ := json.Marshal(backup.Inputs.Mappable())
				for _, want := range []string{`"--keep-last"`, `"--min-keep"`} {
					if !strings.Contains(string(bb), want) {
						t.Errorf("this run's backup lacks %s: %s", want, bb)
					}
				}
				if strings.Contains(string(bb), `"--rcon-required=false"`) {
					t.Errorf("this run's backup no longer requires RCON: %s", bb)
				}
			}
		})
	}
}

// TestInputsAfterTheBackupCheckedAtPreview: a restore or verify that takes
// this run's backup's outputs (unknown at preview) still has its own inputs
// checked at preview, before any Job runs, naming the input.
func TestInputsAfterTheBackupCheckedAtPreview(t *testing.T) {
	sum := strings.Repeat("c", 64)
	base := func() Config {
		return Config{Image: "img:1", BackupClaim: "backups", RunID: "r1", SecurityMode: "baseline",
			Servers: []Server{{Name: "lobby"}}, Clusters: []Cluster{{Name: "default"}}, RenderDir: "/tmp/unused"}
	}
	for _, tt := range []struct {
		name string
		edit func(c *Config)
		want string // "" = no error
	}{
		{"a valid restore", func(c *Config) {
			c.Restores = []Restore{{Server: "lobby", ArchiveRef: "/backups/lobby/old.tar.zst", SHA256: sum}}
		}, ""},
		{"a restore's checksum in upper case", func(c *Config) {
			c.Restores = []Restore{{Server: "lobby", ArchiveRef: "/backups/lobby/old.tar.zst", SHA256: strings.ToUpper(sum)}}
		}, "restore of lobby"},
		{"a verify's scratch size in thousandths", func(c *Config) {
			c.Servers[0].Verify = &Verify{ScratchSize: "1m"}
		}, "scratchSize"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base()
			tt.edit(&cfg)
			err := pulumi.RunErr(func(ctx *pulumi.Context) error { return Deploy(ctx, cfg) },
				pulumi.WithMocks("project", "stack", &recorder{}), func(info *pulumi.RunInfo) { info.DryRun = true })
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("preview: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("preview: %v; want an error naming %q", err, tt.want)
			}
		})
	}
	// The verify's check with the archive the backup will write: a valid
	// verify passes it (the mocks' backup reports no checksum, so the
	// component itself is not run here).
	cfg := base()
	for _, v := range []*Verify{{}, {ScratchSize: "1Gi", ChunkSample: "10%"}} {
		cfg.Servers[0].Verify = v
		if err := checkVerifyPlain(cfg, cfg.Clusters[0], cfg.Servers[0]); err != nil {
			t.Errorf("checkVerifyPlain(%+v): %v", *v, err)
		}
	}
	cfg.Servers[0].Verify = &Verify{ChunkSample: "200%"}
	if err := checkVerifyPlain(cfg, cfg.Clusters[0], cfg.Servers[0]); err == nil || !strings.Contains(err.Error(), "chunkSample") {
		t.Errorf("checkVerifyPlain with chunkSample 200%%: %v", err)
	}
}

// TestScheduleSpreadByCluster: a @daily-random schedule reaches each
// cluster's CronJob as the minute naming.SpreadSchedule derives from that
// cluster and server: the same server in two clusters fires at two minutes
// (for these names), and a spread window shifts a fixed schedule.
func TestScheduleSpreadByCluster(t *testing.T) {
	cfg := Config{Image: "img:1", BackupClaim: "backups", RunID: "r1", SecurityMode: "baseline",
		Servers:   []Server{{Name: "lobby", Schedule: "@daily-random"}, {Name: "survival", Schedule: "0 2 * * *", Spread: "2h"}},
		Clusters:  []Cluster{{Name: "eu"}, {Name: "us"}},
		RenderDir: "/tmp/unused"}
	rec := &recorder{}
	if err := pulumi.RunErr(func(ctx *pulumi.Context) error { return Deploy(ctx, cfg) }, pulumi.WithMocks("project", "stack", rec)); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rec.regs {
		if r.TypeToken == "kubernetes:batch/v1:CronJob" {
			got[r.Name] = r.Inputs["spec"].ObjectValue()["schedule"].StringValue()
		}
	}
	for _, cl := range []string{"eu", "us"} {
		for _, s := range cfg.Servers {
			window := map[string]time.Duration{"2h": 2 * time.Hour}[s.Spread]
			want, err := naming.SpreadSchedule(s.Schedule, window, naming.SpreadKey(cl, s.Name))
			if err != nil {
				t.Fatal(err)
			}
			if name := cl + "-" + s.Name + "-schedule-cronjob"; got[name] != want {
				t.Errorf("%s: schedule %q, want %q (all: %v)", name, got[name], want, got)
			}
		}
	}
	if got["eu-lobby-schedule-cronjob"] == got["us-lobby-schedule-cronjob"] {
		t.Errorf("lobby fires at %q in both clusters", got["eu-lobby-schedule-cronjob"])
	}
}

// TestVerifyScheduleDeclared: servers[].verify.schedule declares a
// WorldVerifySchedule of the server's newest run in each cluster, in
// render mode too (each Job resolves the run itself), with the server's
// encryption key and spread by <cluster>/<server>, half a day away from the
// server's @daily-random backup schedule; no on-demand verify.
func TestVerifyScheduleDeclared(t *testing.T) {
	cfg := Config{Image: "img:1", BackupClaim: "backups", RunID: "r1", SecurityMode: "baseline",
		Servers: []Server{{Name: "lobby", Encryption: &Encryption{SecretName: "lobby-age", SecretKey: "key.txt"}, Schedule: "@daily-random",
			Verify: &Verify{Schedule: "@daily-random", ChunkSample: "10%"}}},
		Clusters:  []Cluster{{Name: "eu"}},
		RenderDir: "/tmp/unused"}
	rec := &recorder{}
	if err := pulumi.RunErr(func(ctx *pulumi.Context) error { return Deploy(ctx, cfg) }, pulumi.WithMocks("project", "stack", rec)); err != nil {
		t.Fatal(err)
	}
	var cronJobs, verifyJobs []string
	var spec map[string]any
	var backupSchedule string
	for _, r := range rec.regs {
		switch {
		case r.TypeToken == "kubernetes:batch/v1:CronJob":
			cronJobs = append(cronJobs, r.Name)
			if r.Name == "eu-lobby-verify-schedule-cronjob" {
				spec = r.Inputs["spec"].Mappable().(map[string]any)
			}
			if r.Name == "eu-lobby-schedule-cronjob" {
				backupSchedule = r.Inputs["spec"].ObjectValue()["schedule"].StringValue()
			}
		case r.TypeToken == "kubernetes:batch/v1:Job" && strings.Contains(r.Name, "verify"):
			verifyJobs = append(verifyJobs, r.Name)
		}
	}
	if spec == nil || len(verifyJobs) != 0 {
		t.Fatalf("CronJobs %q, verify Jobs %q: want eu-lobby-verify-schedule-cronjob and no verify Job", cronJobs, verifyJobs)
	}
	want, err := naming.VerifySpreadSchedule("@daily-random", 0, naming.SpreadKey("eu", "lobby"))
	if err != nil {
		t.Fatal(err)
	}
	if backupSchedule == "" || backupSchedule == want {
		t.Errorf("the backup CronJob's schedule %q, the verify's %q: want both, at different minutes", backupSchedule, want)
	}
	b, _ := json.Marshal(spec)
	text := string(b)
	for _, w := range []string{`"schedule":"` + want + `"`, `"--from-run","latest"`, `"--archive-from"`, `"--chunks","10%"`,
		`"--encryption-key-file"`, `"secretName":"lobby-age"`} {
		if !strings.Contains(text, w) {
			t.Errorf("the verify CronJob's spec lacks %s:\n%s", w, text)
		}
	}
}

// TestMetricsDeclared: worldbackup:metrics.enabled declares one exporter per
// cluster, labelled with the cluster's name, in its namespace; without it,
// none.
func TestMetricsDeclared(t *testing.T) {
	for _, tt := range []struct {
		name    string
		metrics *Metrics
		want    []string
	}{
		{"enabled", &Metrics{Enabled: true, MaxAge: "36h"}, []string{"eu-metrics-deployment", "us-metrics-deployment"}},
		{"unset", nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Image: "img:1", BackupClaim: "backups", RunID: "r1", SecurityMode: "baseline",
				Servers: []Server{{Name: "lobby"}}, Clusters: []Cluster{{Name: "eu", Namespace: "games"}, {Name: "us"}},
				RenderDir: "/tmp/unused", Metrics: tt.metrics}
			rec := &recorder{}
			if err := pulumi.RunErr(func(ctx *pulumi.Context) error { return Deploy(ctx, cfg) }, pulumi.WithMocks("project", "stack", rec)); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rec.regs {
				if r.TypeToken != "kubernetes:apps/v1:Deployment" {
					continue
				}
				got = append(got, r.Name)
				b, _ := json.Marshal(r.Inputs.Mappable())
				cluster := strings.TrimSuffix(r.Name, "-metrics-deployment")
				for _, w := range []string{`"--cluster","` + cluster + `"`, `"--max-age","36h"`} {
					if !strings.Contains(string(b), w) {
						t.Errorf("%s lacks %s:\n%s", r.Name, w, b)
					}
				}
				if ns := r.Inputs["metadata"].ObjectValue()["namespace"].StringValue(); (cluster == "eu") != (ns == "games") {
					t.Errorf("%s in namespace %q", r.Name, ns)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Deployments %q, want %q", got, tt.want)
			}
		})
	}
}

// TestServerRunAsUserInBaseline: a server's non-root runAsUser in baseline
// mode (the stack's default) is refused without its fsGroup, saying to set
// it: the backup could not read its config Secret. With servers[].fsGroup
// the backup's pod gets it.
func TestServerRunAsUserInBaseline(t *testing.T) {
	for _, tt := range []struct {
		name    string
		fsGroup *int
		wantErr string
	}{
		{"without fsGroup", nil, "set fsGroup"},
		{"with fsGroup", new(1000), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Image: "img:1", BackupClaim: "backups", RunID: "r1", SecurityMode: "baseline",
				Servers:  []Server{{Name: "lobby", RunAsUser: new(1000), RunAsGroup: new(1000), FSGroup: tt.fsGroup}},
				Clusters: []Cluster{{Name: "eu"}}, RenderDir: "/tmp/unused"}
			rec := &recorder{}
			err := pulumi.RunErr(func(ctx *pulumi.Context) error { return Deploy(ctx, cfg) }, pulumi.WithMocks("project", "stack", rec))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), "runAsUser") || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Deploy: %v; want runAsUser refused, saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rec.regs {
				if r.TypeToken != "kubernetes:batch/v1:Job" {
					continue
				}
				b, _ := json.Marshal(r.Inputs["spec"].Mappable())
				if !strings.Contains(string(b), `"fsGroup":1000`) || !strings.Contains(string(b), `"runAsUser":1000`) {
					t.Errorf("%s: the pod lacks runAsUser and fsGroup 1000:\n%s", r.Name, b)
				}
			}
		})
	}
}
