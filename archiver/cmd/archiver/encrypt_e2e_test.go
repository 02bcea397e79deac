package main

// End-to-end tests of encryption (issue 28): both formats, the folder and
// the S3 store, the red-team cases (a wrong key, a tampered or truncated
// ciphertext, a hostile key file), rotation and crypto-shredding, and the
// key never in any output.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"filippo.io/age"

	"github.com/worldbackup/worldbackup/archiver/crypt"
	"github.com/worldbackup/worldbackup/internal/pgtest"
	"github.com/worldbackup/worldbackup/jobapi"
)

// keyFile writes an age identity file as age-keygen does and returns its
// path and the secret key's text.
func keyFile(t *testing.T) (path, secret string) {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "key.txt")
	writeConfig(t, path, "# created: 2026-12-02T00:00:00Z\n# public key: "+id.Recipient().String()+"\n"+id.String()+"\n")
	return path, id.String()
}

// outputs collects what the archiver printed, to check no key is in it.
type outputs struct{ all []string }

func (o *outputs) run(t *testing.T, args ...string) result {
	t.Helper()
	r := archiver(t, args...)
	o.all = append(o.all, r.stdout, r.stderr)
	return r
}

// noKeyIn fails when a secret, or any age secret key, is in the outputs
// or the files given (termination logs).
func (o *outputs) noKeyIn(t *testing.T, secrets []string, files ...string) {
	t.Helper()
	texts := append([]string(nil), o.all...)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil {
			texts = append(texts, string(b))
		}
	}
	for _, s := range texts {
		for _, k := range secrets {
			if strings.Contains(s, k) || strings.Contains(strings.ToUpper(s), k[len("AGE-SECRET-KEY-1"):len("AGE-SECRET-KEY-1")+12]) {
				t.Fatalf("a secret key is in the output:\n%s", s)
			}
		}
		if id := jobapi.MaskIdentitiesString(s); id != s {
			t.Fatalf("an age secret key is in the output:\n%s", s)
		}
	}
}

