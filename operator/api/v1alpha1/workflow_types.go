package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Workflow condition types.
const (
	// WorkflowChannelsResolvedCondition reports whether every channel named by a component's
	// inputs and outputs exists in the namespace.
	WorkflowChannelsResolvedCondition = "ChannelsResolved"
	// WorkflowPlacedCondition reports whether every component that asked for a fast link got
	// a fabric; False (with reason FallbackToTCP) when some fell back to TCP.
	WorkflowPlacedCondition = "Placed"
	// WorkflowComponentsReadyCondition reports whether every component has its replicas ready.
	WorkflowComponentsReadyCondition = "ComponentsReady"
)

// Workflow reasons.
const (
	// ReasonChannelNotFound: a component binds a channel that does not exist.
	ReasonChannelNotFound = "ChannelNotFound"
	// ReasonFallbackToTCP: a component asked for a fabric but none fits; it runs over TCP.
	ReasonFallbackToTCP = "FallbackToTCP"
	// ReasonWaitingForDependencies: some components wait for their dependsOn to be ready.
	ReasonWaitingForDependencies = "WaitingForDependencies"
	// ReasonComponentsNotReady: some component workloads do not have all replicas ready.
	ReasonComponentsNotReady = "ComponentsNotReady"
)

// WorkflowPhase is a one-word summary of a Workflow.
// +kubebuilder:validation:Enum=Pending;Progressing;Running;Failed
type WorkflowPhase string

const (
	// WorkflowPending: nothing created yet (e.g. channels missing).
	WorkflowPending WorkflowPhase = "Pending"
	// WorkflowProgressing: workloads created, not all ready.
	WorkflowProgressing WorkflowPhase = "Progressing"
	// WorkflowRunning: every component ready.
	WorkflowRunning WorkflowPhase = "Running"
	// WorkflowFailed: the reconcile failed; see the conditions.
	WorkflowFailed WorkflowPhase = "Failed"
)

// AnyFastFabric as a component's fabric asks for any fabric that joins its peers.
const AnyFastFabric = "any-fast"

// LinkType is what a component's pods use to reach their peers across nodes.
type LinkType string

const (
	LinkFast LinkType = "fast"
	LinkTCP  LinkType = "tcp"
)

// WorkloadKind is the kind of the object created for a component.
// +kubebuilder:validation:Enum=Deployment;StatefulSet
type WorkloadKind string

const (
	WorkloadDeployment  WorkloadKind = "Deployment"
	WorkloadStatefulSet WorkloadKind = "StatefulSet"
)

// RestartPolicy of a Workflow, passed to every sidecar: Always resumes pipe readers from
// their last acknowledged segment after a restart, Never starts them over.
// +kubebuilder:validation:Enum=Always;Never
type RestartPolicy string

// WorkflowSpec is the desired state of a Workflow.
type WorkflowSpec struct {
	// Components of the workflow; names are unique.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	Components []Component `json:"components"`

	// RestartPolicy of the components' data-plane sessions.
	// +kubebuilder:default=Always
	// +optional
	RestartPolicy RestartPolicy `json:"restartPolicy,omitempty"`
}

// Component is one program of a workflow, run as a Deployment or a StatefulSet.
// +kubebuilder:validation:XValidation:rule="!has(self.inputs) || !has(self.outputs) || !self.inputs.exists(i, i in self.outputs)",messageExpression="'component ' + self.name + ' reads its own output ' + self.inputs.filter(i, i in self.outputs)[0]"
// +kubebuilder:validation:XValidation:rule="!has(self.dependsOn) || !(self.name in self.dependsOn)",message="a component cannot depend on itself"
// +kubebuilder:validation:XValidation:rule="!has(self.placement) || !has(self.placement.colocateWith) || !(self.name in self.placement.colocateWith)",message="a component cannot colocate with itself"
type Component struct {
	// Name of the component, a DNS label.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=40
	Name string `json:"name"`

	// Workload kind created for the component.
	// +kubebuilder:default=Deployment
	// +optional
	Workload WorkloadKind `json:"workload,omitempty"`

	// Replicas of the component.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Template of the component's pods (a PodTemplateSpec, validated: unknown fields are
	// refused); the confluxd sidecar is added by the operator.
	Template corev1.PodTemplateSpec `json:"template"`

	// Inputs are the Channels (same namespace) the component reads.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=set
	// +optional
	Inputs []string `json:"inputs,omitempty"`

	// Outputs are the Channels (same namespace) the component writes.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=set
	// +optional
	Outputs []string `json:"outputs,omitempty"`

	// Fabric requirement: a Fabric name, "any-fast" for any fabric, or empty for TCP only.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Fabric string `json:"fabric,omitempty"`

	// Placement hints.
	// +optional
	Placement *Placement `json:"placement,omitempty"`

	// DependsOn lists components that must be ready before this one is created.
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	// +optional
	DependsOn []string `json:"dependsOn,omitempty"`
}

