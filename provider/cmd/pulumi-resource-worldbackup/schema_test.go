package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/worldbackup/worldbackup/internal/stacktest"
	"github.com/worldbackup/worldbackup/provider"
)

// TestSchemaUpToDate regenerates the schema the way `make schema` does
// (the plugin's -schema output) and compares it with the checked-in
// schema.json, byte for byte.
func TestSchemaUpToDate(t *testing.T) {
	var got bytes.Buffer
	if err := run(t.Context(), true, &got); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		g, w := strings.Split(got.String(), "\n"), strings.Split(string(want), "\n")
		line := 0
		for line < len(g) && line < len(w) && g[line] == w[line] {
			line++
		}
		at := func(l []string) string {
			if line < len(l) {
				return l[line]
			}
			return "<end of file>"
		}
		t.Fatalf("schema.json is out of date: run `make schema` and commit it.\n"+
			"first difference at line %d:\n  generated:  %s\n  schema.json: %s", line+1, at(g), at(w))
	}
}

// TestCLIReadsTheSchema builds the plugin binary and has the real Pulumi CLI
// start it as the engine does (`pulumi package get-schema`, what
// `pulumi package add` runs first) and read its schema over gRPC: it must be
// schema.json.
func TestCLIReadsTheSchema(t *testing.T) {
	tools := stacktest.Require(t)
	bin := filepath.Join(t.TempDir(), "pulumi-resource-worldbackup")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the plugin: %v\n%s", err, out)
	}
	out := tools.CLI(t, t.TempDir(), tools.Env(t.TempDir()), "package", "get-schema", bin)
	var got, want any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("pulumi package get-schema printed no JSON: %v\n%s", err, out)
	}
	b, err := os.ReadFile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the schema the CLI read from the plugin differs from schema.json:\n%s", out)
	}
}

