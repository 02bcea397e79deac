package provider

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/worldbackup/worldbackup/provider/naming"
)

func validSchedule() WorldBackupScheduleArgs {
	return WorldBackupScheduleArgs{WorldBackupArgs: validArgs(), ScheduleInputs: ScheduleInputs{Schedule: "0 4 * * *", TimeZone: "Europe/Berlin"}}
}

func TestWorldBackupScheduleRegistersOneCronJob(t *testing.T) {
	cj := oneCronJob(t, func(ctx *pulumi.Context) error {
		_, err := NewWorldBackupSchedule(ctx, "nightly", validSchedule())
		return err
	})
	if cj.Name != "survival-sched" || cj.Spec.Schedule != "0 4 * * *" || *cj.Spec.TimeZone != "Europe/Berlin" ||
		cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent || *cj.Spec.StartingDeadlineSeconds != 600 ||
		*cj.Spec.SuccessfulJobsHistoryLimit != 3 || cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args[4] != "$(WB_RUN_ID)" {
		t.Fatalf("CronJob %+v", cj.Spec)
	}
}

// TestWorldBackupScheduleChunked: the format input reaches every scheduled
// run's command line, without a compression.
func TestWorldBackupScheduleChunked(t *testing.T) {
	a := validSchedule()
	a.Format = new(FormatChunked)
	cj := oneCronJob(t, func(ctx *pulumi.Context) error {
		_, err := NewWorldBackupSchedule(ctx, "nightly", a)
		return err
	})
	args := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args
	if i := slices.Index(args, "--format"); i < 0 || args[i+1] != "chunked" || slices.Contains(args, "--compression") {
		t.Fatalf("scheduled args = %q, want --format chunked and no --compression", args)
	}
}

// TestWorldBackupScheduleSpread: a spread macro or a spread window gives the
// CronJob the schedule naming.SpreadSchedule derives from spreadKey (default
// <namespace>/<server>), and the cronSchedule output says it.
func TestWorldBackupScheduleSpread(t *testing.T) {
	for _, tc := range []struct {
		name, schedule, spread, key string
		wantKey                     string
	}{
		{"daily-random, default key", "@daily-random", "", "", naming.SpreadKey("minecraft", "survival")},
		{"window, cluster key", "0 2 * * *", "2h", naming.SpreadKey("eu", "survival"), naming.SpreadKey("eu", "survival")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := validSchedule()
			a.Namespace = pulumi.String("minecraft")
			a.Schedule, a.Spread, a.SpreadKey = tc.schedule, tc.spread, tc.key
			window, _ := time.ParseDuration(tc.spread)
			want, err := naming.SpreadSchedule(tc.schedule, window, tc.wantKey)
			if err != nil {
				t.Fatal(err)
			}
			var got string
			var wg sync.WaitGroup
			m, err := runMocked(t, func(ctx *pulumi.Context) error {
				sc, err := NewWorldBackupSchedule(ctx, "nightly", a)
				if err == nil {
					wg.Add(1)
					sc.CronSchedule.ApplyT(func(v string) string { defer wg.Done(); got = v; return v })
				}
				return err
			})
			wg.Wait()
			if err != nil {
				t.Fatal(err)
			}
			regs := m.ofType("kubernetes:batch/v1:CronJob")
			if len(regs) != 1 {
				t.Fatalf("%d CronJobs registered, want one", len(regs))
			}
			b, _ := json.Marshal(regs[0].Inputs.Mappable())
			var cj batchv1.CronJob
			if err := json.Unmarshal(b, &cj); err != nil {
				t.Fatal(err)
			}
			if cj.Spec.Schedule != want || checkCron(cj.Spec.Schedule) != nil || strings.HasPrefix(cj.Spec.Schedule, "@") {
				t.Fatalf("CronJob schedule %q, want %q (five fields)", cj.Spec.Schedule, want)
			}
			if got != want {
				t.Errorf("cronSchedule output %q, want %q", got, want)
			}
		})
	}
}

