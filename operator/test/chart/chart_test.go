// Package chart validates the Helm chart charts/conflux: it renders it with helm template
// and sends every object to a real API server (envtest): the CRDs are created for real, and
// everything else is server-side applied with dryRun=All and strict field validation, so
// both the Kubernetes schemas and the chart's own CRDs judge the output.
package chart

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3" // the bootstrap's typed options
	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/encoding/protojson"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

var (
	root      = filepath.Join("..", "..", "..")
	chartDir  = filepath.Join(root, "charts", "conflux")
	k8sClient client.Client
	restCfg   *rest.Config
)

const namespace = "conflux-system"

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run the tests with `make test` or `make lint-chart`")
		return 1
	}
	env := &envtest.Environment{}
	// rbac_test.go: the operator must work where owner references are checked against RBAC
	env.ControlPlane.GetAPIServer().Configure().Append("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	restCfg = cfg
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	if k8sClient, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		panic(err)
	}
	if err := k8sClient.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		panic(err)
	}
	return m.Run()
}

func helmBin(t *testing.T) string {
	t.Helper()
	h := os.Getenv("HELM")
	if h == "" {
		h = filepath.Join(root, ".cache", "bin", "helm")
	}
	if _, err := os.Stat(h); err != nil {
		t.Fatalf("helm not found at %s (set HELM): %v", h, err)
	}
	return h
}

// render runs helm template with the extra arguments and returns the objects.
func render(t *testing.T, args ...string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), append([]string{"template", "conflux", chartDir, "--namespace", namespace, "--kube-version", "1.34.0"}, args...)...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm template: %v: %s", err, stderr.String())
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(&out, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return objs, nil
}

func kinds(objs []*unstructured.Unstructured) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, o.GetKind()+"/"+o.GetName())
	}
	return ks
}

// apply creates the CRDs for real and dry-run applies everything else.
func apply(t *testing.T, g *WithT, objs []*unstructured.Unstructured) {
	ctx := context.Background()
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		err := k8sClient.Patch(ctx, o, client.Apply, client.FieldOwner("chart-test"), client.ForceOwnership)
		g.Expect(err).NotTo(HaveOccurred(), "CRD %s", o.GetName())
		g.Eventually(func(g Gomega) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: o.GetName()}, crd)).To(Succeed())
			established := false
			for _, c := range crd.Status.Conditions {
				established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
			}
			g.Expect(established).To(BeTrue())
		}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	}
	for _, o := range objs {
		// envtest has no Prometheus Operator CRDs; platform_values_test.go checks it rendered.
		if o.GetKind() == "CustomResourceDefinition" || o.GetKind() == "ServiceMonitor" {
			continue
		}
		err := k8sClient.Patch(ctx, o, client.Apply, client.DryRunAll, client.FieldOwner("chart-test"),
			client.ForceOwnership, client.FieldValidation("Strict"))
		g.Expect(err).NotTo(HaveOccurred(), "%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
	}
}

func TestDefaultValuesRenderValidObjects(t *testing.T) {
	g := NewWithT(t)
	objs, err := render(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kinds(objs)).To(ContainElements(
		"CustomResourceDefinition/spaces.conflux.dev", "CustomResourceDefinition/channels.conflux.dev",
		"CustomResourceDefinition/workflows.conflux.dev", "CustomResourceDefinition/fabrics.conflux.dev",
		"Deployment/conflux", "ClusterRole/conflux", "Role/conflux", "ServiceAccount/conflux",
		"Service/conflux-webhook", "MutatingWebhookConfiguration/conflux-mutating",
		"ValidatingWebhookConfiguration/conflux-validating", "Pod/conflux-test"))
	g.Expect(kinds(objs)).NotTo(ContainElement(HavePrefix("ConfigMap/")), "device plugin config is off by default")
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			g.Expect(o.GetAnnotations()).To(HaveKeyWithValue("helm.sh/resource-policy", "keep"))
		}
	}
	apply(t, g, objs)
}

