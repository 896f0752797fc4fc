package placement

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	conflux "conflux.dev/operator/api/v1alpha1"
	"conflux.dev/operator/internal/sidecar"
)

func TestDecide(t *testing.T) {
	fabrics := []Fabric{{Name: "ib-a", Ready: true, Nodes: 2}, {Name: "ib-b", Ready: true, Nodes: 4}, {Name: "empty", Nodes: 0},
		{Name: "big-down", Nodes: 9}}
	tests := []struct {
		name       string
		components []Component
		fabrics    []Fabric
		want       map[string]Decision // only Fabric, Link and Reason are compared
	}{
		{
			name:       "no fabric requested runs over TCP",
			components: []Component{{Name: "a", Outputs: []string{"x"}}, {Name: "b", Inputs: []string{"x"}}},
			fabrics:    fabrics,
			want: map[string]Decision{
				"a": {Link: conflux.LinkTCP, Reason: ReasonNoFabricRequested},
				"b": {Link: conflux.LinkTCP, Reason: ReasonNoFabricRequested},
			},
		},
		{
			name: "components sharing a channel are packed into the one named fabric",
			components: []Component{
				{Name: "sim", Fabric: "ib-a", Outputs: []string{"x"}},
				{Name: "ana", Fabric: conflux.AnyFastFabric, Inputs: []string{"x"}},
			},
			fabrics: fabrics,
			want: map[string]Decision{
				"sim": {Fabric: "ib-a", Link: conflux.LinkFast, Reason: ReasonFabricAssigned},
				"ana": {Fabric: "ib-a", Link: conflux.LinkFast, Reason: ReasonFabricAssigned},
			},
		},
		{
			name: "any-fast picks the fabric with the most nodes",
			components: []Component{
				{Name: "sim", Fabric: conflux.AnyFastFabric, Outputs: []string{"x"}},
				{Name: "ana", Fabric: conflux.AnyFastFabric, Inputs: []string{"x"}},
			},
			fabrics: fabrics,
			want: map[string]Decision{
				"sim": {Fabric: "ib-b", Link: conflux.LinkFast, Reason: ReasonFabricAssigned},
				"ana": {Fabric: "ib-b", Link: conflux.LinkFast, Reason: ReasonFabricAssigned},
			},
		},
		{
			name:       "any-fast without any Ready fabric falls back to TCP",
			components: []Component{{Name: "sim", Fabric: conflux.AnyFastFabric, Current: "big-down"}},
			fabrics:    []Fabric{{Name: "empty"}, {Name: "big-down", Nodes: 9}},
			want:       map[string]Decision{"sim": {Link: conflux.LinkTCP, Reason: ReasonNoFabricAvailable}},
		},
		{
			name: "a named fabric that is not Ready falls back to TCP",
			components: []Component{{Name: "sim", Fabric: "empty", Current: "empty"},
				{Name: "ana", Fabric: conflux.AnyFastFabric, ColocateWith: []string{"sim"}}},
			fabrics: fabrics,
			want: map[string]Decision{
				"sim": {Link: conflux.LinkTCP, Reason: ReasonFabricNotReady},
				"ana": {Link: conflux.LinkTCP, Reason: ReasonFabricNotReady},
			},
		},
		{
			name:       "a named fabric not judged yet is used, not TCP for a moment",
			components: []Component{{Name: "sim", Fabric: "fresh"}},
			fabrics:    []Fabric{{Name: "fresh", Pending: true}},
			want:       map[string]Decision{"sim": {Fabric: "fresh", Link: conflux.LinkFast, Reason: ReasonFabricAssigned}},
		},
		{
			name:       "any-fast waits for a fabric not judged yet",
			components: []Component{{Name: "sim", Fabric: conflux.AnyFastFabric}},
			fabrics:    []Fabric{{Name: "fresh", Pending: true, Nodes: 3}},
			want:       map[string]Decision{"sim": {Link: conflux.LinkTCP, Reason: ReasonNoFabricAvailable}},
		},
		{
			name: "any-fast stays on its Ready fabric when another has more nodes",
			components: []Component{
				{Name: "sim", Fabric: conflux.AnyFastFabric, Outputs: []string{"x"}, Current: "ib-a"},
				{Name: "ana", Fabric: conflux.AnyFastFabric, Inputs: []string{"x"}, Current: "ib-a"},
				{Name: "new", Fabric: conflux.AnyFastFabric, Inputs: []string{"x"}},
			},
			fabrics: fabrics,
			want: map[string]Decision{
				"sim": {Fabric: "ib-a", Link: conflux.LinkFast, Reason: ReasonFabricAssigned},
				"ana": {Fabric: "ib-a", Link: conflux.LinkFast, Reason: ReasonFabricAssigned},
				"new": {Fabric: "ib-a", Link: conflux.LinkFast, Reason: ReasonFabricAssigned},
			},
		},
		{
			name: "a group split across fabrics joins the one most members are on",
			components: []Component{
				{Name: "a", Fabric: conflux.AnyFastFabric, Outputs: []string{"x"}, Current: "ib-b"},
				{Name: "b", Fabric: conflux.AnyFastFabric, Inputs: []string{"x"}, Current: "ib-a"},
				{Name: "c", Fabric: conflux.AnyFastFabric, Inputs: []string{"x"}, Current: "ib-a"},
			},
			fabrics: fabrics,
			want: map[string]Decision{
				"a": {Fabric: "ib-a", Link: conflux.LinkFast, Reason: ReasonFabricAssigned},
				"b": {Fabric: "ib-a", Link: conflux.LinkFast, Reason: ReasonFabricAssigned},
				"c": {Fabric: "ib-a", Link: conflux.LinkFast, Reason: ReasonFabricAssigned},
			},
		},
		{
			name: "any-fast moves when its fabric is not Ready or gone",
			components: []Component{
				{Name: "down", Fabric: conflux.AnyFastFabric, Current: "empty"},
				{Name: "gone", Fabric: conflux.AnyFastFabric, Current: "deleted"},
			},
			fabrics: fabrics,
			want: map[string]Decision{
				"down": {Fabric: "ib-b", Link: conflux.LinkFast, Reason: ReasonFabricAssigned},
				"gone": {Fabric: "ib-b", Link: conflux.LinkFast, Reason: ReasonFabricAssigned},
			},
		},
		{
			name:       "any-fast ignores a fabric that is not Ready, however many nodes it counts",
			components: []Component{{Name: "sim", Fabric: conflux.AnyFastFabric}},
			fabrics:    []Fabric{{Name: "big-down", Nodes: 9}, {Name: "small", Ready: true, Nodes: 1}},
			want:       map[string]Decision{"sim": {Fabric: "small", Link: conflux.LinkFast, Reason: ReasonFabricAssigned}},
		},
		{
			name:       "unknown fabric falls back to TCP",
			components: []Component{{Name: "sim", Fabric: "nope"}},
			fabrics:    fabrics,
			want:       map[string]Decision{"sim": {Link: conflux.LinkTCP, Reason: ReasonFabricNotFound}},
		},
		{
			name: "sharing a channel across two named fabrics is a conflict",
			components: []Component{
				{Name: "sim", Fabric: "ib-a", Outputs: []string{"x"}},
				{Name: "ana", Fabric: "ib-b", Inputs: []string{"x"}},
			},
			fabrics: fabrics,
			want: map[string]Decision{
				"sim": {Link: conflux.LinkTCP, Reason: ReasonFabricConflict},
				"ana": {Link: conflux.LinkTCP, Reason: ReasonFabricConflict},
			},
		},
		{
			name: "components not sharing a channel keep their own fabrics",
			components: []Component{
				{Name: "sim", Fabric: "ib-a", Outputs: []string{"x"}},
				{Name: "ana", Fabric: "ib-b", Inputs: []string{"y"}},
			},
			fabrics: fabrics,
			want: map[string]Decision{
				"sim": {Fabric: "ib-a", Link: conflux.LinkFast, Reason: ReasonFabricAssigned},
				"ana": {Fabric: "ib-b", Link: conflux.LinkFast, Reason: ReasonFabricAssigned},
			},
		},
		{
			name: "colocateWith joins groups without a shared channel",
			components: []Component{
				{Name: "sim", Fabric: "ib-a"},
				{Name: "viz", Fabric: conflux.AnyFastFabric, ColocateWith: []string{"sim"}},
			},
			fabrics: fabrics,
			want: map[string]Decision{
				"sim": {Fabric: "ib-a", Link: conflux.LinkFast, Reason: ReasonFabricAssigned},
				"viz": {Fabric: "ib-a", Link: conflux.LinkFast, Reason: ReasonFabricAssigned},
			},
		},
		{
			name: "a TCP peer does not pull a fast component out of its fabric",
			components: []Component{
				{Name: "sim", Fabric: "ib-a", Outputs: []string{"x"}},
				{Name: "log", Inputs: []string{"x"}},
			},
			fabrics: fabrics,
			want: map[string]Decision{
				"sim": {Fabric: "ib-a", Link: conflux.LinkFast, Reason: ReasonFabricAssigned},
				"log": {Link: conflux.LinkTCP, Reason: ReasonNoFabricRequested},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := Decide(tt.components, tt.fabrics)
			g.Expect(got).To(HaveLen(len(tt.want)))
			for name, w := range tt.want {
				g.Expect(got).To(HaveKey(name))
				d := got[name]
				g.Expect(Decision{Fabric: d.Fabric, Link: d.Link, Reason: d.Reason}).To(Equal(w), "component %s: %s", name, d.Message)
				g.Expect(d.Message).NotTo(BeEmpty())
			}
		})
	}
}

