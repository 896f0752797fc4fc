package controller

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	conflux "conflux.dev/operator/api/v1alpha1"
)

// The admission rules of the issue "inputs rejected at admission, not at reconcile": each
// invalid object is refused by the real API server (CEL, OpenAPI schema or the Workflow
// webhook) with a message naming the reason, and the valid object next to it is accepted.

func longName(n int) string { return "a" + strings.Repeat("b", n-1) }

func admSpace(ns, n, size string) *conflux.Space {
	return &conflux.Space{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns},
		Spec: conflux.SpaceSpec{Storage: conflux.SpaceStorage{Size: resource.MustParse(size)}}}
}

func admFabric(n string, mutate func(*conflux.FabricSpec)) *conflux.Fabric {
	f := &conflux.Fabric{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: conflux.FabricSpec{
		Kind: conflux.FabricRDMA, NodeSelector: map[string]string{"fabric": "ib"}}}
	mutate(&f.Spec)
	return f
}

func dpdk(pageSize, size string) func(*conflux.FabricSpec) {
	return func(s *conflux.FabricSpec) {
		s.Kind = conflux.FabricDPDK
		s.Transport = &conflux.FabricTransport{Hugepages: &conflux.Hugepages{PageSize: pageSize, Size: resource.MustParse(size)}}
	}
}

func admWorkflow(ns, n string, comps ...conflux.Component) *conflux.Workflow {
	for i := range comps {
		comps[i].Template = appTemplate()
	}
	return &conflux.Workflow{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns}, Spec: conflux.WorkflowSpec{Components: comps}}
}

// createOrReason creates obj and returns "" or the error's text; Fabrics (cluster-scoped)
// are deleted at the end of the test.
func createOrReason(t *testing.T, obj client.Object, opts ...client.CreateOption) string {
	t.Helper()
	err := k8sClient.Create(context.Background(), obj, opts...)
	if err == nil {
		if obj.GetNamespace() == "" {
			t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), obj) })
		}
		return ""
	}
	if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
		t.Fatalf("want Invalid or BadRequest, got %v", err)
	}
	return err.Error()
}