func TestAllOptionsRenderValidObjects(t *testing.T) {
	g := NewWithT(t)
	objs, err := render(t, "-f", "values-all.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kinds(objs)).To(ContainElements("Deployment/conflux-edge", "Service/conflux-edge", "ConfigMap/sriovdp-config"))
	apply(t, g, objs)
}

func TestCRDsCanBeLeftOutAndNotKept(t *testing.T) {
	g := NewWithT(t)
	objs, err := render(t, "--set", "crds.enabled=false", "--set", "webhook.enabled=false")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kinds(objs)).NotTo(ContainElement(HavePrefix("CustomResourceDefinition/")))
	g.Expect(kinds(objs)).NotTo(ContainElement(HavePrefix("MutatingWebhookConfiguration/")))
	objs, err = render(t, "--set", "crds.keep=false")
	g.Expect(err).NotTo(HaveOccurred())
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			g.Expect(o.GetAnnotations()).NotTo(HaveKey("helm.sh/resource-policy"))
		}
	}
}

func TestValuesSchemaIsStrict(t *testing.T) {
	g := NewWithT(t)
	_, err := render(t, "--set", "operator.bogus=1")
	g.Expect(err).To(MatchError(ContainSubstring("additional properties 'bogus' not allowed")))
	_, err = render(t, "--set", "webhook.podInjection.failurePolicy=Sometimes")
	g.Expect(err).To(HaveOccurred())
}

// TestChartCRDsMatchGenerated fails when the chart's copies are stale: run `make generate`.
func TestChartCRDsMatchGenerated(t *testing.T) {
	g := NewWithT(t)
	objs, err := render(t)
	g.Expect(err).NotTo(HaveOccurred())
	rendered := map[string]any{}
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			rendered[o.GetName()] = o.Object["spec"]
		}
	}
	files, err := filepath.Glob(filepath.Join(root, "crds", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(HaveLen(4))
	for _, f := range files {
		b, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		u := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal([]byte(strings.TrimPrefix(string(b), "---\n")), &u.Object)).To(Succeed())
		g.Expect(rendered).To(HaveKeyWithValue(u.GetName(), u.Object["spec"]), "chart copy of %s is stale: run make -C operator generate", f)
	}
}

// The edge's bootstrap must point Envoy at the operator's xDS port under the node id the
// operator serves, and be a valid Envoy bootstrap (the v3 Bootstrap message and its rules).
func TestEdgeBootstrapPointsAtTheOperatorsXDS(t *testing.T) {
	g := NewWithT(t)
	objs, err := render(t, "--set", "edge.enabled=true", "--set", "edge.xdsPort=18555",
		"--set", "edge.nodeID=edge-a", "--set", "edge.clusterDomain=example.test", "--set", "edge.listenPort=8443")
	g.Expect(err).NotTo(HaveOccurred())
	byName := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		byName[o.GetKind()+"/"+o.GetName()] = o
	}
	cm := byName["ConfigMap/conflux-edge-bootstrap"]
	g.Expect(cm).NotTo(BeNil(), "rendered: %v", kinds(objs))
	raw, _, _ := unstructured.NestedString(cm.Object, "data", "bootstrap.yaml")
	js, err := yaml.YAMLToJSON([]byte(raw))
	g.Expect(err).NotTo(HaveOccurred())
	var boot bootstrapv3.Bootstrap
	g.Expect(protojson.Unmarshal(js, &boot)).To(Succeed())
	g.Expect(boot.ValidateAll()).To(Succeed())
	g.Expect(boot.GetNode().GetId()).To(Equal("edge-a"))
	xds := boot.GetStaticResources().GetClusters()[0]
	sa := xds.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	g.Expect(sa.GetAddress()).To(Equal("conflux." + namespace + ".svc.example.test"))
	g.Expect(sa.GetPortValue()).To(Equal(uint32(18555)))
	g.Expect(boot.GetDynamicResources().GetAdsConfig().GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName()).To(Equal(xds.GetName()))

	// the operator serves xDS there, for that node, and its Service exposes the port
	var args []string
	cs, _, _ := unstructured.NestedSlice(byName["Deployment/conflux"].Object, "spec", "template", "spec", "containers")
	for _, a := range cs[0].(map[string]any)["args"].([]any) {
		args = append(args, a.(string))
	}
	g.Expect(args).To(ContainElements("--edge-xds-bind-address=:18555", "--edge-node-id=edge-a",
		"--edge-listen-port=8443", "--cluster-domain=example.test"))
	ports, _, _ := unstructured.NestedSlice(byName["Service/conflux"].Object, "spec", "ports")
	g.Expect(ports).To(ContainElement(HaveKeyWithValue("port", BeNumerically("==", 18555))))
	edgePorts, _, _ := unstructured.NestedSlice(byName["Deployment/conflux-edge"].Object, "spec", "template", "spec", "containers")
	g.Expect(edgePorts[0].(map[string]any)["ports"]).To(ContainElement(HaveKeyWithValue("containerPort", BeNumerically("==", 8443))))

	// without the edge, the operator serves no xDS
	objs, err = render(t)
	g.Expect(err).NotTo(HaveOccurred())
	for _, o := range objs {
		g.Expect(o.GetName()).NotTo(HavePrefix("conflux-edge"))
	}
}

