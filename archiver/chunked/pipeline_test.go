package chunked

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/worldbackup/worldbackup/archiver/store"
)

// TestChunkedStreamOrder: the blobs are decoded and hashed on several
// goroutines, yet Rebuild writes them in stream order, and a damaged blob
// anywhere (the first, one in the middle, the last) stops it exactly
// where that blob begins: every byte before it written, none of it or
// after it.
func TestChunkedStreamOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	world := testWorld(t, rng)
	st := store.NewMem()
	res := backup(t, st, world, "run-1", nil, false)
	m, intact := rebuild(t, st, res)
	if !bytes.Equal(intact, plainTar(t, world)) {
		t.Fatal("the rebuilt stream is not the tar format's stream")
	}

	// Every stored blob at its first use, with its offset in the stream.
	type at struct {
		pack ID
		ref  Ref
		off  int64
	}
	var blobs []at
	seen := map[ID]bool{}
	var off int64
	rd := newReader(st)
	defer rd.close()
	if err := walk(t.Context(), rd, m, func(_ string, pack ID, r Ref) error {
		if r.Flags&compMask != compZero && !seen[r.ID] {
			seen[r.ID] = true
			blobs = append(blobs, at{pack, r, off})
		}
		off += int64(r.Raw)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if off != int64(len(intact)) {
		t.Fatalf("the blobs hold %d bytes, the stream %d", off, len(intact))
	}
	if len(blobs) < 8*maxWorkers {
		t.Fatalf("%d blobs: too few to keep the workers busy", len(blobs))
	}

	for _, i := range []int{0, len(blobs) / 2, len(blobs) - 1} {
		b := blobs[i]
		t.Run(fmt.Sprintf("damaged blob %d of %d", i, len(blobs)), func(t *testing.T) {
			key := packKey(t, b.pack)
			orig, _ := st.Bytes(key)
			orig = bytes.Clone(orig)
			damaged := bytes.Clone(orig)
			damaged[int(b.ref.Offset)+int(b.ref.Stored)/2] ^= 0x10
			put(t, st, key, damaged)
			defer put(t, st, key, orig)

			var out bytes.Buffer
			err := Rebuild(t.Context(), st, m, &out)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("rebuild: %v, want ErrCorrupt", err)
			}
			if out.Len() != int(b.off) || !bytes.Equal(out.Bytes(), intact[:b.off]) {
				t.Fatalf("rebuild wrote %d bytes (a prefix of the stream: %v), want the %d before the damaged blob",
					out.Len(), bytes.HasPrefix(intact, out.Bytes()), b.off)
			}
			if _, err := Verify(t.Context(), st, m, 1, 0); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("verify: %v, want ErrCorrupt", err)
			}
		})
	}
}
