package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The Conflux CRDs the chart installs (crds.enabled).
var confluxCRDs = []string{"spaces.conflux.dev", "channels.conflux.dev", "workflows.conflux.dev", "fabrics.conflux.dev"}

func TestHelmInstallSpace(t *testing.T) {
	c := mustCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	start := time.Now()
	images, err := BuildConfluxImages(ctx, c)
	if err != nil {
		t.Fatalf("building and loading the images: %v", err)
	}
	t.Logf("images %s and %s built and loaded in %s", images.Operator, images.Confluxd, since(start))

	nodes, err := c.Nodes(ctx)
	if err != nil {
		t.Fatalf("listing nodes: %v", err)
	}
	var workers []Node
	for _, n := range nodes {
		if !n.IsControlPlane() && n.Ready() {
			workers = append(workers, n)
		}
	}
	if len(workers) < 2 {
		t.Fatalf("need 2 Ready workers: %s", summary(nodes))
	}
	HelmInstallSpec(ctx, t, HelmInstallInput{
		Cluster: c, Images: images, ServerNode: workers[0], ClientNode: workers[1]})
}

// HelmInstallInput is what HelmInstallSpec needs.
type HelmInstallInput struct {
	Cluster    *Cluster
	Images     ConfluxImages // loaded on the nodes
	ServerNode Node          // holds the Space's volume, so runs its server
	ClientNode Node          // runs the client pods; must differ from ServerNode
	Chart      string        // chart directory; default <repo>/charts/conflux
}

