// Command pulumi-resource-worldbackup is the worldbackup component-provider
// plugin: it serves the components of package provider (WorldBackup,
// WorldRestore, WorldPrune, WorldVerify, WorldBackupSchedule and WorldMetrics; see components) to
// Pulumi programs in every language (TypeScript, Python, YAML, ...), using
// pulumi-go-provider's infer.ComponentF on the very constructors that Go
// programs call, so there is one implementation of the Job logic.
//
// The Pulumi engine starts it (see PulumiPlugin.yaml and examples/yaml);
// `pulumi-resource-worldbackup -schema` prints the package schema, which is
// checked in as schema.json next to this file (`make schema` regenerates it).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	comProvider "github.com/pulumi/pulumi/sdk/v3/go/pulumi/provider"

	"github.com/worldbackup/worldbackup/provider"
	"github.com/worldbackup/worldbackup/provider/internal/settle"
)

// packageName is the Pulumi package name: the first part of every type token
// (worldbackup:index:WorldBackup) and the plugin's name
// (pulumi-resource-<packageName>).
const packageName = "worldbackup"

// version is the plugin's version (semver, no leading v), stamped at build
// time with -ldflags "-X main.version=1.2.3" (scripts/version.sh says which:
// `make build` and `make dist` stamp it from the git tag). It is the schema's
// version too; schema.json is generated with the default.
var version = "0.1.0-dev"

func main() {
	// Defined on the process's flag set so that the SDK's own flag.Parse
	// (provider.MainContext) accepts it too.
	printSchema := flag.Bool("schema", false, "print the package schema (JSON) to stdout and exit")
	printVersion := flag.Bool("version", false, "print the plugin's version to stdout and exit")
	if err := preparse(flag.CommandLine, os.Args[1:], os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		os.Exit(2) // the flag package has printed the error and the usage
	}
	if *printVersion {
		fmt.Println(version)
		return
	}
	if err := run(context.Background(), *printSchema, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-resource-worldbackup: %v\n", err)
		os.Exit(1)
	}
}

// preparse parses args against the flags of base plus -tracing, so that
// -schema is known before the plugin starts serving. The Pulumi SDK defines
// -tracing and parses the command line itself when it starts serving
// (provider.MainContext), and the engine passes -tracing and logging flags
// (registered on base by the logging package) along with its address.
func preparse(base *flag.FlagSet, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("pulumi-resource-worldbackup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	base.VisitAll(func(f *flag.Flag) { fs.Var(f.Value, f.Name, f.Usage) })
	fs.String("tracing", "", "emit tracing to a Zipkin-compatible tracing endpoint (the engine sets it)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: pulumi-resource-worldbackup [-schema | -version] [engine-address]\n\n"+
			"The Pulumi engine starts this plugin (with its address and its logging and tracing\n"+
			"flags); run it yourself only to print its schema or version.\n\n")
		// Only our own flags: those the logging package registers on base are
		// the engine's business.
		for _, name := range []string{"schema", "version"} {
			if f := fs.Lookup(name); f != nil {
				fmt.Fprintf(stderr, "  -%s\n    \t%s\n", f.Name, f.Usage)
			}
		}
	}
	return fs.Parse(args)
}

// run prints the schema to stdout when printSchema is set, else serves the
// provider to the engine until it is told to stop.
func run(ctx context.Context, printSchema bool, stdout io.Writer) error {
	prov, err := newProvider()
	if err != nil {
		return err
	}
	if printSchema {
		return writeSchema(ctx, stdout, prov)
	}
	if err := prov.Run(ctx, packageName, version); err != nil {
		return fmt.Errorf("serving the %s provider: %w", packageName, err)
	}
	return nil
}

