package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Helm runs helm against the cluster under test.
type Helm struct {
	Bin        string // $CONFLUX_CACHE/bin/helm (make deps), else helm from PATH
	Kubeconfig string
}

// Helm finds the helm binary; a missing helm is an error (never a skip).
func (c *Cluster) Helm() (*Helm, error) {
	bin := filepath.Join(c.Cache, "bin", "helm")
	if _, err := os.Stat(bin); err != nil {
		p, lerr := exec.LookPath("helm")
		if lerr != nil {
			return nil, fmt.Errorf("helm not found at %s nor in PATH (make deps builds it)", bin)
		}
		bin = p
	}
	return &Helm{Bin: bin, Kubeconfig: c.Kubeconfig}, nil
}

// Run runs helm with the cluster's kubeconfig and returns its stdout.
func (h *Helm) Run(ctx context.Context, args ...string) (string, error) {
	return Run(ctx, nil, h.Bin, append([]string{"--kubeconfig", h.Kubeconfig}, args...)...)
}

// lockFile takes an exclusive flock on path, polling until ctx ends, and returns the
// function that releases it. It serialises tests that own cluster-scoped objects (the
// chart's CRDs) between the e2e runs of this machine: every run, by hand or by CI, uses
// the same cluster and the same lock file beside its kubeconfig.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if err != syscall.EWOULDBLOCK {
			f.Close()
			return nil, fmt.Errorf("flock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for %s (another e2e run holds it): %w", path, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// crdOwner reads the Helm release annotations of a CRD: exists is false when there is no
// such CRD; release and namespace are empty when Helm does not own it.
func (c *Cluster) crdOwner(ctx context.Context, crd string) (exists bool, release, namespace string, err error) {
	out, err := c.Kubectl(ctx, nil, "get", "crd", crd, "--ignore-not-found", "-o",
		`jsonpath={.metadata.name} {.metadata.annotations.meta\.helm\.sh/release-name} {.metadata.annotations.meta\.helm\.sh/release-namespace}`)
	if err != nil {
		return false, "", "", err
	}
	f := strings.Fields(out)
	switch len(f) {
	case 0:
		return false, "", "", nil
	case 3:
		return true, f[1], f[2], nil
	default:
		return true, "", "", nil
	}
}