// TestEncryptedEndToEnd: for each format, an encrypted backup restores
// with its key and only with it; verify and export need it; a tampered or
// truncated ciphertext is refused (exit 3), a wrong key or none is a
// usage error (exit 2), the world untouched either way; the key is never
// in any output.
func TestEncryptedEndToEnd(t *testing.T) {
	for _, format := range []string{"tar", "chunked"} {
		t.Run(format, func(t *testing.T) {
			e := newEnv(t, pgtest.URL(t))
			generateRestorableWorld(t, e.world)
			want := snapshot(t, e.world, defaultExcluded)
			key, secret := keyFile(t)
			wrong, wrongSecret := keyFile(t)
			var out outputs
			if r := out.run(t, e.backupArgs("e1", "--format", format, "--encryption-key-file", key)...); r.code != 0 {
				t.Fatalf("backup exited %d:\n%s", r.code, r.stderr)
			}
			rs := rows(t, e.url)
			if len(rs) != 1 {
				t.Fatalf("rows %+v", rs)
			}
			ref, sum := rs[0].ArchiveRef, rs[0].SHA256
			if format == "tar" {
				if ref != e.archivePath("e1", ".tar.zst.age") {
					t.Fatalf("archive_ref %s, want <run>.tar.zst.age", ref)
				}
				b, err := os.ReadFile(ref)
				if err != nil {
					t.Fatal(err)
				}
				if s := sha256.Sum256(b); hex.EncodeToString(s[:]) != sum || !bytes.HasPrefix(b, []byte("age-encryption.org/v1\n")) {
					t.Fatalf("the row's checksum is not the age file's")
				}
			}

			// populated is a world a refused restore must leave as it is.
			populated := func(t *testing.T) (string, []string) {
				into := filepath.Join(t.TempDir(), "world")
				writeFile := func(rel, s string) {
					if err := os.MkdirAll(filepath.Dir(filepath.Join(into, rel)), 0o755); err != nil {
						t.Fatal(err)
					}
					writeConfig(t, filepath.Join(into, rel), s)
				}
				writeFile("level.dat", "the old world")
				return into, files(t, into)
			}
			// untouched fails unless into holds what populated wrote.
			untouched := func(t *testing.T, into string, before []string) {
				t.Helper()
				b, err := os.ReadFile(filepath.Join(into, "level.dat"))
				if got := files(t, into); err != nil || string(b) != "the old world" || strings.Join(got, ",") != strings.Join(before, ",") {
					t.Errorf("the world was touched: %v, level.dat %q (%v)", got, b, err)
				}
			}

			t.Run("restore", func(t *testing.T) {
				into := filepath.Join(t.TempDir(), "restored")
				if r := out.run(t, restoreArgs(ref, sum, into, "--encryption-key-file", key)...); r.code != 0 {
					t.Fatalf("restore exited %d:\n%s", r.code, r.stderr)
				}
				compareTrees(t, snapshot(t, into, nil), want)
			})
			t.Run("verify", func(t *testing.T) {
				if r := out.run(t, "verify", "--run-id", "e1", "--config", e.config, "--encryption-key-file", key); r.code != 0 {
					t.Fatalf("verify exited %d:\n%s%s", r.code, r.stdout, r.stderr)
				}
				if r := out.run(t, "verify", "--run-id", "e1", "--config", e.config); r.code != 2 {
					t.Fatalf("verify without the key exited %d, want 2:\n%s%s", r.code, r.stdout, r.stderr)
				}
				// A run verified by its ID takes the key file from the
				// felis.toml that names its catalog.
				b, err := os.ReadFile(e.config)
				if err != nil {
					t.Fatal(err)
				}
				withKey := filepath.Join(t.TempDir(), "felis.toml")
				writeConfig(t, withKey, string(b)+fmt.Sprintf("encryption_key_file = %q\n", key))
				if r := out.run(t, "verify", "--run-id", "e1", "--config", withKey); r.code != 0 {
					t.Fatalf("verify with felis.toml's key file exited %d:\n%s%s", r.code, r.stdout, r.stderr)
				}
			})
			for name, tc := range map[string]struct {
				args []string
				says string
			}{
				"wrong key": {[]string{"--encryption-key-file", wrong}, "does not open"},
				"no key":    {nil, "is encrypted: pass --encryption-key-file"},
			} {
				t.Run(name, func(t *testing.T) {
					into, before := populated(t)
					r := out.run(t, restoreArgs(ref, sum, into, append(tc.args, "--replace")...)...)
					if r.code != 2 || !strings.Contains(r.stderr, tc.says) {
						t.Fatalf("restore exited %d, want 2 saying %q:\n%s", r.code, tc.says, r.stderr)
					}
					untouched(t, into, before)
				})
			}
			t.Run("tampered", func(t *testing.T) {
				victim := ref
				if format == "chunked" {
					victim = packsOf(t, e.root)[0]
				}
				orig, err := os.ReadFile(victim)
				if err != nil {
					t.Fatal(err)
				}
				defer writeConfig(t, victim, string(orig))
				cases := map[string][]byte{
					"flipped":   append(append([]byte(nil), orig[:len(orig)/2]...), append([]byte{orig[len(orig)/2] ^ 1}, orig[len(orig)/2+1:]...)...),
					"truncated": orig[:len(orig)/2],
				}
				for name, bad := range cases {
					t.Run(name, func(t *testing.T) {
						if err := os.WriteFile(victim, bad, 0o644); err != nil {
							t.Fatal(err)
						}
						sums := []string{sum}
						if format == "tar" {
							// Someone who can write the catalog too: the checksum
							// of the tampered bytes; age refuses them.
							s := sha256.Sum256(bad)
							sums = append(sums, hex.EncodeToString(s[:]))
						}
						for _, s := range sums {
							into, before := populated(t)
							r := out.run(t, restoreArgs(ref, s, into, "--replace", "--encryption-key-file", key)...)
							if r.code != 3 {
								t.Fatalf("restore of a %s ciphertext exited %d, want 3:\n%s", name, r.code, r.stderr)
							}
							untouched(t, into, before)
						}
					})
				}
			})
			if format == "chunked" {
				t.Run("export needs the key", func(t *testing.T) {
					cmd := exec.CommandContext(t.Context(), archiverBin, "export", "--archive", ref, "--sha256", sum, "--encryption-key-file", key)
					var stdout, stderr bytes.Buffer
					cmd.Stdout, cmd.Stderr = &stdout, &stderr
					if err := cmd.Run(); err != nil || stdout.Len() < 1024 {
						t.Fatalf("export: %v\n%s", err, stderr.String())
					}
					out.all = append(out.all, stderr.String())
					if r := out.run(t, "export", "--archive", ref, "--sha256", sum); r.code != 2 {
						t.Fatalf("export without the key exited %d, want 2:\n%s", r.code, r.stderr)
					}
				})
				t.Run("rekey then shred", func(t *testing.T) {
					next, nextSecret := keyFile(t)
					before := packDigest(t, e.root)
					if r := out.run(t, "rekey", "--server", "survival", "--config", e.config, "--archive-root", e.root,
						"--encryption-key-file", key, "--new-encryption-key-file", next); r.code != 0 {
						t.Fatalf("rekey exited %d:\n%s%s", r.code, r.stdout, r.stderr)
					}
					if packDigest(t, e.root) != before {
						t.Error("rekey changed a pack")
					}
					into := filepath.Join(t.TempDir(), "restored")
					if r := out.run(t, restoreArgs(ref, sum, into, "--encryption-key-file", next)...); r.code != 0 {
						t.Fatalf("restore with the new key exited %d:\n%s", r.code, r.stderr)
					}
					into2, before2 := populated(t)
					if r := out.run(t, restoreArgs(ref, sum, into2, "--replace", "--encryption-key-file", key)...); r.code != 2 {
						t.Fatalf("restore with the old key after the rotation exited %d, want 2:\n%s", r.code, r.stderr)
					}
					untouched(t, into2, before2)
					// A second run with the new key deduplicates against the first.
					if r := out.run(t, e.backupArgs("e2", "--format", format, "--encryption-key-file", next)...); r.code != 0 {
						t.Fatalf("backup after the rotation exited %d:\n%s", r.code, r.stderr)
					}
					if s := summary(t, e.tlog); s["added_bytes"].(float64) > 2<<20 {
						t.Errorf("the run after the rotation added %v bytes: no dedup", s["added_bytes"])
					}

					// Crypto-shredding: the key object gone, every run is unreadable;
					// list and prune still work on the rows.
					if err := os.Remove(filepath.Join(e.root, "_chunked/keys/survival.key")); err != nil {
						t.Fatal(err)
					}
					into3, before3 := populated(t)
					if r := out.run(t, restoreArgs(ref, sum, into3, "--replace", "--encryption-key-file", next)...); r.code != 2 ||
						!strings.Contains(r.stderr, "shredded") || strings.Contains(r.stderr, "pass --encryption-key-file") {
						t.Fatalf("restore of a shredded run exited %d, want 2:\n%s", r.code, r.stderr)
					}
					untouched(t, into3, before3)
					if r := out.run(t, "list", "--server", "survival", "--config", e.config); r.code != 0 || !strings.Contains(r.stdout, "e2") {
						t.Fatalf("list exited %d:\n%s%s", r.code, r.stdout, r.stderr)
					}
					if r := out.run(t, "prune", "--server", "survival", "--keep-last", "1", "--min-keep", "1", "--grace", "1ns",
						"--config", e.config, "--archive-root", e.root, "--termination-log", ""); r.code != 0 {
						t.Fatalf("prune exited %d:\n%s%s", r.code, r.stdout, r.stderr)
					}
					if rs := rows(t, e.url); len(rs) != 1 || rs[0].RunID != "e2" {
						t.Fatalf("rows after prune: %+v", rs)
					}
					out.noKeyIn(t, []string{nextSecret}, e.tlog)
				})
			}
			if format == "tar" {
				t.Run("age CLI restores without our tools", func(t *testing.T) {
					ageBin := buildAge(t)
					into := t.TempDir()
					cmd := exec.CommandContext(t.Context(), "sh", "-c", `"$0" -d -i "$1" "$2" | tar --zstd -x -C "$3"`, ageBin, key, ref, into)
					if b, err := cmd.CombinedOutput(); err != nil {
						t.Fatalf("age -d | tar --zstd -x: %v\n%s", err, b)
					}
					compareTrees(t, snapshot(t, into, nil), want)
				})
				t.Run("prune removes encrypted archives", func(t *testing.T) {
					if r := out.run(t, e.backupArgs("e2", "--encryption-key-file", key)...); r.code != 0 {
						t.Fatalf("backup exited %d:\n%s", r.code, r.stderr)
					}
					if r := out.run(t, "prune", "--server", "survival", "--keep-last", "1", "--min-keep", "1", "--grace", "1ns",
						"--config", e.config, "--archive-root", e.root, "--termination-log", ""); r.code != 0 {
						t.Fatalf("prune exited %d:\n%s%s", r.code, r.stdout, r.stderr)
					}
					if _, err := os.Stat(ref); !os.IsNotExist(err) {
						t.Errorf("the pruned run's archive %s is still there (%v)", ref, err)
					}
				})
			}
			out.noKeyIn(t, []string{secret, wrongSecret}, e.tlog)
		})
	}
}

