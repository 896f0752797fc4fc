package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Channel condition types.
const (
	// ChannelSpaceResolvedCondition reports whether the Space named by spec.space exists and
	// is usable (always True for a space-less events channel).
	ChannelSpaceResolvedCondition = "SpaceResolved"
	// ChannelRegisteredCondition reports whether the channel is registered in its space server.
	ChannelRegisteredCondition = "Registered"
	// ChannelStatsReportedCondition reports whether the status counters (writers, readers,
	// segments, bytes, links) come from the space server. Informational: it is not part of
	// Ready (an older space server serves the channel but reports fewer counters).
	ChannelStatsReportedCondition = "StatsReported"
)

// Channel reasons.
const (
	// ReasonSpaceNotFound: spec.space names a Space that does not exist in the namespace.
	ReasonSpaceNotFound = "SpaceNotFound"
	// ReasonSpaceDeleting: the Space is being deleted; the channel cannot be registered.
	ReasonSpaceDeleting = "SpaceDeleting"
	// ReasonNoSpace: an events channel without a space; nothing to resolve or register.
	ReasonNoSpace = "NoSpace"
	// ReasonRegistrationFailed: the space server refused or could not be reached.
	ReasonRegistrationFailed = "RegistrationFailed"
	// ReasonStatsUnsupported: the space server predates the STATS request; writers and
	// segments are reported, readers, bytes and links stay zero.
	ReasonStatsUnsupported = "StatsUnsupported"
	// ReasonStatsUnavailable: reading the counters from the space server failed; the
	// message says why.
	ReasonStatsUnavailable = "StatsUnavailable"
	// ReasonUnlinkFailed (Warning event): a deleted channel could not be unlinked from its
	// space server; the finalizer tries again until --channel-unlink-timeout has passed.
	ReasonUnlinkFailed = "UnlinkFailed"
	// ReasonUnlinkAbandoned (Warning event): the finalizer gave up unlinking a deleted
	// channel (the server stayed unreachable for --channel-unlink-timeout, or its Space is
	// being deleted) and let the channel go; the message says what was left behind.
	ReasonUnlinkAbandoned = "UnlinkAbandoned"
)

// ChannelKind is events (ECho-style typed events, decentralised) or pipe (persistent,
// single-writer multi-reader segments stored in a Space).
// +kubebuilder:validation:Enum=events;pipe
type ChannelKind string

const (
	ChannelKindEvents ChannelKind = "events"
	ChannelKindPipe   ChannelKind = "pipe"
)

// PersistenceMode says where a channel's data survives.
// +kubebuilder:validation:Enum=none;cache;durable
type PersistenceMode string

const (
	PersistenceNone    PersistenceMode = "none"
	PersistenceCache   PersistenceMode = "cache"
	PersistenceDurable PersistenceMode = "durable"
)

// FsyncPolicy says when the space server fsyncs a durable pipe.
// +kubebuilder:validation:Enum=none;interval;every-segment
type FsyncPolicy string

// Delivery is the delivery guarantee of a channel.
// +kubebuilder:validation:Enum=best-effort;reliable
type Delivery string

// TransportPreference restricts or orders the links a channel may use.
// +kubebuilder:validation:Enum=auto;shm;rdma;dpdk;tcp
type TransportPreference string

// ChannelSpec is the desired state of a Channel.
// +kubebuilder:validation:XValidation:rule="self.kind != 'pipe' || (has(self.space) && self.space.size() > 0)",message="a pipe channel needs spec.space"
// +kubebuilder:validation:XValidation:rule="!has(self.persistence) || self.persistence.mode == 'none' || has(self.space)",message="persistence cache or durable needs spec.space"
// +kubebuilder:validation:XValidation:rule="has(self.space) == has(oldSelf.space) && (!has(self.space) || self.space == oldSelf.space)",message="spec.space is immutable"
type ChannelSpec struct {
	// Space is the name of the Space (same namespace) that hosts the channel. Required for
	// pipes and for persisted channels.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Space string `json:"space,omitempty"`

	// Kind is events or pipe. Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.kind is immutable"
	// +required
	Kind ChannelKind `json:"kind"`

	// Format optionally declares the record layout; writers with another layout are converted.
	// +optional
	Format *ChannelFormat `json:"format,omitempty"`

	// Persistence of the channel's data.
	// +optional
	Persistence *Persistence `json:"persistence,omitempty"`

	// Delivery guarantee.
	// +kubebuilder:default=reliable
	// +optional
	Delivery Delivery `json:"delivery,omitempty"`

	// Transport preference; auto picks the fastest link joining each pair of ends.
	// +kubebuilder:default=auto
	// +optional
	Transport TransportPreference `json:"transport,omitempty"`
}