// HelmInstallSpec installs the chart as a fresh release (its own namespaces, CRDs removed
// on uninstall), after removing what an interrupted earlier run left, and asserts, in order:
//  1. the operator Deployment becomes Ready, and its webhooks answer through the API server
//     with the certificate the operator made (a pod asking for channels gets the sidecar in
//     a server-side dry run; a Workflow with a dependsOn cycle is refused by the validator);
//  2. a Space becomes a running confluxd --role=space: its pod Ready on the volume's node,
//     the Space Ready with its endpoint, the store written on the volume;
//  3. a pipe Channel in that Space becomes Registered and Ready: the operator bound its
//     name in the space server (spaceclient.TCP), which the conflux CLI, run on another
//     node, sees over TCP (ls) and UDP (lookup), while an unknown name gets the server's
//     "no such name"; deleting the Channel unlinks the name;
//  4. deleting the Space removes its server and claim; `helm uninstall` removes every
//     object of the release, CRDs included.
func HelmInstallSpec(ctx context.Context, t *testing.T, in HelmInstallInput) {
	c := in.Cluster
	if in.Chart == "" {
		in.Chart = filepath.Join(c.Root, "charts", "conflux")
	}
	if in.ServerNode.Metadata.Name == in.ClientNode.Metadata.Name {
		t.Fatalf("server and client must be on different nodes, both are on %s", in.ServerNode.Metadata.Name)
	}
	// --- 1. the operator ------------------------------------------------------------------
	// The chart owns cluster-scoped objects (CRDs): InstallRelease takes the chart lock, so one
	// run at a time on this cluster, and removes everything when the test ends.
	const space = "cache"
	step := time.Now()
	r := installRelease(ctx, t, c, in.Images, in.Chart, space, in.ServerNode.Metadata.Name)
	helm, release, opNs, appNs, vol := r.Helm, r.Name, r.OpNs, r.AppNs, r.Volume
	t.Logf("helm install: operator Ready in %s", since(step))

	step = time.Now()
	for _, kind := range []string{"mutatingwebhookconfiguration/" + release + "-mutating", "validatingwebhookconfiguration/" + release + "-validating"} {
		ca, err := c.Kubectl(ctx, nil, "get", kind, "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}")
		if err != nil || len(ca) < 100 {
			t.Fatalf("%s: caBundle not set by the operator (%d bytes, %v)", kind, len(ca), err)
		}
	}
	checkWebhooks(ctx, t, c, appNs, in.Images.Confluxd)
	checkInvalidResources(ctx, t, c, appNs, in.Images.Confluxd)
	t.Logf("webhooks answer through the API server, invalid resources refused with their reasons (%s)", since(step))

	// --- 2. a Space -------------------------------------------------------------------------
	step = time.Now()
	spaceYAML := fmt.Sprintf(`apiVersion: conflux.dev/v1alpha1
kind: Space
metadata:
  name: %s
  namespace: %s
spec:
  storage:
    size: %s
    storageClassName: %s
`, space, appNs, vol.Size, vol.Name)
	if _, err := c.Kubectl(ctx, []byte(spaceYAML), "apply", "-f", "-"); err != nil {
		t.Fatalf("creating the Space: %v", err)
	}
	pod := space + "-0"
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
	st, err := c.WaitPod(wctx, appNs, pod, func(s PodStatus) bool { return s.Ready })
	wcancel()
	if err != nil {
		t.Fatalf("space server pod not Ready: %v\n%s\n%s", err, c.Describe(ctx, appNs, pod), c.operatorLogs(ctx, opNs, release))
	}
	if st.NodeName != vol.Node {
		t.Errorf("space server on %s, want %s (its volume's node)", st.NodeName, vol.Node)
	}
	image, _ := c.Kubectl(ctx, nil, "-n", appNs, "get", "pod", pod, "-o", "jsonpath={.spec.containers[0].image}")
	if image != in.Images.Confluxd {
		t.Errorf("space server runs %q, want %q", image, in.Images.Confluxd)
	}
	endpoint := waitSpaceReady(ctx, t, c, appNs, space)
	if want := fmt.Sprintf("%s.%s.svc:7400", space, appNs); endpoint != want {
		t.Errorf("Space endpoint %q, want %q", endpoint, want)
	}
	t.Logf("Space Ready in %s: pod %s on %s (IP %s), endpoint %s", since(step), pod, st.NodeName, st.PodIP, endpoint)

	logs, _ := c.Kubectl(ctx, nil, "-n", appNs, "logs", pod)
	if !strings.Contains(logs, "listening tcp://0.0.0.0:7400 udp 0.0.0.0:7400") {
		t.Errorf("space server log lacks its listening line:\n%s", logs)
	}
	if claim, _ := c.Kubectl(ctx, nil, "-n", appNs, "get", "pvc", "data-"+pod, "-o", "jsonpath={.spec.volumeName}"); claim != vol.Name {
		t.Errorf("claim data-%s bound to %q, want the volume %s", pod, claim, vol.Name)
	}
	if files, err := vol.Files(ctx, "space"); err != nil || !strings.Contains(files, "LOCK") {
		t.Errorf("no store on the volume (%s:%s/space): %q %v", vol.Node, vol.Path, files, err)
	}

	// --- 3. a Channel: the operator registers it in the space over the space protocol ----
	step = time.Now()
	const channel = "results"
	channelYAML := fmt.Sprintf(`apiVersion: conflux.dev/v1alpha1
kind: Channel
metadata:
  name: %s
  namespace: %s
spec:
  space: %s
  kind: pipe
`, channel, appNs, space)
	if _, err := c.Kubectl(ctx, []byte(channelYAML), "apply", "-f", "-"); err != nil {
		t.Fatalf("creating the Channel: %v", err)
	}
	var chStatus string
	if err := poll(ctx, 60*time.Second, func() bool {
		chStatus, _ = c.Kubectl(ctx, nil, "-n", appNs, "get", "channel", channel, "-o",
			`jsonpath={.status.conditions[?(@.type=="Registered")].status} {.status.conditions[?(@.type=="Ready")].status}`)
		return chStatus == "True True"
	}); err != nil {
		yaml, _ := c.Kubectl(ctx, nil, "-n", appNs, "get", "channel", channel, "-o", "yaml")
		t.Fatalf("Channel not Registered and Ready (%q): %v\n%s\n%s", chStatus, err, yaml, c.operatorLogs(ctx, opNs, release))
	}
	t.Logf("Channel %s Registered and Ready in %s", channel, since(step))

	// the space server answers the CLI from another node, and knows the channel's name
	step = time.Now()
	addr := "--space=tcp://" + endpoint
	client := in.ClientNode.Metadata.Name
	runCLI(ctx, t, c, appNs, in.Images.Confluxd, client,
		cliRun{"cli-ls", "Succeeded", channel, []string{addr, "ls"}},
		cliRun{"cli-lookup-udp", "Succeeded", channel + ": pipe ", []string{addr, "lookup", channel, "--udp"}},
		cliRun{"cli-lookup-unknown", "Failed", "lookup 'conflux-e2e-probe': no such name", []string{addr, "lookup", "conflux-e2e-probe", "--udp"}})
	t.Logf("the space server answered from %s over TCP and UDP in %s", client, since(step))

	// deleting the Channel unlinks its name (the finalizer waits for the space's answer)
	step = time.Now()
	if _, err := c.Kubectl(ctx, nil, "-n", appNs, "delete", "channel", channel, "--timeout=60s"); err != nil {
		t.Fatalf("deleting the Channel: %v\n%s", err, c.operatorLogs(ctx, opNs, release))
	}
	runCLI(ctx, t, c, appNs, in.Images.Confluxd, client,
		cliRun{"cli-lookup-unlinked", "Failed", "lookup '" + channel + "': no such name", []string{addr, "lookup", channel, "--udp"}})
	t.Logf("Channel deleted and unlinked from the space in %s", since(step))

	// --- 4. helm upgrade: the operator rolls, the Space keeps serving ----------------------
	step = time.Now()
	if out, err := helm.Run(ctx, "upgrade", release, in.Chart, "-n", opNs, "--reuse-values",
		"--set", "operator.logLevel=debug", "--wait", "--timeout=150s"); err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	if got, _ := c.Kubectl(ctx, nil, "-n", opNs, "get", "deployment", release, "-o", "jsonpath={.spec.template.spec.containers[0].args}"); !strings.Contains(got, "debug") {
		t.Errorf("after helm upgrade --set operator.logLevel=debug the operator's args are %s", got)
	}
	if _, err := c.Kubectl(ctx, nil, "-n", opNs, "rollout", "status", "deployment/"+release, "--timeout=150s"); err != nil {
		t.Fatalf("operator not Ready after helm upgrade: %v\n%s", err, c.describeApp(ctx, opNs, "app.kubernetes.io/instance="+release))
	}
	if ep := waitSpaceReady(ctx, t, c, appNs, space); ep != endpoint {
		t.Errorf("Space endpoint after helm upgrade %q, want %q", ep, endpoint)
	}
	t.Logf("helm upgrade rolled the operator; the Space stayed Ready (%s)", since(step))

	// --- 5. delete the Space, uninstall ----------------------------------------------------------
	step = time.Now()
	if _, err := c.Kubectl(ctx, nil, "-n", appNs, "delete", "space", space, "--timeout=90s"); err != nil {
		t.Fatalf("deleting the Space: %v\n%s", err, c.operatorLogs(ctx, opNs, release))
	}
	if err := c.waitGone(ctx, 90*time.Second, "-n", appNs, "statefulset/"+space, "pod/"+pod, "pvc/data-"+pod); err != nil {
		t.Errorf("after deleting the Space: %v", err)
	}
	t.Logf("Space deleted with its server and claim in %s", since(step))

	step = time.Now()
	if out, err := helm.Run(ctx, "uninstall", release, "-n", opNs, "--wait", "--timeout=120s"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	left, err := c.Kubectl(ctx, nil, "get", "-A", "-o", "name", "-l", "app.kubernetes.io/instance="+release,
		"deployment,service,serviceaccount,role,rolebinding,clusterrole,clusterrolebinding,mutatingwebhookconfiguration,validatingwebhookconfiguration")
	if err != nil || strings.TrimSpace(left) != "" {
		t.Errorf("objects of release %s left after helm uninstall (%v):\n%s", release, err, left)
	}
	crds := make([]string, len(confluxCRDs))
	for i, crd := range confluxCRDs {
		crds[i] = "crd/" + crd
	}
	if err := c.waitGone(ctx, 60*time.Second, crds...); err != nil {
		t.Errorf("CRDs after helm uninstall with crds.keep=false: %v", err)
	}
	t.Logf("helm uninstall removed the release and the CRDs in %s", since(step))
}

// removeInterruptedRuns uninstalls what a killed run of this test left (its release, its
// namespaces, its volume). The caller holds the lock, so no other run of it is live and
// every conflux-e2e-* release is such a leftover.
func removeInterruptedRuns(ctx context.Context, t *testing.T, c *Cluster, helm *Helm) {
	out, err := helm.Run(ctx, "list", "-A", "-a", "--filter", "^conflux-e2e-", "-o", "json")
	if err != nil {
		t.Fatalf("helm list: %v", err)
	}
	var releases []struct{ Name, Namespace string }
	if err := json.Unmarshal([]byte(out), &releases); err != nil {
		t.Fatalf("helm list: %v: %s", err, out)
	}
	for _, r := range releases {
		t.Logf("removing release %s/%s left by an interrupted run", r.Namespace, r.Name)
		cleanupRelease(t, c, helm, r.Name, r.Namespace, r.Name, ExistingLocalVolume(ctx, c, r.Name))
	}
	// volumes whose claim's namespace is gone (a run killed during its cleanup)
	pvs, _ := c.Kubectl(ctx, nil, "get", "pv", "-l", "app.kubernetes.io/part-of=conflux-e2e", "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.spec.claimRef.namespace}{"\n"}{end}`)
	for _, line := range strings.Split(strings.TrimSpace(pvs), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		if ns, err := c.Kubectl(ctx, nil, "get", "namespace", f[1], "--ignore-not-found", "-o", "name"); err == nil && ns == "" {
			t.Logf("removing volume %s left by an interrupted run", f[0])
			_ = ExistingLocalVolume(ctx, c, f[0]).Delete(ctx, c)
		}
	}
}

// checkCRDsFree fails when another live release (or a hand-made install) owns the Conflux
// CRDs: this test installs its own and deletes them after. CRDs left by an interrupted run
// (owner release gone) are adopted: it returns true to pass --take-ownership.
func checkCRDsFree(ctx context.Context, t *testing.T, c *Cluster, helm *Helm) bool {
	t.Helper()
	adopt := false
	for _, crd := range confluxCRDs {
		exists, rel, ns, err := c.crdOwner(ctx, crd)
		if err != nil {
			t.Fatalf("reading CRD %s: %v", crd, err)
		}
		if !exists {
			continue
		}
		if rel == "" {
			t.Fatalf("CRD %s exists and no Helm release owns it (applied by hand?): this test installs the chart "+
				"with its CRDs and removes them after; delete them first (kubectl delete crd %s)", crd, strings.Join(confluxCRDs, " "))
		}
		if _, err := helm.Run(ctx, "status", rel, "-n", ns); err == nil {
			t.Fatalf("CRD %s belongs to the live release %s in namespace %s: this test installs its own chart "+
				"and removes its CRDs after; uninstall that release first (helm uninstall -n %s %s)", crd, rel, ns, ns, rel)
		}
		t.Logf("CRD %s is left from release %s/%s, which is gone: adopting it", crd, ns, rel)
		adopt = true
	}
	return adopt
}

// checkWebhooks asserts that both webhooks answer through the API server, retrying while
// the webhook Service gets its endpoint (a just-Ready pod may not be behind it yet).
func checkWebhooks(ctx context.Context, t *testing.T, c *Cluster, ns, image string) {
	t.Helper()
	podYAML := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: wants-channels
  namespace: %s
  annotations:
    conflux.dev/channels: "events"
spec:
  containers:
  - name: app
    image: %s
    imagePullPolicy: Never
`, ns, image)
	var got string
	err := poll(ctx, 60*time.Second, func() bool {
		// mutating, failurePolicy Ignore: without an answer the pod would just lack the sidecar
		got, _ = c.Kubectl(ctx, []byte(podYAML), "create", "--dry-run=server", "-f", "-", "-o",
			`jsonpath={.spec.initContainers[*].name} {.metadata.annotations.conflux\.dev/injected}`)
		return strings.Contains(got, "confluxd")
	})
	if err != nil {
		t.Fatalf("the pod injector did not add the confluxd sidecar (server dry run gave %q): %v", got, err)
	}

	wfYAML := fmt.Sprintf(`apiVersion: conflux.dev/v1alpha1
kind: Workflow
metadata:
  name: cycle
  namespace: %s
spec:
  components:
  - name: a
    dependsOn: [b]
    template: {spec: {containers: [{name: a, image: %s}]}}
  - name: b
    dependsOn: [a]
    template: {spec: {containers: [{name: b, image: %s}]}}
`, ns, image, image)
	var werr error
	err = poll(ctx, 60*time.Second, func() bool {
		_, werr = c.Kubectl(ctx, []byte(wfYAML), "create", "--dry-run=server", "-f", "-")
		return werr != nil && strings.Contains(werr.Error(), "dependsOn has a cycle")
	})
	if err != nil {
		t.Fatalf("the Workflow validator did not refuse a dependsOn cycle (last answer: %v): %v", werr, err)
	}
}

// checkInvalidResources asserts that the API server refuses invalid Conflux objects with a
// message that says what is wrong: CEL rules of the CRDs, and the Workflow validator for
// what CEL cannot say (a reference to an unknown component).
func checkInvalidResources(ctx context.Context, t *testing.T, c *Cluster, ns, image string) {
	t.Helper()
	cases := []struct{ what, yaml, want string }{
		{"a pipe Channel without a space", `apiVersion: conflux.dev/v1alpha1
kind: Channel
metadata: {name: nospace, namespace: NS}
spec: {kind: pipe}
`, "a pipe channel needs spec.space"},
		{"a Channel field of an unknown type", `apiVersion: conflux.dev/v1alpha1
kind: Channel
metadata: {name: badtype, namespace: NS}
spec: {kind: events, format: {name: f, fields: [{name: x, type: quaternion}]}}
`, "type must be a scalar"},
		{"a Workflow component depending on an unknown one", `apiVersion: conflux.dev/v1alpha1
kind: Workflow
metadata: {name: unknowndep, namespace: NS}
spec:
  components:
  - name: a
    dependsOn: [ghost]
    template: {spec: {containers: [{name: a, image: IMAGE}]}}
`, `spec.components[0].dependsOn[0]: Not found: "ghost"`},
		{"a Workflow component depending on itself", `apiVersion: conflux.dev/v1alpha1
kind: Workflow
metadata: {name: selfdep, namespace: NS}
spec:
  components:
  - name: a
    dependsOn: [a]
    template: {spec: {containers: [{name: a, image: IMAGE}]}}
`, "a component cannot depend on itself"},
	}
	for _, tc := range cases {
		y := strings.NewReplacer("NS", ns, "IMAGE", image).Replace(tc.yaml)
		_, err := c.Kubectl(ctx, []byte(y), "create", "--dry-run=server", "-f", "-")
		if err == nil {
			t.Errorf("%s was accepted", tc.what)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s refused without saying %q: %v", tc.what, tc.want, err)
		}
	}
}

// waitSpaceReady waits for the Space's Ready condition and returns its status endpoint.
func waitSpaceReady(ctx context.Context, t *testing.T, c *Cluster, ns, name string) string {
	t.Helper()
	var out string
	err := poll(ctx, 60*time.Second, func() bool {
		out, _ = c.Kubectl(ctx, nil, "-n", ns, "get", "space", name, "-o",
			`jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.endpoint}`)
		return strings.HasPrefix(out, "True ")
	})
	if err != nil {
		yaml, _ := c.Kubectl(ctx, nil, "-n", ns, "get", "space", name, "-o", "yaml")
		t.Fatalf("Space %s/%s not Ready (%q): %v\n%s", ns, name, out, err, yaml)
	}
	return strings.TrimPrefix(out, "True ")
}

// cliRun is one run of the conflux CLI (in the confluxd image) in a pod, and what it must
// give: the pod phase (Succeeded: exit 0, Failed: an error) and a piece of its output.
type cliRun struct {
	pod, phase, want string
	args             []string
}

// runCLI runs the pods at once on node and checks each one's phase and output.
func runCLI(ctx context.Context, t *testing.T, c *Cluster, ns, image, node string, runs ...cliRun) {
	t.Helper()
	for _, r := range runs {
		if _, err := c.Kubectl(ctx, []byte(cliPod(ns, r.pod, image, node, r.args)), "apply", "-f", "-"); err != nil {
			t.Fatalf("creating pod %s: %v", r.pod, err)
		}
	}
	for _, r := range runs {
		wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		st, err := c.WaitPod(wctx, ns, r.pod, func(s PodStatus) bool { return s.Phase == "Succeeded" || s.Phase == "Failed" })
		cancel()
		logs, _ := c.Kubectl(ctx, nil, "-n", ns, "logs", r.pod)
		if err != nil || st.Phase != r.phase || !strings.Contains(logs, r.want) {
			t.Errorf("conflux %s: phase %q (want %s), output %q (want %q), %v\n%s", strings.Join(r.args, " "),
				st.Phase, r.phase, strings.TrimSpace(logs), r.want, err, c.Describe(ctx, ns, r.pod))
			continue
		}
		t.Logf("conflux %s on %s: %s, %q", strings.Join(r.args, " "), st.NodeName, st.Phase, strings.TrimSpace(logs))
	}
}

// cliPod renders a pod running the conflux CLI once on a node.
func cliPod(ns, name, image, node string, args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
  labels:
    app.kubernetes.io/part-of: conflux-e2e
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  nodeSelector:
    kubernetes.io/hostname: %s
  securityContext:
    runAsNonRoot: true
  containers:
  - name: conflux
    image: %s
    imagePullPolicy: Never
    command: ["/usr/bin/conflux"]
    args: [%s]
`, name, ns, node, image, strings.Join(quoted, ", "))
}

