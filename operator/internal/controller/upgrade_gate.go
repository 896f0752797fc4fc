package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// UpgradePolicy says when a running workload takes a new confluxd image (the operator's
// --confluxd-image): docs/operator-reference.md#upgrades.
type UpgradePolicy string

const (
	// UpgradeWaves: at most MaxInFlight workloads (Space StatefulSets and Workflow
	// Deployments/StatefulSets counted together) run the new image without being Available;
	// the next one starts when one of them is.
	UpgradeWaves UpgradePolicy = "Waves"
	// UpgradeOnChange: a running workload keeps its image until its own spec changes.
	UpgradeOnChange UpgradePolicy = "OnChange"
)

// ImageAnnotation on a Deployment or StatefulSet the operator owns is the confluxd image it
// last applied; the spec-hash next to it leaves that image out, so that the two are compared
// apart: a user's change rolls the workload, a new image waits for its turn.
const ImageAnnotation = "conflux.dev/confluxd-image"

// Defaults of the upgrade flags (and chart values).
const (
	DefaultUpgradePolicy      = UpgradeWaves
	DefaultUpgradeMaxInFlight = "10%"
	// DefaultUpgradeRecheck: how often an owner with a workload waiting for its wave is
	// reconciled again (a rolled workload turning Available queues nothing by itself).
	DefaultUpgradeRecheck = 10 * time.Second
)

// Upgrades is the gate shared by the Space and Workflow reconcilers (every worker). The truth
// is in the cluster: what is in flight is recomputed from the cached workloads'
// ImageAnnotation and status at each decision; memory only holds the admissions the cache
// has not shown yet, so a restarted operator starts from the cluster as it is.
type Upgrades struct {
	Policy UpgradePolicy
	// MaxInFlight: a number or a percentage of the operator's Deployments and StatefulSets
	// (rounded up; at least 1).
	MaxInFlight intstr.IntOrString
	// Recheck: how soon an owner with a waiting workload is reconciled again.
	Recheck time.Duration
	// Image the operator injects now.
	Image string

	reader client.Reader
	rec    record.EventRecorder

	mu       sync.Mutex
	admitted map[string]time.Time // admitted, its ImageAnnotation not yet in the cache
	noted    map[string]string    // the image an UpgradePending event was sent for
}

// NewUpgrades is the gate for image, reading workloads through reader (the manager's cache).
func NewUpgrades(reader client.Reader, rec record.EventRecorder, image string, c UpgradeConfig) *Upgrades {
	u := &Upgrades{Policy: c.Policy, MaxInFlight: c.MaxInFlight, Recheck: c.Recheck, Image: image,
		reader: reader, rec: rec, admitted: map[string]time.Time{}, noted: map[string]string{}}
	if u.Policy == "" {
		u.Policy = DefaultUpgradePolicy
	}
	if u.MaxInFlight == (intstr.IntOrString{}) {
		u.MaxInFlight = intstr.Parse(DefaultUpgradeMaxInFlight)
	}
	if u.Recheck <= 0 {
		u.Recheck = DefaultUpgradeRecheck
	}
	return u
}

// admittedTTL bounds how long an admission the cache never shows holds a slot.
const admittedTTL = 2 * time.Minute

// ParseUpgradePolicy checks a policy name (the flag's value).
func ParseUpgradePolicy(s string) (UpgradePolicy, error) {
	switch p := UpgradePolicy(s); p {
	case UpgradeWaves, UpgradeOnChange:
		return p, nil
	}
	return "", fmt.Errorf("upgrade policy %q: want %s or %s", s, UpgradeWaves, UpgradeOnChange)
}

// ParseMaxInFlight checks a maxInFlight value: a positive integer or a percentage in (0, 100].
func ParseMaxInFlight(s string) (intstr.IntOrString, error) {
	v := intstr.Parse(s)
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, 100, true)
	if err != nil || n <= 0 || (v.Type == intstr.String && n > 100) {
		return v, fmt.Errorf("upgrade max in flight %q: want a positive integer or a percentage like 10%%", s)
	}
	return v, nil
}

