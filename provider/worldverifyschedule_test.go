package provider

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/worldbackup/worldbackup/provider/jobspec"
	"github.com/worldbackup/worldbackup/provider/naming"
)

func validVerifySchedule() WorldVerifyScheduleArgs {
	v := validVerify()
	v.ArchiveRef, v.SHA256 = nil, nil
	return WorldVerifyScheduleArgs{WorldVerifyArgs: v, ScheduleInputs: ScheduleInputs{Schedule: "30 5 * * *"}}
}

// verifyCronJob registers a and returns its one CronJob.
func verifyCronJob(t *testing.T, a WorldVerifyScheduleArgs) batchv1.CronJob {
	t.Helper()
	return oneCronJob(t, func(ctx *pulumi.Context) error {
		_, err := NewWorldVerifySchedule(ctx, "daily-check", a)
		return err
	})
}

// oneCronJob runs program, which must register exactly one CronJob and no
// Job, and returns that CronJob as registered.
func oneCronJob(t *testing.T, program pulumi.RunFunc) batchv1.CronJob {
	t.Helper()
	m, err := runMocked(t, program)
	if err != nil {
		t.Fatal(err)
	}
	regs := m.ofType("kubernetes:batch/v1:CronJob")
	if len(regs) != 1 || len(m.ofType(jobType)) != 0 {
		t.Fatalf("%d CronJobs and %d Jobs registered, want one CronJob", len(regs), len(m.ofType(jobType)))
	}
	b, _ := json.Marshal(regs[0].Inputs.Mappable())
	var cj batchv1.CronJob
	if err := json.Unmarshal(b, &cj); err != nil {
		t.Fatal(err)
	}
	return cj
}

// TestWorldVerifyScheduleRegistersOneCronJob: the CronJob verifies the
// server's newest run by default (or the run fromRun names), its Jobs
// resolving it in the init container, the defaults of a WorldVerify and of
// a schedule otherwise.
func TestWorldVerifyScheduleRegistersOneCronJob(t *testing.T) {
	for _, tt := range []struct {
		name     string
		modify   func(a *WorldVerifyScheduleArgs)
		wantFrom string
		wantArgs []string
	}{
		{"newest run by default", func(*WorldVerifyScheduleArgs) {}, "latest", nil},
		{"one run ID, encrypted, a sample", func(a *WorldVerifyScheduleArgs) {
			a.FromRun, a.ChunkSample = pulumi.String("survival-r7"), pulumi.String("10%")
			a.Encryption = &EncryptionArgs{SecretName: pulumi.String("survival-key")}
		}, "survival-r7", []string{"--chunks", "10%", "--encryption-key-file"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := validVerifySchedule()
			tt.modify(&a)
			cj := verifyCronJob(t, a)
			pod := cj.Spec.JobTemplate.Spec.Template.Spec
			if cj.Name != "survival-vsched" || cj.Spec.Schedule != "30 5 * * *" || cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent ||
				*cj.Spec.StartingDeadlineSeconds != 600 || *cj.Spec.SuccessfulJobsHistoryLimit != 3 {
				t.Fatalf("CronJob %s %+v", cj.Name, cj.Spec)
			}
			if len(pod.InitContainers) != 1 || !slices.Contains(pod.InitContainers[0].Args, tt.wantFrom) {
				t.Fatalf("init containers %+v: want the resolve of %s", pod.InitContainers, tt.wantFrom)
			}
			args := strings.Join(pod.Containers[0].Args, " ")
			if !strings.HasPrefix(args, "verify --archive-from /run/worldbackup/run.json --world-check") {
				t.Fatalf("args %q: want a verify by run", args)
			}
			for _, w := range tt.wantArgs {
				if !strings.Contains(args, w) {
					t.Errorf("args %q lack %s", args, w)
				}
			}
			if got := cj.Spec.JobTemplate.Spec.Template.Labels[jobspec.LabelComponent]; got != jobspec.ComponentVerifySchedule {
				t.Errorf("component label %q", got)
			}
		})
	}
}

