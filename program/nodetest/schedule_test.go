package nodetest

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/internal/kubenode"
	"github.com/worldbackup/worldbackup/internal/stacktest"
	"github.com/worldbackup/worldbackup/program/deploy"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// scheduleBound bounds the wait for two runs of an every-minute schedule:
// the CronJob controller starts one at each minute boundary, so two runs
// take two to three minutes. It is a bound on behaviour, not a speed check.
const scheduleBound = 5 * time.Minute

// scheduleSelector is the label selector of the Jobs (and pods) a backup
// schedule creates, the one the README gives to kubectl.
const scheduleSelector = jobspec.LabelComponent + "=" + jobspec.ComponentSchedule

// TestScheduleOnNode: a server with schedule "* * * * *" in the program's
// config gets a CronJob through `pulumi up`; its runs are recorded in the
// catalog, each under its Job's name as the run ID, with its archive. Its
// verify schedule ("* * * * *" too) verifies the newest run in a Job of
// its own, DB-blind. Then a prune in the program's config (the schedules
// removed) expires all but the newest run, rows and files, and the
// exporter (worldbackup:metrics, scraped once) counts the prune and what
// it freed and shows the newest run.
func TestScheduleOnNode(t *testing.T) {
	t.Parallel() // waits on graces or the cron minute: see TestMain
	node := kubenode.Require(t)
	tools := stacktest.Require(t)
	ns := namespace(t, node, kubenode.NamespaceOptions{})
	// A prune's grace covers the longest deadline of the backups into its
	// store (the program refuses a shorter one): 2m each, so the prune
	// below waits for runs 2m old, not the default deadline's 30m.
	withSettings := func(cfg map[string]string) map[string]string {
		cfg["worldbackup:metrics.enabled"] = "true"
		cfg["worldbackup:metrics.maxAge"] = "26h"
		cfg["worldbackup:servers[0].deadline"] = "2m"
		return cfg
	}
	cfg := withSettings(stackConfig(node, ns, "r1"))
	cfg["worldbackup:servers[0].schedule"] = "* * * * *"
	cfg["worldbackup:servers[0].verify.schedule"] = "* * * * *"
	cfg["worldbackup:servers[0].verify.scratchSize"] = "1Gi"
	stack := tools.InlineStack(t, "node", deploy.Program, cfg)
	res, onDemand := up(t, node, ns, stack)
	jobComplete(t, node, ns.Name, onDemand.jobName)
	if s, ok := res.Outputs["schedules"].Value.([]any); !ok || len(s) != 1 || s[0].(map[string]any)["cronJobName"] != "lobby-sched" {
		t.Fatalf("stack output schedules = %v, want the CronJob lobby-sched", res.Outputs["schedules"].Value)
	}
	if vs, ok := res.Outputs["verifySchedules"].Value.([]any); !ok || len(vs) != 1 || vs[0].(map[string]any)["cronJobName"] != "lobby-vsched" {
		t.Fatalf("stack output verifySchedules = %v, want the CronJob lobby-vsched", res.Outputs["verifySchedules"].Value)
	}

	db, err := catalog.Open(t.Context(), ns.DatabaseURL, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	scheduled := func(ctx context.Context) ([]catalog.Record, error) {
		rows, err := db.List(ctx, "lobby")
		return slices.DeleteFunc(rows, func(r catalog.Record) bool { return !strings.HasPrefix(r.RunID, "lobby-sched-") }), err
	}
	var runs []catalog.Record
	start := time.Now()
	err = wait.PollUntilContextTimeout(t.Context(), 5*time.Second, scheduleBound, true, func(ctx context.Context) (bool, error) {
		runs, err = scheduled(ctx)
		return len(runs) >= 2, err
	})
	if err != nil {
		t.Fatalf("%d scheduled runs recorded %s after pulumi up, want 2 (%v)\npods:\n%s", len(runs), scheduleBound, err,
			node.PodLogs(t, ns.Name, scheduleSelector))
	}
	t.Logf("two scheduled runs recorded %s after pulumi up", time.Since(start).Round(time.Second))

	t.Run("each run's ID is its Job's name, distinct, with its archive", func(t *testing.T) {
		jobs, err := node.Client.BatchV1().Jobs(ns.Name).List(t.Context(), metav1.ListOptions{LabelSelector: scheduleSelector})
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]batchv1.Job{}
		for _, j := range jobs.Items {
			names[j.Name] = j
		}
		ids := map[string]bool{}
		for _, r := range runs[:2] {
			if ids[r.RunID] {
				t.Errorf("run ID %s recorded twice", r.RunID)
			}
			ids[r.RunID] = true
			job, ok := names[r.RunID]
			if !ok {
				t.Errorf("run %s: no Job of that name among %v", r.RunID, jobs.Items)
				continue
			}
			if len(job.OwnerReferences) != 1 || job.OwnerReferences[0].Kind != "CronJob" || job.OwnerReferences[0].Name != "lobby-sched" {
				t.Errorf("Job %s owners %+v, want the CronJob lobby-sched", job.Name, job.OwnerReferences)
			}
			if _, err := os.Stat(hostPath(t, ns, r.ArchiveRef)); err != nil {
				t.Errorf("run %s: archive %s: %v", r.RunID, r.ArchiveRef, err)
			}
		}
	})

	t.Run("the verify schedule verifies the newest run", func(t *testing.T) {
		scheduledVerifyPassed(t, node, ns, func() map[string]string {
			rows, err := db.List(t.Context(), "lobby")
			if err != nil {
				t.Fatal(err)
			}
			refs := map[string]string{}
			for _, r := range rows {
				refs[r.RunID] = r.ArchiveRef
			}
			return refs
		})
	})

	t.Run("a prune in the config expires all but the newest run", func(t *testing.T) {
		cfg := withSettings(stackConfig(node, ns, "r1"))
		// The schedule removed first, so no run starts while the prune runs.
		stacktest.SetConfig(t, stack, cfg)
		up(t, node, ns, stack)
		if err := wait.PollUntilContextTimeout(t.Context(), 2*time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			pods, err := node.Client.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{LabelSelector: scheduleSelector})
			if err != nil {
				return false, err
			}
			return !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool {
				return p.Status.Phase == corev1.PodPending || p.Status.Phase == corev1.PodRunning
			}), nil
		}); err != nil {
			t.Fatalf("scheduled pods still running 2 minutes after the CronJob's deletion: %v", err)
		}
		// Every run past the grace period of 2m, so only the policy decides.
		const grace = 2 * time.Minute
		var rows []catalog.Record
		if err := wait.PollUntilContextTimeout(t.Context(), 2*time.Second, 2*grace, true, func(ctx context.Context) (bool, error) {
			rows, err = db.List(ctx, "lobby")
			return err == nil && len(rows) > 0 && time.Since(rows[len(rows)-1].FinishedAt) > grace+5*time.Second, err
		}); err != nil {
			t.Fatal(err)
		}
		newest := rows[len(rows)-1]
		if len(rows) < 3 {
			t.Fatalf("rows %d, want the on-demand run and at least 2 scheduled ones", len(rows))
		}

		cfg["worldbackup:servers[0].prune.runId"] = "p1"
		cfg["worldbackup:servers[0].prune.keepLast"] = "1"
		cfg["worldbackup:servers[0].prune.minKeep"] = "1"
		cfg["worldbackup:servers[0].prune.grace"] = "2m"
		stacktest.SetConfig(t, stack, cfg)
		var out strings.Builder
		res, err := stack.Up(t.Context(), optup.ProgressStreams(&out), optup.ErrorProgressStreams(&out))
		if err != nil {
			t.Fatalf("pulumi up with a prune: %v\n%s\npods:\n%s", err, out.String(), node.PodLogs(t, ns.Name, ""))
		}
		prunes, _ := res.Outputs["prunes"].Value.([]any)
		if len(prunes) != 1 {
			t.Fatalf("stack output prunes = %v, want one", res.Outputs["prunes"].Value)
		}
		job := prunes[0].(map[string]any)["jobName"].(string)
		if status := prunes[0].(map[string]any)["status"]; status != "done" {
			t.Errorf("the prune's status output is %v, want done (its run's report)", status)
		}
		jobComplete(t, node, ns.Name, job)

		after, err := db.List(t.Context(), "lobby")
		if err != nil {
			t.Fatal(err)
		}
		if len(after) != 1 || after[0].RunID != newest.RunID {
			var ids []string
			for _, r := range after {
				ids = append(ids, r.RunID)
			}
			t.Errorf("rows after the prune %v, want the newest %s alone", ids, newest.RunID)
		}
		if files := archives(t, ns); len(files) != 1 || files[0] != hostPath(t, ns, newest.ArchiveRef) {
			t.Errorf("archives after the prune %v, want the newest's %s alone", files, newest.ArchiveRef)
		}
		if logs := node.PodLogs(t, ns.Name, "job-name="+job); !strings.Contains(logs, fmt.Sprintf(`"rows_deleted":%d`, len(rows)-1)) {
			t.Errorf("the prune's log does not report %d rows deleted:\n%s", len(rows)-1, logs)
		}

		fams := scrapeExporter(t, node, ns, res.Outputs)
		lobby := map[string]string{"server": "lobby", "cluster": "node"}
		for name, want := range map[string]float64{
			"worldbackup_prune_total":                              1,
			"worldbackup_prune_deleted_runs_total":                 float64(len(rows) - 1),
			"worldbackup_backup_last_successful_timestamp_seconds": float64(newest.FinishedAt.UnixMilli()) / 1000,
			"worldbackup_backup_last_size_bytes":                   float64(newest.SizeBytes),
			"worldbackup_backup_max_age_seconds":                   26 * 3600,
		} {
			if got, ok := fams.Value(name, lobby); !ok || math.Abs(got-want) > 0.01 {
				t.Errorf("%s%v = %v (found: %v), want %v", name, lobby, got, ok, want)
			}
		}
		if freed, ok := fams.Value("worldbackup_prune_freed_bytes_total", lobby); !ok || freed <= 0 {
			t.Errorf("worldbackup_prune_freed_bytes_total = %v (%v), want the archives' bytes", freed, ok)
		}
	})
}
