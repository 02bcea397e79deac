// Package extract restores a world from an archive that may have been
// tampered with, without letting it write anywhere but the target folder.
//
// Restore checks the archive's SHA-256 before extracting anything, detects
// the compression from magic bytes (zstd, gzip, plain tar), extracts into a
// fresh staging folder through os.Root, and only when the whole archive
// extracted cleanly swaps the staging folder into place. A refused or failed
// archive leaves the target untouched; the error names the entry and why.
//
// # What is refused
//
// Names that are empty, absolute, contain NUL bytes or a ".." component, or
// start at the top level with ".worldbackup-" (reserved for the staging
// folders). Symlinks with an absolute target or one that could resolve out
// of the root (see safelink.Check: only leading ".." are allowed, no
// deeper than the link's folder). Hardlinks whose target is not an earlier
// regular-file entry. Any entry whose parent path crosses a symlink, even one
// pointing inside the root: entries are written only through real folders.
// Duplicate entries (the same name twice, whatever the types; a directory
// entry after files were placed in it implicitly is fine). Character and
// block devices, fifos, and any other entry type but regular files (sparse
// included), directories, symlinks and hardlinks. More entries than
// MaxEntries, more content bytes than MaxBytes, zstd frames needing more
// than MaxDecoderMemory, a stream that ends before the tar end-of-archive
// marker, and an archive whose bytes change between the checksum pass and
// the extraction pass.
//
// # What is kept
//
// Content, permission bits (setuid, setgid and sticky bits are dropped),
// modification times (nanoseconds when the archive has them; symlinks
// included), access times when the archive has them, and, only when running
// as root, numeric owners (user and group names are ignored: they do not
// map across containers).
//
// # Layouts and crash behaviour
//
// "beside" (DIR on an ordinary filesystem): the archive is extracted into
// `.<name>.worldbackup-staging-<random>` next to DIR; then DIR is renamed to
// `<DIR>.previous`, the staging folder to DIR, and `<DIR>.previous` is
// removed. "inside" (DIR is a mount point, or its parent is read-only or on
// another device, as in the Kubernetes restore Job where DIR is the root of a
// volume): the staging folder is `DIR/.worldbackup-staging-<random>`; DIR's
// children are moved into `DIR/.worldbackup-previous/`, the staged children
// into DIR, and the previous folder is removed. DIR itself, and a
// `lost+found` at its top, stay where they are.
//
// Before the swap a journal (`.<name>.worldbackup-swap` beside DIR, or
// `DIR/.worldbackup-swap`) records the phase: "stash" while the old world is
// moved aside, "install" while the new one is moved in. A rerun after a crash
// reads it first: in "stash" it moves the old world back (DIR as it was
// before the interrupted run); in "install" it finishes moving the new world
// in (it was completely extracted and synced before the journal was
// written); in both it then removes the previous and staging folders and the
// journal, and goes on with its own restore. Staging folders left by a crash
// during extraction are removed. A `<DIR>.previous` or
// `.worldbackup-previous` with no journal is not ours: the restore stops and
// asks for it to be moved away. Two restores into one DIR at once are
// refused by a lock (flock) on DIR (inside) or its parent (beside).
package extract

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/regfile"
	"github.com/worldbackup/worldbackup/archiver/tarstream"
	"github.com/worldbackup/worldbackup/jobapi"
)

// Defaults for the caps.
const (
	DefaultMaxBytes         int64 = jobapi.DefaultMaxBytes     // 64 GiB of file content
	DefaultMaxEntries       int64 = jobapi.DefaultMaxEntries   // archive members
	DefaultMaxDecoderMemory       = tarstream.DefaultMaxWindow // zstd window: covers every level and --long=27
)

// Layout says where the staging folder goes; see the package comment.
type Layout string

// Layouts.
const (
	LayoutAuto   Layout = ""       // inside when DIR is a mount point or its parent is not writable or on another device, else beside
	LayoutBeside Layout = "beside" // staging next to DIR, DIR renamed
	LayoutInside Layout = "inside" // staging inside DIR, DIR's children moved
)

