package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// SiteBName is the second cluster of the WAN tests (CONFLUX_E2E_SITE_B overrides it).
func SiteBName() string {
	if n := os.Getenv("CONFLUX_E2E_SITE_B"); n != "" {
		return n
	}
	return "conflux-b"
}

// UpSiteB brings up the kind cluster name as a second site, one control plane and one
// worker (CONFLUX_WORKERS=1 hack/cluster.sh up NAME): cluster.sh reuses it when it exists
// and answers, and makes it afresh when it is absent or unhealthy. The cluster stays after
// the test (a later run reuses it); `hack/cluster.sh down NAME` removes it.
func UpSiteB(ctx context.Context, t *testing.T, a *Cluster, name string) *Cluster {
	t.Helper()
	if name == a.Name {
		t.Fatalf("site B %q is the cluster under test", name)
	}
	out, err := RunEnv(ctx, []string{"CONFLUX_CACHE=" + a.Cache, "CONFLUX_WORKERS=1"},
		filepath.Join(a.Root, "hack", "cluster.sh"), "up", name)
	if err != nil {
		t.Fatalf("bringing up site B: %v\n%s", err, out)
	}
	b := &Cluster{Name: name, Kubeconfig: filepath.Join(a.Cache, "kube", name+".kubeconfig"),
		KubectlBin: a.KubectlBin, Root: a.Root, Cache: a.Cache}
	if _, err := os.Stat(b.Kubeconfig); err != nil {
		t.Fatalf("site B has no kubeconfig: %v", err)
	}
	return b
}

// KindNodes lists the node containers of a kind cluster.
func KindNodes(ctx context.Context, c *Cluster) ([]string, error) {
	out, err := Run(ctx, nil, filepath.Join(c.Cache, "bin", "kind"), "get", "nodes", "--name", c.Name)
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// WAN runs hack/wan.sh for two clusters.
func WAN(ctx context.Context, a, b *Cluster, args ...string) (string, error) {
	return RunEnv(ctx, []string{"CONFLUX_CACHE=" + a.Cache}, filepath.Join(a.Root, "hack", "wan.sh"),
		append([]string{args[0], a.Name, b.Name}, args[1:]...)...)
}

// wanLeftovers lists, node by node, anything of a WAN join that is still in the nodes of
// a and b: the tun device, a conflux-wanem process or its files (a /dev/net/tun join made
// included), a policy rule or route
// table 147, a route to the other cluster's pod CIDRs, an iptables chain CONFLUX-WAN*. It
// looks for each itself rather than trusting `wan.sh status`.
func wanLeftovers(ctx context.Context, a, b *Cluster) ([]string, error) {
	var left []string
	for _, pair := range [][2]*Cluster{{a, b}, {b, a}} {
		own, other := pair[0], pair[1]
		foreign, err := other.Nodes(ctx)
		if err != nil {
			return nil, err
		}
		check := `ip -o link show cxwan0 2>/dev/null
ip rule show | grep -w 'lookup 147'
ip route show table 147 2>/dev/null
iptables-save | grep CONFLUX-WAN
for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = conflux-wanem ] && echo "process ${p#/proc/} conflux-wanem"; done
ls /run/conflux-wanem.pid /run/conflux-wanem.mknod /usr/local/bin/conflux-wanem /var/log/conflux-wanem.log 2>/dev/null
`
		for _, n := range foreign {
			if n.Spec.PodCIDR != "" {
				check += "ip route show " + n.Spec.PodCIDR + "\n"
			}
		}
		check += "true\n"
		nodes, err := KindNodes(ctx, own)
		if err != nil {
			return nil, err
		}
		for _, node := range nodes {
			out, err := Run(ctx, []byte(check), "docker", "exec", "-i", node, "sh", "-s")
			if err != nil {
				return nil, fmt.Errorf("checking %s: %w", node, err)
			}
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if l != "" {
					left = append(left, node+": "+l)
				}
			}
		}
	}
	return left, nil
}
