package chunked

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/jobapi"
)

func TestChunkedRoundTrip(t *testing.T) {
	stores := map[string]func(t *testing.T) WriteStore{
		"mem": func(t *testing.T) WriteStore { return store.NewMem() },
		"folder": func(t *testing.T) WriteStore {
			l, err := store.NewLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
	}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			world := testWorld(t, rng)
			st := newStore(t)
			res := backup(t, st, world, "run-1", nil, false)
			m, got := rebuild(t, st, res)
			want := plainTar(t, world)
			if !bytes.Equal(got, want) {
				t.Fatalf("rebuilt stream (%d bytes) differs from the tar format's (%d bytes)", len(got), len(want))
			}
			if res.Size != int64(len(want)) || m.StreamSize != res.Size {
				t.Errorf("stream size %d, manifest %d, want %d", res.Size, m.StreamSize, len(want))
			}
			if res.AddedBytes <= 0 || len(res.NewPacks) == 0 {
				t.Errorf("added %d bytes in %d packs", res.AddedBytes, len(res.NewPacks))
			}
		})
	}
}

// TestChunkedDedup: a second run after a small change adds about what
// changed: rewritten chunks, a chunk that grew and moved, a new chunk, a
// rewritten player file; a chunk moved unchanged and the untouched files
// add nothing.
func TestChunkedDedup(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	world := t.TempDir()
	regions := make([]*region, 4)
	for i := range regions {
		regions[i] = newRegion(rng, 60, func(int) int { return 2000 + rng.IntN(10000) })
		writeFile(t, filepath.Join(world, "region", "r.0."+string(rune('0'+i))+".mca"), regions[i].bytes())
	}
	writeFile(t, filepath.Join(world, "big.dat"), randomBytes(rng, 4<<20))
	for i := range 10 {
		writeFile(t, filepath.Join(world, "playerdata", string(rune('a'+i))+".dat"), randomBytes(rng, 3000))
	}
	st := store.NewMem()
	res1 := backup(t, st, world, "run-1", nil, false)
	m1, _ := rebuild(t, st, res1)

	changed := 0
	r := regions[1]
	for _, i := range []int{3, 17, 40} { // rewritten in place: same sector count
		c := randomChunk(rng, len(r.chunks[i])-5)
		r.put(i, c)
		changed += len(c)
	}
	c := randomChunk(rng, int(r.sect[5]*sectorSize)+3000) // grew: moved to the end
	r.put(5, c)
	changed += len(c)
	c = randomChunk(rng, 5000) // a new chunk
	r.put(200, c)
	changed += len(c)
	// A chunk moved unchanged (the game defragmenting): no new data.
	r.at[9], r.end = r.end, r.end+r.sect[9]
	r.put(9, r.chunks[9])
	writeFile(t, filepath.Join(world, "region/r.0.1.mca"), r.bytes())
	changed += regionHeader // the location table changed
	p := randomBytes(rng, 3000)
	writeFile(t, filepath.Join(world, "playerdata/c.dat"), p)
	changed += len(p)

	res2 := backup(t, st, world, "run-2", m1, false)
	_, got := rebuild(t, st, res2)
	if want := plainTar(t, world); !bytes.Equal(got, want) {
		t.Fatal("second run does not rebuild to the tar format's stream")
	}
	// Beyond what changed: the manifest, the two changed files' tar
	// headers and list blobs, the packs' headers and indexes.
	slack := res2.ManifestSize + 2*1536 + 2*(60+2)*80 + 2*512
	if res2.AddedBytes > int64(changed)+slack {
		t.Errorf("second run added %d bytes for %d changed (bound %d)", res2.AddedBytes, changed, int64(changed)+slack)
	}
	if res2.ReusedFiles != 4+10-1 {
		t.Errorf("reused %d files, want %d", res2.ReusedFiles, 4+10-1)
	}
	t.Logf("first run %d bytes, second %d for %d changed", res1.AddedBytes, res2.AddedBytes, changed)
}

