package placement

import (
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	conflux "conflux.dev/operator/api/v1alpha1"
	"conflux.dev/operator/internal/sidecar"
)

// HugepagesVolume is the volume name of the hugepages mount added on fabrics that ask for it.
const HugepagesVolume = "conflux-hugepages"

// What the sidecar is told, under the names the data plane reads: the one list of them is
// dataplane/src/common/cx_fabric_env.h, and fabricenv_test.go checks it against these (both
// ways). Add a setting there and here together.
const (
	EnvTransport = "CONFLUX_TRANSPORT"
	EnvFabric    = "CONFLUX_FABRIC"
	EnvUCXTLS    = "UCX_TLS"
	EnvDPDKArgs  = "CONFLUX_DPDK_ARGS"
	EnvMTU       = "CONFLUX_MTU"
)

// How the sidecar learns its fast device (the issue's "PCIDEVICE_* and the network-status
// annotation"): the device plugin sets PCIDEVICE_<RESOURCE> (the resource name upper-cased,
// '/' and '.' turned into underscores) in the sidecar, which requests the resource;
// CONFLUX_DEVICE_RESOURCE names that resource. Multus writes the pod's
// network-status annotation (interfaces, IPs, MACs, device-info) once the pod is set up;
// a downward-API volume puts it in the file CONFLUX_NETWORK_STATUS names (a file, not an
// environment variable, because it may be written after the containers are created).
const (
	PodInfoVolume        = "conflux-podinfo"
	PodInfoPath          = "/etc/conflux/podinfo"
	NetworkStatusFile    = "network-status"
	NetworkStatusAnno    = "k8s.v1.cni.cncf.io/network-status"
	EnvNetworkStatusFile = "CONFLUX_NETWORK_STATUS"
	EnvDeviceResource    = "CONFLUX_DEVICE_RESOURCE"
)

// ApplyFabric places the pod template in fabric f: required node affinity from the fabric's
// nodeSelector, the Multus network annotation, and on the sidecar (which must already be
// injected) the device-plugin resource, IPC_LOCK, hugepages and the transport settings.
func ApplyFabric(tpl *corev1.PodTemplateSpec, f *conflux.Fabric) {
	spec := &tpl.Spec
	addRequiredNodeSelector(spec, f.Spec.NodeSelector)

	if na := f.Spec.NetworkAttachment; na != "" {
		if tpl.Annotations == nil {
			tpl.Annotations = map[string]string{}
		}
		nets := sidecar.SplitList(tpl.Annotations[conflux.NetworksAnnotation])
		if !contains(nets, na) {
			nets = append(nets, na)
		}
		tpl.Annotations[conflux.NetworksAnnotation] = strings.Join(nets, ",")
	}

	sc := sidecar.Find(spec)
	if sc == nil {
		return
	}
	if sc.Resources.Requests == nil {
		sc.Resources.Requests = corev1.ResourceList{}
	}
	if sc.Resources.Limits == nil {
		sc.Resources.Limits = corev1.ResourceList{}
	}
	if rn := f.Spec.ResourceName; rn != "" {
		one := resource.MustParse("1")
		sc.Resources.Requests[corev1.ResourceName(rn)] = one
		sc.Resources.Limits[corev1.ResourceName(rn)] = one
		setEnv(sc, EnvDeviceResource, rn)
	}
	if f.Spec.NetworkAttachment != "" {
		addNetworkStatusVolume(spec, sc)
	}
	if sc.SecurityContext == nil {
		sc.SecurityContext = &corev1.SecurityContext{}
	}
	if sc.SecurityContext.Capabilities == nil {
		sc.SecurityContext.Capabilities = &corev1.Capabilities{}
	}
	caps := sc.SecurityContext.Capabilities
	if !containsCap(caps.Add, "IPC_LOCK") {
		caps.Add = append(caps.Add, "IPC_LOCK")
	}

	setEnv(sc, EnvTransport, string(f.Spec.Kind))
	setEnv(sc, EnvFabric, f.Name)
	for i, a := range sc.Args {
		if strings.HasPrefix(a, "--transport=") {
			sc.Args[i] = "--transport=" + string(f.Spec.Kind)
		}
	}
	if t := f.Spec.Transport; t != nil {
		if t.UCXTLS != "" {
			setEnv(sc, EnvUCXTLS, t.UCXTLS)
		}
		if len(t.DPDKArgs) > 0 {
			setEnv(sc, EnvDPDKArgs, strings.Join(t.DPDKArgs, " "))
		}
		if t.MTU > 0 {
			setEnv(sc, EnvMTU, itoa(t.MTU))
		}
		if hp := t.Hugepages; hp != nil {
			rn := corev1.ResourceName("hugepages-" + hp.PageSize)
			sc.Resources.Requests[rn] = hp.Size
			sc.Resources.Limits[rn] = hp.Size
			// Hugepages need a memory limit equal to the request on the same container.
			if _, ok := sc.Resources.Limits[corev1.ResourceMemory]; !ok {
				sc.Resources.Limits[corev1.ResourceMemory] = sc.Resources.Requests[corev1.ResourceMemory]
			}
			hasVol := false
			for _, v := range spec.Volumes {
				hasVol = hasVol || v.Name == HugepagesVolume
			}
			if !hasVol {
				spec.Volumes = append(spec.Volumes, corev1.Volume{Name: HugepagesVolume, VolumeSource: corev1.VolumeSource{
					EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMedium("HugePages-" + hp.PageSize)}}})
				sc.VolumeMounts = append(sc.VolumeMounts, corev1.VolumeMount{Name: HugepagesVolume, MountPath: "/dev/hugepages"})
			}
		}
	}
}

