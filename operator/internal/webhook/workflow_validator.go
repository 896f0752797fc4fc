package webhook

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	conflux "conflux.dev/operator/api/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-conflux-dev-v1alpha1-workflow,mutating=false,failurePolicy=fail,sideEffects=None,groups=conflux.dev,resources=workflows,verbs=create;update,versions=v1alpha1,name=vworkflow.conflux.dev,admissionReviewVersions=v1

// WorkflowValidator checks what the CRD's CEL rules cannot say cheaply: that dependsOn and
// colocateWith name components of the same workflow, that dependsOn has no cycle, that new
// components' workload names fit a DNS label (sparing existing ones, which CEL cannot) and
// (reading the namespace's Channels, which CEL cannot) that no pipe has two writers.
type WorkflowValidator struct {
	// Reader lists the Channels; the API server itself, so that a Channel created just
	// before its Workflow is seen.
	Reader client.Reader
}

var _ admission.CustomValidator = WorkflowValidator{}

func (v WorkflowValidator) ValidateCreate(ctx context.Context, obj runtime.Object) (admission.Warnings, error) {
	return nil, v.validate(ctx, obj, nil)
}

func (v WorkflowValidator) ValidateUpdate(ctx context.Context, old, obj runtime.Object) (admission.Warnings, error) {
	return nil, v.validate(ctx, obj, old)
}

func (WorkflowValidator) ValidateDelete(context.Context, runtime.Object) (admission.Warnings, error) {
	return nil, nil
}

func (v WorkflowValidator) validate(ctx context.Context, obj, old runtime.Object) error {
	wf, ok := obj.(*conflux.Workflow)
	if !ok {
		return fmt.Errorf("expected a Workflow, got %T", obj)
	}
	var oldSpec *conflux.WorkflowSpec
	if o, ok := old.(*conflux.Workflow); ok {
		oldSpec = &o.Spec
	}
	errs := ValidateWorkflowGraph(&wf.Spec)
	errs = append(errs, ValidateWorkloadNames(wf.Name, &wf.Spec, oldSpec)...)
	if v.Reader != nil {
		pipes, err := pipeChannels(ctx, v.Reader, wf.Namespace)
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		errs = append(errs, ValidatePipeWriters(&wf.Spec, pipes)...)
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(conflux.GroupVersion.WithKind("Workflow").GroupKind(), wf.Name, errs)
	}
	return nil
}

// ValidateWorkflowGraph reports references to unknown components and dependsOn cycles.
func ValidateWorkflowGraph(spec *conflux.WorkflowSpec) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec", "components")
	known := map[string]bool{}
	for _, c := range spec.Components {
		known[c.Name] = true
	}
	for i, c := range spec.Components {
		for j, d := range c.DependsOn {
			if !known[d] {
				errs = append(errs, field.NotFound(path.Index(i).Child("dependsOn").Index(j), d))
			}
		}
		if c.Placement != nil {
			for j, o := range c.Placement.ColocateWith {
				if !known[o] {
					errs = append(errs, field.NotFound(path.Index(i).Child("placement", "colocateWith").Index(j), o))
				}
			}
		}
	}
	if cycle := findCycle(spec); len(cycle) > 0 {
		errs = append(errs, field.Invalid(path, strings.Join(cycle, " -> "), "dependsOn has a cycle: "+strings.Join(cycle, " -> ")))
	}
	return errs
}

// findCycle returns one dependsOn cycle as a path a -> b -> a, or nil.
func findCycle(spec *conflux.WorkflowSpec) []string {
	deps := map[string][]string{}
	var names []string
	for _, c := range spec.Components {
		deps[c.Name] = c.DependsOn
		names = append(names, c.Name)
	}
	sort.Strings(names)
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var visit func(n string) []string
	visit = func(n string) []string {
		color[n] = grey
		stack = append(stack, n)
		for _, d := range deps[n] {
			if _, ok := deps[d]; !ok {
				continue // unknown: reported separately
			}
			switch color[d] {
			case grey:
				for i, s := range stack {
					if s == d {
						return append(append([]string{}, stack[i:]...), d)
					}
				}
			case white:
				if c := visit(d); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
		return nil
	}
	for _, n := range names {
		if color[n] == white {
			if c := visit(n); c != nil {
				return c
			}
		}
	}
	return nil
}

// SetupWorkflowValidator registers the validator with the manager.
func SetupWorkflowValidator(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr).For(&conflux.Workflow{}).WithValidator(WorkflowValidator{Reader: mgr.GetAPIReader()}).Complete()
}