// TestChunkedReadsOnlyWhatChanged: an unchanged file is not read again, a
// touched one is, and FullRead reads everything.
func TestChunkedReadsOnlyWhatChanged(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	world := testWorld(t, rng)
	st := store.NewMem()
	res1 := backup(t, st, world, "run-1", nil, false)
	m1, _ := rebuild(t, st, res1)
	hard := int64(2000) // level.dat has two names: always read

	res2 := backup(t, st, world, "run-2", m1, false)
	if res2.InputBytes != hard {
		t.Errorf("unchanged world: read %d bytes, want %d (the multiply-linked file)", res2.InputBytes, hard)
	}
	m2, got := rebuild(t, st, res2)
	if !bytes.Equal(got, plainTar(t, world)) {
		t.Fatal("run of reused files does not rebuild to the tar stream")
	}
	if res2.NewBlobs != 0 {
		t.Errorf("unchanged world stored %d new blobs", res2.NewBlobs)
	}

	big := filepath.Join(world, "world/data/big.dat")
	st1, _ := os.Stat(big)
	if err := os.Chtimes(big, st1.ModTime(), st1.ModTime().Add(1)); err != nil {
		t.Fatal(err)
	}
	res3 := backup(t, st, world, "run-3", m2, false)
	if want := hard + st1.Size(); res3.InputBytes != want {
		t.Errorf("touched file: read %d bytes, want %d", res3.InputBytes, want)
	}
	if res3.NewBlobs > 2 { // its tar header and the metadata around it
		t.Errorf("touched file stored %d new blobs; its data is the same", res3.NewBlobs)
	}
	m3, _ := rebuild(t, st, res3)

	res4 := backup(t, st, world, "run-4", m3, true)
	if res4.InputBytes != res1.InputBytes {
		t.Errorf("full read: read %d bytes, want %d", res4.InputBytes, res1.InputBytes)
	}
}

func TestChunkedDamage(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	world := testWorld(t, rng)
	tests := []struct {
		name   string
		damage func(t *testing.T, st *store.Mem, res Result)
		want   error
	}{
		{"flipped byte in a pack", func(t *testing.T, st *store.Mem, res Result) {
			key := packKey(t, res.NewPacks[0])
			b, _ := st.Bytes(key)
			b = bytes.Clone(b)
			b[len(b)/2] ^= 1
			put(t, st, key, b)
		}, ErrCorrupt},
		{"missing pack", func(t *testing.T, st *store.Mem, res Result) {
			if err := st.Remove(t.Context(), packKey(t, res.NewPacks[0])); err != nil {
				t.Fatal(err)
			}
		}, ErrMissing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := store.NewMem()
			res := backup(t, st, world, "run-1", nil, false)
			m, err := Open(t.Context(), st, res.ManifestKey, res.SHA256)
			if err != nil {
				t.Fatal(err)
			}
			tt.damage(t, st, res)
			err = Rebuild(t.Context(), st, m, new(bytes.Buffer))
			if !errors.Is(err, tt.want) {
				t.Fatalf("rebuild: %v, want %v", err, tt.want)
			}
			if _, err := Verify(t.Context(), st, m, 1, 0); !errors.Is(err, tt.want) {
				t.Fatalf("verify: %v, want %v", err, tt.want)
			}
			t.Log(err)
		})
	}
	t.Run("flipped byte in the manifest", func(t *testing.T) {
		st := store.NewMem()
		res := backup(t, st, world, "run-1", nil, false)
		b, _ := st.Bytes(res.ManifestKey)
		b = bytes.Clone(b)
		b[len(b)-3] ^= 1
		put(t, st, res.ManifestKey, b)
		if _, err := Open(t.Context(), st, res.ManifestKey, res.SHA256); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("open: %v, want ErrCorrupt", err)
		}
	})
}

func packKey(t *testing.T, id ID) string {
	t.Helper()
	k, err := layoutPackKey(id)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func put(t *testing.T, st *store.Mem, key string, b []byte) {
	t.Helper()
	if _, err := st.Put(t.Context(), key, func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
		t.Fatal(err)
	}
}

// TestChunkedFullReadEvery: with FullReadEvery 3, every third run reads
// every file; the others reuse the unchanged ones.
func TestChunkedFullReadEvery(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	world := testWorld(t, rng)
	st := store.NewMem()
	var prev *Manifest
	var full []bool
	for i := range 6 {
		res, err := Write(t.Context(), st, world, Options{Server: "survival", RunID: "run-" + string(rune('a'+i)), Previous: prev, FullReadEvery: 3})
		if err != nil {
			t.Fatal(err)
		}
		full = append(full, res.FullRead)
		if res.FullRead != (res.ReusedFiles == 0) {
			t.Errorf("run %d: full read %v, but %d files reused", i, res.FullRead, res.ReusedFiles)
		}
		prev, _ = rebuild(t, st, res)
	}
	if want := []bool{true, false, false, true, false, false}; !slices.Equal(full, want) {
		t.Errorf("full reads %v, want %v", full, want)
	}
}

// failingStore refuses every Put before writing anything.
type failingStore struct{ *store.Mem }

func (failingStore) Put(ctx context.Context, key string, write func(io.Writer) error) (int64, error) {
	return 0, errors.New("disk full")
}

// TestChunkedStoreFails: a store that refuses the packs fails the run with
// its error (it used to block the run forever).
func TestChunkedStoreFails(t *testing.T) {
	world := testWorld(t, rand.New(rand.NewPCG(13, 14)))
	_, err := Write(t.Context(), failingStore{store.NewMem()}, world, Options{Server: "survival", RunID: "r"})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Write: %v, want the store's error", err)
	}
}

