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
	// WorkflowCompleteCondition is True once every Job component completed (runPolicy
	// Complete); on a component, once its Job completed.
	WorkflowCompleteCondition = "Complete"
	// WorkflowFailedCondition is True once a Job component failed, with the reason of the
	// Job's Failed condition (e.g. BackoffLimitExceeded, DeadlineExceeded).
	WorkflowFailedCondition = "Failed"
	// WorkflowSuspendedCondition is True while spec.suspend is set (absent otherwise).
	WorkflowSuspendedCondition = "Suspended"
)

// ManagedByConflux is the spec.managedBy value (or its absence) that this operator
// reconciles; any other value leaves the Workflow to another controller.
const ManagedByConflux = "conflux.dev/operator"

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
	// ReasonSuspended: spec.suspend is set; no pod runs.
	ReasonSuspended = "Suspended"
	// ReasonJobsComplete: every Job component completed.
	ReasonJobsComplete = "JobsComplete"
	// ReasonJobsRunning: some Job component has not finished.
	ReasonJobsRunning = "JobsRunning"
	// ReasonJobFailed: a Job failed without a reason of its own.
	ReasonJobFailed = "JobFailed"
)

// WorkflowPhase is a one-word summary of a Workflow.
// +kubebuilder:validation:Enum=Pending;Progressing;Running;Succeeded;Failed
type WorkflowPhase string

const (
	// WorkflowPending: nothing created yet (e.g. channels missing).
	WorkflowPending WorkflowPhase = "Pending"
	// WorkflowProgressing: workloads created, not all ready.
	WorkflowProgressing WorkflowPhase = "Progressing"
	// WorkflowRunning: every component ready.
	WorkflowRunning WorkflowPhase = "Running"
	// WorkflowSucceeded: runPolicy Complete and every Job component completed (final).
	WorkflowSucceeded WorkflowPhase = "Succeeded"
	// WorkflowFailed: a Job component failed (final), or the reconcile failed; see the
	// conditions.
	WorkflowFailed WorkflowPhase = "Failed"
)

// ComponentPhase is a one-word summary of a component.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed
type ComponentPhase string

const (
	// ComponentPending: not created yet, suspended, or its pods not started.
	ComponentPending ComponentPhase = "Pending"
	// ComponentRunning: a service with its workload created, or a Job that started.
	ComponentRunning ComponentPhase = "Running"
	// ComponentSucceeded: a Job that completed (final).
	ComponentSucceeded ComponentPhase = "Succeeded"
	// ComponentFailed: a Job that failed (final).
	ComponentFailed ComponentPhase = "Failed"
)

// RunPolicy says when a Workflow is finished.
// +kubebuilder:validation:Enum=Continuous;Complete
type RunPolicy string

const (
	// RunContinuous: the Workflow runs until deleted; Job components run once each.
	RunContinuous RunPolicy = "Continuous"
	// RunComplete: the Workflow finishes when all its Job components completed (Succeeded)
	// or one failed (Failed); its Deployments and StatefulSets are then scaled to zero.
	RunComplete RunPolicy = "Complete"
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
// +kubebuilder:validation:Enum=Deployment;StatefulSet;Job
type WorkloadKind string

const (
	WorkloadDeployment  WorkloadKind = "Deployment"
	WorkloadStatefulSet WorkloadKind = "StatefulSet"
	// WorkloadJob: a batch/v1 Job, run to completion once.
	WorkloadJob WorkloadKind = "Job"
)

// RestartPolicy of a Workflow, passed to every sidecar: Always resumes pipe readers from
// their last acknowledged segment after a restart, Never starts them over.
// +kubebuilder:validation:Enum=Always;Never
type RestartPolicy string

// WorkflowSpec is the desired state of a Workflow.
// +kubebuilder:validation:XValidation:rule="has(self.managedBy) == has(oldSelf.managedBy) && (!has(self.managedBy) || self.managedBy == oldSelf.managedBy)",message="managedBy is immutable"
// +kubebuilder:validation:XValidation:rule="!has(self.runPolicy) || self.runPolicy != 'Complete' || self.components.exists(c, has(c.workload) && c.workload == 'Job')",message="runPolicy Complete needs at least one Job component: the Workflow finishes when its Jobs complete"
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

	// RunPolicy: Continuous (the default) runs until deleted; Complete finishes the
	// Workflow when its Job components completed, then scales its services to zero.
	// +kubebuilder:default=Continuous
	// +optional
	RunPolicy RunPolicy `json:"runPolicy,omitempty"`

	// Suspend: no pod runs while true. Job components are created (or set) suspended,
	// Deployments and StatefulSets get zero replicas; false resumes them (Kueue's convention).
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// ManagedBy names the controller that reconciles this Workflow; empty or
	// "conflux.dev/operator" is this operator, anything else is left alone. Immutable.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	ManagedBy string `json:"managedBy,omitempty"`
}

