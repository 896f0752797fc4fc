package chart

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"conflux.dev/operator/internal/sidecar"
)

// operatorArgs are the manager's arguments in the chart rendered with set.
func operatorArgs(t *testing.T, g Gomega, set ...string) []string {
	t.Helper()
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

// argValue is the value of --name= in args, or "".
func argValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// confluxd.imagePullSecrets and confluxd.sidecar.resources reach the operator as flags it
// accepts; the operator's own imagePullSecrets stay on its pods only; the schema refuses
// what the operator would refuse.
func TestPodValues(t *testing.T) {
	g := NewWithT(t)
	args := operatorArgs(t, g)
	g.Expect(argValue(args, "pod-image-pull-secrets")).To(BeEmpty())
	g.Expect(argValue(args, "sidecar-requests")).To(Equal("cpu=50m,memory=64Mi"), "the operator's default, written out")
	g.Expect(argValue(args, "sidecar-limits")).To(BeEmpty())
	res, err := sidecar.ResourcesFromFlags(argValue(args, "sidecar-requests"), argValue(args, "sidecar-limits"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Requests).To(Equal(sidecar.DefaultResources().Requests))

	args = operatorArgs(t, g, "--set", "confluxd.imagePullSecrets[0].name=regcred", "--set", "confluxd.imagePullSecrets[1].name=mirror",
		"--set", "confluxd.sidecar.resources.limits.cpu=0.5", "--set", "confluxd.sidecar.resources.limits.memory=128Mi",
		"--set", "imagePullSecrets[0].name=operator-only")
	g.Expect(argValue(args, "pod-image-pull-secrets")).To(Equal("regcred,mirror"))
	g.Expect(argValue(args, "sidecar-limits")).To(Equal("cpu=0.5,memory=128Mi"))
	res, err = sidecar.ResourcesFromFlags(argValue(args, "sidecar-requests"), argValue(args, "sidecar-limits"))
	g.Expect(err).NotTo(HaveOccurred(), "the operator accepts what the chart renders")
	g.Expect(res.Limits.Cpu().MilliValue()).To(Equal(int64(500)))

	for _, bad := range []string{"confluxd.sidecar.resources.limits.cpu=lots", "confluxd.sidecar.resources.limits.cpu=-1",
		"confluxd.imagePullSecrets[0].name=Not_A_Name", "confluxd.sidecar.resources.other=1"} {
		_, err := render(t, "--set", bad)
		g.Expect(err).To(HaveOccurred(), bad)
	}
}
