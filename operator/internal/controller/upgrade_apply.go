package controller

import (
	"context"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"conflux.dev/operator/internal/sidecar"
)

// Reasons of the Events an upgrade sends on the workload's owner (Space or Workflow).
const (
	// ReasonUpgradePending: a workload keeps its confluxd image while another is configured.
	ReasonUpgradePending = "UpgradePending"
	// ReasonUpgrading: a workload was given the configured confluxd image.
	ReasonUpgrading = "Upgrading"
)

// confluxdImage points at the image of the confluxd container (a Space's server or a
// Workflow component's sidecar) in a Deployment's or StatefulSet's template, or is nil.
func confluxdImage(o client.Object) *string {
	var spec *corev1.PodSpec
	switch w := o.(type) {
	case *appsv1.Deployment:
		spec = &w.Spec.Template.Spec
	case *appsv1.StatefulSet:
		spec = &w.Spec.Template.Spec
	default:
		return nil
	}
	if c := sidecar.Find(spec); c != nil {
		return &c.Image
	}
	return nil
}

// appliedImage is the confluxd image a workload was given: its ImageAnnotation, or for a
// workload written before the annotation, its template's.
func appliedImage(o client.Object) string {
	if img, ok := o.GetAnnotations()[ImageAnnotation]; ok {
		return img
	}
	if p := confluxdImage(o); p != nil {
		return *p
	}
	return ""
}

// applyRolled is applyOwned for a Deployment or StatefulSet that runs confluxd: the spec-hash
// leaves the image out and ImageAnnotation records it. A workload created fresh or whose
// own spec changed (it rolls anyway) takes the configured image; one that only lags behind
// the configured image takes it when u's policy lets it. waiting reports one that lags.
func applyRolled[T client.Object](ctx context.Context, c client.Client, u *Upgrades, owner client.Object,
	key client.ObjectKey, fresh func() T, mutate func(T) error) (obj T, waiting bool, err error) {
	desired := fresh()
	desired.SetNamespace(key.Namespace)
	desired.SetName(key.Name)
	if err := mutate(desired); err != nil {
		return desired, false, err
	}
	img := confluxdImage(desired)
	if img == nil || u == nil { // nothing to hold back
		o, _, err := applyOwned(ctx, c, key, fresh, mutate)
		return o, false, err
	}
	target := *img
	*img = ""
	hash, err := specHash(desired)
	if err != nil {
		return desired, false, err
	}
	cur := fresh()
	switch err := c.Get(ctx, key, cur); {
	case apierrors.IsNotFound(err):
		*img = target
		setAnnotation(desired, SpecHashAnnotation, hash)
		setAnnotation(desired, ImageAnnotation, target)
		return desired, false, c.Create(ctx, desired)
	case err != nil:
		return cur, false, err
	}
	applied := appliedImage(cur)
	same := cur.GetAnnotations()[SpecHashAnnotation] == hash
	if _, ok := cur.GetAnnotations()[ImageAnnotation]; !ok && !same {
		// written before ImageAnnotation: its hash covered the image it runs
		*img = applied
		legacy, err := specHash(desired)
		if err != nil {
			return desired, false, err
		}
		same = cur.GetAnnotations()[SpecHashAnnotation] == legacy
	}
	if same && applied == target {
		return cur, false, nil
	}
	wk := workloadKey(cur)
	admitted := false
	if same { // only the image lags
		ok, limit := false, 0
		if u.Policy == UpgradeWaves {
			if ok, admitted, limit, err = u.admit(ctx, wk); err != nil {
				return cur, false, err
			}
		}
		if !ok {
			if u.noteOnce(wk) {
				why := "until its own spec changes (upgrade policy OnChange)"
				if u.Policy == UpgradeWaves {
					why = "for an upgrade wave: " + strconv.Itoa(limit) + " workload(s) already rolling (maxInFlight " + u.MaxInFlight.String() + ")"
				}
				u.rec.Eventf(owner, corev1.EventTypeNormal, ReasonUpgradePending, "%s %s keeps confluxd image %s, not %s, %s",
					kindOf(cur), cur.GetName(), applied, target, why)
			}
			return cur, u.Policy == UpgradeWaves, nil
		}
	}
	if err := mutate(cur); err != nil {
		return cur, false, err
	}
	*confluxdImage(cur) = target
	setAnnotation(cur, SpecHashAnnotation, hash)
	setAnnotation(cur, ImageAnnotation, target)
	if err := c.Update(ctx, cur); err != nil {
		if admitted {
			u.release(wk)
		}
		return cur, false, err
	}
	if applied != target {
		u.rec.Eventf(owner, corev1.EventTypeNormal, ReasonUpgrading, "%s %s: confluxd image %s -> %s", kindOf(cur), cur.GetName(), applied, target)
	}
	return cur, false, nil
}

func kindOf(o client.Object) string {
	if _, ok := o.(*appsv1.StatefulSet); ok {
		return "StatefulSet"
	}
	return "Deployment"
}
