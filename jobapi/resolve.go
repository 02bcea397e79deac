package jobapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"unicode"
)

// A run reference names a recorded run of one server for a restore (or a
// verify) in place of an archive ref and its checksum: a run ID, or
// RunLatest for the server's newest successful run. The catalog resolves it
// (archiver resolve); CheckRunRef is the one rule of its form.

// RunLatest is the run reference of a server's newest successful run: the
// newest row of the server in the catalog that did not finish in the
// future (see the catalog's FutureTolerance) and is not a backup made just
// before a restore (IsPreRestore).
const RunLatest = "latest"

// PreRestorePrefix starts the part of a run ID that marks a backup saving
// a world just before a restore replaces it: the program's
// <cluster>.<server>.pre-restore-<restore>. RunLatest passes over such
// runs (IsPreRestore): a restore of latest restores the newest backup made
// before it was asked for, not the world it replaces.
const PreRestorePrefix = "pre-restore-"

// IsPreRestore reports whether runID is such a backup's run ID: it holds
// "." + PreRestorePrefix.
func IsPreRestore(runID string) bool { return strings.Contains(runID, "."+PreRestorePrefix) }

// CheckRunRef reports whether ref is a valid run reference: RunLatest or a
// run ID (CheckRunID).
func CheckRunRef(ref string) error {
	if ref == RunLatest {
		return nil
	}
	if strings.EqualFold(ref, RunLatest) {
		return fmt.Errorf("run %q: write %q in lower case for the server's newest successful run", ref, RunLatest)
	}
	if CheckRunID(ref) != nil {
		return fmt.Errorf("run %q is neither %q nor a run ID: use %q for the server's newest successful run, or a run ID as `archiver list` shows it (1 to %d characters from A-Z a-z 0-9 . _ -, starting with a letter or digit)",
			ref, RunLatest, RunLatest, MaxRunIDLen)
	}
	return nil
}

// Where the restore Job hands a resolved run from its init container to the
// extractor: an emptyDir mounted at ResolvedMountPath in both, the file
// ResolvedFileName in it, at most MaxResolvedBytes.
const (
	ResolvedMountPath = "/run/worldbackup"
	ResolvedFileName  = "run.json"
	ResolvedPath      = ResolvedMountPath + "/" + ResolvedFileName
	MaxResolvedBytes  = 16 << 10
)

// ResolvedRun is what archiver resolve writes for a run reference: the run
// it found and its archive, one JSON object. The restore's extractor reads it
// (ReadResolvedRun) instead of --archive and --sha256.
type ResolvedRun struct {
	Server     string `json:"server"`
	RunID      string `json:"run_id"`
	ArchiveRef string `json:"archive_ref"`
	SHA256     string `json:"sha256"`
	// Gone says the catalog no longer has the run ID (a prune, or a row
	// deleted by hand, since the restore was asked for); ArchiveRef and
	// SHA256 are then empty. Only a Resolve with AllowGone writes it: the
	// restore then does nothing when the world's marker shows it done, and
	// is refused otherwise.
	Gone bool `json:"gone,omitempty"`
}

