//go:build tools

// Package tools pins the CNI plugins the tier-5 node uses (bridge,
// host-local, loopback; internal/kubenode).
package tools

import (
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
)
