package sdk_test

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/worldbackup/worldbackup/internal/pulumitools"
	"github.com/worldbackup/worldbackup/internal/testenv"
)

// The version TestDist stamps, and its PEP 440 form (Pulumi's Python
// generator's translation, which the wheel and sdist names carry).
const (
	distVersion     = "1.2.3-alpha.1"
	distPypiVersion = "1.2.3a1"
	distEpoch       = 1700000000
)

// TestDist runs `make dist`'s script for the host's target only (the other
// five differ only in GOOS/GOARCH) into a temp folder and checks what a
// release holds: the plugin archive's name and layout (the binary, LICENSE
// and README.md at its root, owner 0/0, the fixed time), the stamped
// --version and schema version of the binary inside it, the checksums file
// against every file, the npm tarball (compiled JavaScript and declarations,
// the package name, version and pulumi-plugin metadata), the Python wheel
// (RECORD hashes, METADATA with the README, installable with pip) and sdist,
// that the real Pulumi CLI installs the plugin from the archive both with
// --file and from a server (the schema's pluginDownloadURL layout), and that
// a YAML program's `pulumi up` downloads it by itself from the URL its
// resource options give (without them the engine asks get.pulumi.com). A
// second run must give the same plugin archive, byte for byte.
func TestDist(t *testing.T) {
	st := requireTools(t)
	testenv.RequireCommands(t, "nodejs", "node", "npm")
	testenv.RequireCommands(t, "python3", "python3")
	_, err := os.Stat(filepath.Join(st.nodeModules, "typescript", "bin", "tsc"))
	testenv.Require(t, err == nil, "no TypeScript compiler in "+st.nodeModules, "scripts/sdks.sh tools")

	target := runtime.GOOS + "/" + runtime.GOARCH
	out := t.TempDir()
	runDist(t, st.root, out, target, "nodejs python")

	archive := "pulumi-resource-worldbackup-v" + distVersion + "-" + runtime.GOOS + "-" + runtime.GOARCH + ".tar.gz"
	npmTarball := "worldbackup-pulumi-worldbackup-" + distVersion + ".tgz"
	sdist := "pulumi_worldbackup-" + distPypiVersion + ".tar.gz"
	wheel := "pulumi_worldbackup-" + distPypiVersion + "-py3-none-any.whl"
	checksums := "pulumi-worldbackup_" + distVersion + "_checksums.txt"
	want := []string{archive, checksums, sdist, wheel, npmTarball}
	slices.Sort(want)
	if got := dirNames(t, out); !slices.Equal(got, want) {
		t.Fatalf("dist wrote %v, want %v", got, want)
	}

	t.Run("the plugin archive holds the binary at its root", func(t *testing.T) {
		entries := readTarGz(t, filepath.Join(out, archive))
		exe := "pulumi-resource-worldbackup"
		if runtime.GOOS == "windows" {
			exe += ".exe"
		}
		if got, want := sortedKeys(entries), []string{"LICENSE", "README.md", exe}; !slices.Equal(got, want) {
			t.Fatalf("archive entries %v, want %v", got, want)
		}
		for name, e := range entries {
			if e.hdr.Uid != 0 || e.hdr.Gid != 0 || e.hdr.Uname != "" || e.hdr.Gname != "" {
				t.Errorf("%s: owner %d/%d (%q/%q), want 0/0 without names", name, e.hdr.Uid, e.hdr.Gid, e.hdr.Uname, e.hdr.Gname)
			}
			if !e.hdr.ModTime.Equal(time.Unix(distEpoch, 0)) {
				t.Errorf("%s: time %v, want SOURCE_DATE_EPOCH %v", name, e.hdr.ModTime.UTC(), time.Unix(distEpoch, 0).UTC())
			}
		}
		if mode := entries[exe].hdr.Mode; mode != 0o755 {
			t.Errorf("%s: mode %o, want 755", exe, mode)
		}
		if !bytes.Equal(entries["LICENSE"].data, readFile(t, filepath.Join(st.root, "LICENSE"))) {
			t.Errorf("the archive's LICENSE is not the repository's")
		}

		bin := filepath.Join(t.TempDir(), exe)
		if err := os.WriteFile(bin, entries[exe].data, 0o755); err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(run(t, bin, "--version")); got != distVersion {
			t.Errorf("%s --version = %q, want %q", exe, got, distVersion)
		}
		var schema struct {
			Version string `json:"version"`
		}
		if err := json.Unmarshal([]byte(run(t, bin, "-schema")), &schema); err != nil {
			t.Fatal(err)
		}
		if schema.Version != distVersion {
			t.Errorf("the stamped plugin's schema version = %q, want %q", schema.Version, distVersion)
		}
	})

	t.Run("the checksums file holds every file's sha256", func(t *testing.T) {
		f, err := os.Open(filepath.Join(out, checksums))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var listed []string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			sum, name, ok := strings.Cut(sc.Text(), "  ") // sha256sum's format: `sha256sum -c` reads it
			if !ok {
				t.Fatalf("not a sha256sum line: %q", sc.Text())
			}
			h := sha256.Sum256(readFile(t, filepath.Join(out, name)))
			if sum != hex.EncodeToString(h[:]) {
				t.Errorf("%s: checksum %s, the file's is %x", name, sum, h)
			}
			listed = append(listed, name)
		}
		slices.Sort(listed)
		if wantListed := slices.DeleteFunc(slices.Clone(want), func(n string) bool { return n == checksums }); !slices.Equal(listed, wantListed) {
			t.Errorf("the checksums file lists %v, want %v", listed, wantListed)
		}
	})

	t.Run("the npm tarball is the compiled package", func(t *testing.T) {
		entries := readTarGz(t, filepath.Join(out, npmTarball))
		for _, name := range []string{"package/package.json", "package/index.js", "package/index.d.ts",
			"package/worldBackup.js", "package/types/input.d.ts", "package/README.md", "package/LICENSE"} {
			if _, ok := entries[name]; !ok {
				t.Errorf("the npm tarball has no %s: %v", name, sortedKeys(entries))
			}
		}
		for name := range entries {
			if strings.HasSuffix(name, ".ts") && !strings.HasSuffix(name, ".d.ts") {
				t.Errorf("the npm tarball holds the TypeScript source %s", name)
			}
		}
		var pkg struct {
			Name    string `json:"name"`
			Version string `json:"version"`
			Pulumi  struct {
				Resource bool   `json:"resource"`
				Name     string `json:"name"`
				Version  string `json:"version"`
				Server   string `json:"server"`
			} `json:"pulumi"`
		}
		if err := json.Unmarshal(entries["package/package.json"].data, &pkg); err != nil {
			t.Fatal(err)
		}
		if pkg.Name != npmPackage || pkg.Version != distVersion {
			t.Errorf("package.json: %s@%s, want %s@%s", pkg.Name, pkg.Version, npmPackage, distVersion)
		}
		if !pkg.Pulumi.Resource || pkg.Pulumi.Name != "worldbackup" || pkg.Pulumi.Version != distVersion ||
			pkg.Pulumi.Server != "https://github.com/worldbackup/worldbackup/releases/download/v${VERSION}/" {
			t.Errorf("package.json's pulumi section %+v: want the plugin worldbackup %s and its download URL", pkg.Pulumi, distVersion)
		}
	})

	t.Run("the wheel has the package, its metadata and a true RECORD, and pip installs it", func(t *testing.T) {
		z, err := zip.OpenReader(filepath.Join(out, wheel))
		if err != nil {
			t.Fatal(err)
		}
		defer z.Close()
		distInfo := "pulumi_worldbackup-" + distPypiVersion + ".dist-info/"
		files := map[string][]byte{}
		for _, f := range z.File {
			r, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(r)
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
			files[f.Name] = b
		}
		for _, name := range []string{pythonPackage + "/__init__.py", pythonPackage + "/py.typed", pythonPackage + "/pulumi-plugin.json",
			pythonPackage + "/world_backup.py", distInfo + "METADATA", distInfo + "WHEEL", distInfo + "RECORD", distInfo + "LICENSE"} {
			if _, ok := files[name]; !ok {
				t.Errorf("the wheel has no %s: %v", name, sortedKeys(files))
			}
		}
		meta := string(files[distInfo+"METADATA"])
		for _, want := range []string{"Name: " + pythonPackage + "\n", "Version: " + distPypiVersion + "\n", "License: Apache-2.0\n",
			"Requires-Dist: pulumi", "Description-Content-Type: text/markdown\n", "\n\n# worldbackup for Pulumi"} {
			if !strings.Contains(meta, want) {
				t.Errorf("METADATA lacks %q:\n%s", want, meta)
			}
		}
		// RECORD: every other file with its urlsafe-base64 sha256 and size.
		recorded := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(string(files[distInfo+"RECORD"])), "\n") {
			parts := strings.Split(line, ",")
			if len(parts) != 3 {
				t.Fatalf("RECORD line %q", line)
			}
			recorded[parts[0]] = true
			if parts[0] == distInfo+"RECORD" {
				continue
			}
			h := sha256.Sum256(files[parts[0]])
			if want := "sha256=" + base64.RawURLEncoding.EncodeToString(h[:]); parts[1] != want {
				t.Errorf("RECORD: %s hash %s, want %s", parts[0], parts[1], want)
			}
		}
		for name := range files {
			if !recorded[name] {
				t.Errorf("RECORD does not list %s", name)
			}
		}

		target := t.TempDir()
		cmd := exec.CommandContext(t.Context(), "python3", "-m", "pip", "install", "--no-deps", "--no-index",
			"--disable-pip-version-check", "--target", target, filepath.Join(out, wheel))
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("pip install of the wheel: %v\n%s", err, b)
		}
		if _, err := os.Stat(filepath.Join(target, pythonPackage, "world_backup.py")); err != nil {
			t.Errorf("pip did not install the package: %v", err)
		}
	})

	t.Run("the sdist has PKG-INFO, pyproject.toml, README.md and the package", func(t *testing.T) {
		top := "pulumi_worldbackup-" + distPypiVersion + "/"
		entries := readTarGz(t, filepath.Join(out, sdist))
		for _, name := range []string{"PKG-INFO", "pyproject.toml", "README.md", "LICENSE", pythonPackage + "/__init__.py"} {
			if _, ok := entries[top+name]; !ok {
				t.Errorf("the sdist has no %s: %v", top+name, sortedKeys(entries))
			}
		}
		if pyproject := string(entries[top+"pyproject.toml"].data); !strings.Contains(pyproject, `version = "`+distPypiVersion+`"`) {
			t.Errorf("the sdist's pyproject.toml is not version %s:\n%s", distPypiVersion, pyproject)
		}
	})

	t.Run("a second run gives the same plugin archive", func(t *testing.T) {
		again := t.TempDir()
		runDist(t, st.root, again, target, "")
		if !bytes.Equal(readFile(t, filepath.Join(out, archive)), readFile(t, filepath.Join(again, archive))) {
			t.Errorf("two runs of dist wrote different %s", archive)
		}
	})

	// The release as GitHub lays it out: the assets under the tag's path.
	release := func(t *testing.T) string {
		srv := httptest.NewServer(http.StripPrefix("/releases/download/v"+distVersion, http.FileServer(http.Dir(out))))
		t.Cleanup(srv.Close)
		return srv.URL + "/releases/download/v"
	}
	installed := func(t *testing.T, home string) {
		t.Helper()
		exe := filepath.Join(home, "plugins", "resource-worldbackup-v"+distVersion, "pulumi-resource-worldbackup")
		if got := strings.TrimSpace(run(t, exe, "--version")); got != distVersion {
			t.Errorf("the installed plugin says %q, want %q", got, distVersion)
		}
	}

	t.Run("the Pulumi CLI installs the plugin from the archive", func(t *testing.T) {
		tools, err := pulumitools.Find(st.root)
		_, cliErr := os.Stat(filepath.Join(tools.Bin, "pulumi"))
		testenv.Require(t, cliErr == nil, "no Pulumi CLI: "+errString(err), "make tools")
		cases := []struct {
			name string
			args func(t *testing.T) []string
		}{
			{"--file", func(*testing.T) []string { return []string{"--file", filepath.Join(out, archive)} }},
			{"--server, as pluginDownloadURL", func(t *testing.T) []string {
				// The tag's path, which the CLI must expand from ${VERSION}.
				return []string{"--server", release(t) + "${VERSION}/"}
			}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				home := t.TempDir()
				env := tools.Env(t.TempDir())
				env["PULUMI_HOME"] = home
				args := append([]string{"plugin", "install", "resource", "worldbackup", distVersion}, tc.args(t)...)
				if o, err := tools.CLI(t.Context(), t.TempDir(), env, args...); err != nil {
					t.Fatalf("%v\n%s", err, o)
				}
				installed(t, home)
			})
		}
	})

	// A YAML program has no package.json or requirements to carry the
	// plugin's URL: its resource options do, and the engine downloads the
	// plugin before the program runs (README, "Installing").
	t.Run("a YAML program's pulumi up downloads the plugin from its pluginDownloadURL", func(t *testing.T) {
		tools, err := pulumitools.Find(st.root)
		_, cliErr := os.Stat(filepath.Join(tools.Bin, "pulumi"))
		testenv.Require(t, cliErr == nil, "no Pulumi CLI: "+errString(err), "make tools")
		_, hostErr := os.Stat(filepath.Join(tools.Bin, "pulumi-language-yaml"))
		testenv.Require(t, hostErr == nil, "no YAML language host in "+tools.Bin, "make tools")
		// A Pulumi home without the plugin, with the Kubernetes provider the
		// tools installed (the engine cannot download that one here).
		home := t.TempDir()
		k8s, _ := filepath.Glob(filepath.Join(tools.PulumiHome, "plugins", "resource-kubernetes-v*"))
		if len(k8s) == 0 {
			t.Fatalf("no Kubernetes provider plugin in %s", tools.PulumiHome)
		}
		if err := os.MkdirAll(filepath.Join(home, "plugins"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, d := range k8s {
			files, err := os.ReadDir(d)
			if err != nil {
				continue // its .lock and .source files
			}
			// A folder of its own (the engine lists only folders, not links
			// to them) with links to the plugin's files.
			own := filepath.Join(home, "plugins", filepath.Base(d))
			if err := os.Mkdir(own, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				if err := os.Symlink(filepath.Join(d, f.Name()), filepath.Join(own, f.Name())); err != nil {
					t.Fatal(err)
				}
			}
		}
		proj := t.TempDir()
		program := `name: yaml-download
runtime: yaml
resources:
  cluster:
    type: pulumi:providers:kubernetes
    properties:
      renderYamlToDirectory: rendered
  backup:
    type: worldbackup:WorldBackup
    properties:
      server: survival
      runId: r1
      image: registry.example/worldbackup/archiver:test
      backupClaimName: world-backups
    options:
      providers:
        - ${cluster}
      version: ` + distVersion + `
      pluginDownloadURL: ` + release(t) + distVersion + `/
`
		if err := os.WriteFile(filepath.Join(proj, "Pulumi.yaml"), []byte(program), 0o644); err != nil {
			t.Fatal(err)
		}
		env := tools.Env(t.TempDir())
		env["PULUMI_HOME"] = home
		for _, args := range [][]string{{"stack", "init", "test"}, {"up", "--yes"}} {
			if o, err := tools.CLI(t.Context(), proj, env, args...); err != nil {
				t.Fatalf("pulumi %s: %v\n%s", strings.Join(args, " "), err, o)
			}
		}
		installed(t, home)
		if jobs, _ := filepath.Glob(filepath.Join(proj, "rendered", "1-manifest", "batch_v1-job-*.yaml")); len(jobs) != 1 {
			t.Errorf("the program rendered %d Jobs, want 1: %v", len(jobs), jobs)
		}
	})
}

// runDist runs scripts/dist.sh for one target and the SDKs sdks into out,
// with the fixed version and time of TestDist.
func runDist(t *testing.T, root, out, target, sdks string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(root, "scripts", "dist.sh"), out)
	cmd.Env = append(os.Environ(), "VERSION=v"+distVersion, "DIST_TARGETS="+target, "DIST_SDKS="+sdks,
		"SOURCE_DATE_EPOCH="+strconv.Itoa(distEpoch))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/dist.sh: %v\n%s", err, b)
	}
}