// newProvider builds the provider: every component of package provider,
// served through infer.ComponentF for its schema (type tokens and
// documentation come from their Annotate methods) and through construct for
// its args. A new component is one more line in components.
func newProvider() (p.Provider, error) {
	var inferred []infer.InferredComponent
	byType := map[string]component{}
	// One process serves one `pulumi up`: its backups share these caps.
	for _, c := range components(&provider.Gates{}) {
		inferred = append(inferred, c.inferred)
		byType[c.typ] = c
	}
	prov, err := infer.NewProviderBuilder().
		WithDisplayName("worldbackup").
		WithDescription("Declarative, on-demand backups of Minecraft/Paper server worlds on Kubernetes: "+
			"each WorldBackup is one backup run, a Kubernetes Job that archives a world and records it in a catalog; "+
			"each WorldRestore a Job that restores an archive into a world, with no database access; "+
			"each WorldPrune a Job that expires old archives by a retention policy; "+
			"each WorldVerify a Job that restores an archive into scratch space and checks the world it holds, down to the chunks; "+
			"each WorldBackupSchedule a CronJob that backs up on a schedule; "+
			"WorldMetrics the catalog's Prometheus exporter and status page, a Deployment and a Service.").
		WithKeywords("kubernetes", "minecraft", "backup", "category/utility", "kind/component").
		WithPublisher(publisher).
		WithLicense("Apache-2.0").
		WithHomepage(repository).
		WithRepository(repository).
		WithPluginDownloadURL(pluginDownloadURL).
		WithLanguageMap(languages()).
		WithGoImportPath(goImportPath).
		WithComponents(inferred...).
		Build()
	if err != nil {
		return p.Provider{}, fmt.Errorf("building the %s provider: %w", packageName, err)
	}
	prov.Construct = constructing(prov.Construct, byType)
	prov.GetSchema = withoutInputsNotTaken(prov.GetSchema)
	return prov, nil
}

// withoutInputsNotTaken returns getSchema with the shared inputs each
// component does not take (provider.InputsNotTaken: JobInputs is embedded in
// every component's args, so infer lists them all) removed from its
// inputProperties and requiredInputs.
func withoutInputsNotTaken(getSchema func(context.Context, p.GetSchemaRequest) (p.GetSchemaResponse, error)) func(context.Context, p.GetSchemaRequest) (p.GetSchemaResponse, error) {
	return func(ctx context.Context, req p.GetSchemaRequest) (p.GetSchemaResponse, error) {
		resp, err := getSchema(ctx, req)
		if err != nil {
			return resp, err
		}
		dec := json.NewDecoder(strings.NewReader(resp.Schema))
		dec.UseNumber()
		var spec map[string]any
		if err := dec.Decode(&spec); err != nil {
			return resp, fmt.Errorf("reading the inferred schema: %w", err)
		}
		resources, _ := spec["resources"].(map[string]any)
		for typ, res := range resources {
			r, _ := res.(map[string]any)
			notTaken := provider.InputsNotTaken(typ)
			if r == nil || len(notTaken) == 0 {
				continue
			}
			props, _ := r["inputProperties"].(map[string]any)
			for _, name := range notTaken {
				delete(props, name)
			}
			if required, ok := r["requiredInputs"].([]any); ok {
				r["requiredInputs"] = slices.DeleteFunc(required, func(v any) bool { return slices.Contains(notTaken, v.(string)) })
			}
		}
		b, err := json.Marshal(spec)
		if err != nil {
			return resp, fmt.Errorf("writing the schema: %w", err)
		}
		resp.Schema = string(b)
		return resp, nil
	}
}

// components are the components the plugin serves, each named once: its
// type token and constructor. The backups that set concurrency share gates.
func components(gates *provider.Gates) []component {
	return []component{
		serve(provider.WorldBackupType, func(ctx *pulumi.Context, name string, args provider.WorldBackupArgs, opts ...pulumi.ResourceOption) (*provider.WorldBackup, error) {
			args.Gates = gates
			return provider.NewWorldBackup(ctx, name, args, opts...)
		}),
		serve(provider.WorldRestoreType, provider.NewWorldRestore),
		serve(provider.WorldPruneType, provider.NewWorldPrune),
		serve(provider.WorldBackupScheduleType, provider.NewWorldBackupSchedule),
		serve(provider.WorldVerifyType, provider.NewWorldVerify),
		serve(provider.WorldVerifyScheduleType, provider.NewWorldVerifySchedule),
		serve(provider.WorldMetricsType, provider.NewWorldMetrics),
	}
}

// component is one served component: infer's view of it (its schema), the
// type of its args (whose fields the inputs are adapted to, see
// coerceInputs) and the construct that builds it (see constructing), given
// the problems found in adapting them.
type component struct {
	typ       string
	inferred  infer.InferredComponent
	argsType  reflect.Type
	construct func(problems []provider.Problem) comProvider.ConstructFunc
}

