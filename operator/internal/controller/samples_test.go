package controller

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	conflux "conflux.dev/operator/api/v1alpha1"
)

// samplesDir holds one sample manifest per kind (what a first `kubectl apply` can start from).
var samplesDir = filepath.Join("..", "..", "config", "samples")

// Every sample is accepted by the CRDs' schemas (strictly) and CEL rules and by the
// webhooks, and together they cover every kind.
func TestSamplesAreAccepted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	files, err := filepath.Glob(filepath.Join(samplesDir, "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).NotTo(BeEmpty())
	kinds := map[string]int{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			err := dec.Decode(&u.Object)
			if errors.Is(err, io.EOF) {
				break
			}
			g.Expect(err).NotTo(HaveOccurred(), f)
			if len(u.Object) == 0 {
				continue
			}
			g.Expect(u.GetAPIVersion()).To(Equal(conflux.GroupVersion.String()), f)
			if u.GetKind() != "Fabric" { // the only cluster-scoped kind
				u.SetNamespace(ns)
			} else {
				u.SetName(u.GetName() + "-" + ns) // no clash with other tests' Fabrics
				t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), u) })
			}
			// Strict, as kubectl: an unknown or duplicated field is an error, not a warning
			g.Expect(k8sClient.Create(ctx, u, client.FieldValidation("Strict"))).To(Succeed(), "%s: %s/%s", f, u.GetKind(), u.GetName())
			kinds[u.GetKind()]++
		}
	}
	g.Expect(kinds).To(HaveKey("Space"))
	g.Expect(kinds).To(HaveKey("Channel"))
	g.Expect(kinds).To(HaveKey("Workflow"))
	g.Expect(kinds).To(HaveKey("Fabric"))
}

// kubectl finds every kind by a short name (discovery serves them from the CRDs).
func TestEveryKindHasAShortName(t *testing.T) {
	g := NewWithT(t)
	dc, err := discovery.NewDiscoveryClientForConfig(testEnv.Config)
	g.Expect(err).NotTo(HaveOccurred())
	list, err := dc.ServerResourcesForGroupVersion(conflux.GroupVersion.String())
	g.Expect(err).NotTo(HaveOccurred())
	short := map[string][]string{}
	for _, r := range list.APIResources {
		if !strings.Contains(r.Name, "/") { // not a subresource
			short[r.Name] = r.ShortNames
		}
	}
	g.Expect(short).To(Equal(map[string][]string{"spaces": {"sp"}, "channels": {"chan"}, "workflows": {"wf"}, "fabrics": {"fab"}}))
}