func TestWorldBackupScheduleInvalidInputs(t *testing.T) {
	tests := []struct {
		name       string
		modify     func(a *WorldBackupScheduleArgs)
		wantInputs []string
		wantText   string
	}{
		{"no schedule", func(a *WorldBackupScheduleArgs) { a.Schedule = "" }, []string{"schedule"}, "is required"},
		{"four fields", func(a *WorldBackupScheduleArgs) { a.Schedule = "0 4 * *" }, []string{"schedule"}, "five fields"},
		{"hour out of range", func(a *WorldBackupScheduleArgs) { a.Schedule = "0 25 * * *" }, []string{"schedule"}, `"0 25 * * *" is not a cron expression (end of range (25) above maximum (23)`},
		{"minute out of range", func(a *WorldBackupScheduleArgs) { a.Schedule = "60 4 * * *" }, []string{"schedule"}, "minute 0-59"},
		{"day of month zero", func(a *WorldBackupScheduleArgs) { a.Schedule = "0 4 0 * *" }, []string{"schedule"}, "below minimum"},
		{"month 13", func(a *WorldBackupScheduleArgs) { a.Schedule = "0 4 1 13 *" }, []string{"schedule"}, "above maximum"},
		{"day of week name misspelt", func(a *WorldBackupScheduleArgs) { a.Schedule = "0 4 * * MONDAY" }, []string{"schedule"}, "is not a cron expression"},
		{"TZ prefix", func(a *WorldBackupScheduleArgs) { a.Schedule = "TZ=Europe/Berlin 0 4 * * *" }, []string{"schedule"}, "TZ= or CRON_TZ=, which a CronJob refuses: remove the prefix and set timeZone instead"},
		{"CRON_TZ prefix", func(a *WorldBackupScheduleArgs) { a.Schedule = "CRON_TZ=UTC 0 4 * * *" }, []string{"schedule"}, "set timeZone instead"},
		{"@every", func(a *WorldBackupScheduleArgs) { a.Schedule = "@every 1h" }, []string{"schedule"}, "not a macro the components take"},
		{"February 30", func(a *WorldBackupScheduleArgs) { a.Schedule = "0 4 30 2 *" }, []string{"schedule"}, "names no date that comes"},
		{"April 31", func(a *WorldBackupScheduleArgs) { a.Schedule = "0 4 31 4 *" }, []string{"schedule"}, "would never start a Job"},
		{"a step past the minutes", func(a *WorldBackupScheduleArgs) { a.Schedule = "*/90 * * * *" }, []string{"schedule"}, "steps by 90 in the minute field, whose range is 0-59"},
		{"a step past the hours", func(a *WorldBackupScheduleArgs) { a.Schedule = "0 1-23/24 * * *" }, []string{"schedule"}, "steps by 24 in the hour field"},
		{"bad time zone", func(a *WorldBackupScheduleArgs) { a.TimeZone = "Mars/Olympus" }, []string{"timeZone"}, "IANA"},
		{"bad history", func(a *WorldBackupScheduleArgs) { a.FailedJobsHistory = new(-1) }, []string{"failedJobsHistory"}, "out of range"},
		{"starting deadline too short", func(a *WorldBackupScheduleArgs) { a.StartingDeadline = "1s" }, []string{"startingDeadline"}, "too short"},
		{"spread too long", func(a *WorldBackupScheduleArgs) { a.Spread = "25h" }, []string{"spread"}, "too long"},
		{"spread of a random schedule", func(a *WorldBackupScheduleArgs) { a.Schedule, a.Spread = "@daily-random", "1h" }, []string{"spread"}, "whole period"},
		{"spread of a stepped schedule", func(a *WorldBackupScheduleArgs) { a.Schedule, a.Spread = "*/5 * * * *", "1h" }, []string{"spread"}, "single numbers"},
		{"backup input and schedule together", func(a *WorldBackupScheduleArgs) {
			a.Image = pulumi.String("")
			a.Schedule = "daily"
		}, []string{"image", "schedule"}, "2 invalid inputs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := validSchedule()
			tt.modify(&a)
			checkComponentInputError(t, func() error { _, _, _, err := a.resolve(); return err }, func(ctx *pulumi.Context) error {
				_, err := NewWorldBackupSchedule(ctx, "nightly", a)
				return err
			}, tt.wantInputs, []string{tt.wantText})
		})
	}
}

