// Package nodetest is tier 5: the Pulumi program (program/deploy) through the
// real Pulumi CLI, engine and Kubernetes provider, not in render mode, against
// a real single-node cluster (internal/kubenode) running the archiver image
// that `make image` builds.
package nodetest

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/internal/kubenode"
	"github.com/worldbackup/worldbackup/internal/stacktest"
	"github.com/worldbackup/worldbackup/program/deploy"
)

// TestMain runs the tests on one node. The tests marked parallel spend
// their minutes waiting on the node's clock (a watchdog's grace, a cron
// minute), not on its CPU: they run all at once, after the others (which
// count the Jobs running on the node, as the concurrency caps' tests do),
// unless -parallel says otherwise. One by one they took 8.7 of the
// package's 14.5 minutes, the last of `make test`; together 3.3 (the
// schedule's test, the longest, waits for cron minutes), and the package
// 9.2.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(waitingTests)); err != nil {
			panic(err)
		}
	}
	kubenode.Main(m)
}

// waitingTests is the number of tests marked parallel here.
const waitingTests = 7

// stackConfig is the program's own config for one server backed up in the
// test namespace of the node, with the trigger runID.
func stackConfig(node *kubenode.Node, ns *kubenode.Namespace, runID string) map[string]string {
	return map[string]string{
		"worldbackup:image":                  node.ArchiverImage,
		"worldbackup:backupClaim":            ns.BackupClaim,
		"worldbackup:runId":                  runID,
		"worldbackup:servers[0].name":        "lobby",
		"worldbackup:clusters[0].name":       "node",
		"worldbackup:clusters[0].kubeconfig": node.Kubeconfig,
		"worldbackup:clusters[0].namespace":  ns.Name,
	}
}

// backupOut is one entry of the stack outputs backups or restores: what was
// asked, and what the run reported (status; for a backup sha256 and
// sizeBytes).
type backupOut struct {
	cluster, server, runID, namespace, jobName, archiveRef string
	status, sha256                                         string
	sizeBytes                                              int64
}

// ref is o without what the run reported: the same for every run of the
// same backup or restore.
func (o backupOut) ref() backupOut {
	o.status, o.sha256, o.sizeBytes = "", "", 0
	return o
}

func backups(t *testing.T, out auto.OutputMap) []backupOut {
	t.Helper()
	return outputList(t, out, "backups")
}

// up runs `pulumi up` and returns its one backup output; on failure it
// shows the engine's output and the pods' logs.
func up(t *testing.T, node *kubenode.Node, ns *kubenode.Namespace, stack auto.Stack) (auto.UpResult, backupOut) {
	t.Helper()
	var out strings.Builder
	res, err := stack.Up(t.Context(), optup.ProgressStreams(&out), optup.ErrorProgressStreams(&out))
	if err != nil {
		t.Fatalf("pulumi up: %v\n%s\npods:\n%s", err, out.String(), node.PodLogs(t, ns.Name, ""))
	}
	bs := backups(t, res.Outputs)
	if len(bs) != 1 {
		t.Fatalf("stack exports %d backups, want 1: %+v", len(bs), bs)
	}
	return res, bs[0]
}

// TestBackupOnNode: `pulumi up` of one backup returns once its Job has
// completed in the cluster; the archive and its catalog row exist and match
// the stack outputs. The same run ID again changes nothing; a new run ID
// makes a second archive.
func TestBackupOnNode(t *testing.T) {
	node := kubenode.Require(t)
	tools := stacktest.Require(t)
	ns := namespace(t, node, kubenode.NamespaceOptions{})
	stack := tools.InlineStack(t, "node", deploy.Program, stackConfig(node, ns, "r1"))

	_, first := up(t, node, ns, stack)
	if first.namespace != ns.Name || first.server != "lobby" || first.runID != deploy.RunID("node", "lobby", "r1") {
		t.Errorf("outputs %+v: want namespace %s, server lobby, run ID %s", first, ns.Name, deploy.RunID("node", "lobby", "r1"))
	}
	jobComplete(t, node, ns.Name, first.jobName)
	checkArchive(t, ns, first)

	t.Run("same run ID changes nothing", func(t *testing.T) {
		res, again := up(t, node, ns, stack)
		for op, n := range *res.Summary.ResourceChanges {
			if op != "same" && n > 0 {
				t.Errorf("second up with the same run ID: %d resources %s, want all same (%v)", n, op, *res.Summary.ResourceChanges)
			}
		}
		if again != first { // the finished Job's pod still holds the first run's report
			t.Errorf("outputs changed: %+v, were %+v", again, first)
		}
		if got := archives(t, ns); len(got) != 1 {
			t.Errorf("%d archives after the second up, want 1: %v", len(got), got)
		}
	})

	t.Run("new run ID makes a second archive", func(t *testing.T) {
		stacktest.SetConfig(t, stack, stackConfig(node, ns, "r2"))
		_, second := up(t, node, ns, stack)
		if second.runID != deploy.RunID("node", "lobby", "r2") || second.archiveRef == first.archiveRef || second.jobName == first.jobName {
			t.Fatalf("outputs after the new run ID: %+v (first %+v)", second, first)
		}
		jobComplete(t, node, ns.Name, second.jobName)
		checkArchive(t, ns, second)
		if got := archives(t, ns); len(got) != 2 {
			t.Errorf("%d archives after the new run, want 2: %v", len(got), got)
		}
		if _, err := os.Stat(hostPath(t, ns, first.archiveRef)); err != nil {
			t.Errorf("the first run's archive is gone: %v", err)
		}
	})
}

