#!/usr/bin/env bash
# make node-image: builds the kind node image conflux/kind-node:<k8s version> and every
# image kubeadm runs on it, on this machine, with no pull from any container registry.
#
#   1. Debian 12 base: debootstrap from the configured Debian mirror, cached as a tarball
#      in $CONFLUX_CACHE/kind, imported as conflux/debian-base:bookworm.
#   2. binaries: Kubernetes (hack/build-k8s.sh), coredns (Go module), pause (pause.c),
#      etcd (Debian's etcd-server).
#   3. control-plane images (images/Dockerfile), tagged registry.k8s.io/... as kubeadm
#      expects; etcd is tagged with Debian's etcd version (cluster.sh tells kubeadm).
#   4. the node image (node/Dockerfile), then the control-plane images are imported into
#      its containerd in a running container that is committed as the final image.
# Every step is skipped when its inputs are unchanged (a hash stored as an image label).
#
# Environment: DEBIAN_MIRROR (default: the host's apt mirror), COREDNS_VERSION,
# CONFLUX_NODE_IMAGE (default conflux/kind-node:<version>), FORCE=1 rebuilds everything.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

HERE=$CONFLUX_ROOT/hack/kind
K8S_VERSION=$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$CONFLUX_ROOT/hack/k8s/go.mod")
K8S_BIN=$CONFLUX_CACHE/k8s/$K8S_VERSION/bin
KIND_CACHE=$CONFLUX_CACHE/kind
CTX=$KIND_CACHE/context
BASE_IMAGE=conflux/debian-base:bookworm
NODE_IMAGE=${CONFLUX_NODE_IMAGE:-conflux/kind-node:$K8S_VERSION}
COREDNS_VERSION=${COREDNS_VERSION:-v1.12.1}
LABEL=dev.conflux.inputs
export DOCKER_BUILDKIT=0 # the classic builder: no buildx plugin, no frontend image to pull
mkdir -p "$KIND_CACHE" "$CTX/bin"

command -v docker >/dev/null || die "docker not found"
docker info >/dev/null 2>&1 || die "cannot talk to the docker daemon"

# image_label image -> the inputs hash the image was built from ("" if absent)
image_label() { docker image inspect -f "{{ index .Config.Labels \"$LABEL\" }}" "$1" 2>/dev/null || true; }
up_to_date() { [ -z "${FORCE:-}" ] && [ "$(image_label "$1")" = "$2" ]; }
hash_files() { cat "$@" | sha256sum | cut -c1-16; }
# hash_tree dir: content and names of every file under dir
hash_tree() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-16; }

# dbuild args...: docker build, quiet; on failure print its output (less the legacy
# builder's deprecation notice) and stop.
dbuild() {
  local out
  if ! out=$(docker build -q "$@" 2>&1); then
    grep -vE 'DEPRECATED|BuildKit is currently|environment-variable' <<<"$out" >&2
    die "docker build $* failed"
  fi
}

