package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestChannelOverWAN: two kind clusters joined over an emulated WAN link carry a channel
// over TLS; see ChannelOverWANSpec.
func TestChannelOverWAN(t *testing.T) {
	a := mustCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	start := time.Now()
	b := UpSiteB(ctx, t, a, SiteBName())
	t.Logf("site B %q up (or reused) in %s", b.Name, since(start))
	ChannelOverWANSpec(ctx, t, WANInput{A: a, B: b, Delay: 20 * time.Millisecond, Loss: "1%", Ticks: 5000})
}

// WANInput is what ChannelOverWANSpec needs.
type WANInput struct {
	A, B  *Cluster      // two kind clusters on docker's kind network, distinct pod subnets
	Delay time.Duration // each way (hack/wan.sh --delay)
	Loss  string        // hack/wan.sh --loss, e.g. "1%"
	Ticks int           // ticks the emitter sends
}

const (
	wanSecret   = "wan-tls"
	wanIntruder = "wan-tls-intruder"
	rttPort     = 7777
)

// ChannelOverWANSpec joins clusters A and B with hack/wan.sh (Delay each way, Loss), makes a
// CA and certificates (crypto/x509) and ships them as Secrets, and asserts, in order:
//  1. a TCP connect from a pod in A to a pod in B takes about two delays (the minimum of 10
//     between 1.75 and 7.5 delays), one inside A stays far below one delay;
//  2. demo-emitter in A (its confluxd sidecar on --transport=tls, written into the pod as the
//     operator's injector writes it) creates a reliable channel whose id names a tls://
//     address, and demo-receiver in B, through its own tls sidecar, gets all Ticks ticks
//     in order with their check values despite the loss;
//  3. a receiver in B whose sidecar holds a certificate of another CA is refused ("unknown
//     ca") and never subscribes;
//  4. the emitter's sidecar /metrics name the channel's link `tls` and count the ticks sent;
//  5. `hack/wan.sh leave` leaves no device, process, file, rule, route or chain in any node
//     of either cluster.
//
// The namespaces are deleted and the link removed even when the test fails; site B stays.
func ChannelOverWANSpec(ctx context.Context, t *testing.T, in WANInput) {
	a, b := in.A, in.B
	step := time.Now()
	var imgA, imgB ConfluxImages
	var netA, netB string
	for _, s := range []struct {
		c    *Cluster
		img  *ConfluxImages
		netc *string
	}{{a, &imgA, &netA}, {b, &imgB, &netB}} {
		var err error
		if *s.img, err = BuildConfluxImages(ctx, s.c, "demo"); err != nil {
			t.Fatalf("images for %s: %v", s.c.Name, err)
		}
		if *s.netc, err = BuildNetcheckImage(ctx, s.c); err != nil {
			t.Fatalf("netcheck image for %s: %v", s.c.Name, err)
		}
	}
	t.Logf("images %s, %s and %s loaded into %s and %s in %s", imgA.Confluxd, imgA.Demo, netA, a.Name, b.Name, since(step))

	// namespaces first, so that their cleanup is registered before anything runs in them
	ns := "conflux-e2e-wan-" + randomHex(t, 4)
	for _, c := range []*Cluster{a, b} {
		if _, err := c.Kubectl(ctx, nil, "create", "namespace", ns); err != nil {
			t.Fatalf("namespace in %s: %v", c.Name, err)
		}
		c := c
		t.Cleanup(func() {
			cctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if out, err := c.Kubectl(cctx, nil, "delete", "namespace", ns, "--timeout=150s"); err != nil {
				t.Errorf("deleting namespace %s in %s: %v %s", ns, c.Name, err, out)
			}
		})
	}

	step = time.Now()
	t.Cleanup(func() { // the link goes even when the test fails (leave is idempotent)
		cctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if out, err := WAN(cctx, a, b, "leave"); err != nil {
			t.Errorf("hack/wan.sh leave: %v\n%s", err, out)
		}
	})
	if out, err := WAN(ctx, a, b, "join", "--delay", in.Delay.String(), "--loss", in.Loss); err != nil {
		t.Fatalf("hack/wan.sh join: %v\n%s", err, out)
	}
	t.Logf("clusters joined (%s each way, %s loss) in %s", in.Delay, in.Loss, since(step))

	// 1. round trips across and inside
	step = time.Now()
	applyPod(ctx, t, a, netcheckServer(ns, "rtt-server", netA))
	applyPod(ctx, t, b, netcheckServer(ns, "rtt-server", netB))
	ipA := podIP(ctx, t, a, ns, "rtt-server")
	ipB := podIP(ctx, t, b, ns, "rtt-server")
	across := measureRTT(ctx, t, a, ns, "rtt-across", netA, ipB)
	inside := measureRTT(ctx, t, a, ns, "rtt-inside", netA, ipA)
	t.Logf("TCP connect from %s: to %s in %s min %s; to %s in %s min %s (%s)", a.Name, ipB, b.Name, across, ipA, a.Name, inside, since(step))
	if across < in.Delay*7/4 || across > in.Delay*15/2 {
		t.Errorf("across the WAN a connect took at least %s: want about 2 × %s (between %s and %s)", across, in.Delay, in.Delay*7/4, in.Delay*15/2)
	}
	if inside > in.Delay/2 {
		t.Errorf("inside %s a connect took at least %s: the WAN delay (%s) reached intra-cluster traffic", a.Name, inside, in.Delay)
	}

	// certificates: one CA for both sites; an intruder's certificate from another CA
	ca, err := newCA("conflux-e2e WAN CA")
	must(t, err)
	other, err := newCA("some other CA")
	must(t, err)
	credsA, err := ca.issue("site-a", nil)
	must(t, err)
	credsB, err := ca.issue("site-b", nil)
	must(t, err)
	credsX, err := other.issue("intruder", ca) // trusts our CA, but its own certificate is other's
	must(t, err)
	applyManifest(ctx, t, a, credsA.SecretManifest(ns, wanSecret))
	applyManifest(ctx, t, b, credsB.SecretManifest(ns, wanSecret))
	applyManifest(ctx, t, b, credsX.SecretManifest(ns, wanIntruder))

	// 2. the emitter in A, its channel id
	step = time.Now()
	applyPod(ctx, t, a, tlsAppPod(ns, "wan-emitter", imgA, wanSecret, "Always", "/usr/bin/demo-emitter",
		map[string]string{"DEMO_TICKS": strconv.Itoa(in.Ticks)}))
	id := waitLog(ctx, t, a, ns, "wan-emitter", regexp.MustCompile(`emitter: channel (\S+) created`), 3*time.Minute)[1]
	if !strings.HasPrefix(id, "cx1:tls://") {
		t.Fatalf("the emitter's channel id %q does not name a tls:// address", id)
	}
	t.Logf("emitter in %s: channel %s (%s)", a.Name, id, since(step))

	// 3. and 2. the intruder and the receiver in B, at once
	step = time.Now()
	recvEnv := map[string]string{"DEMO_CHANNEL": id, "DEMO_TICKS": strconv.Itoa(in.Ticks), "DEMO_TIMEOUT": "300"}
	applyPod(ctx, t, b, tlsAppPod(ns, "wan-intruder", imgB, wanIntruder, "Never", "/usr/bin/demo-receiver",
		map[string]string{"DEMO_CHANNEL": id, "DEMO_TICKS": strconv.Itoa(in.Ticks), "DEMO_TIMEOUT": "30"}))
	applyPod(ctx, t, b, tlsAppPod(ns, "wan-receiver", imgB, wanSecret, "Never", "/usr/bin/demo-receiver", recvEnv))
	final := waitLog(ctx, t, b, ns, "wan-receiver", regexp.MustCompile(`receiver: (complete|FAILED): .*`), 8*time.Minute)[0]
	want := fmt.Sprintf("receiver: complete: %d/%d ticks in order with their check values", in.Ticks, in.Ticks)
	if final != want {
		t.Fatalf("receiver in %s: %q, want %q\n%s", b.Name, final, want, b.Describe(ctx, ns, "wan-receiver"))
	}
	t.Logf("receiver in %s: %s (%s)", b.Name, final, since(step))
	xfinal := waitLog(ctx, t, b, ns, "wan-intruder", regexp.MustCompile(`receiver: (complete|FAILED): .*`), 3*time.Minute)[0]
	xlogs, _ := b.Kubectl(ctx, nil, "-n", ns, "logs", "wan-intruder", "-c", "app")
	if !strings.HasPrefix(xfinal, "receiver: FAILED: the channel did not open") || strings.Contains(xlogs, "subscribed") ||
		!strings.Contains(xlogs, "unknown ca") {
		t.Errorf("a receiver with another CA's certificate was not refused for it:\n%s", xlogs)
	} else {
		t.Logf("intruder refused: %s", firstLine(xlogs, "unknown ca"))
	}

	// 4. the emitter's sidecar names the link
	metrics, err := a.Kubectl(ctx, nil, "get", "--raw", fmt.Sprintf("/api/v1/namespaces/%s/pods/wan-emitter:9464/proxy/metrics", ns))
	if err != nil {
		t.Fatalf("the emitter's sidecar metrics through the API server: %v", err)
	}
	link := firstLine(metrics, "conflux_channel_link{")
	if !strings.Contains(link, `link="tls"`) {
		t.Errorf("the emitter's sidecar does not name the channel's link tls: %q", link)
	}
	if n := metricSum(metrics, "conflux_channel_events_sent_total"); n < float64(in.Ticks) {
		t.Errorf("the emitter's sidecar sent %v events, want %d", n, in.Ticks)
	}
	t.Logf("emitter's sidecar: %s; tcp retransmits in its pod %v", link, metricSum(metrics, "conflux_tcp_retransmits_total"))
	if st, _ := WAN(ctx, a, b, "status"); st != "" {
		t.Logf("hack/wan.sh status before leave:\n%s", st)
	}

	// 5. leave removes everything
	step = time.Now()
	if out, err := WAN(ctx, a, b, "leave"); err != nil {
		t.Fatalf("hack/wan.sh leave: %v\n%s", err, out)
	}
	left, err := wanLeftovers(ctx, a, b)
	if err != nil {
		t.Fatalf("checking the nodes after leave: %v", err)
	}
	if len(left) > 0 {
		t.Errorf("hack/wan.sh leave left in the nodes:\n%s", strings.Join(left, "\n"))
	}
	t.Logf("leave: nothing left in the nodes of %s and %s (%s)", a.Name, b.Name, since(step))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func firstLine(text, sub string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

func applyManifest(ctx context.Context, t *testing.T, c *Cluster, manifest string) {
	t.Helper()
	if out, err := c.Kubectl(ctx, []byte(manifest), "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply in %s: %v\n%s", c.Name, err, out)
	}
}

// applyPod applies a pod manifest and waits until it runs (or, for a pod that ends,
// until it has started).
func applyPod(ctx context.Context, t *testing.T, c *Cluster, manifest string) {
	t.Helper()
	applyManifest(ctx, t, c, manifest)
	name := regexp.MustCompile(`"name":"([^"]+)"`).FindStringSubmatch(manifest)[1]
	ns := regexp.MustCompile(`"namespace":"([^"]+)"`).FindStringSubmatch(manifest)[1]
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if _, err := c.WaitPod(wctx, ns, name, func(p PodStatus) bool { return p.Phase != "Pending" && p.Phase != "" }); err != nil {
		t.Fatalf("pod %s in %s: %v\n%s", name, c.Name, err, c.Describe(ctx, ns, name))
	}
}

func podIP(ctx context.Context, t *testing.T, c *Cluster, ns, name string) string {
	t.Helper()
	st, err := c.Pod(ctx, ns, name)
	if err != nil || st.PodIP == "" {
		t.Fatalf("pod %s in %s has no IP: %v", name, c.Name, err)
	}
	return st.PodIP
}

// waitLog polls a pod's app container log for a line matching re and returns the match.
func waitLog(ctx context.Context, t *testing.T, c *Cluster, ns, pod string, re *regexp.Regexp, timeout time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		logs, _ := c.Kubectl(ctx, nil, "-n", ns, "logs", pod, "-c", "app")
		if m := re.FindStringSubmatch(logs); m != nil {
			return m
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("no line matching %q from %s in %s after %s\n%s", re, pod, c.Name, timeout, c.Describe(ctx, ns, pod))
		}
		time.Sleep(2 * time.Second)
	}
}

