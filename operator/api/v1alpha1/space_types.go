package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Space condition types.
const (
	// SpaceServerReadyCondition reports whether the space server StatefulSet has its replica ready.
	SpaceServerReadyCondition = "ServerReady"
	// SpaceServiceReadyCondition reports whether the headless Service of the space exists.
	SpaceServiceReadyCondition = "ServiceReady"
	// SpaceExposedCondition reports, for a Space with exposure enabled, whether the edge
	// routes its sniHost to it. Informational: not part of Ready.
	SpaceExposedCondition = "Exposed"
)

// Space reasons.
const (
	// ReasonWaitingForReplicas: the StatefulSet exists but its pod is not ready yet.
	ReasonWaitingForReplicas = "WaitingForReplicas"
	// ReasonChannelsRemaining: a deleted Space waits until the Channels that use it are gone.
	ReasonChannelsRemaining = "ChannelsRemaining"
	// ReasonEdgeDisabled: exposure is enabled but the operator does not run the edge.
	ReasonEdgeDisabled = "EdgeDisabled"
	// ReasonEdgePending: the edge has not built a configuration with this Space yet.
	ReasonEdgePending = "EdgePending"
	// ReasonSNIConflict: another Space holds the sniHost; the message names it.
	ReasonSNIConflict = "SNIConflict"
)

// SpacePort is the TCP port on which confluxd --role=space serves lookups and segments.
const SpacePort = 7400

// SpaceSpec is the desired state of a Space: a named, persistent name space for channels
// and pipes, served by one confluxd --role=space pod with a volume.
// +kubebuilder:validation:XValidation:rule="!has(self.exposure) || !self.exposure.enabled || (has(self.exposure.sniHost) && self.exposure.sniHost.size() > 0)",message="exposure.sniHost is required when exposure.enabled is true"
type SpaceSpec struct {
	// Storage of the space's pipe segments.
	// +required
	Storage SpaceStorage `json:"storage"`

	// Exposure of the space to remote clusters through the edge.
	// +optional
	Exposure *SpaceExposure `json:"exposure,omitempty"`

	// DisruptionBudget, when set, gives the space server a PodDisruptionBudget owned by the
	// Space; none by default (a one-pod server with maxUnavailable 0 blocks node drains).
	// +optional
	DisruptionBudget *SpaceDisruptionBudget `json:"disruptionBudget,omitempty"`
}

// SpaceStorage describes the volume of the space server.
// +kubebuilder:validation:XValidation:rule="has(self.storageClassName) == has(oldSelf.storageClassName) && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",message="storage.storageClassName is immutable"
type SpaceStorage struct {
	// Size of the persistent volume claim, e.g. "10Gi"; positive. Immutable: StatefulSet
	// volume claim templates cannot change.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="storage.size is immutable"
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || quantity(string(self)).isGreaterThan(quantity('0'))",message="storage.size must be positive"
	// +required
	Size resource.Quantity `json:"size"`

	// StorageClassName of the claim; the cluster default when empty.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// Retention bounds how much pipe data the space keeps.
	// +optional
	Retention *Retention `json:"retention,omitempty"`
}

// Retention bounds the data kept by a space; the oldest segments go first.
// +kubebuilder:validation:XValidation:rule="has(self.maxBytes) || has(self.maxAge)",message="retention needs maxBytes or maxAge"
type Retention struct {
	// MaxBytes kept across all pipes of the space.
	// +optional
	MaxBytes *resource.Quantity `json:"maxBytes,omitempty"`
	// MaxAge of a segment before it is dropped, e.g. "24h".
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// SpaceExposure makes a space reachable from other clusters through the edge (SNI routing).
type SpaceExposure struct {
	// Enabled exposes the space through the edge.
	Enabled bool `json:"enabled"`
	// SNIHost is the TLS server name remote clusters use to reach this space.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	SNIHost string `json:"sniHost,omitempty"`
}

// SpaceStatus is the observed state of a Space.
type SpaceStatus struct {
	// Endpoint is the in-cluster address of the space server, host:port.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// ChannelCount is the number of Channels that use this space.
	// +optional
	ChannelCount int32 `json:"channelCount"`
	// ObservedGeneration is the generation last reconciled successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, ServerReady, ServiceReady, Exposed (with exposure enabled).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Space is a persistent name space for channels and pipes, served by confluxd --role=space.
// Its name names the space server's Service (a DNS-1035 label) and StatefulSet, whose pods
// carry the label controller-revision-hash=<name>-<hash> (at most 63): hence 52 characters.
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 52",message="a Space name is at most 52 characters: it names the space server's StatefulSet, whose label controller-revision-hash (name-hash) is at most 63"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="a Space name must be a DNS-1035 label (a-z, 0-9 and -, starting with a letter, no dots): it names the space server's Service"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=conflux,shortName=sp
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoint`
// +kubebuilder:printcolumn:name="Channels",type=integer,JSONPath=`.status.channelCount`
// +kubebuilder:printcolumn:name="Size",type=string,JSONPath=`.spec.storage.size`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Space struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SpaceSpec   `json:"spec"`
	Status SpaceStatus `json:"status,omitempty"`
}

// SpaceList is a list of Spaces.
// +kubebuilder:object:root=true
type SpaceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Space `json:"items"`
}

func init() { SchemeBuilder.Register(&Space{}, &SpaceList{}) }
