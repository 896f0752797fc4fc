package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	conflux "conflux.dev/operator/api/v1alpha1"
	"conflux.dev/operator/internal/placement"
)

// testNodeLabel selects the Nodes of one test's Fabric (value: the test's namespace and a
// suffix), so that no other test's Fabric matches them.
const (
	testNodeLabel    = "conflux.dev/test-fabric"
	testFabricRes    = "example.com/fastnic"
	stickyObserveFor = 3 * time.Second
)

// createNodes creates n Nodes labeled for fabric domain dom, with res allocatable (none
// when res is empty), set through the status subresource as the kubelet does. They are
// deleted when the test ends.
func createNodes(t *testing.T, dom string, n int, res string) []*corev1.Node {
	t.Helper()
	ctx := context.Background()
	t.Cleanup(func() {
		_ = k8sClient.DeleteAllOf(ctx, &corev1.Node{}, client.MatchingLabels{testNodeLabel: dom})
	})
	var out []*corev1.Node
	for i := 0; i < n; i++ {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-n%03d", dom, i), Labels: map[string]string{testNodeLabel: dom}}}
		if err := k8sClient.Create(ctx, node); err != nil {
			t.Fatalf("creating node: %v", err)
		}
		if res != "" {
			setAllocatable(t, node, res, "2")
		}
		out = append(out, node)
	}
	return out
}

// setAllocatable sets (count > 0) or removes res in the node's status.allocatable.
func setAllocatable(t *testing.T, node *corev1.Node, res, count string) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(node), node)).To(Succeed())
	if node.Status.Allocatable == nil {
		node.Status.Allocatable = corev1.ResourceList{}
	}
	if count == "0" {
		delete(node.Status.Allocatable, corev1.ResourceName(res))
	} else {
		node.Status.Allocatable[corev1.ResourceName(res)] = resource.MustParse(count)
	}
	g.Expect(k8sClient.Status().Update(context.Background(), node)).To(Succeed())
}

func testFabric(name, dom, res string) *conflux.Fabric {
	return &conflux.Fabric{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: conflux.FabricSpec{
		Kind: conflux.FabricRDMA, NodeSelector: map[string]string{testNodeLabel: dom}, ResourceName: res}}
}

func createFabric(t *testing.T, f *conflux.Fabric) {
	t.Helper()
	if err := k8sClient.Create(context.Background(), f); err != nil {
		t.Fatalf("creating fabric: %v", err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), f) })
}

// expectFabric waits until f's NodesAvailable condition has reason and its totals are
// matching and ready; Ready follows NodesAvailable.
func expectFabric(t *testing.T, f *conflux.Fabric, reason string, matching, ready int32) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		c := condition(g, f, func() []metav1.Condition { return f.Status.Conditions }, conflux.FabricNodesAvailableCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(reason))
		g.Expect(c.ObservedGeneration).To(Equal(f.Generation))
		g.Expect(f.Status.MatchingNodes).To(Equal(matching))
		g.Expect(f.Status.ReadyNodes).To(Equal(ready))
		r := condition(g, f, func() []metav1.Condition { return f.Status.Conditions }, conflux.ReadyCondition)
		g.Expect(r).NotTo(BeNil())
		g.Expect(r.Status).To(Equal(c.Status))
	}, timeout, interval).Should(Succeed(), "fabric %s: %s, %d matching, %d ready", f.Name, reason, matching, ready)
}

