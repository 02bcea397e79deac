//go:build tools

// Package tools pins runc for the tier-5 tests (internal/kubenode);
// scripts/cluster-tools.sh builds it static with seccomp (libseccomp-dev).
package tools

import _ "github.com/opencontainers/runc"
