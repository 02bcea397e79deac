package sdk_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/worldbackup/worldbackup/internal/pulumitools"
	"github.com/worldbackup/worldbackup/internal/testenv"
)

// The package names the SDKs are published under, as the schema's language
// section sets them (provider/cmd/pulumi-resource-worldbackup).
const (
	npmPackage    = "@worldbackup/pulumi-worldbackup"
	pythonPackage = "pulumi_worldbackup"
)

// sdkTools are what scripts/sdks.sh builds and links: the generator and the
// npm packages the TypeScript programs are compiled with.
type sdkTools struct {
	root        string // the repository root
	gen         string // .tools/bin/pulumi-sdkgen
	nodeModules string // .tools/sdk-node/node_modules
	pythonLib   string // .tools/sdk-python/lib: holds the pulumi Python package
}

// requireTools finds the generator, or skips (fails under CI=true).
func requireTools(t *testing.T) sdkTools {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := pulumitools.RepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	dir := pulumitools.ToolsDir(root)
	st := sdkTools{
		root:        root,
		gen:         filepath.Join(dir, "bin", "pulumi-sdkgen"),
		nodeModules: filepath.Join(dir, "sdk-node", "node_modules"),
		pythonLib:   filepath.Join(dir, "sdk-python", "lib"),
	}
	_, err = os.Stat(st.gen)
	testenv.Require(t, err == nil, "no SDK generator at "+st.gen, "scripts/sdks.sh tools")
	return st
}

// generate writes the SDK for language from the checked-in schema into out,
// as `make sdks` does.
func (st sdkTools) generate(t *testing.T, language, out string) {
	t.Helper()
	schema := filepath.Join(st.root, "provider", "cmd", "pulumi-resource-worldbackup", "schema.json")
	cmd := exec.CommandContext(t.Context(), st.gen, "-schema", schema, "-language", language, "-out", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generating the %s SDK: %v\n%s", language, err, b)
	}
}

