// Command pulumi-resource-kubernetes is the Kubernetes provider plugin, built
// from the Go module proxy. The provider module's own main embeds files that
// its release process generates; this one embeds the files that ../../gen
// writes next to it (git-ignored), and is otherwise the same.
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema-embed.json
var pulumiSchema []byte

//go:embed terraform-mapping-embed.json
var terraformMapping []byte

func main() {
	provider.Serve("kubernetes", version.Version, pulumiSchema, terraformMapping)
}