type tarEntry struct {
	hdr  *tar.Header
	data []byte
}

// readTarGz reads every regular file of a .tar.gz (directories are refused
// unless under a top folder, as in an sdist or npm tarball).
func readTarGz(t *testing.T, path string) map[string]tarEntry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if !gz.ModTime.IsZero() || gz.Name != "" {
		t.Errorf("%s: the gzip header has a time %v or name %q", filepath.Base(path), gz.ModTime, gz.Name)
	}
	entries := map[string]tarEntry{}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return entries
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeDir {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		entries[hdr.Name] = tarEntry{hdr: hdr, data: b}
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	b, err := exec.CommandContext(t.Context(), name, args...).Output()
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return string(b)
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestVersion runs scripts/version.sh in a fresh repository through its
// history: no commit, no tag, on a tag, after it, after a release
// candidate's, with uncommitted changes, and VERSION's override.
func TestVersion(t *testing.T) {
	testenv.RequireCommands(t, "git", "git")
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := pulumitools.RepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	if err := os.MkdirAll(filepath.Join(repo, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(repo, "scripts", "version.sh"), string(readFile(t, filepath.Join(root, "scripts", "version.sh"))))
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.invalid"}, args...)...)
		cmd.Dir = repo
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return strings.TrimSpace(string(b))
	}
	version := func(env ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "bash", filepath.Join(repo, "scripts", "version.sh"))
		cmd.Env = append(slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "VERSION=") }), env...)
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("version.sh: %v", err)
		}
		return strings.TrimSpace(string(b))
	}
	check := func(name, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: version %q, want %q", name, got, want)
		}
	}

	check("not a git checkout", version(), "0.1.0-dev")
	git("init", "-q")
	git("add", "scripts/version.sh")
	git("commit", "-q", "-m", "first")
	check("no tag", version(), "0.1.0-dev1+g"+git("rev-parse", "--short=7", "HEAD"))
	git("tag", "v0.2.0")
	check("on a tag", version(), "0.2.0")
	writeFile(t, filepath.Join(repo, "scripts", "version.sh"), string(readFile(t, filepath.Join(repo, "scripts", "version.sh")))+"\n")
	check("on a tag, uncommitted changes", version(), "0.2.0+dirty")
	git("commit", "-q", "-a", "-m", "second")
	check("a commit after the tag", version(), "0.2.1-dev1+g"+git("rev-parse", "--short=7", "HEAD"))
	git("tag", "v0.3.0-rc.1")
	git("commit", "-q", "--allow-empty", "-m", "third")
	check("a commit after a release candidate", version(), "0.3.0-rc.1.dev1+g"+git("rev-parse", "--short=7", "HEAD"))
	check("VERSION", version("VERSION=v9.8.7"), "9.8.7")
}
