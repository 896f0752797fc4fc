package controller

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	conflux "conflux.dev/operator/api/v1alpha1"

	"conflux.dev/operator/internal/edge"
	"conflux.dev/operator/internal/spaceclient"
	cxwebhook "conflux.dev/operator/internal/webhook"
)

// EventSource is the component name on the operator's Events.
const EventSource = "conflux-operator"

// Config is what SetupAll wires.
type Config struct {
	// Image of confluxd (space servers and sidecars).
	Image string
	// Spaces reaches the space servers.
	Spaces spaceclient.SpaceClient
	// Webhooks: serve the admission webhooks.
	Webhooks bool
	// StatsInterval: how often each registered Channel's stats are read again (0: only
	// when the Channel or its Space changes).
	StatsInterval time.Duration
	// Edge, when set, is the edge's xDS server (Addr, NodeID, Options filled in); SetupAll
	// gives it the manager's cache, an event recorder and a logger and adds it to mgr.
	Edge *edge.Server
}

// SetupAll registers the field indexes, every reconciler, the admission webhooks and the
// edge's xDS server as c asks. main and the envtest suites both use it.
func SetupAll(ctx context.Context, mgr ctrl.Manager, c Config) error {
	image, spaces, webhooks := c.Image, c.Spaces, c.Webhooks
	if err := SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	rec := mgr.GetEventRecorderFor(EventSource)
	spaceRec := &SpaceReconciler{Client: mgr.GetClient(), Recorder: rec, Image: image}
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
	if err := spaceRec.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&ChannelReconciler{Client: mgr.GetClient(), Recorder: rec, Spaces: spaces, StatsInterval: c.StatsInterval}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&WorkflowReconciler{Client: mgr.GetClient(), Recorder: rec, Image: image}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&FabricReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return err
	}
	if webhooks {
		cxwebhook.SetupPodInjector(mgr, image)
		if err := cxwebhook.SetupWorkflowValidator(mgr); err != nil {
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