// cleanupRelease undoes whatever part of the install happened, even after a failure:
// Conflux objects first (while the operator can still remove their finalizers; stripped
// if it cannot), then the release, the namespaces and the volume.
func cleanupRelease(t *testing.T, c *Cluster, helm *Helm, release, opNs, appNs string, vol LocalVolume) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const kinds = "spaces.conflux.dev,channels.conflux.dev,workflows.conflux.dev"
	if _, err := c.Kubectl(ctx, nil, "-n", appNs, "delete", kinds, "--all", "--ignore-not-found", "--wait=false"); err == nil {
		if poll(ctx, 45*time.Second, func() bool {
			out, err := c.Kubectl(ctx, nil, "-n", appNs, "get", kinds, "-o", "name")
			return err == nil && strings.TrimSpace(out) == ""
		}) != nil {
			out, _ := c.Kubectl(ctx, nil, "-n", appNs, "get", kinds, "-o", "name")
			for _, obj := range strings.Fields(out) {
				_, _ = c.Kubectl(ctx, nil, "-n", appNs, "patch", obj, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
			}
		}
	}
	if out, err := helm.Run(ctx, "uninstall", release, "-n", opNs, "--ignore-not-found", "--wait", "--timeout=90s"); err != nil {
		t.Logf("cleanup: helm uninstall: %v\n%s", err, out)
	}
	// waits for the pods to be gone before their volume's directory is removed
	if _, err := c.Kubectl(ctx, nil, "delete", "namespace", appNs, opNs, "--ignore-not-found", "--timeout=90s"); err != nil {
		t.Logf("cleanup: %v", err)
	}
	// the claim went with its namespace; the PV and the directory are ours to remove
	if err := vol.Delete(ctx, c); err != nil {
		t.Logf("cleanup: volume %s: %v", vol.Name, err)
	}
}

