// Command gen writes the two files that the Kubernetes provider plugin
// embeds: its schema with the version set, and its Terraform mapping, both
// compacted. It does what the provider module's own generate.go does, without
// needing to run inside the (read-only) module cache.
//
//	go run ./gen -version 4.32.0 -src <provider module>/cmd/pulumi-resource-kubernetes -out cmd/pulumi-resource-kubernetes
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	version := flag.String("version", "", "provider version to stamp into the schema (no leading v)")
	src := flag.String("src", "", "folder holding the provider's schema.json and terraform-mapping.json")
	out := flag.String("out", "", "folder to write schema-embed.json and terraform-mapping-embed.json into")
	flag.Parse()
	if *version == "" || *src == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "gen: -version, -src and -out are required")
		os.Exit(2)
	}
	if err := run(*version, *src, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(version, src, out string) error {
	var schema map[string]any
	if err := readJSON(filepath.Join(src, "schema.json"), &schema); err != nil {
		return err
	}
	schema["version"] = version
	if err := writeJSON(filepath.Join(out, "schema-embed.json"), schema); err != nil {
		return err
	}
	var mapping any
	if err := readJSON(filepath.Join(src, "terraform-mapping.json"), &mapping); err != nil {
		return err
	}
	return writeJSON(filepath.Join(out, "terraform-mapping-embed.json"), mapping)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("parsing %s: %w", path, err)
	}
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	return os.WriteFile(path, b, 0o644)
}
