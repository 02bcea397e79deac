package chunked

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/restic/chunker"

	"github.com/worldbackup/worldbackup/archiver/store"
)

func testSealer(seed byte) *Sealer {
	var k [32]byte
	for i := range k {
		k[i] = seed + byte(i)
	}
	return NewSealer(k)
}

func sealedBackup(t *testing.T, st WriteStore, root, server, id string, prev *Manifest, sl *Sealer) Result {
	t.Helper()
	res, err := Write(t.Context(), st, root, Options{Server: server, RunID: id, Previous: prev, Sealer: sl})
	if err != nil {
		t.Fatalf("backup %s: %v", id, err)
	}
	return res
}

func sealedRebuild(t *testing.T, st Store, res Result, sl *Sealer) (*Manifest, []byte, error) {
	t.Helper()
	m, err := OpenSealed(t.Context(), st, res.ManifestKey, res.SHA256, sl)
	if err != nil {
		return nil, nil, err
	}
	var b bytes.Buffer
	err = Rebuild(t.Context(), st, m, &b)
	return m, b.Bytes(), err
}

// TestSealedRoundTrip: a sealed run rebuilds to the tar format's stream,
// no pack or manifest holds a plaintext chunk, path or blob ID, a second
// run deduplicates within the key, and a run of another key or without
// one is refused as such (not as damage).
func TestSealedRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	world := testWorld(t, rng)
	root := t.TempDir()
	st, err := store.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	sl := testSealer(1)
	res := sealedBackup(t, st, world, "survival", "run-1", nil, sl)
	m, got, err := sealedRebuild(t, st, res, sl)
	if err != nil {
		t.Fatal(err)
	}
	want := plainTar(t, world)
	if !bytes.Equal(got, want) {
		t.Fatalf("rebuilt stream (%d bytes) differs from the tar format's (%d bytes)", len(got), len(want))
	}
	if !m.Sealed() || !bytes.Equal(m.KeyID, sl.KeyID()) {
		t.Errorf("manifest sealed %v, key id %x", m.Sealed(), m.KeyID)
	}

	// Nothing of the world in the clear: a 64-byte piece of each file, its
	// path, and the plain SHA-256 of a blob.
	level, _ := os.ReadFile(filepath.Join(world, "world/level.dat"))
	needles := [][]byte{level[100:164], []byte("playerdata/a.dat"), []byte("world/data/big.dat")}
	err = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, n := range needles {
			if bytes.Contains(b, n) {
				t.Errorf("%s holds %q in the clear", p, n[:min(len(n), 20)])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, seg := range m.Segments[:1] {
		if seg.Meta != nil && seg.Meta.ID == (*Sealer)(nil).blobID(want[:seg.Meta.Raw]) {
			t.Error("a blob is named by the plain SHA-256 of its bytes")
		}
	}

	t.Run("dedup within the key", func(t *testing.T) {
		res2 := sealedBackup(t, st, world, "survival", "run-2", m, sl)
		if res2.NewBlobs != 0 || res2.ReusedFiles == 0 {
			t.Errorf("an unchanged second run stored %d blobs, reused %d files", res2.NewBlobs, res2.ReusedFiles)
		}
		if _, got, err := sealedRebuild(t, st, res2, sl); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("second run: %v", err)
		}
	})
	t.Run("previous run of another key is not reused", func(t *testing.T) {
		other := testSealer(9)
		res3 := sealedBackup(t, st, world, "creative", "run-3", m, other)
		if res3.ReusedFiles != 0 || res3.NewBlobs == 0 {
			t.Errorf("reused %d files across keys", res3.ReusedFiles)
		}
	})
	t.Run("no key", func(t *testing.T) {
		if _, _, err := sealedRebuild(t, st, res, nil); !errors.Is(err, ErrNeedKey) || errors.Is(err, ErrCorrupt) {
			t.Errorf("got %v, want ErrNeedKey", err)
		}
	})
	t.Run("another key", func(t *testing.T) {
		if _, _, err := sealedRebuild(t, st, res, testSealer(2)); !errors.Is(err, ErrWrongKey) || errors.Is(err, ErrCorrupt) {
			t.Errorf("got %v, want ErrWrongKey", err)
		}
	})
	t.Run("streaming reader", func(t *testing.T) {
		sm, err := OpenStreamSealed(t.Context(), st, res.ManifestKey, res.SHA256, sl)
		if err != nil {
			t.Fatal(err)
		}
		if !sm.Sealed() || sm.Segments != nil {
			t.Errorf("streamed manifest: sealed %v, %d segments held", sm.Sealed(), len(sm.Segments))
		}
		var b bytes.Buffer
		if err := Rebuild(t.Context(), st, sm, &b); err != nil || !bytes.Equal(b.Bytes(), want) {
			t.Fatalf("streamed rebuild (%d bytes): %v", b.Len(), err)
		}
		if sm.StreamSize != int64(len(want)) {
			t.Errorf("stream size %d after the walk, want %d", sm.StreamSize, len(want))
		}
		vr, err := Verify(t.Context(), st, sm, 1, 0)
		if err != nil || vr.Blobs == 0 {
			t.Errorf("streamed verify: %+v, %v", vr, err)
		}
		if _, err := OpenStreamSealed(t.Context(), st, res.ManifestKey, res.SHA256, nil); !errors.Is(err, ErrNeedKey) {
			t.Errorf("streamed open without a key: %v, want ErrNeedKey", err)
		}
		if _, err := OpenStreamSealed(t.Context(), st, res.ManifestKey, res.SHA256, testSealer(2)); !errors.Is(err, ErrWrongKey) {
			t.Errorf("streamed open with another key: %v, want ErrWrongKey", err)
		}
	})
	t.Run("tampered blob", func(t *testing.T) {
		pk, _ := layoutPackKey(m.Packs[0])
		p := filepath.Join(root, pk)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		orig := bytes.Clone(b)
		b[len(packHeader)+3] ^= 1
		writeFile(t, p, b)
		defer writeFile(t, p, orig)
		_, _, err = sealedRebuild(t, st, res, sl)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "authenticate") {
			t.Errorf("got %v, want a blob that does not authenticate", err)
		}
	})
	t.Run("clear run still reads with a sealer", func(t *testing.T) {
		clear := backup(t, st, world, "run-4", nil, false)
		if _, got, err := sealedRebuild(t, st, clear, sl); err != nil || !bytes.Equal(got, want) {
			t.Errorf("clear run read with a key: %v", err)
		}
	})
}

