package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Release is a fresh install of the chart that one test owns: its operator namespace, its
// application namespace (the only one the pod injector serves) and the static volume for
// its Space.
type Release struct {
	Name   string // conflux-e2e-<id>
	OpNs   string // <Name>-system: the operator
	AppNs  string // <Name>: the test's Spaces, Channels, Workflows
	Volume LocalVolume
	Helm   *Helm
}

// InstallRelease installs charts/conflux as a fresh release, as HelmInstallSpec does
// (images pinned by tag with pullPolicy Never, crds.keep=false, pod injection limited to
// the application namespace), and makes the local volume for the Space named space on
// spaceNode. It takes the chart lock and first removes what interrupted runs left; when
// the test ends it removes everything (cleanupRelease) and releases the lock. It fails
// the test when the operator does not become Ready.
func InstallRelease(ctx context.Context, t *testing.T, c *Cluster, images ConfluxImages, space, spaceNode string) *Release {
	t.Helper()
	return installRelease(ctx, t, c, images, filepath.Join(c.Root, "charts", "conflux"), space, spaceNode)
}

// installRelease is InstallRelease with the chart directory given (HelmInstallSpec's input
// may name another).
func installRelease(ctx context.Context, t *testing.T, c *Cluster, images ConfluxImages, chart, space, spaceNode string) *Release {
	t.Helper()
	helm, err := c.Helm()
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := lockFile(ctx, filepath.Join(filepath.Dir(c.Kubeconfig), c.Name+".conflux-chart.lock"))
	if err != nil {
		t.Fatalf("lock: %v", err)
	}
	t.Cleanup(unlock) // after cleanupRelease (cleanups run last-registered first)
	name := "conflux-e2e-" + randomHex(t, 4)
	r := &Release{Name: name, OpNs: name + "-system", AppNs: name, Helm: helm,
		Volume: LocalVolume{Name: name, Node: spaceNode, Path: "/var/lib/" + name, Size: "64Mi",
			Claim: name + "/data-" + space + "-0"}}
	removeInterruptedRuns(ctx, t, c, helm)
	takeOwnership := checkCRDsFree(ctx, t, c, helm)
	for _, ns := range []string{r.OpNs, r.AppNs} {
		if _, err := c.Kubectl(ctx, nil, "create", "namespace", ns); err != nil {
			t.Fatalf("creating namespace: %v", err)
		}
	}
	t.Cleanup(func() { cleanupRelease(t, c, helm, r.Name, r.OpNs, r.AppNs, r.Volume) })
	opRepo, opTag := splitImage(images.Operator)
	dRepo, dTag := splitImage(images.Confluxd)
	args := []string{"install", name, chart, "-n", r.OpNs,
		"--set", "operator.image.repository=" + opRepo, "--set", "operator.image.tag=" + opTag,
		"--set", "operator.image.pullPolicy=Never",
		"--set", "confluxd.image.repository=" + dRepo, "--set", "confluxd.image.tag=" + dTag,
		"--set", "crds.keep=false",
		// inject only into this run's namespace: other tests' pods never wait on this webhook
		"--set-json", fmt.Sprintf(`webhook.podInjection.namespaceSelector={"matchLabels":{"kubernetes.io/metadata.name":%q}}`, r.AppNs)}
	if takeOwnership {
		args = append(args, "--take-ownership")
	}
	if out, err := helm.Run(ctx, args...); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	if _, err := c.Kubectl(ctx, nil, "-n", r.OpNs, "rollout", "status", "deployment/"+name, "--timeout=150s"); err != nil {
		t.Fatalf("operator not Ready: %v\n%s", err, c.describeApp(ctx, r.OpNs, "app.kubernetes.io/instance="+name))
	}
	if err := CreateLocalVolume(ctx, c, r.Volume); err != nil {
		t.Fatal(err)
	}
	return r
}

// Apply applies a manifest in the release's application namespace, retrying for up to 90 s
// while the webhooks do not answer yet (just after the operator turned Ready its Service
// may not have the endpoint); any other error fails the test.
func (r *Release) Apply(ctx context.Context, t *testing.T, c *Cluster, manifest string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		out, err := c.Kubectl(ctx, []byte(manifest), "-n", r.AppNs, "apply", "-f", "-")
		if err == nil {
			return
		}
		if !strings.Contains(err.Error()+out, "failed calling webhook") || time.Now().After(deadline) {
			t.Fatalf("kubectl apply: %v\n%s", err, out)
		}
		time.Sleep(2 * time.Second)
	}
}