// Options of one restore.
type Options struct {
	Archive string // path of the archive file
	SHA256  string // expected SHA-256 of the archive file, hex
	Into    string // target folder (DIR)
	Replace bool   // required when DIR is not empty
	// RunID, when set, is recorded with the checksum in the marker file
	// MarkerName of the restored world, and is the restore's idempotency
	// key: a restore whose marker in DIR names the same run does nothing
	// (already restored), whatever archive it is given. A Job re-created
	// with another archive under the same run ID (a WorldRestore fed from a
	// backup's outputs after the next backup, a restore by run after a
	// newer one became latest) must not replace the world again; another
	// archive needs another run ID.
	RunID string

	MaxBytes         int64  // cap on total content bytes; 0 means DefaultMaxBytes
	MaxEntries       int64  // cap on archive members; 0 means DefaultMaxEntries
	MaxDecoderMemory int64  // cap on the zstd window/decoder memory; 0 means DefaultMaxDecoderMemory
	Layout           Layout // where to stage; LayoutAuto unless a test must force one

	// Open, when set, opens the archive as a stream (an object of an S3
	// store); Archive then only names it. The stream is opened twice:
	// once to check its SHA-256 before anything is extracted, once to
	// extract it, checked again before the swap.
	Open func(ctx context.Context) (io.ReadCloser, error)
	// Verified, with Open, says the stream checks itself while it is read
	// and fails on damage (a chunked run rebuilt from its checked
	// manifest, each blob checked against its hash): the checksum pass is
	// skipped, and SHA256 (the manifest's) is only recorded in the marker.
	Verified bool
	// Decrypt opens an encrypted (age) archive, after its checksum is
	// verified (crypt.Keys.Decrypt); nil: an encrypted archive is refused
	// with crypt.ErrNoKey.
	Decrypt func(io.Reader) (io.Reader, error)
	// Gone, when set, says there is no archive to restore: the run it
	// was asked for is no longer in the catalog (pruned since). Archive
	// and SHA256 are then not needed. The restore does nothing when DIR's
	// marker names RunID (done before: a Job re-created after the prune),
	// and returns Gone otherwise, DIR untouched (an interrupted swap is
	// still finished).
	Gone error
}

var hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

func (o Options) withDefaults() Options {
	o.SHA256 = strings.ToLower(strings.TrimSpace(o.SHA256))
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxEntries == 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.MaxDecoderMemory == 0 {
		o.MaxDecoderMemory = DefaultMaxDecoderMemory
	}
	return o
}

// Validate reports the first problem with o, saying what to fix. It accepts
// options before or after withDefaults (zero caps mean the defaults, and the
// checksum may be upper-case), so main can call it to tell usage errors
// (exit 2) from failed restores.
func (o Options) Validate() error {
	if o.Gone != nil {
		if o.Archive != "" || o.SHA256 != "" || o.Open != nil {
			return errors.New("a gone run has no archive to open")
		}
	} else if err := o.validateArchive(); err != nil {
		return err
	}
	switch {
	case o.Into == "":
		return errors.New("no target folder given (--into DIR)")
	case o.Verified && o.Open == nil:
		return errors.New("a self-checking archive stream needs Open")
	case o.RunID != "" && jobapi.CheckRunID(o.RunID) != nil:
		return fmt.Errorf("--run-id: %w", jobapi.CheckRunID(o.RunID))
	case filepath.Clean(o.Into) == "/":
		return errors.New("--into / would replace the whole filesystem: give the world's folder")
	case o.MaxBytes < 0:
		return fmt.Errorf("--max-bytes %d is negative", o.MaxBytes)
	case o.MaxEntries < 0:
		return fmt.Errorf("--max-entries %d is negative", o.MaxEntries)
	case o.MaxDecoderMemory < 0 || (o.MaxDecoderMemory > 0 && o.MaxDecoderMemory < 1<<20):
		return fmt.Errorf("zstd decoder memory cap %d is below 1 MiB", o.MaxDecoderMemory)
	}
	switch o.Layout {
	case LayoutAuto, LayoutBeside, LayoutInside:
	default:
		return fmt.Errorf("unknown layout %q: want beside or inside", o.Layout)
	}
	return nil
}