// A Fabric is Ready only while matching nodes advertise its device resource: it follows
// nodes appearing, gaining the resource, losing their labels and being deleted.
func TestFabricReadinessFollowsNodes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dom := newNamespace(t)
	dev := testFabric("dev-"+dom, dom, testFabricRes)
	plain := testFabric("plain-"+dom, dom, "")
	createFabric(t, dev)
	createFabric(t, plain)
	expectFabric(t, dev, conflux.ReasonNoMatchingNodes, 0, 0)
	expectFabric(t, plain, conflux.ReasonNoMatchingNodes, 0, 0)
	g.Expect(dev.Status.NodeStates).To(BeEmpty())

	node := createNodes(t, dom, 1, "")[0]
	expectFabric(t, dev, conflux.ReasonResourceNotAdvertised, 1, 0)
	g.Expect(dev.Status.NodeStates).To(Equal([]conflux.FabricNodeState{
		{Name: node.Name, Allocatable: 0, Ready: false, Reason: conflux.ReasonResourceNotAdvertised}}))
	expectFabric(t, plain, conflux.ReasonNodesReady, 1, 1)
	g.Expect(plain.Status.NodeStates).To(Equal([]conflux.FabricNodeState{
		{Name: node.Name, Ready: true, Reason: conflux.ReasonNodeMatches}}))

	setAllocatable(t, node, testFabricRes, "4")
	expectFabric(t, dev, conflux.ReasonNodesReady, 1, 1)
	g.Expect(dev.Status.NodeStates).To(Equal([]conflux.FabricNodeState{
		{Name: node.Name, Allocatable: 4, Ready: true, Reason: conflux.ReasonResourceAdvertised}}))

	setAllocatable(t, node, testFabricRes, "0")
	expectFabric(t, dev, conflux.ReasonResourceNotAdvertised, 1, 0)
	setAllocatable(t, node, testFabricRes, "4")
	expectFabric(t, dev, conflux.ReasonNodesReady, 1, 1)

	// the node leaves the domain: both Fabrics it left are queued (old labels)
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(node), node)).To(Succeed())
	node.Labels = map[string]string{testNodeLabel: dom + "-elsewhere"}
	g.Expect(k8sClient.Update(ctx, node)).To(Succeed())
	expectFabric(t, dev, conflux.ReasonNoMatchingNodes, 0, 0)
	expectFabric(t, plain, conflux.ReasonNoMatchingNodes, 0, 0)
	g.Expect(dev.Status.NodeStates).To(BeEmpty())

	// back in the domain (new labels), then deleted
	node.Labels = map[string]string{testNodeLabel: dom}
	g.Expect(k8sClient.Update(ctx, node)).To(Succeed())
	expectFabric(t, dev, conflux.ReasonNodesReady, 1, 1)
	g.Expect(k8sClient.Delete(ctx, node)).To(Succeed())
	expectFabric(t, dev, conflux.ReasonNoMatchingNodes, 0, 0)
	expectFabric(t, plain, conflux.ReasonNoMatchingNodes, 0, 0)
}

// On a big domain the status lists the first nodes by name and counts them all.
func TestFabricNodeStatesCapped(t *testing.T) {
	g := NewWithT(t)
	dom := newNamespace(t)
	n := conflux.FabricNodeStatesLimit + 3
	nodes := createNodes(t, dom, n, "")
	f := testFabric("many-"+dom, dom, "")
	createFabric(t, f)
	expectFabric(t, f, conflux.ReasonNodesReady, int32(n), int32(n))
	g.Expect(f.Status.NodeStates).To(HaveLen(conflux.FabricNodeStatesLimit))
	for i, st := range f.Status.NodeStates {
		g.Expect(st.Name).To(Equal(nodes[i].Name), "sorted by name")
		g.Expect(st.Ready).To(BeTrue())
	}
}

// componentFabrics returns each component's fabric in wf's status ("" for TCP).
func componentFabrics(g Gomega, wf *conflux.Workflow) map[string]string {
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(wf), wf)).To(Succeed())
	out := map[string]string{}
	for _, cs := range wf.Status.Components {
		out[cs.Name] = cs.Fabric
	}
	return out
}

// fabricOfDeployment returns the test fabric domain the deployment's pods are pinned to.
func fabricOfDeployment(g Gomega, ns, name string) string {
	d := getDeployment(g, ns, name)
	aff := d.Spec.Template.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, e := range aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions {
		if e.Key == testNodeLabel {
			return e.Values[0]
		}
	}
	return ""
}

