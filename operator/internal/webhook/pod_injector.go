// Package webhook holds the admission webhooks of the operator and the code that gives them
// a serving certificate without cert-manager.
package webhook

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	conflux "conflux.dev/operator/api/v1alpha1"
	"conflux.dev/operator/internal/sidecar"
)

// PodInjectorPath is where the sidecar-injection webhook is served.
const PodInjectorPath = "/mutate-v1-pod"

// +kubebuilder:webhook:path=/mutate-v1-pod,mutating=true,failurePolicy=ignore,sideEffects=None,groups="",resources=pods,verbs=create,versions=v1,name=inject.conflux.dev,admissionReviewVersions=v1,reinvocationPolicy=IfNeeded

// PodInjector adds the confluxd sidecar to pods annotated conflux.dev/channels: "a,b".
type PodInjector struct {
	// Image of confluxd.
	Image string
	// Resources of the sidecar (nil: sidecar.DefaultResources).
	Resources *corev1.ResourceRequirements
	// ImagePullSecrets (names) added to the pod, to pull Image.
	ImagePullSecrets []string
}

var _ admission.CustomDefaulter = &PodInjector{}

// Default injects the sidecar; pods without the annotation, or already injected, are left alone.
func (p *PodInjector) Default(_ context.Context, obj runtime.Object) error {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return fmt.Errorf("expected a Pod, got %T", obj)
	}
	channels := sidecar.SplitList(pod.Annotations[conflux.ChannelsAnnotation])
	if len(channels) == 0 {
		return nil
	}
	if sidecar.Inject(&pod.Spec, sidecar.Config{Image: p.Image, Channels: channels, Transport: "tcp",
		Resources: p.Resources, ImagePullSecrets: p.ImagePullSecrets}) {
		pod.Annotations[conflux.InjectedAnnotation] = "true"
	}
	return nil
}

// SetupPodInjector registers p on the manager's webhook server.
func SetupPodInjector(mgr ctrl.Manager, p *PodInjector) {
	mgr.GetWebhookServer().Register(PodInjectorPath,
		admission.WithCustomDefaulter(mgr.GetScheme(), &corev1.Pod{}, p))
}
