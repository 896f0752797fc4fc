// Package sidecar builds the confluxd sidecar container and adds it to pod specs. Both the
// Workflow reconciler and the pod-injection webhook use it, so injected pods look the same
// whichever path created them.
package sidecar

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const (
	// ContainerName of the sidecar; a pod that has it is never injected twice.
	ContainerName = "confluxd"
	// RunVolume is the memory-backed volume shared by the app and the sidecar (shm rings, uds).
	RunVolume = "conflux-run"
	// RunDir is where RunVolume is mounted in every container.
	RunDir = "/run/conflux"
	// MetricsPort serves the sidecar's /metrics, /healthz and /readyz (confluxd --http).
	MetricsPort = 9464
	// MetricsPortName names that port in the pod (Prometheus scrapes it by name).
	MetricsPortName = "conflux-metrics"
	// SocketEnv tells the application where the sidecar listens.
	SocketEnv = "CONFLUX_SOCKET"
)

// Config says what the sidecar is bound to.
type Config struct {
	// Image of confluxd.
	Image string
	// Inputs and Outputs are channel names the pod reads and writes (Workflow components).
	Inputs, Outputs []string
	// Channels are channel names without a direction (annotated user pods).
	Channels []string
	// RestartPolicy of the workflow, when any.
	RestartPolicy string
	// Transport is "tcp" or the fabric kind ("rdma", "dpdk").
	Transport string
	// Fabric name, when any.
	Fabric string
	// Resources of the sidecar; nil: DefaultResources. Inject makes requests equal limits
	// for cpu and memory when the pod is Guaranteed without the sidecar.
	Resources *corev1.ResourceRequirements
	// ImagePullSecrets (names) Inject adds to the pod, to pull Image.
	ImagePullSecrets []string
}

// Find returns the sidecar container of spec, or nil.
func Find(spec *corev1.PodSpec) *corev1.Container {
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == ContainerName {
			return &spec.InitContainers[i]
		}
	}
	for i := range spec.Containers {
		if spec.Containers[i].Name == ContainerName {
			return &spec.Containers[i]
		}
	}
	return nil
}

// Container builds the sidecar container for cfg.
func Container(cfg Config) corev1.Container {
	always := corev1.ContainerRestartPolicyAlways
	transport := cfg.Transport
	if transport == "" {
		transport = "tcp"
	}
	args := []string{"--role=sidecar", "--socket=" + RunDir + "/confluxd.sock", "--transport=" + transport}
	if len(cfg.Inputs) > 0 {
		args = append(args, "--inputs="+strings.Join(cfg.Inputs, ","))
	}
	if len(cfg.Outputs) > 0 {
		args = append(args, "--outputs="+strings.Join(cfg.Outputs, ","))
	}
	if len(cfg.Channels) > 0 {
		args = append(args, "--channels="+strings.Join(cfg.Channels, ","))
	}
	env := []corev1.EnvVar{
		{Name: "CONFLUX_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "CONFLUX_POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "CONFLUX_NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "CONFLUX_TRANSPORT", Value: transport},
	}
	if cfg.Fabric != "" {
		env = append(env, corev1.EnvVar{Name: "CONFLUX_FABRIC", Value: cfg.Fabric})
	}
	if cfg.RestartPolicy != "" {
		env = append(env, corev1.EnvVar{Name: "CONFLUX_RESTART_POLICY", Value: cfg.RestartPolicy})
	}
	probe := func(path string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString(MetricsPortName)}},
			PeriodSeconds:    period,
			FailureThreshold: failures,
		}
	}
	return corev1.Container{
		Name:          ContainerName,
		Image:         cfg.Image,
		Args:          args,
		Env:           env,
		RestartPolicy: &always, // a native sidecar: starts before and outlives the app
		Ports:         []corev1.ContainerPort{{Name: MetricsPortName, ContainerPort: MetricsPort, Protocol: corev1.ProtocolTCP}},
		// The app containers start once the startup probe passes (a native sidecar's
		// contract), so the app never dials a socket that is not there yet.
		StartupProbe:   probe("/readyz", 1, 60),
		LivenessProbe:  probe("/healthz", 10, 3),
		ReadinessProbe: probe("/readyz", 5, 3),
		VolumeMounts:   []corev1.VolumeMount{{Name: RunVolume, MountPath: RunDir}},
		Resources:      resources(cfg),
		// The "restricted" Pod Security level for the container (the image runs as 65532);
		// a fast link adds IPC_LOCK (placement.ApplyFabric), which needs "privileged".
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr(false),
			RunAsNonRoot:             ptr(true),
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
}

func resources(cfg Config) corev1.ResourceRequirements {
	if cfg.Resources == nil {
		return DefaultResources()
	}
	return *cfg.Resources.DeepCopy()
}

// Inject adds the sidecar, the shared run volume, the socket env of every app container and
// cfg.ImagePullSecrets to spec. A pod that is Guaranteed without the sidecar stays
// Guaranteed: the sidecar's cpu and memory requests are set equal to its limits. It does
// nothing and returns false when the sidecar is already there.
func Inject(spec *corev1.PodSpec, cfg Config) bool {
	if Find(spec) != nil {
		return false
	}
	if QOSClass(spec) == corev1.PodQOSGuaranteed {
		r := guaranteedResources(resources(cfg))
		cfg.Resources = &r
	}
	AddImagePullSecrets(spec, cfg.ImagePullSecrets)
	hasVolume := false
	for _, v := range spec.Volumes {
		if v.Name == RunVolume {
			hasVolume = true
		}
	}
	if !hasVolume {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: RunVolume, VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}})
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		if !hasMount(c, RunVolume) {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: RunVolume, MountPath: RunDir})
		}
		if !hasEnv(c, SocketEnv) {
			c.Env = append(c.Env, corev1.EnvVar{Name: SocketEnv, Value: RunDir + "/confluxd.sock"})
		}
	}
	c := Container(cfg)
	if sc := spec.SecurityContext; sc != nil && sc.RunAsUser != nil && *sc.RunAsUser == 0 {
		// a pod that runs as root on purpose: the sidecar inherits uid 0 (it shares the run
		// volume's socket with the app), and runAsNonRoot would keep it from starting
		c.SecurityContext.RunAsNonRoot = nil
	}
	spec.InitContainers = append(spec.InitContainers, c)
	return true
}

// AddImagePullSecrets adds the secrets of names that spec does not list yet, after its own.
func AddImagePullSecrets(spec *corev1.PodSpec, names []string) {
	for _, n := range names {
		found := false
		for _, s := range spec.ImagePullSecrets {
			found = found || s.Name == n
		}
		if !found {
			spec.ImagePullSecrets = append(spec.ImagePullSecrets, corev1.LocalObjectReference{Name: n})
		}
	}
}

// SplitList parses "a, b,,c" into [a b c].
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func hasMount(c *corev1.Container, name string) bool {
	for _, m := range c.VolumeMounts {
		if m.Name == name {
			return true
		}
	}
	return false
}

func hasEnv(c *corev1.Container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }
