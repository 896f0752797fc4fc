package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Fabric condition types.
const (
	// FabricNodesAvailableCondition is True when at least one node can run the fabric's
	// pods: it matches spec.nodeSelector and, when spec.resourceName is set, advertises that
	// resource (status.allocatable > 0). A Fabric is Ready only then; placement uses only
	// Ready Fabrics.
	FabricNodesAvailableCondition = "NodesAvailable"
)

// Fabric reasons, of the NodesAvailable condition and of each entry of status.nodeStates.
const (
	// ReasonNoMatchingNodes: no node matches spec.nodeSelector.
	ReasonNoMatchingNodes = "NoMatchingNodes"
	// ReasonResourceNotAdvertised: nodes match, but none (or, for a node state, not this
	// one) has spec.resourceName allocatable.
	ReasonResourceNotAdvertised = "ResourceNotAdvertised"
	// ReasonResourceAdvertised: the node has spec.resourceName allocatable.
	ReasonResourceAdvertised = "ResourceAdvertised"
	// ReasonNodeMatches: the node matches a fabric that needs no device resource.
	ReasonNodeMatches = "NodeMatches"
	// ReasonNodesReady: some matching nodes are ready (NodesAvailable is True).
	ReasonNodesReady = "NodesReady"
)

// FabricNodeStatesLimit caps status.nodeStates: the first nodes by name are listed, the
// totals count them all, so the status stays small on big clusters. It is also the
// MaxItems marker of FabricStatus.NodeStates: change both together.
const FabricNodeStatesLimit = 100

// FabricKind is the fast-link technology of a fabric.
// +kubebuilder:validation:Enum=rdma;dpdk
type FabricKind string

const (
	FabricRDMA FabricKind = "rdma"
	FabricDPDK FabricKind = "dpdk"
)

// FabricSpec is the desired state of a Fabric: a set of nodes joined by a fast network.
// +kubebuilder:validation:XValidation:rule="self.kind != 'dpdk' || (has(self.transport) && has(self.transport.hugepages))",message="a dpdk fabric needs transport.hugepages"
// +kubebuilder:validation:XValidation:rule="!has(self.transport) || !has(self.transport.dpdkArgs) || self.kind == 'dpdk'",message="transport.dpdkArgs is only allowed with kind dpdk"
// +kubebuilder:validation:XValidation:rule="!has(self.transport) || !has(self.transport.ucxTLS) || self.kind == 'rdma'",message="transport.ucxTLS is only allowed with kind rdma"
type FabricSpec struct {
	// NodeSelector selects the nodes of the fabric domain: label keys and values as in a
	// pod's nodeSelector (the values are checked by the validating webhook: CEL cannot
	// bound the length of a map's values).
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$') && (!k.contains('/') || k.indexOf('/') <= 253))",message="nodeSelector keys must be label keys: [prefix/]name, name at most 63 characters (a-z, A-Z, 0-9, -, _ and ., alphanumeric at both ends), prefix a DNS subdomain"
	NodeSelector map[string]string `json:"nodeSelector"`
	// Kind: rdma or dpdk.
	Kind FabricKind `json:"kind"`
	// ResourceName is the device-plugin extended resource each pod requests, e.g.
	// "rdma/hca_shared_devices_a" or "intel.com/sriov_netdevice".
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ResourceName string `json:"resourceName,omitempty"`
	// NetworkAttachment is the Multus NetworkAttachmentDefinition ("name" or "namespace/name",
	// DNS-1123) added to the pods' k8s.v1.cni.cncf.io/networks annotation.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/)?[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="networkAttachment must be name or namespace/name: a DNS-1123 subdomain, optionally after a DNS-1123 label and /"
	// +optional
	NetworkAttachment string `json:"networkAttachment,omitempty"`
	// Transport settings passed to the sidecar.
	// +optional
	Transport *FabricTransport `json:"transport,omitempty"`
}

// FabricTransport tunes the data plane on a fabric.
type FabricTransport struct {
	// UCXTLS is UCX_TLS for rdma fabrics, e.g. "rc,sm,self".
	// +kubebuilder:validation:MaxLength=256
	// +optional
	UCXTLS string `json:"ucxTLS,omitempty"`
	// DPDKArgs are extra EAL arguments for dpdk fabrics.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	DPDKArgs []string `json:"dpdkArgs,omitempty"`
	// Hugepages requested by the sidecar.
	// +optional
	Hugepages *Hugepages `json:"hugepages,omitempty"`
	// MTU of the fabric interface.
	// +kubebuilder:validation:Minimum=576
	// +kubebuilder:validation:Maximum=9216
	// +optional
	MTU int32 `json:"mtu,omitempty"`
}

// Hugepages requested per pod: size is a positive multiple of pageSize.
// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self.size)) || !isQuantity(self.pageSize) || (quantity(string(self.size)).isInteger() && quantity(string(self.size)).asInteger() > 0 && quantity(string(self.size)).asInteger() % quantity(self.pageSize).asInteger() == 0)",message="hugepages.size must be a positive multiple of hugepages.pageSize"
type Hugepages struct {
	// PageSize: 2Mi or 1Gi.
	// +kubebuilder:validation:Enum="2Mi";"1Gi"
	PageSize string `json:"pageSize"`
	// Size requested, e.g. "1Gi".
	Size resource.Quantity `json:"size"`
}

// FabricNodeState is what one matching node offers the fabric.
type FabricNodeState struct {
	// Name of the node.
	Name string `json:"name"`
	// Allocatable count of spec.resourceName on the node (0 when the fabric has none).
	// +optional
	Allocatable int64 `json:"allocatable"`
	// Ready: the node can run the fabric's pods.
	Ready bool `json:"ready"`
	// Reason: ResourceAdvertised, NodeMatches, ResourceNotAdvertised or Deleting.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// FabricStatus is the observed state of a Fabric.
type FabricStatus struct {
	// MatchingNodes: the nodes matching the node selector.
	// +optional
	MatchingNodes int32 `json:"matchingNodes"`
	// ReadyNodes: the matching nodes that can run the fabric's pods (that advertise
	// spec.resourceName when it is set).
	// +optional
	ReadyNodes int32 `json:"readyNodes"`
	// NodeStates: the first 100 matching nodes by name (the totals count all of them).
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	// +optional
	NodeStates []FabricNodeState `json:"nodeStates,omitempty"`
	// ObservedGeneration is the generation last reconciled successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, NodesAvailable.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Fabric is a fast-link domain set up by the cluster admin. It may not be called any-fast:
// a component's fabric "any-fast" asks for any fabric.
// +kubebuilder:validation:XValidation:rule="self.metadata.name != 'any-fast'",message="any-fast is a reserved Fabric name: a component's fabric any-fast means any fast fabric"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=conflux,shortName=fab
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.kind`
// +kubebuilder:printcolumn:name="Resource",type=string,JSONPath=`.spec.resourceName`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.matchingNodes`
// +kubebuilder:printcolumn:name="Ready Nodes",type=integer,JSONPath=`.status.readyNodes`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Fabric struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FabricSpec   `json:"spec"`
	Status FabricStatus `json:"status,omitempty"`
}

// FabricList is a list of Fabrics.
// +kubebuilder:object:root=true
type FabricList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Fabric `json:"items"`
}

func init() { SchemeBuilder.Register(&Fabric{}, &FabricList{}) }