func TestApplyFabric(t *testing.T) {
	g := NewWithT(t)
	tpl := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{conflux.NetworksAnnotation: "other"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	sidecar.Inject(&tpl.Spec, sidecar.Config{Image: "confluxd:dev", Outputs: []string{"x"}})
	f := &conflux.Fabric{
		ObjectMeta: metav1.ObjectMeta{Name: "ib"},
		Spec: conflux.FabricSpec{
			NodeSelector: map[string]string{"conflux.dev/fabric": "ib", "zone": "a"},
			Kind:         conflux.FabricDPDK, ResourceName: "intel.com/sriov", NetworkAttachment: "sriov-net",
			Transport: &conflux.FabricTransport{DPDKArgs: []string{"-l", "0-1"}, MTU: 9000,
				Hugepages: &conflux.Hugepages{PageSize: "2Mi", Size: resource.MustParse("256Mi")}},
		},
	}
	ApplyFabric(tpl, f)
	ApplyFabric(tpl, f) // idempotent for annotations, caps and volumes

	g.Expect(tpl.Annotations[conflux.NetworksAnnotation]).To(Equal("other,sriov-net"))
	terms := tpl.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	g.Expect(terms).To(HaveLen(1))
	g.Expect(terms[0].MatchExpressions).To(ContainElement(corev1.NodeSelectorRequirement{
		Key: "conflux.dev/fabric", Operator: corev1.NodeSelectorOpIn, Values: []string{"ib"}}))
	sc := sidecar.Find(&tpl.Spec)
	g.Expect(sc).NotTo(BeNil())
	g.Expect(sc.Resources.Limits).To(HaveKeyWithValue(corev1.ResourceName("intel.com/sriov"), resource.MustParse("1")))
	g.Expect(sc.Resources.Limits).To(HaveKeyWithValue(corev1.ResourceName("hugepages-2Mi"), resource.MustParse("256Mi")))
	g.Expect(sc.Resources.Limits).To(HaveKey(corev1.ResourceMemory))
	g.Expect(sc.SecurityContext.Capabilities.Add).To(Equal([]corev1.Capability{"IPC_LOCK"}))
	g.Expect(sc.Args).To(ContainElement("--transport=dpdk"))
	g.Expect(sc.Env).To(ContainElement(corev1.EnvVar{Name: "CONFLUX_MTU", Value: "9000"}))
	vols := 0
	for _, v := range tpl.Spec.Volumes {
		if v.Name == HugepagesVolume {
			vols++
			g.Expect(v.EmptyDir.Medium).To(Equal(corev1.StorageMedium("HugePages-2Mi")))
		}
	}
	g.Expect(vols).To(Equal(1))
	// the device: which resource's PCIDEVICE_* to read, and the network-status file
	g.Expect(sc.Env).To(ContainElements(corev1.EnvVar{Name: EnvDeviceResource, Value: "intel.com/sriov"},
		corev1.EnvVar{Name: EnvNetworkStatusFile, Value: "/etc/conflux/podinfo/network-status"}))
	info := 0
	for _, v := range tpl.Spec.Volumes {
		if v.Name == PodInfoVolume {
			info++
			g.Expect(v.DownwardAPI.Items[0].FieldRef.FieldPath).To(Equal("metadata.annotations['k8s.v1.cni.cncf.io/network-status']"))
		}
	}
	g.Expect(info).To(Equal(1))
	g.Expect(sc.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: PodInfoVolume, MountPath: PodInfoPath, ReadOnly: true}))
}
