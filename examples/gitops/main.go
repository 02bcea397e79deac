// Command gitops is the GitOps example's Pulumi program (see README.md):
// `pulumi up` in this folder renders the backup Jobs and their
// kustomization.yaml into the folder Argo CD or Flux applies. Its logic is in
// package gitops, which the tests run inline.
package main

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/examples/gitops/gitops"
)

func main() {
	pulumi.Run(gitops.Program)
}
