package controller

import (
	"context"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	conflux "conflux.dev/operator/api/v1alpha1"
	"conflux.dev/operator/internal/sidecar"
)

// SpaceDataVolume is the name of the space server's volume claim template.
const SpaceDataVolume = "data"

// spaceLabels select the pods of one space server.
func spaceLabels(space *conflux.Space) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":      "confluxd",
		"app.kubernetes.io/component": "space",
		"app.kubernetes.io/instance":  space.Name,
		conflux.SpaceLabel:            space.Name,
	}
}

// reconcileService ensures the headless Service that gives the space pod a stable name.
func (r *SpaceReconciler) reconcileService(ctx context.Context, s *spaceScope) (bool, error) {
	key := client.ObjectKey{Namespace: s.space.Namespace, Name: s.space.Name}
	svc, _, err := applyOwned(ctx, r.Client, key, func() *corev1.Service { return &corev1.Service{} }, func(svc *corev1.Service) error {
		svc.Labels = managedLabels(spaceLabels(s.space))
		svc.Spec.ClusterIP = corev1.ClusterIPNone
		svc.Spec.Selector = spaceLabels(s.space)
		svc.Spec.PublishNotReadyAddresses = true
		svc.Spec.Ports = []corev1.ServicePort{
			{Name: "space", Port: conflux.SpacePort, TargetPort: intstr.FromString("space"), Protocol: corev1.ProtocolTCP},
			{Name: "space-udp", Port: conflux.SpacePort, TargetPort: intstr.FromString("space-udp"), Protocol: corev1.ProtocolUDP}}
		return controllerutil.SetControllerReference(s.space, svc, r.Scheme())
	})
	if err != nil {
		return false, fmt.Errorf("service %s: %w", key.Name, err)
	}
	s.service = svc
	return false, nil
}

// reconcileStatefulSet ensures the StatefulSet running confluxd --role=space with its claim.
func (r *SpaceReconciler) reconcileStatefulSet(ctx context.Context, s *spaceScope) (bool, error) {
	sp := s.space
	key := client.ObjectKey{Namespace: sp.Namespace, Name: sp.Name}
	sts, waiting, err := applyRolled(ctx, r.Client, r.Upgrades, sp, key, func() *appsv1.StatefulSet { return &appsv1.StatefulSet{} }, func(sts *appsv1.StatefulSet) error {
		sts.Labels = managedLabels(spaceLabels(sp))
		if sts.CreationTimestamp.IsZero() { // immutable fields: set once
			sts.Spec.ServiceName = sp.Name
			sts.Spec.Selector = &metav1.LabelSelector{MatchLabels: spaceLabels(sp)}
			sts.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{spaceClaim(sp)}
			sts.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			}
		}
		sts.Spec.Replicas = ptr(int32(1))
		sts.Spec.Template = spacePodTemplate(sp, r.Image, r.ImagePullSecrets)
		return controllerutil.SetControllerReference(sp, sts, r.Scheme())
	})
	if err != nil {
		return false, fmt.Errorf("statefulset %s: %w", key.Name, err)
	}
	s.statefulSet, s.upgradeWaiting = sts, waiting
	return false, nil
}

// reconcileChannels lists the Channels that use the space.
func (r *SpaceReconciler) reconcileChannels(ctx context.Context, s *spaceScope) (bool, error) {
	var list conflux.ChannelList
	if err := r.List(ctx, &list, client.InNamespace(s.space.Namespace), client.MatchingFields{channelSpaceIndex: s.space.Name}); err != nil {
		return false, fmt.Errorf("listing channels: %w", err)
	}
	s.channels = s.channels[:0]
	for _, c := range list.Items {
		s.channels = append(s.channels, c.Name)
	}
	sort.Strings(s.channels)
	return false, nil
}

func spaceClaim(sp *conflux.Space) corev1.PersistentVolumeClaim {
	return corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: SpaceDataVolume, Labels: spaceLabels(sp)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: sp.Spec.Storage.StorageClassName,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: sp.Spec.Storage.Size}},
		},
	}
}

// SpaceDataPath is where the space server's volume is mounted; confluxd keeps its store in
// the "space" folder under it.
const SpaceDataPath = "/var/lib/conflux"

// spaceArgs are the confluxd arguments of a space server (dataplane/src/cmd/confluxd.c).
// confluxd serves TCP and UDP lookups on the same port. It has no flag for the space-wide
// retention the Space API describes yet: maxBytes is passed as its per-pipe limit
// (--retain-bytes), and maxAge and exposure (the edge's job) are not passed.
func spaceArgs(sp *conflux.Space) []string {
	args := []string{"--role=space", "--dir=" + SpaceDataPath + "/space",
		fmt.Sprintf("--listen=tcp://0.0.0.0:%d", conflux.SpacePort)}
	if r := sp.Spec.Storage.Retention; r != nil && r.MaxBytes != nil {
		args = append(args, fmt.Sprintf("--retain-bytes=%d", r.MaxBytes.Value()))
	}
	return args
}

// spacePodTemplate is the space server's pod: it passes the "restricted" Pod Security
// Standard (non-root, RuntimeDefault seccomp, no privilege escalation, every capability
// dropped, set on the pod and on the container) and carries the operator's image pull
// secrets.
func spacePodTemplate(sp *conflux.Space, image string, pullSecrets []string) corev1.PodTemplateSpec {
	tpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: spaceLabels(sp)},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr(true), FSGroup: ptr(int64(65532)), RunAsUser: ptr(int64(65532)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name:  "confluxd",
				Image: image,
				Args:  spaceArgs(sp),
				Ports: []corev1.ContainerPort{
					{Name: "space", ContainerPort: conflux.SpacePort, Protocol: corev1.ProtocolTCP},
					{Name: "space-udp", ContainerPort: conflux.SpacePort, Protocol: corev1.ProtocolUDP}},
				// confluxd listens within milliseconds of starting: probe often so the
				// Space turns Ready soon after, not one default period (10 s) later
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 2, ProbeHandler: corev1.ProbeHandler{
					TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("space")}}},
				VolumeMounts: []corev1.VolumeMount{{Name: SpaceDataVolume, MountPath: SpaceDataPath}},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false), RunAsNonRoot: ptr(true),
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
	sidecar.AddImagePullSecrets(&tpl.Spec, pullSecrets)
	return tpl
}

func ptr[T any](v T) *T { return &v }
