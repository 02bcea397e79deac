package nodetest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/worldbackup/worldbackup/internal/kubenode"
	"github.com/worldbackup/worldbackup/internal/stacktest"
	"github.com/worldbackup/worldbackup/program/deploy"
)

// TestChunkedOnNode: with the default format (chunked: no
// worldbackup:format), a backup through
// `pulumi up` writes a manifest at the exported archiveRef; the game writes
// to the world; a second backup (new run ID) adds about what changed, not
// the world again; restores declared from each run's exported archiveRef
// and sha256 bring back each run's world.
func TestChunkedOnNode(t *testing.T) {
	node := kubenode.Require(t)
	tools := stacktest.Require(t)
	ns := namespace(t, node, kubenode.NamespaceOptions{})
	cfg := stackConfig(node, ns, "r1")
	stack := tools.InlineStack(t, "node", deploy.Program, cfg)
	world := ns.WorldDirs["lobby"]

	_, first := up(t, node, ns, stack)
	jobComplete(t, node, ns.Name, first.jobName)
	checkManifest(t, ns, first)
	world1 := treeSums(t, world)

	// The game writes: a new file of changed random bytes (nothing in the
	// store holds them).
	const changed = 64 << 10
	data := make([]byte, changed)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(world, "region-written.dat")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, ns.Options.OwnerUID, ns.Options.OwnerGID); err != nil {
		t.Fatal(err)
	}
	world2 := treeSums(t, world)

	cfg["worldbackup:runId"] = "r2"
	stacktest.SetConfig(t, stack, cfg)
	_, second := up(t, node, ns, stack)
	if second.archiveRef == first.archiveRef || second.runID == first.runID {
		t.Fatalf("second backup %+v has the first's run ID or archiveRef (%+v)", second, first)
	}
	jobComplete(t, node, ns.Name, second.jobName)
	checkManifest(t, ns, second)
	row := catalogRow(t, ns, second.runID)
	if row.AddedBytes == nil {
		t.Fatalf("the second run's row records no added_bytes: %+v", row)
	}
	// What the run may add: the changed bytes, a pack's header and index,
	// and its manifest (a few hundred bytes per file).
	bound := int64(changed) + 16<<10 + 512*row.FileCount
	t.Logf("second run: %d bytes added of a %d-byte stream (%d files), bound %d", *row.AddedBytes, row.SizeBytes, row.FileCount, bound)
	if added := *row.AddedBytes; added > bound || added*4 > row.SizeBytes {
		t.Errorf("the second run added %d bytes of a %d-byte stream (%d files): want at most %d (the %d changed bytes, a pack's and the manifest's overhead) and under a quarter of its size",
			added, row.SizeBytes, row.FileCount, bound, changed)
	}

	// Restore the second run, then the first, each from its outputs alone.
	for _, tt := range []struct {
		trigger string
		from    backupOut
		want    map[string]string
	}{{"r2", second, world2}, {"r3", first, world1}} {
		writeWorldFile(t, ns, "written-before-restore.txt")
		cfg["worldbackup:runId"] = tt.trigger
		cfg["worldbackup:restores[0].server"] = "lobby"
		cfg["worldbackup:restores[0].archiveRef"] = tt.from.archiveRef
		cfg["worldbackup:restores[0].sha256"] = tt.from.sha256
		stacktest.SetConfig(t, stack, cfg)
		res, _ := up(t, node, ns, stack)
		restores := outputList(t, res.Outputs, "restores")
		if len(restores) != 1 || restores[0].status != "restored" || restores[0].archiveRef != tt.from.archiveRef {
			t.Fatalf("restore of %s: outputs %+v, want one restored from %s", tt.from.runID, restores, tt.from.archiveRef)
		}
		jobComplete(t, node, ns.Name, restores[0].jobName)
		if got := treeSums(t, world); !sameTree(got, tt.want) {
			t.Errorf("after the restore of %s the world differs from that run's:\ngot  %v\nwant %v\npods:\n%s",
				tt.from.runID, got, tt.want, node.PodLogs(t, ns.Name, "job-name="+restores[0].jobName))
		}
	}
}

// checkManifest: the manifest is at the exported archiveRef, its hash the
// row's sha256 and the output's, and the row is a chunked one.
func checkManifest(t *testing.T, ns *kubenode.Namespace, o backupOut) {
	t.Helper()
	want := "/backups/_chunked/runs/lobby/" + o.runID + ".manifest"
	if o.archiveRef != want {
		t.Fatalf("archiveRef %q, want the manifest %q", o.archiveRef, want)
	}
	b, err := os.ReadFile(hostPath(t, ns, o.archiveRef))
	if err != nil {
		t.Fatalf("no manifest at the exported archiveRef: %v", err)
	}
	sum := sha256.Sum256(b)
	row := catalogRow(t, ns, o.runID)
	if row.Format != "chunked" || row.ArchiveRef != o.archiveRef || row.SHA256 != hex.EncodeToString(sum[:]) || o.sha256 != row.SHA256 || o.status != "done" {
		t.Errorf("row format %q archive_ref %q sha256 %s, output %+v; the manifest's sha256 is %x", row.Format, row.ArchiveRef, row.SHA256, o, sum)
	}
}

// treeSums maps each regular file under dir (relative path) to its SHA-256.
func treeSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	sums := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		s := sha256.Sum256(b)
		sums[rel] = hex.EncodeToString(s[:8])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

// sameTree reports whether the restored world a holds the files of the
// backed-up world b with the same contents, leaving out what a backup
// does not archive (the default excludes: *.jar, *.tmp, cache/, logs/) and
// the restore's own marker files (names starting with '.').
func sameTree(a, b map[string]string) bool {
	archived := func(rel string) bool {
		parts := strings.Split(rel, string(filepath.Separator))
		if len(parts) > 1 && (parts[0] == "cache" || parts[0] == "logs") {
			return false
		}
		if ext := filepath.Ext(rel); ext == ".jar" || ext == ".tmp" {
			return false
		}
		return !slices.ContainsFunc(parts, func(e string) bool { return strings.HasPrefix(e, ".") })
	}
	strip := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			if archived(k) {
				out[k] = v
			}
		}
		return out
	}
	a, b = strip(a), strip(b)
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
