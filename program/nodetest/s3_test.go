package nodetest

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/worldbackup/worldbackup/internal/kubenode"
	"github.com/worldbackup/worldbackup/internal/s3test"
	"github.com/worldbackup/worldbackup/internal/stacktest"
	"github.com/worldbackup/worldbackup/program/deploy"
	"github.com/worldbackup/worldbackup/provider"
)

// TestS3StoreOnNode: with worldbackup:store, `pulumi up` backs the world up
// into a real S3 server (versitygw on the node's bridge gateway, where the
// pods reach host services) with the credentials of a Secret, in a
// namespace that has no backup claim at all. The object is at the exported
// s3:// archiveRef with the row's SHA-256; a restore entry of that ref
// restores the world from it. The secret key is in no state, Job or log.
// In both security modes: restricted runs as the game's non-root UID in a
// namespace enforcing restricted, reading the 0400 credentials through its
// fsGroup.
func TestS3StoreOnNode(t *testing.T) {
	node := kubenode.Require(t)
	tools := stacktest.Require(t)
	for _, mode := range []string{"baseline", "restricted"} {
		t.Run(mode, func(t *testing.T) { s3RoundTrip(t, node, tools, mode) })
	}
}

// s3RoundTrip backs lobby up into a new bucket and restores it from there,
// in securityMode mode (and a namespace enforcing it).
func s3RoundTrip(t *testing.T, node *kubenode.Node, tools stacktest.Tools, mode string) {
	ns := namespace(t, node, kubenode.NamespaceOptions{WithoutBackupClaim: true, Enforce: mode})
	srv := s3test.NewOn(t, node.GatewayIP)
	bucket := srv.NewBucket(t)

	const secret = "felis-s3"
	_, err := node.Client.CoreV1().Secrets(ns.Name).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secret},
		Data: map[string][]byte{
			provider.DefaultAccessKeyKey: []byte(s3test.AccessKey),
			provider.DefaultSecretKeyKey: []byte(s3test.SecretKey),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the credentials Secret: %v", err)
	}

	cfg := stackConfig(node, ns, "r1")
	delete(cfg, "worldbackup:backupClaim")
	cfg["worldbackup:securityMode"] = mode
	cfg["worldbackup:store.url"] = "s3://" + bucket + "/worlds"
	cfg["worldbackup:store.endpoint"] = srv.Endpoint
	cfg["worldbackup:store.pathStyle"] = "true"
	cfg["worldbackup:store.credentialsSecretName"] = secret
	stack := tools.InlineStack(t, "node", deploy.Program, cfg)
	_, backup := up(t, node, ns, stack)
	jobComplete(t, node, ns.Name, backup.jobName)

	// The default format, chunked: archiveRef is the run's manifest, beside
	// the packs it names.
	key := "worlds/_chunked/runs/lobby/" + deploy.RunID("node", "lobby", "r1") + ".manifest"
	if want := "s3://" + bucket + "/" + key; backup.archiveRef != want {
		t.Fatalf("archiveRef %q, want %q", backup.archiveRef, want)
	}
	row := catalogRow(t, ns, backup.runID)
	t.Run("the object has the row's checksum", func(t *testing.T) {
		if row.ArchiveRef != backup.archiveRef {
			t.Errorf("row archive_ref %q, want the exported %q", row.ArchiveRef, backup.archiveRef)
		}
		obj, err := srv.Client().GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("no object at %s: %v", backup.archiveRef, err)
		}
		defer obj.Body.Close()
		h := sha256.New()
		n, err := io.Copy(h, obj.Body)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != row.SHA256 || n == 0 {
			t.Errorf("manifest object: %d bytes, sha256 %s; row sha256 %s", n, got, row.SHA256)
		}
		if row.Format != "chunked" || row.AddedBytes == nil || *row.AddedBytes <= 0 {
			t.Errorf("row format %q, added bytes %v: want a chunked run that added its packs", row.Format, row.AddedBytes)
		}
		packs, err := srv.Client().ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("worlds/_chunked/packs/")})
		if err != nil || len(packs.Contents) == 0 {
			t.Errorf("no packs under worlds/_chunked/packs/ (%v)", err)
		}
		if meta := obj.Metadata["sha256"]; meta != row.SHA256 {
			t.Errorf("object metadata sha256 %q, want the row's %s", meta, row.SHA256)
		}
		if row.FileCount == 0 {
			t.Error("the row counts no files: the generated world was not archived")
		}
		if ups := srv.Uploads(t, bucket); len(ups) != 0 {
			t.Errorf("unfinished uploads left: %v", ups)
		}
	})

	t.Run("a restore from the s3:// ref restores the world", func(t *testing.T) {
		world := ns.WorldDirs["lobby"]
		writeWorldFile(t, ns, "written-after-backup.txt")
		cfg["worldbackup:restores[0].server"] = "lobby"
		cfg["worldbackup:restores[0].archiveRef"] = backup.archiveRef
		cfg["worldbackup:restores[0].sha256"] = row.SHA256
		stacktest.SetConfig(t, stack, cfg)
		res, again := up(t, node, ns, stack)
		if again != backup {
			t.Errorf("the backup's outputs changed with the restore entry: %+v, were %+v", again, backup)
		}
		restores := outputList(t, res.Outputs, "restores")
		if len(restores) != 1 || restores[0].archiveRef != backup.archiveRef {
			t.Fatalf("restores exported: %+v, want one of %s", restores, backup.archiveRef)
		}
		jobComplete(t, node, ns.Name, restores[0].jobName)
		if _, err := os.Stat(filepath.Join(world, "written-after-backup.txt")); !os.IsNotExist(err) {
			t.Fatalf("a file written after the backup survived the restore (stat: %v): the world was not replaced by the archive\npods:\n%s",
				err, node.PodLogs(t, ns.Name, "job-name="+restores[0].jobName))
		}
		if n := countFiles(t, world); n < 2 {
			t.Fatalf("the restored world holds %d files", n)
		}
		job, err := node.Client.BatchV1().Jobs(ns.Name).Get(t.Context(), restores[0].jobName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range job.Spec.Template.Spec.Volumes {
			if v.Secret != nil && v.Secret.SecretName != secret {
				t.Errorf("the restore Job mounts Secret %s: it gets only the credentials", v.Secret.SecretName)
			}
		}
	})

	t.Run("the secret key is nowhere", func(t *testing.T) {
		ws := stack.Workspace()
		state := tools.CLI(t, ws.WorkDir(), ws.GetEnvVars(), "stack", "export", "--stack", stack.Name())
		if !strings.Contains(state, backup.jobName) || !strings.Contains(state, secret) {
			t.Fatalf("the export does not look like this stack's state (its Job and credentials Secret):\n%.2000s", state)
		}
		jobs, err := node.Client.BatchV1().Jobs(ns.Name).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		places := map[string]string{
			"the stack state (pulumi stack export)":   state,
			"the Jobs (their args, env, volumes)":     mustJSON(t, jobs),
			"the pods' logs":                          node.PodLogs(t, ns.Name, ""),
			"the stack config's file (Pulumi.*.yaml)": stackConfigFiles(t, ws.WorkDir()),
		}
		for where, text := range places {
			if strings.Contains(text, s3test.SecretKey) {
				t.Errorf("the S3 secret key is in %s", where)
			}
		}
	})
}
