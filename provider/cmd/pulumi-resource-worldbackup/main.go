// Command pulumi-resource-worldbackup is the worldbackup component-provider
// plugin: it serves the components of package provider (WorldBackup and
// WorldRestore) to
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

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/worldbackup/worldbackup/provider"
)

// packageName is the Pulumi package name: the first part of every type token
// (worldbackup:index:WorldBackup) and the plugin's name
// (pulumi-resource-<packageName>).
const packageName = "worldbackup"

// version is the plugin's version (semver, no leading v), stamped at build
// time with -ldflags "-X main.version=1.2.3". schema.json is generated with
// the default.
var version = "0.1.0"

func main() {
	// Defined on the process's flag set so that the SDK's own flag.Parse
	// (provider.MainContext) accepts it too.
	printSchema := flag.Bool("schema", false, "print the package schema (JSON) to stdout and exit")
	if err := preparse(flag.CommandLine, os.Args[1:], os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		os.Exit(2) // the flag package has printed the error and the usage
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
		fmt.Fprintf(stderr, "usage: pulumi-resource-worldbackup [-schema] [engine-address]\n\n"+
			"The Pulumi engine starts this plugin; run it yourself only to print its schema.\n\n")
		fs.PrintDefaults()
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
// served through infer.ComponentF (type tokens and documentation come from
// their Annotate methods). A new component is one more ComponentF line here.
func newProvider() (p.Provider, error) {
	prov, err := infer.NewProviderBuilder().
		WithDisplayName("worldbackup").
		WithDescription("Declarative, on-demand backups of Minecraft/Paper server worlds on Kubernetes: "+
			"each WorldBackup is one backup run, a Kubernetes Job that archives a world and records it in a catalog; "+
			"each WorldRestore a Job that restores an archive into a world, with no database access; "+
			"each WorldPrune a Job that expires old archives by a retention policy; "+
			"each WorldBackupSchedule a CronJob that backs up on a schedule.").
		WithKeywords("kubernetes", "minecraft", "backup", "category/utility", "kind/component").
		WithRepository("https://github.com/worldbackup/worldbackup").
		WithGoImportPath("github.com/worldbackup/worldbackup/sdk/go/worldbackup").
		WithComponents(
			infer.ComponentF(provider.NewWorldBackup),
			infer.ComponentF(provider.NewWorldRestore),
			infer.ComponentF(provider.NewWorldPrune),
			infer.ComponentF(provider.NewWorldBackupSchedule),
		).
		Build()
	if err != nil {
		return p.Provider{}, fmt.Errorf("building the %s provider: %w", packageName, err)
	}
	return prov, nil
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
