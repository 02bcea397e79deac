// Command pulumi-sdkgen generates a language SDK from a Pulumi package
// schema with Pulumi's own code generators (pkg/v3 codegen/nodejs and
// codegen/python), the ones `pulumi package gen-sdk` reaches through the
// language hosts. It lives in the tools module of the Pulumi CLI, so it is
// built from the very pkg/v3 version the project's CLI is built from
// (scripts/sdks.sh builds it into the tool cache).
//
//	pulumi-sdkgen -schema schema.json -language nodejs -out sdk/nodejs
//
// The output folder must not exist yet or be empty: a generated SDK is
// written whole, never merged into an older one.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/blang/semver"
	nodejsgen "github.com/pulumi/pulumi/pkg/v3/codegen/nodejs"
	pythongen "github.com/pulumi/pulumi/pkg/v3/codegen/python"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
)

// tool names the generator in the "do not edit" header of every file.
const tool = "pulumi-sdkgen (worldbackup)"

func main() {
	schemaPath := flag.String("schema", "", "the package schema (JSON)")
	language := flag.String("language", "", "nodejs or python")
	out := flag.String("out", "", "the folder to write the SDK into (absent or empty)")
	flag.Parse()
	if *schemaPath == "" || *language == "" || *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: pulumi-sdkgen -schema schema.json -language nodejs|python -out DIR")
		os.Exit(2)
	}
	if err := run(*schemaPath, *language, *out); err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-sdkgen: %v\n", err)
		os.Exit(1)
	}
}

func run(schemaPath, language, out string) error {
	pkg, err := load(schemaPath)
	if err != nil {
		return err
	}
	var files map[string][]byte
	switch language {
	case "nodejs":
		files, err = nodejsgen.GeneratePackage(tool, pkg, nil, nil, false, noReferences{})
	case "python":
		files, err = pythongen.GeneratePackage(tool, pkg, nil, noReferences{})
	default:
		return fmt.Errorf("unknown -language %q: want nodejs or python", language)
	}
	if err != nil {
		return fmt.Errorf("generating the %s SDK of %s: %w", language, schemaPath, err)
	}
	return write(out, files)
}

// load reads and binds (validates) the schema, as `pulumi package gen-sdk`
// does before generating.
func load(path string) (*schema.Package, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the schema: %w", err)
	}
	var spec schema.PackageSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return nil, fmt.Errorf("parsing the schema %s: %w", path, err)
	}
	pkg, diags, err := schema.BindSpec(spec, noReferences{}, schema.ValidationOptions{})
	if err != nil {
		return nil, fmt.Errorf("binding the schema %s: %w", path, err)
	}
	if diags.HasErrors() {
		return nil, fmt.Errorf("the schema %s is invalid: %w", path, diags)
	}
	return pkg, nil
}

// write puts files under out, which must be absent or empty.
func write(out string, files map[string][]byte) error {
	if ents, err := os.ReadDir(out); err == nil && len(ents) > 0 {
		return fmt.Errorf("the output folder %s is not empty: remove it first", out)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := filepath.Join(out, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("writing the SDK: %w", err)
		}
		if err := os.WriteFile(p, files[name], 0o644); err != nil {
			return fmt.Errorf("writing the SDK: %w", err)
		}
	}
	return nil
}

// noReferences is the schema loader: the worldbackup schema refers to no
// other package (its types are its own), so any reference is an error rather
// than a plugin download.
type noReferences struct{}

var errNoReferences = errors.New("the schema refers to another package; pulumi-sdkgen loads none")

func (noReferences) LoadPackage(string, *semver.Version) (*schema.Package, error) {
	return nil, errNoReferences
}

func (noReferences) LoadPackageV2(context.Context, *schema.PackageDescriptor) (*schema.Package, error) {
	return nil, errNoReferences
}

func (noReferences) LoadPackageReference(string, *semver.Version) (schema.PackageReference, error) {
	return nil, errNoReferences
}

func (noReferences) LoadPackageReferenceV2(context.Context, *schema.PackageDescriptor) (schema.PackageReference, error) {
	return nil, errNoReferences
}
