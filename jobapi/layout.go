// The archive layout: an archive lives in the archive store at
// <root>/<server>/<run id><ext>, with ext ".tar.zst", ".tar.gz" or ".tar"
// for the compressions zstd, gzip and none; a chunked run's manifest at
// <root>/_chunked/runs/<server>/<run id>.manifest. The archiver writes
// there and the WorldBackup component predicts the same path (RunKey) as
// its archiveRef output. The rules of server names and run IDs, which become path
// segments, are here too. Paths are built with package path (forward
// slashes): archive refs are paths inside a Linux container.

package jobapi

import (
	"fmt"
	"path"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The supported compressions.
const (
	CompressionZstd = "zstd"
	CompressionGzip = "gzip"
	CompressionNone = "none"
)

// MaxLabelLen is the longest DNS-1123 label (a server name, a Job name).
const MaxLabelLen = 63

// MaxServerLen is the longest server name the archiver accepts: a DNS-1123
// label, a path segment of the store and the catalog's key.
const MaxServerLen = MaxLabelLen

// JobHashLen is the length of the hash that ends a Job's name when its run
// ID does not fit in it.
const JobHashLen = 8

// MaxJobServerLen is the longest server name of a component's Job: the
// server also names its Jobs, <server>-<kind>-<suffix>, which are DNS-1123
// labels of at most MaxLabelLen characters themselves, so the longest kind
// (restore) and the shortest suffix (a bare hash of JobHashLen) must fit
// after it. The archiver takes longer names (MaxServerLen) for runs started
// by hand; a component refuses them before a Job exists.
const MaxJobServerLen = MaxLabelLen - len("-"+KindRestore+"-") - JobHashLen

// MaxRunIDLen is the longest run ID.
const MaxRunIDLen = 128

// RunIDPattern is the rule of a run ID: 1 to MaxRunIDLen characters from
// A-Z a-z 0-9 '.' '_' '-', starting with a letter or digit.
const RunIDPattern = `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`

var (
	serverRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	runIDRE  = regexp.MustCompile(RunIDPattern)
)

// Extension returns the archive file extension for compression.
func Extension(compression string) (string, error) {
	switch compression {
	case CompressionZstd:
		return ".tar.zst", nil
	case CompressionGzip:
		return ".tar.gz", nil
	case CompressionNone:
		return ".tar", nil
	default:
		return "", fmt.Errorf("compression %q is not supported: use zstd, gzip or none", compression)
	}
}

// CheckServer reports whether server is a valid server name: a DNS-1123 label
// (lowercase letters, digits and '-', starting and ending with a letter or
// digit, at most 63 characters).
func CheckServer(server string) error {
	if len(server) > MaxServerLen || !serverRE.MatchString(server) {
		return fmt.Errorf("server name %q is invalid: use at most %d lowercase letters, digits and '-', starting and ending with a letter or digit",
			server, MaxServerLen)
	}
	return nil
}

// CheckNamespace reports whether ns is a valid --namespace: "" (an
// archiver run by hand: every namespace) or a Kubernetes namespace's name,
// a DNS-1123 label.
func CheckNamespace(ns string) error {
	if ns != "" && (len(ns) > MaxLabelLen || !serverRE.MatchString(ns)) {
		return fmt.Errorf("namespace %q is invalid: a Kubernetes namespace's name is at most %d lowercase letters, digits and '-', starting and ending with a letter or digit",
			ns, MaxLabelLen)
	}
	return nil
}

// NamespaceUsage is the help text of --namespace: the one account of what
// a namespace scopes, for backup, prune and resolve.
const NamespaceUsage = "the Kubernetes namespace of the Job (the components pass theirs): recorded in the run's row, " +
	"and the server's runs this command looks at (its previous run, its newest, the ones it prunes) are that namespace's " +
	"and those recorded without one, so two servers of one name in two namespaces that share a catalog keep apart " +
	"(default: every namespace's)"

// CheckJobServer reports whether server is a valid server name of a
// component's Job: CheckServer's rule, at most MaxJobServerLen characters.
func CheckJobServer(server string) error {
	if len(server) > MaxJobServerLen || !serverRE.MatchString(server) {
		return fmt.Errorf("server name %q is invalid: use at most %d lowercase letters, digits and '-', starting and ending with a letter or digit",
			server, MaxJobServerLen)
	}
	return nil
}

// Compressions lists the supported compressions, the default first.
func Compressions() []string { return []string{CompressionZstd, CompressionGzip, CompressionNone} }

// CheckFormerOwner reports whether owner is a valid former owner: at most
// MaxFormerOwnerLen bytes of UTF-8 text without control characters.
func CheckFormerOwner(owner string) error {
	if len(owner) > MaxFormerOwnerLen || !utf8.ValidString(owner) || strings.IndexFunc(owner, unicode.IsControl) >= 0 {
		return fmt.Errorf("former owner: want at most %d bytes of UTF-8 text without control characters", MaxFormerOwnerLen)
	}
	return nil
}

// CheckRunID reports whether runID is a valid run ID: 1 to 128 characters
// from A-Z a-z 0-9 '.' '_' '-', starting with a letter or digit. It becomes a
// file name, so it holds no '/' and never starts with '.'. One that holds
// an age identity (a key pasted into it) is refused without quoting it: it
// would name an object in the store and a row in the catalog.
func CheckRunID(runID string) error {
	if HoldsIdentity(runID) {
		return fmt.Errorf("run ID holds an age secret key (AGE-SECRET-KEY-...), not shown: a key goes in the key file's Secret, never in a run ID")
	}
	if !runIDRE.MatchString(runID) {
		return fmt.Errorf("run ID %q is invalid: use 1 to %d characters from A-Z a-z 0-9 . _ -, starting with a letter or digit",
			runID, MaxRunIDLen)
	}
	if strings.EqualFold(runID, RunLatest) {
		// A restore's or verify's fromRun could never name it.
		return fmt.Errorf("run ID %q is a spelling of %q, which names a server's newest run: use another run ID", runID, RunLatest)
	}
	return nil
}

// ArchiveName returns the archive's path relative to the archive root:
// "<server>/<runID><ext>". It checks server, runID and compression.
func ArchiveName(server, runID, compression string) (string, error) {
	if err := CheckServer(server); err != nil {
		return "", err
	}
	if err := CheckRunID(runID); err != nil {
		return "", err
	}
	ext, err := Extension(compression)
	if err != nil {
		return "", err
	}
	return server + "/" + runID + ext, nil
}

// RunKey returns the store key of what a run of server writes in format
// (FormatTar or FormatChunked; "" is DefaultFormat): for tar its archive,
// ArchiveName with compression; for chunked its manifest, ManifestKey
// (compression is not used). A store's Ref of it is the run's archive ref,
// the row's archive_ref: the archiver writes there and the components
// predict it as their archiveRef output.
func RunKey(server, runID, format, compression string) (string, error) {
	if format == "" {
		format = DefaultFormat
	}
	if err := CheckFormat(format); err != nil {
		return "", err
	}
	if format == FormatChunked {
		return ManifestKey(server, runID)
	}
	return ArchiveName(server, runID, compression)
}

// ArchiveRef returns the absolute path of a run's archive (tar) or
// manifest (chunked) under root, an absolute folder: "<root>/<RunKey>"
// (root cleaned).
func ArchiveRef(root, server, runID, format, compression string) (string, error) {
	if !strings.HasPrefix(root, "/") {
		return "", fmt.Errorf("archive root %q is not an absolute path", root)
	}
	key, err := RunKey(server, runID, format, compression)
	if err != nil {
		return "", err
	}
	return path.Join(root, key), nil
}

// EncryptedExt ends the name of an encrypted tar archive, after its
// compression's extension: "<run id>.tar.zst.age", an age file (see
// archiver/crypt) that `age -d` turns back into the archive. A chunked
// run's manifest keeps its name: the manifest says it is encrypted.
const EncryptedExt = ".age"

// SealedRunKey is RunKey for a run written with encryption on or off: an
// encrypted tar run's key ends in EncryptedExt.
func SealedRunKey(server, runID, format, compression string, encrypted bool) (string, error) {
	key, err := RunKey(server, runID, format, compression)
	if err == nil && encrypted && format != FormatChunked {
		key += EncryptedExt
	}
	return key, err
}

// SealedArchiveRef is ArchiveRef for a run written with encryption on or
// off (see SealedRunKey).
func SealedArchiveRef(root, server, runID, format, compression string, encrypted bool) (string, error) {
	ref, err := ArchiveRef(root, server, runID, format, compression)
	if err == nil && encrypted && format != FormatChunked {
		ref += EncryptedExt
	}
	return ref, err
}

// RunLockKey returns the store key of a run's lock, "<server>/<runID>": the
// lock a backup holds from its second catalog lookup to its row, and a prune
// holds while it removes the run's archive, so neither removes nor records
// an archive the other is writing. It is a run's, not an archive's: two
// attempts of one run with different compressions share it.
func RunLockKey(server, runID string) string { return server + "/" + runID }

// ParseArchiveName is the inverse of ArchiveName for one file name inside a
// server's folder: "<runID><ext>" (and "<runID><ext>.age", EncryptedExt)
// gives the run ID and the compression. ok
// is false for any other name (temp and lock files start with '.', which no
// run ID does).
func ParseArchiveName(name string) (runID, compression string, ok bool) {
	name = strings.TrimSuffix(name, EncryptedExt) // an encrypted archive is its run's too
	for _, c := range Compressions() {
		ext, _ := Extension(c)
		// A name ends in at most one of the extensions, so this is unambiguous.
		if id, found := strings.CutSuffix(name, ext); found && CheckRunID(id) == nil {
			return id, c, true
		}
	}
	return "", "", false
}

// ValidBucket reports whether b is a valid S3 bucket name, the one rule of
// the archiver's S3 store and of the components' store input: 3 to 63
// lowercase letters, digits, '.' and '-', starting and ending with a letter
// or digit.
func ValidBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for i, r := range b {
		switch {
		case 'a' <= r && r <= 'z', '0' <= r && r <= '9':
		case (r == '-' || r == '.') && i > 0 && i < len(b)-1:
		default:
			return false
		}
	}
	return true
}