// TestChunkedStaleSectors: a chunk whose sectors hold stale bytes after its
// data (the game reused an older chunk's sectors) is found again when the
// game moves it to fresh sectors: its data is a blob of its own.
func TestChunkedStaleSectors(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	world := t.TempDir()
	r := newRegion(rng, 30, func(int) int { return 3000 + rng.IntN(5000) })
	b := r.bytes()
	// Stale bytes after chunk 7's data.
	at, n := r.at[7]*sectorSize, int64(len(r.chunks[7]))
	copy(b[at+n:(r.at[7]+r.sect[7])*sectorSize], randomBytes(rng, int(r.sect[7]*sectorSize-n)))
	p := filepath.Join(world, "region/r.0.0.mca")
	writeFile(t, p, b)
	st := store.NewMem()
	res1 := backup(t, st, world, "run-1", nil, false)
	m1, _ := rebuild(t, st, res1)

	// The game moves chunk 7, unchanged, to the end of the file.
	r.at[7], r.end = r.end, r.end+r.sect[7]
	r.put(7, r.chunks[7])
	writeFile(t, p, r.bytes())
	res2 := backup(t, st, world, "run-2", m1, false)
	_, got := rebuild(t, st, res2)
	if !bytes.Equal(got, plainTar(t, world)) {
		t.Fatal("second run does not rebuild to the tar stream")
	}
	// New: the header, the file's tar header and list, nothing of chunk 7.
	if bound := int64(regionHeader) + 4<<10 + res2.ManifestSize; res2.AddedBytes > bound {
		t.Errorf("moving a chunk added %d bytes (bound %d)", res2.AddedBytes, bound)
	}
}

// TestChunkedIndexBound: with the run's blob index bounded to a few
// entries, a world with repeated content still round trips; the repeats
// past the bound are stored again.
func TestChunkedIndexBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	world := testWorld(t, rng)
	same := randomBytes(rng, 5000)
	for i := range 20 {
		writeFile(t, filepath.Join(world, "copies", string(rune('a'+i))+".json"), same)
	}
	st := store.NewMem()
	res, err := Write(t.Context(), st, world, Options{Server: "survival", RunID: "r", indexMax: 4})
	if err != nil {
		t.Fatal(err)
	}
	if _, got := rebuild(t, st, res); !bytes.Equal(got, plainTar(t, world)) {
		t.Fatal("the run does not rebuild to the tar stream")
	}
	full, err := Write(t.Context(), store.NewMem(), world, Options{Server: "survival", RunID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if res.NewBlobs <= full.NewBlobs {
		t.Errorf("bounded index stored %d blobs, unbounded %d: want more (the copies again)", res.NewBlobs, full.NewBlobs)
	}
}

// TestChunkedOpenStream: a manifest opened for streaming (its records
// decoded one at a time) rebuilds the same stream as one parsed whole,
// sets its stream size at the end, and a bad record (its blobs do not add
// up to its size, in a manifest whose hash is its own) fails the rebuild
// with ErrCorrupt when the walk reaches it.
func TestChunkedOpenStream(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	world := testWorld(t, rng)
	st := store.NewMem()
	res := backup(t, st, world, "run-1", nil, false)
	_, want := rebuild(t, st, res)
	m, err := OpenStream(t.Context(), st, res.ManifestKey, res.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	if m.Segments != nil {
		t.Errorf("OpenStream decoded %d segments up front", len(m.Segments))
	}
	var got bytes.Buffer
	if err := Rebuild(t.Context(), st, m, &got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) || m.StreamSize != int64(len(want)) {
		t.Errorf("streamed rebuild: %d bytes, stream size %d; want %d", got.Len(), m.StreamSize, len(want))
	}
	if _, err := Verify(t.Context(), st, m, 1, 0); err != nil {
		t.Errorf("Verify of a streamed manifest: %v", err)
	}

	// A last record without the blobs of its byte: the head parses, the walk fails.
	whole, err := Open(t.Context(), st, res.ManifestKey, res.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	whole.Segments = append(whole.Segments, Segment{File: &FileRecord{Path: "extra", Size: 1}})
	b, err := whole.Encode()
	if err != nil {
		t.Fatal(err)
	}
	put(t, st, res.ManifestKey, b) // the run's own key: what its body says it is
	m, err = OpenStream(t.Context(), st, res.ManifestKey, Sum(b))
	if err != nil {
		t.Fatalf("OpenStream of a manifest whose records are bad: %v (the head is good)", err)
	}
	if err := Rebuild(t.Context(), st, m, io.Discard); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Rebuild of a manifest with a bad record: %v, want ErrCorrupt", err)
	}
}

func TestDeflated(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		want bool
	}{
		{"gzip", []byte{0x1f, 0x8b, 8, 0}, true},
		{"zlib default", []byte{0x78, 0x9c, 1}, true},
		{"zlib fastest", []byte{0x78, 0x01}, true},
		{"zlib best", []byte{0x78, 0xda}, true},
		{"zlib, bad check bits", []byte{0x78, 0x9d}, false},
		{"tar header text", []byte("world/region/r.0.0.mca"), false},
		{"zstd frame", []byte{0x28, 0xb5, 0x2f, 0xfd}, false},
		{"one byte", []byte{0x1f}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := deflated(tt.b); got != tt.want {
				t.Errorf("deflated(% x) = %v, want %v", tt.b, got, tt.want)
			}
		})
	}
}

