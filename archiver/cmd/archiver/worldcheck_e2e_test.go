package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldbackup/worldbackup/internal/pgtest"
	"github.com/worldbackup/worldbackup/internal/worldgen"
	"github.com/worldbackup/worldbackup/jobapi"
)

// worldJSON is verify --world-check --json's summary.
type worldJSON struct {
	Status        string `json:"status"`
	Archive       string `json:"archive"`
	World         string `json:"world"`
	ChunksChecked int64  `json:"chunks_checked"`
	Chunks        int64  `json:"chunks"`
	Problems      []struct {
		File  string  `json:"file"`
		Chunk *[2]int `json:"chunk"`
		What  string  `json:"what"`
	} `json:"problems"`
}

func worldSummaryOf(t *testing.T, res result) worldJSON {
	t.Helper()
	var s worldJSON
	if err := json.Unmarshal([]byte(res.stdout), &s); err != nil {
		t.Fatalf("stdout is not one JSON summary: %v\n%s\nstderr:\n%s", err, res.stdout, res.stderr)
	}
	return s
}

// flipChunk flips a byte inside the compressed payload of the first chunk
// of world/region/r.0.0.mca and returns that chunk's coordinates.
func flipChunk(t *testing.T, world string) [2]int {
	t.Helper()
	p := filepath.Join(world, "world", "region", "r.0.0.mca")
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var head [4096]byte
	if _, err := f.ReadAt(head[:], 0); err != nil {
		t.Fatal(err)
	}
	for slot := range 1024 {
		loc := binary.BigEndian.Uint32(head[4*slot:])
		if loc == 0 {
			continue
		}
		off := int64(loc>>8)*4096 + 40
		var b [1]byte
		f.ReadAt(b[:], off)
		b[0] ^= 0x5a
		if _, err := f.WriteAt(b[:], off); err != nil {
			t.Fatal(err)
		}
		return [2]int{slot % 32, slot / 32}
	}
	t.Fatal("r.0.0.mca has no chunks")
	return [2]int{}
}

