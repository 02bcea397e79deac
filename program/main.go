// Command program is the worldbackup Pulumi program that `pulumi up` runs at
// the repository root (see Pulumi.yaml). All of its logic lives in package
// deploy, which the stack tests drive through the Automation API.
package main

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/program/deploy"
)

func main() {
	pulumi.Run(deploy.Program)
}