func TestAdmissionRefusesWithReason(t *testing.T) {
	ns := newNamespace(t)
	sfx := "-" + ns // Fabrics are cluster-scoped
	pipe := &conflux.Channel{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
		Spec: conflux.ChannelSpec{Kind: conflux.ChannelKindPipe, Space: "s"}}
	events := &conflux.Channel{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: ns},
		Spec: conflux.ChannelSpec{Kind: conflux.ChannelKindEvents}}
	NewWithT(t).Expect(k8sClient.Create(context.Background(), pipe)).To(Succeed())
	NewWithT(t).Expect(k8sClient.Create(context.Background(), events)).To(Succeed())
	sts := conflux.WorkloadStatefulSet

	tests := []struct {
		name    string
		invalid client.Object
		reason  []string // substrings of the refusal
		valid   client.Object
	}{
		{"space name over 52", admSpace(ns, longName(53), "1Gi"), []string{"a Space name is at most 52 characters", "controller-revision-hash"},
			admSpace(ns, longName(52), "1Gi")},
		{"space name with a dot", admSpace(ns, "lab.one", "1Gi"), []string{"a Space name must be a DNS-1035 label", "Service"},
			admSpace(ns, "lab-one", "1Gi")},
		{"space name starting with a digit", admSpace(ns, "1lab", "1Gi"), []string{"a Space name must be a DNS-1035 label"},
			admSpace(ns, "lab1", "1Gi")},
		{"space size zero", admSpace(ns, "zero", "0"), []string{"storage.size must be positive"},
			admSpace(ns, "one", "1")},
		{"space size negative", admSpace(ns, "neg", "-1Gi"), []string{"storage.size must be positive"},
			admSpace(ns, "pos", "1Gi")},
		{"nodeSelector key", admFabric("f-key"+sfx, func(s *conflux.FabricSpec) { s.NodeSelector = map[string]string{"bad key": "x", "ok": "y"} }),
			[]string{"spec.nodeSelector", "nodeSelector keys must be label keys"},
			admFabric("f-key-ok"+sfx, func(s *conflux.FabricSpec) {
				s.NodeSelector = map[string]string{"node.example.com/fabric_ib-1": "x", longName(63): "y"}
			})},
		{"nodeSelector key name over 63", admFabric("f-long"+sfx, func(s *conflux.FabricSpec) { s.NodeSelector = map[string]string{"example.com/" + longName(64): "x"} }),
			[]string{"nodeSelector keys must be label keys"}, nil},
		{"nodeSelector value", admFabric("f-val"+sfx, func(s *conflux.FabricSpec) { s.NodeSelector = map[string]string{"a": "-x", "b": "y"} }),
			// The webhook: CEL cannot bound the cost of a rule over a map's values.
			[]string{`spec.nodeSelector[a]: Invalid value: "-x": nodeSelector values must be label values`},
			admFabric("f-val-ok"+sfx, func(s *conflux.FabricSpec) { s.NodeSelector = map[string]string{"a": "", "b": "Y_1.z"} })},
		{"networkAttachment", admFabric("f-net"+sfx, func(s *conflux.FabricSpec) { s.NetworkAttachment = "Net_A" }),
			[]string{"networkAttachment must be name or namespace/name"},
			admFabric("f-net-ok"+sfx, func(s *conflux.FabricSpec) { s.NetworkAttachment = "kube-system/ib-net.v2" })},
		{"networkAttachment two slashes", admFabric("f-net2"+sfx, func(s *conflux.FabricSpec) { s.NetworkAttachment = "a/b/c" }),
			[]string{"networkAttachment must be name or namespace/name"}, nil},
		{"hugepage page size", admFabric("f-hp"+sfx, dpdk("4Mi", "8Mi")), []string{`Unsupported value: "4Mi"`, `"2Mi", "1Gi"`},
			admFabric("f-hp-ok"+sfx, dpdk("1Gi", "2Gi"))},
		{"hugepages not a multiple", admFabric("f-hpm"+sfx, dpdk("2Mi", "3Mi")), []string{"hugepages.size must be a positive multiple of hugepages.pageSize"},
			admFabric("f-hpm-ok"+sfx, dpdk("2Mi", "6Mi"))},
		{"hugepages zero", admFabric("f-hp0"+sfx, dpdk("2Mi", "0")), []string{"hugepages.size must be a positive multiple of hugepages.pageSize"}, nil},
		{"any-fast fabric", admFabric(conflux.AnyFastFabric, func(*conflux.FabricSpec) {}), []string{"any-fast is a reserved Fabric name"},
			admFabric("any-fast-ib"+sfx, func(*conflux.FabricSpec) {})},
		{"workflow name over 63", admWorkflow(ns, longName(64), conflux.Component{Name: "a"}),
			[]string{"a Workflow name is at most 63 characters", "conflux.dev/workflow"},
			admWorkflow(ns, longName(61), conflux.Component{Name: "a"})},
		{"statefulset name over 52", admWorkflow(ns, "s"+longName(30), conflux.Component{Name: "ok"}, conflux.Component{Name: longName(22), Workload: sts}),
			[]string{"a StatefulSet component's name <workflow>-<component> is at most 52 characters", "controller-revision-hash"},
			admWorkflow(ns, "s"+longName(30), conflux.Component{Name: longName(20), Workload: sts}, conflux.Component{Name: longName(31)})},
		// The webhook: a Deployment with a longer name runs, so existing ones are spared.
		{"deployment name over 63", admWorkflow(ns, longName(40), conflux.Component{Name: "b"}, conflux.Component{Name: longName(23)}),
			[]string{"spec.components[1].name", "workload name " + longName(40) + "-" + longName(23) + " is 64 characters, at most 63"},
			admWorkflow(ns, longName(40), conflux.Component{Name: longName(22)})},
		{"statefulset workflow with a dot", admWorkflow(ns, "lab.v1", conflux.Component{Name: "db", Workload: sts}),
			[]string{"a Workflow with a StatefulSet component needs a name without dots"},
			admWorkflow(ns, "lab.v2", conflux.Component{Name: "web"})},
		{"input is its own output", admWorkflow(ns, "loop", conflux.Component{Name: "a", Inputs: []string{"x", "y"}, Outputs: []string{"y"}}),
			[]string{"component a reads its own output y"},
			admWorkflow(ns, "chain", conflux.Component{Name: "a", Inputs: []string{"x"}, Outputs: []string{"y"}},
				conflux.Component{Name: "b", Inputs: []string{"y"}, Outputs: []string{"x"}})},
		// The webhook: only it can read the Channel's kind.
		{"two writers on a pipe", admWorkflow(ns, "writers", conflux.Component{Name: "a", Outputs: []string{"p"}},
			conflux.Component{Name: "b", Outputs: []string{"e", "p"}}),
			[]string{"spec.components[0].outputs", "pipe p has one writer, but components a, b all write it"},
			admWorkflow(ns, "sources", conflux.Component{Name: "a", Outputs: []string{"e", "p"}},
				conflux.Component{Name: "b", Inputs: []string{"p"}, Outputs: []string{"e"}}, conflux.Component{Name: "c", Inputs: []string{"p"}})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := createOrReason(t, tt.invalid)
			g.Expect(got).NotTo(BeEmpty(), "the invalid %s is accepted", tt.invalid.GetName())
			for _, r := range tt.reason {
				g.Expect(got).To(ContainSubstring(r))
			}
			if tt.valid != nil {
				g.Expect(createOrReason(t, tt.valid)).To(BeEmpty())
			}
		})
	}
}