// jobComplete checks that the Job exists and has completed: `pulumi up`
// returned only after it did.
func jobComplete(t *testing.T, node *kubenode.Node, ns, name string) {
	t.Helper()
	job, err := node.Client.BatchV1().Jobs(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Job %s/%s named by the outputs: %v", ns, name, err)
	}
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			if job.Status.Succeeded != 1 {
				t.Errorf("Job %s complete with %d pods succeeded, want 1", name, job.Status.Succeeded)
			}
			return
		}
	}
	t.Errorf("pulumi up returned before Job %s completed: conditions %+v\npods:\n%s", name, job.Status.Conditions,
		node.PodLogs(t, ns, "job-name="+name))
}

// hostPath maps an archive path in the pod (under /backups) to the backup
// claim's host folder.
func hostPath(t *testing.T, ns *kubenode.Namespace, archiveRef string) string {
	t.Helper()
	rel, ok := strings.CutPrefix(archiveRef, "/backups/")
	if !ok {
		t.Fatalf("archiveRef %q is not under the backup mount /backups", archiveRef)
	}
	return filepath.Join(ns.BackupDir, rel)
}

// checkArchive: the run is at the exported archiveRef and its catalog row
// (keyed by the exported run ID) names it with its checksum: a tar run's
// archive with its size, a chunked run's (the default) manifest, with the
// stream's size and what the run added.
func checkArchive(t *testing.T, ns *kubenode.Namespace, o backupOut) {
	t.Helper()
	path := hostPath(t, ns, o.archiveRef)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no archive at the exported archiveRef %s (host %s): %v", o.archiveRef, path, err)
	}
	sum := sha256.Sum256(b)
	db, err := catalog.Open(t.Context(), ns.DatabaseURL, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	row, err := db.Lookup(t.Context(), o.runID)
	if err != nil {
		t.Fatalf("catalog row for run %s: %v", o.runID, err)
	}
	if row.Server != "lobby" || row.ArchiveRef != o.archiveRef {
		t.Errorf("row server %q archive_ref %q, want lobby and %q", row.Server, row.ArchiveRef, o.archiveRef)
	}
	switch row.Format {
	case "chunked":
		if !strings.HasSuffix(o.archiveRef, ".manifest") || row.SizeBytes <= int64(len(b)) || row.AddedBytes == nil || row.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("chunked row: archive_ref %s, stream size %d, added %v, sha256 %s; the manifest is %d bytes, sha256 %x",
				row.ArchiveRef, row.SizeBytes, row.AddedBytes, row.SHA256, len(b), sum)
		}
	default:
		if row.SizeBytes != int64(len(b)) || row.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("row size %d sha256 %s; the archive is %d bytes, sha256 %x", row.SizeBytes, row.SHA256, len(b), sum)
		}
	}
	// The outputs say what the run reported: the row's checksum and size.
	if o.sha256 != row.SHA256 || o.sizeBytes != row.SizeBytes || (o.status != "done" && o.status != "already-recorded") {
		t.Errorf("outputs status %q sha256 %q sizeBytes %d; want done or already-recorded and the row's %s, %d",
			o.status, o.sha256, o.sizeBytes, row.SHA256, row.SizeBytes)
	}
	if row.FileCount == 0 {
		t.Error("the row counts no files: the generated world was not archived")
	}
}

// archives lists the runs under the backup folder: the tar format's
// archives and the chunked format's manifests.
func archives(t *testing.T, ns *kubenode.Namespace) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(ns.BackupDir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && (strings.HasSuffix(p, ".tar.zst") || strings.HasSuffix(p, ".tar.gz") || strings.HasSuffix(p, ".tar") || strings.HasSuffix(p, ".manifest")) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