// TestTypeScriptSDK generates the TypeScript SDK, compiles it with its own
// (strict) tsconfig.json as `npm run build` would before publishing, and
// compiles the programs of testdata/nodejs against it with strict: true,
// using the typescript and @pulumi/pulumi that tools/sdk-node pins.
func TestTypeScriptSDK(t *testing.T) {
	st := requireTools(t)
	testenv.RequireCommands(t, "nodejs", "node")
	tsc := filepath.Join(st.nodeModules, "typescript", "bin", "tsc")
	_, err := os.Stat(tsc)
	testenv.Require(t, err == nil, "no TypeScript compiler at "+tsc, "scripts/sdks.sh tools")

	// work/node_modules: the cached packages; work/sdk: the SDK, where a
	// program's "@worldbackup/pulumi-worldbackup" import resolves (tsconfig paths).
	work := t.TempDir()
	if err := os.Symlink(st.nodeModules, filepath.Join(work, "node_modules")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(work, "package.json"), `{"private": true}`)
	sdk := filepath.Join(work, "sdk")
	st.generate(t, "nodejs", sdk)

	var pkg struct {
		Name         string            `json:"name"`
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(readFile(t, filepath.Join(sdk, "package.json")), &pkg); err != nil {
		t.Fatalf("the generated package.json: %v", err)
	}
	if pkg.Name != npmPackage {
		t.Errorf("the generated package.json names the package %q, want %q (the schema's language.nodejs.packageName)", pkg.Name, npmPackage)
	}
	if _, ok := pkg.Dependencies["@pulumi/pulumi"]; !ok {
		t.Errorf("the generated package.json does not depend on @pulumi/pulumi: %v", pkg.Dependencies)
	}

	t.Run("the SDK compiles with its own strict tsconfig", func(t *testing.T) {
		var cfg struct {
			CompilerOptions struct {
				Strict bool `json:"strict"`
			} `json:"compilerOptions"`
		}
		// tsconfig.json has comments: drop them before parsing.
		text := regexp.MustCompile(`(?m)^\s*//.*$`).ReplaceAll(readFile(t, filepath.Join(sdk, "tsconfig.json")), nil)
		if err := json.Unmarshal(text, &cfg); err != nil {
			t.Fatalf("the generated tsconfig.json: %v", err)
		}
		if !cfg.CompilerOptions.Strict {
			t.Errorf("the generated tsconfig.json is not strict")
		}
		if out, err := runTSC(t, tsc, filepath.Join(sdk, "tsconfig.json"), "--noEmit"); err != nil {
			t.Fatalf("tsc on the generated SDK: %v\n%s", err, out)
		}
	})

	t.Run("the nested types are named as the schema names them", func(t *testing.T) {
		input := string(readFile(t, filepath.Join(sdk, "types", "input.ts")))
		for _, want := range []string{"export interface RconArgs ", "export interface RetentionArgs ", "export interface StoreArgs "} {
			if !strings.Contains(input, want) {
				t.Errorf("types/input.ts lacks %q", want)
			}
		}
		if strings.Contains(input, "ArgsArgs") || strings.Contains(input, "namespace provider") {
			t.Errorf("types/input.ts has Go's names (ArgsArgs, module provider):\n%s", input)
		}
	})

	tests := []struct {
		name    string
		program string // in testdata/nodejs, or src
		src     string // the program's file, from this folder; default testdata/nodejs/<program>
		wantErr string // a compile error the program must give; "" must compile
	}{
		{name: "plain values", program: "plain.ts"},
		{name: "Outputs into both components and the backup's archiveRef into the restore", program: "outputs.ts"},
		{name: "strict mode refuses a string that may be undefined", program: "strict.ts",
			wantErr: "strict.ts(10,5): error TS2322: Type 'string | undefined' is not assignable to type"},
		{name: "the TypeScript example", program: "example-typescript.ts", src: filepath.Join("..", "examples", "typescript", "index.ts")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := tt.src
			if src == "" {
				src = filepath.Join("testdata", "nodejs", tt.program)
			}
			writeFile(t, filepath.Join(work, tt.program), string(readFile(t, src)))
			tsconfig := filepath.Join(work, "tsconfig."+strings.TrimSuffix(tt.program, ".ts")+".json")
			writeFile(t, tsconfig, `{
  "compilerOptions": {
    "strict": true,
    "noEmit": true,
    "target": "ES2022",
    "module": "nodenext",
    "moduleResolution": "nodenext",
    "types": ["node"],
    "skipLibCheck": true,
    "paths": {"`+npmPackage+`": ["./sdk/index.ts"]}
  },
  "files": ["`+tt.program+`"]
}`)
			out, err := runTSC(t, tsc, tsconfig)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("%s does not compile against the generated SDK: %v\n%s", tt.program, err, out)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("%s compiled, want the error %q", tt.program, tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(out, tt.wantErr):
				t.Fatalf("%s: tsc said\n%s\nwant the error %q", tt.program, out, tt.wantErr)
			}
		})
	}
}

// runTSC runs the TypeScript compiler on a tsconfig.json and returns what it
// printed; a compile error is an *exec.ExitError.
func runTSC(t *testing.T, tsc, tsconfig string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "node", append([]string{tsc, "-p", tsconfig, "--pretty", "false"}, args...)...)
	cmd.Dir = filepath.Dir(tsconfig)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running tsc: %v", err)
	}
	return string(out), err
}

