package tarstream

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/worldbackup/worldbackup/archiver/store"
)

// TestStage: what is written to a stage, copied or filled in place through
// Space(), reaches consume whole and in order, in aligned buffers.
func TestStage(t *testing.T) {
	const size = 64 << 10
	tests := []struct {
		name    string
		inPlace bool
	}{
		{name: "copied", inPlace: false},
		{name: "in place", inPlace: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Two steps, like the hash and the write: each sees every
			// byte, in order.
			var got, got2 []byte
			unaligned := 0
			s := newStage(size, true, func(b []byte) error {
				if uintptr(unsafe.Pointer(&b[0]))%store.DirectAlign != 0 {
					unaligned++
				}
				got = append(got, b...)
				return nil
			}, func(b []byte) error {
				got2 = append(got2, b...)
				return nil
			})
			rng := rand.New(rand.NewPCG(1, 2))
			var want []byte
			for range 500 {
				n := rng.IntN(3 * size / 2)
				p := make([]byte, n)
				for i := range p {
					p[i] = byte(rng.Uint32())
				}
				if tt.inPlace && n > 0 {
					// As the walker does: read into Space(), write what was read.
					sp := s.Space()
					p = p[:min(n, len(sp))]
					copy(sp, p)
					p = sp[:len(p)]
				}
				want = append(want, p...)
				if n, err := s.Write(p); err != nil || n != len(p) {
					t.Fatalf("Write: %d, %v; want %d, nil", n, err, len(p))
				}
			}
			if err := s.close(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("the first step saw %d bytes that differ from the %d written", len(got), len(want))
			}
			if !bytes.Equal(got2, want) {
				t.Errorf("the second step saw %d bytes that differ from the %d written", len(got2), len(want))
			}
			if unaligned > 0 {
				t.Errorf("%d buffers were not aligned to %d bytes", unaligned, store.DirectAlign)
			}
		})
	}
}

// TestStageFails: after a step fails, Write returns its error (never
// blocks), close returns it too, and no step sees another buffer.
func TestStageFails(t *testing.T) {
	boom := errors.New("boom")
	var calls, later atomic.Int32
	s := newStage(4096, false, func([]byte) error {
		calls.Add(1)
		return boom
	}, func([]byte) error {
		later.Add(1)
		return nil
	})
	var err error
	for range 1000 {
		if _, err = s.Write(make([]byte, 1000)); err != nil {
			break
		}
	}
	if !errors.Is(err, boom) {
		t.Errorf("Write after a failed consume: %v, want %v", err, boom)
	}
	if err := s.close(); !errors.Is(err, boom) {
		t.Errorf("close: %v, want %v", err, boom)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the failing step ran %d times, want once (nothing after it failed)", n)
	}
	if n := later.Load(); n != 0 {
		t.Errorf("the step after the failing one ran %d times, want none", n)
	}
}