debian_mirror() {
  if [ -n "${DEBIAN_MIRROR:-}" ]; then echo "$DEBIAN_MIRROR"; return; fi
  local m
  m=$(awk '/^URIs:/ && $2 ~ /debian\/?$/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  [ -n "$m" ] || m=$(awk '$1=="deb" && $3=="bookworm" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  echo "${m:-http://deb.debian.org/debian}"
}

# --- 1. Debian base -------------------------------------------------------------------
BASE_PACKAGES=ca-certificates,iptables,conntrack
build_base() {
  step "Debian 12 base ($BASE_IMAGE)"
  local tarball=$KIND_CACHE/debian-bookworm-base.tar.gz mirror
  mirror=$(debian_mirror)
  if [ ! -s "$tarball" ] || [ -n "${FORCE:-}" ]; then
    command -v debootstrap >/dev/null || die "debootstrap not found: hack/install-deps.sh apt"
    [ "$(id -u)" -eq 0 ] || die "debootstrap needs root"
    local root
    root=$(mktemp -d "$KIND_CACHE/rootfs.XXXXXX")
    trap 'rm -rf "$root"' EXIT
    info "debootstrap bookworm from $mirror (minbase + $BASE_PACKAGES)"
    debootstrap --variant=minbase --include="$BASE_PACKAGES" bookworm "$root" "$mirror" \
      >"$KIND_CACHE/debootstrap.log" 2>&1 || die "debootstrap failed, see $KIND_CACHE/debootstrap.log"
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    echo "deb $mirror bookworm main" >"$root/etc/apt/sources.list"
    tar -C "$root" --numeric-owner -czf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
    rm -rf "$root"; trap - EXIT
    info "cached $(du -h "$tarball" | cut -f1) tarball: $tarball"
  else
    info "tarball cached: $tarball"
  fi
  local h
  h=$(hash_files "$tarball")
  if up_to_date "$BASE_IMAGE" "$h"; then info "image up to date"; step_done; return; fi
  docker import --change "LABEL $LABEL=$h" --change 'CMD ["/bin/bash"]' "$tarball" "$BASE_IMAGE" >/dev/null
  info "imported $BASE_IMAGE"
  step_done
}

# --- 2. binaries ----------------------------------------------------------------------
build_binaries() {
  step "binaries"
  local b
  for b in kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubeadm kubectl; do
    [ -x "$K8S_BIN/$b" ] || { info "missing $b: running hack/build-k8s.sh"; "$CONFLUX_ROOT/hack/build-k8s.sh" >/dev/null; break; }
  done
  for b in kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubeadm kubectl; do
    [ -x "$K8S_BIN/$b" ] || die "$K8S_BIN/$b missing after hack/build-k8s.sh"
    cp -p "$K8S_BIN/$b" "$CTX/bin/$b.tmp" && mv "$CTX/bin/$b.tmp" "$CTX/bin/$b"
  done
  info "kubernetes $K8S_VERSION: $K8S_BIN"

  # pause: our own C program, static so the image can be FROM scratch
  local pause=$KIND_CACHE/bin/pause src=$HERE/images/pause.c
  mkdir -p "$KIND_CACHE/bin"
  if [ ! -x "$pause" ] || [ "$src" -nt "$pause" ]; then
    gcc -static -O2 -Wall -Wextra -Werror -o "$pause" "$src"
    info "pause: built from $src"
  else info "pause: cached"; fi
  cp -p "$pause" "$CTX/bin/pause"

  # coredns from the Go module proxy, static
  local coredns=$KIND_CACHE/bin/coredns stamp=$KIND_CACHE/bin/.coredns.version
  if [ -x "$coredns" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$COREDNS_VERSION" ]; then
    info "coredns $COREDNS_VERSION: cached"
  else
    info "coredns $COREDNS_VERSION: building from github.com/coredns/coredns (a few minutes)"
    local t0; t0=$(date +%s)
    CGO_ENABLED=0 GOBIN=$KIND_CACHE/bin GOFLAGS=-p=2 go install -trimpath -ldflags "-s -w" \
      "github.com/coredns/coredns@$COREDNS_VERSION"
    echo "$COREDNS_VERSION" >"$stamp"
    info "coredns built in $(( $(date +%s) - t0 ))s"
  fi
  cp -p "$coredns" "$CTX/bin/coredns"

  # etcd from Debian's etcd-server
  local etcd
  etcd=$(command -v etcd) || die "etcd not found: hack/install-deps.sh apt (etcd-server)"
  cp -pL "$etcd" "$CTX/bin/etcd"
  ETCD_VERSION=$("$etcd" --version | awk '/^etcd Version:/ {print $3}')
  [ -n "$ETCD_VERSION" ] || die "cannot read the etcd version from $etcd --version"
  info "etcd $ETCD_VERSION: $etcd"
  step_done
}

# --- 3. control-plane images ----------------------------------------------------------
CP_IMAGES=() # filled by build_cp_images: the names preloaded into the node
ETCD_TAG=""  # the etcd image tag (Debian's version); kubeadm must be told to use it
build_cp_images() {
  step "control-plane images"
  cp -p "$HERE/images/kube-proxy-wrapper" "$CTX/kube-proxy-wrapper"
  local expected
  expected=$("$K8S_BIN/kubeadm" config images list --kubernetes-version "$K8S_VERSION" 2>/dev/null) ||
    die "kubeadm config images list failed"
  local base_id
  base_id=$(docker image inspect -f '{{.Id}}' "$BASE_IMAGE")
  local name stage tag h files n=0
  local total
  total=$(echo "$expected" | wc -l)
  for name in $expected; do
    n=$((n + 1))
    stage=${name##*/}; stage=${stage%%:*}
    tag=$name
    files=("$HERE/images/Dockerfile")
    case $stage in
      pause) files+=("$CTX/bin/pause") ;;
      coredns) files+=("$CTX/bin/coredns") ;;
      etcd) files+=("$CTX/bin/etcd"); ETCD_TAG=$ETCD_VERSION-0; tag=${name%%:*}:$ETCD_TAG ;;
      kube-proxy) files+=("$CTX/bin/kube-proxy" "$CTX/kube-proxy-wrapper") ;;
      kube-*) files+=("$CTX/bin/$stage") ;;
      *) die "kubeadm expects an image this script cannot build: $name" ;;
    esac
    h=$( { hash_files "${files[@]}"; echo "$base_id"; } | sha256sum | cut -c1-16)
    CP_IMAGES+=("$tag")
    if up_to_date "$tag" "$h"; then info "[$n/$total] $tag (up to date)"; continue; fi
    info "[$n/$total] building $tag"
    dbuild -f "$HERE/images/Dockerfile" --target "$stage" --build-arg "BASE=$BASE_IMAGE" \
      --label "$LABEL=$h" -t "$tag" "$CTX"
  done
  step_done
}

