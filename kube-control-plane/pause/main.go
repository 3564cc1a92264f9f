// The pod sandbox's process (the "pause" container): it holds the pod's namespaces open, reaps the
// children that end up re-parented to it, and exits on SIGTERM or SIGINT. Kubernetes' own is a C program
// (build/pause/linux/pause.c: handlers for SIGINT, SIGTERM and SIGCHLD, waitpid until none is left) in an
// image on registry.k8s.io, which cannot be reached here; this is the same behaviour in Go, built static
// (CGO_ENABLED=0) by tests/node_build.py into a one-file image for the node's containerd.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reapAll()
	}
}

// reapAll collects every exited child: signals coalesce, so one SIGCHLD may stand for several exits.
func reapAll() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
