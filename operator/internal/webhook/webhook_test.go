package webhook

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	conflux "conflux.dev/operator/api/v1alpha1"
	"conflux.dev/operator/internal/sidecar"
)

func TestValidateWorkflowGraph(t *testing.T) {
	c := func(name string, deps ...string) conflux.Component {
		return conflux.Component{Name: name, DependsOn: deps}
	}
	tests := []struct {
		name  string
		comps []conflux.Component
		want  []string // substrings of the errors, in order; empty = valid
	}{
		{"valid chain", []conflux.Component{c("a"), c("b", "a"), c("c", "a", "b")}, nil},
		{"unknown dependency", []conflux.Component{c("a", "ghost")}, []string{`spec.components[0].dependsOn[0]: Not found: "ghost"`}},
		{"two-cycle", []conflux.Component{c("a", "b"), c("b", "a")}, []string{"dependsOn has a cycle: a -> b -> a"}},
		{"three-cycle behind a root", []conflux.Component{c("r"), c("x", "r", "z"), c("y", "x"), c("z", "y")},
			[]string{"dependsOn has a cycle: x -> z -> y -> x"}},
		{"unknown colocate", []conflux.Component{{Name: "a", Placement: &conflux.Placement{ColocateWith: []string{"b"}}}},
			[]string{`spec.components[0].placement.colocateWith[0]: Not found: "b"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			errs := ValidateWorkflowGraph(&conflux.WorkflowSpec{Components: tt.comps})
			g.Expect(errs).To(HaveLen(len(tt.want)), "%v", errs)
			for i, w := range tt.want {
				g.Expect(errs[i].Error()).To(ContainSubstring(w))
			}
		})
	}
}

func TestPodInjectorDefault(t *testing.T) {
	g := NewWithT(t)
	inj := &PodInjector{Image: "confluxd:x"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{conflux.ChannelsAnnotation: "a,b"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
	g.Expect(inj.Default(context.Background(), pod)).To(Succeed())
	g.Expect(pod.Spec.InitContainers).To(HaveLen(1))
	g.Expect(strings.Join(pod.Spec.InitContainers[0].Args, " ")).To(ContainSubstring("--channels=a,b"))
	g.Expect(inj.Default(context.Background(), pod)).To(Succeed())
	g.Expect(pod.Spec.InitContainers).To(HaveLen(1), "never injected twice")
	g.Expect(sidecar.Find(&pod.Spec).Image).To(Equal("confluxd:x"))

	plain := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
	g.Expect(inj.Default(context.Background(), plain)).To(Succeed())
	g.Expect(plain.Spec.InitContainers).To(BeEmpty())
}
