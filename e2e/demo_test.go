package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDemoWorkflow runs `make demo`'s script (demo/demo.sh) on the cluster and asserts
// what it promises; see DemoSpec.
func TestDemoWorkflow(t *testing.T) {
	c := mustCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	DemoSpec(ctx, t, DemoInput{Cluster: c, Segments: 150})
}

// DemoInput is what DemoSpec needs.
type DemoInput struct {
	Cluster  *Cluster
	Segments int // readings segments the source writes (DEMO_SEGMENTS)
}

const demoNs = "conflux-demo"

// DemoSpec brings the demo up with demo/demo.sh up (images, helm install, the Space, the
// three Channels and the Workflow of demo/manifests/demo.yaml) and asserts, in order:
//  1. the script finishes: the sink received a result for every readings segment exactly
//     once (its log line "N/N results (0 duplicates, 0 bad)"), converted from the stage's
//     result_v2 to its own result_v1 (a v2 producer and a v1 consumer), and the pipe
//     "summary", read with the conflux CLI in a pod, holds N results;
//  2. the Workflow is Ready and its three stage replicas run on at least two nodes, so the
//     events crossed nodes; the sink's calls went through its pod's sidecar (its /metrics,
//     read through the API server's pod proxy: requests served, every event delivered, the
//     channel on a tcp link since no component asked for a fabric);
//  3. the pipe outlives its space server: after the space pod is deleted and comes back,
//     the CLI still reads N results from "summary";
//  4. demo/demo.sh down leaves no namespace, release or volume behind.
//
// It holds the chart lock (the demo's release owns the cluster-scoped objects while it
// runs) and first removes whatever an interrupted demo left.
func DemoSpec(ctx context.Context, t *testing.T, in DemoInput) {
	c := in.Cluster
	unlock, err := lockFile(ctx, filepath.Join(filepath.Dir(c.Kubeconfig), c.Name+".conflux-chart.lock"))
	if err != nil {
		t.Fatalf("lock: %v", err)
	}
	t.Cleanup(unlock)
	script := filepath.Join(c.Root, "demo", "demo.sh")
	env := []string{"CONFLUX_CACHE=" + c.Cache, fmt.Sprintf("DEMO_SEGMENTS=%d", in.Segments), "DEMO_TIMEOUT=240"}
	down := func(ctx context.Context) (string, error) { return RunEnv(ctx, env, script, "down", c.Name) }
	if out, err := down(ctx); err != nil {
		t.Fatalf("removing an earlier demo: %v\n%s", err, out)
	}
	cleaned := false
	t.Cleanup(func() {
		if cleaned {
			return
		}
		cctx, ccancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer ccancel()
		if out, err := down(cctx); err != nil {
			t.Errorf("demo down after a failure: %v\n%s", err, out)
		}
	})

	// 1. up, with the sink complete and the summary read back
	start := time.Now()
	out, err := RunEnv(ctx, env, script, "up", c.Name)
	if err != nil {
		pods, _ := c.Kubectl(ctx, nil, "-n", demoNs, "get", "pods,workflows,channels,spaces", "-o", "wide")
		t.Fatalf("demo up: %v\n%s\n%s\n%s", err, out, pods, demoLogs(ctx, c))
	}
	t.Logf("demo up in %s", since(start))
	want := fmt.Sprintf("sink: %d/%d results (0 duplicates, 0 bad)", in.Segments, in.Segments)
	if !strings.Contains(out, want) {
		t.Errorf("demo output lacks %q:\n%s", want, out)
	}
	if want := fmt.Sprintf("%d results in 'summary'", in.Segments); !strings.Contains(out, want) {
		t.Errorf("demo output lacks %q:\n%s", want, out)
	}

	// 2. the workflow is Ready, the stage spread over nodes
	if _, err := c.Kubectl(ctx, nil, "-n", demoNs, "wait", "workflow/demo", "--for=condition=Ready", "--timeout=60s"); err != nil {
		t.Errorf("workflow demo not Ready: %v", err)
	}
	nodes, err := c.Kubectl(ctx, nil, "-n", demoNs, "get", "pods", "-l", "conflux.dev/component=stage",
		"-o", `jsonpath={range .items[*]}{.spec.nodeName}{"\n"}{end}`)
	if err != nil {
		t.Fatalf("stage pods: %v", err)
	}
	distinct := map[string]bool{}
	for _, n := range strings.Fields(nodes) {
		distinct[n] = true
	}
	if len(distinct) < 2 {
		t.Errorf("the 3 stage replicas run on %d node(s) (%q): want at least 2", len(distinct), nodes)
	}

	// 2b. the calls went through the pods' sidecars, over TCP (no fabric asked for)
	sink, err := c.Kubectl(ctx, nil, "-n", demoNs, "get", "pods", "-l", "conflux.dev/component=sink", "-o", "jsonpath={.items[0].metadata.name}")
	if err != nil || sink == "" {
		t.Fatalf("sink pod: %q %v", sink, err)
	}
	metrics, err := c.Kubectl(ctx, nil, "get", "--raw", fmt.Sprintf("/api/v1/namespaces/%s/pods/%s:9464/proxy/metrics", demoNs, sink))
	if err != nil {
		t.Fatalf("the sink's sidecar metrics through the API server: %v", err)
	}
	if n := metricSum(metrics, "conflux_sidecar_requests_total"); n == 0 {
		t.Errorf("the sink's sidecar served no request: the app did not go through it\n%s", metrics)
	}
	if n := metricSum(metrics, "conflux_channel_events_delivered_total"); n < float64(in.Segments) {
		t.Errorf("the sink's sidecar delivered %v events, want at least %d", n, in.Segments)
	}
	if !strings.Contains(metrics, `link="tcp"`) {
		t.Errorf("the sink's sidecar reports no tcp link for the results channel:\n%s", metrics)
	}

	// 3. the pipe outlives its space server
	if _, err := c.Kubectl(ctx, nil, "-n", demoNs, "delete", "pod", "demo-0", "--wait=true", "--timeout=60s"); err != nil {
		t.Fatalf("deleting the space pod: %v", err)
	}
	if _, err := c.Kubectl(ctx, nil, "-n", demoNs, "wait", "pod/demo-0", "--for=condition=Ready", "--timeout=120s"); err != nil {
		t.Fatalf("space pod not back: %v\n%s", err, c.Describe(ctx, demoNs, "demo-0"))
	}
	if n := demoSummaryCount(ctx, t, c); n != in.Segments {
		t.Errorf("after the space server restarted, 'summary' holds %d results, want %d", n, in.Segments)
	}

	// 4. down leaves nothing
	if out, err := down(ctx); err != nil {
		t.Fatalf("demo down: %v\n%s", err, out)
	}
	cleaned = true
	for _, args := range [][]string{{"get", "namespace", demoNs, "conflux-system"}, {"get", "pv", "conflux-demo-space"}} {
		if got, _ := c.Kubectl(ctx, nil, append(args, "--ignore-not-found", "-o", "name")...); strings.TrimSpace(got) != "" {
			t.Errorf("after demo down, kubectl %s still finds %s", strings.Join(args, " "), got)
		}
	}
}