// TestPythonSDK generates the Python SDK, byte-compiles every module of it,
// and type-checks the programs of testdata/python against it with pyright in
// strict mode. mypy is not used: it and the pulumi package come from PyPI,
// which is not reachable here; pyright comes from npm (tools/sdk-node), and
// the pulumi package is read from its source in the Go module
// github.com/pulumi/pulumi/sdk/v3 at the CLI's version (see README.md, "The
// SDKs").
func TestPythonSDK(t *testing.T) {
	st := requireTools(t)
	testenv.RequireCommands(t, "python3", "python3")
	work := t.TempDir()
	sdk := filepath.Join(work, "python")
	st.generate(t, "python", sdk)

	pyproject := string(readFile(t, filepath.Join(sdk, "pyproject.toml")))
	if want := `name = "` + pythonPackage + `"`; !strings.Contains(pyproject, want) {
		t.Errorf("the generated pyproject.toml lacks %s (the schema's language.python.packageName):\n%s", want, pyproject)
	}
	pkg := filepath.Join(sdk, pythonPackage)
	if _, err := os.Stat(filepath.Join(pkg, "__init__.py")); err != nil {
		t.Fatalf("the generated SDK has no package %s: %v", pythonPackage, err)
	}

	t.Run("the nested types are named as the schema names them, the provider class stays in provider.py", func(t *testing.T) {
		inputs := string(readFile(t, filepath.Join(pkg, "_inputs.py")))
		for _, want := range []string{"class RconArgs:", "class RetentionArgs:", "class StoreArgs:"} {
			if !strings.Contains(inputs, want) {
				t.Errorf("_inputs.py lacks %q", want)
			}
		}
		if strings.Contains(inputs, "ArgsArgs") {
			t.Errorf("_inputs.py has Go's names (ArgsArgs)")
		}
		for _, gone := range []string{"provider_.py", filepath.Join("provider", "__init__.py")} {
			if _, err := os.Stat(filepath.Join(pkg, gone)); err == nil {
				t.Errorf("the SDK has %s: a module provider (Go's package name) displaced the provider class", gone)
			}
		}
		if _, err := os.Stat(filepath.Join(pkg, "provider.py")); err != nil {
			t.Errorf("the provider class is not in provider.py: %v", err)
		}
	})

	t.Run("the package has a README, its long description", func(t *testing.T) {
		if !strings.Contains(pyproject, `readme = "README.md"`) {
			t.Errorf("pyproject.toml names no README:\n%s", pyproject)
		}
		readme := string(readFile(t, filepath.Join(pkg, "README.md")))
		if !strings.Contains(readme, "pip install "+pythonPackage) {
			t.Errorf("the package's README.md says nothing of installing it:\n%s", readme)
		}
	})

	t.Run("every module byte-compiles", func(t *testing.T) {
		cmd := exec.CommandContext(t.Context(), "python3", "-m", "compileall", "-q", "-f", pkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("byte-compiling the Python SDK: %v\n%s", err, out)
		}
		var modules, compiled int
		err := filepath.WalkDir(pkg, func(path string, d os.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case strings.HasSuffix(path, ".py"):
				modules++
			case strings.HasSuffix(path, ".pyc"):
				compiled++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if modules == 0 || compiled != modules {
			t.Fatalf("byte-compiled %d of %d modules of the Python SDK", compiled, modules)
		}
	})

	testenv.RequireCommands(t, "nodejs", "node")
	pyright := filepath.Join(st.nodeModules, "pyright", "index.js")
	_, err := os.Stat(pyright)
	testenv.Require(t, err == nil, "no pyright at "+pyright, "scripts/sdks.sh tools")
	_, err = os.Stat(filepath.Join(st.pythonLib, "pulumi", "__init__.py"))
	testenv.Require(t, err == nil, "no pulumi Python package in "+st.pythonLib, "scripts/sdks.sh tools")

	tests := []struct {
		name    string
		program string          // in testdata/python, or src
		src     string          // the program's file, from this folder; default testdata/python/<program>
		want    []pyrightReport // errors the program must give (among others); none: it must give no diagnostic at all
	}{
		{name: "plain values", program: "plain.py"},
		{name: "Outputs into both components and the backup's archive_ref into the restore", program: "outputs.py"},
		{name: "a str that may be None is refused where the Args class requires a str", program: "strict.py",
			want: []pyrightReport{{line: 16, rule: "reportArgumentType",
				message: `Argument of type "str | None" cannot be assigned to parameter "image" of type "Input[str]"`}}},
		{name: "an int for a str input and a misspelled enum are refused", program: "wrongtype.py",
			want: []pyrightReport{
				{line: 9, rule: "reportArgumentType",
					message: `Argument of type "Literal[20250601]" cannot be assigned to parameter "run_id" of type "Input[str | None]"`},
				{line: 12, rule: "reportAttributeAccessIssue",
					message: `Cannot access attribute "ZSTDD" for class "type[Compression]"`},
			}},
		{name: "the Python example", program: "example_python.py", src: filepath.Join("..", "examples", "python", "__main__.py")},
	}
	var programs []string
	for _, tt := range tests {
		src := tt.src
		if src == "" {
			src = filepath.Join("testdata", "python", tt.program)
		}
		writeFile(t, filepath.Join(work, tt.program), string(readFile(t, src)))
		programs = append(programs, tt.program)
	}
	// One pyright run for all programs (its start, reading the pulumi
	// package, is most of its time); each program's diagnostics are its own.
	reports := runPyright(t, pyright, work, programs, []string{st.pythonLib, sdk})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := reports[tt.program]
			if len(tt.want) == 0 {
				if len(got) > 0 {
					t.Fatalf("%s does not type-check against the generated SDK:\n%s", tt.program, formatReports(tt.program, got))
				}
				return
			}
			for _, w := range tt.want {
				if !slices.ContainsFunc(got, func(r pyrightReport) bool {
					return r.line == w.line && r.rule == w.rule && strings.Contains(r.message, w.message)
				}) {
					t.Errorf("%s: pyright said\n%s\nwant on line %d (%s): %s", tt.program, formatReports(tt.program, got), w.line, w.rule, w.message)
				}
			}
		})
	}
}

