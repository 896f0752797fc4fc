package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"conflux.dev/operator/internal/spaceclient"
)

// Per-Channel gauges, served on the manager's metrics endpoint next to controller-runtime's
// own (reconcile counts, durations, errors, work queues): what the Channel status says,
// for dashboards and alerts. A Channel's series go when the Channel goes.
var (
	channelLabels   = []string{"namespace", "channel"}
	channelWriters  = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "conflux_channel_writers", Help: "Writers attached to the channel (its space server's view)."}, channelLabels)
	channelReaders  = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "conflux_channel_readers", Help: "Reader streams of the channel at its space server."}, channelLabels)
	channelSegments = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "conflux_channel_segments", Help: "Segments the channel's space server stores."}, channelLabels)
	channelBytes    = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "conflux_channel_bytes", Help: "Bytes of the channel's log on its space server's disk."}, channelLabels)
	channelStatsErr = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "conflux_channel_stats_errors_total", Help: "Failed reads of a channel's stats from its space server (an older server without STATS counts too)."}, channelLabels)
)

func init() {
	metrics.Registry.MustRegister(channelWriters, channelReaders, channelSegments, channelBytes, channelStatsErr)
}

func recordChannelStats(namespace, name string, st *spaceclient.ChannelStats, err error) {
	if err != nil {
		channelStatsErr.WithLabelValues(namespace, name).Inc()
	}
	if st == nil {
		return
	}
	channelWriters.WithLabelValues(namespace, name).Set(float64(st.Writers))
	channelReaders.WithLabelValues(namespace, name).Set(float64(st.Readers))
	channelSegments.WithLabelValues(namespace, name).Set(float64(st.Segments))
	channelBytes.WithLabelValues(namespace, name).Set(float64(st.Bytes))
}

func forgetChannelMetrics(namespace, name string) {
	for _, v := range []*prometheus.GaugeVec{channelWriters, channelReaders, channelSegments, channelBytes} {
		v.DeleteLabelValues(namespace, name)
	}
	channelStatsErr.DeleteLabelValues(namespace, name)
}
