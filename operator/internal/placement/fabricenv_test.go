package placement

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	conflux "conflux.dev/operator/api/v1alpha1"
	"conflux.dev/operator/internal/sidecar"
)

// The data plane's list of the settings the operator gives a Fabric pod's sidecar.
var fabricEnvHeader = filepath.Join("..", "..", "..", "dataplane", "src", "common", "cx_fabric_env.h")

// The header's CX_ENV_* and CX_FILE_* definitions, macro name to value. Fails on a
// definition of either family that is not in the one parsable form.
func readFabricEnvHeader(g *WithT) map[string]string {
	text, err := os.ReadFile(fabricEnvHeader)
	g.Expect(err).NotTo(HaveOccurred(), "the data plane's list of settings")
	def := regexp.MustCompile(`^#define (CX_(?:ENV|FILE)_[A-Z0-9_]+) "([^"]+)"`)
	out := map[string]string{}
	for _, line := range strings.Split(string(text), "\n") {
		if !strings.HasPrefix(line, "#define CX_ENV_") && !strings.HasPrefix(line, "#define CX_FILE_") {
			continue
		}
		m := def.FindStringSubmatch(line)
		g.Expect(m).NotTo(BeNil(), "not of the form `#define CX_ENV_X \"NAME\"`: %q", line)
		g.Expect(out).NotTo(HaveKey(m[1]), "defined twice: %s", m[1])
		out[m[1]] = m[2]
	}
	return out
}

// The constants of apply.go, by the macro the data plane names them with.
func operatorFabricNames() map[string]string {
	return map[string]string{
		"CX_ENV_TRANSPORT":       EnvTransport,
		"CX_ENV_FABRIC":          EnvFabric,
		"CX_ENV_UCX_TLS":         EnvUCXTLS,
		"CX_ENV_DPDK_ARGS":       EnvDPDKArgs,
		"CX_ENV_MTU":             EnvMTU,
		"CX_ENV_DEVICE_RESOURCE": EnvDeviceResource,
		"CX_ENV_NETWORK_STATUS":  EnvNetworkStatusFile,
		"CX_FILE_NETWORK_STATUS": PodInfoPath + "/" + NetworkStatusFile,
	}
}

// Every name apply.go defines is the data plane's, and the other way round.
func TestFabricEnvNamesMatchTheDataPlane(t *testing.T) {
	g := NewWithT(t)
	header := readFabricEnvHeader(g)
	g.Expect(header).NotTo(BeEmpty())
	g.Expect(header).To(Equal(operatorFabricNames()))
}

// What ApplyFabric really sets on the sidecar (a Fabric with every setting) is exactly what
// the header lists: each variable and mounted file is there, and each listed one is set.
func TestApplyFabricSetsExactlyTheListedSettings(t *testing.T) {
	g := NewWithT(t)
	header := readFabricEnvHeader(g)
	envs, files := map[string]bool{}, map[string]bool{}
	for k, v := range header {
		if strings.HasPrefix(k, "CX_ENV_") {
			envs[v] = true
		} else {
			files[v] = true
		}
	}

	tpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	sidecar.Inject(&tpl.Spec, sidecar.Config{Image: "confluxd:dev", Outputs: []string{"x"}})
	sc := sidecar.Find(&tpl.Spec)
	g.Expect(sc).NotTo(BeNil())
	sc.Env = nil // what follows is ApplyFabric's alone
	f := &conflux.Fabric{
		ObjectMeta: metav1.ObjectMeta{Name: "fast"},
		Spec: conflux.FabricSpec{
			Kind: conflux.FabricDPDK, ResourceName: "intel.com/sriov_netdevice", NetworkAttachment: "sriov-net",
			Transport: &conflux.FabricTransport{UCXTLS: "rc,sm,self", DPDKArgs: []string{"-l", "0"}, MTU: 9000,
				Hugepages: &conflux.Hugepages{PageSize: "2Mi", Size: resource.MustParse("64Mi")}},
		},
	}
	ApplyFabric(tpl, f)

	set := map[string]string{}
	for _, e := range sc.Env {
		set[e.Name] = e.Value
		g.Expect(envs).To(HaveKey(e.Name), "the operator sets %s, which the data plane does not list", e.Name)
	}
	for name := range envs {
		g.Expect(set).To(HaveKey(name), "the data plane lists %s, which the operator does not set", name)
	}

	// files: each downward-API item mounted in the sidecar is listed, and each listed one mounted
	mounted := map[string]bool{}
	for _, v := range tpl.Spec.Volumes {
		if v.DownwardAPI == nil {
			continue
		}
		for _, m := range sc.VolumeMounts {
			if m.Name == v.Name {
				for _, it := range v.DownwardAPI.Items {
					mounted[m.MountPath+"/"+it.Path] = true
				}
			}
		}
	}
	g.Expect(mounted).To(Equal(files))
	g.Expect(set[EnvNetworkStatusFile]).To(Equal(header["CX_FILE_NETWORK_STATUS"]))
}
