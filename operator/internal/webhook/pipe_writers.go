package webhook

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	conflux "conflux.dev/operator/api/v1alpha1"
)

// pipeChannels returns the names of the pipe Channels of a namespace. A Workflow names its
// channels only; whether one is a pipe (one writer) or an event channel (any number of
// sources) is known from the Channel, whose kind is immutable.
func pipeChannels(ctx context.Context, r client.Reader, namespace string) (map[string]bool, error) {
	var list conflux.ChannelList
	if err := r.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing channels: %w", err)
	}
	pipes := map[string]bool{}
	for _, c := range list.Items {
		if c.Spec.Kind == conflux.ChannelKindPipe {
			pipes[c.Name] = true
		}
	}
	return pipes, nil
}

// ValidatePipeWriters reports every pipe that more than one component writes: a pipe has
// one writer (a second one gets EBUSY at run time). Channels not in pipes (event channels,
// or channels not created yet) may have any number of writers.
func ValidatePipeWriters(spec *conflux.WorkflowSpec, pipes map[string]bool) field.ErrorList {
	writers := map[string][]string{}
	first := map[string]int{}
	for i, c := range spec.Components {
		for _, o := range c.Outputs {
			if !pipes[o] {
				continue
			}
			if _, ok := first[o]; !ok {
				first[o] = i
			}
			writers[o] = append(writers[o], c.Name)
		}
	}
	var names []string
	for p, w := range writers {
		if len(w) > 1 {
			names = append(names, p)
		}
	}
	sort.Strings(names)
	var errs field.ErrorList
	path := field.NewPath("spec", "components")
	for _, p := range names {
		errs = append(errs, field.Invalid(path.Index(first[p]).Child("outputs"), p,
			fmt.Sprintf("pipe %s has one writer, but components %s all write it", p, strings.Join(writers[p], ", "))))
	}
	return errs
}
