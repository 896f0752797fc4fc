package scale

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"
)

// writeCounter counts the manager's requests to the API server: the writes (every verb
// but get, list and watch) and all of them.
type writeCounter struct {
	writes, all atomic.Int64
	next        http.RoundTripper
	mu          sync.Mutex
	byKind      map[string]int // "PATCH channels/status": writes
}

func (w *writeCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	w.all.Add(1)
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.writes.Add(1)
		w.mu.Lock()
		w.byKind[req.Method+" "+resourceOf(req.URL.Path)]++
		w.mu.Unlock()
	}
	return w.next.RoundTrip(req)
}

// resourceOf is the resource (and subresource) of an API path:
// .../namespaces/NS/RESOURCE[/NAME[/SUB]].
func resourceOf(path string) string {
	p := strings.Split(strings.Trim(path, "/"), "/")
	for i := 0; i+2 < len(p); i++ {
		if p[i] == "namespaces" {
			r := p[i+2]
			if i+4 < len(p) {
				r += "/" + p[i+4]
			}
			return r
		}
	}
	return path
}

// breakdown is the writes by verb and resource, most first.
func (w *writeCounter) breakdown() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := make([]string, 0, len(w.byKind))
	for k := range w.byKind {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return w.byKind[keys[i]] > w.byKind[keys[j]] })
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, w.byKind[k])
	}
	return b.String()
}

// countWrites wraps cfg's transport with a writeCounter.
func countWrites(cfg *rest.Config) *writeCounter {
	w := &writeCounter{byKind: map[string]int{}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		w.next = rt
		return w
	})
	return w
}

// envInt reads a positive integer from the environment, def when unset; anything else is
// an error, not a silent default.
func envInt(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q: give a positive integer", name, v)
	}
	return n, nil
}

// apiserverRequests sums apiserver_request_total from the API server's /metrics (every
// client's requests, the test's included).
func apiserverRequests(t *testing.T, cfg *rest.Config) float64 {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(strings.TrimSuffix(cfg.Host, "/") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sum
}
