// Command etcd is etcd's server, built from go.etcd.io/etcd/server/v3 as
// pinned by this module's go.mod, for the tier-5 tests (internal/kubenode).
// etcd's own main lives in a module (go.etcd.io/etcd/v3) whose go.mod
// replaces its siblings by local folders, so it cannot be installed from the
// module proxy; etcdmain is the same entry point.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
