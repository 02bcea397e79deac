//go:build tools

// Package tools pins the Pulumi YAML language host that `make tools` builds,
// so that `pulumi up` can run the runtime: yaml example through the CLI.
package tools

import _ "github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml"
