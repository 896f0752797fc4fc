package chart

import (
	"testing"

	. "github.com/onsi/gomega"

	"conflux.dev/operator/internal/controller"
)

// The operator's concurrency, API rate limit and unlink timeout come from the values, and
// the schema refuses values the operator would refuse.
func TestOperatorConcurrencyValues(t *testing.T) {
	g := NewWithT(t)
	args := func(set ...string) []string { return operatorArgs(t, g, set...) }
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
