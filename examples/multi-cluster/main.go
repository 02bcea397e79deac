// Command multi-cluster is the multi-cluster example's Pulumi program (see
// README.md): `pulumi up` in this folder runs it. Its logic is in package
// multicluster, which the tests run inline.
package main

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/examples/multi-cluster/multicluster"
)

func main() {
	pulumi.Run(multicluster.Program)
}
