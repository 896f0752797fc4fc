package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestFabricLinks: components in one fabric domain link over its fast link (ucx), the
// others over TCP, as their sidecars' metrics say; see FabricLinksSpec.
func TestFabricLinks(t *testing.T) {
	c := mustCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	start := time.Now()
	images, err := BuildConfluxImages(ctx, c, "demo")
	if err != nil {
		t.Fatalf("building and loading the images: %v", err)
	}
	t.Logf("images %s, %s and %s built and loaded in %s", images.Operator, images.Confluxd, images.Demo, since(start))
	nodes, err := c.Nodes(ctx)
	if err != nil {
		t.Fatalf("listing nodes: %v", err)
	}
	in := FabricLinksInput{Cluster: c, Images: images, Segments: 120}
	for _, n := range nodes {
		if n.IsControlPlane() || !n.Ready() {
			continue
		}
		if n.Metadata.Labels[fabricLabel] == fabricA {
			in.FabricNodes = append(in.FabricNodes, n.Metadata.Name)
		} else if in.OtherNode == "" {
			in.OtherNode = n.Metadata.Name
		}
	}
	if len(in.FabricNodes) < 2 || in.OtherNode == "" {
		t.Fatalf("need 2 Ready workers labelled %s=%s and one more: %s", fabricLabel, fabricA, summary(nodes))
	}
	FabricLinksSpec(ctx, t, in)
}

// FabricLinksInput is what FabricLinksSpec needs.
type FabricLinksInput struct {
	Cluster     *Cluster
	Images      ConfluxImages // with the demo image, loaded on the nodes
	Segments    int           // DEMO_SEGMENTS: results the sink must get
	FabricNodes []string      // two workers labelled conflux.dev/fabric=fabric-a
	OtherNode   string        // a worker outside it
}

const (
	fabricSpace    = "space"
	fabricWorkflow = "links"
)

