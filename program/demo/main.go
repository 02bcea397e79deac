// Command demo is `make demo`: one backup run, end to end, on this machine.
// It runs the worldbackup program with `pulumi up` (the real CLI and engine,
// the Kubernetes provider in render mode) for one server on a generated
// sample world, runs the rendered Job's container against the archiver the
// way a cluster would (claims mapped to folders, the config Secret to a
// file), and shows the rendered Job, the archive and the catalog row.
//
// scripts/demo.sh builds the tools and the archiver and finds a database
// (DATABASE_URL) before it runs this.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/internal/jobrun"
	"github.com/worldbackup/worldbackup/internal/pulumitools"
	"github.com/worldbackup/worldbackup/internal/worldgen"
	"github.com/worldbackup/worldbackup/program/deploy"
)

func main() {
	dir := flag.String("dir", ".demo", "scratch folder for the world, state, rendered manifests and archives")
	archiver := flag.String("archiver", "bin/archiver", "the archiver binary that stands in for the image's")
	runID := flag.String("run-id", time.Now().UTC().Format("20060102T150405Z"), "the run trigger (worldbackup:runId)")
	flag.Parse()
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		fmt.Fprintln(os.Stderr, "demo: DATABASE_URL is not set (scripts/demo.sh sets it)")
		os.Exit(2)
	}
	if err := run(context.Background(), *dir, *archiver, *runID, url); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dir, archiver, trigger, url string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	root, err := pulumitools.RepoRoot(dir)
	if err != nil {
		return err
	}
	tools, err := pulumitools.Find(root)
	if err != nil {
		return err
	}
	world, backups, rendered := filepath.Join(dir, "world"), filepath.Join(dir, "backups"), filepath.Join(dir, "rendered")
	for _, d := range []string{backups, filepath.Join(dir, "state"), filepath.Join(dir, "work")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if _, err := os.Stat(world); errors.Is(err, os.ErrNotExist) {
		step("generating a sample world in %s", world)
		st, err := worldgen.Generate(world, worldgen.Options{Size: 64 << 20, Seed: 1})
		if err != nil {
			return err
		}
		fmt.Printf("%d files, %.1f MiB\n", st.Files, float64(st.Bytes)/(1<<20))
	}

	step("pulumi up (render mode) with worldbackup:runId=%s", trigger)
	config := map[string]string{
		"worldbackup:image":           "worldbackup/archiver:dev",
		"worldbackup:backupClaim":     "backups",
		"worldbackup:runId":           trigger,
		"worldbackup:renderDir":       rendered,
		"worldbackup:servers[0].name": "lobby",
	}
	stack, err := tools.InlineStack(ctx, "demo", deploy.Program, filepath.Join(dir, "work"), filepath.Join(dir, "state"), config)
	if err != nil {
		return err
	}
	up, err := stack.Up(ctx, optup.ProgressStreams(os.Stdout))
	if err != nil {
		return fmt.Errorf("pulumi up: %w", err)
	}
	b := up.Outputs["backups"].Value.([]any)[0].(map[string]any)
	manifest := filepath.Join(rendered, deploy.DefaultCluster, "1-manifest",
		fmt.Sprintf("batch_v1-job-%s-%s.yaml", b["namespace"], b["jobName"]))

	step("the rendered Job: %s", manifest)
	raw, err := os.ReadFile(manifest)
	if err != nil {
		return err
	}
	os.Stdout.Write(raw)
	job, err := jobrun.ParseJob(raw)
	if err != nil {
		return err
	}

	step("running the Job's container against %s (world read-only, backups, config Secret)", archiver)
	felis := fmt.Sprintf("[database]\nurl = %q\n", url)
	res, err := jobrun.Run(ctx, job, jobrun.Options{
		Claims:   map[string]string{"world-lobby-0": world, "backups": backups},
		Secrets:  map[string]map[string][]byte{"felis-config": {"felis.toml": []byte(felis)}},
		Binaries: map[string]string{job.Spec.Template.Spec.Containers[0].Command[0]: archiver},
	})
	if err != nil {
		return err
	}
	fmt.Print(res.Stderr)
	if res.ExitCode != 0 {
		return fmt.Errorf("the archiver exited %d", res.ExitCode)
	}

	ref := b["archiveRef"].(string)
	host := filepath.Join(backups, ref[len("/backups/"):])

	step("the catalog row (world_backups)")
	db, err := catalog.Open(ctx, url, hclog.NewNullLogger())
	if err != nil {
		return err
	}
	defer db.Close()
	row, err := db.Lookup(ctx, b["runId"].(string))
	if err != nil {
		return err
	}
	added := "unknown"
	if row.AddedBytes != nil {
		added = strconv.FormatInt(*row.AddedBytes, 10)
	}
	fmt.Printf("run_id=%s server=%s format=%s archive_ref=%s size_bytes=%d added_bytes=%s sha256=%s file_count=%d finished_at=%s\n",
		row.RunID, row.Server, row.Format, row.ArchiveRef, row.SizeBytes, added, row.SHA256, row.FileCount, row.FinishedAt.Format(time.RFC3339))

	// The default format, chunked: the run is a manifest naming blobs in
	// packs; `archiver export` gives its tar back, which GNU tar reads.
	step("the run: %s (in the pod: %s), and its tar through archiver export", host, ref)
	show(ctx, "find", filepath.Join(backups, "_chunked"), "-type", "f", "-printf", "%10s bytes  _chunked/%P\n")
	show(ctx, "bash", "-o", "pipefail", "-c", `"$0" export --archive "$1" --sha256 "$2" | tar -tvf - | head -n 8`, archiver, host, row.SHA256)
	fmt.Println("\nNext run: `make demo` again (a new run ID), or see README.md for a real cluster.")
	return nil
}

func step(format string, args ...any) {
	fmt.Printf("\n==> "+format+"\n", args...)
}

func show(ctx context.Context, name string, args ...string) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, io.Discard
	_ = cmd.Run()
}