# --- 4. node image --------------------------------------------------------------------
build_node() {
  step "node image $NODE_IMAGE"
  rm -rf "$CTX/node-files"; cp -a "$HERE/node/files" "$CTX/node-files"
  local ids h
  ids=$(for i in "$BASE_IMAGE" "${CP_IMAGES[@]}"; do docker image inspect -f '{{.Id}}' "$i"; done)
  h=$( { hash_tree "$HERE/node"; hash_files "$CTX/bin/kubelet" "$CTX/bin/kubeadm" "$CTX/bin/kubectl";
         echo "$ids"; } | sha256sum | cut -c1-16)
  if up_to_date "$NODE_IMAGE" "$h"; then info "up to date"; step_done; return; fi

  local stage1=$NODE_IMAGE-stage1
  info "docker build (Debian packages, kubelet, kubeadm, kubectl) -> $stage1"
  dbuild -f "$HERE/node/Dockerfile" --build-arg "BASE=$BASE_IMAGE" -t "$stage1" "$CTX"

  info "saving ${#CP_IMAGES[@]} control-plane images"
  docker save -o "$KIND_CACHE/cp-images.tar" "${CP_IMAGES[@]}"

  info "preloading them into the node's containerd"
  local c
  # not --privileged: it fails where dockerd lacks a capability (see docker-shim)
  c=$(docker run -d --cap-add=ALL --cap-drop=SYS_RESOURCE --entrypoint=sleep -v "$KIND_CACHE/cp-images.tar:/kind/cp-images.tar:ro" \
      "$stage1" infinity)
  # shellcheck disable=SC2064
  trap "docker rm -f $c >/dev/null 2>&1 || true" EXIT
  docker exec "$c" bash -c '
    set -e
    containerd >/tmp/containerd.log 2>&1 &
    for i in $(seq 1 50); do ctr version >/dev/null 2>&1 && break; sleep 0.2; done
    ctr -n k8s.io images import --no-unpack --all-platforms --digests /kind/cp-images.tar >/dev/null
    ctr -n k8s.io images list -q | grep -v "sha256:" | sed "s/^/      /"
    kill %1; wait || true
    rm -rf /tmp/* /var/lib/containerd/tmpmounts/* /run/containerd'
  local old_id
  old_id=$(docker image inspect -f '{{.Id}}' "$NODE_IMAGE" 2>/dev/null || true)
  docker commit \
    --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
    --change 'CMD []' \
    --change "LABEL $LABEL=$h" \
    --change "LABEL dev.conflux.etcd-tag=$ETCD_TAG" \
    --change "LABEL dev.conflux.k8s-version=$K8S_VERSION" \
    "$c" "$NODE_IMAGE" >/dev/null
  docker rm -f "$c" >/dev/null; trap - EXIT
  rm -f "$KIND_CACHE/cp-images.tar"
  docker rmi "$stage1" >/dev/null 2>&1 || true
  # the previous node image, now untagged (kept if a cluster still runs it)
  [ -n "$old_id" ] && docker rmi "$old_id" >/dev/null 2>&1 || true
  info "built $NODE_IMAGE ($(docker image inspect -f '{{.Size}}' "$NODE_IMAGE" | awk '{printf "%.0f MB", $1/1e6}'))"
  step_done
}

t_all=$(date +%s)
build_base
build_binaries
build_cp_images
build_node
printf '\nnode image %s ready in %ss\n' "$NODE_IMAGE" "$(( $(date +%s) - t_all ))"