// FabricLinksSpec installs the chart as a fresh release (InstallRelease), creates an rdma
// Fabric over the fabric-a workers (UCX over its tcp transport: no RDMA here, so ucx is
// the fabric's fast link) and runs the demo's components as a Workflow in its namespace,
// each pod with the operator's confluxd sidecar:
//
//	source (other node) ──pipe "readings"──▶ stage-fast (fabric, 2nd fabric node) ─┐
//	                                         stage-tcp  (no fabric, other node)  ─┴─ "results" ──▶ sink (fabric, 1st fabric node)
//
// The sink and stage-fast ask for the Fabric (the operator sets CONFLUX_TRANSPORT=rdma and
// CONFLUX_FABRIC in their sidecars), stage-tcp for nothing. It asserts:
//  1. the operator placed sink and stage-fast in the Fabric and stage-tcp on TCP;
//  2. the sink gets every one of Segments results, once, none bad;
//  3. from the sidecars' /metrics (through the API server's pod proxy): stage-fast's
//     sidecar is in the fabric (transport rdma) and sent its events over ucx, and
//     stage-tcp's sent its events over tcp, each its share of one reader group (one per
//     segment together); the sink's sidecar delivered them all.
func FabricLinksSpec(ctx context.Context, t *testing.T, in FabricLinksInput) {
	c := in.Cluster
	if in.Images.Demo == "" {
		t.Fatal("FabricLinksSpec needs the demo image (BuildConfluxImages(ctx, c, \"demo\"))")
	}
	step := time.Now()
	rel := InstallRelease(ctx, t, c, in.Images, fabricSpace, in.FabricNodes[0])
	ns := rel.AppNs
	fabric := rel.Name + "-fabric-a" // cluster-scoped: named after the run
	t.Logf("release %s installed, operator Ready (%s)", rel.Name, since(step))
	// registered after the release's cleanup, so it runs first (and the CRD's removal with
	// the release would delete it anyway)
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		if t.Failed() {
			t.Logf("--- state at the failure\n%s", fabricState(cctx, c, ns))
		}
		_, _ = c.Kubectl(cctx, nil, "delete", "fabric", fabric, "--ignore-not-found", "--wait=false")
	})

	step = time.Now()
	rel.Apply(ctx, t, c, fabricManifest(in, ns, fabric, rel.Volume.Name))
	waitSpaceReady(ctx, t, c, ns, fabricSpace)
	t.Logf("Fabric %s, Space and Workflow applied, Space Ready (%s)", fabric, since(step))

	// 1. the operator's placement
	step = time.Now()
	var placed string
	err := poll(ctx, 2*time.Minute, func() bool {
		placed, _ = c.Kubectl(ctx, nil, "-n", ns, "get", "workflow", fabricWorkflow, "-o",
			`jsonpath={range .status.components[*]}{.name}={.fabric}/{.link} {end}`)
		return strings.Contains(placed, "sink="+fabric+"/") && strings.Contains(placed, "stage-fast="+fabric+"/") &&
			strings.Contains(placed, "stage-tcp=/")
	})
	if err != nil {
		t.Fatalf("the Workflow's placement: %q, want sink and stage-fast in %s and stage-tcp in none", placed, fabric)
	}
	t.Logf("placement: %s(%s)", placed, since(step))

	// 2. every result arrived
	step = time.Now()
	_, log := waitComponentLog(ctx, t, c, ns, "sink", "", regexp.MustCompile(`sink: complete`))
	want := fmt.Sprintf("sink: %d/%d results (0 duplicates, 0 bad)", in.Segments, in.Segments)
	if !strings.Contains(log, want) {
		t.Errorf("the sink's log lacks %q:\n%s", want, log)
	}
	t.Logf("the sink got all %d results (%s)", in.Segments, since(step))

	// 3. the links, from the sidecars' metrics
	metrics := map[string]string{}
	for _, comp := range []string{"sink", "stage-fast", "stage-tcp"} {
		pod := componentPodName(ctx, t, c, ns, comp)
		m, err := c.Kubectl(ctx, nil, "get", "--raw", fmt.Sprintf("/api/v1/namespaces/%s/pods/%s:9464/proxy/metrics", ns, pod))
		if err != nil {
			t.Fatalf("%s's sidecar metrics through the API server: %v", comp, err)
		}
		metrics[comp] = m
	}
	fast, slow := metrics["stage-fast"], metrics["stage-tcp"]
	t.Logf("stage-fast: %s; stage-tcp: %s", linkSeries(fast), linkSeries(slow))
	if !strings.Contains(fast, `transport="rdma",fabric="`+fabric+`"`) {
		t.Errorf("stage-fast's sidecar is not in fabric %s with transport rdma:\n%s", fabric, grepLines(fast, "conflux_sidecar_info"))
	}
	if got := linkSeries(fast); got != "ucx" {
		t.Errorf("stage-fast's results channel is on link %q, want ucx:\n%s", got, grepLines(fast, "conflux_channel_"))
	}
	if got := linkSeries(slow); got != "tcp" {
		t.Errorf("stage-tcp's results channel is on link %q, want tcp:\n%s", got, grepLines(slow, "conflux_channel_"))
	}
	// the two stages share the segments as one reader group (each takes the next segment
	// when it is free, so the shares vary): each sent its share over its own link, and
	// together one result per segment
	total := 0.0
	for comp, link := range map[string]string{"stage-fast": "ucx", "stage-tcp": "tcp"} {
		sent := metricSumLabel(metrics[comp], "conflux_channel_events_sent_total", `link="`+link+`"`)
		if sent < 1 {
			t.Errorf("%s sent %v events over %s, want its share (at least one)", comp, sent, link)
		}
		total += sent
	}
	if total < float64(in.Segments) {
		t.Errorf("the stages sent %v events over their links, want %d (one per segment)", total, in.Segments)
	}
	if n := metricSum(metrics["sink"], "conflux_channel_events_delivered_total"); n < float64(in.Segments) {
		t.Errorf("the sink's sidecar delivered %v events, want at least %d", n, in.Segments)
	}
}

