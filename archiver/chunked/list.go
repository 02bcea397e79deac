package chunked

import (
	"bytes"
	"fmt"
)

// listMagic starts a list blob.
const listMagic = "WBL1"

// list is a list blob: a run of a file's data blobs, in order, with the
// pack table its refs index. It names packs by ID, not by a manifest's
// table, so an unchanged file's list blob is the same blob in every run.
type list struct {
	Packs []ID
	Refs  []Ref
}

func (l *list) encode() []byte {
	e := encoder{b: []byte(listMagic)}
	e.uvarint(uint64(len(l.Packs)))
	for _, p := range l.Packs {
		e.id(p)
	}
	e.uvarint(uint64(len(l.Refs)))
	for _, r := range l.Refs {
		e.ref(r)
	}
	return e.b
}

// decodeList parses a list blob of a run in the clear.
func decodeList(b []byte) (*list, error) { return decodeListCipher(b, cipherNone) }

// decodeListCipher parses a list blob of a run whose blobs have the
// cipher nibble c.
func decodeListCipher(b []byte, c byte) (*list, error) {
	if len(b) < 4 || string(b[:4]) != listMagic {
		return nil, fmt.Errorf("%w: not a list blob", ErrCorrupt)
	}
	r := bytes.NewReader(b[4:])
	d := newDecoder(r)
	d.cipher = c
	l := &list{}
	np := d.uvarint("list pack count", maxListEntries)
	for i := uint64(0); i < np && d.err == nil; i++ {
		l.Packs = append(l.Packs, d.id("pack ID"))
	}
	nr := d.uvarint("list entry count", maxListEntries)
	for i := uint64(0); i < nr && d.err == nil; i++ {
		l.Refs = append(l.Refs, d.ref(len(l.Packs)))
	}
	if d.err == nil && r.Len() != 0 {
		d.fail("%d bytes after the end of a list blob", r.Len())
	}
	if d.err != nil {
		return nil, d.err
	}
	return l, nil
}
