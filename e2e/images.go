package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
)

// NetcheckImageRepo is the repository of the e2e test image (e2e/cmd/netcheck).
const NetcheckImageRepo = "conflux.dev/e2e-netcheck"

// BuildNetcheckImage compiles e2e/cmd/netcheck statically, builds its FROM-scratch image
// (e2e/images/netcheck/Dockerfile) tagged with the binary's hash, and loads it into every
// node of the cluster with `hack/cluster.sh load` (kind load docker-image). Nothing is
// pulled. It returns the image reference.
func BuildNetcheckImage(ctx context.Context, c *Cluster) (string, error) {
	dir, err := os.MkdirTemp("", "netcheck-image-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)

	bin := filepath.Join(dir, "netcheck")
	build := []string{"build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/netcheck"}
	if _, err := RunEnv(ctx, []string{"CGO_ENABLED=0"}, "go", build...); err != nil {
		return "", err
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	image := fmt.Sprintf("%s:%s", NetcheckImageRepo, hex.EncodeToString(sum[:])[:12])

	dockerfile := filepath.Join("images", "netcheck", "Dockerfile")
	if _, err := RunEnv(ctx, []string{"DOCKER_BUILDKIT=0"}, "docker", "build", "-q", "-f", dockerfile, "-t", image, dir); err != nil {
		return "", err
	}
	if _, err := Run(ctx, nil, filepath.Join(c.Root, "hack", "cluster.sh"), "load", image, c.Name); err != nil {
		return "", err
	}
	return image, nil
}
