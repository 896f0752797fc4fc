package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// The topology hack/cluster.sh makes.
const (
	wantNodes       = 4 // one control plane, three workers
	fabricLabel     = "conflux.dev/fabric"
	fabricA         = "fabric-a"
	wantFabricNodes = 2
)

// mustCluster finds the cluster or fails the test: a missing cluster is a failure, not
// a reason to skip.
func mustCluster(t *testing.T) *Cluster {
	t.Helper()
	c, err := DiscoverCluster()
	if err != nil {
		t.Fatalf("no cluster to test: %v", err)
	}
	t.Logf("cluster %q, kubeconfig %s", c.Name, c.Kubeconfig)
	return c
}

func TestNodesReady(t *testing.T) {
	c := mustCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var nodes []Node
	for {
		var err error
		nodes, err = c.Nodes(ctx)
		if err == nil && len(nodes) >= wantNodes && allReady(nodes) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("want %d Ready nodes: got %s (last error: %v)", wantNodes, summary(nodes), err)
		case <-time.After(2 * time.Second):
		}
	}
	if len(nodes) != wantNodes {
		t.Errorf("want %d nodes, got %d: %s", wantNodes, len(nodes), summary(nodes))
	}
	fabric := 0
	for _, n := range nodes {
		if n.Spec.PodCIDR == "" {
			t.Errorf("node %s has no podCIDR", n.Metadata.Name)
		}
		if n.Metadata.Labels[fabricLabel] == fabricA {
			fabric++
			if n.IsControlPlane() {
				t.Errorf("control-plane node %s is in %s", n.Metadata.Name, fabricA)
			}
		}
	}
	if fabric != wantFabricNodes {
		t.Errorf("want %d nodes labelled %s=%s, got %d", wantFabricNodes, fabricLabel, fabricA, fabric)
	}
	t.Logf("nodes: %s", summary(nodes))
}

func TestPodToPodAcrossNodes(t *testing.T) {
	c := mustCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	nodes, err := c.Nodes(ctx)
	if err != nil {
		t.Fatalf("listing nodes: %v", err)
	}
	// one worker from the fabric and one outside it, so the traffic crosses nodes
	var inFabric, outside *Node
	for i := range nodes {
		n := &nodes[i]
		switch {
		case n.IsControlPlane() || !n.Ready():
		case n.Metadata.Labels[fabricLabel] == fabricA && inFabric == nil:
			inFabric = n
		case n.Metadata.Labels[fabricLabel] != fabricA && outside == nil:
			outside = n
		}
	}
	if inFabric == nil || outside == nil {
		t.Fatalf("need a Ready worker in %s and one outside it: %s", fabricA, summary(nodes))
	}

	image, err := BuildNetcheckImage(ctx, c)
	if err != nil {
		t.Fatalf("building the test image: %v", err)
	}
	t.Logf("test image %s", image)

	PodToPodSpec(ctx, t, PodToPodInput{
		Cluster:    c,
		Image:      image,
		ServerNode: *inFabric,
		ClientNode: *outside,
	})
}

// PodToPodInput is what PodToPodSpec needs.
type PodToPodInput struct {
	Cluster    *Cluster
	Image      string // the netcheck image, loaded on the nodes
	ServerNode Node   // where the TCP server pod runs
	ClientNode Node   // where the client pod runs; must differ from ServerNode
	Port       int    // server port; 0 means 7777
}

