package chart

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// find returns the rendered object of that kind and name, failing the test when absent.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s/%s in %v", kind, name, kinds(objs))
	return nil
}

func field(g *WithT, o *unstructured.Unstructured, path ...string) any {
	v, ok, err := unstructured.NestedFieldNoCopy(o.Object, path...)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue(), "%s/%s has no %v", o.GetKind(), o.GetName(), path)
	return v
}

// Every value platform teams set (values-all.yaml) reaches the rendered objects, which
// TestAllOptionsRenderValidObjects also applies to the API server.
func TestPlatformValuesReachTheObjects(t *testing.T) {
	g := NewWithT(t)
	objs, err := render(t, "-f", "values-all.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	dep := find(t, objs, "Deployment", "conflux")
	pod := []string{"spec", "template", "spec"}
	at := func(p ...string) any { return field(g, dep, append(append([]string{}, pod...), p...)...) }
	g.Expect(at("imagePullSecrets")).To(Equal([]any{map[string]any{"name": "regcred"}}))
	g.Expect(at("priorityClassName")).To(Equal("system-cluster-critical"))
	g.Expect(at("securityContext")).To(HaveKeyWithValue("fsGroup", BeNumerically("==", 65532)))
	g.Expect(at("topologySpreadConstraints")).To(HaveLen(1))
	c := at("containers").([]any)[0].(map[string]any)
	g.Expect(c["image"]).To(Equal("conflux/operator@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"))
	g.Expect(c["args"]).To(ContainElements("--zap-devel=false",
		"--confluxd-image=conflux/confluxd@sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210",
		"--pod-image-pull-secrets=confluxd-pull", "--sidecar-requests=cpu=100m,memory=64Mi", "--sidecar-limits=cpu=1,memory=256Mi"))
	g.Expect(c["env"]).To(ContainElement(map[string]any{"name": "GOMAXPROCS", "value": "2"}))

	pdb := find(t, objs, "PodDisruptionBudget", "conflux")
	g.Expect(field(g, pdb, "spec", "maxUnavailable")).To(BeNumerically("==", 1))
	g.Expect(field(g, pdb, "spec", "selector", "matchLabels")).To(Equal(field(g, dep, "spec", "selector", "matchLabels")))

	sm := find(t, objs, "ServiceMonitor", "conflux")
	g.Expect(sm.GetLabels()).To(HaveKeyWithValue("release", "prometheus"))
	g.Expect(field(g, sm, "spec", "endpoints")).To(Equal([]any{map[string]any{"port": "metrics", "path": "/metrics", "interval": "15s",
		"scheme": "https", "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
		"tlsConfig": map[string]any{"insecureSkipVerify": true}}}))
	// It selects the Service that has the metrics port, and only that one.
	for _, o := range objs {
		if o.GetKind() != "Service" {
			continue
		}
		sel := field(g, sm, "spec", "selector", "matchLabels").(map[string]any)
		matches := true
		for k, v := range sel {
			matches = matches && o.GetLabels()[k] == v
		}
		g.Expect(matches).To(Equal(o.GetName() == "conflux"), "Service %s", o.GetName())
	}

	mwc := find(t, objs, "MutatingWebhookConfiguration", "conflux-mutating")
	hook := field(g, mwc, "webhooks").([]any)[0].(map[string]any)
	g.Expect(hook["matchConditions"].([]any)[0].(map[string]any)["expression"]).To(
		And(ContainSubstring("'conflux.dev/channels' in object.metadata.annotations"),
			ContainSubstring(`"example.com/conflux" in object.metadata.labels`)))
}

// The defaults: tag-based images, no pull secrets, PDB or ServiceMonitor, and the injection
// webhook leaves kube-system and the release namespace alone.
func TestPlatformValuesDefaults(t *testing.T) {
	g := NewWithT(t)
	objs, err := render(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kinds(objs)).NotTo(ContainElement(HavePrefix("PodDisruptionBudget/")))
	g.Expect(kinds(objs)).NotTo(ContainElement(HavePrefix("ServiceMonitor/")))
	dep := find(t, objs, "Deployment", "conflux")
	spec := field(g, dep, "spec", "template", "spec").(map[string]any)
	g.Expect(spec).NotTo(HaveKey("imagePullSecrets"))
	g.Expect(spec).NotTo(HaveKey("priorityClassName"))
	g.Expect(spec["securityContext"]).To(HaveKeyWithValue("runAsNonRoot", true))
	g.Expect(spec["containers"].([]any)[0].(map[string]any)["image"]).To(MatchRegexp(`^conflux/operator:[^@]+$`))
	mwc := find(t, objs, "MutatingWebhookConfiguration", "conflux-mutating")
	hook := field(g, mwc, "webhooks").([]any)[0].(map[string]any)
	g.Expect(hook["namespaceSelector"]).To(Equal(map[string]any{"matchExpressions": []any{map[string]any{
		"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": []any{"kube-system", namespace}}}}))
	g.Expect(hook["matchConditions"].([]any)[0].(map[string]any)["expression"]).To(ContainSubstring(`"conflux.dev/inject" in object.metadata.labels`))

	// A PDB can be asked for with minAvailable.
	objs, err = render(t, "--set", "operator.podDisruptionBudget.enabled=true", "--set", "operator.replicas=2")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(field(g, find(t, objs, "PodDisruptionBudget", "conflux"), "spec", "minAvailable")).To(BeNumerically("==", 1))
}

// The schema refuses what would not work, with a message saying why.
func TestPlatformValuesSchemaRefusals(t *testing.T) {
	g := NewWithT(t)
	_, err := render(t, "--set", "operator.replicas=2", "--set", "operator.leaderElection=false")
	g.Expect(err).To(MatchError(ContainSubstring("/operator/leaderElection")))
	_, err = render(t, "--set", "operator.replicas=1", "--set", "operator.leaderElection=false")
	g.Expect(err).NotTo(HaveOccurred(), "one replica may run without leader election")
	for _, bad := range [][]string{
		{"--set", "operator.image.digest=latest"},
		{"--set", "imagePullSecrets[0].nome=x"},
		{"--set", "operator.extraArgs[0]="},
		{"--set", "serviceMonitor.interval=soon"},
		{"--set", "operator.podDisruptionBudget.bogus=1"},
		{"--set", "webhook.podInjection.label=not a label"},
	} {
		_, err := render(t, bad...)
		g.Expect(err).To(HaveOccurred(), "%v", bad)
	}
}
