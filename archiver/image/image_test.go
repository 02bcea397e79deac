package image

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"github.com/worldbackup/worldbackup/internal/testenv"
	"io"
	"io/fs"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// testVersion is stamped into the archiver built by the tests.
const testVersion = "v9.9.9-imagetest"

// archiverPkg is the real archiver, built fresh by the tests.
const archiverPkg = "github.com/worldbackup/worldbackup/archiver/cmd/archiver"

// buildArchiver builds the real archiver as scripts/image.sh does (static,
// trimmed, stamped) into a temporary folder and returns its path.
func buildArchiver(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the archiver: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "archiver")
	cmd := exec.CommandContext(t.Context(), goBin, "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -X main.version="+testVersion+" -buildid=",
		"-o", bin, archiverPkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", archiverPkg, err, out)
	}
	return bin
}

func testOptions(bin string) Options {
	return Options{
		Binary:   bin,
		Version:  testVersion,
		Revision: "0123456789abcdef0123456789abcdef01234567",
		Source:   "https://example.test/worldbackup",
		Created:  time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC),
	}
}

// unpack extracts the image's filesystem into dir (refusing unsafe names)
// and returns every entry's header by cleaned absolute path.
func unpack(t *testing.T, img v1.Image, dir string) map[string]*tar.Header {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("image has %d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	headers := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !filepath.IsLocal(hdr.Name) {
			t.Fatalf("layer entry %q is not a local path", hdr.Name)
		}
		target := filepath.Join(dir, hdr.Name)
		mode := fs.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			if hdr.Mode&0o1000 != 0 {
				mode |= fs.ModeSticky
			}
			if err := os.Chmod(target, mode); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("unexpected layer entry type %q for %s", hdr.Typeflag, hdr.Name)
		}
		headers["/"+filepath.Clean(hdr.Name)] = hdr
	}
	return headers
}

