package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"conflux.dev/operator/internal/controller"
	"conflux.dev/operator/internal/sidecar"
)

// podFlags are the flags of what the operator adds to the pods it creates or injects.
type podFlags struct {
	pullSecrets, sidecarRequests, sidecarLimits string
}

func bindPodFlags(fs *flag.FlagSet) *podFlags {
	p := &podFlags{}
	fs.StringVar(&p.pullSecrets, "pod-image-pull-secrets", "", "Comma-separated Secret names added to the imagePullSecrets of every pod the operator creates (Space servers, Workflow components) or injects the sidecar into, after the template's own; each must exist in the pod's namespace.")
	fs.StringVar(&p.sidecarRequests, "sidecar-requests", "", "Resource requests of the confluxd sidecar, e.g. cpu=50m,memory=64Mi; empty with --sidecar-limits empty: cpu=50m,memory=64Mi.")
	fs.StringVar(&p.sidecarLimits, "sidecar-limits", "", "Resource limits of the confluxd sidecar, e.g. cpu=500m,memory=256Mi. In a pod whose containers all have requests equal to limits (Guaranteed), the sidecar's cpu and memory requests are set equal to its limits (or limits to its requests) so the pod stays Guaranteed.")
	return p
}

// options checks the flags and returns the operator's pod options.
func (p *podFlags) options() (controller.PodOptions, error) {
	res, err := sidecar.ResourcesFromFlags(p.sidecarRequests, p.sidecarLimits)
	if err != nil {
		return controller.PodOptions{}, err
	}
	secrets := sidecar.SplitList(p.pullSecrets)
	for _, name := range secrets {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return controller.PodOptions{}, fmt.Errorf("--pod-image-pull-secrets: %q is not a Secret name: %s", name, strings.Join(errs, "; "))
		}
	}
	return controller.PodOptions{ImagePullSecrets: secrets, SidecarResources: res}, nil
}

// mustOptions is options, or the error on stderr and exit code 2 (a bad flag).
func (p *podFlags) mustOptions() controller.PodOptions {
	o, err := p.options()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	return o
}
