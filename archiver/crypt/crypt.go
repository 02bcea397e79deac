// Package crypt is the archiver's client-side encryption: the key file (an
// age identity, as age-keygen writes it, a file of a mounted Secret), the
// tar format's age encryption (a "<run>.tar.zst.age" archive is a plain age
// file: `age -d -i key.txt run.tar.zst.age | tar --zstd -x` restores it
// without our tools), and the chunked format's envelope: a random data key
// per server, wrapped by the identity in a small key object beside the
// manifests (jobapi.DataKeyKey), so rotating the identity rewraps that
// object and touches no pack (Rewrap), and removing it makes every chunked
// run of the server unreadable (crypto-shredding). The chunked format seals
// its blobs and manifests with the data key itself (chunked.NewSealer).
//
// Key material never reaches a log, an error or an argument: errors name
// the file and what is wrong with it, never its bytes.
package crypt

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"filippo.io/age"

	"github.com/worldbackup/worldbackup/archiver/secretfile"
	"github.com/worldbackup/worldbackup/jobapi"
)

// MaxKeyFile bounds the key file: an identity is 74 bytes, age-keygen's
// file with its comments about 190; a hybrid (post-quantum) one's 2,084,
// its public key comment alone 1,973 characters. A rotation's file (the
// new identity's file and the old one's, one after the other, comments
// and all) and a few old identities kept for reading fit many times over.
const MaxKeyFile = 64 << 10

// ErrKeyFile is wrapped by the errors of a key file that cannot be used
// (missing, not a regular file, too large, no identity in it): a usage
// error, no retry can help.
var ErrKeyFile = errors.New("encryption key file unusable")

// ErrWrongKey is wrapped by the errors of an archive (or data key object)
// that none of the key file's identities opens: a usage error, the world
// is left untouched.
var ErrWrongKey = errors.New("the encryption key does not open this archive")

// ErrNoKey is wrapped by the error of an encrypted archive read without a
// key file.
var ErrNoKey = errors.New("the archive is encrypted: " + jobapi.NeedKeyAdvice())

// ErrCorrupt is wrapped by the errors of an encrypted stream whose bytes
// do not authenticate (tampered, truncated): the archive is refused.
var ErrCorrupt = errors.New("encrypted archive is corrupt")

// Keys are the identities of a key file: the first is the one archives are
// encrypted to, every one is tried to read them (an old identity kept
// while a rotation finishes).
type Keys struct {
	path       string
	identities []age.Identity
	recipient  age.Recipient
	// macKeys[i] authenticates the data key objects written for
	// identities[i] (objectMAC): derived from the identity's secret, so
	// one who knows only its recipient cannot make one.
	macKeys [][]byte
	// unportable says what in the file age's own command (age -d -i)
	// refuses and this reader passes over ("": nothing).
	unportable string
}

// Unportable says what in the key file the age command refuses (age -d -i
// file reads every line as it is: a byte order mark, or spaces around a
// line, make it fail), though the archiver reads it; "" when nothing. A
// restore without the archiver then needs the file cleaned first.
func (k *Keys) Unportable() string { return k.unportable }

// Path returns the key file's path (never its content).
func (k *Keys) Path() string { return k.path }

// String names the key file only, so a Keys logged by mistake leaks
// nothing.
func (k *Keys) String() string { return "age identity file " + k.path }

// GoString is String: %#v leaks nothing either.
func (k *Keys) GoString() string { return k.String() }

// LoadKeyFile reads and parses the key file at path: a regular file (a
// symbolic link to one, as Kubernetes mounts Secrets) of at most
// MaxKeyFile bytes, so that a device or a FIFO cannot make the archiver
// read forever, holding one age identity per line (AGE-SECRET-KEY-1...,
// or a hybrid AGE-SECRET-KEY-PQ-1...; empty lines and lines starting with
// '#' are skipped, as age does). Its errors wrap ErrKeyFile and never
// hold the file's content.
func LoadKeyFile(path string) (*Keys, error) {
	if strings.Contains(strings.ToUpper(path), "AGE-SECRET-KEY-") {
		// Never quoted: it is the key itself, given where its file's path goes.
		return nil, fmt.Errorf("%w: an age identity was given where the key file's path goes: "+
			"put it in a file (a Secret's key, mounted read-only) and give that file's path", ErrKeyFile)
	}
	b, err := readBounded(path)
	if err != nil {
		return nil, err
	}
	defer clear(b)
	k := &Keys{path: path}
	// A byte order mark, which an editor on Windows may put before the
	// first line, is not part of it.
	if bytes.HasPrefix(b, []byte("\ufeff")) {
		k.unportable = "it starts with a byte order mark"
	}
	sc := bufio.NewScanner(bytes.NewReader(bytes.TrimPrefix(b, []byte("\ufeff"))))
	sc.Buffer(make([]byte, 0, MaxKeyFile), MaxKeyFile)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line != sc.Text() && k.unportable == "" {
			k.unportable = fmt.Sprintf("line %d has spaces or tabs before or after its text", n)
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var id age.Identity
		var r age.Recipient
		switch {
		case strings.HasPrefix(line, "AGE-SECRET-KEY-PQ-1"):
			h, err := age.ParseHybridIdentity(line)
			if err == nil {
				id, r = h, h.Recipient()
			}
		case strings.HasPrefix(line, "AGE-SECRET-KEY-1"):
			x, err := age.ParseX25519Identity(line)
			if err == nil {
				id, r = x, x.Recipient()
			}
		}
		if id == nil {
			// The line is never quoted: it may be a key with a typo.
			return nil, fmt.Errorf("%w: %s: line %d is not an age identity (AGE-SECRET-KEY-1..., as age-keygen writes it)%s", ErrKeyFile, path, n, notIdentityHint(line))
		}
		k.identities = append(k.identities, id)
		k.macKeys = append(k.macKeys, objectMACKey(line))
		if k.recipient == nil {
			k.recipient = r
		}
	}
	if len(k.identities) == 0 {
		return nil, fmt.Errorf("%w: %s holds no age identity: put the output of age-keygen there (AGE-SECRET-KEY-1...)", ErrKeyFile, path)
	}
	return k, nil
}

