package nodetest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/worldbackup/worldbackup/internal/kubenode"
	"github.com/worldbackup/worldbackup/internal/s3test"
	"github.com/worldbackup/worldbackup/internal/stacktest"
	"github.com/worldbackup/worldbackup/internal/worldgen"
	"github.com/worldbackup/worldbackup/program/deploy"
	"github.com/worldbackup/worldbackup/provider"
)

// TestFleetMoveOnNode is README's "Moving a fleet to a new cluster" with the
// S3 store: the old cluster (a namespace) backs lobby up into a bucket;
// the new cluster (another namespace, whose config Secret names the same
// catalog, with its own credentials Secret) is added to
// worldbackup:clusters with a restore entry of the old cluster's last run
// by its ID, and its lobby world (another world before) becomes the old
// one's, byte for byte.
func TestFleetMoveOnNode(t *testing.T) {
	node := kubenode.Require(t)
	tools := stacktest.Require(t)
	old := namespace(t, node, kubenode.NamespaceOptions{WithoutBackupClaim: true})
	moved := namespace(t, node, kubenode.NamespaceOptions{WithoutBackupClaim: true, World: worldgen.Options{Size: 1 << 20, Seed: 99},
		FelisTOML: func(string) string { return "[database]\nurl = \"" + old.PodDatabaseURL + "\"\n" }})
	srv := s3test.NewOn(t, node.GatewayIP)
	bucket := srv.NewBucket(t)
	const secret = "felis-s3"
	for _, ns := range []*kubenode.Namespace{old, moved} {
		if _, err := node.Client.CoreV1().Secrets(ns.Name).Create(t.Context(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: secret},
			Data:       map[string][]byte{provider.DefaultAccessKeyKey: []byte(s3test.AccessKey), provider.DefaultSecretKeyKey: []byte(s3test.SecretKey)},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating the credentials Secret in %s: %v", ns.Name, err)
		}
	}
	writeWorldFile(t, old, "built-in-the-old-cluster.txt")
	writeWorldFile(t, moved, "only-in-the-new-cluster.txt")

	cfg := map[string]string{
		"worldbackup:image":                       node.ArchiverImage,
		"worldbackup:runId":                       "final",
		"worldbackup:servers[0].name":             "lobby",
		"worldbackup:store.url":                   "s3://" + bucket + "/worlds",
		"worldbackup:store.endpoint":              srv.Endpoint,
		"worldbackup:store.pathStyle":             "true",
		"worldbackup:store.credentialsSecretName": secret,
		"worldbackup:clusters[0].name":            "old",
		"worldbackup:clusters[0].kubeconfig":      node.Kubeconfig,
		"worldbackup:clusters[0].namespace":       old.Name,
	}
	stack := tools.InlineStack(t, "node", deploy.Program, cfg)
	_, last := up(t, node, old, stack)
	jobComplete(t, node, old.Name, last.jobName)

	// The move: the new cluster and a restore of the old one's last run.
	cfg["worldbackup:clusters[1].name"] = "new"
	cfg["worldbackup:clusters[1].kubeconfig"] = node.Kubeconfig
	cfg["worldbackup:clusters[1].namespace"] = moved.Name
	cfg["worldbackup:restores[0].server"] = "lobby"
	cfg["worldbackup:restores[0].cluster"] = "new"
	cfg["worldbackup:restores[0].fromRun"] = last.runID
	stacktest.SetConfig(t, stack, cfg)
	res, err := stack.Up(t.Context())
	if err != nil {
		t.Fatalf("pulumi up with the new cluster: %v\npods:\n%s", err, node.PodLogs(t, moved.Name, ""))
	}
	restores := outputList(t, res.Outputs, "restores")
	if len(restores) != 1 || restores[0].status != "restored" || restores[0].archiveRef != last.archiveRef {
		t.Fatalf("restores %+v: want the old cluster's %s restored", restores, last.archiveRef)
	}
	jobComplete(t, node, moved.Name, restores[0].jobName)
	for _, f := range []string{"built-in-the-old-cluster.txt", "world/level.dat"} {
		a, errA := os.ReadFile(filepath.Join(old.WorldDirs["lobby"], f))
		b, errB := os.ReadFile(filepath.Join(moved.WorldDirs["lobby"], f))
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("%s in the new cluster (%v) is not the old cluster's (%v)", f, errB, errA)
		}
	}
	if _, err := os.Stat(filepath.Join(moved.WorldDirs["lobby"], "only-in-the-new-cluster.txt")); !os.IsNotExist(err) {
		t.Errorf("a file of the new cluster's world before the restore survived (stat: %v): the world was not replaced", err)
	}

	// Days later a prune removes the restored run, the restore entry is
	// still in the config, and its Job is re-created (deleted, refresh,
	// up): the init container hands the run on as gone, and the extractor
	// finds the world's marker of this restore and does nothing.
	conn, err := pgx.Connect(t.Context(), old.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	// Each cluster's runs carry the namespace its Job ran in (the
	// archiver's --namespace, from the Job's): the new one restored, by
	// its ID, a run of another namespace.
	for runID, want := range map[string]string{last.runID: old.Name, "new.lobby.final": moved.Name} {
		var got string
		if err := conn.QueryRow(t.Context(), `SELECT coalesce(namespace, '') FROM world_backups WHERE run_id = $1`, runID).Scan(&got); err != nil || got != want {
			t.Errorf("run %s recorded from namespace %q (%v), want %q", runID, got, err, want)
		}
	}
	if _, err := conn.Exec(t.Context(), `DELETE FROM world_backups WHERE run_id = $1`, last.runID); err != nil {
		t.Fatal(err)
	}
	writeWorldFile(t, moved, "played-after-the-restore.txt")
	deleteJob(t, node, moved.Name, restores[0].jobName)
	refresh(t, stack)
	res, err = stack.Up(t.Context())
	if err != nil {
		t.Fatalf("pulumi up after the restored run was pruned: %v\npods:\n%s", err, node.PodLogs(t, moved.Name, ""))
	}
	restores = outputList(t, res.Outputs, "restores")
	if len(restores) != 1 || restores[0].status != "already-restored" {
		t.Fatalf("restores %+v: want the restore already done", restores)
	}
	if _, err := os.Stat(filepath.Join(moved.WorldDirs["lobby"], "played-after-the-restore.txt")); err != nil {
		t.Errorf("what was played after the restore is gone (%v): the restore ran again", err)
	}
}