// fabricManifest renders the Fabric, the Space, the Channels and the Workflow.
func fabricManifest(in FabricLinksInput, ns, fabric, storageClass string) string {
	space := fmt.Sprintf("tcp://%s.%s.svc:7400", fabricSpace, ns)
	component := func(name, fab, node, program, inputs, outputs, dependsOn string, env ...string) string {
		fabLine := ""
		if fab != "" {
			fabLine = "    fabric: " + fab + "\n"
		}
		envs := ""
		for i := 0; i+1 < len(env); i += 2 {
			envs += fmt.Sprintf("          - {name: %s, value: %q}\n", env[i], env[i+1])
		}
		return fmt.Sprintf(`  - name: %s
%s    inputs: [%s]
    outputs: [%s]
    dependsOn: [%s]
    template:
      spec:
        nodeSelector: {kubernetes.io/hostname: %s}
        containers:
        - name: %s
          image: %s
          imagePullPolicy: Never
          command: [%s]
          env:
          - {name: CONFLUX_SPACE, value: %q}
%s`, name, fabLine, inputs, outputs, dependsOn, node, name, in.Images.Demo, program, space, envs)
	}
	channel := func(name, spec string) string {
		return fmt.Sprintf("---\napiVersion: conflux.dev/v1alpha1\nkind: Channel\nmetadata: {name: %s, namespace: %s}\nspec: {space: %s, %s}\n",
			name, ns, fabricSpace, spec)
	}
	segs := fmt.Sprint(in.Segments)
	return fmt.Sprintf(`apiVersion: conflux.dev/v1alpha1
kind: Fabric
metadata: {name: %s}
spec:
  kind: rdma
  nodeSelector: {%s: %s}
  transport: {ucxTLS: "tcp,self"}
---
apiVersion: conflux.dev/v1alpha1
kind: Space
metadata: {name: %s, namespace: %s}
spec:
  storage: {size: 64Mi, storageClassName: %s}
`, fabric, fabricLabel, fabricA, fabricSpace, ns, storageClass) +
		channel("readings", "kind: pipe") +
		channel("results", "kind: events, delivery: reliable, format: {name: result, fields: ["+
			"{name: segment, type: int64}, {name: mean, type: double}, {name: count, type: int32}]}") +
		channel("summary", "kind: pipe") +
		fmt.Sprintf("---\napiVersion: conflux.dev/v1alpha1\nkind: Workflow\nmetadata: {name: %s, namespace: %s}\nspec:\n  components:\n",
			fabricWorkflow, ns) +
		component("sink", fabric, in.FabricNodes[0], "/usr/bin/demo-sink", "results", "summary", "",
			"DEMO_SEGMENTS", segs) +
		component("stage-fast", fabric, in.FabricNodes[1], "/usr/bin/demo-stage", "readings", "results", "sink",
			"DEMO_STAGES", "2", "DEMO_RANK", "0") +
		component("stage-tcp", "", in.OtherNode, "/usr/bin/demo-stage", "readings", "results", "sink",
			"DEMO_STAGES", "2", "DEMO_RANK", "1") +
		component("source", "", in.OtherNode, "/usr/bin/demo-source", "", "readings", "stage-fast, stage-tcp",
			"DEMO_SEGMENTS", segs, "DEMO_PERIOD_MS", "20")
}

var linkLabel = regexp.MustCompile(`(?m)^conflux_channel_link\{channel="[^"]*",link="([^"]*)"\} 1$`)

// linkSeries is the link label of the conflux_channel_link series ("" when none, the
// labels joined by "," when several channels are open).
func linkSeries(metrics string) string {
	var links []string
	for _, m := range linkLabel.FindAllStringSubmatch(metrics, -1) {
		links = append(links, m[1])
	}
	return strings.Join(links, ",")
}

// metricSumLabel is metricSum over the samples whose labels contain label.
func metricSumLabel(text, name, label string) float64 {
	var kept []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, name+"{") && strings.Contains(line, label) {
			kept = append(kept, line)
		}
	}
	return metricSum(strings.Join(kept, "\n"), name)
}

func grepLines(text, prefix string) string {
	var kept []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "\n")
}

// fabricState is what a failure message needs: objects, placement, the components' logs.
func fabricState(ctx context.Context, c *Cluster, ns string) string {
	var b strings.Builder
	out, _ := c.Kubectl(ctx, nil, "get", "fabrics")
	b.WriteString(out + "\n")
	out, _ = c.Kubectl(ctx, nil, "-n", ns, "get", "pods,workflows,channels,spaces", "-o", "wide")
	b.WriteString(out + "\n")
	out, _ = c.Kubectl(ctx, nil, "-n", ns, "get", "workflow", fabricWorkflow, "-o", "jsonpath={.status}")
	b.WriteString(out + "\n")
	for _, comp := range []string{"sink", "stage-fast", "stage-tcp", "source"} {
		out, _ := c.Kubectl(ctx, nil, "-n", ns, "logs", "-l", "conflux.dev/component="+comp, "--all-containers", "--tail=20", "--prefix")
		b.WriteString(out + "\n")
	}
	return b.String()
}