// notIdentityHint says what a line that is not an identity looks like
// instead, for the mistakes a user makes with age's files, without quoting
// it.
func notIdentityHint(line string) string {
	switch {
	case strings.HasPrefix(line, "age1"):
		return ": it is a recipient, the public half; the key file needs the identity age-keygen wrote beside it"
	case strings.HasPrefix(line, "age-encryption.org/"), strings.HasPrefix(line, "-----BEGIN AGE ENCRYPTED FILE-----"):
		return ": the file is itself encrypted (age -p); store the identity unencrypted in the Secret"
	case strings.HasPrefix(line, "AGE-PLUGIN-"):
		return ": plugin identities (hardware keys) are not supported, the archiver runs unattended"
	case strings.HasPrefix(line, "-----BEGIN"):
		return ": SSH and PEM keys are not supported"
	case strings.HasPrefix(line, "age-secret-key-"):
		return ": identities are written in capitals, as age-keygen writes them"
	case strings.HasPrefix(line, "AGE-SECRET-KEY-"):
		return ": it starts like one, so look for a typo or a cut line"
	}
	return ""
}

// readBounded reads path: a regular file of at most MaxKeyFile bytes
// (secretfile.Read's rule).
func readBounded(path string) ([]byte, error) {
	b, err := secretfile.Read(path, MaxKeyFile)
	switch {
	case err == nil:
		return b, nil
	case errors.Is(err, secretfile.ErrNotRegular), errors.Is(err, secretfile.ErrTooLarge):
		return nil, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if errors.Is(err, fs.ErrPermission) {
		return nil, fmt.Errorf("%w: %w (the file is there, but the archiver's user may not read it: make it readable "+
			"to that user; the components mount the Secret with defaultMode 0400 and the pod's fsGroup, which gives "+
			"the group read)", ErrKeyFile, err)
	}
	return nil, fmt.Errorf("%w: %w (mount the encryption Secret there)", ErrKeyFile, err)
}

// first returns the Keys of k's first identity alone: what k encrypts to.
func (k *Keys) first() *Keys {
	if len(k.identities) == 1 {
		return k
	}
	return &Keys{path: k.path, identities: k.identities[:1], recipient: k.recipient, macKeys: k.macKeys[:1]}
}

// Decrypt returns the plaintext of the age stream r, read with any of the
// key file's identities. None opens it: ErrWrongKey. A header that does
// not parse or authenticate: ErrCorrupt. The reader's errors on a payload
// that does not authenticate or is cut wrap ErrCorrupt.
func (k *Keys) Decrypt(r io.Reader) (io.Reader, error) {
	src := &readErr{r: r}
	br := bufio.NewReaderSize(src, maxHeaderPeek)
	pr, ok, err := openPayload(br, k.identities)
	if !ok {
		// A header openPayload does not read: age reads the whole file.
		pr, err = age.Decrypt(br, k.identities...)
	}
	if err != nil {
		if src.err != nil {
			return nil, src.err // the source failed: I/O, not the archive
		}
		var nm *age.NoIdentityMatchError
		if errors.As(err, &nm) {
			return nil, fmt.Errorf("%w: none of the identities of %s is a recipient of it (is it the server's key?)", ErrWrongKey, k.path)
		}
		return nil, fmt.Errorf("%w: age header: %v", ErrCorrupt, err)
	}
	return &payload{r: pr, src: src}, nil
}

// IsEncrypted reports whether head (the first bytes of an archive) starts
// an age file.
func IsEncrypted(head []byte) bool { return bytes.HasPrefix(head, []byte(ageMagic)) }

// ageMagic starts every age file (its header's version line).
const ageMagic = "age-encryption.org/v1\n"

// HeadSize is how many bytes IsEncrypted needs.
const HeadSize = len(ageMagic)

// readErr remembers the error of the source, so a failure to read is
// told from ciphertext that does not authenticate.
type readErr struct {
	r   io.Reader
	err error
}

func (e *readErr) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

// payload wraps age's reader: its errors are the source's when reading
// failed, else ErrCorrupt.
type payload struct {
	r   io.Reader
	src *readErr
}

func (p *payload) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if err != nil && err != io.EOF {
		if p.src.err != nil {
			return n, p.src.err
		}
		return n, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return n, err
}
