package chunked

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/klauspost/compress/zstd"
	"github.com/restic/chunker"

	"github.com/worldbackup/worldbackup/archiver/crashguard"
	"github.com/worldbackup/worldbackup/archiver/tarstream"
	"github.com/worldbackup/worldbackup/jobapi"
)

// WriteStore is the store a run is written to: Remove takes back the packs
// of a run that failed.
type WriteStore interface {
	Store
	Remove(ctx context.Context, key string) error
}

// Options configure one run.
type Options struct {
	Server string
	RunID  string
	// Previous is the server's previous chunked run (see Open), or nil:
	// its unchanged files are not read again, and the blobs of its files
	// are reused.
	Previous *Manifest
	// FullRead reads every file, even those Previous holds unchanged.
	FullRead bool
	// FullReadEvery > 0 makes every FullReadEvery-th run a full read,
	// counted through the manifests' SinceFullRead.
	FullReadEvery int
	// Tar configures the walk (excludes, avoided folders, log, progress);
	// its Compression is ignored.
	Tar tarstream.Options
	// Register, when set, is called with each pack's ID before the pack is
	// written (the catalog's record of it, see catalog.RegisterPack).
	Register func(ctx context.Context, id ID) error
	// Log receives the run's debug lines; nil discards them.
	Log hclog.Logger
	// Now stamps the manifest; nil is time.Now.
	Now func() time.Time
	// Sealer, when set, encrypts the run (its blobs, their names, its
	// manifest) with the server's data key. A Previous sealed otherwise
	// (in the clear, or with another key) is not reused: every file is
	// read and stored again.
	Sealer *Sealer

	indexMax int // test seam: the bound of the run's own blob index
}

// IndexMax bounds the run's index of the blobs it stored (about 80 bytes
// each): when full it starts over, so memory stays flat however large the
// world. A blob met again after that is stored again, which is rare (the
// previous run's blobs are looked up per file, and zeros are never stored).
const IndexMax = 1 << 17

// Result describes a written run.
type Result struct {
	tarstream.Result // Size is the tar stream's length; SHA256 is the manifest's
	ManifestKey      string
	ManifestSize     int64
	// AddedBytes is what the run added to the store: its new packs and its
	// manifest.
	AddedBytes int64
	// Packs are every pack the run's blobs are in; NewPacks those it wrote.
	Packs    []ID
	NewPacks []ID
	// ReusedFiles counts the files not read again; NewBlobs the blobs the
	// run stored.
	ReusedFiles int64
	NewBlobs    int64
	// FullRead is true when the run read every file.
	FullRead bool
}

// Write stores the world folder root as the chunked run o.RunID of
// o.Server: the tar stream tarstream.WriteTar makes of it, cut into blobs,
// the new ones written to packs, then the manifest. On error, the packs the
// run wrote are removed and no manifest is written.
func Write(ctx context.Context, st WriteStore, root string, o Options) (Result, error) {
	key, err := jobapi.ManifestKey(o.Server, o.RunID)
	if err != nil {
		return Result{}, err
	}
	if o.Log == nil {
		o.Log = hclog.NewNullLogger()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
		zstd.WithLowerEncoderMem(true))
	if err != nil {
		return Result{}, err
	}
	defer enc.Close()
	if p := o.Previous; p != nil && !sameKey(p.sl, o.Sealer) {
		o.Log.Info("the previous chunked run is sealed with another key (or encryption was turned on or off): every file is read and stored again")
		o.Previous = nil
	}
	pol, err := o.Sealer.chunkerPol()
	if err != nil {
		return Result{}, err
	}
	rd := newReader(st)
	rd.sl = o.Sealer
	defer rd.close()
	header := packHeader
	if o.Sealer != nil {
		header = sealedPackHeader
	}
	pool := newPackPool()
	s := &sink{
		newPack: func() (*packWriter, error) {
			id, err := newPackID()
			if err != nil {
				return nil, err
			}
			if o.Register != nil {
				if err := o.Register(ctx, id); err != nil {
					return nil, err
				}
			}
			return newPackWriterHeader(ctx, st, id, header, pool, o.Sealer)
		},
		loadList: func(l Ref, packs []ID) (*list, error) {
			return rd.list(ctx, packs[l.Pack], l)
		},
		enc:      enc,
		packIdx:  make(map[ID]uint32),
		index:    make(map[ID]loc),
		prevIdx:  make(map[ID]prevLoc),
		fullRead: o.FullRead,
		indexMax: cmp.Or(o.indexMax, IndexMax),
		log:      o.Log,
		sl:       o.Sealer,
		pol:      pol,
		chunk:    chunker.NewWithBoundaries(nil, pol, cdcMin, cdcMax),
	}
	if p := o.Previous; p != nil && o.FullReadEvery > 0 && p.SinceFullRead+1 >= uint64(o.FullReadEvery) {
		s.fullRead = true
	}
	if p := o.Previous; p != nil {
		s.prev = p
		s.prevFiles = make(map[string]*FileRecord)
		for _, seg := range p.Segments {
			if seg.File != nil {
				s.prevFiles[seg.File.Path] = seg.File
			}
		}
		s.prevMeta = make(map[ID]Ref)
		for _, seg := range p.Segments {
			if r := seg.Meta; r != nil && r.Flags&compMask != compZero {
				s.prevMeta[r.ID] = *r
			}
		}
	}
	res, err := s.run(ctx, st, root, key, o)
	if err != nil {
		s.abort(ctx, st)
		return Result{}, err
	}
	return res, nil
}

