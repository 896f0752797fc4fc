// Package e2e holds the tests that run against a real multi-node kind cluster made by
// hack/cluster.sh. It drives the cluster with kubectl (no client library), so the module
// has no dependencies and builds in seconds.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Cluster is the cluster under test and the tools to drive it.
type Cluster struct {
	Name       string // kind cluster name (hack/cluster.sh up NAME)
	Kubeconfig string // path to its kubeconfig
	KubectlBin string // kubectl binary
	Root       string // repository root (for hack/ scripts)
	Cache      string // $CONFLUX_CACHE (tools such as helm live in its bin/)
}

// DiscoverCluster finds the cluster under test:
//   - KUBECONFIG (as set by `make test-e2e`), else $CONFLUX_CACHE/kube/conflux.kubeconfig;
//   - the cluster name from CONFLUX_E2E_CLUSTER, else the kubeconfig's file name;
//   - kubectl from $CONFLUX_CACHE/k8s/<version>/bin, else PATH.
//
// It returns an error (never a skip) when any of them is missing.
func DiscoverCluster() (*Cluster, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	root := filepath.Dir(wd) // e2e/ sits at the repository root
	cache := os.Getenv("CONFLUX_CACHE")
	if cache == "" {
		cache = filepath.Join(root, ".cache")
	}
	kubeconfig := os.Getenv("KUBECONFIG")
	if kubeconfig == "" {
		kubeconfig = filepath.Join(cache, "kube", "conflux.kubeconfig")
	}
	if _, err := os.Stat(kubeconfig); err != nil {
		return nil, fmt.Errorf("no kubeconfig at %s (bring the cluster up with hack/cluster.sh up): %w", kubeconfig, err)
	}
	name := os.Getenv("CONFLUX_E2E_CLUSTER")
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(kubeconfig), ".kubeconfig")
	}
	kubectl, err := findKubectl(cache)
	if err != nil {
		return nil, err
	}
	return &Cluster{Name: name, Kubeconfig: kubeconfig, KubectlBin: kubectl, Root: root, Cache: cache}, nil
}

func findKubectl(cache string) (string, error) {
	matches, _ := filepath.Glob(filepath.Join(cache, "k8s", "*", "bin", "kubectl"))
	if len(matches) > 0 {
		return matches[len(matches)-1], nil
	}
	p, err := exec.LookPath("kubectl")
	if err != nil {
		return "", fmt.Errorf("kubectl not found in %s/k8s/*/bin nor in PATH", cache)
	}
	return p, nil
}

// Run runs a command with a context and returns its stdout; on failure the error
// carries stderr.
func Run(ctx context.Context, stdin []byte, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// RunEnv is Run with extra environment variables (NAME=value) on top of ours.
func RunEnv(ctx context.Context, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Kubectl runs kubectl against the cluster.
func (c *Cluster) Kubectl(ctx context.Context, stdin []byte, args ...string) (string, error) {
	return Run(ctx, stdin, c.KubectlBin, append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
}

// Node is the part of a Node object the tests read.
type Node struct {
	Metadata struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		PodCIDR string `json:"podCIDR"`
	} `json:"spec"`
	Status struct {
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Reason string `json:"reason"`
		} `json:"conditions"`
		Addresses []struct {
			Type    string `json:"type"`
			Address string `json:"address"`
		} `json:"addresses"`
	} `json:"status"`
}

// Ready reports whether the node's Ready condition is True.
func (n Node) Ready() bool {
	for _, c := range n.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

// IsControlPlane reports whether the node carries the control-plane role label.
func (n Node) IsControlPlane() bool {
	_, ok := n.Metadata.Labels["node-role.kubernetes.io/control-plane"]
	return ok
}

// Nodes lists the cluster's nodes.
func (c *Cluster) Nodes(ctx context.Context) ([]Node, error) {
	out, err := c.Kubectl(ctx, nil, "get", "nodes", "-o", "json")
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []Node `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, fmt.Errorf("decoding nodes: %w", err)
	}
	return list.Items, nil
}

// PodStatus is the part of a Pod's status the tests read.
type PodStatus struct {
	Phase    string `json:"phase"`
	PodIP    string `json:"podIP"`
	HostIP   string `json:"hostIP"`
	NodeName string
	Ready    bool
}

// Pod reads a pod's phase, addresses, node and readiness.
func (c *Cluster) Pod(ctx context.Context, ns, name string) (PodStatus, error) {
	out, err := c.Kubectl(ctx, nil, "-n", ns, "get", "pod", name, "-o", "json")
	if err != nil {
		return PodStatus{}, err
	}
	var pod struct {
		Spec struct {
			NodeName string `json:"nodeName"`
		} `json:"spec"`
		Status struct {
			PodStatus
			Conditions []struct {
				Type   string `json:"type"`
				Status string `json:"status"`
			} `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &pod); err != nil {
		return PodStatus{}, fmt.Errorf("decoding pod %s/%s: %w", ns, name, err)
	}
	st := pod.Status.PodStatus
	st.NodeName = pod.Spec.NodeName
	for _, cond := range pod.Status.Conditions {
		if cond.Type == "Ready" && cond.Status == "True" {
			st.Ready = true
		}
	}
	return st, nil
}

// WaitPod polls a pod until done returns true, the pod fails, or ctx ends.
func (c *Cluster) WaitPod(ctx context.Context, ns, name string, done func(PodStatus) bool) (PodStatus, error) {
	var last PodStatus
	var lastErr error
	for {
		st, err := c.Pod(ctx, ns, name)
		if err == nil {
			last = st
			if done(st) {
				return st, nil
			}
			if st.Phase == "Failed" {
				return st, fmt.Errorf("pod %s/%s failed", ns, name)
			}
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("waiting for pod %s/%s (phase %q): %w (last error: %v)", ns, name, last.Phase, ctx.Err(), lastErr)
		case <-time.After(time.Second):
		}
	}
}

// Describe returns `kubectl describe` and the logs of a pod, for failure reports.
func (c *Cluster) Describe(ctx context.Context, ns, name string) string {
	desc, _ := c.Kubectl(ctx, nil, "-n", ns, "describe", "pod", name)
	logs, err := c.Kubectl(ctx, nil, "-n", ns, "logs", name)
	if err != nil {
		logs = err.Error()
	}
	return fmt.Sprintf("--- describe %s/%s\n%s\n--- logs\n%s", ns, name, desc, logs)
}