// TestBackupAndVerifyScheduleApart: README's example, @daily-random for a
// server's backup and its verify, with the default key or the program's
// <cluster>/<server>: the two CronJobs fire at different minutes (twelve
// hours apart), so the verify's latest is not the run before the one
// starting beside it.
func TestBackupAndVerifyScheduleApart(t *testing.T) {
	for _, tt := range []struct {
		name, key string
	}{
		{"default key", ""},
		{"the program's key", naming.SpreadKey("eu", "survival")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			inputs := ScheduleInputs{Schedule: naming.DailyRandom, SpreadKey: tt.key}
			_, backup, _, err := WorldBackupScheduleArgs{WorldBackupArgs: validArgs(), ScheduleInputs: inputs}.resolve()
			if err != nil {
				t.Fatal(err)
			}
			v := validVerifySchedule()
			v.ScheduleInputs = inputs
			_, verify, _, err := v.resolve()
			if err != nil {
				t.Fatal(err)
			}
			b, vv := strings.Fields(backup.Cron), strings.Fields(verify.Cron)
			bm, _ := strconv.Atoi(b[1])
			vm, _ := strconv.Atoi(vv[1])
			if b[0] != vv[0] || (vm-bm+24)%24 != 12 {
				t.Fatalf("backup schedule %q, verify schedule %q: want the same minute of the hour, twelve hours apart", backup.Cron, verify.Cron)
			}
		})
	}
}

func TestWorldVerifyScheduleInvalidInputs(t *testing.T) {
	tests := []struct {
		name       string
		modify     func(a *WorldVerifyScheduleArgs)
		wantInputs []string
		wantText   string
	}{
		{"no schedule", func(a *WorldVerifyScheduleArgs) { a.Schedule = "" }, []string{"schedule"}, "is required"},
		{"an archive: a schedule verifies a run", func(a *WorldVerifyScheduleArgs) {
			a.ArchiveRef = pulumi.String("/backups/survival/r.tar.zst")
		}, []string{"archiveRef"}, "but so is fromRun"},
		{"server too long for the CronJob", func(a *WorldVerifyScheduleArgs) { a.Server = strings.Repeat("s", 46) }, []string{"server"},
			"use a server name of at most 45 characters"},
		{"verify input and schedule together", func(a *WorldVerifyScheduleArgs) {
			a.ChunkSample = pulumi.String("200%")
			a.TimeZone = "Mars/Olympus"
		}, []string{"chunkSample", "timeZone"}, "2 invalid inputs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := validVerifySchedule()
			tt.modify(&a)
			checkComponentInputError(t, a.Validate, func(ctx *pulumi.Context) error {
				_, err := NewWorldVerifySchedule(ctx, "daily-check", a)
				return err
			}, tt.wantInputs, []string{tt.wantText})
		})
	}
}

// TestWorldVerifyScheduleSchemaThroughInfer serves NewWorldVerifySchedule
// as the plugin does: its token, and every input and output documented.
func TestWorldVerifyScheduleSchemaThroughInfer(t *testing.T) {
	res := schemaOf(t, infer.ComponentF(NewWorldVerifySchedule), WorldVerifyScheduleType)
	if !strings.Contains(res.InputProperties["fromRun"].Description, "latest (the default)") {
		t.Errorf("fromRun's description %q is the on-demand verify's", res.InputProperties["fromRun"].Description)
	}
	for _, in := range []string{"schedule", "spread", "timeZone", "suspend", "chunkSample", "scratchSize", "encryption", "fromServer"} {
		if res.InputProperties[in].Description == "" {
			t.Errorf("input %s is missing or undocumented", in)
		}
	}
	for _, out := range []string{"cronJobName", "namespace", "cronSchedule"} {
		if res.Properties[out].Description == "" {
			t.Errorf("output %s is missing or undocumented", out)
		}
	}
}