// addNetworkStatusVolume mounts the pod's network-status annotation into the sidecar
// (once, however often the fabric is applied).
func addNetworkStatusVolume(spec *corev1.PodSpec, sc *corev1.Container) {
	for _, v := range spec.Volumes {
		if v.Name == PodInfoVolume {
			return
		}
	}
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: PodInfoVolume, VolumeSource: corev1.VolumeSource{
		DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{{
			Path:     NetworkStatusFile,
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + NetworkStatusAnno + "']"},
		}}}}})
	sc.VolumeMounts = append(sc.VolumeMounts, corev1.VolumeMount{Name: PodInfoVolume, MountPath: PodInfoPath, ReadOnly: true})
	setEnv(sc, EnvNetworkStatusFile, PodInfoPath+"/"+NetworkStatusFile)
}

// ApplyHints adds the spread and colocation hints: spread puts at most one more replica on a
// node than on any other (soft); colocateWith prefers nodes already running those components
// (so that TCP-only components still get shared memory when they can).
func ApplyHints(tpl *corev1.PodTemplateSpec, workflow, component string, p *conflux.Placement) {
	if p == nil {
		return
	}
	spec := &tpl.Spec
	if p.Spread {
		spec.TopologySpreadConstraints = append(spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew:           1,
			TopologyKey:       corev1.LabelHostname,
			WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
				conflux.WorkflowLabel: workflow, conflux.ComponentLabel: component}},
		})
	}
	if len(p.ColocateWith) > 0 {
		if spec.Affinity == nil {
			spec.Affinity = &corev1.Affinity{}
		}
		if spec.Affinity.PodAffinity == nil {
			spec.Affinity.PodAffinity = &corev1.PodAffinity{}
		}
		others := append([]string{}, p.ColocateWith...)
		sort.Strings(others)
		spec.Affinity.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(
			spec.Affinity.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.WeightedPodAffinityTerm{Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{
				TopologyKey: corev1.LabelHostname,
				LabelSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{conflux.WorkflowLabel: workflow},
					MatchExpressions: []metav1.LabelSelectorRequirement{{
						Key: conflux.ComponentLabel, Operator: metav1.LabelSelectorOpIn, Values: others}},
				},
			}})
	}
}

// addRequiredNodeSelector ANDs the selector into every required node-affinity term (or
// creates one term).
func addRequiredNodeSelector(spec *corev1.PodSpec, sel map[string]string) {
	if len(sel) == 0 {
		return
	}
	keys := make([]string, 0, len(sel))
	for k := range sel {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var reqs []corev1.NodeSelectorRequirement
	for _, k := range keys {
		reqs = append(reqs, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{sel[k]}})
	}
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	ns := na.RequiredDuringSchedulingIgnoredDuringExecution
	if len(ns.NodeSelectorTerms) == 0 {
		ns.NodeSelectorTerms = []corev1.NodeSelectorTerm{{}}
	}
	for i := range ns.NodeSelectorTerms {
		ns.NodeSelectorTerms[i].MatchExpressions = append(ns.NodeSelectorTerms[i].MatchExpressions, reqs...)
	}
}

func setEnv(c *corev1.Container, name, value string) {
	for i := range c.Env {
		if c.Env[i].Name == name {
			c.Env[i].Value, c.Env[i].ValueFrom = value, nil
			return
		}
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
}

func contains(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}

func containsCap(xs []corev1.Capability, x corev1.Capability) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }
