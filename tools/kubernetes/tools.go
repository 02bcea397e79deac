//go:build tools

// Package tools pins the Kubernetes control plane and kubelet that `make
// cluster-tools` builds for the tier-5 tests (internal/kubenode).
// k8s.io/kubernetes points its k8s.io/* staging modules at folders of its own
// repository (v0.0.0), so it cannot be installed with `go install`; this
// module requires it and replaces every staging module by its published
// v0.34.x release.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
