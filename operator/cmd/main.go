// Command manager runs the Conflux operator: the Space, Channel, Workflow and Fabric
// reconcilers, the admission webhooks and (--edge-xds-bind-address) the edge's xDS server.
// "manager probe URL" is a tiny HTTP check used by the chart test.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	conflux "conflux.dev/operator/api/v1alpha1"
	"conflux.dev/operator/internal/controller"
	"conflux.dev/operator/internal/edge"
	"conflux.dev/operator/internal/spaceclient"
	cxwebhook "conflux.dev/operator/internal/webhook"
)

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(conflux.AddToScheme(scheme))
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "probe" {
		os.Exit(probe(os.Args[2]))
	}
	var (
		metricsAddr, probeAddr, image, certDir, secretName, serviceName string
		mutating, validating, leaderElectionID, spaceClient             string
		webhookPort, maxConcurrent, apiBurst                            int
		apiQPS                                                          float64
		leaderElect, enableWebhooks                                     bool
		statsInterval, certRefresh, unlinkTimeout                       time.Duration
		edgeXDSAddr, edgeNodeID, clusterDomain                          string
		edgeListenPort                                                  uint
		metricsSecure                                                   bool
		metricsCertDir, upgradePolicy, upgradeMaxInFlight               string
		upgradeRecheck                                                  time.Duration
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", controller.DefaultMetricsAddr, "Address of the metrics endpoint; 0 disables it.")
	flag.BoolVar(&metricsSecure, "metrics-secure", true, "Serve /metrics over HTTPS, to bearer tokens allowed to GET /metrics (TokenReview + SubjectAccessReview); false: plain HTTP, open.")
	flag.StringVar(&metricsCertDir, "metrics-cert-dir", "", "Directory with tls.crt and tls.key for the metrics endpoint; empty: a self-signed certificate made at start.")
	flag.StringVar(&upgradePolicy, "upgrade-policy", string(controller.DefaultUpgradePolicy), "When running workloads take a new --confluxd-image: Waves (at most --upgrade-max-in-flight rolling at a time) or OnChange (only when their own spec changes).")
	flag.StringVar(&upgradeMaxInFlight, "upgrade-max-in-flight", controller.DefaultUpgradeMaxInFlight, "With --upgrade-policy=Waves: how many workloads may run the new image without being Available yet; a number or a percentage of the operator's Deployments and StatefulSets (at least 1).")
	flag.DurationVar(&upgradeRecheck, "upgrade-recheck-interval", controller.DefaultUpgradeRecheck, "How often an owner whose workload waits for an upgrade wave is reconciled again.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader so that only one replica reconciles.")
	flag.StringVar(&leaderElectionID, "leader-election-id", "conflux-operator.conflux.dev", "Name of the leader-election Lease.")
	flag.StringVar(&spaceClient, "space-client", "tcp", "How Channels reach their space servers: tcp (the space protocol) or none (register nothing, zero stats; for running outside the cluster).")
	flag.StringVar(&image, "confluxd-image", "conflux/confluxd:latest", "Image of confluxd for space servers and sidecars.")
	flag.BoolVar(&enableWebhooks, "enable-webhooks", true, "Serve the admission webhooks.")
	flag.IntVar(&webhookPort, "webhook-port", 9443, "Port of the webhook server.")
	flag.StringVar(&certDir, "webhook-cert-dir", "/tmp/conflux-webhook-certs", "Where the serving certificate is written.")
	flag.StringVar(&secretName, "webhook-secret-name", "conflux-webhook-certs", "Secret (in the operator namespace) holding the webhook CA and serving certificate.")
	flag.StringVar(&serviceName, "webhook-service-name", "conflux-webhook", "Service in front of the webhook server.")
	flag.StringVar(&mutating, "mutating-webhook-configurations", "conflux-mutating", "Comma-separated MutatingWebhookConfigurations to patch with the CA.")
	flag.StringVar(&validating, "validating-webhook-configurations", "conflux-validating", "Comma-separated ValidatingWebhookConfigurations to patch with the CA.")
	flag.DurationVar(&certRefresh, "webhook-cert-refresh-interval", time.Hour, "How often the webhook certificate is checked (renewed when a third of its validity is left) and the caBundle re-patched while running; 0: only at start.")
	flag.DurationVar(&statsInterval, "channel-stats-interval", 30*time.Second, "How often each registered Channel's stats are read from its space server; 0 reads them only when the Channel or its Space changes.")
	flag.DurationVar(&unlinkTimeout, "channel-unlink-timeout", controller.DefaultUnlinkTimeout, "How long a deleted Channel's finalizer retries unlinking it from a space server that does not answer before giving up (a Warning event UnlinkAbandoned) and letting it go. A Space being deleted or gone is not waited for.")
	flag.IntVar(&maxConcurrent, "max-concurrent-reconciles", controller.DefaultMaxConcurrentReconciles, "Workers per controller (Space, Channel, Workflow, Fabric).")
	flag.Float64Var(&apiQPS, "kube-api-qps", controller.DefaultAPIQPS, "Requests per second the operator's API client may make (client-side rate limit).")
	flag.IntVar(&apiBurst, "kube-api-burst", controller.DefaultAPIBurst, "Burst of the operator's API client above --kube-api-qps.")
	flag.StringVar(&edgeXDSAddr, "edge-xds-bind-address", "", "Serve xDS (gRPC) for the Envoy WAN edge on this address, e.g. :18000; empty: no edge.")
	flag.StringVar(&edgeNodeID, "edge-node-id", "conflux-edge", "node.id of the edge Envoys (their bootstrap).")
	flag.UintVar(&edgeListenPort, "edge-listen-port", 10000, "Port the edge Envoy listens on for TLS from remote clusters.")
	flag.StringVar(&clusterDomain, "cluster-domain", "cluster.local", "DNS domain of this cluster (the edge reaches Spaces at <space>.<namespace>.svc.<domain>).")
	pods := bindPodFlags(flag.CommandLine)
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	var spaces spaceclient.SpaceClient
	switch spaceClient {
	case "tcp":
		spaces = spaceclient.NewTCP()
	case "none":
		spaces = spaceclient.Noop{}
	default:
		fmt.Fprintf(os.Stderr, "--space-client=%s: give tcp or none\n", spaceClient)
		os.Exit(2)
	}
	if maxConcurrent < 1 || apiQPS <= 0 || apiBurst < 1 || unlinkTimeout <= 0 {
		fmt.Fprintf(os.Stderr, "--max-concurrent-reconciles=%d --kube-api-qps=%g --kube-api-burst=%d --channel-unlink-timeout=%s: give positive values\n",
			maxConcurrent, apiQPS, apiBurst, unlinkTimeout)
		os.Exit(2)
	}
	policy, err := controller.ParseUpgradePolicy(upgradePolicy)
	if err != nil {
		fmt.Fprintf(os.Stderr, "--upgrade-policy: %v\n", err)
		os.Exit(2)
	}
	inFlight, err := controller.ParseMaxInFlight(upgradeMaxInFlight)
	if err != nil || upgradeRecheck <= 0 {
		fmt.Fprintf(os.Stderr, "--upgrade-max-in-flight=%s --upgrade-recheck-interval=%s: give a positive number or percentage and a positive duration (%v)\n",
			upgradeMaxInFlight, upgradeRecheck, err)
		os.Exit(2)
	}
	setup := controller.Config{Image: image, Spaces: spaces, Webhooks: enableWebhooks, StatsInterval: statsInterval,
		MaxConcurrentReconciles: maxConcurrent, UnlinkTimeout: unlinkTimeout, Pods: pods.mustOptions(),
		Upgrade: controller.UpgradeConfig{Policy: policy, MaxInFlight: inFlight, Recheck: upgradeRecheck}}
	if edgeXDSAddr != "" {
		if edgeListenPort == 0 || edgeListenPort > 65535 {
			fmt.Fprintf(os.Stderr, "--edge-listen-port=%d: give a port 1-65535\n", edgeListenPort)
			os.Exit(2)
		}
		setup.Edge = &edge.Server{Addr: edgeXDSAddr, NodeID: edgeNodeID,
			Options: edge.Options{ListenPort: uint32(edgeListenPort), ClusterDomain: clusterDomain}}
	}
	if err := run(log.V(0).Info, runConfig{metricsAddr, metricsCertDir, metricsSecure, probeAddr, certDir, secretName, serviceName,
		mutating, validating, leaderElectionID, webhookPort, leaderElect, certRefresh, float32(apiQPS), apiBurst, setup}); err != nil {
		log.Error(err, "operator failed")
		os.Exit(1)
	}
}

