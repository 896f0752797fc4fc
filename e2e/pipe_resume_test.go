package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPipeSurvivesPodDeletions: a pipe survives deleting its reader's pod, its writer's
// pod and its space server's pod mid-stream; see PipeResumeSpec.
func TestPipeSurvivesPodDeletions(t *testing.T) {
	c := mustCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
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
	var workers []string
	for _, n := range nodes {
		if !n.IsControlPlane() && n.Ready() {
			workers = append(workers, n.Metadata.Name)
		}
	}
	if len(workers) < 3 {
		t.Fatalf("need 3 Ready workers: %s", summary(nodes))
	}
	PipeResumeSpec(ctx, t, PipeResumeInput{Cluster: c, Images: images, Ticks: 600, PeriodMs: 50,
		SpaceNode: workers[0], WriterNode: workers[1], ReaderNode: workers[2]})
}

// PipeResumeInput is what PipeResumeSpec needs.
type PipeResumeInput struct {
	Cluster  *Cluster
	Images   ConfluxImages // with the demo image, loaded on the nodes
	Ticks    int           // segments the writer writes (TICK_COUNT)
	PeriodMs int           // between two new ticks (TICK_PERIOD_MS)
	// The nodes of the space server (its volume), the writer and the reader.
	SpaceNode, WriterNode, ReaderNode string
}

const (
	resumeSpace    = "space"
	resumeWorkflow = "resume"
)