// registerStore records a Put of a pack that Register was not called for
// before it: the catalog must know every pack the store holds.
type registerStore struct {
	WriteStore
	mu         sync.Mutex
	registered map[string]bool // pack key → registered
	late       []string        // packs Put before they were registered
}

func (s *registerStore) register(ctx context.Context, id ID) error {
	key, err := jobapi.PackKey(id.String())
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.registered[key] = true
	return nil
}

func (s *registerStore) Put(ctx context.Context, key string, write func(io.Writer) error) (int64, error) {
	if strings.HasPrefix(key, jobapi.PacksDir+"/") {
		s.mu.Lock()
		if !s.registered[key] {
			s.late = append(s.late, key)
		}
		s.mu.Unlock()
	}
	return s.WriteStore.Put(ctx, key, write)
}

// TestChunkedRegistersPacks: every pack is registered (Options.Register,
// the catalog's record that lets a prune remove it if no run comes to
// use it) before anything of it is written, and a registration that fails
// fails the run with its error, leaving no unregistered pack and no
// manifest in the store.
func TestChunkedRegistersPacks(t *testing.T) {
	world := testWorld(t, rand.New(rand.NewPCG(21, 22)))
	t.Run("registered first", func(t *testing.T) {
		st := &registerStore{WriteStore: store.NewMem(), registered: map[string]bool{}}
		res, err := Write(t.Context(), st, world, Options{Server: "survival", RunID: "r", Register: st.register})
		if err != nil {
			t.Fatal(err)
		}
		if len(st.late) > 0 {
			t.Errorf("packs written before they were registered: %v", st.late)
		}
		if len(res.NewPacks) == 0 || len(st.registered) != len(res.NewPacks) {
			t.Errorf("%d packs registered, %d written", len(st.registered), len(res.NewPacks))
		}
	})
	for _, failOn := range []int{1, 2} {
		t.Run(fmt.Sprintf("registration %d fails", failOn), func(t *testing.T) {
			mem := store.NewMem()
			st := &registerStore{WriteStore: mem, registered: map[string]bool{}}
			var calls atomic.Int32
			refused := errors.New("catalog refused the pack")
			register := func(ctx context.Context, id ID) error {
				if calls.Add(1) == int32(failOn) {
					return refused
				}
				return st.register(ctx, id)
			}
			_, err := Write(t.Context(), st, world, Options{Server: "survival", RunID: "r", Register: register})
			if !errors.Is(err, refused) {
				t.Fatalf("Write: %v, want the registration's error", err)
			}
			if calls.Load() < int32(failOn) {
				t.Fatalf("%d registrations, want at least %d", calls.Load(), failOn)
			}
			for _, k := range mem.Keys() {
				if strings.HasPrefix(k, jobapi.PacksDir+"/") && !st.registered[k] {
					t.Errorf("the store holds %s, which was never registered", k)
				}
				if strings.HasSuffix(k, ".manifest") {
					t.Errorf("the store holds a manifest, %s, after a failed run", k)
				}
			}
			if len(st.late) > 0 {
				t.Errorf("packs written before they were registered: %v", st.late)
			}
		})
	}
}

// TestVerifySubsetReadsMetadata: a verify of a share of the data blobs
// still reads every metadata blob (the tar headers), as its doc says: a
// damaged header would fail every restore.
func TestVerifySubsetReadsMetadata(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	st := store.NewMem()
	res := backup(t, st, testWorld(t, rng), "run-1", nil, false)
	m, err := Open(t.Context(), st, res.ManifestKey, res.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	var meta int64
	if err := m.eachSegment(func(seg Segment) error {
		if seg.Meta != nil {
			meta++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	all, err := Verify(t.Context(), st, m, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	none, err := Verify(t.Context(), st, m, 0, 0) // no data blob picked
	if err != nil {
		t.Fatal(err)
	}
	if meta == 0 || none.Blobs != meta || all.Blobs <= meta {
		t.Fatalf("a verify of no data blobs checked %d blobs, want the %d metadata blobs (all: %d)", none.Blobs, meta, all.Blobs)
	}
}