// validateArchive reports the first problem with o's archive and checksum.
func (o Options) validateArchive() error {
	switch {
	case o.Archive == "":
		return errors.New("no archive given (--archive PATH)")
	case o.SHA256 == "":
		return errors.New("no checksum given (--sha256 HEX): the archive's SHA-256 must be checked before extracting")
	case !hexSHA256.MatchString(strings.ToLower(strings.TrimSpace(o.SHA256))):
		return fmt.Errorf("--sha256 %q is not a SHA-256: want 64 hex digits", o.SHA256)
	}
	return nil
}

// Result describes a finished restore.
type Result struct {
	Entries      int64         // archive members processed
	Files        int64         // regular files written
	Dirs         int64         // directory entries
	Symlinks     int64         // symlinks created
	Hardlinks    int64         // hardlinks created
	Bytes        int64         // file content bytes written
	ArchiveBytes int64         // size of the archive file
	Compression  string        // zstd | gzip | none
	Encrypted    bool          // the archive was an age file
	Layout       Layout        // beside | inside
	Replaced     bool          // DIR had contents, now replaced
	Duration     time.Duration // whole run, checksum pass included
	// WorldState says what DIR holds now: StateRestored, StateReplaced
	// (either followed by ", old copy left at PATH" when the old world
	// could not be removed) or StateAlreadyRestored.
	WorldState string
	// OldCopy is where the old world was left when it could not be removed.
	OldCopy string
	// Restored is what DIR's marker says it holds when WorldState is
	// StateAlreadyRestored: the archive this run restored earlier, which may
	// be another than Options names (its Archive is "" in a marker of an
	// older archiver).
	Restored Restored
}

// Restored is the archive a run restored earlier, by its marker.
type Restored struct {
	Archive, SHA256 string
}

// World states: what DIR holds after a restore, as the log's world_state
// says. A failed restore leaves DIR StateUnchanged unless WorldState of its
// error says otherwise.
const (
	StateUnchanged       = "unchanged"        // DIR as it was before the restore
	StateRestored        = "restored"         // DIR was empty or missing and holds the archive's world
	StateReplaced        = "replaced"         // DIR's old world was replaced by the archive's
	StateAlreadyRestored = "already restored" // DIR's marker names this run: nothing done
)

// stateError is a failure that left DIR in another state than unchanged.
type stateError struct {
	state string
	err   error
}

func (e *stateError) Error() string { return e.err.Error() }
func (e *stateError) Unwrap() error { return e.err }

// WorldState returns the state of DIR after Restore failed with err:
// StateUnchanged, or a description of a half-done swap ("incomplete: ...,
// rerun to ...") or of a replaced world whose old copy is still there.
func WorldState(err error) string {
	var se *stateError
	if errors.As(err, &se) {
		return se.state
	}
	return StateUnchanged
}

// MarkerName is the file a restore with a run ID writes at the top of the
// restored world: JSON naming the run, the archive's checksum, the time and
// the marker file's own inode. Backups leave it out (tarstream leaves out
// top-level .worldbackup-*).
//
// What a marker proves: that this file is the one a restore created in this
// world (it was created in the staging folder and moved in with the world,
// so its inode is the one it records), for that run. A marker
// written by hand, by an older archiver (no inode), or copied from another
// restored world (a new inode) proves nothing; a restore it names is
// refused (ErrMarkerNotBound) rather than skipped, and rather than replacing
// a world that may be the restored one played since. It does not prove
// anything against someone who can write the world and knows this rule:
// they can write a matching marker, as they can write the world itself.
const MarkerName = reservedPrefix + "restored"

// maxMarker bounds the read of a marker: a few hundred bytes of JSON, and
// the archive's name (a path of at most 4096 bytes, escaped).
const maxMarker = 16 << 10

// marker is the content of MarkerName.
type marker struct {
	RunID  string `json:"run_id"`
	SHA256 string `json:"sha256"`
	// Archive names the archive restored (Options.Archive); "" in a
	// marker of an older archiver.
	Archive    string    `json:"archive,omitempty"`
	RestoredAt time.Time `json:"restored_at"`
	// Inode is the marker file's own inode number, which binds it to the
	// file the restore created (0: a marker of an older archiver).
	Inode uint64 `json:"inode,omitempty"`
}

