package nodetest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/internal/kubenode"
	"github.com/worldbackup/worldbackup/internal/stacktest"
	"github.com/worldbackup/worldbackup/program/deploy"
)

// TestLifecycleOnNode: what happens to a finished backup afterwards. Its
// Job deleted (as a TTL would) + refresh + up, or the same image under
// another tag with the same run ID, make a new Job that finds the run
// already recorded: no error, no second archive. `pulumi destroy` deletes
// the Job and leaves the archive and its row.
func TestLifecycleOnNode(t *testing.T) {
	node := kubenode.Require(t)
	tools := stacktest.Require(t)
	ns := namespace(t, node, kubenode.NamespaceOptions{})
	stack := tools.InlineStack(t, "node", deploy.Program, stackConfig(node, ns, "r1"))
	_, first := up(t, node, ns, stack)
	jobComplete(t, node, ns.Name, first.jobName)
	checkArchive(t, ns, first)
	archive, err := os.ReadFile(hostPath(t, ns, first.archiveRef))
	if err != nil {
		t.Fatal(err)
	}
	unchanged := func(t *testing.T) {
		t.Helper()
		if got := archives(t, ns); len(got) != 1 {
			t.Errorf("%d archives, want the first run's 1: %v", len(got), got)
		}
		if b, err := os.ReadFile(hostPath(t, ns, first.archiveRef)); err != nil || string(b) != string(archive) {
			t.Errorf("the first run's archive changed or is gone (%v)", err)
		}
		checkArchive(t, ns, first)
	}
	// alreadyRecorded: the Job ran again and found the run recorded.
	alreadyRecorded := func(t *testing.T, job string) {
		t.Helper()
		if logs := node.PodLogs(t, ns.Name, "job-name="+job); !strings.Contains(logs, "run already recorded") {
			t.Errorf("the new Job did not report the run already recorded:\n%s", logs)
		}
	}

	t.Run("finished Job deleted, refresh and up", func(t *testing.T) {
		deleteJob(t, node, ns.Name, first.jobName)
		refresh(t, stack)
		_, again := up(t, node, ns, stack)
		if again.ref() != first.ref() || again.status != "already-recorded" || again.sha256 != first.sha256 {
			t.Errorf("outputs %+v, were %+v; want the same archive, status already-recorded", again, first)
		}
		jobComplete(t, node, ns.Name, again.jobName)
		alreadyRecorded(t, again.jobName)
		unchanged(t)
	})

	t.Run("same image re-tagged, same run ID", func(t *testing.T) {
		retagged := retag(node.ArchiverImage, "retagged")
		node.TagImage(t, node.ArchiverImage, retagged)
		cfg := stackConfig(node, ns, "r1")
		cfg["worldbackup:image"] = retagged
		stacktest.SetConfig(t, stack, cfg)
		_, again := up(t, node, ns, stack)
		if again.jobName != first.jobName || again.archiveRef != first.archiveRef {
			t.Errorf("outputs %+v, were %+v", again, first)
		}
		jobComplete(t, node, ns.Name, again.jobName)
		job, err := node.Client.BatchV1().Jobs(ns.Name).Get(t.Context(), again.jobName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if img := job.Spec.Template.Spec.Containers[0].Image; img != retagged {
			t.Errorf("the Job runs %s, want the re-tagged %s", img, retagged)
		}
		alreadyRecorded(t, again.jobName)
		unchanged(t)
	})

	t.Run("destroy leaves archives and rows", func(t *testing.T) {
		var out strings.Builder
		if _, err := stack.Destroy(t.Context(), optdestroy.ProgressStreams(&out), optdestroy.ErrorProgressStreams(&out)); err != nil {
			t.Fatalf("pulumi destroy: %v\n%s", err, out.String())
		}
		jobs, err := node.Client.BatchV1().Jobs(ns.Name).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs.Items) != 0 {
			t.Errorf("%d Jobs left after destroy, want 0", len(jobs.Items))
		}
		unchanged(t)
	})
}

