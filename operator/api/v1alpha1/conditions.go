package v1alpha1

// Condition types shared by every kind. Each object also has kind-specific types,
// documented beside its spec.
const (
	// ReadyCondition is True when every other condition of the object is True: the object
	// is fully reconciled and usable.
	ReadyCondition = "Ready"
)

// Reasons shared by every kind.
const (
	// ReasonReconciled: the condition is True because everything it summarises is in place.
	ReasonReconciled = "Reconciled"
	// ReasonReconcileError: the last reconcile failed with an API error; the message says which.
	ReasonReconcileError = "ReconcileError"
	// ReasonDeleting: the object is being deleted and waits for its finalizer to run.
	ReasonDeleting = "Deleting"
	// ReasonNotReady: at least one other condition is not True; the message names them.
	ReasonNotReady = "NotReady"
)

// Labels and annotations the operator sets or reads.
const (
	// FinalizerName is put on Spaces and Channels so that the data plane is cleaned up
	// before they go away.
	FinalizerName = "conflux.dev/finalizer"
	// ChannelsAnnotation on a user pod asks the webhook to inject the confluxd sidecar
	// bound to the listed channels, e.g. "a,b".
	ChannelsAnnotation = "conflux.dev/channels"
	// InjectedAnnotation is set on pods the webhook has injected.
	InjectedAnnotation = "conflux.dev/injected"
	// SpaceLabel names the Space of a space server's objects.
	SpaceLabel = "conflux.dev/space"
	// WorkflowLabel and ComponentLabel name the Workflow and component of a workload.
	WorkflowLabel  = "conflux.dev/workflow"
	ComponentLabel = "conflux.dev/component"
	// NetworksAnnotation is the Multus annotation that attaches extra networks to a pod.
	NetworksAnnotation = "k8s.v1.cni.cncf.io/networks"
)