// ErrMarkerNotBound is wrapped by the error of a restore whose world holds
// a marker naming its run that is not the one a restore wrote
// there (see MarkerName): nothing is done, and no retry can help.
var ErrMarkerNotBound = errors.New("the restore marker is not bound to this world")

// ErrRefused is wrapped by every refusal of the archive's contents (as
// opposed to I/O failures or bad options); see RefusedError.
var ErrRefused = errors.New("archive refused")

// ErrChecksum is returned when the archive's SHA-256 is not the expected one.
var ErrChecksum = errors.New("archive checksum mismatch")

// RefusedError says which entry of the archive was refused and why.
type RefusedError struct {
	Index  int64  // 1-based position of the entry in the archive; 0 when not about one entry
	Name   string // the entry's name as stored in the archive
	Reason string
}

func (e *RefusedError) Error() string {
	if e.Index == 0 {
		return "archive refused: " + e.Reason
	}
	return fmt.Sprintf("archive refused: entry %d %q: %s", e.Index, e.Name, e.Reason)
}

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Restore verifies the archive and restores it into o.Into; see the package
// comment. A world a running server uses (WorldInUse) is refused with an
// error wrapping ErrInUse, after the marker of o.RunID is looked for: a
// restore already done does nothing while the server runs. On any error
// o.Into is as it was (after finishing or undoing a swap interrupted by an
// earlier crash).
func Restore(ctx context.Context, log hclog.Logger, o Options) (Result, error) {
	start := time.Now()
	o = o.withDefaults()
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	log = log.Named("restore").With("archive", o.Archive, "into", o.Into)

	archive := o.Archive
	if o.Open == nil && o.Gone == nil {
		abs, err := filepath.Abs(o.Archive)
		if err != nil {
			return Result{}, fmt.Errorf("resolving archive path: %w", err)
		}
		if archive, err = filepath.EvalSymlinks(abs); err != nil {
			return Result{}, fmt.Errorf("opening archive: %w", err)
		}
	}

	t, err := openTarget(o.Into, o.Layout, log)
	if err != nil {
		return Result{}, err
	}
	defer t.close()
	if o.Open == nil && o.Gone == nil && within(t.dir, archive) {
		return Result{}, fmt.Errorf("archive %s lies inside the target folder %s, which the restore replaces: move it elsewhere first", archive, t.dir)
	}
	// A rerun of a restore already done does nothing, whatever uses the
	// world now (its server running again): the marker is read first,
	// unless a swap was interrupted (DIR may be half-done: after recovery).
	pending, err := t.exists(t.journal)
	if err != nil {
		return Result{}, fmt.Errorf("checking %s: %w", t.path(t.journal), err)
	}
	if !pending {
		if res, done, err := t.alreadyRestored(o, log, start); done {
			return res, err
		}
		if o.Gone != nil {
			return Result{}, o.Gone
		}
	}
	// A running server keeps writing its world: never restore, nor finish
	// an interrupted swap, under it.
	switch err := WorldInUse(t.dir); {
	case errors.Is(err, ErrInUse):
		return Result{}, err
	case err != nil:
		return Result{}, fmt.Errorf("cannot check whether a server uses the world: %w", err)
	}
	if err := t.recover(); err != nil {
		return Result{}, err
	}
	if pending {
		if res, done, err := t.alreadyRestored(o, log, start); done {
			return res, err
		}
	}
	if o.Gone != nil { // the interrupted swap is finished: nothing more to do
		return Result{}, o.Gone
	}
	empty, err := t.empty()
	if err != nil {
		return Result{}, err
	}
	if !empty && !o.Replace {
		return Result{}, fmt.Errorf("%s is not empty: pass --replace to replace its contents "+
			"(they are kept until the new world is fully extracted, then removed)", t.dir)
	}

	f, err := openArchive(ctx, o, archive)
	if err != nil {
		return Result{}, err
	}
	defer func() {
		if f != nil {
			f.Close()
		}
	}()

	res := Result{Layout: t.layout, Replaced: !empty}
	if !o.Verified {
		sum, n, err := hashFile(ctx, f)
		if err != nil {
			return Result{}, fmt.Errorf("checksumming archive %s: %w", archive, err)
		}
		if sum != o.SHA256 {
			return Result{}, fmt.Errorf("%w: %s has SHA-256 %s (%d bytes), expected %s: the archive is damaged or not the one recorded; nothing was extracted",
				ErrChecksum, archive, sum, n, o.SHA256)
		}
		log.Info("checksum verified", "sha256", sum, "bytes", n)
		res.ArchiveBytes = n
		if f, err = rewind(ctx, o, f); err != nil {
			return Result{}, err
		}
	}
	st, err := t.newStaging()
	if err != nil {
		return Result{}, err
	}
	if err := extract(ctx, f, st, o, &res); err != nil {
		if rmErr := t.dropStaging(st); rmErr != nil {
			log.Warn("removing staging folder", "staging", st.name, "error", rmErr)
		}
		return Result{}, err
	}
	leftAt, err := t.swap(st, o.SHA256)
	if err != nil {
		return Result{}, err
	}
	res.Duration = time.Since(start)
	res.WorldState = StateRestored
	if res.Replaced {
		res.WorldState = StateReplaced
	}
	if leftAt != "" {
		res.OldCopy = leftAt
		res.WorldState += ", old copy left at " + leftAt
	}
	log.Info("restored", "world_state", res.WorldState, "entries", res.Entries, "files", res.Files, "bytes", res.Bytes,
		"compression", res.Compression, "layout", string(res.Layout), "replaced", res.Replaced,
		"duration", res.Duration.Round(time.Millisecond).String(),
		"mb_per_s", fmt.Sprintf("%.1f", float64(res.Bytes)/1e6/max(res.Duration.Seconds(), 1e-9)))
	return res, nil
}

