package webhook

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CertRefresher runs EnsureCerts again every Interval while the operator runs, on every
// replica: the serving certificate is renewed when less than a third of its validity is
// left (the webhook server reloads the files it writes), a renewal by another replica is
// picked up, and a caBundle lost from the webhook configurations (a `helm upgrade`
// re-applies them without it) is patched back.
type CertRefresher struct {
	Client   client.Client
	Options  CertOptions
	Interval time.Duration
	Log      logr.Logger
}

// NeedLeaderElection: every replica keeps its own files current.
func (r *CertRefresher) NeedLeaderElection() bool { return false }

// Start refreshes until ctx ends; a failed refresh is logged and tried again next time.
func (r *CertRefresher) Start(ctx context.Context) error {
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := EnsureCerts(ctx, r.Client, r.Options); err != nil {
				r.Log.Error(err, "refreshing the webhook certificate")
			}
		}
	}
}
