package chart

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"conflux.dev/operator/internal/controller"
)

// The operator's concurrency, API rate limit and unlink timeout come from the values, and
// the schema refuses values the operator would refuse.
func TestOperatorConcurrencyValues(t *testing.T) {
	g := NewWithT(t)
	args := func(set ...string) []string {
		objs, err := render(t, set...)
		g.Expect(err).NotTo(HaveOccurred())
		for _, o := range objs {
			if o.GetKind() == "Deployment" && o.GetName() == "conflux" {
				cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
				var out []string
				for _, a := range cs[0].(map[string]any)["args"].([]any) {
					out = append(out, a.(string))
				}
				return out
			}
		}
		t.Fatalf("no operator Deployment in %v", kinds(objs))
		return nil
	}
	g.Expect(args()).To(ContainElements("--max-concurrent-reconciles=4", "--kube-api-qps=300", "--kube-api-burst=600"))
	g.Expect(args("--set", "operator.maxConcurrentReconciles=16", "--set", "operator.kubeAPIQPS=50",
		"--set", "operator.kubeAPIBurst=80")).To(ContainElements("--max-concurrent-reconciles=16",
		"--kube-api-qps=50", "--kube-api-burst=80"))
	g.Expect(args()).To(ContainElement("--channel-unlink-timeout="+controller.DefaultUnlinkTimeout.String()),
		"the operator's default")
	g.Expect(args("--set", "operator.channelUnlinkTimeout=1m30s")).To(ContainElement("--channel-unlink-timeout=1m30s"))
	for _, bad := range []string{"operator.maxConcurrentReconciles=0", "operator.kubeAPIQPS=0", "operator.kubeAPIBurst=0",
		"operator.channelUnlinkTimeout=0s", "operator.channelUnlinkTimeout=30"} {
		_, err := render(t, "--set", bad)
		g.Expect(err).To(HaveOccurred(), bad)
	}
}
