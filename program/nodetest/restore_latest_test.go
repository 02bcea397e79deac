package nodetest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldbackup/worldbackup/internal/kubenode"
	"github.com/worldbackup/worldbackup/internal/stacktest"
	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/program/deploy"
)

// TestRestoreLatestOnNode: after two backups, a restore entry with fromRun
// latest (no archive ref, no checksum) restores the second: the Job's init
// container resolved the run in the catalog, the extractor restored it.
func TestRestoreLatestOnNode(t *testing.T) {
	node := kubenode.Require(t)
	tools := stacktest.Require(t)
	ns := namespace(t, node, kubenode.NamespaceOptions{})
	cfg := stackConfig(node, ns, "r1")
	stack := tools.InlineStack(t, "node", deploy.Program, cfg)
	_, first := up(t, node, ns, stack)
	writeWorldFile(t, ns, "written-before-second.txt")
	cfg["worldbackup:runId"] = "r2"
	stacktest.SetConfig(t, stack, cfg)
	_, second := up(t, node, ns, stack)
	if first.runID == second.runID || second.status != "done" {
		t.Fatalf("backups %+v and %+v: want two runs", first, second)
	}
	world := ns.WorldDirs["lobby"]
	writeWorldFile(t, ns, "written-after-second.txt")

	cfg["worldbackup:restores[0].server"] = "lobby"
	cfg["worldbackup:restores[0].fromRun"] = jobapi.RunLatest
	stacktest.SetConfig(t, stack, cfg)
	res, _ := up(t, node, ns, stack)
	restores := outputList(t, res.Outputs, "restores")
	if len(restores) != 1 || restores[0].status != "restored" {
		t.Fatalf("restores %+v: want one, restored", restores)
	}
	jobComplete(t, node, ns.Name, restores[0].jobName)
	if _, err := os.Stat(filepath.Join(world, "written-before-second.txt")); err != nil {
		t.Errorf("the file of the second backup is missing (%v): latest did not restore the second run", err)
	}
	if _, err := os.Stat(filepath.Join(world, "written-after-second.txt")); !os.IsNotExist(err) {
		t.Errorf("a file written after the second backup survived (stat: %v): the world was not replaced", err)
	}
	logs := node.PodLogs(t, ns.Name, "job-name="+restores[0].jobName)
	if !strings.Contains(logs, second.runID) {
		t.Errorf("the restore's logs do not name the second run %s:\n%s", second.runID, logs)
	}
}
