package image

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/jackc/pgx/v5"
	"github.com/klauspost/compress/zstd"

	"github.com/worldbackup/worldbackup/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// writeWorld writes a small world: level.dat (0600, as Paper writes it),
// a region file, player data, and a log the default excludes skip.
func writeWorld(t *testing.T, dir string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	blob := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	files := []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{"level.dat", blob(2048), 0o600},
		{"region/r.0.0.mca", blob(64 << 10), 0o644},
		{"region/r.-1.0.mca", blob(32 << 10), 0o644},
		{"playerdata/0b0c5e3c-7f0e-4b8e-9a2b-3c4d5e6f7a8b.dat", blob(512), 0o644},
		{"stats/0b0c5e3c-7f0e-4b8e-9a2b-3c4d5e6f7a8b.json", []byte(`{"stats":{}}`), 0o644},
		{"logs/latest.log", []byte("[00:00:00] [Server thread/INFO]: Done\n"), 0o644},
	}
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			t.Fatal(err)
		}
	}
}

// testBackup runs the image's entrypoint from the unpacked filesystem at root
// with the Job's backup arguments against a real PostgreSQL, and checks the
// archive and its catalog row.
func testBackup(t *testing.T, root string, cfg v1.Config) {
	dbURL := pgtest.URL(t)
	tmp := t.TempDir()
	world := filepath.Join(tmp, "world")
	writeWorld(t, world)
	confDir := filepath.Join(tmp, "felis")
	if err := os.MkdirAll(confDir, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(confDir, "felis.toml")
	quoted, err := json.Marshal(dbURL) // a TOML basic string is a JSON string here
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("[database]\nurl = "+string(quoted)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	archiveRoot := filepath.Join(tmp, "backups")
	if err := os.MkdirAll(archiveRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	termLog := filepath.Join(tmp, "termination-log")

	args := append(slices.Clone(cfg.Entrypoint[1:]),
		"backup", "--server", "s", "--run-id", "r",
		"--world", world, "--config", conf, "--archive-root", archiveRoot,
		"--format", "tar", "--compression", "zstd", "--log-format", "json", "--termination-log", termLog)
	cmd := exec.CommandContext(t.Context(), filepath.Join(root, cfg.Entrypoint[0]), args...)
	cmd.Env = cfg.Env
	cmd.Dir = filepath.Join(root, cfg.WorkingDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", cfg.Entrypoint[0], strings.Join(args, " "), err, out)
	}
	if strings.Contains(string(out), dbURL) {
		t.Errorf("the archiver's output contains the database URL:\n%s", out)
	}

	archive := filepath.Join(archiveRoot, "s", "r.tar.zst")
	data, err := os.ReadFile(archive)
	if err != nil {
		t.Fatalf("the backup exited 0 but its archive is missing: %v\n%s", err, out)
	}

	// The archive is a zstd tar of the world, without the excluded log.
	names := map[string]bool{}
	zr, err := zstd.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading archive %s: %v", archive, err)
		}
		names[strings.TrimPrefix(strings.TrimPrefix(hdr.Name, "./"), "world/")] = true
	}
	for _, want := range []string{"level.dat", "region/r.0.0.mca", "playerdata/0b0c5e3c-7f0e-4b8e-9a2b-3c4d5e6f7a8b.dat"} {
		if !names[want] {
			t.Errorf("archive lacks %s; it holds %v", want, names)
		}
	}
	if names["logs/latest.log"] {
		t.Errorf("archive holds logs/latest.log, which the default excludes skip")
	}

	// The catalog row describes exactly this archive.
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var ref, sum, compression string
	var size int64
	err = conn.QueryRow(t.Context(),
		`SELECT archive_ref, sha256, size_bytes, compression FROM world_backups WHERE run_id = $1 AND server = $2`,
		"r", "s").Scan(&ref, &sum, &size, &compression)
	if err != nil {
		t.Fatalf("reading the catalog row of run r: %v", err)
	}
	wantSum := sha256.Sum256(data)
	if ref != archive || sum != hex.EncodeToString(wantSum[:]) || size != int64(len(data)) || compression != "zstd" {
		t.Errorf("catalog row: ref %s sha256 %s size %d compression %s; want %s %x %d zstd",
			ref, sum, size, compression, archive, wantSum, len(data))
	}

	// The one-line JSON summary went to the termination-message path.
	summary, err := os.ReadFile(termLog)
	if err != nil {
		t.Fatalf("no termination message: %v", err)
	}
	var v map[string]any
	if err := json.Unmarshal(summary, &v); err != nil {
		t.Errorf("termination message is not a JSON object: %v\n%s", err, summary)
	}
}
