//go:build tools

// Package tools pins containerd (containerd, containerd-shim-runc-v2, ctr)
// for the tier-5 tests (internal/kubenode); scripts/cluster-tools.sh builds
// them with the build tags that drop the snapshotters needing cgo.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
