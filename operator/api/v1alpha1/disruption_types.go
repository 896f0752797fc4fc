package v1alpha1

import "k8s.io/apimachinery/pkg/util/intstr"

// SpaceDisruptionBudget asks for a PodDisruptionBudget over the Space's server pod.
type SpaceDisruptionBudget struct {
	// MaxUnavailable space server pods during a voluntary disruption (a node drain, an
	// eviction): 0 forbids evicting the single pod, so a drain of its node waits until
	// the budget is removed; 1 allows it (the budget then only marks the pod as managed).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1
	// +required
	MaxUnavailable int32 `json:"maxUnavailable"`
}

// ComponentDisruptionBudget asks for a PodDisruptionBudget over a component's pods; give
// exactly one of minAvailable and maxUnavailable (a number or a percentage, as policy/v1).
// +kubebuilder:validation:XValidation:rule="has(self.minAvailable) != has(self.maxUnavailable)",message="disruptionBudget: give exactly one of minAvailable and maxUnavailable"
type ComponentDisruptionBudget struct {
	// MinAvailable pods of the component during a voluntary disruption.
	// +kubebuilder:validation:XIntOrString
	// +optional
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty"`
	// MaxUnavailable pods of the component during a voluntary disruption.
	// +kubebuilder:validation:XIntOrString
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}