// alreadyRestored reports whether DIR's marker names o's run (done): then
// the restore does nothing and returns res, or err when the marker is not
// bound to DIR (ErrMarkerNotBound). Without a run ID nothing is done.
func (t *target) alreadyRestored(o Options, log hclog.Logger, start time.Time) (res Result, done bool, err error) {
	if o.RunID == "" {
		return Result{}, false, nil
	}
	m, bound, ok := t.readMarker()
	if !ok || m.RunID != o.RunID {
		return Result{}, false, nil
	}
	if !bound {
		return Result{}, true, fmt.Errorf("%w: %s names this run (%s), but is not the marker this restore wrote "+
			"there (written by hand, by an older archiver, or copied from another world): if %s is the restored world, "+
			"there is nothing to do; to restore it again, delete the marker and rerun",
			ErrMarkerNotBound, t.markerPath(), o.RunID, t.dir)
	}
	if o.Gone == nil && m.SHA256 != o.SHA256 {
		log.Warn("this run restored another archive; nothing to do: give a new run ID to restore this one",
			"run_id", o.RunID, "restored_archive", m.Archive, "restored_sha256", m.SHA256, "archive", o.Archive, "sha256", o.SHA256)
	}
	log.Info("already restored; nothing to do", "run_id", o.RunID, "sha256", m.SHA256,
		"restored_at", m.RestoredAt, "world_state", StateAlreadyRestored)
	return Result{Layout: t.layout, WorldState: StateAlreadyRestored, Duration: time.Since(start),
		Restored: Restored{Archive: m.Archive, SHA256: m.SHA256}}, true, nil
}

// within reports whether p is dir or below it (both absolute, clean).
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// openArchive opens the archive: the regular file at path, or the stream
// of o.Open.
func openArchive(ctx context.Context, o Options, path string) (io.ReadCloser, error) {
	if o.Open != nil {
		r, err := o.Open(ctx)
		if err != nil {
			return nil, fmt.Errorf("opening archive %s: %w", path, err)
		}
		return r, nil
	}
	f, err := regfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening archive: %w", err)
	}
	return f, nil
}

// rewind returns the archive read from its start again: the file f rewound,
// or the stream of o.Open opened anew (f is closed).
func rewind(ctx context.Context, o Options, f io.ReadCloser) (io.ReadCloser, error) {
	if o.Open == nil {
		if _, err := f.(io.Seeker).Seek(0, io.SeekStart); err != nil {
			return f, fmt.Errorf("rewinding archive: %w", err)
		}
		return f, nil
	}
	f.Close()
	r, err := openArchive(ctx, o, o.Archive)
	if err != nil {
		return nil, err
	}
	return r, nil
}
