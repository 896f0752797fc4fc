package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
)

// ConfluxImages are the project's own images, built and loaded into the cluster.
type ConfluxImages struct {
	Operator string // conflux/operator:dev-<hash>
	Confluxd string // conflux/confluxd:dev-<hash>
	Demo     string // conflux/demo:dev-<hash>, when asked for
}

// BuildConfluxImages runs `hack/build-images.sh --load <cluster>`: it builds the operator
// and confluxd images, and the extra ones named (only "demo" exists) (FROM scratch, nothing
// pulled; a no-op when their contents did not change) and loads them into every node. It
// returns the content-hash tags the script prints on its last lines ("image <name> <ref>").
func BuildConfluxImages(ctx context.Context, c *Cluster, extra ...string) (ConfluxImages, error) {
	script := filepath.Join(c.Root, "hack", "build-images.sh")
	args := []string{"--load", c.Name}
	demo := false
	for _, e := range extra {
		if e != "demo" {
			return ConfluxImages{}, fmt.Errorf("no image %q (extra images: demo)", e)
		}
		demo = true
	}
	if demo {
		args = append(args, "operator", "confluxd", "demo")
	}
	out, err := RunEnv(ctx, []string{"CONFLUX_CACHE=" + c.Cache}, script, args...)
	if err != nil {
		return ConfluxImages{}, err
	}
	var imgs ConfluxImages
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "image" {
			continue
		}
		switch f[1] {
		case "operator":
			imgs.Operator = f[2]
		case "confluxd":
			imgs.Confluxd = f[2]
		case "demo":
			imgs.Demo = f[2]
		}
	}
	if imgs.Operator == "" || imgs.Confluxd == "" || (demo && imgs.Demo == "") {
		return imgs, fmt.Errorf("%s printed no 'image operator|confluxd|demo REF' lines:\n%s", script, out)
	}
	return imgs, nil
}

// splitImage splits "repo:tag" at its last colon (a registry port has no tag after it).
func splitImage(ref string) (repo, tag string) {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return ref, ""
	}
	return ref[:i], ref[i+1:]
}