// serve returns the component typ built by the constructor fn.
func serve[A any, C pulumi.ComponentResource](typ string, fn func(*pulumi.Context, string, A, ...pulumi.ResourceOption) (C, error)) component {
	return component{typ: typ, inferred: infer.ComponentF(fn), argsType: reflect.TypeFor[A](),
		construct: func(problems []provider.Problem) comProvider.ConstructFunc { return construct(fn, problems) }}
}

// The package's Registry metadata. The repository has no remote yet: the
// GitHub organisation worldbackup is a placeholder, and the one place to
// change it (README.md's install section quotes the same URLs).
const (
	publisher  = "worldbackup"
	repository = "https://github.com/worldbackup/worldbackup"
	// pluginDownloadURL is where the engine downloads the plugin from when a
	// program (or `pulumi plugin install resource worldbackup <v>`) needs a
	// version it does not have: a GitHub release per tag v<version>, whose
	// assets are `make dist`'s archives. The engine expands ${VERSION} and
	// appends pulumi-resource-worldbackup-v<version>-<os>-<arch>.tar.gz.
	pluginDownloadURL = repository + "/releases/download/v${VERSION}/"
	// goImportPath is the Go package Go programs use: the components
	// themselves (package provider), which run in the program's process, so
	// no generated Go SDK is needed.
	goImportPath = "github.com/worldbackup/worldbackup/provider"
)

// The names the generated SDKs (`make sdks`, `make dist`) are published
// under, by the Registry's conventions for a third-party package:
// @<publisher>/pulumi-<name> on npm (cert-manager's @pulumi/kubernetes-cert-manager
// is the publisher's scope and the package; outside Pulumi's own scope the
// pulumi- prefix says what the package is) and pulumi_<name> on PyPI.
const (
	npmPackage    = "@worldbackup/pulumi-worldbackup"
	pythonPackage = "pulumi_worldbackup"
)

// sdkReadme is the README of the TypeScript and Python packages (npm's page,
// PyPI's long description).
const sdkReadme = `# worldbackup for Pulumi

Declarative backups and restores of Minecraft/Paper server worlds on Kubernetes:
WorldBackup (one backup run, a Kubernetes Job), WorldRestore, WorldPrune,
WorldVerify (an archive checked down to the chunks), WorldBackupSchedule and
WorldVerifySchedule (CronJobs) and WorldMetrics (the catalog's Prometheus
exporter and status page), served by the component-provider plugin
pulumi-resource-worldbackup. The engine downloads the plugin itself, from the
release this package names; to install it ahead of time:

    pulumi plugin install resource worldbackup <version> --server '` + pluginDownloadURL + `'

TypeScript: npm install @worldbackup/pulumi-worldbackup

    import * as worldbackup from "@worldbackup/pulumi-worldbackup";
    const backup = new worldbackup.WorldBackup("survival", {
        server: "survival", runId: "20250601-0300",
        image: "ghcr.io/worldbackup/worldbackup-archiver:v0.1.0", backupClaimName: "world-backups",
    });
    export const archiveRef = backup.archiveRef;

Python: pip install pulumi_worldbackup

    import pulumi
    import pulumi_worldbackup as worldbackup
    backup = worldbackup.WorldBackup("survival", server="survival", run_id="20250601-0300",
        image="ghcr.io/worldbackup/worldbackup-archiver:v0.1.0", backup_claim_name="world-backups")
    pulumi.export("archive_ref", backup.archive_ref)

Documentation, the archiver image and the catalog: ` + repository + `
`

// languages is the schema's language section: pulumi-go-provider's defaults
// (schema version respected, pyproject.toml, Go container types) with our
// package names and README.
func languages() map[string]any {
	return map[string]any{
		"nodejs": map[string]any{
			"packageName":          npmPackage,
			"packageDescription":   "Pulumi components for worldbackup: declarative backups and restores of Minecraft/Paper worlds on Kubernetes.",
			"readme":               sdkReadme,
			"respectSchemaVersion": true,
		},
		"python": map[string]any{
			"packageName":          pythonPackage,
			"readme":               sdkReadme,
			"respectSchemaVersion": true,
			"pyproject":            map[string]any{"enabled": true},
		},
		"go": map[string]any{
			"generateResourceContainerTypes": true,
			"respectSchemaVersion":           true,
		},
		"csharp": map[string]any{
			"respectSchemaVersion": true,
		},
	}
}

