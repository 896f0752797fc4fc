package controller

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// upgradePendingDesc: the workloads that run another confluxd image than the configured one,
// counted from the cache at each scrape (so it is right whatever reconciled last).
var upgradePendingDesc = prometheus.NewDesc("conflux_operator_upgrade_pending",
	"Deployments and StatefulSets of the operator whose confluxd image is not the configured one yet (waiting for an upgrade wave, or for their own change with policy OnChange).",
	[]string{"kind"}, nil)

// currentUpgrades is the gate the collector reads (the last one SetupAll made: the tests
// start several managers in one process; the registry takes one collector).
var (
	currentUpgrades  atomic.Pointer[Upgrades]
	registerUpgrades sync.Once
)

type upgradeCollector struct{}

func (upgradeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- upgradePendingDesc }

func (upgradeCollector) Collect(ch chan<- prometheus.Metric) {
	u := currentUpgrades.Load()
	if u == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := u.pending(ctx)
	if err != nil { // the cache is not started (not the leader yet): no sample
		return
	}
	for kind, v := range n {
		ch <- prometheus.MustNewConstMetric(upgradePendingDesc, prometheus.GaugeValue, float64(v), kind)
	}
}

func publishUpgrades(u *Upgrades) {
	currentUpgrades.Store(u)
	registerUpgrades.Do(func() { metrics.Registry.MustRegister(upgradeCollector{}) })
}