var jsonSegment = regexp.MustCompile(`"segment"`)

// metricSum adds the values of every sample of a metric in Prometheus text.
func metricSum(text, name string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		var v float64
		if _, err := fmt.Sscan(f[len(f)-1], &v); err == nil {
			sum += v
		}
	}
	return sum
}

// demoSummaryCount reads the pipe "summary" with the CLI in a pod and counts its results.
func demoSummaryCount(ctx context.Context, t *testing.T, c *Cluster) int {
	t.Helper()
	image, err := c.Kubectl(ctx, nil, "-n", demoNs, "get", "pod", "demo-0", "-o", "jsonpath={.spec.containers[0].image}")
	if err != nil {
		t.Fatalf("space image: %v", err)
	}
	_, _ = c.Kubectl(ctx, nil, "-n", demoNs, "delete", "pod", "summary-check", "--ignore-not-found")
	if _, err := c.Kubectl(ctx, nil, "-n", demoNs, "run", "summary-check", "--restart=Never", "--image="+image,
		"--image-pull-policy=Never", "--command", "--", "/usr/bin/conflux", "--space", "tcp://demo."+demoNs+".svc:7400",
		"cat", "summary", "--json"); err != nil {
		t.Fatalf("CLI pod: %v", err)
	}
	defer c.Kubectl(context.Background(), nil, "-n", demoNs, "delete", "pod", "summary-check", "--wait=false")
	st, err := c.WaitPod(ctx, demoNs, "summary-check", func(p PodStatus) bool { return p.Phase == "Succeeded" || p.Phase == "Failed" })
	logs, _ := c.Kubectl(ctx, nil, "-n", demoNs, "logs", "summary-check")
	if err != nil || st.Phase != "Succeeded" {
		t.Fatalf("CLI pod %s (%v): %s", st.Phase, err, logs)
	}
	return len(jsonSegment.FindAllString(logs, -1))
}

// demoLogs gathers the components' and the operator's last log lines for a failure message.
func demoLogs(ctx context.Context, c *Cluster) string {
	var b strings.Builder
	for _, sel := range []string{"conflux.dev/component=sink", "conflux.dev/component=stage", "conflux.dev/component=source"} {
		out, _ := c.Kubectl(ctx, nil, "-n", demoNs, "logs", "-l", sel, "--all-containers", "--tail=20", "--prefix")
		b.WriteString(out + "\n")
	}
	out, _ := c.Kubectl(ctx, nil, "-n", "conflux-system", "logs", "-l", "app.kubernetes.io/instance=conflux", "--tail=30")
	b.WriteString(out)
	return b.String()
}
