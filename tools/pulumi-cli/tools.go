//go:build tools

// Package tools pins the Pulumi CLI that `make tools` builds from the Go
// module proxy. The CLI's own go.mod carries replace directives, so `go
// install` refuses it; this module requires it instead and repeats the
// non-local replace.
package tools

import _ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
