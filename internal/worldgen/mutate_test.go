package worldgen

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyTree copies the regular files and folders under src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// contentHash hashes the path, size and bytes of every regular file under dir.
func contentHash(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		fmt.Fprintf(h, "%s\x00%d\n", filepath.ToSlash(rel), len(b))
		h.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// byteDiff is what changed between two copies of a world: for region files
// the 4 KiB sectors that differ or are new (header and chunk sectors apart),
// for every other file its whole size when its bytes differ or it is new.
type byteDiff struct {
	headerBytes, chunkBytes, otherBytes int64
	otherFiles                          int
	missing                             []string
}

func diffTrees(t *testing.T, before, after string) byteDiff {
	t.Helper()
	var d byteDiff
	err := filepath.WalkDir(after, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(after, p)
		nb, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		ob, err := os.ReadFile(filepath.Join(before, rel))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if !strings.HasSuffix(rel, ".mca") {
			if !bytes.Equal(ob, nb) || err != nil {
				d.otherBytes += int64(len(nb))
				d.otherFiles++
			}
			return nil
		}
		for off := 0; off < len(nb); off += sectorSize {
			ns := nb[off:min(len(nb), off+sectorSize)]
			var old []byte
			if off < len(ob) {
				old = ob[off:min(len(ob), off+sectorSize)]
			}
			if bytes.Equal(ns, old) {
				continue
			}
			if off < headerSize {
				d.headerBytes += sectorSize
			} else {
				d.chunkBytes += sectorSize
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(before, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(before, p)
		if _, err := os.Stat(filepath.Join(after, rel)); err != nil {
			d.missing = append(d.missing, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// regionNames lists every region file of the world.
func regionNames(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, d := range dimensions {
		names, err := filepath.Glob(filepath.Join(dir, filepath.FromSlash(d.dir), "r.*.mca"))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, names...)
	}
	return out
}

func TestMutate(t *testing.T) {
	t.Parallel()
	world, _ := generate(t, Options{Size: 16 << 20, Seed: 5})
	before := filepath.Join(t.TempDir(), "before")
	copyTree(t, world, before)
	again := filepath.Join(t.TempDir(), "again")
	copyTree(t, world, again)

	// Every region file and a large share of chunks, so that both in-place
	// rewrites and relocations happen on a small world.
	o := MutateOptions{Seed: 9, RegionShare: 1, ChunkShare: 0.3, PlayerShare: 0.2, NewChunks: 4, NewPlayers: 3}
	rep, err := Mutate(world, o)
	if err != nil {
		t.Fatalf("Mutate: %v", err)
	}
	t.Logf("report: %+v", rep)

	t.Run("report adds up", func(t *testing.T) {
		regions := len(regionNames(t, before))
		if rep.RegionFiles != regions || rep.ChunksInPlace == 0 || rep.ChunksMoved == 0 ||
			rep.ChunksInPlace+rep.ChunksMoved != rep.ChunksRewritten || rep.ChunksAdded != 4*regions {
			t.Errorf("report %+v: want all %d region files touched, chunks both in place and moved, 4 added per file", rep, regions)
		}
		if rep.PlayersNew != 3 || rep.PlayersSaved == 0 || rep.PlayerFiles != 4*rep.PlayersSaved+3*rep.PlayersNew {
			t.Errorf("report %+v: want 3 new players (3 files each) and saved ones (4 files each)", rep)
		}
		if rep.ChangedBytes != rep.ChunkBytes+rep.TableBytes+rep.PlayerBytes || rep.ChangedBytes == 0 {
			t.Errorf("report %+v: changed bytes are not chunk + table + player bytes", rep)
		}
		if st := walkStats(t, world); rep.WorldBytes != st.Bytes {
			t.Errorf("report says the world holds %d bytes, it holds %d", rep.WorldBytes, st.Bytes)
		}
	})

	t.Run("report matches a byte diff", func(t *testing.T) {
		d := diffTrees(t, before, world)
		if len(d.missing) > 0 {
			t.Errorf("files gone after the day of play: %v", d.missing)
		}
		if d.chunkBytes != rep.ChunkBytes || d.headerBytes != rep.TableBytes || d.otherBytes != rep.PlayerBytes || d.otherFiles != rep.PlayerFiles {
			t.Errorf("byte diff: chunk sectors %d, header sectors %d, other files %d (%d bytes); report: chunks %d, tables %d, player files %d (%d bytes)",
				d.chunkBytes, d.headerBytes, d.otherFiles, d.otherBytes, rep.ChunkBytes, rep.TableBytes, rep.PlayerFiles, rep.PlayerBytes)
		}
	})

	t.Run("regions stay valid Anvil", func(t *testing.T) {
		sums := map[string]map[int][32]byte{}
		for _, name := range regionNames(t, world) {
			rel, _ := filepath.Rel(world, name)
			sums[rel] = checkRegion(t, name, 2*maxRegion, nil)
			oldSums := checkRegion(t, filepath.Join(before, rel), maxRegion, nil)
			nb, _ := os.ReadFile(name)
			ob, _ := os.ReadFile(filepath.Join(before, rel))
			oldSectors := len(ob) / sectorSize
			var moved, added, rewritten, stamped int
			for slot := range slots {
				oloc, nloc := binary.BigEndian.Uint32(ob[4*slot:]), binary.BigEndian.Uint32(nb[4*slot:])
				ots, nts := binary.BigEndian.Uint32(ob[sectorSize+4*slot:]), binary.BigEndian.Uint32(nb[sectorSize+4*slot:])
				if ots != nts {
					stamped++
					if nts < uint32(dayOfPlay.Unix()) {
						t.Errorf("%s slot %d: new timestamp %d is before the day of play", rel, slot, nts)
					}
				}
				if nsum, osum := sums[rel][slot], oldSums[slot]; nloc != 0 && oloc != 0 && nsum != osum {
					rewritten++
					if ots == nts {
						t.Errorf("%s slot %d: chunk rewritten but its timestamp kept", rel, slot)
					}
				}
				switch {
				case oloc == 0 && nloc != 0:
					added++
				case oloc>>8 != nloc>>8:
					moved++
				default:
					continue
				}
				// A moved or added chunk sits past the old end of the file,
				// where the table says (checkRegion decoded it there).
				if int(nloc>>8) < oldSectors {
					t.Errorf("%s slot %d: moved to sector %d, inside the old file of %d sectors", rel, slot, nloc>>8, oldSectors)
				}
			}
			if stamped != rewritten+added {
				t.Errorf("%s: %d timestamps changed, want %d rewritten + %d added", rel, stamped, rewritten, added)
			}
			rep.ChunksMoved -= moved
			rep.ChunksAdded -= added
			rep.ChunksRewritten -= rewritten
		}
		if rep.ChunksMoved != 0 || rep.ChunksAdded != 0 || rep.ChunksRewritten != 0 {
			t.Errorf("the tables disagree with the report by %d moved, %d added, %d rewritten chunks", rep.ChunksMoved, rep.ChunksAdded, rep.ChunksRewritten)
		}
		checkDistinct(t, sums)
	})

	t.Run("players stay readable", func(t *testing.T) {
		dats, _ := filepath.Glob(filepath.Join(world, "world", "playerdata", "*.dat*"))
		for _, p := range dats {
			if root := readGzipNBT(t, p); root["Inventory"] == nil {
				t.Errorf("%s has no Inventory", p)
			}
		}
		if tmp, _ := filepath.Glob(filepath.Join(world, "world", "*", "*.worldgen-tmp")); len(tmp) > 0 {
			t.Errorf("temp files left: %v", tmp)
		}
	})

	t.Run("deterministic", func(t *testing.T) {
		rep2, err := Mutate(again, o)
		if err != nil {
			t.Fatal(err)
		}
		if rep2.ChangedBytes != rep.ChangedBytes || contentHash(t, again) != contentHash(t, world) {
			t.Errorf("the same world and options gave different results")
		}
	})
}

func TestMutateDefaults(t *testing.T) {
	t.Parallel()
	world, st := generate(t, Options{Size: 16 << 20, Seed: 2})
	rep, err := Mutate(world, MutateOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report: %+v (world %d bytes)", rep, st.Bytes)
	if rep.RegionFiles < 1 || rep.ChunksRewritten < 1 || rep.ChunksAdded != DefaultNewChunks*rep.RegionFiles ||
		rep.PlayersSaved < 1 || rep.PlayersNew != DefaultNewPlayers {
		t.Errorf("default day of play %+v: want at least one region file, chunk and player, %d chunks added per file, %d new players",
			rep, DefaultNewChunks, DefaultNewPlayers)
	}
	// A day of play changes a small share of the world.
	if rep.ChangedBytes <= 0 || rep.ChangedBytes > st.Bytes/10 {
		t.Errorf("changed %d of %d bytes; want a small share", rep.ChangedBytes, st.Bytes)
	}
}

func TestMutateRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		o       MutateOptions
		dir     func(t *testing.T) string
		wantErr string
	}{
		{"share above 1", MutateOptions{RegionShare: 1.5}, nil, "region share"},
		{"negative share", MutateOptions{PlayerShare: -0.1}, nil, "player share"},
		{"too many new chunks", MutateOptions{NewChunks: slots + 1}, nil, "new chunks"},
		{"not a world", MutateOptions{}, func(t *testing.T) string { return t.TempDir() }, "no world/ folder"},
		{"garbage region table", MutateOptions{RegionShare: 1}, func(t *testing.T) string {
			dir := t.TempDir()
			p := filepath.Join(dir, "world", "region")
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			b := bytes.Repeat([]byte{0xff}, headerSize+sectorSize)
			if err := os.WriteFile(filepath.Join(p, "r.0.0.mca"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			return dir
		}, "outside the file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "nothing")
			if tc.dir != nil {
				dir = tc.dir(t)
			}
			var before string
			if tc.dir != nil {
				before = contentHash(t, dir)
			}
			_, err := Mutate(dir, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Mutate = %v, want an error containing %q", err, tc.wantErr)
			}
			if tc.dir != nil && contentHash(t, dir) != before {
				t.Errorf("a refused Mutate changed the folder")
			}
		})
	}
}