// TestWorldBackupScheduleOutputInputs: the backup inputs of a schedule may
// be outputs: known ones give the CronJob of the plain values, depending on
// their resource (at preview and at up); an unknown one at preview registers
// the CronJob with its spec unknown.
func TestWorldBackupScheduleOutputInputs(t *testing.T) {
	for _, tt := range []struct {
		name string
		run  func(*testing.T, pulumi.RunFunc) (*mocks, error)
	}{{"preview", runMockedPreview}, {"up", runMocked}} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := tt.run(t, func(ctx *pulumi.Context) error {
				claim, err := registerClaim(ctx, "world-backups")
				if err != nil {
					return err
				}
				a := validSchedule()
				a.BackupClaimName = claim
				a.Preflight = new(false)
				_, err = NewWorldBackupSchedule(ctx, "nightly", a)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			regs := m.ofType("kubernetes:batch/v1:CronJob")
			if len(regs) != 1 {
				t.Fatalf("%d CronJobs registered, want 1", len(regs))
			}
			b, _ := json.Marshal(regs[0].Inputs.Mappable())
			var cj batchv1.CronJob
			if err := json.Unmarshal(b, &cj); err != nil {
				t.Fatal(err)
			}
			if cj.Name != "survival-sched" || cj.Spec.JobTemplate.Spec.Template.Spec.Volumes[1].PersistentVolumeClaim.ClaimName != "world-backups" {
				t.Fatalf("CronJob %s: %+v", cj.Name, cj.Spec.JobTemplate.Spec.Template.Spec.Volumes)
			}
			rpc := regs[0].RegisterRPC
			deps := rpc.GetDependencies()
			for _, pd := range rpc.GetPropertyDependencies() {
				deps = append(deps, pd.GetUrns()...)
			}
			found := false
			for _, d := range deps {
				found = found || strings.Contains(d, "::"+claimType+"::")
			}
			if !found {
				t.Errorf("CronJob dependencies %q lack the claim", deps)
			}
		})
	}
	m, err := runMockedPreview(t, func(ctx *pulumi.Context) error {
		a := validSchedule()
		a.BackupClaimName = unknownString()
		_, err := NewWorldBackupSchedule(ctx, "nightly", a)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if regs := m.ofType("kubernetes:batch/v1:CronJob"); len(regs) != 1 || regs[0].Inputs["spec"].IsObject() {
		t.Fatalf("CronJobs %+v, want one with an unknown spec", regs)
	}
}

// TestCheckCron: what the API server's parser takes passes, names and
// steps included.
func TestCheckCron(t *testing.T) {
	for _, s := range []string{"0 4 * * *", "*/15 * * * *", "0 4 * * MON-FRI", "0 0 1 JAN *", "0 4 ? * *", "59 23 31 12 6", "@daily", "@yearly", "@midnight",
		"*/59 * * * *", "0 */23 * * *", "0 4 29 2 *", "0 4 31 * *", "0 4 */30 * *", "0 4 * */11 *", "0 4 * * */6"} {
		t.Run(s, func(t *testing.T) {
			if err := checkCron(s); err != nil {
				t.Fatalf("checkCron(%q) = %v", s, err)
			}
		})
	}
}

// TestKnownTimeZone: the API server's rules for a CronJob's timeZone, and a
// zone folder that takes a name in another spelling (macOS's) does not
// make preview take it.
func TestKnownTimeZone(t *testing.T) {
	zones := fstest.MapFS{
		"Europe/Berlin":                  {Data: []byte("TZif")},
		"America/Argentina/Buenos_Aires": {Data: []byte("TZif")},
		"UTC":                            {Data: []byte("TZif")},
	}
	tests := []struct {
		name string
		want bool
	}{
		{"Europe/Berlin", true},
		{"UTC", true},
		{"Etc/GMT+5", true}, // not in the folder: found in the embedded zones
		{"America/Argentina/Buenos_Aires", true},
		{"Asia/Tokyo", true},
		{"europe/berlin", false},
		{"Europe/BERLIN", false},
		{"utc", false},
		{"Local", false},
		{"local", false},
		{"Europe/../UTC", false},
		{"Europe//Berlin", false},
		{"-Europe/Berlin", false},
		{"Europe/Berlin ", false},
		{"Mars/Olympus", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := knownTimeZone(tt.name, zones); got != tt.want {
				t.Fatalf("knownTimeZone(%q) = %v, want %v", tt.name, got, tt.want)
			}
		})
	}
	t.Run("spelling checked through the folder", func(t *testing.T) {
		// LoadLocation on Linux refuses europe/berlin by itself; spelt is
		// what refuses it where the file system does not.
		for name, want := range map[string]bool{"Europe/Berlin": true, "europe/berlin": false, "Europe/berlin": false, "America/Argentina/buenos_aires": false, "Asia/Tokyo": true} {
			if got := spelt(zones, name); got != want {
				t.Errorf("spelt(%q) = %v, want %v", name, got, want)
			}
		}
	})
}
