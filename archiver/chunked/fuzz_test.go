package chunked

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/worldbackup/worldbackup/archiver/store"
)

// seedRun writes a small run and returns its manifest and pack bytes.
func seedRun(f *testing.F) (manifest []byte, packs [][]byte) {
	dir := f.TempDir()
	rng := rand.New(rand.NewPCG(9, 9))
	r := newRegion(rng, 4, func(int) int { return 3000 })
	writeFileF(f, dir+"/r.0.0.mca", r.bytes())
	writeFileF(f, dir+"/a.dat", randomBytes(rng, 100))
	st := store.NewMem()
	res, err := Write(f.Context(), st, dir, Options{Server: "s", RunID: "r"})
	if err != nil {
		f.Fatal(err)
	}
	manifest, _ = st.Bytes(res.ManifestKey)
	for _, id := range res.NewPacks {
		k, _ := layoutPackKey(id)
		b, _ := st.Bytes(k)
		packs = append(packs, b)
	}
	return manifest, packs
}

// FuzzManifest: any bytes either fail to parse with ErrCorrupt or parse to
// a manifest that encodes and parses to itself; nothing panics or
// allocates without bound.
func FuzzManifest(f *testing.F) {
	m, _ := seedRun(f)
	f.Add(m)
	f.Add([]byte("WBCM\x01\x00\x01\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeManifest(b)
		// The streaming walk (OpenStream's) decodes the same segments, or
		// fails where the whole parse fails.
		var streamed []Segment
		serr := (&Manifest{body: b}).eachSegment(func(s Segment) error { streamed = append(streamed, s); return nil })
		if (err == nil) != (serr == nil) {
			t.Fatalf("whole parse: %v; streamed: %v", err, serr)
		}
		if err != nil {
			return
		}
		if !reflect.DeepEqual(m.Segments, streamed) {
			t.Fatal("the streamed segments differ from the whole parse's")
		}
		again, err := m.Encode()
		if err != nil {
			t.Fatalf("a parsed manifest does not encode: %v", err)
		}
		m2, err := DecodeManifest(again)
		if err != nil {
			t.Fatalf("an encoded manifest does not parse: %v", err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatal("manifest changed through encode and parse")
		}
		// What parses must not crash a reader of the run: its packs are
		// missing here, so Verify fails, but with an error.
		if _, err := Verify(t.Context(), store.NewMem(), m, 1, 0); err == nil && len(m.Packs) > 0 {
			t.Fatal("Verify of a run whose packs are missing passed")
		}
	})
}

// TestListBlobIsNeverAZeroRun: a manifest whose file lists a zero run as
// its list blob (which names no pack, so the pack table may be empty) is
// refused as corrupt; a reader once indexed the empty table with it.
func TestListBlobIsNeverAZeroRun(t *testing.T) {
	m := &Manifest{Server: "s", RunID: "r", Segments: []Segment{{File: &FileRecord{Path: "a.dat", Size: 10,
		Lists: []Ref{{Raw: 10, Flags: compZero}}}}}}
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeManifest(b); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "is a zero run") {
		t.Fatalf("DecodeManifest = %v, want ErrCorrupt saying the list blob is a zero run", err)
	}
}

// FuzzPackIndex: any bytes either fail with ErrCorrupt or give entries that
// lie inside the pack.
func FuzzPackIndex(f *testing.F) {
	_, packs := seedRun(f)
	for _, p := range packs {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := ParsePackIndex(b)
		if err != nil {
			return
		}
		for _, e := range entries {
			if int(e.Offset)+int(e.Stored) > len(b) {
				t.Fatalf("entry %v outside a pack of %d bytes", e, len(b))
			}
		}
	})
}

// FuzzList: list blobs parse or fail, and round trip.
func FuzzList(f *testing.F) {
	l := &list{Packs: []ID{{1}}, Refs: []Ref{{ID: ID{2}, Offset: 8, Stored: 10, Raw: 10}}}
	f.Add(l.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := decodeList(b)
		if err != nil {
			return
		}
		l2, err := decodeList(l.encode())
		if err != nil || !reflect.DeepEqual(l, l2) {
			t.Fatalf("list changed through encode and parse: %v", err)
		}
	})
}

// FuzzRegionCuts: any header and size give sorted cut points inside the
// file, or a refusal; never a panic.
func FuzzRegionCuts(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 1))
	r := newRegion(rng, 10, func(int) int { return 5000 })
	b := r.bytes()
	f.Add(b[:regionHeader], int64(len(b)))
	f.Fuzz(func(t *testing.T, hdr []byte, size int64) {
		cuts, _, ok := regionCuts(hdr, size)
		if !ok {
			return
		}
		prev := int64(0)
		for _, c := range cuts {
			if c <= prev || c > size {
				t.Fatalf("cut %d after %d in a file of %d bytes", c, prev, size)
			}
			prev = c
		}
		if prev != size {
			t.Fatalf("last cut %d, want the size %d", prev, size)
		}
	})
}

func writeFileF(f *testing.F, path string, b []byte) {
	f.Helper()
	if err := writeFileErr(path, b); err != nil {
		f.Fatal(err)
	}
}