// loc is where a blob is: a pack of the run's pack table, and the rest of
// its Ref.
type loc struct {
	pack                uint32
	offset, stored, raw uint32
	flags               byte
}

func (l loc) ref(id ID) Ref {
	return Ref{ID: id, Pack: l.pack, Offset: l.offset, Stored: l.stored, Raw: l.raw, Flags: l.flags}
}

// prevLoc is where a blob of the previous run is (pack by ID: it joins the
// run's pack table only when the blob is used).
type prevLoc struct {
	pack ID
	l    loc
}

// sink is the tarstream.Sink of one run.
type sink struct {
	newPack  func() (*packWriter, error)
	loadList func(l Ref, packs []ID) (*list, error)
	enc      *zstd.Encoder
	pol      chunker.Pol // the content-defined cuts' (Sealer.chunkerPol)
	chunk    *chunker.Chunker
	log      hclog.Logger
	fullRead bool
	indexMax int
	sl       *Sealer // nil: blobs in the clear

	prev      *Manifest
	prevFiles map[string]*FileRecord

	packs   []ID          // the run's pack table
	packIdx map[ID]uint32 // its inverse
	// index holds the blobs the run stored; prevIdx those of the previous
	// run's version of the file being cut.
	index   map[ID]loc
	prevIdx map[ID]prevLoc
	// prevMeta holds the previous run's metadata blobs (its pack table).
	prevMeta map[ID]Ref

	data, lists *packWriter   // the open packs
	committing  []*packWriter // closed packs still being written, oldest first
	newPacks    []ID          // committed packs
	added       int64         // bytes of committed new packs
	newBlobs    int64
	reused      int64

	meta     []byte
	scratch  []byte // a blob's stored bytes on their way into a pack
	segments []Segment
	cur      *fileCut
}

// fileCut is the state of the file whose data is being received.
type fileCut struct {
	rec   *FileRecord
	reuse bool
	got   int64 // data bytes received
	refs  []Ref // data blobs so far (run pack table)
	buf   []byte
	err   error

	// region mode
	region   bool
	cuts     []int64
	starts   map[int64]bool
	segStart int64 // file offset of buf[0]
	segEnd   int64

	// content-defined mode
	pw     *io.PipeWriter
	done   chan struct{} // closed when the chunking goroutine returned
	cdcErr error         // its error, once done is closed
}

// wait waits for the chunking goroutine and returns its error.
func (c *fileCut) wait() error {
	<-c.done
	return c.cdcErr
}