// An any-fast group stays on its Fabric when another gets more nodes (a new Workflow goes
// to the bigger one), and moves when its Fabric is no longer Ready or is deleted.
func TestWorkflowAnyFastPlacementIsSticky(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)

	// more ready nodes than any Fabric of the other tests, so that any-fast picks ours
	var existing conflux.FabricList
	g.Expect(k8sClient.List(ctx, &existing)).To(Succeed())
	most := 0
	for _, f := range existing.Items {
		most = max(most, int(f.Status.ReadyNodes))
	}
	domA, domB := ns+"-a", ns+"-b"
	nodesA := createNodes(t, domA, most+1, testFabricRes)
	fa, fb := testFabric("a-"+ns, domA, testFabricRes), testFabric("b-"+ns, domB, testFabricRes)
	createFabric(t, fa)
	createFabric(t, fb)
	expectFabric(t, fa, conflux.ReasonNodesReady, int32(most+1), int32(most+1))
	expectFabric(t, fb, conflux.ReasonNoMatchingNodes, 0, 0)

	createChannels(t, ns, "x", "y")
	anyFast := func(name, ch string) *conflux.Workflow {
		return &conflux.Workflow{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: conflux.WorkflowSpec{Components: []conflux.Component{
			{Name: "sim", Template: appTemplate(), Outputs: []string{ch}, Fabric: conflux.AnyFastFabric},
			{Name: "ana", Template: appTemplate(), Inputs: []string{ch}, Fabric: conflux.AnyFastFabric},
		}}}
	}
	placedOn := func(wf *conflux.Workflow, fabric, dom string) func(g Gomega) {
		return func(g Gomega) {
			g.Expect(componentFabrics(g, wf)).To(Equal(map[string]string{"sim": fabric, "ana": fabric}))
			for _, c := range []string{"sim", "ana"} {
				g.Expect(fabricOfDeployment(g, ns, wf.Name+"-"+c)).To(Equal(dom))
			}
		}
	}
	wf1 := anyFast("wf1", "x")
	g.Expect(k8sClient.Create(ctx, wf1)).To(Succeed())
	g.Eventually(placedOn(wf1, fa.Name, domA), timeout, interval).Should(Succeed())

	// B becomes the biggest Ready fabric: a new Workflow goes there, wf1 stays on A
	createNodes(t, domB, most+3, testFabricRes)
	expectFabric(t, fb, conflux.ReasonNodesReady, int32(most+3), int32(most+3))
	wf2 := anyFast("wf2", "y")
	g.Expect(k8sClient.Create(ctx, wf2)).To(Succeed())
	g.Eventually(placedOn(wf2, fb.Name, domB), timeout, interval).Should(Succeed())
	g.Consistently(placedOn(wf1, fa.Name, domA), stickyObserveFor, interval).Should(Succeed())

	// A loses its device resource: NotReady, wf1 moves to B
	for _, n := range nodesA {
		setAllocatable(t, n, testFabricRes, "0")
	}
	expectFabric(t, fa, conflux.ReasonResourceNotAdvertised, int32(most+1), 0)
	g.Eventually(placedOn(wf1, fb.Name, domB), timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(wf1), wf1)).To(Succeed())
		g.Expect(wf1.Status.Components).To(HaveEach(HaveField("Reason", placement.ReasonFabricAssigned)))
	}, timeout, interval).Should(Succeed())

	// B deleted: nothing stays on it
	g.Expect(k8sClient.Delete(ctx, fb)).To(Succeed())
	g.Eventually(func() bool { return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(fb), fb)) }, timeout, interval).Should(BeTrue())
	for _, wf := range []*conflux.Workflow{wf1, wf2} {
		g.Eventually(func(g Gomega) {
			g.Expect(componentFabrics(g, wf)).To(And(HaveKey("sim"), Not(ContainElement(fb.Name))))
			g.Expect(fabricOfDeployment(g, ns, wf.Name+"-sim")).NotTo(Equal(domB))
		}, timeout, interval).Should(Succeed())
	}
}