// constructing returns a Construct that serves the components in byType
// itself and every other type through next (infer's).
//
// infer.ComponentF copies the inputs into the args with the SDK's
// ConstructInputs.CopyTo, which fills only the args' own fields, not those
// of an embedded struct (provider.JobInputs, whose inputs the schema lists
// as the component's own, since pulumi-go-provider reads the embedded
// fields for it): these components get their args from construct instead.
//
// The inputs are first adapted to the args' field types (coerceInputs), so
// that what a user obviously means is taken and every input that cannot be
// is named, with the component's own problems.
func constructing(next func(context.Context, p.ConstructRequest) (p.ConstructResponse, error),
	byType map[string]component) func(context.Context, p.ConstructRequest) (p.ConstructResponse, error) {
	return func(ctx context.Context, req p.ConstructRequest) (p.ConstructResponse, error) {
		if c, ok := byType[string(req.Urn.Type())]; ok {
			var problems []provider.Problem
			req.Inputs, problems = coerceInputs(req.Inputs, c.argsType)
			return p.ProgramConstruct(ctx, req, c.construct(problems))
		}
		return next(ctx, req)
	}
}

// construct serves the component constructor fn: it copies the inputs into
// its args A, into its own fields and those of every struct it embeds, and
// calls fn with them. With problems (inputs it could not take, left out of
// the inputs), it registers nothing and fails with them and the problems
// the args' Validate finds in the rest, in one *provider.InputError.
func construct[A any, C pulumi.ComponentResource](fn func(*pulumi.Context, string, A, ...pulumi.ResourceOption) (C, error),
	problems []provider.Problem) comProvider.ConstructFunc {
	return func(ctx *pulumi.Context, typ, name string, inputs comProvider.ConstructInputs, opts pulumi.ResourceOption) (*comProvider.ConstructResult, error) {
		var args A
		if err := copyInputs(inputs, &args); err != nil {
			return nil, fmt.Errorf("copying the inputs of %s %q: %w", typ, name, err)
		}
		if len(problems) > 0 {
			return nil, withValidation(typ, args, problems)
		}
		// The engine constructs a component once the caller resolved its
		// inputs: they are checked before anything is registered.
		comp, err := fn(settle.Resolved(ctx), name, args, opts)
		if err != nil {
			return nil, err
		}
		return comProvider.NewConstructResult(comp)
	}
}

// copyInputs copies inputs into the struct *dst: its own fields, then those
// of each struct it embeds (recursively).
func copyInputs(inputs comProvider.ConstructInputs, dst any) error {
	if err := inputs.CopyTo(dst); err != nil {
		return err
	}
	v := reflect.ValueOf(dst).Elem()
	for i := range v.NumField() {
		if f := v.Type().Field(i); f.Anonymous && f.IsExported() && f.Type.Kind() == reflect.Struct {
			if err := copyInputs(inputs, v.Field(i).Addr().Interface()); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeSchema writes the package schema of prov as indented JSON, the form
// checked in as schema.json.
func writeSchema(ctx context.Context, w io.Writer, prov p.Provider) error {
	spec, err := p.GetSchema(ctx, packageName, version, prov)
	if err != nil {
		return fmt.Errorf("generating the schema: %w", err)
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // keep <server> readable in descriptions
	enc.SetIndent("", "  ")
	if err := enc.Encode(spec); err != nil {
		return fmt.Errorf("writing the schema: %w", err)
	}
	return nil
}

// withValidation returns the problems of the inputs the component typ could
// not take, followed by those its args' Validate finds in the rest (but for
// the inputs already named: a dropped required input is not missing too).
func withValidation(typ string, args any, problems []provider.Problem) error {
	component := strings.ToLower(typ[strings.LastIndex(typ, ":")+1:])
	all := slices.Clone(problems)
	v, ok := args.(interface{ Validate() error })
	var ie *provider.InputError
	if ok && errors.As(v.Validate(), &ie) {
		for _, q := range ie.Problems {
			named := slices.ContainsFunc(problems, func(p provider.Problem) bool {
				return q.Input == p.Input || strings.HasPrefix(q.Input, p.Input+".") || strings.HasPrefix(p.Input, q.Input+".") ||
					strings.HasPrefix(p.Input, q.Input+"[")
			})
			if !named && q.Input != "inputs" { // "inputs": unknown at preview, checked when they resolve
				all = append(all, q)
			}
		}
	}
	return &provider.InputError{Component: component, Problems: all}
}
