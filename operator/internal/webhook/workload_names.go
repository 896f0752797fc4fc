package webhook

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	conflux "conflux.dev/operator/api/v1alpha1"
)

// MaxWorkloadName is the longest <workflow>-<component> name of a component's workload: a
// DNS label, which Kubernetes recommends for a Deployment's name since its pods' hostnames
// derive from it. (StatefulSets have harder limits, in the CRD's CEL rules.)
const MaxWorkloadName = 63

// ValidateWorkloadNames reports the components whose workload name would exceed
// MaxWorkloadName. On update only components that old does not have are checked: a
// Deployment with a longer name runs, and one created before this rule must stay
// updatable. That needs the old object, hence a webhook rather than a CEL rule (a rule on
// the root, the only place that sees metadata.name, is re-evaluated on every update).
func ValidateWorkloadNames(workflow string, spec, old *conflux.WorkflowSpec) field.ErrorList {
	existing := map[string]bool{}
	if old != nil {
		for _, c := range old.Components {
			existing[c.Name] = true
		}
	}
	var errs field.ErrorList
	for i, c := range spec.Components {
		name := workflow + "-" + c.Name
		if existing[c.Name] || len(name) <= MaxWorkloadName {
			continue
		}
		errs = append(errs, field.Invalid(field.NewPath("spec", "components").Index(i).Child("name"), c.Name,
			fmt.Sprintf("workload name %s is %d characters, at most %d (a DNS label, as its pods' hostnames need): shorten the Workflow or component name",
				name, len(name), MaxWorkloadName)))
	}
	return errs
}
