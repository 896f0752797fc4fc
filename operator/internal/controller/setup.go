package controller

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"

	conflux "conflux.dev/operator/api/v1alpha1"

	"conflux.dev/operator/internal/edge"
	"conflux.dev/operator/internal/spaceclient"
	cxwebhook "conflux.dev/operator/internal/webhook"
)

// EventSource is the component name on the operator's Events.
const EventSource = "conflux-operator"

// The defaults of main's flags (and the chart's values), here so that the scale test runs
// the operator as it ships.
const (
	// DefaultMaxConcurrentReconciles: workers per controller.
	DefaultMaxConcurrentReconciles = 4
	// DefaultAPIQPS and DefaultAPIBurst: the API client's rate limit, which controller-runtime
	// applies per resource type (one REST client each). The Channels' 8 writes per Space
	// (finalizer and status of 4 Channels) are the longest queue: N=1,000 converged in 86 s
	// at 100 QPS and 53 s at 300 (bench/operator); client-go's own 20 / 30 takes minutes.
	DefaultAPIQPS   = 300
	DefaultAPIBurst = 600
	// DefaultUnlinkTimeout: how long a deleted Channel's finalizer retries the unlink of a
	// space server that does not answer before it gives up and lets the Channel go. Long
	// enough to ride out a space server's restart, short enough that a namespace whose
	// server never came up is deleted in well under a minute.
	DefaultUnlinkTimeout = 30 * time.Second
)

// Config is what SetupAll wires.
type Config struct {
	// Image of confluxd (space servers and sidecars).
	Image string
	// Spaces reaches the space servers.
	Spaces spaceclient.SpaceClient
	// Webhooks: serve the admission webhooks.
	Webhooks bool
	// StatsInterval: how often the stats of every Channel are read again, one batch per
	// space server (0: only when the Channel or its Space changes).
	StatsInterval time.Duration
	// MaxConcurrentReconciles: workers per controller (0 or less: 1).
	MaxConcurrentReconciles int
	// UnlinkTimeout: how long a deleted Channel retries an unlink before giving up
	// (0: DefaultUnlinkTimeout).
	UnlinkTimeout time.Duration
	// Pods: what the operator adds to the pods it creates or injects (pull secrets, the
	// sidecar's resources).
	Pods PodOptions
	// Edge, when set, is the edge's xDS server (Addr, NodeID, Options filled in); SetupAll
	// gives it the manager's cache, an event recorder and a logger and adds it to mgr.
	Edge *edge.Server
	// Upgrade: when running workloads take a new Image (zero fields: the defaults).
	Upgrade UpgradeConfig
}

// UpgradeConfig is the upgrade policy of running workloads (docs/operator-reference.md#upgrades).
type UpgradeConfig struct {
	Policy      UpgradePolicy      // "": DefaultUpgradePolicy
	MaxInFlight intstr.IntOrString // zero: DefaultUpgradeMaxInFlight
	Recheck     time.Duration      // 0: DefaultUpgradeRecheck
}

// SetupAll registers the field indexes, every reconciler, the admission webhooks and the
// edge's xDS server as c asks. main and the envtest suites both use it.
func SetupAll(ctx context.Context, mgr ctrl.Manager, c Config) error {
	image, spaces, webhooks := c.Image, c.Spaces, c.Webhooks
	if err := SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	rec := mgr.GetEventRecorderFor(EventSource)
	opts := controller.Options{MaxConcurrentReconciles: max(c.MaxConcurrentReconciles, 1)}
	upgrades := NewUpgrades(mgr.GetClient(), rec, image, c.Upgrade)
	publishUpgrades(upgrades)
	spaceRec := &SpaceReconciler{Client: mgr.GetClient(), Recorder: rec, Image: image, ImagePullSecrets: c.Pods.ImagePullSecrets,
		Upgrades: upgrades}
	if c.Edge != nil {
		changes := make(chan event.GenericEvent, 1024)
		spaceRec.Edge, spaceRec.EdgeChanges = c.Edge, changes
		c.Edge.Notify = func(namespace, name string) {
			select { // never blocks the edge: on a replica that is not the leader nobody reads
			case changes <- event.GenericEvent{Object: &conflux.Space{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}}:
			default:
			}
		}
	}
	if err := spaceRec.SetupWithManager(mgr, opts); err != nil {
		return err
	}
	chRec := &ChannelReconciler{Client: mgr.GetClient(), Recorder: rec, Spaces: spaces, UnlinkTimeout: c.UnlinkTimeout}
	if c.StatsInterval > 0 {
		chRec.Stats = NewStatsPoller(mgr.GetClient(), spaces, c.StatsInterval, mgr.GetLogger().WithName("stats"))
		if err := mgr.Add(chRec.Stats); err != nil {
			return err
		}
	}
	if err := chRec.SetupWithManager(mgr, opts); err != nil {
		return err
	}
	if err := (&WorkflowReconciler{Client: mgr.GetClient(), Recorder: rec, Image: image, Pods: c.Pods,
		Upgrades: upgrades}).SetupWithManager(mgr, opts); err != nil {
		return err
	}
	if err := (&FabricReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, opts); err != nil {
		return err
	}
	if webhooks {
		cxwebhook.SetupPodInjector(mgr, &cxwebhook.PodInjector{Image: image, Resources: c.Pods.SidecarResources,
			ImagePullSecrets: c.Pods.ImagePullSecrets})
		if err := cxwebhook.SetupWorkflowValidator(mgr); err != nil {
			return err
		}
		if err := cxwebhook.SetupFabricValidator(mgr); err != nil {
			return err
		}
	}
	if c.Edge != nil {
		c.Edge.Cache = mgr.GetCache()
		c.Edge.Recorder = rec
		c.Edge.Log = mgr.GetLogger().WithName("edge")
		if err := mgr.Add(c.Edge); err != nil {
			return err
		}
	}
	return nil
}
