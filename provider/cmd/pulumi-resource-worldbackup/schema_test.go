package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/worldbackup/worldbackup/internal/stacktest"
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
		{"worldbackup:index:WorldRestore", []string{"server", "runId", "image", "archiveRef", "sha256"}, []string{"jobName", "namespace", "runId", "archiveRef"}},
		{"worldbackup:index:WorldPrune", []string{"server", "runId", "image", "retention"}, []string{"jobName", "namespace", "runId"}},
		{"worldbackup:index:WorldBackupSchedule", []string{"server", "runId", "image", "schedule"}, []string{"cronJobName", "namespace"}},
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
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := flag.NewFlagSet("test", flag.ContinueOnError)
			schema := base.Bool("schema", false, "")
			base.Int("v", 0, "log level (as the logging package registers it)")
			err := preparse(base, tc.args, &bytes.Buffer{})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if *schema != tc.wantSchema {
				t.Errorf("schema = %v, want %v", *schema, tc.wantSchema)
			}
		})
	}
}