// TestSealedManifestTampered: a manifest whose bytes were changed and its
// checksum recomputed (someone who can write the store and the catalog)
// fails to authenticate.
func TestSealedManifestTampered(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	world := testWorld(t, rng)
	st := store.NewMem()
	sl := testSealer(3)
	res := sealedBackup(t, st, world, "survival", "run-1", nil, sl)
	rc, err := st.Open(t.Context(), res.ManifestKey)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	for name, at := range map[string]int{"body": len(b) - 20, "key id in the header": 9} {
		t.Run(name, func(t *testing.T) {
			c := bytes.Clone(b)
			c[at] ^= 0x40
			_, err := DecodeManifestSealed(c, sl)
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrWrongKey) {
				t.Errorf("got %v", err)
			}
		})
	}
	if _, err := DecodeManifestSealed(b[:len(b)-1], sl); !errors.Is(err, ErrCorrupt) {
		t.Errorf("truncated: got %v", err)
	}
}

// cdcLengths returns the raw lengths of the data blobs of at least cdcMin
// bytes in st's packs, sorted: what the pack index, in the clear, shows of
// a file cut by content.
func cdcLengths(t *testing.T, st *store.Mem) []uint {
	t.Helper()
	var lengths []uint
	for _, key := range st.Keys() {
		if !strings.HasPrefix(key, "_chunked/packs/") {
			continue
		}
		ents, err := ParsePackIndex(objectBytes(t, st, key))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.Type == typeData && e.Raw >= cdcMin {
				lengths = append(lengths, uint(e.Raw))
			}
		}
	}
	slices.Sort(lengths)
	return lengths
}

