package controller

import corev1 "k8s.io/api/core/v1"

// PodOptions is what the operator adds to every pod it creates (Space servers, Workflow
// components) or injects the sidecar into.
type PodOptions struct {
	// ImagePullSecrets (Secret names, in the pod's namespace) added to each pod after the
	// template's own, without duplicates: they pull the confluxd image.
	ImagePullSecrets []string
	// SidecarResources of the confluxd sidecar; nil: sidecar.DefaultResources. A pod that
	// is Guaranteed without the sidecar gets the sidecar with requests equal to limits.
	SidecarResources *corev1.ResourceRequirements
}