// PipeResumeSpec installs the chart as a fresh release (InstallRelease) and runs, in its
// namespace, a Space and a Workflow of two Deployments, each pod with the operator's
// confluxd sidecar: demo-ticker writes ticks 0..Ticks-1 to the pipe "ticks", demo-recorder
// reads it and writes every tick it reads, unchanged, to "ticks-received" (its output and
// its checkpoint; demo/README.md). Mid-stream it deletes, one after the other, the
// recorder's pod, the ticker's pod and the space server's pod (each comes back: the
// Deployments and the StatefulSet make them again), and asserts, in order:
//  1. after its pod is deleted, the new recorder resumes from its position (it reads back
//     its record and seeks "ticks" there: a position > 0);
//  2. the ticker is deleted before it finished, and the new ticker opens "ticks" with
//     PI_APPEND and finds in the space what the deleted one wrote (> 0): its sidecar
//     abandoned the writer instead of ending the pipe;
//  3. the ticker has not finished when the space server's pod is deleted; it comes back
//     on its volume's node;
//  4. the recorder completes with every tick in order ("0 bad");
//  5. "ticks" and "ticks-received", read with the conflux CLI from a pod, each hold exactly
//     ticks 0..Ticks-1, each once, in order, with their check values.
func PipeResumeSpec(ctx context.Context, t *testing.T, in PipeResumeInput) {
	c := in.Cluster
	if in.Images.Demo == "" {
		t.Fatal("PipeResumeSpec needs the demo image (BuildConfluxImages(ctx, c, \"demo\"))")
	}
	step := time.Now()
	rel := InstallRelease(ctx, t, c, in.Images, resumeSpace, in.SpaceNode)
	ns := rel.AppNs
	t.Logf("release %s installed, operator Ready (%s)", rel.Name, since(step))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- state at the failure\n%s", resumeState(context.Background(), c, ns))
		}
	})

	step = time.Now()
	rel.Apply(ctx, t, c, resumeManifest(in, ns, rel.Volume.Name))
	waitSpaceReady(ctx, t, c, ns, resumeSpace)
	t.Logf("Space Ready, Workflow applied (%s)", since(step))

	// 1. the reader's pod
	step = time.Now()
	recorder := waitProgress(ctx, t, c, ns, in.Ticks/10, in.Ticks, 3*time.Minute)
	deletePod(ctx, t, c, ns, recorder)
	recorder, log := waitComponentLog(ctx, t, c, ns, "recorder", recorder, regexp.MustCompile(`reading pipe 'ticks' from tick (\d+) \(resumed from the record\)`))
	if n := atoiMatch(log, `reading pipe 'ticks' from tick (\d+) \(resumed`); n <= 0 {
		t.Errorf("the new recorder resumed at tick %d, want a position > 0", n)
	}
	t.Logf("recorder pod deleted mid-stream; %s resumed from its record (%s)", recorder, since(step))

	// 2. the writer's pod
	step = time.Now()
	waitProgress(ctx, t, c, ns, in.Ticks*4/10, in.Ticks, 2*time.Minute)
	ticker := componentPodName(ctx, t, c, ns, "ticker")
	requireNotDone(ctx, t, c, ns, ticker, "the ticker's pod")
	deletePod(ctx, t, c, ns, ticker)
	ticker, log = waitComponentLog(ctx, t, c, ns, "ticker", ticker, regexp.MustCompile(`append: replaying from tick 0, the space holds \d+`))
	if n := atoiMatch(log, `the space holds (\d+)`); n <= 0 || n >= in.Ticks {
		t.Errorf("the new ticker found %d ticks in the space, want some but not all of %d", n, in.Ticks)
	}
	t.Logf("ticker pod deleted mid-stream; %s appends (%s)", ticker, since(step))

	// 3. the space server's pod
	step = time.Now()
	waitProgress(ctx, t, c, ns, in.Ticks*6/10, in.Ticks, 2*time.Minute)
	requireNotDone(ctx, t, c, ns, ticker, "the space server's pod")
	space := resumeSpace + "-0"
	uid, _ := c.Kubectl(ctx, nil, "-n", ns, "get", "pod", space, "-o", "jsonpath={.metadata.uid}")
	deletePod(ctx, t, c, ns, space)
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
	st, err := c.WaitPod(wctx, ns, space, func(s PodStatus) bool { return s.Ready })
	wcancel()
	if err != nil {
		t.Fatalf("space server pod not back: %v\n%s", err, c.Describe(ctx, ns, space))
	}
	if uid2, _ := c.Kubectl(ctx, nil, "-n", ns, "get", "pod", space, "-o", "jsonpath={.metadata.uid}"); uid2 == uid {
		t.Errorf("pod %s has the same uid %s after its deletion", space, uid)
	}
	if st.NodeName != in.SpaceNode {
		t.Errorf("the space server came back on %s, want %s (its volume's node)", st.NodeName, in.SpaceNode)
	}
	t.Logf("space server pod deleted mid-stream, back on %s (%s)", st.NodeName, since(step))

	// 4. the reader completes
	step = time.Now()
	want := fmt.Sprintf("recorder: complete: %d/%d ticks recorded in 'ticks-received' (0 bad)", in.Ticks, in.Ticks)
	_, log = waitComponentLog(ctx, t, c, ns, "recorder", "", regexp.MustCompile(`recorder: complete: .*`))
	if !strings.Contains(log, want) {
		t.Errorf("the recorder's log lacks %q:\n%s", want, log)
	}
	t.Logf("recorder complete (%s)", since(step))

	// 5. both pipes hold exactly the written sequence
	step = time.Now()
	for _, pipe := range []string{"ticks", "ticks-received"} {
		ids, err := readTicks(ctx, c, ns, in.Images.Confluxd, in.ReaderNode, pipe)
		if err != nil {
			t.Errorf("reading %s: %v", pipe, err)
			continue
		}
		if bad := checkSequence(ids, in.Ticks); bad != "" {
			t.Errorf("pipe %s: %s", pipe, bad)
		}
	}
	t.Logf("'ticks' and 'ticks-received' each hold exactly ticks 0..%d (%s)", in.Ticks-1, since(step))
}

// resumeManifest renders the Space, the two pipe Channels and the Workflow.
func resumeManifest(in PipeResumeInput, ns, storageClass string) string {
	space := fmt.Sprintf("tcp://%s.%s.svc:7400", resumeSpace, ns)
	component := func(name, node, program string, inputs, outputs string) string {
		return fmt.Sprintf(`  - name: %s
    inputs: [%s]
    outputs: [%s]
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
          - {name: TICK_PIPE, value: ticks}
          - {name: TICK_COUNT, value: "%d"}
          - {name: TICK_PERIOD_MS, value: "%d"}
`, name, inputs, outputs, node, name, in.Images.Demo, program, space, in.Ticks, in.PeriodMs)
	}
	channel := func(name string) string {
		return fmt.Sprintf("---\napiVersion: conflux.dev/v1alpha1\nkind: Channel\nmetadata: {name: %s, namespace: %s}\nspec: {space: %s, kind: pipe}\n",
			name, ns, resumeSpace)
	}
	return fmt.Sprintf(`apiVersion: conflux.dev/v1alpha1
kind: Space
metadata: {name: %s, namespace: %s}
spec:
  storage: {size: 64Mi, storageClassName: %s}
`, resumeSpace, ns, storageClass) + channel("ticks") + channel("ticks-received") +
		fmt.Sprintf("---\napiVersion: conflux.dev/v1alpha1\nkind: Workflow\nmetadata: {name: %s, namespace: %s}\nspec:\n  components:\n",
			resumeWorkflow, ns) +
		component("recorder", in.ReaderNode, "/usr/bin/demo-recorder", "ticks", "ticks-received") +
		component("ticker", in.WriterNode, "/usr/bin/demo-ticker", "", "ticks")
}

