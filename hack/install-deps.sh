#!/usr/bin/env bash
# make deps: installs everything Conflux needs on a fresh Debian 12 machine, from Debian's
# packages and the Go module proxy only. Idempotent: each step checks before it works.
#   hack/install-deps.sh            all steps
#   hack/install-deps.sh apt        only the Debian packages
#   hack/install-deps.sh limits     only the host's inotify limits (kind nodes need more)
#   hack/install-deps.sh go-tools   only the Go tools (controller-gen, helm, kind, setup-envtest-free assets)
#   hack/install-deps.sh k8s        only the Kubernetes binaries built from k8s.io/kubernetes
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# Debian packages, grouped by what needs them.
APT_PACKAGES=(
  # C toolchain and data-plane libraries
  build-essential pkg-config clang llvm libclang-rt-14-dev
  libdpdk-dev dpdk libucx-dev ucx-utils libssl-dev liburing-dev libnuma-dev
  # test and benchmark peers
  iperf3 sockperf libprotobuf-c-dev protobuf-c-compiler libmsgpack-dev libexpat1-dev
  omniorb omniidl libomniorb4-dev libzmq3-dev libopenmpi-dev openmpi-bin nats-server
  valgrind
  # network namespaces, netem, RDMA user space
  iproute2 iptables ethtool socat rdma-core ibverbs-utils kmod
  # Kubernetes: envtest's etcd, the kind node image's parts
  etcd-server debootstrap containerd runc containernetworking-plugins conntrack
  # Python bindings and tests
  python3-pytest python3-cffi python3-numpy
  # make dist: the Python wheel, built offline (packaging/wheel.sh); dpkg-shlibdeps
  python3-pip python3-setuptools python3-wheel dpkg-dev
  # docs/check-examples.sh: manifests checked against the CRDs
  python3-yaml
  # bench/report: the plots
  python3-matplotlib
  # scripts
  jq curl ca-certificates git make
)

install_apt() {
  step "Debian packages (${#APT_PACKAGES[@]})"
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed' || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then info "all installed"; step_done; return; fi
  info "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  local sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -q
  # containerd is only a part of the kind node image; keep the host's docker untouched.
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
  step_done
}

# Go tools built from modules into $CONFLUX_BIN. Versions pinned here, in one place.
CONTROLLER_GEN_VERSION=v0.19.0
HELM_VERSION=v3.19.0
KIND_VERSION=v0.30.0

go_install() { # name module@version
  local name=$1 mod=$2 stamp="$CONFLUX_BIN/.$1.version"
  if [ -x "$CONFLUX_BIN/$name" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$mod" ]; then
    info "$name: $mod (cached)"; return
  fi
  info "$name: building $mod"
  GOBIN=$CONFLUX_BIN go install "$mod"
  echo "$mod" > "$stamp"
}

install_go_tools() {
  step "Go tools"
  command -v go >/dev/null || die "go not found: install Go 1.24+ first"
  go_install controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_GEN_VERSION
  go_install helm helm.sh/helm/v3/cmd/helm@$HELM_VERSION
  go_install kind sigs.k8s.io/kind@$KIND_VERSION
  step_done
}

# kind nodes run systemd, which takes inotify instances by the dozen; with Linux's default of
# 128 per user, a second cluster or an envtest manager (certwatcher) then fails with "too many
# open files". Raise the limits (never lower them) for this boot.
raise_host_limits() {
  step "host limits (inotify)"
  local key want have
  for kv in fs.inotify.max_user_instances=8192 fs.inotify.max_user_watches=1048576; do
    key=${kv%=*}; want=${kv#*=}; have=$(sysctl -n "$key")
    if [ "$have" -lt "$want" ]; then
      sysctl -q -w "$key=$want" || warn "could not raise $key ($have < $want): e2e may fail"
    fi
    info "$key = $(sysctl -n "$key")"
  done
  step_done
}

install_k8s() {
  step "Kubernetes binaries (hack/build-k8s.sh)"
  "$CONFLUX_ROOT/hack/build-k8s.sh"
  step_done
}

what=${1:-all}
case $what in
  apt) install_apt ;;
  go-tools) install_go_tools ;;
  k8s) install_k8s ;;
  limits) raise_host_limits ;;
  all) install_apt; raise_host_limits; install_go_tools; install_k8s ;;
  *) die "unknown step '$what' (apt, limits, go-tools, k8s, all)" ;;
esac
printf '\nConflux dependencies ready. Tools in %s\n' "$CONFLUX_BIN"