// IsSHA256 reports whether s is an archive checksum as the catalog records
// it: 64 lowercase hex digits.
func IsSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return false
		}
	}
	return true
}

// The chunked format's objects live below ChunkedDir, beside the servers'
// folders of tar archives: "_chunked/packs/<ab>/<pack id>" and
// "_chunked/runs/<server>/<run id>.manifest". A server name is a DNS label,
// which never holds '_', and store keys never start with '.', so the two
// cannot clash.
const (
	ChunkedDir     = "_chunked"
	chunkedPacks   = ChunkedDir + "/packs"
	chunkedRuns    = ChunkedDir + "/runs"
	chunkedKeys    = ChunkedDir + "/keys"
	dataKeySuffix  = ".key"
	spareSuffix    = ".spare"
	unopenedSuffix = ".unopened-"
	manifestSuffix = ".manifest"
)

// FormatTar and FormatChunked are the archive formats.
const (
	FormatTar     = "tar"
	FormatChunked = "chunked"
)

// DefaultFormat is the format when neither --format nor [archive] format
// is set: chunked, which stores what changed since the server's previous
// run. Runs of either format stay restorable whatever the default.
const DefaultFormat = FormatChunked

// ChunkedCompresses says why a compression setting has no place in the
// chunked format; the errors that refuse one quote it and name the fix in
// their own keys (an input, a flag, a felis.toml key).
const ChunkedCompresses = "compression is a setting of the tar format: chunked compresses each blob with zstd when that helps"