// packDigest hashes every pack's bytes below root.
func packDigest(t *testing.T, root string) string {
	t.Helper()
	h := sha256.New()
	for _, p := range packsOf(t, root) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		h.Write([]byte(p))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// buildAge builds the age CLI (filippo.io/age/cmd/age, the module's own
// version) into a temp folder. Outside CI, a machine that cannot fetch it
// skips; in CI it fails.
func buildAge(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.CommandContext(t.Context(), "go", "install", "filippo.io/age/cmd/age@v1.3.2")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-buildvcs=false")
	if b, err := cmd.CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("building the age CLI: %v\n%s", err, b)
		}
		t.Skipf("cannot build the age CLI: %v\n%s", err, b)
	}
	return filepath.Join(dir, "age")
}

// TestEncryptionKeyFileRefused: a key file that is a device, a FIFO, too
// large, empty or not an identity, or the flag given empty, is a usage
// error (exit 2) naming the file, read at most MaxKeyFile bytes, never
// quoted.
func TestEncryptionKeyFileRefused(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge")
	writeConfig(t, huge, strings.Repeat("#", crypt.MaxKeyFile+1))
	typo := filepath.Join(dir, "typo")
	writeConfig(t, typo, "AGE-SECRET-KEY-1NOTAKEYXYZZY\n")
	empty := filepath.Join(dir, "empty")
	writeConfig(t, empty, "# nothing\n")
	for name, tc := range map[string]struct{ path, says string }{
		"device":       {"/dev/zero", "not a regular file"},
		"fifo":         {fifo, "not a regular file"},
		"huge":         {huge, fmt.Sprintf("larger than %d bytes", crypt.MaxKeyFile)},
		"not a key":    {typo, "line 1 is not an age identity"},
		"no identity":  {empty, "holds no age identity"},
		"missing file": {filepath.Join(dir, "missing"), "no such file"},
		// A variable that expanded to nothing: not encryption turned off.
		"given empty": {"", "given empty"},
	} {
		t.Run(name, func(t *testing.T) {
			for _, args := range [][]string{
				e.backupArgs("k1", "--encryption-key-file", tc.path),
				restoreArgs(filepath.Join(e.root, "x.tar.zst.age"), strings.Repeat("0", 64), t.TempDir(), "--encryption-key-file", tc.path),
				{"verify", "--archive", filepath.Join(e.root, "x.tar.zst.age"), "--sha256", strings.Repeat("0", 64), "--encryption-key-file", tc.path},
				{"export", "--archive", filepath.Join(e.root, "_chunked/runs/survival/x.manifest"), "--sha256", strings.Repeat("0", 64), "--encryption-key-file", tc.path},
			} {
				r := archiver(t, args...)
				if r.code != 2 || !strings.Contains(r.stderr, tc.says) || !strings.Contains(r.stderr, tc.path) {
					t.Errorf("%s exited %d, want 2 saying %q:\n%s", args[0], r.code, tc.says, r.stderr)
				}
				if strings.Contains(r.stderr, "NOTAKEYXYZZY") {
					t.Errorf("%s quoted the key file:\n%s", args[0], r.stderr)
				}
			}
		})
	}
	if len(rows(t, e.url)) != 0 {
		t.Error("a refused backup recorded a run")
	}
}

// TestS3Encrypted: both formats round-trip through the S3 store
// encrypted; a wrong key is refused (exit 2).
func TestS3Encrypted(t *testing.T) {
	e := newS3Env(t)
	generateRestorableWorld(t, e.world)
	want := snapshot(t, e.world, defaultExcluded)
	key, secret := keyFile(t)
	wrong, _ := keyFile(t)
	var out outputs
	for _, format := range []string{"tar", "chunked"} {
		t.Run(format, func(t *testing.T) {
			run := "s3e-" + format
			if r := out.run(t, e.args(run, "--format", format, "--encryption-key-file", key)...); r.code != 0 {
				t.Fatalf("backup exited %d:\n%s", r.code, r.stderr)
			}
			var ref, sum string
			for _, r := range rows(t, e.url) {
				if r.RunID == run {
					ref, sum = r.ArchiveRef, r.SHA256
				}
			}
			if format == "tar" && ref != e.ref(run)+".age" {
				t.Fatalf("archive_ref %s, want %s.age", ref, e.ref(run))
			}
			into := filepath.Join(t.TempDir(), "restored")
			if r := out.run(t, append(restoreArgs(ref, sum, into, "--encryption-key-file", key), e.s3Flags()...)...); r.code != 0 {
				t.Fatalf("restore exited %d:\n%s", r.code, r.stderr)
			}
			compareTrees(t, snapshot(t, into, nil), want)
			into2 := filepath.Join(t.TempDir(), "refused")
			if r := out.run(t, append(restoreArgs(ref, sum, into2, "--encryption-key-file", wrong), e.s3Flags()...)...); r.code != 2 {
				t.Fatalf("restore with a wrong key exited %d, want 2:\n%s", r.code, r.stderr)
			}
			if got := files(t, into2); len(got) != 0 {
				t.Errorf("a refused restore left %v", got)
			}
			if r := out.run(t, "verify", "--run-id", run, "--config", e.config, "--encryption-key-file", key); r.code != 0 {
				t.Fatalf("verify exited %d:\n%s%s", r.code, r.stdout, r.stderr)
			}
			if format == "chunked" {
				// The Secret rotated: the next backup rewraps the data key
				// object in the bucket; the new identity alone then opens
				// the run from before.
				next, nextSecret := keyFile(t)
				rotated := filepath.Join(t.TempDir(), "rotated.txt")
				writeConfig(t, rotated, nextSecret+"\n"+secret+"\n")
				if r := out.run(t, e.args(run+"-2", "--format", format, "--encryption-key-file", rotated)...); r.code != 0 ||
					!strings.Contains(r.stderr, "rewrapped the server's data key") {
					t.Fatalf("backup after the rotation exited %d (or did not rewrap):\n%s", r.code, r.stderr)
				}
				into3 := filepath.Join(t.TempDir(), "rotated")
				if r := out.run(t, append(restoreArgs(ref, sum, into3, "--encryption-key-file", next), e.s3Flags()...)...); r.code != 0 {
					t.Fatalf("restore with the new identity alone exited %d:\n%s", r.code, r.stderr)
				}
				compareTrees(t, snapshot(t, into3, nil), want)
				out.noKeyIn(t, []string{nextSecret}, e.tlog)
			}
		})
	}
	out.noKeyIn(t, []string{secret}, e.tlog)
}