func workloadKey(o client.Object) string {
	return kindOf(o) + "/" + o.GetNamespace() + "/" + o.GetName()
}

// rolledWorkloads lists the operator's Deployments and StatefulSets (from the cache).
func (u *Upgrades) rolledWorkloads(ctx context.Context) ([]client.Object, error) {
	sel := client.MatchingLabels{ManagedByLabel: ManagedByValue}
	var deps appsv1.DeploymentList
	if err := u.reader.List(ctx, &deps, sel); err != nil {
		return nil, err
	}
	var stss appsv1.StatefulSetList
	if err := u.reader.List(ctx, &stss, sel); err != nil {
		return nil, err
	}
	out := make([]client.Object, 0, len(deps.Items)+len(stss.Items))
	for i := range deps.Items {
		out = append(out, &deps.Items[i])
	}
	for i := range stss.Items {
		out = append(out, &stss.Items[i])
	}
	return out, nil
}

// admit decides whether the workload key (running another image) may take u.Image now, and
// returns the limit. fresh: this call admitted it (not an earlier one whose write the cache
// does not show yet); only a fresh admission is released when its write fails.
func (u *Upgrades) admit(ctx context.Context, key string) (ok, fresh bool, limit int, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	all, err := u.rolledWorkloads(ctx)
	if err != nil {
		return false, false, 0, err
	}
	limit, err = intstr.GetScaledValueFromIntOrPercent(&u.MaxInFlight, len(all), true)
	if err != nil {
		return false, false, 0, err
	}
	limit = max(limit, 1)
	now := time.Now()
	inFlight := map[string]bool{}
	present := map[string]bool{}
	for _, o := range all {
		k := workloadKey(o)
		present[k] = true
		if appliedImage(o) != u.Image {
			continue
		}
		delete(u.admitted, k) // the cache shows it: its status says the rest
		if !workloadAvailable(o) {
			inFlight[k] = true
		}
	}
	for k, at := range u.admitted {
		if !present[k] || now.Sub(at) > admittedTTL {
			delete(u.admitted, k)
			continue
		}
		inFlight[k] = true
	}
	if inFlight[key] { // admitted before: its write is not in the cache yet
		return true, false, limit, nil
	}
	if len(inFlight) >= limit {
		return false, false, limit, nil
	}
	u.admitted[key] = now
	return true, true, limit, nil
}

// release gives back an admission whose write failed.
func (u *Upgrades) release(key string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.admitted, key)
}

// noteOnce reports whether the pending event for key and u.Image is still to be sent.
func (u *Upgrades) noteOnce(key string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.noted[key] == u.Image {
		return false
	}
	u.noted[key] = u.Image
	return true
}

// pending counts the operator's workloads that run another image than u.Image.
func (u *Upgrades) pending(ctx context.Context) (map[string]int, error) {
	all, err := u.rolledWorkloads(ctx)
	if err != nil {
		return nil, err
	}
	n := map[string]int{"Deployment": 0, "StatefulSet": 0}
	for _, o := range all {
		if img := appliedImage(o); img != "" && img != u.Image {
			n[kindOf(o)]++
		}
	}
	return n, nil
}

// workloadAvailable: the workload's controller has rolled its last spec out and every
// replica is updated and available (Deployment) or ready at the current revision
// (StatefulSet).
func workloadAvailable(o client.Object) bool {
	switch w := o.(type) {
	case *appsv1.Deployment:
		want := int32(1)
		if w.Spec.Replicas != nil {
			want = *w.Spec.Replicas
		}
		s := w.Status
		return s.ObservedGeneration >= w.Generation && s.UpdatedReplicas == want &&
			s.AvailableReplicas == want && s.Replicas == want
	case *appsv1.StatefulSet:
		want := int32(1)
		if w.Spec.Replicas != nil {
			want = *w.Spec.Replicas
		}
		s := w.Status
		return s.ObservedGeneration >= w.Generation && s.UpdateRevision == s.CurrentRevision &&
			s.ReadyReplicas == want
	}
	return true
}