func TestVerifyWorldCheck(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	if _, err := worldgen.Generate(e.world, worldgen.Options{Size: 4 << 20, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{e.tarBackupArgs("w1"), e.backupArgs("c1", "--format", "chunked")} {
		if res := archiver(t, args...); res.code != 0 {
			t.Fatalf("backup exited %d:\n%s", res.code, res.stderr)
		}
	}
	tarRow, chunkedRowC1 := chunkedRowOf(t, e.url, "w1"), chunkedRowOf(t, e.url, "c1")
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.CopyFS(bad, os.DirFS(e.world)); err != nil {
		t.Fatal(err)
	}
	badChunk := flipChunk(t, bad)

	tests := []struct {
		name     string
		args     []string
		code     int
		problems bool
	}{
		{"tar archive", []string{"--archive", tarRow.ArchiveRef, "--sha256", tarRow.SHA256}, 0, false},
		{"tar archive, 10% of the chunks", []string{"--archive", tarRow.ArchiveRef, "--sha256", tarRow.SHA256, "--chunks", "10%"}, 0, false},
		{"run from the catalog", []string{"--config", e.config, "--run-id", "w1"}, 0, false},
		{"chunked run", []string{"--archive", chunkedRowC1.ArchiveRef, "--sha256", chunkedRowC1.SHA256}, 0, false},
		{"chunked run from the catalog", []string{"--config", e.config, "--run-id", "c1"}, 0, false},
		{"world folder", []string{"--world", e.world}, 0, false},
		{"damaged world folder", []string{"--world", bad}, 3, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			scratch := t.TempDir()
			args := append([]string{"verify", "--world-check", "--json", "--scratch", scratch}, tc.args...)
			res := archiver(t, args...)
			if res.code != tc.code {
				t.Fatalf("verify exited %d, want %d:\n%s%s", res.code, tc.code, res.stdout, res.stderr)
			}
			s := worldSummaryOf(t, res)
			if s.ChunksChecked == 0 || (s.Status == "ok") != (tc.code == 0) {
				t.Fatalf("summary %+v", s)
			}
			if tc.problems && (len(s.Problems) == 0 || s.Problems[0].File != "world/region/r.0.0.mca" ||
				s.Problems[0].Chunk == nil || *s.Problems[0].Chunk != badChunk) {
				t.Fatalf("want the damaged chunk %v of world/region/r.0.0.mca named, got %+v", badChunk, s.Problems)
			}
			if left, _ := os.ReadDir(scratch); len(left) != 0 {
				t.Errorf("the scratch folder keeps %d entries", len(left))
			}
		})
	}

	// An archive of a damaged world verifies as an archive and is refused
	// by the world check.
	e.world = bad
	if res := archiver(t, e.tarBackupArgs("w2")...); res.code != 0 {
		t.Fatalf("backup exited %d:\n%s", res.code, res.stderr)
	}
	w2 := chunkedRowOf(t, e.url, "w2")
	t.Run("archive of a damaged world", func(t *testing.T) {
		if res := archiver(t, "verify", "--archive", w2.ArchiveRef, "--sha256", w2.SHA256); res.code != 0 {
			t.Fatalf("verify without --world-check exited %d:\n%s", res.code, res.stderr)
		}
		res := archiver(t, "verify", "--world-check", "--scratch", t.TempDir(), "--archive", w2.ArchiveRef, "--sha256", w2.SHA256)
		if res.code != 3 || !strings.Contains(res.stdout, "world failed") || !strings.Contains(res.stderr, "r.0.0.mca") {
			t.Fatalf("verify --world-check exited %d, want 3 naming r.0.0.mca:\n%s%s", res.code, res.stdout, res.stderr)
		}
	})

	// The verify Job's command line (jobapi.Verify) reports through the
	// termination log: verified with the chunks counted, or failed naming
	// the damaged chunk.
	for _, tc := range []struct {
		name, runID string
		row         chunkedRow
		code        int
		want        jobapi.Status
	}{{"the Job's verify of a good archive", "w1", tarRow, 0, jobapi.StatusVerified}, {"the Job's verify of a damaged world", "w2", w2, 3, jobapi.StatusFailed}} {
		t.Run(tc.name, func(t *testing.T) {
			term := filepath.Join(t.TempDir(), "termination-log")
			req := jobapi.Verify{Archive: tc.row.ArchiveRef, SHA256: tc.row.SHA256, WorldCheck: true, Scratch: t.TempDir(), LogFormat: jobapi.LogJSON}
			res := archiver(t, append(req.Args(), "--termination-log", term)...)
			if res.code != tc.code {
				t.Fatalf("verify exited %d, want %d:\n%s%s", res.code, tc.code, res.stdout, res.stderr)
			}
			b, err := os.ReadFile(term)
			if err != nil {
				t.Fatal(err)
			}
			var got jobapi.VerifyResult
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("termination log %q: %v", b, err)
			}
			if got.Status != tc.want || got.ChunksChecked == 0 || got.ChunksChecked != got.Chunks || got.SHA256 != tc.row.SHA256 || got.RunID != tc.runID {
				t.Fatalf("termination log = %+v", got)
			}
			wantProblem := fmt.Sprintf("world/region/r.0.0.mca: chunk (%d, %d):", badChunk[0], badChunk[1])
			if tc.code != 0 && (got.ProblemsTotal == 0 || !strings.HasPrefix(got.Problem, wantProblem)) {
				t.Fatalf("problem %q (%d in all), want one starting %q", got.Problem, got.ProblemsTotal, wantProblem)
			}
			if sum, err := jobapi.ParseSummary(string(b)); err != nil || sum.Status != tc.want || sum.ChunksChecked != got.ChunksChecked {
				t.Fatalf("the components read %+v, %v", sum, err)
			}
		})
	}
}

func TestVerifyWorldCheckUsage(t *testing.T) {
	sum := strings.Repeat("0", 64)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"chunks without world-check", []string{"--archive", "/x/r.tar.zst", "--sha256", sum, "--chunks", "10%"}, "--chunks goes with --world-check"},
		{"world without world-check", []string{"--world", "/x"}, "--world goes with --world-check"},
		{"world and archive", []string{"--world-check", "--world", "/x", "--archive", "/x/r.tar.zst"}, "checks a folder"},
		{"share above 100%", []string{"--world-check", "--world", "/x", "--chunks", "200%"}, "--chunks"},
		{"world folder missing", []string{"--world-check", "--world", "/nonexistent"}, "not a folder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := archiver(t, append([]string{"verify"}, tc.args...)...)
			if res.code != 2 || !strings.Contains(res.stderr, tc.want) {
				t.Fatalf("verify exited %d, want 2 saying %q:\n%s", res.code, tc.want, res.stderr)
			}
		})
	}
}