func (s *sink) run(ctx context.Context, st WriteStore, root, key string, o Options) (Result, error) {
	a := newAsyncSink(s)
	tr, err := tarstream.WriteTar(ctx, a, root, o.Tar)
	if serr := a.finish(); serr != nil {
		err = serr // the sink's failure, not its echo in the walk
	}
	if err != nil {
		return Result{}, err
	}
	if err := s.flushMeta(); err != nil {
		return Result{}, err
	}
	for _, p := range []**packWriter{&s.data, &s.lists} {
		if err := s.closePack(p); err != nil {
			return Result{}, err
		}
	}
	if err := s.settle(); err != nil {
		return Result{}, err
	}
	m := &Manifest{Server: o.Server, RunID: o.RunID, Created: o.Now().UnixNano(), Packs: s.packs,
		Segments: s.segments, StreamSize: tr.Size}
	if !s.fullRead && s.prev != nil {
		m.SinceFullRead = s.prev.SinceFullRead + 1
	}
	b, err := m.EncodeSealed(s.sl)
	if err != nil {
		return Result{}, err
	}
	size, err := st.Put(ctx, key, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
	if err != nil {
		return Result{}, fmt.Errorf("writing manifest %s: %w", key, err)
	}
	tr.SHA256 = Sum(b)
	return Result{
		Result: tr, ManifestKey: key, ManifestSize: size, AddedBytes: s.added + size,
		Packs: s.packs, NewPacks: s.newPacks, ReusedFiles: s.reused, NewBlobs: s.newBlobs,
		FullRead: s.fullRead || s.prev == nil,
	}, nil
}

// abort gives up the open packs and removes the committed ones.
func (s *sink) abort(ctx context.Context, st WriteStore) {
	if s.cur != nil && s.cur.pw != nil {
		s.cur.pw.CloseWithError(errPackAborted)
		_ = s.cur.wait()
	}
	for _, p := range []*packWriter{s.data, s.lists} {
		if p != nil {
			p.abort()
		}
	}
	_ = s.settle() // a pack committed meanwhile is in newPacks: removed below
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, id := range s.newPacks {
		key, _ := jobapi.PackKey(id.String())
		if err := st.Remove(ctx, key); err != nil {
			s.log.Warn("could not remove a pack of the failed run; a later prune collects it", "pack", key, "error", err)
		}
	}
}

// closePack commits the open pack *p in the background: the run goes on
// while the store flushes and syncs it. At most maxCommitting packs are
// committing at once; settle waits for the rest before the manifest, which
// names them, is written.
func (s *sink) closePack(p **packWriter) error {
	if *p == nil {
		return nil
	}
	pw := *p
	*p = nil
	pw.commit()
	s.committing = append(s.committing, pw)
	if len(s.committing) > maxCommitting {
		return s.settleOne()
	}
	return nil
}

// maxCommitting is how many packs may be committing while the run goes on.
const maxCommitting = 2

// settleOne waits for the oldest committing pack.
func (s *sink) settleOne() error {
	pw := s.committing[0]
	s.committing = s.committing[1:]
	size, err := pw.wait()
	if err != nil {
		return fmt.Errorf("writing pack %s: %w", pw.key, err)
	}
	s.newPacks = append(s.newPacks, pw.id)
	s.added += size
	return nil
}

// settle waits for every committing pack; it returns the first error.
func (s *sink) settle() error {
	var first error
	for len(s.committing) > 0 {
		if err := s.settleOne(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (s *sink) packIndex(id ID) uint32 {
	if i, ok := s.packIdx[id]; ok {
		return i
	}
	i := uint32(len(s.packs))
	s.packs = append(s.packs, id)
	s.packIdx[id] = i
	return i
}

// store returns the Ref of the blob raw, writing it to a pack unless the
// run or the previous version of the file has it.
func (s *sink) store(typ byte, raw []byte) (Ref, error) {
	return s.storeHint(typ, raw, true)
}

// storeHint is store; try false skips trying zstd on data known to be
// compressed already (a chunk the game compressed with zlib, gzip or LZ4).
func (s *sink) storeHint(typ byte, raw []byte, try bool) (Ref, error) {
	if typ == typeData && allZero(raw) {
		// Zeros (a chunk's unused sector tail, free sectors) are not
		// stored: a zero run says how many.
		return Ref{Raw: uint32(len(raw)), Flags: compZero}, nil
	}
	id := s.sl.blobID(raw)
	if l, ok := s.index[id]; ok {
		return l.ref(id), nil
	}
	if p, ok := s.prevIdx[id]; ok {
		p.l.pack = s.packIndex(p.pack)
		return p.l.ref(id), nil
	}
	if r, ok := s.prevMeta[id]; ok && typ == typeData {
		r.Pack = s.packIndex(s.prev.Packs[r.Pack])
		return r, nil
	}
	flags, stored := byte(compNone), []byte(nil)
	ov := s.sl.overhead()
	// The pack copies what it is given, so one scratch buffer serves every
	// blob.
	if try && len(raw) >= 64 && !deflated(raw) {
		c := s.enc.EncodeAll(raw, s.scratch[:0])
		if len(c) < len(raw)-len(raw)/32 {
			flags, stored = compZstd, c
		}
		s.scratch = c[:0]
	}
	if stored == nil {
		stored = raw // sealed (if it is) by the pack, on its own goroutine
	}
	p := &s.data
	if typ == typeList {
		p = &s.lists
	}
	if *p != nil && (*p).size+int64(len(stored)+ov) > PackTarget {
		if err := s.closePack(p); err != nil {
			return Ref{}, err
		}
	}
	if *p == nil {
		pw, err := s.newPack()
		if err != nil {
			return Ref{}, err
		}
		*p = pw
	}
	var off uint32
	if s.sl != nil {
		// Sealed for its place: the pack's key, its offset the nonce.
		flags |= s.sl.cipherFlag()
		off = (*p).addSealed(s.sl, id, typ, flags, stored, len(raw))
	} else {
		off = (*p).add(id, typ, flags, stored, len(raw))
	}
	l := loc{pack: s.packIndex((*p).id), offset: off, stored: uint32(len(stored) + ov), raw: uint32(len(raw)), flags: flags}
	if len(s.index) >= s.indexMax {
		clear(s.index)
	}
	s.index[id] = l
	s.newBlobs++
	return l.ref(id), nil
}

// Write receives the tar stream: metadata outside a file, else its data.
func (s *sink) Write(p []byte) (int, error) {
	if s.cur == nil {
		return len(p), s.addMeta(p)
	}
	c := s.cur
	if err := s.skip(int64(len(p))); err != nil {
		return 0, err
	}
	if c.reuse {
		return len(p), nil
	}
	if c.err != nil {
		return 0, c.err
	}
	var err error
	switch {
	case c.pw != nil:
		if _, err = c.pw.Write(p); err != nil {
			err = c.wait()
		}
	case c.region:
		err = s.regionWrite(c, p)
	default:
		c.buf = append(c.buf, p...)
	}
	if err != nil {
		c.err = err
		return 0, err
	}
	return len(p), nil
}

func (s *sink) addMeta(p []byte) error {
	for len(p) > 0 {
		n := min(len(p), MaxBlob-len(s.meta))
		s.meta = append(s.meta, p[:n]...)
		p = p[n:]
		if len(s.meta) == MaxBlob {
			if err := s.flushMeta(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *sink) flushMeta() error {
	if len(s.meta) == 0 {
		return nil
	}
	r, err := s.store(typeData, s.meta)
	if err != nil {
		return err
	}
	s.meta = s.meta[:0]
	s.segments = append(s.segments, Segment{Meta: &r})
	return nil
}

// Reusable reports whether the previous run holds f unchanged.
func (s *sink) Reusable(f tarstream.File) bool {
	if s.fullRead || s.prevFiles == nil {
		return false
	}
	p, ok := s.prevFiles[f.Path]
	return ok && p.Reusable && p.Size == f.Size && p.MtimeNs == f.MtimeNs && p.CtimeNs == f.CtimeNs && p.Inode == f.Inode
}

// skip counts n bytes of the current file's data: all there is to do with
// the zeros standing in for a reused file's data.
func (s *sink) skip(n int64) error {
	c := s.cur
	if c.got+n > c.rec.Size {
		return fmt.Errorf("tar stream: %q has more data than its size %d", c.rec.Path, c.rec.Size)
	}
	c.got += n
	return nil
}

// BeginFile starts receiving f's data.
func (s *sink) BeginFile(f tarstream.File, reuse bool) error {
	if err := s.flushMeta(); err != nil {
		return err
	}
	c := &fileCut{rec: &FileRecord{Path: f.Path, Size: f.Size, MtimeNs: f.MtimeNs, CtimeNs: f.CtimeNs, Inode: f.Inode, Reusable: true}, reuse: reuse}
	s.cur = c
	if reuse {
		return nil
	}
	// The blobs of the previous version of the file: a chunk the game
	// moved, or the unchanged part of a file that changed, is found there.
	clear(s.prevIdx)
	if p := s.prevFiles[f.Path]; p != nil {
		if err := s.loadPrev(p); err != nil {
			s.log.Warn("previous version of a file unreadable; it is stored again", "path", f.Path, "error", err)
			clear(s.prevIdx)
		}
	}
	switch {
	case isRegion(f.Path) && f.Size >= regionHeader:
		c.region = true
		c.segEnd = regionHeader
	case f.Size > cdcMin:
		s.startCDC(c)
	}
	return nil
}

// loadPrev reads the list blobs of the previous run's record p into prevIdx.
func (s *sink) loadPrev(p *FileRecord) error {
	for _, lr := range p.Lists {
		l, err := s.loadList(lr, s.prev.Packs)
		if err != nil {
			return err
		}
		s.prevIdx[lr.ID] = prevLoc{s.prev.Packs[lr.Pack], loc{offset: lr.Offset, stored: lr.Stored, raw: lr.Raw, flags: lr.Flags}}
		for _, r := range l.Refs {
			if r.Flags&compMask == compZero {
				continue
			}
			s.prevIdx[r.ID] = prevLoc{l.Packs[r.Pack], loc{offset: r.Offset, stored: r.Stored, raw: r.Raw, flags: r.Flags}}
		}
	}
	return nil
}

// EndFile finishes the file: its blobs, its list blobs, its record.
func (s *sink) EndFile(intact bool) error {
	c := s.cur
	s.cur = nil
	if c.got != c.rec.Size {
		return fmt.Errorf("tar stream: %q has %d bytes of data, not its size %d", c.rec.Path, c.got, c.rec.Size)
	}
	if c.reuse {
		return s.reuseFile(c.rec)
	}
	if c.err != nil {
		return c.err
	}
	switch {
	case c.pw != nil:
		c.pw.Close()
		if err := c.wait(); err != nil {
			return err
		}
	case c.region:
		if err := s.regionWrite(c, nil); err != nil {
			return err
		}
	case len(c.buf) > 0:
		if err := s.dataBlob(c, c.buf); err != nil {
			return err
		}
	}
	c.rec.Reusable = intact
	return s.finishFile(c)
}

func (s *sink) dataBlob(c *fileCut, raw []byte) error {
	return s.dataBlobHint(c, raw, true)
}

func (s *sink) dataBlobHint(c *fileCut, raw []byte, try bool) error {
	r, err := s.storeHint(typeData, raw, try)
	if err != nil {
		return err
	}
	c.refs = append(c.refs, r)
	return nil
}

// finishFile writes the list blobs of c and appends its record.
func (s *sink) finishFile(c *fileCut) error {
	data := make(map[uint32]bool)
	for refs := c.refs; len(refs) > 0; {
		n := min(len(refs), maxListEntries)
		l := &list{}
		local := make(map[uint32]uint32)
		for _, r := range refs[:n] {
			if r.Flags&compMask == compZero {
				l.Refs = append(l.Refs, r)
				continue
			}
			data[r.Pack] = true
			i, ok := local[r.Pack]
			if !ok {
				i = uint32(len(l.Packs))
				local[r.Pack] = i
				l.Packs = append(l.Packs, s.packs[r.Pack])
			}
			r.Pack = i
			l.Refs = append(l.Refs, r)
		}
		lr, err := s.store(typeList, l.encode())
		if err != nil {
			return err
		}
		c.rec.Lists = append(c.rec.Lists, lr)
		refs = refs[n:]
	}
	for p := range data {
		c.rec.DataPacks = append(c.rec.DataPacks, p)
	}
	slices.Sort(c.rec.DataPacks)
	s.segments = append(s.segments, Segment{File: c.rec})
	return nil
}

// reuseFile appends the previous run's record of rec's path, its pack
// indexes moved to this run's table.
func (s *sink) reuseFile(rec *FileRecord) error {
	p := s.prevFiles[rec.Path]
	if p == nil {
		return errors.New("chunked: reused file without a previous record")
	}
	for _, lr := range p.Lists {
		lr.Pack = s.packIndex(s.prev.Packs[lr.Pack])
		rec.Lists = append(rec.Lists, lr)
	}
	for _, d := range p.DataPacks {
		rec.DataPacks = append(rec.DataPacks, s.packIndex(s.prev.Packs[d]))
	}
	slices.Sort(rec.DataPacks)
	s.reused++
	s.segments = append(s.segments, Segment{File: rec})
	return nil
}

// regionWrite cuts region file data at the location table; p == nil ends
// the file.
func (s *sink) regionWrite(c *fileCut, p []byte) error {
	if p == nil {
		if c.cuts == nil { // the header never completed: cannot happen for size >= header
			return s.dataBlob(c, c.buf)
		}
		if len(c.buf) > 0 {
			return s.dataBlob(c, c.buf)
		}
		return nil
	}
	for len(p) > 0 {
		want := c.segEnd - c.segStart - int64(len(c.buf))
		if c.cuts != nil && len(c.buf) == 0 && int64(len(p)) >= want {
			// The whole part is in p: stored from there, not copied into
			// buf first (storeHint copies what it keeps).
			if err := s.regionBlob(c, p[:want]); err != nil {
				return err
			}
			p = p[want:]
			c.segStart = c.segEnd
			c.segEnd = nextCut(c.cuts, c.segStart)
			continue
		}
		n := min(int64(len(p)), want)
		c.buf = append(c.buf, p[:n]...)
		p = p[n:]
		if int64(len(c.buf)) < c.segEnd-c.segStart {
			continue
		}
		if c.cuts == nil {
			cuts, starts, ok := regionCuts(c.buf, c.rec.Size)
			if !ok {
				// Not a table the game writes: cut it like any file.
				s.log.Debug("region file with an unusual location table; cut by content", "path", c.rec.Path)
				hdr := c.buf
				c.buf, c.region = nil, false
				s.startCDC(c)
				if _, err := c.pw.Write(hdr); err != nil {
					return c.wait()
				}
				if len(p) > 0 {
					if _, err := c.pw.Write(p); err != nil {
						return c.wait()
					}
				}
				return nil
			}
			c.cuts, c.starts = cuts, starts
		}
		if err := s.regionBlob(c, c.buf); err != nil {
			return err
		}
		c.buf = c.buf[:0]
		c.segStart = c.segEnd
		c.segEnd = nextCut(c.cuts, c.segStart)
	}
	return nil
}

// regionBlob stores b, a part of a region file between two cuts. In a
// chunk's sectors, its data (its length field says where it ends) is one
// blob, found again wherever the game moves the chunk, and the rest of the
// sectors (zeros, or stale bytes of an older chunk) another.
func (s *sink) regionBlob(c *fileCut, b []byte) error {
	if c.starts[c.segStart] && len(b) > 5 {
		l := int64(binary.BigEndian.Uint32(b))
		if body := 4 + l; l > 0 && body < int64(len(b)) {
			// The game's zlib, gzip or LZ4 data cannot shrink: zstd is not tried.
			if err := s.dataBlobHint(c, b[:body], !gameCompressed(b[4])); err != nil {
				return err
			}
			return s.dataBlob(c, b[body:])
		}
	}
	return s.dataBlob(c, b)
}

// gameCompressed reports whether a chunk's compression byte says gzip (1),
// zlib (2) or LZ4 (4).
func gameCompressed(t byte) bool { return t == 1 || t == 2 || t == 4 }

// deflated reports whether b starts like a gzip stream or a zlib stream
// (the header a compressor writes: deflate, a 32 KiB window or less, the
// check bits right): a player file or level.dat (gzip NBT), which zstd
// cannot shrink. Data that only looks so is stored without zstd, which
// costs nothing but the saving.
func deflated(b []byte) bool {
	switch {
	case len(b) < 2:
		return false
	case b[0] == 0x1f && b[1] == 0x8b:
		return true
	default:
		return b[0]&0x0f == 8 && b[0]>>4 <= 7 && (uint16(b[0])<<8|uint16(b[1]))%31 == 0
	}
}

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// nextCut returns the first cut after pos, at most MaxBlob past it.
func nextCut(cuts []int64, pos int64) int64 {
	for _, c := range cuts {
		if c > pos {
			return min(c, pos+MaxBlob)
		}
	}
	return pos + MaxBlob
}

// startCDC cuts the rest of c's data by content on a goroutine, fed
// through a pipe.
func (s *sink) startCDC(c *fileCut) {
	pr, pw := io.Pipe()
	c.pw, c.done = pw, make(chan struct{})
	s.chunk.ResetWithBoundaries(pr, s.pol, cdcMin, cdcMax)
	s.chunk.SetAverageBits(cdcAvgBits)
	go func() {
		defer crashguard.Recover()
		buf := make([]byte, cdcMax)
		var err error
		for {
			var ch chunker.Chunk
			ch, err = s.chunk.Next(buf)
			if err == io.EOF {
				err = nil
				break
			}
			if err != nil {
				break
			}
			if err = s.dataBlob(c, ch.Data); err != nil {
				break
			}
		}
		c.cdcErr = err
		pr.CloseWithError(errors.Join(err, io.ErrClosedPipe))
		close(c.done)
	}()
}