// TestAdmissionHugepagesIntegerSize: a quantity written as a plain integer is checked too.
func TestAdmissionHugepagesIntegerSize(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	obj := func(n string, size int64) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": conflux.GroupVersion.String(), "kind": "Fabric", "metadata": map[string]any{"name": n + "-" + ns},
			"spec": map[string]any{"kind": "dpdk", "nodeSelector": map[string]any{"a": "b"},
				"transport": map[string]any{"hugepages": map[string]any{"pageSize": "2Mi", "size": size}}}}}
		return u
	}
	g.Expect(createOrReason(t, obj("int-bad", 3<<20))).To(ContainSubstring("hugepages.size must be a positive multiple"))
	g.Expect(createOrReason(t, obj("int-ok", 4<<20))).To(BeEmpty())
}

// TestAdmissionTypedPodTemplate: the component template is a PodTemplateSpec in the
// schema: a misspelt field is refused (strict field validation, kubectl's default), a
// wrong type always; its metadata is kept.
func TestAdmissionTypedPodTemplate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	wf := func(n string, container map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": conflux.GroupVersion.String(), "kind": "Workflow", "metadata": map[string]any{"name": n, "namespace": ns},
			"spec": map[string]any{"components": []any{map[string]any{"name": "app", "template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"team": "lab"}, "annotations": map[string]any{"note": "kept"}},
				"spec":     map[string]any{"containers": []any{container}}}}}}}}
	}
	typo := map[string]any{"name": "app", "image": "example/app:1", "resoures": map[string]any{"limits": map[string]any{"cpu": "1"}}}
	got := createOrReason(t, wf("typo", typo), client.FieldValidation(metav1.FieldValidationStrict))
	g.Expect(got).To(ContainSubstring(`unknown field "spec.components[0].template.spec.containers[0].resoures"`))

	got = createOrReason(t, wf("wrong-type", map[string]any{"name": "app", "image": int64(5)}))
	g.Expect(got).To(ContainSubstring("spec.components[0].template.spec.containers[0].image"))
	g.Expect(got).To(ContainSubstring("must be of type string"))

	ok := map[string]any{"name": "app", "image": "example/app:1", "resources": map[string]any{"limits": map[string]any{"cpu": "1"}}}
	g.Expect(createOrReason(t, wf("typed", ok), client.FieldValidation(metav1.FieldValidationStrict))).To(BeEmpty())
	var stored conflux.Workflow
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "typed"}, &stored)).To(Succeed())
	tpl := stored.Spec.Components[0].Template
	g.Expect(tpl.Labels).To(HaveKeyWithValue("team", "lab"))
	g.Expect(tpl.Annotations).To(HaveKeyWithValue("note", "kept"))
	g.Expect(tpl.Spec.Containers[0].Resources.Limits).To(HaveKeyWithValue(corev1.ResourceCPU, resource.MustParse("1")))
}

// TestAdmissionNewComponentNameOnUpdate: the webhook checks a component added by an update.
func TestAdmissionNewComponentNameOnUpdate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	wf := admWorkflow(ns, longName(40), conflux.Component{Name: "a"})
	g.Expect(k8sClient.Create(ctx, wf)).To(Succeed())
	g.Eventually(func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(wf), wf); err != nil {
			return err
		}
		wf.Spec.Components = append(wf.Spec.Components, conflux.Component{Name: longName(23), Template: appTemplate()})
		return k8sClient.Update(ctx, wf)
	}, timeout, interval).Should(MatchError(ContainSubstring("is 64 characters, at most 63")))
	g.Eventually(func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(wf), wf); err != nil {
			return err
		}
		wf.Spec.Components = append(wf.Spec.Components, conflux.Component{Name: longName(22), Template: appTemplate()})
		return k8sClient.Update(ctx, wf)
	}, timeout, interval).Should(Succeed())
}