func TestImage(t *testing.T) {
	bin := buildArchiver(t)
	opts := testOptions(bin)
	img, err := Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	headers := unpack(t, img, root)

	t.Run("every file is one no mount path may hide", func(t *testing.T) {
		for p, h := range headers {
			if h.Typeflag == tar.TypeReg && !slices.Contains(jobspec.ImagePaths(), p) {
				t.Errorf("the image's %s is not in jobspec.ImagePaths: a component would let a volume hide it", p)
			}
		}
	})

	t.Run("layer files, modes, owners and times", func(t *testing.T) {
		want := map[string]int64{
			"/etc":                               0o755,
			"/etc/group":                         0o644,
			"/etc/passwd":                        0o644,
			"/etc/ssl":                           0o755,
			"/etc/ssl/certs":                     0o755,
			"/etc/ssl/certs/ca-certificates.crt": 0o644,
			"/root":                              0o700,
			"/tmp":                               0o1777,
			"/usr":                               0o755,
			"/usr/local":                         0o755,
			"/usr/local/bin":                     0o755,
			"/usr/local/bin/archiver":            0o755,
		}
		got := map[string]int64{}
		for p, h := range headers {
			got[p] = h.Mode
			if h.Uid != 0 || h.Gid != 0 {
				t.Errorf("%s owned by %d:%d, want 0:0", p, h.Uid, h.Gid)
			}
			if !h.ModTime.Equal(opts.Created) {
				t.Errorf("%s modified %s, want the creation time %s", p, h.ModTime, opts.Created)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("layer entries and modes:\n got %v\nwant %v", octal(got), octal(want))
		}
		fi, err := os.Stat(filepath.Join(root, "tmp"))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&fs.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
			t.Errorf("unpacked /tmp has mode %v, want drwxrwxrwt", fi.Mode())
		}
		hostCA, err := os.ReadFile(DefaultCACerts)
		if err != nil {
			t.Fatal(err)
		}
		imgCA, err := os.ReadFile(filepath.Join(root, CACertsPath))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(hostCA, imgCA) {
			t.Errorf("image CA bundle (%d bytes) differs from the host's %s (%d bytes)", len(imgCA), DefaultCACerts, len(hostCA))
		}
		passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range []string{"root:x:0:0:", "minecraft:x:1000:1000:"} {
			if !strings.Contains(string(passwd), "\n"+line) && !strings.HasPrefix(string(passwd), line) {
				t.Errorf("/etc/passwd lacks %q:\n%s", line, passwd)
			}
		}
		orig, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		inImage, err := os.ReadFile(filepath.Join(root, BinaryPath))
		if err != nil {
			t.Fatal(err)
		}
		if sha256.Sum256(orig) != sha256.Sum256(inImage) {
			t.Error("the image's archiver differs from the binary it was built from")
		}
	})

	t.Run("entrypoint runs from the unpacked filesystem", func(t *testing.T) {
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		out := runEntrypoint(t, root, cfg.Config, nil, "--version")
		if !strings.Contains(out, testVersion) {
			t.Errorf("%s --version printed %q, want it to contain %q", BinaryPath, out, testVersion)
		}
	})

	t.Run("entrypoint runs as a non-root UID", func(t *testing.T) {
		testenv.RequireRoot(t, "switching to UID 1000 to run the entrypoint")
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		out := runEntrypoint(t, root, cfg.Config, &syscall.Credential{Uid: 1000, Gid: 1000}, "--version")
		if !strings.Contains(out, testVersion) {
			t.Errorf("as UID 1000, %s --version printed %q, want it to contain %q", BinaryPath, out, testVersion)
		}
	})

	t.Run("config", func(t *testing.T) {
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/archiver"}) {
			t.Errorf("entrypoint %q, want [/usr/local/bin/archiver]", c.Entrypoint)
		}
		if len(c.Cmd) != 0 {
			t.Errorf("cmd %q, want none (the Job passes args)", c.Cmd)
		}
		wantEnv := []string{
			"PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
			"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
		}
		if !slices.Equal(c.Env, wantEnv) {
			t.Errorf("env %q, want %q", c.Env, wantEnv)
		}
		if c.User != "0" || c.WorkingDir != "/" {
			t.Errorf("user %q workdir %q, want \"0\" and \"/\"", c.User, c.WorkingDir)
		}
		wantLabels := map[string]string{
			"org.opencontainers.image.source":      "https://example.test/worldbackup",
			"org.opencontainers.image.revision":    "0123456789abcdef0123456789abcdef01234567",
			"org.opencontainers.image.version":     testVersion,
			"org.opencontainers.image.created":     "2025-03-14T15:09:26Z",
			"org.opencontainers.image.title":       DefaultTitle,
			"org.opencontainers.image.description": DefaultDescription,
			"org.opencontainers.image.licenses":    DefaultLicenses,
		}
		if !reflect.DeepEqual(c.Labels, wantLabels) {
			t.Errorf("labels:\n got %v\nwant %v", c.Labels, wantLabels)
		}
		if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
			t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
		}
		if !cf.Created.Time.Equal(opts.Created) {
			t.Errorf("created %s, want %s", cf.Created.Time, opts.Created)
		}
		m, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if m.MediaType != "application/vnd.oci.image.manifest.v1+json" || m.Config.MediaType != "application/vnd.oci.image.config.v1+json" {
			t.Errorf("media types %s / %s, want OCI manifest and config", m.MediaType, m.Config.MediaType)
		}
	})

	t.Run("reproducible", func(t *testing.T) {
		outA, outB := t.TempDir(), t.TempDir()
		tag := name.MustParseReference(DefaultRepository + ":" + testVersion).(name.Tag)
		var digests []v1.Hash
		for _, out := range []string{outA, outB} {
			again, err := Build(opts)
			if err != nil {
				t.Fatal(err)
			}
			d, err := Write(out, again, tag)
			if err != nil {
				t.Fatal(err)
			}
			fromLayout, err := ReadLayout(filepath.Join(out, LayoutDirName))
			if err != nil {
				t.Fatal(err)
			}
			ld, err := fromLayout.Digest()
			if err != nil {
				t.Fatal(err)
			}
			if ld != d {
				t.Errorf("layout in %s holds %s, Write returned %s", out, ld, d)
			}
			digests = append(digests, d)
		}
		if digests[0] != digest || digests[1] != digest {
			t.Errorf("same inputs gave digests %s, %s and %s", digest, digests[0], digests[1])
		}
		if a, b := fileSum(t, filepath.Join(outA, TarballName)), fileSum(t, filepath.Join(outB, TarballName)); a != b {
			t.Errorf("same inputs gave different tarballs: %x vs %x", a, b)
		}

		later := opts
		later.Created = opts.Created.Add(time.Second)
		other, err := Build(later)
		if err != nil {
			t.Fatal(err)
		}
		od, err := other.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if od == digest {
			t.Errorf("a different creation time gave the same digest %s", od)
		}
	})

	t.Run("tarball loads back", func(t *testing.T) {
		out := t.TempDir()
		tag := name.MustParseReference(DefaultRepository + ":" + testVersion).(name.Tag)
		if _, err := Write(out, img, tag); err != nil {
			t.Fatal(err)
		}
		loaded, err := tarball.ImageFromPath(filepath.Join(out, TarballName), &tag)
		if err != nil {
			t.Fatalf("loading %s as %s: %v", TarballName, tag, err)
		}
		// A docker-save tarball keeps the config and layers, not the manifest:
		// Docker's image ID is the config digest, so compare those.
		for _, pair := range []struct {
			what       string
			got, built func() (v1.Hash, error)
		}{
			{"config", loaded.ConfigName, img.ConfigName},
			{"layer", func() (v1.Hash, error) { return onlyLayerDigest(loaded) }, func() (v1.Hash, error) { return onlyLayerDigest(img) }},
		} {
			got, err := pair.got()
			if err != nil {
				t.Fatal(err)
			}
			built, err := pair.built()
			if err != nil {
				t.Fatal(err)
			}
			if got != built {
				t.Errorf("tarball %s digest %s, built %s", pair.what, got, built)
			}
		}
		// Rewriting over earlier outputs works; a folder that is not a layout is refused.
		if _, err := Write(out, img, tag); err != nil {
			t.Errorf("rewriting outputs: %v", err)
		}
		notLayout := filepath.Join(t.TempDir(), "precious")
		if err := os.MkdirAll(notLayout, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(notLayout, "keep.txt"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := WriteLayout(notLayout, img, tag); err == nil || !strings.Contains(err.Error(), "not an OCI layout") {
			t.Errorf("writing a layout over a non-layout folder: err = %v, want a refusal", err)
		}
		if _, err := os.Stat(filepath.Join(notLayout, "keep.txt")); err != nil {
			t.Errorf("the refused folder lost its file: %v", err)
		}
	})

	t.Run("push to a registry", func(t *testing.T) {
		t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials: anonymous
		srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
		t.Cleanup(srv.Close)
		u, err := url.Parse(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := name.ParseReference(u.Host + "/acme/" + DefaultRepository + ":" + testVersion)
		if err != nil {
			t.Fatal(err)
		}
		pushed, err := Push(t.Context(), img, ref, authn.DefaultKeychain)
		if err != nil {
			t.Fatal(err)
		}
		if pushed.DigestStr() != digest.String() {
			t.Errorf("pushed %s, built %s", pushed, digest)
		}
		pulled, err := remote.Image(ref, remote.WithContext(t.Context()))
		if err != nil {
			t.Fatal(err)
		}
		pd, err := pulled.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if pd != digest {
			t.Errorf("registry serves %s for %s, built %s", pd, ref, digest)
		}
	})

	// Last: a real backup by the image's binary against the test PostgreSQL.
	t.Run("backup against PostgreSQL", func(t *testing.T) {
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		testBackup(t, root, cf.Config)
	})
}

// runEntrypoint runs the image's entrypoint from the unpacked filesystem at
// root with the image's environment and working directory, and returns its
// combined output. As root it runs inside a chroot of the unpacked tree (as a
// container would: nothing from the host is reachable, so a dynamically
// linked binary would fail), as cred when given.
func runEntrypoint(t *testing.T, root string, c v1.Config, cred *syscall.Credential, args ...string) string {
	t.Helper()
	if len(c.Entrypoint) == 0 {
		t.Fatal("image has no entrypoint")
	}
	argv := append(slices.Clone(c.Entrypoint[1:]), args...)
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		cmd = exec.CommandContext(t.Context(), c.Entrypoint[0], argv...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: cred}
		cmd.Dir = c.WorkingDir
	} else {
		cmd = exec.CommandContext(t.Context(), filepath.Join(root, c.Entrypoint[0]), argv...)
		cmd.Dir = filepath.Join(root, c.WorkingDir)
	}
	cmd.Env = c.Env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("running %s %q from the unpacked image: %v\n%s", c.Entrypoint[0], argv, err, out)
	}
	return string(out)
}