var rttLine = regexp.MustCompile(`rtt \S+ min=([0-9.]+)ms`)

// measureRTT runs `netcheck rtt` to ip in a pod of c and returns the fastest connect.
func measureRTT(ctx context.Context, t *testing.T, c *Cluster, ns, name, image, ip string) time.Duration {
	t.Helper()
	applyManifest(ctx, t, c, fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":%q},
"spec":{"restartPolicy":"Never","containers":[{"name":"app","image":%q,"imagePullPolicy":"Never",
"args":["rtt","-addr","%s:%d","-count","10","-timeout","120s"]}]}}`, name, ns, image, ip, rttPort))
	m := waitLog(ctx, t, c, ns, name, rttLine, 4*time.Minute)
	ms, err := strconv.ParseFloat(m[1], 64)
	must(t, err)
	return time.Duration(ms * float64(time.Millisecond))
}

func netcheckServer(ns, name, image string) string {
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":%q},
"spec":{"containers":[{"name":"app","image":%q,"imagePullPolicy":"Never",
"args":["serve","-port","%d","-token","wan"]}]}}`, name, ns, image, rttPort)
}

// tlsAppPod is a pod running program from the demo image with a confluxd sidecar on
// --transport=tls, written as the operator's injector writes its sidecar
// (operator/internal/sidecar/sidecar.go: a native sidecar, the shared run volume, the
// socket env), plus the TLS credentials from a Secret (ca.pem, cert.pem, key.pem).
func tlsAppPod(ns, name string, img ConfluxImages, secret, restart, program string, env map[string]string) string {
	appEnv := `{"name":"CONFLUX_SOCKET","value":"/run/conflux/confluxd.sock"}`
	for k, v := range env {
		appEnv += fmt.Sprintf(`,{"name":%q,"value":%q}`, k, v)
	}
	field := func(n, path string) string {
		return fmt.Sprintf(`{"name":%q,"valueFrom":{"fieldRef":{"fieldPath":%q}}}`, n, path)
	}
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":%q},
"spec":{"restartPolicy":%q,
"volumes":[{"name":"conflux-run","emptyDir":{"medium":"Memory"}},{"name":"tls","secret":{"secretName":%q}}],
"initContainers":[{"name":"confluxd","image":%q,"imagePullPolicy":"Never","restartPolicy":"Always",
 "args":["--role=sidecar","--socket=/run/conflux/confluxd.sock","--transport=tls","--channels=ticks"],
 "env":[%s,%s,%s,{"name":"CONFLUX_TRANSPORT","value":"tls"},
  {"name":"CONFLUX_TLS_CA","value":"/etc/conflux/tls/ca.pem"},{"name":"CONFLUX_TLS_CERT","value":"/etc/conflux/tls/cert.pem"},
  {"name":"CONFLUX_TLS_KEY","value":"/etc/conflux/tls/key.pem"}],
 "ports":[{"name":"conflux-metrics","containerPort":9464}],
 "startupProbe":{"httpGet":{"path":"/readyz","port":"conflux-metrics"},"periodSeconds":1,"failureThreshold":60},
 "volumeMounts":[{"name":"conflux-run","mountPath":"/run/conflux"},{"name":"tls","mountPath":"/etc/conflux/tls","readOnly":true}],
 "securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}}}],
"containers":[{"name":"app","image":%q,"imagePullPolicy":"Never","command":[%q],"env":[%s],
 "volumeMounts":[{"name":"conflux-run","mountPath":"/run/conflux"}]}]}}`,
		name, ns, restart, secret, img.Confluxd,
		field("CONFLUX_NAMESPACE", "metadata.namespace"), field("CONFLUX_POD_NAME", "metadata.name"), field("CONFLUX_NODE_NAME", "spec.nodeName"),
		img.Demo, program, appEnv)
}
