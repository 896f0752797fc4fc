package edge

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// What the edge serves, on the manager's metrics endpoint.
var (
	exposedSpaces = prometheus.NewGauge(prometheus.GaugeOpts{Name: "conflux_edge_exposed_spaces", Help: "Spaces the edge's xDS snapshot routes to."})
	sniConflicts  = prometheus.NewGauge(prometheus.GaugeOpts{Name: "conflux_edge_sni_conflicts", Help: "Exposed Spaces left out because another Space holds their sniHost."})
	snapshotFails = prometheus.NewCounter(prometheus.CounterOpts{Name: "conflux_edge_snapshot_errors_total", Help: "Edge snapshots that could not be built or failed validation (the previous one stays in service)."})
)

func init() { metrics.Registry.MustRegister(exposedSpaces, sniConflicts, snapshotFails) }