type runConfig struct {
	metricsAddr, metricsCertDir                 string
	metricsSecure                               bool
	probeAddr, certDir, secretName, serviceName string
	mutating, validating, leaderElectionID      string
	webhookPort                                 int
	leaderElect                                 bool
	certRefresh                                 time.Duration
	apiQPS                                      float32
	apiBurst                                    int
	setup                                       controller.Config
}

func run(info func(string, ...any), c runConfig) error {
	ctx := ctrl.SetupSignalHandler()
	cfg := ctrl.GetConfigOrDie()
	cfg.QPS, cfg.Burst = c.apiQPS, c.apiBurst
	namespace := os.Getenv("POD_NAMESPACE")
	if namespace == "" {
		namespace = "conflux-system"
	}
	disableHTTP2 := func(t *tls.Config) { t.NextProtos = []string{"http/1.1"} }

	var certs cxwebhook.CertOptions
	var direct client.Client
	if c.setup.Webhooks {
		var err error
		if direct, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
			return err
		}
		certs = cxwebhook.CertOptions{
			Namespace: namespace, SecretName: c.secretName, ServiceName: c.serviceName, CertDir: c.certDir,
			MutatingConfigs: split(c.mutating), ValidatingConfigs: split(c.validating),
		}
		if err := cxwebhook.EnsureCerts(ctx, direct, certs); err != nil {
			return fmt.Errorf("webhook certificates: %w", err)
		}
	}

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Cache:                         controller.CacheOptions(),
		Metrics:                       controller.MetricsOptions(c.metricsAddr, c.metricsSecure, c.metricsCertDir),
		HealthProbeBindAddress:        c.probeAddr,
		LeaderElection:                c.leaderElect,
		LeaderElectionID:              c.leaderElectionID,
		LeaderElectionNamespace:       namespace,
		LeaderElectionReleaseOnCancel: true,
		WebhookServer: webhook.NewServer(webhook.Options{Port: c.webhookPort, CertDir: c.certDir,
			TLSOpts: []func(*tls.Config){disableHTTP2}}),
	})
	if err != nil {
		return err
	}
	if err := controller.SetupAll(ctx, mgr, c.setup); err != nil {
		return err
	}
	if c.setup.Webhooks && c.certRefresh > 0 {
		if err := mgr.Add(&cxwebhook.CertRefresher{Client: direct, Options: certs, Interval: c.certRefresh,
			Log: ctrl.Log.WithName("certs")}); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	ready := healthz.Ping
	if c.setup.Webhooks {
		ready = mgr.GetWebhookServer().StartedChecker()
	}
	if err := mgr.AddReadyzCheck("readyz", ready); err != nil {
		return err
	}
	info("starting manager", "namespace", namespace, "webhooks", c.setup.Webhooks, "edgeXDS", c.setup.Edge != nil)
	return mgr.Start(ctx)
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// probe GETs url (skipping TLS verification: it checks liveness, not identity) and returns
// the exit code: 0 for a 2xx answer.
func probe(url string) int {
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // liveness only
	resp, err := cl.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer resp.Body.Close()
	fmt.Println(url, resp.Status)
	if resp.StatusCode/100 != 2 {
		return 1
	}
	return 0
}