// TestSealedChunkerPolynomial: a run in the clear cuts a file by content
// with the public polynomial, so anyone can compute the blob lengths a
// candidate file gives and find them in the pack index. A sealed run cuts
// with a polynomial derived from its data key: two servers (two keys)
// storing the same file show neither that sequence nor each other's. A
// second run of the same key, the file changed in one place, stores only
// the blobs around the change: dedup within a key is unchanged.
func TestSealedChunkerPolynomial(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	known := randomBytes(rng, 6<<20) // a public map's file, a datapack
	var public []uint
	c := chunker.NewWithBoundaries(bytes.NewReader(known), cdcPol, cdcMin, cdcMax)
	c.SetAverageBits(cdcAvgBits)
	for buf := make([]byte, cdcMax); ; {
		ch, err := c.Next(buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ch.Length >= cdcMin {
			public = append(public, ch.Length)
		}
	}
	slices.Sort(public)

	seen := map[string][]uint{}
	for _, tc := range []struct {
		name, server string
		sl           *Sealer
		pol          chunker.Pol // pinned: a new derivation re-stores every changed file once; 0 not checked
	}{
		{"in the clear", "alpha", nil, 0x3DA3358B4DC173},
		{"sealed, one key", "beta", testSealer(1), 0x25be7ced7bb98b},
		{"sealed, another key", "gamma", testSealer(2), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol, err := tc.sl.chunkerPol()
			if err != nil || !pol.Irreducible() || pol.Deg() != 53 {
				t.Fatalf("the polynomial %v: irreducible %v, degree %d; want an irreducible one of degree 53", err, pol.Irreducible(), pol.Deg())
			}
			if tc.pol != 0 && pol != tc.pol {
				t.Errorf("the polynomial is %#x, want %#x", uint64(pol), uint64(tc.pol))
			}
			if again, _ := tc.sl.chunkerPol(); again != pol {
				t.Fatal("the same key gave another polynomial")
			}
			world := t.TempDir()
			file := filepath.Join(world, "world/data/known.dat")
			writeFile(t, file, known)
			writeFile(t, filepath.Join(world, "world/level.dat"), randomBytes(rng, 3000))
			st := store.NewMem()
			res := sealedBackup(t, st, world, tc.server, "r1", nil, tc.sl)
			got := cdcLengths(t, st)
			seen[tc.name] = got
			if sealed := tc.sl != nil; slices.Equal(got, public) == sealed {
				t.Errorf("sealed %v, the pack index's lengths %v; the ones anyone computes from the file %v", sealed, got, public)
			}

			changed := bytes.Clone(known)
			copy(changed[3<<20:], "a change in the middle of the file")
			writeFile(t, file, changed)
			later := time.Now().Add(time.Hour)
			if err := os.Chtimes(file, later, later); err != nil {
				t.Fatal(err)
			}
			prev, err := OpenSealed(t.Context(), st, res.ManifestKey, res.SHA256, tc.sl)
			if err != nil {
				t.Fatal(err)
			}
			res2 := sealedBackup(t, st, world, tc.server, "r2", prev, tc.sl)
			if res2.NewBlobs > 6 || res2.ReusedFiles != 1 {
				t.Errorf("the second run stored %d new blobs and reused %d files; want the changed chunk's few, level.dat reused (%d blobs of at least 64 KiB in all)",
					res2.NewBlobs, res2.ReusedFiles, len(got))
			}
		})
	}
	if a, b := seen["sealed, one key"], seen["sealed, another key"]; slices.Equal(a, b) {
		t.Errorf("two data keys cut the same file into the same lengths %v", a)
	}
}