// PodToPodSpec runs a token server pod on one node and a client pod on another, in a
// fresh namespace, and asserts the client read the server's token from the server's pod
// IP, which must lie in the server node's podCIDR (the pod network, not the node's).
func PodToPodSpec(ctx context.Context, t *testing.T, in PodToPodInput) {
	t.Helper()
	c := in.Cluster
	if in.Port == 0 {
		in.Port = 7777
	}
	if in.ServerNode.Metadata.Name == in.ClientNode.Metadata.Name {
		t.Fatalf("server and client must be on different nodes, both are on %s", in.ServerNode.Metadata.Name)
	}
	token := randomHex(t, 16)
	ns := "conflux-e2e-" + randomHex(t, 4)

	if _, err := c.Kubectl(ctx, nil, "create", "namespace", ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = c.Kubectl(cctx, nil, "delete", "namespace", ns, "--wait=false")
	})

	server := podManifest(ns, "server", in.Image, in.ServerNode.Metadata.Name, "Always",
		[]string{"serve", "-port", fmt.Sprint(in.Port), "-token", token}, in.Port)
	if _, err := c.Kubectl(ctx, []byte(server), "apply", "-f", "-"); err != nil {
		t.Fatalf("creating server pod: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	st, err := c.WaitPod(wctx, ns, "server", func(s PodStatus) bool { return s.Ready && s.PodIP != "" })
	if err != nil {
		t.Fatalf("server pod not Ready: %v\n%s", err, c.Describe(ctx, ns, "server"))
	}
	t.Logf("server pod on %s, IP %s", st.NodeName, st.PodIP)
	if st.NodeName != in.ServerNode.Metadata.Name {
		t.Fatalf("server pod landed on %s, want %s", st.NodeName, in.ServerNode.Metadata.Name)
	}
	if !inCIDR(st.PodIP, in.ServerNode.Spec.PodCIDR) {
		t.Fatalf("server pod IP %s is not in %s's podCIDR %s", st.PodIP, st.NodeName, in.ServerNode.Spec.PodCIDR)
	}

	addr := net.JoinHostPort(st.PodIP, fmt.Sprint(in.Port))
	client := podManifest(ns, "client", in.Image, in.ClientNode.Metadata.Name, "Never",
		[]string{"fetch", "-addr", addr, "-want", token, "-timeout", "90s"}, 0)
	if _, err := c.Kubectl(ctx, []byte(client), "apply", "-f", "-"); err != nil {
		t.Fatalf("creating client pod: %v", err)
	}
	wctx2, cancel2 := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel2()
	cst, err := c.WaitPod(wctx2, ns, "client", func(s PodStatus) bool { return s.Phase == "Succeeded" })
	if err != nil {
		t.Fatalf("client pod did not read the token: %v\n%s\n%s", err,
			c.Describe(ctx, ns, "client"), c.Describe(ctx, ns, "server"))
	}
	logs, err := c.Kubectl(ctx, nil, "-n", ns, "logs", "client")
	if err != nil {
		t.Fatalf("client logs: %v", err)
	}
	if !strings.Contains(logs, fmt.Sprintf("got token %q", token)) {
		t.Fatalf("client logs do not show the token:\n%s", logs)
	}
	if !inCIDR(cst.PodIP, in.ClientNode.Spec.PodCIDR) {
		t.Errorf("client pod IP %s is not in %s's podCIDR %s", cst.PodIP, cst.NodeName, in.ClientNode.Spec.PodCIDR)
	}
	t.Logf("client pod on %s (IP %s) read the token from %s on %s:\n%s",
		cst.NodeName, cst.PodIP, addr, st.NodeName, strings.TrimSpace(logs))
	srvLogs, _ := c.Kubectl(ctx, nil, "-n", ns, "logs", "server")
	if !strings.Contains(srvLogs, "connection from "+cst.PodIP+":") {
		t.Errorf("server did not see the client's pod IP %s as the source (masqueraded?):\n%s", cst.PodIP, srvLogs)
	}
}

// podManifest renders a pod pinned to a node (nodeSelector on the hostname label, so the
// scheduler still places it). port > 0 adds a TCP readiness probe on it.
func podManifest(ns, name, image, node, restart string, args []string, port int) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	probe := ""
	if port > 0 {
		probe = fmt.Sprintf(`
    ports:
    - containerPort: %d
    readinessProbe:
      tcpSocket:
        port: %d
      periodSeconds: 1`, port, port)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
  labels:
    app.kubernetes.io/part-of: conflux-e2e
spec:
  restartPolicy: %s
  nodeSelector:
    kubernetes.io/hostname: %s
  terminationGracePeriodSeconds: 1
  containers:
  - name: netcheck
    image: %s
    imagePullPolicy: Never
    args: [%s]%s
`, name, ns, restart, node, image, strings.Join(quoted, ", "), probe)
}

func allReady(nodes []Node) bool {
	for _, n := range nodes {
		if !n.Ready() {
			return false
		}
	}
	return true
}

func summary(nodes []Node) string {
	parts := make([]string, 0, len(nodes))
	for _, n := range nodes {
		state := "NotReady"
		if n.Ready() {
			state = "Ready"
		}
		extra := ""
		if f := n.Metadata.Labels[fabricLabel]; f != "" {
			extra = " " + f
		}
		parts = append(parts, fmt.Sprintf("%s=%s(%s%s)", n.Metadata.Name, state, n.Spec.PodCIDR, extra))
	}
	if len(parts) == 0 {
		return "no nodes"
	}
	return strings.Join(parts, ", ")
}

func inCIDR(ip, cidr string) bool {
	_, n, err := net.ParseCIDR(cidr)
	return err == nil && n.Contains(net.ParseIP(ip))
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("random: %v", err)
	}
	return hex.EncodeToString(b)
}