// The device-plugin configuration in each plugin's own format, from the same values.
func TestDevicePluginConfigFormats(t *testing.T) {
	g := NewWithT(t)
	set := []string{"--set", "devicePlugin.enabled=true", "--set", "devicePlugin.resources[0].resourceName=hca",
		"--set", "devicePlugin.resources[0].vendors={15b3}", "--set-string", "devicePlugin.resources[0].devices={1017}",
		"--set", "devicePlugin.resources[0].pfNames={ens1f0}", "--set", "devicePlugin.resources[0].isRdma=true"}
	config := func(extra ...string) map[string]any {
		objs, err := render(t, append(set, extra...)...)
		g.Expect(err).NotTo(HaveOccurred())
		for _, o := range objs {
			if o.GetKind() == "ConfigMap" && o.GetName() == "sriovdp-config" {
				raw, _, _ := unstructured.NestedString(o.Object, "data", "config.json")
				var m map[string]any
				g.Expect(json.Unmarshal([]byte(raw), &m)).To(Succeed(), raw)
				return m
			}
		}
		t.Fatalf("no device plugin ConfigMap in %v", kinds(objs))
		return nil
	}
	sriov := config()
	g.Expect(sriov).To(HaveKey("resourceList"))
	r := sriov["resourceList"].([]any)[0].(map[string]any)
	g.Expect(r).To(HaveKeyWithValue("resourceName", "hca"))
	g.Expect(r["selectors"]).To(Equal(map[string]any{"vendors": []any{"15b3"}, "devices": []any{"1017"},
		"pfNames": []any{"ens1f0"}, "isRdma": true}))

	shared := config("--set", "devicePlugin.kind=rdmaShared", "--set", "devicePlugin.resources[0].rdmaHcaMax=64")
	g.Expect(shared).To(HaveKeyWithValue("periodicUpdateInterval", BeNumerically("==", 300)))
	r = shared["configList"].([]any)[0].(map[string]any)
	g.Expect(r).To(HaveKeyWithValue("rdmaHcaMax", BeNumerically("==", 64)))
	g.Expect(r["selectors"]).To(Equal(map[string]any{"vendors": []any{"15b3"}, "deviceIDs": []any{"1017"},
		"ifNames": []any{"ens1f0"}}))

	_, err := render(t, append(set, "--set", "devicePlugin.kind=other")...)
	g.Expect(err).To(MatchError(ContainSubstring("kind")))
}