// pyrightReport is one diagnostic of pyright: its line (1-based), rule and
// the first line of its message.
type pyrightReport struct {
	line     int
	severity string
	rule     string
	message  string
}

// runPyright type-checks programs (in dir) in strict mode, with extraPaths
// where their imports resolve, and returns the diagnostics by program.
// Python 3.10 is the oldest version the pulumi package supports.
func runPyright(t *testing.T, pyright, dir string, programs, extraPaths []string) map[string][]pyrightReport {
	t.Helper()
	config, err := json.Marshal(map[string]any{
		"include":          programs,
		"typeCheckingMode": "strict",
		"pythonVersion":    "3.10",
		"extraPaths":       extraPaths,
	})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "pyrightconfig.json"), string(config))
	cmd := exec.CommandContext(t.Context(), "node", pyright, "--outputjson", "-p", filepath.Join(dir, "pyrightconfig.json"))
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	// Exit code 1: errors were reported, which the JSON holds; anything else
	// (2 fatal, 3 bad config) is a failure of the run itself.
	var exit *exec.ExitError
	if err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 1) {
		t.Fatalf("running pyright: %v\n%s%s", err, out, stderr.String())
	}
	var result struct {
		GeneralDiagnostics []struct {
			File     string `json:"file"`
			Severity string `json:"severity"`
			Message  string `json:"message"`
			Rule     string `json:"rule"`
			Range    struct {
				Start struct {
					Line int `json:"line"`
				} `json:"start"`
			} `json:"range"`
		} `json:"generalDiagnostics"`
		Summary struct {
			FilesAnalyzed int `json:"filesAnalyzed"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(out, &result); err != nil {
		t.Fatalf("reading pyright's JSON: %v\n%s%s", err, out, stderr.String())
	}
	if result.Summary.FilesAnalyzed != len(programs) {
		t.Fatalf("pyright analyzed %d files, want the %d programs %v", result.Summary.FilesAnalyzed, len(programs), programs)
	}
	reports := map[string][]pyrightReport{}
	for _, d := range result.GeneralDiagnostics {
		program := filepath.Base(d.File)
		message, _, _ := strings.Cut(d.Message, "\n")
		reports[program] = append(reports[program], pyrightReport{
			line: d.Range.Start.Line + 1, severity: d.Severity, rule: d.Rule, message: message,
		})
	}
	return reports
}

func formatReports(program string, reports []pyrightReport) string {
	var b strings.Builder
	for _, r := range reports {
		fmt.Fprintf(&b, "  %s:%d: %s: %s (%s)\n", program, r.line, r.severity, r.message, r.rule)
	}
	return b.String()
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
