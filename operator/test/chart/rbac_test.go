package chart

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	conflux "conflux.dev/operator/api/v1alpha1"
	"conflux.dev/operator/internal/controller"
	"conflux.dev/operator/internal/edge"
	"conflux.dev/operator/internal/spaceclient"
	cxwebhook "conflux.dev/operator/internal/webhook"
)

// The chart's RBAC is enough for the operator, and no more than the API server enforces:
// the chart's ServiceAccount, ClusterRole, Role and bindings are created for real, then the
// webhook certificate setup and a manager with every reconciler, leader election and the
// edge run as that ServiceAccount (impersonated) and do their whole job. The API server
// runs the OwnerReferencesPermissionEnforcement admission plugin (as OpenShift and many
// hardened clusters do): owned objects that block their owner's deletion need update on
// the owner's finalizers.
func TestOperatorWorksWithTheChartsRBAC(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	objs, err := render(t)
	g.Expect(err).NotTo(HaveOccurred())
	apply(t, g, objs)     // CRDs for real, the rest validated
	objs, err = render(t) // fresh copies: apply filled in server fields
	g.Expect(err).NotTo(HaveOccurred())
	var webhookConfigs []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			g.Expect(k8sClient.Patch(ctx, o, client.Apply, client.FieldOwner("rbac-test"), client.ForceOwnership)).To(Succeed(), o.GetName())
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			webhookConfigs = append(webhookConfigs, o)
		}
	}

	scheme := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	g.Expect(conflux.AddToScheme(scheme)).To(Succeed())
	sa := rest.CopyConfig(restCfg)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":conflux",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
	saClient, err := client.New(sa, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	admin, err := client.New(restCfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())

	// the API server enforces RBAC (otherwise this test proves nothing)
	err = saClient.List(ctx, &corev1.SecretList{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "listing every Secret as the operator must be forbidden, got %v", err)
	// and OwnerReferencesPermissionEnforcement: an owner reference that blocks its owner's
	// deletion needs update on the owner's finalizers, which the operator has for the kinds
	// it owns objects with (Space, Workflow) and not for the others (Channel)
	g.Eventually(func(g Gomega) {
		g.Expect(saClient.Create(ctx, ownedService("Space"), client.DryRunAll)).To(Succeed())
		err := saClient.Create(ctx, ownedService("Channel"), client.DryRunAll)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("cannot set blockOwnerDeletion"))
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed(), "the API server enforces blockOwnerDeletion")

	// webhook certificates: the Secret and the caBundle of the chart's webhook configurations
	for _, o := range webhookConfigs {
		g.Expect(k8sClient.Patch(ctx, o, client.Apply, client.FieldOwner("rbac-test"), client.ForceOwnership)).To(Succeed())
	}
	g.Expect(cxwebhook.EnsureCerts(ctx, saClient, cxwebhook.CertOptions{Namespace: namespace, SecretName: "conflux-webhook-certs",
		ServiceName: "conflux-webhook", CertDir: t.TempDir(), MutatingConfigs: []string{"conflux-mutating"},
		ValidatingConfigs: []string{"conflux-validating"}})).To(Succeed())
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	g.Expect(admin.Get(ctx, client.ObjectKey{Name: "conflux-mutating"}, &mwc)).To(Succeed())
	g.Expect(mwc.Webhooks[0].ClientConfig.CABundle).NotTo(BeEmpty(), "caBundle patched")
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	g.Expect(admin.Get(ctx, client.ObjectKey{Name: "conflux-validating"}, &vwc)).To(Succeed())
	g.Expect(vwc.Webhooks[0].ClientConfig.CABundle).NotTo(BeEmpty(), "caBundle patched")
	for _, o := range webhookConfigs { // nothing serves them here: remove before creating Workflows
		g.Expect(k8sClient.Delete(ctx, o)).To(Succeed())
	}

	mgr, err := ctrl.NewManager(sa, ctrl.Options{
		Scheme: scheme, Cache: controller.CacheOptions(), Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0", LeaderElection: true, LeaderElectionID: "conflux.conflux.dev",
		LeaderElectionNamespace: namespace, LeaderElectionReleaseOnCancel: true,
	})
	g.Expect(err).NotTo(HaveOccurred())
	edgeSrv := &edge.Server{Addr: "127.0.0.1:0", NodeID: "rbac", Options: edge.Options{ListenPort: 10000}}
	g.Expect(controller.SetupAll(ctx, mgr, controller.Config{Image: "conflux/confluxd:test", Spaces: spaceclient.NewFake(),
		StatsInterval: time.Second, Edge: edgeSrv})).To(Succeed())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()

	// a user's objects, created as admin
	ns := "rbac-user"
	g.Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Expect(admin.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"fabric": "ib"}}})).To(Succeed())
	g.Expect(admin.Create(ctx, &conflux.Fabric{ObjectMeta: metav1.ObjectMeta{Name: "ib"}, Spec: conflux.FabricSpec{
		Kind: conflux.FabricRDMA, NodeSelector: map[string]string{"fabric": "ib"}}})).To(Succeed())
	g.Expect(admin.Create(ctx, &conflux.Space{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns}, Spec: conflux.SpaceSpec{
		Storage:          conflux.SpaceStorage{Size: resource.MustParse("1Gi")},
		Exposure:         &conflux.SpaceExposure{Enabled: true, SNIHost: "s.rbac.test"},
		DisruptionBudget: &conflux.SpaceDisruptionBudget{MaxUnavailable: 1}}})).To(Succeed())
	for _, c := range []*conflux.Channel{
		{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns}, Spec: conflux.ChannelSpec{Kind: conflux.ChannelKindPipe, Space: "s"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "lost", Namespace: ns}, Spec: conflux.ChannelSpec{Kind: conflux.ChannelKindPipe, Space: "nope"}},
	} {
		g.Expect(admin.Create(ctx, c)).To(Succeed())
	}
	g.Expect(admin.Create(ctx, &conflux.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "wf", Namespace: ns}, Spec: conflux.WorkflowSpec{
		Components: []conflux.Component{{Name: "ana", Inputs: []string{"c"},
			DisruptionBudget: &conflux.ComponentDisruptionBudget{MinAvailable: ptr.To(intstr.FromInt32(1))},
			Template:         corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:1"}}}}},
			{Name: "db", Workload: conflux.WorkloadStatefulSet,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:1"}}}}},
			{Name: "step", Workload: conflux.WorkloadJob,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:1"}}}}}}}})).To(Succeed())

	const wait = 30 * time.Second
	g.Eventually(func(g Gomega) {
		var lease coordinationv1.Lease
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "conflux.conflux.dev"}, &lease)).To(Succeed())
		g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
	}, wait, 100*time.Millisecond).Should(Succeed(), "leader election")
	g.Eventually(func(g Gomega) {
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s"}, &corev1.Service{})).To(Succeed())
		var sp conflux.Space
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s"}, &sp)).To(Succeed())
		g.Expect(sp.Status.Endpoint).NotTo(BeEmpty())
		var ch conflux.Channel
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c"}, &ch)).To(Succeed())
		g.Expect(ch.Finalizers).To(ContainElement(conflux.FinalizerName))
		g.Expect(ch.Status.ObservedGeneration).To(Equal(ch.Generation))
		var dep appsv1.Deployment
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wf-ana"}, &dep)).To(Succeed())
		g.Expect(blocksOwnerDeletion(dep.OwnerReferences, "Workflow")).To(BeTrue(), "the workload blocks its Workflow's deletion")
		var job batchv1.Job
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wf-step"}, &job)).To(Succeed())
		g.Expect(blocksOwnerDeletion(job.OwnerReferences, "Workflow")).To(BeTrue(), "the Job blocks its Workflow's deletion")
		var headless corev1.Service
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wf-db"}, &headless)).To(Succeed())
		g.Expect(blocksOwnerDeletion(headless.OwnerReferences, "Workflow")).To(BeTrue(), "the headless Service blocks its Workflow's deletion")
		var sts appsv1.StatefulSet
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s"}, &sts)).To(Succeed())
		g.Expect(blocksOwnerDeletion(sts.OwnerReferences, "Space")).To(BeTrue(), "the space server blocks its Space's deletion")
		var pdb policyv1.PodDisruptionBudget
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s"}, &pdb)).To(Succeed())
		g.Expect(blocksOwnerDeletion(pdb.OwnerReferences, "Space")).To(BeTrue(), "the Space's disruption budget")
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wf-ana"}, &pdb)).To(Succeed())
		g.Expect(blocksOwnerDeletion(pdb.OwnerReferences, "Workflow")).To(BeTrue(), "the component's disruption budget")
		var fab conflux.Fabric
		g.Expect(admin.Get(ctx, client.ObjectKey{Name: "ib"}, &fab)).To(Succeed())
		g.Expect(fab.Status.MatchingNodes).To(Equal(int32(1)))
		g.Expect(fab.Status.ReadyNodes).To(Equal(int32(1)), "a Fabric without a device resource is ready on every matching node")
		g.Expect(edgeSrv.Current().Exposed).To(HaveLen(1))
	}, wait, 100*time.Millisecond).Should(Succeed(), "reconciled as the operator's ServiceAccount")
	g.Eventually(func(g Gomega) {
		var evs corev1.EventList
		g.Expect(admin.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
		reasons := map[string]bool{}
		for _, e := range evs.Items {
			reasons[e.InvolvedObject.Name+"/"+e.Reason] = true
		}
		g.Expect(reasons).To(HaveKey("lost/" + conflux.ReasonSpaceNotFound))
	}, wait, 100*time.Millisecond).Should(Succeed(), "Events in a user namespace")

	// a disruption budget no longer asked for is deleted
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error { // the operator writes the status meanwhile
		var wf conflux.Workflow
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wf"}, &wf); err != nil {
			return err
		}
		wf.Spec.Components[0].DisruptionBudget = nil
		return admin.Update(ctx, &wf)
	})).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wf-ana"}, &policyv1.PodDisruptionBudget{}))
	}, wait, 100*time.Millisecond).Should(BeTrue(), "the component's disruption budget is deleted")

	// finalizers: the Channel is unlinked and released, then the Space drains and goes
	g.Expect(admin.Delete(ctx, &conflux.Channel{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns}})).To(Succeed())
	g.Expect(admin.Delete(ctx, &conflux.Channel{ObjectMeta: metav1.ObjectMeta{Name: "lost", Namespace: ns}})).To(Succeed())
	g.Expect(admin.Delete(ctx, &conflux.Space{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns}})).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s"}, &conflux.Space{}))
	}, wait, 100*time.Millisecond).Should(BeTrue(), "the Space's finalizer ran")
}

// ownedService is a Service in the operator's namespace whose owner reference, to an object
// of kind, blocks its owner's deletion.
func ownedService(kind string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "owned-by-" + strings.ToLower(kind), Namespace: namespace,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: conflux.GroupVersion.String(), Kind: kind, Name: "x",
			UID: "00000000-0000-0000-0000-000000000001", BlockOwnerDeletion: ptr.To(true)}}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
}

func blocksOwnerDeletion(refs []metav1.OwnerReference, kind string) bool {
	for _, r := range refs {
		if r.Kind == kind && r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
			return true
		}
	}
	return false
}
