package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	conflux "conflux.dev/operator/api/v1alpha1"
)

// TestCELValidationRejectsInvalidObjects checks the x-kubernetes-validations of the CRDs,
// and the Workflow validating webhook, against a real API server, by message.
func TestCELValidationRejectsInvalidObjects(t *testing.T) {
	ns := newNamespace(t)
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns} }
	pod := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	tests := []struct {
		name string
		obj  client.Object
		msg  string
	}{
		{"pipe without space", &conflux.Channel{ObjectMeta: meta("c1"), Spec: conflux.ChannelSpec{Kind: conflux.ChannelKindPipe}},
			"a pipe channel needs spec.space"},
		{"fsync without durable", &conflux.Channel{ObjectMeta: meta("c2"), Spec: conflux.ChannelSpec{Kind: conflux.ChannelKindPipe, Space: "s",
			Persistence: &conflux.Persistence{Mode: conflux.PersistenceCache, Fsync: "every-segment"}}},
			"fsync is only allowed with mode durable"},
		{"persistence without space", &conflux.Channel{ObjectMeta: meta("c3"), Spec: conflux.ChannelSpec{Kind: conflux.ChannelKindEvents,
			Persistence: &conflux.Persistence{Mode: conflux.PersistenceDurable}}},
			"persistence cache or durable needs spec.space"},
		{"bad field type", &conflux.Channel{ObjectMeta: meta("c4"), Spec: conflux.ChannelSpec{Kind: conflux.ChannelKindEvents,
			Format: &conflux.ChannelFormat{Name: "p", Fields: []conflux.FormatField{{Name: "x", Type: "double[x]"}}}}},
			"type must be a scalar"},
		{"unknown kind", &conflux.Channel{ObjectMeta: meta("c5"), Spec: conflux.ChannelSpec{Kind: "stream"}},
			`Unsupported value: "stream"`},
		{"exposure without sni", &conflux.Space{ObjectMeta: meta("s1"), Spec: conflux.SpaceSpec{
			Storage: conflux.SpaceStorage{Size: resource.MustParse("1Gi")}, Exposure: &conflux.SpaceExposure{Enabled: true}}},
			"exposure.sniHost is required when exposure.enabled is true"},
		{"empty retention", &conflux.Space{ObjectMeta: meta("s2"), Spec: conflux.SpaceSpec{
			Storage: conflux.SpaceStorage{Size: resource.MustParse("1Gi"), Retention: &conflux.Retention{}}}},
			"retention needs maxBytes or maxAge"},
		{"dpdk without hugepages", &conflux.Fabric{ObjectMeta: metav1.ObjectMeta{Name: "f1"}, Spec: conflux.FabricSpec{
			Kind: conflux.FabricDPDK, NodeSelector: map[string]string{"a": "b"}}},
			"a dpdk fabric needs transport.hugepages"},
		{"ucxTLS on dpdk", &conflux.Fabric{ObjectMeta: metav1.ObjectMeta{Name: "f2"}, Spec: conflux.FabricSpec{
			Kind: conflux.FabricRDMA, NodeSelector: map[string]string{"a": "b"}, Transport: &conflux.FabricTransport{DPDKArgs: []string{"-l"}}}},
			"transport.dpdkArgs is only allowed with kind dpdk"},
		{"self dependency", &conflux.Workflow{ObjectMeta: meta("w1"), Spec: conflux.WorkflowSpec{Components: []conflux.Component{
			{Name: "a", Template: pod, DependsOn: []string{"a"}}}}},
			"a component cannot depend on itself"},
		// What CEL cannot say, the validating webhook does.
		{"dependsOn cycle (webhook)", &conflux.Workflow{ObjectMeta: meta("w2"), Spec: conflux.WorkflowSpec{Components: []conflux.Component{
			{Name: "a", Template: pod, DependsOn: []string{"b"}}, {Name: "b", Template: pod, DependsOn: []string{"a"}}}}},
			"dependsOn has a cycle: a -> b -> a"},
		{"unknown component (webhook)", &conflux.Workflow{ObjectMeta: meta("w3"), Spec: conflux.WorkflowSpec{Components: []conflux.Component{
			{Name: "a", Template: pod, DependsOn: []string{"ghost"}}}}},
			`spec.components[0].dependsOn[0]: Not found: "ghost"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := k8sClient.Create(context.Background(), tt.obj)
			g.Expect(err).To(HaveOccurred())
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tt.msg))
		})
	}
}

func TestCELValidationAcceptsValidAndGuardsUpdates(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	ch := &conflux.Channel{ObjectMeta: metav1.ObjectMeta{Name: "particles", Namespace: ns}, Spec: conflux.ChannelSpec{
		Kind: conflux.ChannelKindPipe, Space: "s",
		Persistence: &conflux.Persistence{Mode: conflux.PersistenceDurable, Fsync: "interval"},
		Format: &conflux.ChannelFormat{Name: "particle", Fields: []conflux.FormatField{
			{Name: "id", Type: "int64"}, {Name: "pos", Type: "double[3]"}, {Name: "samples", Type: "float[n]"}, {Name: "tag", Type: "string"}}},
	}}
	g.Expect(k8sClient.Create(ctx, ch)).To(Succeed())

	g.Eventually(func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(ch), ch); err != nil {
			return err
		}
		ch.Spec.Kind = conflux.ChannelKindEvents
		return k8sClient.Update(ctx, ch)
	}, timeout, interval).Should(MatchError(ContainSubstring("spec.kind is immutable")))

	sp := newSpace(ns, "s")
	g.Expect(k8sClient.Create(ctx, sp)).To(Succeed())
	g.Eventually(func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(sp), sp); err != nil {
			return err
		}
		sp.Spec.Storage.Size = resource.MustParse("2Gi")
		return k8sClient.Update(ctx, sp)
	}, timeout, interval).Should(MatchError(ContainSubstring("storage.size is immutable")))
}
