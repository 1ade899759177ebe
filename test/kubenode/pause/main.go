// Command pause is the sandbox ("pause") container of scripts/kube-node.sh's
// node, built from this file because no registry can be reached here: it
// holds the pod's namespaces, reaps the children it inherits as a pod's
// PID 1, and exits on SIGINT or SIGTERM, as Kubernetes' own pause does.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