// waitGone polls until `kubectl get <args>` finds none of the objects.
func (c *Cluster) waitGone(ctx context.Context, timeout time.Duration, args ...string) error {
	var out string
	err := poll(ctx, timeout, func() bool {
		var err error
		out, err = c.Kubectl(ctx, nil, append([]string{"get", "--ignore-not-found", "-o", "name"}, args...)...)
		return err == nil && strings.TrimSpace(out) == ""
	})
	if err != nil {
		return fmt.Errorf("still there after %s: %s", timeout, strings.Join(strings.Fields(out), ", "))
	}
	return nil
}

// describeApp describes the pods matching a label selector (for failure reports).
func (c *Cluster) describeApp(ctx context.Context, ns, selector string) string {
	desc, _ := c.Kubectl(ctx, nil, "-n", ns, "describe", "pods", "-l", selector)
	logs, _ := c.Kubectl(ctx, nil, "-n", ns, "logs", "-l", selector, "--tail=50", "--all-containers")
	return fmt.Sprintf("--- describe pods -l %s\n%s\n--- logs\n%s", selector, desc, logs)
}

// operatorLogs returns the operator's last log lines (for failure reports).
func (c *Cluster) operatorLogs(ctx context.Context, ns, release string) string {
	logs, err := c.Kubectl(ctx, nil, "-n", ns, "logs", "deployment/"+release, "--tail=40")
	if err != nil {
		return "operator logs: " + err.Error()
	}
	return "--- operator logs\n" + logs
}

// poll calls done every second until it returns true or timeout (or ctx) ends.
func poll(ctx context.Context, timeout time.Duration, done func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if done() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func since(t time.Time) time.Duration { return time.Since(t).Round(100 * time.Millisecond) }