// Placement hints of a component.
type Placement struct {
	// ColocateWith lists components to place in the same fabric domain as this one.
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	// +optional
	ColocateWith []string `json:"colocateWith,omitempty"`
	// Spread the component's replicas over nodes (one per node where possible).
	// +optional
	Spread bool `json:"spread,omitempty"`
}

// ComponentStatus is the observed state of one component.
type ComponentStatus struct {
	// Name of the component.
	Name string `json:"name"`
	// Replicas wanted.
	// +optional
	Replicas int32 `json:"replicas"`
	// ReadyReplicas of its workload.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`
	// Fabric chosen, empty when none. The choice is sticky: it is kept while that Fabric
	// exists and is Ready, even when another Fabric gets more nodes.
	// +optional
	Fabric string `json:"fabric,omitempty"`
	// Link the component's pods use across nodes: fast or tcp.
	// +optional
	Link LinkType `json:"link,omitempty"`
	// Reason for the placement (e.g. FallbackToTCP, NoFabricRequested) or for waiting.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message in prose.
	// +optional
	Message string `json:"message,omitempty"`
}

// WorkflowStatus is the observed state of a Workflow.
type WorkflowStatus struct {
	// Phase summarises the workflow.
	// +optional
	Phase WorkflowPhase `json:"phase,omitempty"`
	// Components, one entry per component.
	// +listType=map
	// +listMapKey=name
	// +optional
	Components []ComponentStatus `json:"components,omitempty"`
	// ObservedGeneration is the generation last reconciled successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, ChannelsResolved, Placed, ComponentsReady.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Workflow is a set of components coupled by channels, placed by fabric. Its name is the
// value of the label conflux.dev/workflow (at most 63 characters); each component's workload
// is named <workflow>-<component>: for a StatefulSet at most 52 characters (its pods get the
// label controller-revision-hash=<name>-<hash>) and without dots (its pods' hostnames). The
// validating webhook keeps a Deployment's name to 63 characters (a DNS label, as Kubernetes
// recommends for pod hostnames) for new components.
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="a Workflow name is at most 63 characters: it is the value of the label conflux.dev/workflow on its workloads and pods"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.components) || self.spec.components.all(c, !has(c.workload) || c.workload != 'StatefulSet' || self.metadata.name.size() + 1 + c.name.size() <= 52)",message="a StatefulSet component's name <workflow>-<component> is at most 52 characters: its pods get the label controller-revision-hash=<name>-<hash> (at most 63); shorten the Workflow or component name"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.components) || !self.metadata.name.contains('.') || !self.spec.components.exists(c, has(c.workload) && c.workload == 'StatefulSet')",message="a Workflow with a StatefulSet component needs a name without dots: its pods' hostnames are <workflow>-<component>-<ordinal>"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=conflux,shortName=wf
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Workflow struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WorkflowSpec   `json:"spec"`
	Status WorkflowStatus `json:"status,omitempty"`
}

// WorkflowList is a list of Workflows.
// +kubebuilder:object:root=true
type WorkflowList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Workflow `json:"items"`
}

func init() { SchemeBuilder.Register(&Workflow{}, &WorkflowList{}) }
