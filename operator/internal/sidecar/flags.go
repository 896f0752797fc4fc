package sidecar

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ParseResourceList parses "cpu=50m,memory=64Mi" (the --sidecar-requests and
// --sidecar-limits flags); "" is an empty list. A malformed entry or quantity is an error
// naming it.
func ParseResourceList(s string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for _, item := range SplitList(s) {
		name, value, ok := strings.Cut(item, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" || value == "" {
			return nil, fmt.Errorf("%q: give name=quantity, e.g. cpu=50m", item)
		}
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", item, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("%q: a quantity cannot be negative", item)
		}
		out[corev1.ResourceName(name)] = q
	}
	return out, nil
}

// ResourcesFromFlags builds the sidecar's resources from the two flags' values: nil (the
// defaults) when both are empty. A request above its limit is an error.
func ResourcesFromFlags(requests, limits string) (*corev1.ResourceRequirements, error) {
	req, err := ParseResourceList(requests)
	if err != nil {
		return nil, fmt.Errorf("--sidecar-requests: %w", err)
	}
	lim, err := ParseResourceList(limits)
	if err != nil {
		return nil, fmt.Errorf("--sidecar-limits: %w", err)
	}
	if len(req) == 0 && len(lim) == 0 {
		return nil, nil
	}
	for name, r := range req {
		if l, ok := lim[name]; ok && r.Cmp(l) > 0 {
			return nil, fmt.Errorf("--sidecar-requests %s=%s is above --sidecar-limits %s=%s", name, r.String(), name, l.String())
		}
	}
	if len(req) == 0 {
		req = nil
	}
	if len(lim) == 0 {
		lim = nil
	}
	return &corev1.ResourceRequirements{Requests: req, Limits: lim}, nil
}
