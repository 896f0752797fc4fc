package sidecar

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// qosResources are the resources Kubernetes judges a pod's QoS class by.
var qosResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}

// QOSClass is the QoS class Kubernetes gives a pod with spec (its rule, over the app and
// init containers): Guaranteed when every container has cpu and memory limits and its
// requests equal them (a missing request defaults to its limit), BestEffort when no
// container requests or limits cpu or memory, Burstable otherwise. Pod-level resources
// (spec.resources) are not considered.
func QOSClass(spec *corev1.PodSpec) corev1.PodQOSClass {
	any, guaranteed := false, true
	all := append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
	for i := range all {
		req, lim := effectiveRequests(all[i].Resources), all[i].Resources.Limits
		for _, name := range qosResources {
			r, hasReq := req[name]
			l, hasLim := lim[name]
			if (hasReq && !r.IsZero()) || (hasLim && !l.IsZero()) {
				any = true
			}
			if !hasLim || l.IsZero() || !hasReq || r.Cmp(l) != 0 {
				guaranteed = false
			}
		}
	}
	switch {
	case !any:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

// effectiveRequests are r's requests with a missing request set to its limit, as the API
// server defaults them.
func effectiveRequests(r corev1.ResourceRequirements) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range r.Requests {
		out[k] = v
	}
	for k, v := range r.Limits {
		if _, ok := out[k]; !ok {
			out[k] = v
		}
	}
	return out
}

// guaranteedResources turns r into requests == limits for cpu and memory (the limit when
// set, otherwise the request, otherwise the default request), so the sidecar keeps a Guaranteed pod Guaranteed. Other
// resources keep r's values.
func guaranteedResources(r corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for k, v := range r.Requests {
		out.Requests[k] = v
	}
	for k, v := range r.Limits {
		out.Limits[k] = v
	}
	for _, name := range qosResources {
		v, ok := r.Limits[name]
		if !ok || v.IsZero() {
			v, ok = r.Requests[name]
		}
		if !ok || v.IsZero() {
			v = DefaultResources().Requests[name] // not configured: the default request
		}
		out.Requests[name], out.Limits[name] = v.DeepCopy(), v.DeepCopy()
	}
	return out
}

// DefaultResources of the sidecar: what it requests when nothing is configured.
func DefaultResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("50m"),
		corev1.ResourceMemory: resource.MustParse("64Mi"),
	}}
}