// TakesCompression reports whether format ("" is DefaultFormat) takes a
// compression setting: only tar does. The archiver, the components and the
// program refuse a compression given for any other, quoting
// ChunkedCompresses.
func TakesCompression(format string) bool {
	if format == "" {
		format = DefaultFormat
	}
	return format == FormatTar
}

// Formats lists the archive formats, the default first.
func Formats() []string { return []string{FormatChunked, FormatTar} }

// CheckFormat reports whether format is a supported archive format.
func CheckFormat(format string) error {
	switch format {
	case FormatTar, FormatChunked:
		return nil
	default:
		return fmt.Errorf("archive format %q is not supported: use %s or %s", format, FormatTar, FormatChunked)
	}
}

var packIDRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// PackKey returns the store key of the pack named id (64 lowercase hex
// digits): "_chunked/packs/<first two digits>/<id>".
func PackKey(id string) (string, error) {
	if !packIDRE.MatchString(id) {
		return "", fmt.Errorf("pack ID %q is invalid: want 64 lowercase hex digits", id)
	}
	return chunkedPacks + "/" + id[:2] + "/" + id, nil
}

// PacksDir is the folder below which every pack is kept (PackKey).
const PacksDir = chunkedPacks

// PackIDOfKey returns the ID of the pack whose key is key, and false when
// key is not a pack's key.
func PackIDOfKey(key string) (string, bool) {
	id := key[strings.LastIndexByte(key, '/')+1:]
	if k, err := PackKey(id); err != nil || k != key {
		return "", false
	}
	return id, true
}

