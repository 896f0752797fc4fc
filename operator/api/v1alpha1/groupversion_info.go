// Package v1alpha1 contains the v1alpha1 API of the conflux.dev group: Space, Channel,
// Workflow and Fabric.
// +kubebuilder:object:generate=true
// +groupName=conflux.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "conflux.dev", Version: "v1alpha1"}

	// SchemeBuilder adds the Go types to the GroupVersionKind scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types in this group-version to the given scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