// ChannelFormat declares a record format: a name and its ordered fields.
type ChannelFormat struct {
	// Name of the format, e.g. "particle".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Fields of the record.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +listType=map
	// +listMapKey=name
	Fields []FormatField `json:"fields"`
}

// FormatField is one field of a record format.
type FormatField struct {
	// Name of the field; fields match by name between writer and reader.
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Type: a scalar (int8..int64, uint8..uint64, float, double, char, bool, string),
	// optionally an array: "double[3]" (fixed) or "float[n]" (variable length).
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^(int8|int16|int32|int64|uint8|uint16|uint32|uint64|float|double|char|bool|string)(\\\\[([1-9][0-9]*|n)\\\\])?$')",message="type must be a scalar (int8..int64, uint8..uint64, float, double, char, bool, string), optionally with [N] or [n]"
	Type string `json:"type"`
}

// Persistence says where a channel's data lives and how durable it is.
// +kubebuilder:validation:XValidation:rule="!has(self.fsync) || self.mode == 'durable'",message="fsync is only allowed with mode durable"
type Persistence struct {
	// Mode: none (in flight only), cache (space memory cache), durable (space volume).
	// +kubebuilder:default=none
	Mode PersistenceMode `json:"mode"`
	// Fsync policy of a durable channel.
	// +optional
	Fsync FsyncPolicy `json:"fsync,omitempty"`
}

// LinkUsage counts the links of one kind a channel uses.
type LinkUsage struct {
	// Transport: shm, rdma, dpdk, tcp or tls.
	Transport string `json:"transport"`
	// Count of links.
	Count int32 `json:"count"`
}

// ChannelStatus is the observed state of a Channel, reported by its space server.
type ChannelStatus struct {
	// Writers currently attached.
	// +optional
	Writers int32 `json:"writers"`
	// Readers currently attached: the space server's reader streams of the pipe.
	// +optional
	Readers int32 `json:"readers"`
	// Segments stored (pipes).
	// +optional
	Segments int64 `json:"segments"`
	// Bytes stored (pipes): the pipe's log on disk, record headers included.
	// +optional
	Bytes int64 `json:"bytes"`
	// Links in use, per transport: the writer's and readers' connections to the space
	// server, and the direct writer-to-reader links the space announced.
	// +listType=map
	// +listMapKey=transport
	// +optional
	Links []LinkUsage `json:"links,omitempty"`
	// ObservedGeneration is the generation last reconciled successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, SpaceResolved, Registered, StatsReported.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Channel is a typed event channel or a persistent pipe.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=conflux,shortName=chan
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.kind`
// +kubebuilder:printcolumn:name="Space",type=string,JSONPath=`.spec.space`
// +kubebuilder:printcolumn:name="Writers",type=integer,JSONPath=`.status.writers`
// +kubebuilder:printcolumn:name="Readers",type=integer,JSONPath=`.status.readers`
// +kubebuilder:printcolumn:name="Bytes",type=integer,JSONPath=`.status.bytes`
// +kubebuilder:printcolumn:name="Segments",type=integer,JSONPath=`.status.segments`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Channel struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ChannelSpec   `json:"spec"`
	Status ChannelStatus `json:"status,omitempty"`
}

// ChannelList is a list of Channels.
// +kubebuilder:object:root=true
type ChannelList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Channel `json:"items"`
}

func init() { SchemeBuilder.Register(&Channel{}, &ChannelList{}) }