// TestEncryptionRotatesWithTheSecret: the rotation a Kubernetes user does,
// editing the Secret: the new identity first, the old on a later line.
// The next chunked backup rewraps the server's data key object to the new
// identity (no pack touched, dedup kept); after it the new identity alone
// opens every run, old and new, and the old alone opens none; tar runs
// made before the rotation still restore with the rotated file.
func TestEncryptionRotatesWithTheSecret(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateRestorableWorld(t, e.world)
	want := snapshot(t, e.world, defaultExcluded)
	oldKey, oldSecret := keyFile(t)
	newKey, newSecret := keyFile(t)
	rotated := filepath.Join(t.TempDir(), "rotated.txt")
	writeConfig(t, rotated, "# the new identity first; the old one until the rotation is done\n"+newSecret+"\n"+oldSecret+"\n")
	var out outputs
	backup := func(t *testing.T, run, format, key string) result {
		t.Helper()
		r := out.run(t, e.backupArgs(run, "--format", format, "--encryption-key-file", key)...)
		if r.code != 0 {
			t.Fatalf("backup %s exited %d:\n%s", run, r.code, r.stderr)
		}
		return r
	}
	restore := func(t *testing.T, run, key string) int {
		t.Helper()
		var ref, sum string
		for _, row := range rows(t, e.url) {
			if row.RunID == run {
				ref, sum = row.ArchiveRef, row.SHA256
			}
		}
		into := filepath.Join(t.TempDir(), "restored")
		r := out.run(t, restoreArgs(ref, sum, into, "--encryption-key-file", key)...)
		if r.code == 0 {
			compareTrees(t, snapshot(t, into, nil), want)
		}
		return r.code
	}
	const rewrapped = "rewrapped the server's data key"

	backup(t, "c1", "chunked", oldKey)
	backup(t, "t1", "tar", oldKey)
	packs := packDigest(t, e.root)

	r := backup(t, "c2", "chunked", rotated)
	if !strings.Contains(r.stderr, rewrapped) {
		t.Errorf("the first chunked backup after the rotation did not say it rewrapped the key:\n%s", r.stderr)
	}
	if packDigest(t, e.root) != packs {
		t.Error("the rotation touched a pack (or the unchanged world added one)")
	}
	if r := backup(t, "c3", "chunked", rotated); strings.Contains(r.stderr, rewrapped) {
		t.Errorf("the next backup rewrapped again:\n%s", r.stderr)
	}
	backup(t, "t2", "tar", rotated)

	for _, tc := range []struct {
		run, key, who string
		want          int
	}{
		{"c1", newKey, "the new identity alone, a run from before the rotation", 0},
		{"c3", newKey, "the new identity alone, a run from after it", 0},
		{"c1", oldKey, "the old identity alone, after the rotation", 2},
		{"t1", rotated, "the rotated file, a tar run encrypted to the old identity", 0},
		{"t2", newKey, "the new identity alone, a tar run from after the rotation", 0},
		{"t2", oldKey, "the old identity alone, a tar run from after the rotation", 2},
	} {
		t.Run(tc.run+" "+tc.who, func(t *testing.T) {
			if got := restore(t, tc.run, tc.key); got != tc.want {
				t.Errorf("restore exited %d, want %d", got, tc.want)
			}
		})
	}
	out.noKeyIn(t, []string{oldSecret, newSecret}, e.tlog)
}