// Component is one program of a workflow, run as a Deployment, a StatefulSet or a Job.
// +kubebuilder:validation:XValidation:rule="!has(self.inputs) || !has(self.outputs) || !self.inputs.exists(i, i in self.outputs)",messageExpression="'component ' + self.name + ' reads its own output ' + self.inputs.filter(i, i in self.outputs)[0]"
// +kubebuilder:validation:XValidation:rule="!has(self.dependsOn) || !(self.name in self.dependsOn)",message="a component cannot depend on itself"
// +kubebuilder:validation:XValidation:rule="!has(self.placement) || !has(self.placement.colocateWith) || !(self.name in self.placement.colocateWith)",message="a component cannot colocate with itself"
// +kubebuilder:validation:XValidation:rule="(has(self.workload) && self.workload == 'Job') || !(has(self.completions) || has(self.parallelism) || has(self.backoffLimit) || has(self.activeDeadlineSeconds) || has(self.ttlSecondsAfterFinished))",messageExpression="'component ' + self.name + ': completions, parallelism, backoffLimit, activeDeadlineSeconds and ttlSecondsAfterFinished apply to a Job component only (workload: Job)'"
// +kubebuilder:validation:XValidation:rule="!has(self.workload) || self.workload != 'Job' || !has(self.template.spec) || !has(self.template.spec.restartPolicy) || self.template.spec.restartPolicy != 'Always'",messageExpression="'component ' + self.name + ': a Job component restarts its pods Never or OnFailure, not Always'"
// +kubebuilder:validation:XValidation:rule="!has(self.workload) || self.workload != 'Job' || !has(self.disruptionBudget)",messageExpression="'component ' + self.name + ': a Job component has no disruptionBudget (a PodDisruptionBudget needs a scalable controller)'"
// +kubebuilder:validation:XValidation:rule="!has(self.workload) || self.workload != 'Job' || !has(self.replicas) || self.replicas == 1",messageExpression="'component ' + self.name + ': a Job component has no replicas; set parallelism and completions'"
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

	// Completions of a Job component (batch/v1 Job spec.completions).
	// +kubebuilder:validation:Minimum=0
	// +optional
	Completions *int32 `json:"completions,omitempty"`
	// Parallelism of a Job component (batch/v1 Job spec.parallelism).
	// +kubebuilder:validation:Minimum=0
	// +optional
	Parallelism *int32 `json:"parallelism,omitempty"`
	// BackoffLimit of a Job component: retries before it fails (batch/v1 default 6).
	// +kubebuilder:validation:Minimum=0
	// +optional
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`
	// ActiveDeadlineSeconds of a Job component: it fails (DeadlineExceeded) once running longer.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
	// TTLSecondsAfterFinished of a Job component: the Job is deleted this long after it
	// finished; the component's status keeps its outcome and it is not run again.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// DisruptionBudget, when set, gives the component's pods a PodDisruptionBudget owned by
	// the Workflow (a Deployment or StatefulSet component; removed once no longer asked).
	// +optional
	DisruptionBudget *ComponentDisruptionBudget `json:"disruptionBudget,omitempty"`
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
	// Phase of the component.
	// +optional
	Phase ComponentPhase `json:"phase,omitempty"`
	// StartTime: when its workload was created (a Job: when it started).
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime: when its Job completed or failed.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Conditions of a Job component: Complete or Failed, with the Job's reason and message.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
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
	// StartTime: when its first workload was created while not suspended.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime: when it became Succeeded or Failed because of its Jobs.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// ObservedGeneration is the generation last reconciled successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, ChannelsResolved, Placed, ComponentsReady, Complete, Failed,
	// Suspended.
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