// componentPod is the live (Running, not being deleted) pod of a component, "" if none.
func componentPod(ctx context.Context, c *Cluster, ns, component string) (string, error) {
	out, err := c.Kubectl(ctx, nil, "-n", ns, "get", "pods", "-l", "conflux.dev/component="+component, "-o", "json")
	if err != nil {
		return "", err
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name              string  `json:"name"`
				DeletionTimestamp *string `json:"deletionTimestamp"`
			} `json:"metadata"`
			Status struct {
				Phase string `json:"phase"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return "", err
	}
	for _, p := range list.Items {
		if p.Metadata.DeletionTimestamp == nil && p.Status.Phase == "Running" {
			return p.Metadata.Name, nil
		}
	}
	return "", nil
}

func componentPodName(ctx context.Context, t *testing.T, c *Cluster, ns, component string) string {
	t.Helper()
	name, err := componentPod(ctx, c, ns, component)
	if err != nil || name == "" {
		t.Fatalf("no running %s pod (%v)", component, err)
	}
	return name
}

// waitComponentLog waits until the live pod of component (another one than `not`, when
// given) has a log line matching re; returns the pod and its log.
func waitComponentLog(ctx context.Context, t *testing.T, c *Cluster, ns, component, not string, re *regexp.Regexp) (string, string) {
	t.Helper()
	var pod, log string
	err := poll(ctx, 3*time.Minute, func() bool {
		pod, _ = componentPod(ctx, c, ns, component)
		if pod == "" || pod == not {
			return false
		}
		log, _ = c.Kubectl(ctx, nil, "-n", ns, "logs", pod, "-c", component)
		return re.MatchString(log)
	})
	if err != nil {
		t.Fatalf("no %s pod (other than %q) logged %q: pod %q, log:\n%s", component, not, re, pod, log)
	}
	return pod, log
}

var progressLine = regexp.MustCompile(`recorder: (\d+)/\d+ ticks`)

// waitProgress waits until the live recorder has recorded at least n ticks (its log); it
// fails when the stream completed first (the deletion would not be mid-stream). Returns
// the recorder's pod.
func waitProgress(ctx context.Context, t *testing.T, c *Cluster, ns string, n, total int, timeout time.Duration) string {
	t.Helper()
	var pod, log string
	got := 0
	err := poll(ctx, timeout, func() bool {
		pod, _ = componentPod(ctx, c, ns, "recorder")
		if pod == "" {
			return false
		}
		log, _ = c.Kubectl(ctx, nil, "-n", ns, "logs", pod, "-c", "recorder")
		for _, m := range progressLine.FindAllStringSubmatch(log, -1) {
			if v, _ := strconv.Atoi(m[1]); v > got {
				got = v
			}
		}
		return got >= n
	})
	if err != nil {
		t.Fatalf("the recorder did not reach %d ticks in %s (%d): pod %q, log:\n%s", n, timeout, got, pod, log)
	}
	if got >= total {
		t.Fatalf("the stream was complete (%d ticks) before the deletion: not mid-stream (raise PeriodMs)", got)
	}
	return pod
}

// requireNotDone fails the test when the ticker finished already: `what` would not be
// deleted mid-stream.
func requireNotDone(ctx context.Context, t *testing.T, c *Cluster, ns, ticker, what string) {
	t.Helper()
	log, err := c.Kubectl(ctx, nil, "-n", ns, "logs", ticker, "-c", "ticker")
	if err != nil || strings.Contains(log, "ticker: done") {
		t.Fatalf("the ticker had finished (or its log is unreadable: %v) before %s was deleted: not mid-stream (raise PeriodMs)\n%s", err, what, log)
	}
}

func deletePod(ctx context.Context, t *testing.T, c *Cluster, ns, pod string) {
	t.Helper()
	if _, err := c.Kubectl(ctx, nil, "-n", ns, "delete", "pod", pod, "--wait=true", "--timeout=90s"); err != nil {
		t.Fatalf("deleting pod %s: %v", pod, err)
	}
}

func atoiMatch(s, re string) int {
	m := regexp.MustCompile(re).FindStringSubmatch(s)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// readTicks reads a pipe of ticks with the conflux CLI (`cat NAME --json`) in a pod on
// node and returns the ids in the order read; a tick whose check value is wrong is an error.
func readTicks(ctx context.Context, c *Cluster, ns, image, node, pipe string) ([]int64, error) {
	pod := "cat-" + pipe
	args := []string{"--space=tcp://" + resumeSpace + "." + ns + ".svc:7400", "cat", pipe, "--json"}
	if _, err := c.Kubectl(ctx, []byte(cliPod(ns, pod, image, node, args)), "apply", "-f", "-"); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	st, err := c.WaitPod(wctx, ns, pod, func(s PodStatus) bool { return s.Phase == "Succeeded" || s.Phase == "Failed" })
	cancel()
	logs, _ := c.Kubectl(ctx, nil, "-n", ns, "logs", pod)
	if err != nil || st.Phase != "Succeeded" {
		return nil, fmt.Errorf("conflux cat %s: %s (%v): %s", pipe, st.Phase, err, logs)
	}
	var ids []int64
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var tick struct{ ID, Check int64 }
		if err := json.Unmarshal([]byte(line), &tick); err != nil {
			return nil, fmt.Errorf("line %d of conflux cat %s: %q: %v", len(ids), pipe, line, err)
		}
		if tick.Check != tick.ID*7919+13 { // tick_check in demo/components/demo_formats.h
			return nil, fmt.Errorf("tick %d at position %d has check %d", tick.ID, len(ids), tick.Check)
		}
		ids = append(ids, tick.ID)
	}
	return ids, nil
}

// checkSequence says how ids differ from 0..n-1 ("" when they do not).
func checkSequence(ids []int64, n int) string {
	for i, id := range ids {
		if i >= n {
			return fmt.Sprintf("%d ticks, want %d (extra from position %d: %d)", len(ids), n, n, id)
		}
		if id != int64(i) {
			return fmt.Sprintf("position %d holds tick %d, want %d (%d ticks)", i, id, i, len(ids))
		}
	}
	if len(ids) != n {
		return fmt.Sprintf("%d ticks, want %d", len(ids), n)
	}
	return ""
}

// resumeState gathers pods, the components' logs (first and last lines of each container)
// and the space server's for a failure message.
func resumeState(ctx context.Context, c *Cluster, ns string) string {
	var b strings.Builder
	out, _ := c.Kubectl(ctx, nil, "-n", ns, "get", "pods,workflows,channels,spaces", "-o", "wide")
	b.WriteString(out)
	for _, comp := range []string{"recorder", "ticker"} {
		pods, _ := c.Kubectl(ctx, nil, "-n", ns, "get", "pods", "-l", "conflux.dev/component="+comp, "-o", "name")
		for _, pod := range strings.Fields(pods) {
			for _, container := range []string{comp, "confluxd"} {
				log, _ := c.Kubectl(ctx, nil, "-n", ns, "logs", pod, "-c", container)
				b.WriteString(fmt.Sprintf("\n--- %s %s\n%s", pod, container, headTail(log, 15)))
			}
		}
	}
	out, _ = c.Kubectl(ctx, nil, "-n", ns, "logs", resumeSpace+"-0", "--tail=20")
	b.WriteString("\n--- space\n" + out)
	return b.String()
}

// headTail keeps the first and last n lines of s.
func headTail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) <= 2*n {
		return strings.Join(lines, "\n")
	}
	return strings.Join(lines[:n], "\n") + fmt.Sprintf("\n[... %d lines ...]\n", len(lines)-2*n) +
		strings.Join(lines[len(lines)-n:], "\n")
}