// PackDirs returns the 256 folders packs are kept in.
func PackDirs() []string {
	out := make([]string, 0, 256)
	for i := range 256 {
		out = append(out, fmt.Sprintf("%s/%02x", chunkedPacks, i))
	}
	return out
}

// ManifestKey returns the store key of a chunked run's manifest:
// "_chunked/runs/<server>/<runID>.manifest".
func ManifestKey(server, runID string) (string, error) {
	if err := CheckServer(server); err != nil {
		return "", err
	}
	if err := CheckRunID(runID); err != nil {
		return "", err
	}
	return chunkedRuns + "/" + server + "/" + runID + manifestSuffix, nil
}

// SplitManifestRef splits the reference of a chunked run's manifest (a path
// or URL ending in ManifestKey's form) into the store's root reference and
// the manifest's key. ok is false for any other reference.
func SplitManifestRef(ref string) (root, key string, ok bool) {
	i := strings.LastIndex(ref, "/"+chunkedRuns+"/")
	if i < 0 {
		return "", "", false
	}
	root, key = ref[:i], ref[i+1:]
	rest := strings.TrimPrefix(key, chunkedRuns+"/")
	server, name, found := strings.Cut(rest, "/")
	if !found || CheckServer(server) != nil {
		return "", "", false
	}
	id, found := strings.CutSuffix(name, manifestSuffix)
	if !found || CheckRunID(id) != nil {
		return "", "", false
	}
	return root, key, true
}

// DataKeyKey returns the store key of server's data key object, which
// holds the key of its encrypted chunked runs wrapped by the age identity:
// "_chunked/keys/<server>.key". Removing it makes every encrypted chunked
// run of the server unreadable (crypto-shredding).
func DataKeyKey(server string) (string, error) {
	if err := CheckServer(server); err != nil {
		return "", err
	}
	return chunkedKeys + "/" + server + dataKeySuffix, nil
}

// DataKeySpareKey returns the store key of the spare of server's data key
// object, "_chunked/keys/<server>.key.spare": a rewrap writes the new
// wrapping there first and removes it once the key object itself is
// replaced, so a write that fails half-way (and that the store takes back)
// never leaves the server without its data key. Crypto-shredding removes
// both.
func DataKeySpareKey(server string) (string, error) {
	key, err := DataKeyKey(server)
	if err != nil {
		return "", err
	}
	return key + spareSuffix, nil
}

// DataKeyUnopenedKey returns the store key under which a rewrap keeps
// server's data key object when the object did not open with the key file
// and its spare did (a rewrap that failed half-way, or a spare copied in
// from elsewhere): "_chunked/keys/<server>.key.unopened-<stamp>". The
// object may hold another data key than the spare, sealing runs that only
// it opens, so it is kept, never overwritten. Crypto-shredding removes it
// with the others (<server>.key*).
func DataKeyUnopenedKey(server, stamp string) (string, error) {
	key, err := DataKeyKey(server)
	if err != nil {
		return "", err
	}
	return key + unopenedSuffix + stamp, nil
}

// SplitManifestKey splits a manifest's key (ManifestKey's form) into its
// server and run ID; ok is false for any other key.
func SplitManifestKey(key string) (server, runID string, ok bool) {
	rest, found := strings.CutPrefix(key, chunkedRuns+"/")
	if !found {
		return "", "", false
	}
	server, name, found := strings.Cut(rest, "/")
	if !found || CheckServer(server) != nil {
		return "", "", false
	}
	runID, found = strings.CutSuffix(name, manifestSuffix)
	if !found || CheckRunID(runID) != nil {
		return "", "", false
	}
	return server, runID, true
}

// ManifestDir returns the store folder of server's chunked-run manifests,
// the folder of every ManifestKey of server.
func ManifestDir(server string) (string, error) {
	if err := CheckServer(server); err != nil {
		return "", err
	}
	return chunkedRuns + "/" + server, nil
}
