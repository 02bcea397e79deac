package chunked

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/archiver/tarstream"
)

// region builds an Anvil region file: n chunks of distinct random data (a
// length field, a compression byte, the data) in sectors after the header,
// each chunk's last sector padded with zeros. sizes gives each chunk's data
// length.
type region struct {
	hdr    [regionHeader]byte
	chunks map[int][]byte // slot → chunk bytes (length field included)
	at     map[int]int64  // slot → first sector
	sect   map[int]int64  // slot → sector count
	end    int64          // next free sector
}

func newRegion(rng *rand.Rand, n int, size func(i int) int) *region {
	r := &region{chunks: map[int][]byte{}, at: map[int]int64{}, sect: map[int]int64{}, end: 2}
	for i := range n {
		r.put(i, randomChunk(rng, size(i)))
	}
	return r
}

func randomChunk(rng *rand.Rand, n int) []byte {
	b := make([]byte, 5+n)
	binary.BigEndian.PutUint32(b, uint32(n+1))
	b[4] = 2
	for i := 5; i < len(b); i++ {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// put writes chunk c into slot i: in place when it fits its sectors, else
// at the end of the file (as the game does).
func (r *region) put(i int, c []byte) {
	need := (int64(len(c)) + sectorSize - 1) / sectorSize
	if s, ok := r.sect[i]; !ok || need > s {
		r.at[i], r.sect[i] = r.end, need
		r.end += need
	}
	r.chunks[i] = c
	binary.BigEndian.PutUint32(r.hdr[4*i:], uint32(r.at[i])<<8|uint32(r.sect[i]))
	binary.BigEndian.PutUint32(r.hdr[sectorSize+4*i:], uint32(len(c)))
}

func (r *region) bytes() []byte {
	out := make([]byte, r.end*sectorSize)
	copy(out, r.hdr[:])
	for i, c := range r.chunks {
		copy(out[r.at[i]*sectorSize:], c)
	}
	return out
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := writeFileErr(path, b); err != nil {
		t.Fatal(err)
	}
}

func writeFileErr(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// testWorld writes a small world: region files, a region file whose table
// is garbage, a large file cut by content, small files, links.
func testWorld(t *testing.T, rng *rand.Rand) string {
	t.Helper()
	dir := t.TempDir()
	for i := range 3 {
		r := newRegion(rng, 40, func(int) int { return 1000 + rng.IntN(12000) })
		writeFile(t, filepath.Join(dir, "world/region", "r.0."+string(rune('0'+i))+".mca"), r.bytes())
	}
	garbage := randomBytes(rng, 300<<10)
	writeFile(t, filepath.Join(dir, "world/region/r.9.9.mca"), garbage)
	writeFile(t, filepath.Join(dir, "world/region/r.8.8.mca"), randomBytes(rng, 100)) // shorter than a header
	writeFile(t, filepath.Join(dir, "world/data/big.dat"), randomBytes(rng, 3<<20))
	writeFile(t, filepath.Join(dir, "world/level.dat"), randomBytes(rng, 2000))
	writeFile(t, filepath.Join(dir, "world/empty"), nil)
	for i := range 20 {
		writeFile(t, filepath.Join(dir, "world/playerdata", string(rune('a'+i))+".dat"), randomBytes(rng, 500+rng.IntN(4000)))
	}
	if err := os.Symlink("level.dat", filepath.Join(dir, "world/link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "world/level.dat"), filepath.Join(dir, "world/hard.dat")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "world/emptydir"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// plainTar returns the uncompressed tar stream the "tar" format writes of
// root.
func plainTar(t *testing.T, root string) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := tarstream.Write(t.Context(), &b, root, tarstream.Options{Compression: tarstream.None}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// backup writes root as run id of server "survival".
func backup(t *testing.T, st WriteStore, root, id string, prev *Manifest, full bool) Result {
	t.Helper()
	res, err := Write(t.Context(), st, root, Options{Server: "survival", RunID: id, Previous: prev, FullRead: full})
	if err != nil {
		t.Fatalf("backup %s: %v", id, err)
	}
	return res
}

func rebuild(t *testing.T, st Store, res Result) (*Manifest, []byte) {
	t.Helper()
	m, err := Open(t.Context(), st, res.ManifestKey, res.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Rebuild(t.Context(), st, m, &b); err != nil {
		t.Fatal(err)
	}
	return m, b.Bytes()
}

var _ WriteStore = (*store.Mem)(nil)
var _ WriteStore = (*store.Local)(nil)

// countingStore counts the bytes read through Open.
type countingStore struct {
	WriteStore
	read int64
}

func (c *countingStore) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := c.WriteStore.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	return &countingReader{rc, &c.read}, nil
}

type countingReader struct {
	io.ReadCloser
	n *int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	*c.n += int64(n)
	return n, err
}