// TestRestoreOnNode: a restore entry in the program's config restores the
// archive once, after a backup of its own has saved the world it replaces
// (worldbackup:runId unchanged: this run's backup ran before the game wrote
// a file, which only that backup holds). Its finished Job deleted + refresh
// + up creates a new Job that finds the restore done and leaves the world
// (and what the game wrote since) untouched, and backs up nothing again.
func TestRestoreOnNode(t *testing.T) {
	node := kubenode.Require(t)
	tools := stacktest.Require(t)
	ns := namespace(t, node, kubenode.NamespaceOptions{})
	cfg := stackConfig(node, ns, "r1")
	stack := tools.InlineStack(t, "node", deploy.Program, cfg)
	_, backup := up(t, node, ns, stack)
	checkArchive(t, ns, backup)
	row := catalogRow(t, ns, backup.runID)

	world := ns.WorldDirs["lobby"]
	writeWorldFile(t, ns, "written-after-backup.txt")

	if backup.status != "done" || backup.sha256 != row.SHA256 || backup.sizeBytes != row.SizeBytes {
		t.Fatalf("backup outputs %+v: want status done and the row's sha256 %s and size %d", backup, row.SHA256, row.SizeBytes)
	}
	// The restore is declared from the backup's outputs alone.
	cfg["worldbackup:restores[0].server"] = "lobby"
	cfg["worldbackup:restores[0].archiveRef"] = backup.archiveRef
	cfg["worldbackup:restores[0].sha256"] = backup.sha256
	stacktest.SetConfig(t, stack, cfg)
	res, again := up(t, node, ns, stack)
	if again != backup {
		t.Errorf("the backup's outputs changed with the restore entry: %+v, were %+v", again, backup)
	}
	restores := outputList(t, res.Outputs, "restores")
	if len(restores) != 1 {
		t.Fatalf("%d restores exported, want 1: %+v", len(restores), restores)
	}
	restore := restores[0]
	if restore.status != "restored" {
		t.Errorf("restore status %q, want restored", restore.status)
	}
	preID := deploy.RunID("node", "lobby", "pre-restore-"+backup.sha256[:12])
	if got := outputString(t, res.Outputs, "restores", "preRestoreRunId"); got != preID {
		t.Errorf("restores[0].preRestoreRunId = %q, want %q", got, preID)
	}
	if pre := catalogRow(t, ns, preID); pre.FileCount != row.FileCount+1 {
		t.Errorf("the backup before the restore holds %d files, want the %d of this run's backup and the one the game wrote since",
			pre.FileCount, row.FileCount)
	}
	jobComplete(t, node, ns.Name, restore.jobName)
	if _, err := os.Stat(filepath.Join(world, "written-after-backup.txt")); !os.IsNotExist(err) {
		t.Fatalf("a file written after the backup survived the restore (stat: %v): the world was not replaced by the archive", err)
	}
	if n := countFiles(t, world); n < 2 {
		t.Fatalf("the restored world holds %d files", n)
	}

	writeWorldFile(t, ns, "written-after-restore.txt")
	deleteJob(t, node, ns.Name, restore.jobName)
	refresh(t, stack)
	res, _ = up(t, node, ns, stack)
	if r := outputList(t, res.Outputs, "restores"); len(r) != 1 || r[0].ref() != restore.ref() || r[0].status != "already-restored" {
		t.Errorf("restores after refresh + up: %+v, were %+v; want status already-restored", r, restore)
	}
	jobComplete(t, node, ns.Name, restore.jobName)
	if logs := node.PodLogs(t, ns.Name, "job-name="+restore.jobName); !strings.Contains(logs, "already restored") {
		t.Errorf("the new restore Job did not report the restore done:\n%s", logs)
	}
	if _, err := os.Stat(filepath.Join(world, "written-after-restore.txt")); err != nil {
		t.Errorf("the restore ran again: the file written after it is gone (%v)\npods:\n%s", err, node.PodLogs(t, ns.Name, "job-name="+restore.jobName))
	}
	if got := archives(t, ns); len(got) != 2 {
		t.Errorf("%d archives, want 2: this run's backup's and the one before the restore: %v", len(got), got)
	}
}

// outputString reads field of the first entry of the stack output key.
func outputString(t *testing.T, out auto.OutputMap, key, field string) string {
	t.Helper()
	list, ok := out[key].Value.([]any)
	if !ok || len(list) == 0 {
		t.Fatalf("stack output %s is %v, want a list", key, out[key].Value)
	}
	v, _ := list[0].(map[string]any)[field].(string)
	return v
}

// outputList reads the stack output key (backups or restores).
func outputList(t *testing.T, out auto.OutputMap, key string) []backupOut {
	t.Helper()
	list, ok := out[key].Value.([]any)
	if !ok {
		t.Fatalf("stack output %s is %T, want a list", key, out[key].Value)
	}
	var res []backupOut
	for _, e := range list {
		m := e.(map[string]any)
		s := func(k string) string { v, _ := m[k].(string); return v }
		size, _ := m["sizeBytes"].(float64)
		res = append(res, backupOut{s("cluster"), s("server"), s("runId"), s("namespace"), s("jobName"), s("archiveRef"),
			s("status"), s("sha256"), int64(size)})
	}
	return res
}

// catalogRow is the row of runID.
func catalogRow(t *testing.T, ns *kubenode.Namespace, runID string) catalog.Record {
	t.Helper()
	db, err := catalog.Open(t.Context(), ns.DatabaseURL, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	row, err := db.Lookup(t.Context(), runID)
	if err != nil {
		t.Fatalf("catalog row for run %s: %v", runID, err)
	}
	return row
}

// writeWorldFile writes a file into lobby's world as the game would.
func writeWorldFile(t *testing.T, ns *kubenode.Namespace, name string) {
	t.Helper()
	p := filepath.Join(ns.WorldDirs["lobby"], name)
	if err := os.WriteFile(p, []byte("the game wrote this\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, ns.Options.OwnerUID, ns.Options.OwnerGID); err != nil {
		t.Fatal(err)
	}
}

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// retag returns ref with its tag replaced by tag.
func retag(ref, tag string) string {
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref + ":" + tag
}