// TestSchemaServesTheComponents checks what other languages see in the
// checked-in schema: the package name, the component's token, its required
// inputs and its outputs.
func TestSchemaServesTheComponents(t *testing.T) {
	b, err := os.ReadFile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Name      string `json:"name"`
		Version   string `json:"version"`
		Resources map[string]struct {
			IsComponent     bool           `json:"isComponent"`
			RequiredInputs  []string       `json:"requiredInputs"`
			Properties      map[string]any `json:"properties"`
			InputProperties map[string]any `json:"inputProperties"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Name != packageName || schema.Version != version {
		t.Errorf("schema name %q version %q, want %q %q", schema.Name, schema.Version, packageName, version)
	}
	tests := []struct {
		token    string
		required []string
		outputs  []string
	}{
		{"worldbackup:index:WorldBackup", []string{"server", "runId", "image"}, []string{"jobName", "namespace", "runId", "archiveRef"}},
		{"worldbackup:index:WorldRestore", []string{"server", "runId", "image"}, []string{"jobName", "namespace", "runId", "archiveRef"}},
		{"worldbackup:index:WorldPrune", []string{"server", "runId", "image", "retention"}, []string{"jobName", "namespace", "runId"}},
		{"worldbackup:index:WorldBackupSchedule", []string{"server", "image", "schedule"}, []string{"cronJobName", "namespace", "cronSchedule"}},
		{"worldbackup:index:WorldVerify", []string{"server", "runId", "image"},
			[]string{"jobName", "namespace", "runId", "archiveRef", "status", "chunksChecked", "problems"}},
		{"worldbackup:index:WorldVerifySchedule", []string{"server", "image", "schedule"}, []string{"cronJobName", "namespace", "cronSchedule"}},
		{"worldbackup:index:WorldMetrics", []string{"image"}, []string{"deploymentName", "serviceName", "namespace", "portName", "port", "selectorLabels", "url"}},
	}
	if len(schema.Resources) != len(tests) {
		t.Errorf("schema has %d resources, want %d", len(schema.Resources), len(tests))
	}
	for _, tc := range tests {
		t.Run(tc.token, func(t *testing.T) {
			res, ok := schema.Resources[tc.token]
			if !ok {
				t.Fatalf("schema.json has no %s", tc.token)
			}
			if !res.IsComponent {
				t.Error("not a component")
			}
			if strings.Join(res.RequiredInputs, ",") != strings.Join(tc.required, ",") {
				t.Errorf("required inputs %v, want %v", res.RequiredInputs, tc.required)
			}
			for _, o := range tc.outputs {
				if _, ok := res.Properties[o]; !ok {
					t.Errorf("no output %q", o)
				}
			}
			// Each component's schema holds only what it takes.
			for _, in := range provider.InputsNotTaken(tc.token) {
				if _, ok := res.InputProperties[in]; ok {
					t.Errorf("input %q is in the schema, but the component does not take it", in)
				}
			}
			// What real clusters ask of a pod, on every Job and the CronJob's
			// (WorldMetrics is a Deployment with inputs of its own).
			if tc.token == provider.WorldMetricsType {
				return
			}
			for _, in := range []string{"tolerations", "priorityClassName", "imagePullSecrets", "nodeSelector", "labels", "annotations"} {
				if _, ok := res.InputProperties[in]; !ok {
					t.Errorf("no input %q", in)
				}
			}
		})
	}
}

func TestPreparse(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantSchema bool
		wantErr    bool
	}{
		{"schema", []string{"-schema"}, true, false},
		{"schema with two dashes", []string{"--schema"}, true, false},
		{"engine address", []string{"127.0.0.1:45678"}, false, false},
		{"engine flags and address", []string{"-tracing", "http://127.0.0.1:9411", "-v=9", "127.0.0.1:45678"}, false, false},
		{"unknown flag", []string{"-shema"}, false, true},
		{"version", []string{"--version"}, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := flag.NewFlagSet("test", flag.ContinueOnError)
			schema := base.Bool("schema", false, "")
			version := base.Bool("version", false, "")
			base.Int("v", 0, "log level (as the logging package registers it)")
			err := preparse(base, tc.args, &bytes.Buffer{})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if *schema != tc.wantSchema {
				t.Errorf("schema = %v, want %v", *schema, tc.wantSchema)
			}
			if want := slices.Contains(tc.args, "--version"); *version != want {
				t.Errorf("version = %v, want %v", *version, want)
			}
		})
	}
}

// TestUsageListsOurFlags: -h lists -schema and -version, not the logging
// flags the logging package registers on the process's flag set.
func TestUsageListsOurFlags(t *testing.T) {
	base := flag.NewFlagSet("test", flag.ContinueOnError)
	base.Bool("schema", false, "print the package schema")
	base.Bool("version", false, "print the version")
	base.Int("v", 0, "log level (as the logging package registers it)")
	base.Bool("logtostderr", false, "log to standard error instead of files")
	var usage bytes.Buffer
	if err := preparse(base, []string{"-h"}, &usage); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("preparse -h = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"-schema", "-version"} {
		if !strings.Contains(usage.String(), want) {
			t.Errorf("usage lacks %s:\n%s", want, usage.String())
		}
	}
	for _, not := range []string{"-v\n", "-logtostderr", "-tracing"} {
		if strings.Contains(usage.String(), not) {
			t.Errorf("usage lists the engine's flag %q:\n%s", strings.TrimSpace(not), usage.String())
		}
	}
}

// TestSchemaRegistryMetadata: what the Pulumi Registry and the engine read
// from the package schema besides its resources: publisher, license (the
// repository's LICENSE), homepage, repository, keywords, where the plugin is
// downloaded from, the Go package (one that exists in this module), the
// package names of the SDKs, and nested types named as users write them
// (module index, Rcon not RconArgs, which the generators would make
// RconArgsArgs).
func TestSchemaRegistryMetadata(t *testing.T) {
	var schema struct {
		Publisher         string   `json:"publisher"`
		License           string   `json:"license"`
		Homepage          string   `json:"homepage"`
		Repository        string   `json:"repository"`
		Keywords          []string `json:"keywords"`
		PluginDownloadURL string   `json:"pluginDownloadURL"`
		Language          struct {
			Go struct {
				ImportBasePath string `json:"importBasePath"`
			} `json:"go"`
			NodeJS struct {
				PackageName string `json:"packageName"`
				Readme      string `json:"readme"`
			} `json:"nodejs"`
			Python struct {
				PackageName string `json:"packageName"`
				Readme      string `json:"readme"`
			} `json:"python"`
		} `json:"language"`
		Types map[string]any `json:"types"`
	}
	if err := json.Unmarshal(readFile(t, "schema.json"), &schema); err != nil {
		t.Fatal(err)
	}
	eq := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %q, want %q", what, got, want)
		}
	}
	eq("publisher", schema.Publisher, "worldbackup")
	eq("license", schema.License, "Apache-2.0")
	eq("homepage", schema.Homepage, "https://github.com/worldbackup/worldbackup")
	eq("repository", schema.Repository, "https://github.com/worldbackup/worldbackup")
	eq("pluginDownloadURL", schema.PluginDownloadURL, "https://github.com/worldbackup/worldbackup/releases/download/v${VERSION}/")
	eq("language.nodejs.packageName", schema.Language.NodeJS.PackageName, "@worldbackup/pulumi-worldbackup")
	eq("language.python.packageName", schema.Language.Python.PackageName, "pulumi_worldbackup")
	if !slices.Contains(schema.Keywords, "kind/component") || !slices.Contains(schema.Keywords, "category/utility") {
		t.Errorf("keywords %v lack the Registry's kind/component and category/utility", schema.Keywords)
	}
	for lang, readme := range map[string]string{"nodejs": schema.Language.NodeJS.Readme, "python": schema.Language.Python.Readme} {
		if !strings.Contains(readme, "pulumi plugin install resource worldbackup") {
			t.Errorf("language.%s.readme says nothing of installing the plugin:\n%s", lang, readme)
		}
	}

	// LICENSE at the repository's root is the license the schema names.
	license := string(readFile(t, filepath.Join("..", "..", "..", "LICENSE")))
	if !strings.Contains(license, "Apache License") || !strings.Contains(license, "Version 2.0") {
		t.Errorf("LICENSE is not the Apache License 2.0:\n%.200s", license)
	}

	// The Go import path is this module's package of the components.
	module := strings.TrimPrefix(strings.SplitN(string(readFile(t, filepath.Join("..", "..", "..", "go.mod"))), "\n", 2)[0], "module ")
	rel, ok := strings.CutPrefix(schema.Language.Go.ImportBasePath, module+"/")
	if !ok {
		t.Fatalf("language.go.importBasePath %q is not in module %s", schema.Language.Go.ImportBasePath, module)
	}
	src := string(readFile(t, filepath.Join("..", "..", "..", filepath.FromSlash(rel), "worldbackup.go")))
	if !strings.Contains(src, "func NewWorldBackup(") {
		t.Errorf("%s has no NewWorldBackup", schema.Language.Go.ImportBasePath)
	}

	for _, token := range []string{"worldbackup:index:Rcon", "worldbackup:index:Retention", "worldbackup:index:Store",
		"worldbackup:index:Compression", "worldbackup:index:SecurityMode"} {
		if _, ok := schema.Types[token]; !ok {
			t.Errorf("schema has no type %s", token)
		}
	}
	for token := range schema.Types {
		if !strings.HasPrefix(token, "worldbackup:index:") || strings.HasSuffix(token, "Args") {
			t.Errorf("type %s: want module index and no Args suffix (the SDKs add it to input types)", token)
		}
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