// Validate checks r: a valid server and run ID, a SHA-256 in lowercase hex,
// and an archive ref that is an s3:// URL or an absolute, clean path without
// control characters; for a Gone run, neither.
func (r ResolvedRun) Validate() error {
	var errs []error
	if err := CheckServer(r.Server); err != nil {
		errs = append(errs, err)
	}
	if err := CheckRunID(r.RunID); err != nil {
		errs = append(errs, err)
	}
	if r.Gone {
		if r.ArchiveRef != "" || r.SHA256 != "" {
			errs = append(errs, errors.New("a gone run has no archive_ref or sha256"))
		}
		return errors.Join(errs...)
	}
	if !IsSHA256(r.SHA256) {
		errs = append(errs, fmt.Errorf("sha256 %q: want 64 lowercase hex digits", r.SHA256))
	}
	if err := checkRef(r.ArchiveRef); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func checkRef(ref string) error {
	switch {
	case ref == "":
		return errors.New("archive_ref is empty")
	case strings.IndexFunc(ref, unicode.IsControl) >= 0:
		return fmt.Errorf("archive_ref %q holds control characters", ref)
	case IsS3URL(ref):
		if _, key, _ := SplitS3Ref(ref); CheckKey(key) != nil {
			return fmt.Errorf("archive_ref %q: not an object of an S3 store", ref)
		}
		return nil
	case !strings.HasPrefix(ref, "/") || path.Clean(ref) != ref:
		return fmt.Errorf("archive_ref %q: want an absolute, clean path or an s3:// URL", ref)
	}
	return nil
}

// RefWithin reports whether ref lies where a restore can read it: within is
// a folder (the backup claim's mount: ref is below it) or an s3:// URL
// prefix (s3:// alone: any object of the store); "" accepts any ref.
func RefWithin(ref, within string) bool {
	switch {
	case within == "":
		return true
	case IsS3URL(within):
		return strings.HasPrefix(ref, strings.TrimSuffix(within, "/")+"/") || within == S3URLPrefix && IsS3URL(ref)
	default:
		return !IsS3URL(ref) && strings.HasPrefix(ref, strings.TrimSuffix(within, "/")+"/")
	}
}

// Encode returns r as the file's content: one JSON line.
func (r ResolvedRun) Encode() []byte {
	b, _ := json.Marshal(r) // strings only: cannot fail
	return append(b, '\n')
}

// ReadResolvedRun reads and validates the file archiver resolve wrote at
// name: at most MaxResolvedBytes, one JSON object of ResolvedRun's fields
// only.
func ReadResolvedRun(name string) (ResolvedRun, error) {
	f, err := os.Open(name)
	if err != nil {
		return ResolvedRun{}, fmt.Errorf("reading the resolved run: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxResolvedBytes+1))
	if err != nil {
		return ResolvedRun{}, fmt.Errorf("reading the resolved run %s: %w", name, err)
	}
	return ParseResolvedRun(b)
}

// ParseResolvedRun decodes and validates the resolved run's file content b.
func ParseResolvedRun(b []byte) (ResolvedRun, error) {
	if len(b) > MaxResolvedBytes {
		return ResolvedRun{}, fmt.Errorf("the resolved run is larger than %d bytes: not archiver resolve's output", MaxResolvedBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var r ResolvedRun
	if err := dec.Decode(&r); err != nil {
		return ResolvedRun{}, fmt.Errorf("the resolved run is not archiver resolve's JSON: %w", err)
	}
	if dec.More() {
		return ResolvedRun{}, errors.New("the resolved run holds more than one JSON object")
	}
	if err := r.Validate(); err != nil {
		return ResolvedRun{}, fmt.Errorf("the resolved run is invalid: %w", err)
	}
	return r, nil
}

// Resolve is the request of `archiver resolve`: find run FromRun (a run
// reference) of Server in the catalog of the config file Config, check that
// its archive lies Within (see RefWithin), and write it to Out as a
// ResolvedRun. The restore Job's init container runs it, the only container
// of the pod that mounts the config Secret.
type Resolve struct {
	Server string
	// Namespace is the Job's namespace: RunLatest is the newest run of
	// Server recorded from it or without one; a run ID is found whatever
	// namespace recorded it (a fleet move restores another's); "" = every
	// namespace (CheckNamespace, NamespaceUsage).
	Namespace string
	FromRun   string // a run ID or RunLatest
	Config    string // "" = DefaultConfigPath
	Within    string // "" = anywhere
	Out       string // "" = stdout
	// AllowGone writes a run ID the catalog does not have as a Gone
	// ResolvedRun (exit 0) instead of refusing it: a restore Job re-created
	// after its run was pruned (an image change) lets the world's marker
	// decide. A verify by run does not set it.
	AllowGone bool

	LogFormat LogFormat // "" = LogAuto
}

// KindResolve is the archiver subcommand of Resolve (not a Job kind: the
// restore Job's init container runs it).
const KindResolve = "resolve"

// Kind returns KindResolve.
func (Resolve) Kind() string { return KindResolve }

// WithDefaults returns r as the archiver sees it.
func (r Resolve) WithDefaults() Resolve {
	if r.Config == "" {
		r.Config = DefaultConfigPath
	}
	if r.LogFormat == "" {
		r.LogFormat = LogAuto
	}
	return r
}

// Args returns the archiver's command line of r, the subcommand first.
func (r Resolve) Args() []string {
	a := args{KindResolve}
	a.always(FlagServer, r.Server)
	a.str(FlagNamespace, r.Namespace)
	a.always(FlagFromRun, r.FromRun)
	a.str(FlagConfig, r.Config)
	a.str(FlagWithin, r.Within)
	a.str(FlagOut, r.Out)
	a.bool(FlagAllowGone, r.AllowGone)
	a.str(FlagLogFormat, string(r.LogFormat))
	return a
}

// Bind registers the resolve's flags on fs, storing into r.
func (r *Resolve) Bind(fs *flag.FlagSet) {
	fs.StringVar(&r.Server, FlagServer, "", "the server whose run it is (required)")
	fs.StringVar(&r.Namespace, FlagNamespace, "", NamespaceUsage)
	fs.StringVar(&r.FromRun, FlagFromRun, "", "a run ID of the server, or "+RunLatest+" for its newest successful run (required)")
	fs.StringVar(&r.Config, FlagConfig, DefaultConfigPath, "felis.toml")
	fs.StringVar(&r.Within, FlagWithin, "", "refuse a run whose archive is not below this folder or s3:// URL prefix (s3:// alone: any S3 object)")
	fs.StringVar(&r.Out, FlagOut, "", "write the run's archive ref and checksum to this file as JSON (default: stdout)")
	fs.BoolVar(&r.AllowGone, FlagAllowGone, false, "write a run ID the catalog does not have (pruned since, or never recorded) as gone instead of failing: "+
		"the restore then does nothing if the world's marker shows this restore done, and fails otherwise")
	bindLogFormat(fs, &r.LogFormat)
}

// Parsed finishes r after fs.Parse (nothing to do).
func (r *Resolve) Parsed(*flag.FlagSet) {}

// The flags of resolve and of a restore by run.
const (
	FlagFromRun     = "from-run"
	FlagWithin      = "within"
	FlagOut         = "out"
	FlagArchiveFrom = "archive-from"
	FlagAllowGone   = "allow-gone"
)
