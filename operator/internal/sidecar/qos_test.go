package sidecar

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func res(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func TestQOSClass(t *testing.T) {
	c := func(req, lim corev1.ResourceList) corev1.Container {
		return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
	}
	full := res("cpu", "1", "memory", "1Gi")
	tests := []struct {
		name       string
		init, apps []corev1.Container
		want       corev1.PodQOSClass
	}{
		{"nothing", nil, []corev1.Container{c(nil, nil)}, corev1.PodQOSBestEffort},
		{"only other resources", nil, []corev1.Container{c(res("ephemeral-storage", "1Gi"), nil)}, corev1.PodQOSBestEffort},
		{"limits only (requests default to them)", nil, []corev1.Container{c(nil, full)}, corev1.PodQOSGuaranteed},
		{"requests == limits", nil, []corev1.Container{c(full, full)}, corev1.PodQOSGuaranteed},
		{"equal in another notation", nil, []corev1.Container{c(res("cpu", "1000m", "memory", "1024Mi"), full)}, corev1.PodQOSGuaranteed},
		{"requests below limits", nil, []corev1.Container{c(res("cpu", "500m", "memory", "1Gi"), full)}, corev1.PodQOSBurstable},
		{"no memory limit", nil, []corev1.Container{c(nil, res("cpu", "1"))}, corev1.PodQOSBurstable},
		{"one container without", nil, []corev1.Container{c(nil, full), c(nil, nil)}, corev1.PodQOSBurstable},
		{"an init container without", []corev1.Container{c(nil, nil)}, []corev1.Container{c(nil, full)}, corev1.PodQOSBurstable},
		{"requests only", nil, []corev1.Container{c(full, nil)}, corev1.PodQOSBurstable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(QOSClass(&corev1.PodSpec{InitContainers: tt.init, Containers: tt.apps})).To(Equal(tt.want))
		})
	}
}

func TestInjectKeepsGuaranteed(t *testing.T) {
	g := NewWithT(t)
	guaranteed := func() *corev1.PodSpec {
		return &corev1.PodSpec{Containers: []corev1.Container{{Name: "app",
			Resources: corev1.ResourceRequirements{Limits: res("cpu", "1", "memory", "1Gi")}}}}
	}
	for _, tt := range []struct {
		name     string
		cfg      *corev1.ResourceRequirements
		cpu, mem string
	}{
		{"defaults: requests become limits", nil, "50m", "64Mi"},
		{"configured limits win", &corev1.ResourceRequirements{Requests: res("cpu", "50m", "memory", "64Mi"),
			Limits: res("cpu", "200m", "memory", "128Mi")}, "200m", "128Mi"},
		{"a resource not configured takes the default", &corev1.ResourceRequirements{Limits: res("memory", "256Mi")}, "50m", "256Mi"},
	} {
		spec := guaranteed()
		g.Expect(Inject(spec, Config{Image: "x", Resources: tt.cfg, ImagePullSecrets: []string{"a", "a"}})).To(BeTrue())
		r := Find(spec).Resources
		g.Expect(r.Requests).To(Equal(r.Limits), tt.name)
		g.Expect(r.Limits.Cpu().String()).To(Equal(tt.cpu), tt.name)
		g.Expect(r.Limits.Memory().String()).To(Equal(tt.mem), tt.name)
		g.Expect(QOSClass(spec)).To(Equal(corev1.PodQOSGuaranteed), tt.name)
		g.Expect(spec.ImagePullSecrets).To(Equal([]corev1.LocalObjectReference{{Name: "a"}}), "no duplicate")
	}
	burstable := &corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}
	Inject(burstable, Config{Image: "x"})
	g.Expect(Find(burstable).Resources).To(Equal(DefaultResources()), "not Guaranteed: the configured resources as they are")
}

func TestResourcesFromFlags(t *testing.T) {
	g := NewWithT(t)
	r, err := ResourcesFromFlags("", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r).To(BeNil(), "the defaults")
	r, err = ResourcesFromFlags("cpu=50m, memory=64Mi", "cpu=1,memory=128Mi,ephemeral-storage=1Gi")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Requests).To(Equal(res("cpu", "50m", "memory", "64Mi")))
	g.Expect(r.Limits).To(Equal(res("cpu", "1", "memory", "128Mi", "ephemeral-storage", "1Gi")))
	r, err = ResourcesFromFlags("", "memory=1Gi")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Requests).To(BeNil())
	for _, bad := range [][2]string{{"cpu", ""}, {"cpu=lots", ""}, {"=1", ""}, {"cpu=-1", ""}, {"", "memory"}, {"cpu=2", "cpu=1"}} {
		_, err := ResourcesFromFlags(bad[0], bad[1])
		g.Expect(err).To(HaveOccurred(), "%q", bad)
	}
}

func TestInjectRunAsNonRootUnlessThePodIsRoot(t *testing.T) {
	g := NewWithT(t)
	plain := &corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}
	Inject(plain, Config{Image: "x"})
	g.Expect(Find(plain).SecurityContext.RunAsNonRoot).To(Equal(ptr(true)), "restricted by default")
	root := int64(0)
	asRoot := &corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsUser: &root},
		Containers: []corev1.Container{{Name: "app"}}}
	Inject(asRoot, Config{Image: "x"})
	sc := Find(asRoot).SecurityContext
	g.Expect(sc.RunAsNonRoot).To(BeNil(), "a pod that runs as root keeps a sidecar that can start")
	g.Expect(sc.Capabilities.Drop).To(ContainElement(corev1.Capability("ALL")))
}
