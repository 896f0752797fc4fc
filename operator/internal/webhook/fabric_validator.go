package webhook

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	conflux "conflux.dev/operator/api/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-conflux-dev-v1alpha1-fabric,mutating=false,failurePolicy=fail,sideEffects=None,groups=conflux.dev,resources=fabrics,verbs=create;update,versions=v1alpha1,name=vfabric.conflux.dev,admissionReviewVersions=v1

// FabricValidator checks the values of a Fabric's nodeSelector: the CRD's CEL rules check
// its keys, but the cost of a rule over a map is bounded by the length of its values, which
// a map[string]string cannot declare. An invalid value would fail the node List and every
// pod's node affinity later.
type FabricValidator struct{}

var _ admission.CustomValidator = FabricValidator{}

func (FabricValidator) ValidateCreate(_ context.Context, obj runtime.Object) (admission.Warnings, error) {
	return nil, validateFabric(obj)
}

func (FabricValidator) ValidateUpdate(_ context.Context, _, obj runtime.Object) (admission.Warnings, error) {
	return nil, validateFabric(obj)
}

func (FabricValidator) ValidateDelete(context.Context, runtime.Object) (admission.Warnings, error) {
	return nil, nil
}

func validateFabric(obj runtime.Object) error {
	f, ok := obj.(*conflux.Fabric)
	if !ok {
		return fmt.Errorf("expected a Fabric, got %T", obj)
	}
	if errs := ValidateNodeSelectorValues(f.Spec.NodeSelector); len(errs) > 0 {
		return apierrors.NewInvalid(conflux.GroupVersion.WithKind("Fabric").GroupKind(), f.Name, errs)
	}
	return nil
}

// ValidateNodeSelectorValues reports every value that is not a label value, by key.
func ValidateNodeSelectorValues(sel map[string]string) field.ErrorList {
	keys := make([]string, 0, len(sel))
	for k := range sel {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs field.ErrorList
	path := field.NewPath("spec", "nodeSelector")
	for _, k := range keys {
		for _, msg := range validation.IsValidLabelValue(sel[k]) {
			errs = append(errs, field.Invalid(path.Key(k), sel[k], "nodeSelector values must be label values: "+msg))
		}
	}
	return errs
}

// SetupFabricValidator registers the validator with the manager.
func SetupFabricValidator(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr).For(&conflux.Fabric{}).WithValidator(FabricValidator{}).Complete()
}