// TestDamagedKeyObject: a server's data key object cut short (its
// ciphertext no longer authenticates) is damage, not a key problem: a
// restore, verify or export of a sealed run exits 3 and leaves the world
// as it was; a run of the same server in the clear restores as always
// with the key file given (a restore Job passes it whenever the component
// has encryption), as no key is needed to read it; a backup of the server
// exits 2 and leaves the object alone.
func TestDamagedKeyObject(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateRestorableWorld(t, e.world)
	want := snapshot(t, e.world, defaultExcluded)
	key, secret := keyFile(t)
	var out outputs
	for _, args := range [][]string{e.backupArgs("plain"), e.backupArgs("sealed", "--encryption-key-file", key)} {
		if r := out.run(t, args...); r.code != 0 {
			t.Fatalf("backup exited %d:\n%s", r.code, r.stderr)
		}
	}
	refs := map[string]row{}
	for _, r := range rows(t, e.url) {
		refs[r.RunID] = r
	}
	obj := filepath.Join(e.root, "_chunked/keys/survival.key")
	b, err := os.ReadFile(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(obj, b[:len(b)-8], 0o600); err != nil {
		t.Fatal(err)
	}

	sealed := refs["sealed"]
	into := filepath.Join(t.TempDir(), "world")
	before := oldWorld(t, into)
	if r := out.run(t, restoreArgs(sealed.ArchiveRef, sealed.SHA256, into, "--replace", "--encryption-key-file", key)...); r.code != 3 ||
		!strings.Contains(r.stderr, "data key object") {
		t.Fatalf("restore of a sealed run whose key object is cut exited %d, want 3 naming the key object:\n%s", r.code, r.stderr)
	}
	untouched(t, into, before, "world")
	if r := out.run(t, "verify", "--archive", sealed.ArchiveRef, "--sha256", sealed.SHA256, "--encryption-key-file", key); r.code != 3 {
		t.Errorf("verify of that run exited %d, want 3:\n%s", r.code, r.stderr)
	}

	plain := refs["plain"]
	restored := filepath.Join(t.TempDir(), "restored")
	if r := out.run(t, restoreArgs(plain.ArchiveRef, plain.SHA256, restored, "--encryption-key-file", key)...); r.code != 0 {
		t.Fatalf("restore of the run in the clear, its server's key object cut, exited %d, want 0:\n%s", r.code, r.stderr)
	}
	compareTrees(t, snapshot(t, restored, nil), want)

	// A backup neither seals with nor replaces a damaged key object: exit
	// 2 naming it, nothing recorded, the object as it was (a spare or an
	// old bucket version may still hold the key).
	cut, err := os.ReadFile(obj)
	if err != nil {
		t.Fatal(err)
	}
	if r := out.run(t, e.backupArgs("after-cut", "--encryption-key-file", key)...); r.code != 2 ||
		!strings.Contains(r.stderr, "survival.key") {
		t.Errorf("backup with the key object cut exited %d, want 2 naming the key object:\n%s", r.code, r.stderr)
	}
	for _, r := range rows(t, e.url) {
		if r.RunID == "after-cut" {
			t.Errorf("the backup refused for its damaged key object recorded %+v", r)
		}
	}
	if after, err := os.ReadFile(obj); err != nil || !bytes.Equal(after, cut) {
		t.Errorf("the backup changed the damaged key object (err %v)", err)
	}

	// A FIFO or a folder planted at the key object or the manifest is
	// damage too, not a failure a retry could mend (exit 1): restore 3,
	// backup 2, none of them waiting on it.
	plant := func(path string, fifo bool) {
		t.Helper()
		err := os.RemoveAll(path)
		if err != nil {
			t.Fatal(err)
		}
		if fifo {
			err = syscall.Mkfifo(path, 0o600)
		} else {
			err = os.Mkdir(path, 0o700)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, fifo := range []bool{true, false} {
		plant(obj, fifo)
		if r := out.run(t, restoreArgs(sealed.ArchiveRef, sealed.SHA256, into, "--replace", "--encryption-key-file", key)...); r.code != 3 {
			t.Errorf("restore with a FIFO (%v) or folder at the key object exited %d, want 3:\n%s", fifo, r.code, r.stderr)
		}
		untouched(t, into, before, "world")
		if r := out.run(t, e.backupArgs("after-plant", "--encryption-key-file", key)...); r.code != 2 {
			t.Errorf("backup with a FIFO (%v) or folder at the key object exited %d, want 2:\n%s", fifo, r.code, r.stderr)
		}
		plant(plain.ArchiveRef, fifo)
		if r := out.run(t, restoreArgs(plain.ArchiveRef, plain.SHA256, into, "--replace")...); r.code != 3 {
			t.Errorf("restore with a FIFO (%v) or folder at the manifest exited %d, want 3:\n%s", fifo, r.code, r.stderr)
		}
		untouched(t, into, before, "world")
	}
	out.noKeyIn(t, []string{secret}, e.tlog)
}

// TestReplacedKeyObject: a key object that holds another key than the
// server's previous run was sealed with, made with the key file's identity
// (its MAC says so), is taken with a warning naming that run: the run
// reads and stores every file again, and the object is left as it is.
// This is what a shred leaves when a run that was still going with the old
// key finishes after the next run made a new key; the object is never
// removed, so the runs sealed with the new key stay readable (the advice
// to remove it, which this used to give, would have shredded them too).
// Removed (crypto-shredding), a new key is made and the run says so; the
// key dropped, the run goes on in the clear and says so.
func TestReplacedKeyObject(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateRestorableWorld(t, e.world)
	want := snapshot(t, e.world, defaultExcluded)
	key, secret := keyFile(t)
	var out outputs
	backup := func(runID string, args ...string) result {
		t.Helper()
		r := out.run(t, e.backupArgs(runID, args...)...)
		if r.code != 0 {
			t.Fatalf("backup %s exited %d:\n%s", runID, r.code, r.stderr)
		}
		return r
	}
	backup("s1", "--encryption-key-file", key)
	obj := filepath.Join(e.root, "_chunked/keys/survival.key")
	first, err := os.ReadFile(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(obj); err != nil {
		t.Fatal(err)
	}
	if r := backup("s2", "--encryption-key-file", key); !strings.Contains(r.stderr, "was gone") {
		t.Fatalf("backup after the key object was removed does not say a new key was made:\n%s", r.stderr)
	}
	second, err := os.ReadFile(obj)
	if err != nil {
		t.Fatal(err)
	}
	// s3 stands for the run that was still going with the first key: it
	// is recorded after s2, sealed with the first key.
	if err := os.WriteFile(obj, first, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := backup("s3", "--encryption-key-file", key); !strings.Contains(r.stderr, "sealed with another data key") ||
		!strings.Contains(r.stderr, `"previous_run":"s2"`) {
		t.Fatalf("backup with the first key object put back does not warn naming s2:\n%s", r.stderr)
	}
	// The shred's outcome: the second key's object, the newest run sealed
	// with the first key.
	if err := os.WriteFile(obj, second, 0o600); err != nil {
		t.Fatal(err)
	}
	r := backup("s4", "--encryption-key-file", key)
	if !strings.Contains(r.stderr, "sealed with another data key") || !strings.Contains(r.stderr, `"previous_run":"s3"`) {
		t.Fatalf("backup after a run sealed with the shredded key does not warn naming s3:\n%s", r.stderr)
	}
	if !strings.Contains(r.stderr, `"reused_files":0`) {
		t.Errorf("backup after a key change reused files of a run it cannot read:\n%s", r.stderr)
	}
	if after, err := os.ReadFile(obj); err != nil || !bytes.Equal(after, second) {
		t.Fatalf("the backup changed the key object (err %v)", err)
	}
	rs := rows(t, e.url)
	if len(rs) != 4 {
		t.Fatalf("rows %+v, want s1 to s4", rs)
	}
	for _, tc := range []struct {
		run  row
		code int
	}{{rs[1], 0}, {rs[3], 0}, {rs[2], 2}} {
		into := filepath.Join(t.TempDir(), "restored")
		res := out.run(t, restoreArgs(tc.run.ArchiveRef, tc.run.SHA256, into, "--encryption-key-file", key)...)
		if res.code != tc.code {
			t.Fatalf("restore of %s exited %d, want %d:\n%s", tc.run.RunID, res.code, tc.code, res.stderr)
		}
		if tc.code == 0 {
			compareTrees(t, snapshot(t, into, nil), want)
		}
	}

	if err := os.Remove(obj); err != nil {
		t.Fatal(err)
	}
	if r := backup("s5", "--encryption-key-file", key); !strings.Contains(r.stderr, "was gone") {
		t.Fatalf("backup after the key object was removed does not say a new key was made:\n%s", r.stderr)
	}
	// Encryption switched off: the run goes on in the clear, saying so.
	if r := backup("s6"); !strings.Contains(r.stderr, "this run stores every file in the clear") {
		t.Fatalf("backup without the key after encrypted runs does not warn that it is in the clear:\n%s", r.stderr)
	}
	out.noKeyIn(t, []string{secret}, e.tlog)
}

// TestPlantedKeyObjectRefused: age does not say who encrypted and a
// server's recipient is public, so anyone who can write to the store can
// wrap a key of their own to it. A key object now carries a MAC that needs
// the identity's secret: one planted with another MAC is refused (exit 2,
// nothing recorded, the object left as it is), even with the newest
// manifest removed so that no earlier run can say the key changed. One in
// format 1, as archivers wrote before the MAC, is sealed with only when
// the newest recorded run was sealed with its key, and then rewritten in
// format 2; planted in format 1 with the newest manifest removed, it is
// refused. A restore of an earlier run refuses either planted object
// (exit 3), the world untouched.
func TestPlantedKeyObjectRefused(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateRestorableWorld(t, e.world)
	key, secret := keyFile(t)
	id, err := age.ParseX25519Identity(secret)
	if err != nil {
		t.Fatal(err)
	}
	obj := filepath.Join(e.root, "_chunked/keys/survival.key")
	// objectAs rewrites the key object as a writer holding only the
	// recipient would: magic (format), the server, dk, then tail (a MAC).
	objectAs := func(magic string, dk, tail []byte) {
		t.Helper()
		if err := os.WriteFile(obj, sealTo(t, id.Recipient(), keyObjectPlaintext(magic, dk, tail)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// plaintext opens the key object with the identity.
	plaintext := func() []byte { return openAgeFile(t, obj, id) }
	head := len("WBDK\x02") + 1 + len("survival")
	var out outputs
	if r := out.run(t, e.backupArgs("s1", "--encryption-key-file", key)...); r.code != 0 {
		t.Fatalf("backup exited %d:\n%s", r.code, r.stderr)
	}
	pt := plaintext()
	if string(pt[:5]) != "WBDK\x02" || len(pt) != head+32+32 {
		t.Fatalf("a new key object is %d bytes starting %q, want format 2 with its MAC", len(pt), pt[:5])
	}
	dk := pt[head : head+32]

	// The same key in format 1: s1 vouches for it.
	objectAs("WBDK\x01", dk, nil)
	if r := out.run(t, e.backupArgs("s2", "--encryption-key-file", key)...); r.code != 0 || !strings.Contains(r.stderr, "now authenticated") {
		t.Fatalf("backup with the server's own key in format 1 exited %d, want 0 rewriting it:\n%s", r.code, r.stderr)
	}
	if pt := plaintext(); string(pt[:5]) != "WBDK\x02" || !bytes.Equal(pt[head:head+32], dk) {
		t.Fatalf("after the backup the key object starts %q, want format 2 with the same key", pt[:5])
	}

	for _, tc := range []struct {
		name, magic string
		tail        []byte
		want        string
	}{
		{"format 2, a MAC of another key", "WBDK\x02", bytes.Repeat([]byte{9}, 32), "not written with an identity of the key file"},
		{"format 1, no MAC", "WBDK\x01", nil, "no recorded run vouches"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objectAs(tc.magic, bytes.Repeat([]byte{7}, 32), tc.tail)
			planted, err := os.ReadFile(obj)
			if err != nil {
				t.Fatal(err)
			}
			// No earlier run to say the key changed: the newest manifest
			// is gone (the row still names it).
			if err := os.Remove(filepath.Join(e.root, "_chunked/runs/survival/s2.manifest")); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			if r := out.run(t, e.backupArgs("s3", "--encryption-key-file", key)...); r.code != 2 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("backup with a planted key object exited %d, want 2 saying %q:\n%s", r.code, tc.want, r.stderr)
			}
			if after, err := os.ReadFile(obj); err != nil || !bytes.Equal(after, planted) {
				t.Errorf("the refused backup changed the planted key object (err %v)", err)
			}
			rs := rows(t, e.url)
			if len(rs) != 2 {
				t.Fatalf("rows %+v, want s1 and s2 only", rs)
			}
			// A restore of s1 refuses the run (exit 3), for either format
			// of the planted object, and leaves the world as it was.
			into := filepath.Join(t.TempDir(), "world")
			if err := os.MkdirAll(into, 0o755); err != nil {
				t.Fatal(err)
			}
			if r := out.run(t, restoreArgs(rs[0].ArchiveRef, rs[0].SHA256, into, "--encryption-key-file", key, "--replace")...); r.code != 3 {
				t.Fatalf("restore with a planted key object exited %d, want 3:\n%s", r.code, r.stderr)
			}
			if got := files(t, into); len(got) != 0 {
				t.Errorf("a refused restore left %v", got)
			}
		})
	}
	out.noKeyIn(t, []string{secret}, e.tlog)
}

// TestRekeyRefusesAPlantedFormat1Object: one who can write to the store
// and knows only the server's recipient wraps a data key of their own to
// it in format 1 (no MAC). A rekey to a new identity refuses it (exit 2,
// saying to authenticate it first, only if trusted), the object left as it
// is: rewrapped in format 2 it would carry the new identity's MAC, and
// every later run would be sealed with the planter's key while the runs
// sealed with the real one became unreadable. The next backup, with the
// Secret rotated (the new identity first, the old one after), refuses it
// too, since the server's recorded run was sealed with another key.
func TestRekeyRefusesAPlantedFormat1Object(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateRestorableWorld(t, e.world)
	oldKey, oldSecret := keyFile(t)
	oldID, err := age.ParseX25519Identity(oldSecret)
	if err != nil {
		t.Fatal(err)
	}
	newKey, newSecret := keyFile(t)
	rotated := filepath.Join(t.TempDir(), "rotated.txt")
	writeConfig(t, rotated, newSecret+"\n"+oldSecret+"\n")
	var out outputs
	if r := out.run(t, e.backupArgs("s1", "--encryption-key-file", oldKey)...); r.code != 0 {
		t.Fatalf("backup s1 exited %d:\n%s", r.code, r.stderr)
	}
	obj := filepath.Join(e.root, "_chunked/keys/survival.key")
	// openObject returns the key object's plaintext (keyObjectPlaintext).
	openObject := func() []byte { return openAgeFile(t, obj, oldID) }
	head := len("WBDK\x02") + 1 + len("survival")
	dk := openObject()[head : head+32]
	legacy := sealTo(t, oldID.Recipient(), keyObjectPlaintext("WBDK\x01", dk, nil))
	b := bytes.NewBuffer(sealTo(t, oldID.Recipient(), keyObjectPlaintext("WBDK\x01", bytes.Repeat([]byte{7}, 32), nil)))
	if err := os.WriteFile(obj, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	unchanged := func(after string) {
		t.Helper()
		if got, err := os.ReadFile(obj); err != nil || !bytes.Equal(got, b.Bytes()) {
			t.Errorf("%s changed the planted key object (err %v)", after, err)
		}
	}

	rekey := func(newFile string) result {
		return out.run(t, "rekey", "--server", "survival", "--config", e.config, "--archive-root", e.root,
			"--encryption-key-file", oldKey, "--new-encryption-key-file", newFile)
	}
	r := rekey(newKey)
	if r.code != 2 || !strings.Contains(r.stderr, "authenticate it first") {
		t.Fatalf("rekey of a planted format-1 key object exited %d, want 2 saying to authenticate it first:\n%s%s", r.code, r.stdout, r.stderr)
	}
	unchanged("the refused rekey")
	// Authenticating it in place, as that error says, is refused too: the
	// server's recorded run was sealed with another key.
	if r := rekey(oldKey); r.code != 2 || !strings.Contains(r.stderr, "was not sealed with its key") {
		t.Fatalf("rekey authenticating a planted format-1 key object exited %d, want 2 saying no run was sealed with it:\n%s%s", r.code, r.stdout, r.stderr)
	}
	unchanged("the refused authentication")
	if r := out.run(t, e.backupArgs("s2", "--encryption-key-file", rotated)...); r.code != 2 || !strings.Contains(r.stderr, "no recorded run vouches") {
		t.Fatalf("backup with the Secret rotated exited %d, want 2 refusing the planted key object:\n%s", r.code, r.stderr)
	}
	unchanged("the refused backup")
	if rs := rows(t, e.url); len(rs) != 1 || rs[0].RunID != "s1" {
		t.Errorf("rows %+v, want s1 alone: no run sealed with the planted key", rs)
	}

	// The object an earlier archiver wrote, in format 1, holding the key
	// s1 was sealed with: s1 vouches for it, and rekey authenticates it.
	if err := os.WriteFile(obj, legacy, 0o600); err != nil {
		t.Fatal(err)
	}
	// Not while s1's manifest is gone: then nothing vouches (exit 2, not
	// a failure a retry could mend).
	manifest := filepath.Join(e.root, "_chunked/runs/survival/s1.manifest")
	if err := os.Rename(manifest, manifest+".away"); err != nil {
		t.Fatal(err)
	}
	if r := rekey(oldKey); r.code != 2 || !strings.Contains(r.stderr, "cannot be read to check it") {
		t.Errorf("rekey authenticating a format-1 key object, the newest run's manifest gone, exited %d, want 2:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if err := os.Rename(manifest+".away", manifest); err != nil {
		t.Fatal(err)
	}
	if r := rekey(oldKey); r.code != 0 || !strings.Contains(r.stdout, "rewrapped") {
		t.Fatalf("rekey authenticating the real format-1 key object exited %d, want 0:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if pt := openObject(); !bytes.HasPrefix(pt, []byte("WBDK\x02")) || !bytes.Contains(pt, dk) {
		t.Errorf("after the rekey the object is not in format 2 with s1's key")
	}
	if r := rekey(oldKey); r.code != 0 || !strings.Contains(r.stdout, "nothing to do") {
		t.Errorf("a second rekey exited %d, want 0 saying there is nothing to do:\n%s%s", r.code, r.stdout, r.stderr)
	}
	out.noKeyIn(t, []string{oldSecret, newSecret}, e.tlog)
}

// TestSwitchedOffEncryptionWarns: a backup without a key after an encrypted
// run of its server (the key file's setting or the component's encryption
// input dropped) goes on in the clear and says so, naming that run, in the
// tar format too, whose runs share nothing; once the newest run is in the
// clear, the next says nothing.
func TestSwitchedOffEncryptionWarns(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateRestorableWorld(t, e.world)
	key, secret := keyFile(t)
	var out outputs
	const warning = "the server's previous run is encrypted and this one is not: this run is stored in the clear"
	for _, tc := range []struct {
		run, format string
		key         bool
		warnOf      string // the previous run the warning names; "" none
	}{
		{"t1", "tar", true, ""},
		{"t2", "tar", false, "t1"},
		{"t3", "tar", false, ""},
		{"c4", "chunked", true, ""},
		{"t5", "tar", false, "c4"},
		{"t6", "tar", false, ""},
	} {
		args := []string{"--format", tc.format}
		if tc.key {
			args = append(args, "--encryption-key-file", key)
		}
		r := out.run(t, e.backupArgs(tc.run, args...)...)
		if r.code != 0 {
			t.Fatalf("backup %s exited %d:\n%s", tc.run, r.code, r.stderr)
		}
		warned := strings.Contains(r.stderr, warning)
		if want := tc.warnOf != ""; warned != want || (want && !strings.Contains(r.stderr, `"previous_run":"`+tc.warnOf+`"`)) {
			t.Errorf("backup %s (%s, key %v): warned %v, want %v naming %q:\n%s", tc.run, tc.format, tc.key, warned, want, tc.warnOf, r.stderr)
		}
	}
	out.noKeyIn(t, []string{secret}, e.tlog)
}

// TestReplacedKeyWarns: a tar backup whose key file holds none of the
// identities the server's newest tar archive is encrypted to (the key
// replaced, not rotated) goes on and says so, naming that run; a key file
// rotated as the README says (the new identity first, the old one after)
// says nothing, nor does the next run with the new key alone.
func TestReplacedKeyWarns(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateRestorableWorld(t, e.world)
	keyA, secretA := keyFile(t)
	keyB, secretB := keyFile(t)
	keyC, secretC := keyFile(t)
	rotated := filepath.Join(t.TempDir(), "rotated.txt")
	writeConfig(t, rotated, secretC+"\n"+secretB+"\n")
	var out outputs
	const warning = "the server's previous run is encrypted to none of the key file's identities"
	for _, tc := range []struct {
		run, key, warnOf string // warnOf: the previous run the warning names; "" none
	}{
		{"r1", keyA, ""},
		{"r2", keyB, "r1"},  // replaced
		{"r3", keyB, ""},    // the same key
		{"r4", rotated, ""}, // rotated: B is on the second line
		{"r5", keyC, ""},    // r4 is encrypted to C
		{"r6", keyA, "r5"},  // back to an old key, replacing C
	} {
		r := out.run(t, e.backupArgs(tc.run, "--format", "tar", "--encryption-key-file", tc.key)...)
		if r.code != 0 {
			t.Fatalf("backup %s exited %d:\n%s", tc.run, r.code, r.stderr)
		}
		warned := strings.Contains(r.stderr, warning)
		if want := tc.warnOf != ""; warned != want || (want && !strings.Contains(r.stderr, `"previous_run":"`+tc.warnOf+`"`)) {
			t.Errorf("backup %s: warned %v, want %v naming %q:\n%s", tc.run, warned, want, tc.warnOf, r.stderr)
		}
	}
	out.noKeyIn(t, []string{secretA, secretB, secretC}, e.tlog)
}

// TestPastedIdentityNeverEchoed: an age identity pasted where another value
// or no argument goes (a flag the flag package refuses and quotes, a stray
// argument that a parse error quotes, a value our own checks quote: a
// server name, a namespace, a path, an address, a checksum) is a usage
// error (exit 2) that prints it nowhere: not on stderr, not in the
// termination message.
func TestPastedIdentityNeverEchoed(t *testing.T) {
	_, secret := keyFile(t)
	pq, err := age.GenerateHybridIdentity()
	if err != nil {
		t.Fatal(err)
	}
	world, dir := t.TempDir(), t.TempDir()
	generateWorld(t, world)
	tlog := filepath.Join(dir, "termination-log")
	// A catalog nobody listens at: each case is refused before it is reached.
	config := filepath.Join(dir, "felis.toml")
	writeConfig(t, config, fmt.Sprintf("[database]\nurl = \"postgres://nobody@127.0.0.1:1/none\"\n[archive]\nlocal_path = %q\n", dir))
	backup := func(args ...string) []string {
		return append([]string{"backup", "--server", "survival", "--run-id", "r1", "--world", world,
			"--config", config, "--termination-log", tlog}, args...)
	}
	for name, args := range map[string][]string{
		"refused flag value": {"restore", "--max-bytes", secret},
		"stray argument":     {"verify", "--archive", "/nonexistent.tar.zst", "--sha256", strings.Repeat("0", 64), secret},
		"as the command":     {secret},
		"refused int":        backup("--concurrency=" + secret),
		"rekey server":       {"rekey", "--server", strings.ToLower(secret), "--encryption-key-file", "a", "--new-encryption-key-file", "b"},
		"backup server":      append(backup(), "--server", secret),
		"run ID":             append(backup(), "--run-id", secret),
		"restore run ID":     {"restore", "--run-id", secret, "--archive", filepath.Join(dir, "x.tar.zst"), "--sha256", strings.Repeat("0", 64), "--into", t.TempDir()},
		"hybrid key":         append(backup(), "--server", pq.String()),
		"namespace":          backup("--namespace", secret),
		"rcon":               backup("--rcon", secret),
		"config path":        backup("--config", filepath.Join(dir, secret)),
		"archive root":       backup("--archive-root", filepath.Join(dir, secret)),
		"prune server":       {"prune", "--server", secret, "--min-keep", "3", "--config", config, "--archive-root", dir, "--termination-log", tlog},
		"restore checksum":   {"restore", "--archive", filepath.Join(dir, "x.tar.zst"), "--sha256", secret, "--into", t.TempDir()},
	} {
		t.Run(name, func(t *testing.T) {
			os.Remove(tlog)
			var out outputs
			r := out.run(t, args...)
			if r.code != 2 {
				t.Errorf("exit %d, want 2:\n%s", r.code, r.stderr)
			}
			if !strings.Contains(r.stderr, jobapi.MaskedIdentity) && !strings.Contains(r.stderr, "run ID holds an age secret key") {
				t.Errorf("the refusal neither shows the value masked nor names the key, so it was refused for something else:\n%s", r.stderr)
			}
			out.noKeyIn(t, []string{secret, pq.String()}, tlog)
		})
	}
}

// keyObjectPlaintext returns the plaintext of server survival's data key
// object as an archiver writes it: magic (the format), the server's name,
// the data key dk, then tail (format 2's MAC).
func keyObjectPlaintext(magic string, dk, tail []byte) []byte {
	pt := append([]byte(magic), byte(len("survival")))
	return append(append(append(pt, "survival"...), dk...), tail...)
}

// openAgeFile returns the plaintext of the age file at path, opened with id.
func openAgeFile(t *testing.T, path string, id age.Identity) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := age.Decrypt(f, id)
	if err != nil {
		t.Fatal(err)
	}
	pt, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return pt
}

// sealTo returns pt encrypted with age to r.
func sealTo(t *testing.T, r age.Recipient, pt []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := age.Encrypt(&b, r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(pt); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