func onlyLayerDigest(img v1.Image) (v1.Hash, error) {
	ls, err := img.Layers()
	if err != nil {
		return v1.Hash{}, err
	}
	if len(ls) != 1 {
		return v1.Hash{}, fmt.Errorf("%d layers, want 1", len(ls))
	}
	return ls[0].Digest()
}

// octal formats modes for messages.
func octal(m map[string]int64) map[string]string {
	o := make(map[string]string, len(m))
	for k, v := range m {
		o[k] = fmt.Sprintf("%#o", v)
	}
	return o
}

func fileSum(t *testing.T, p string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func TestBuildRejectsBadInputs(t *testing.T) {
	dir := t.TempDir()
	notELF := filepath.Join(dir, "script")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	emptyCA := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(emptyCA, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The host's shell is a dynamically linked executable (it has a program interpreter).
	dynamic, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	dynamic, err = filepath.EvalSymlinks(dynamic)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"no binary", Options{}, "no archiver binary"},
		{"missing binary", Options{Binary: filepath.Join(dir, "nope")}, "reading archiver binary"},
		{"not an ELF file", Options{Binary: notELF}, "Linux ELF executable"},
		{"dynamically linked", Options{Binary: dynamic}, "CGO_ENABLED=0"},
		{"before 1970", Options{Binary: dynamic, Created: time.Unix(-10, 0)}, "before 1970"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Build: err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}

	t.Run("CA bundle without certificates", func(t *testing.T) {
		if err := checkCABundle(emptyCA); err == nil || !strings.Contains(err.Error(), "no PEM certificates") {
			t.Fatalf("checkCABundle: err = %v, want a refusal", err)
		}
	})
}
