#!/usr/bin/env bash
# Builds the Kubernetes v1.34 binaries from the k8s.io/kubernetes Go module (hack/k8s/go.mod,
# one replace line per staging module) into $CONFLUX_CACHE/k8s/<version>/bin, and lays out
# the envtest assets (kube-apiserver + Debian's etcd + kubectl) in .../envtest.
#   hack/build-k8s.sh                 every binary
#   hack/build-k8s.sh kube-apiserver  only the named ones
# Prints the envtest folder last, for KUBEBUILDER_ASSETS.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

MODDIR=$CONFLUX_ROOT/hack/k8s
VERSION=$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$MODDIR/go.mod")
[ -n "$VERSION" ] || die "cannot read the k8s.io/kubernetes version from $MODDIR/go.mod"
OUT=$CONFLUX_CACHE/k8s/$VERSION
mkdir -p "$OUT/bin" "$OUT/envtest"

ALL=(kube-apiserver kubectl kubelet kubeadm kube-controller-manager kube-scheduler kube-proxy)
wanted=("$@"); [ ${#wanted[@]} -gt 0 ] || wanted=("${ALL[@]}")

# kubeadm compares versions, so stamp them as the release build does.
major=${VERSION#v}; major=${major%%.*}; minor=$(echo "$VERSION" | cut -d. -f2)
pkgs="k8s.io/component-base/version k8s.io/client-go/pkg/version"
ldflags="-s -w"
for p in $pkgs; do
  ldflags+=" -X $p.gitVersion=$VERSION -X $p.gitMajor=$major -X $p.gitMinor=$minor"
  ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done

n=0
for cmd in "${wanted[@]}"; do
  n=$((n+1))
  bin=$OUT/bin/$cmd
  if [ -x "$bin" ]; then info "[$n/${#wanted[@]}] $cmd $VERSION (cached)"; continue; fi
  info "[$n/${#wanted[@]}] building $cmd $VERSION"
  t0=$(date +%s)
  (cd "$MODDIR" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$bin.tmp" "k8s.io/kubernetes/cmd/$cmd")
  mv "$bin.tmp" "$bin"
  info "    $cmd built in $(( $(date +%s) - t0 ))s"
done

# envtest: the API server from the module, etcd from Debian (etcd-server), kubectl.
[ -x "$OUT/bin/kube-apiserver" ] && ln -sf "$OUT/bin/kube-apiserver" "$OUT/envtest/kube-apiserver"
[ -x "$OUT/bin/kubectl" ] && ln -sf "$OUT/bin/kubectl" "$OUT/envtest/kubectl"
if command -v etcd >/dev/null; then ln -sf "$(command -v etcd)" "$OUT/envtest/etcd"
else warn "etcd not found: run 'hack/install-deps.sh apt' (etcd-server) for envtest"; fi
echo "$OUT/envtest"
