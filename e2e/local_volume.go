package e2e

import (
	"context"
	"fmt"
	"path"
	"strings"
)

// LocalVolume is a static `local` PersistentVolume on one kind node, pre-bound to one claim.
//
// Why not the cluster's default StorageClass: kind's fallback class here ("standard",
// kubernetes.io/host-path) provisions hostPath volumes, and the kubelet applies a pod's
// fsGroup to local volumes but not to hostPath ones, so a non-root space server
// (confluxd runs as 65532) cannot write to them. A local volume gets the fsGroup, as a
// CSI volume would in a real cluster.
type LocalVolume struct {
	Name  string // PersistentVolume name, also its storageClassName (no StorageClass object is needed for static binding)
	Node  string // kind node (= its docker container) holding the directory
	Path  string // directory on the node
	Size  string // capacity, e.g. "64Mi"
	Claim string // namespace/name of the only claim that may bind it
}

// CreateLocalVolume makes the directory on the node (docker exec) and the PV.
func CreateLocalVolume(ctx context.Context, c *Cluster, v LocalVolume) error {
	if _, err := Run(ctx, nil, "docker", "exec", v.Node, "mkdir", "-p", v.Path); err != nil {
		return fmt.Errorf("directory %s on node %s: %w", v.Path, v.Node, err)
	}
	ns, claim := path.Split(v.Claim)
	manifest := fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata:
  name: %s
  labels:
    app.kubernetes.io/part-of: conflux-e2e
spec:
  capacity:
    storage: %s
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: %s
  claimRef:
    namespace: %s
    name: %s
  local:
    path: %s
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - key: kubernetes.io/hostname
          operator: In
          values: [%s]
`, v.Name, v.Size, v.Name, path.Clean(ns), claim, v.Path, v.Node)
	if _, err := c.Kubectl(ctx, []byte(manifest), "apply", "-f", "-"); err != nil {
		return fmt.Errorf("persistent volume %s: %w", v.Name, err)
	}
	return nil
}

// Delete removes the PV and the node's directory (whatever was written in it).
func (v LocalVolume) Delete(ctx context.Context, c *Cluster) error {
	_, err := c.Kubectl(ctx, nil, "delete", "pv", v.Name, "--ignore-not-found", "--wait=false")
	if v.Node == "" || v.Path == "" {
		return err
	}
	if _, rerr := Run(ctx, nil, "docker", "exec", v.Node, "rm", "-rf", v.Path); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// ExistingLocalVolume reads back the node and directory of a PV made by CreateLocalVolume
// (to remove what an interrupted run left); Node and Path are empty when there is no PV.
func ExistingLocalVolume(ctx context.Context, c *Cluster, name string) LocalVolume {
	out, _ := c.Kubectl(ctx, nil, "get", "pv", name, "--ignore-not-found", "-o",
		`jsonpath={.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]} {.spec.local.path}`)
	v := LocalVolume{Name: name}
	if f := strings.Fields(out); len(f) == 2 {
		v.Node, v.Path = f[0], f[1]
	}
	return v
}

// Files lists a directory of the volume on its node (relative to Path).
func (v LocalVolume) Files(ctx context.Context, dir string) (string, error) {
	return Run(ctx, nil, "docker", "exec", v.Node, "ls", "-A", path.Join(v.Path, dir))
}
