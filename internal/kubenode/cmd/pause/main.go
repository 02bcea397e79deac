// Command pause is the sandbox ("pause") container of the test node
// (internal/kubenode): it holds a pod's namespaces open until it is told to
// stop, reaping any child it inherits. The harness builds it static and packs
// it as the image containerd uses for every pod sandbox, so the node needs no
// registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
