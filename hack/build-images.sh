#!/usr/bin/env bash
# make images: builds the Conflux container images on this machine, with no pull from any
# registry (both start FROM scratch):
#
#   conflux/operator   the manager (operator/cmd), static, CGO_ENABLED=0
#   conflux/confluxd   confluxd and the conflux CLI (dataplane/build/bin) with exactly the
#                      shared libraries ldd lists for them, copied from this (Debian 12) host
#   conflux/demo       the demo's components (demo/, `make demo`), built the same way
#
#   hack/build-images.sh [--load CLUSTER] [operator|confluxd|demo]...   (default: operator, confluxd)
#
# Each image gets two tags: <repo>:<chart appVersion> (what the chart's defaults name) and
# <repo>:dev-<hash of its contents> (what tests pin). An image whose contents did not change
# is not rebuilt (the hash is also the image label dev.conflux.inputs); FORCE=1 rebuilds.
# --load loads both tags into the kind cluster CLUSTER (hack/cluster.sh load). The last
# lines printed are machine-readable, one per image: "image <name> <repo>:dev-<hash>".
# Environment: CONFLUX_IMAGE_PREFIX (default "conflux/").
set -euo pipefail
source "$(dirname "$0")/lib.sh"

IMAGES_DIR=$CONFLUX_ROOT/images
WORK=$CONFLUX_CACHE/images
PREFIX=${CONFLUX_IMAGE_PREFIX:-conflux/}
LABEL=dev.conflux.inputs
export DOCKER_BUILDKIT=0 # the classic builder: no buildx plugin, no frontend image to pull

load_cluster=""
names=()
while [ $# -gt 0 ]; do
  case $1 in
    --load) [ -n "${2:-}" ] || die "--load needs a cluster name"; load_cluster=$2; shift 2 ;;
    operator|confluxd|demo) names+=("$1"); shift ;;
    *) die "usage: hack/build-images.sh [--load CLUSTER] [operator|confluxd|demo]..." ;;
  esac
done
[ ${#names[@]} -gt 0 ] || names=(operator confluxd)

# one build at a time on this machine (the contexts under $WORK are rebuilt in place)
mkdir -p "$WORK"
exec 9>"$WORK/.lock"
flock 9

command -v docker >/dev/null || die "docker not found"
docker info >/dev/null 2>&1 || die "cannot talk to the docker daemon"
APP_VERSION=$(awk '$1=="appVersion:" {gsub(/"/, "", $2); print $2}' "$CONFLUX_ROOT/charts/conflux/Chart.yaml")
[ -n "$APP_VERSION" ] || die "no appVersion in charts/conflux/Chart.yaml"

# hash_tree dir: names, modes, symlink targets and contents of everything under dir
hash_tree() {
  (cd "$1" && find . \( -type f -o -type l \) -printf '%p %m %l\n' | sort &&
    find . -type f -print0 | sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-12
}

# build NAME CONTEXT_DIR: docker build of images/NAME/Dockerfile over CONTEXT_DIR, tagged
# with the context's hash and the appVersion; skipped when that hash is already built.
built=()
build() {
  local name=$1 ctx=$2 repo=$PREFIX$1 hash out
  cp "$IMAGES_DIR/$name/Dockerfile" "$ctx/Dockerfile"
  hash=$(hash_tree "$ctx")
  if [ -z "${FORCE:-}" ] && [ "$(docker image inspect -f "{{ index .Config.Labels \"$LABEL\" }}" "$repo:dev-$hash" 2>/dev/null)" = "$hash" ]; then
    info "$repo:dev-$hash is up to date"
  else
    if ! out=$(docker build -q --label "$LABEL=$hash" -t "$repo:dev-$hash" "$ctx" 2>&1); then
      grep -vE 'DEPRECATED|BuildKit is currently|environment-variable' <<<"$out" >&2
      die "docker build of $repo failed"
    fi
    info "built $repo:dev-$hash ($(docker image inspect -f '{{.Size}}' "$repo:dev-$hash" | numfmt --to=iec))"
  fi
  docker tag "$repo:dev-$hash" "$repo:$APP_VERSION"
  # older dev- tags of this repo are dropped (images still used by a container stay)
  docker image ls --format '{{.Repository}}:{{.Tag}}' "$repo" | grep ":dev-" | grep -v ":dev-$hash\$" |
    xargs -r docker rmi >/dev/null 2>&1 || true
  built+=("$name $repo:dev-$hash $repo:$APP_VERSION")
}

# --- operator ---------------------------------------------------------------------------
build_operator() {
  step "operator image"
  local ctx=$WORK/operator
  rm -rf "$ctx" && mkdir -p "$ctx"
  (cd "$CONFLUX_ROOT/operator" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$ctx/manager" ./cmd) ||
    die "go build of the operator failed"
  build operator "$ctx"
  step_done
}

# --- confluxd ---------------------------------------------------------------------------
# copy_with_libs ROOTFS FILE...: every shared library ldd lists for FILE (and the dynamic
# loader), at its real path under ROOTFS, plus the symlinks by which FILE finds it (soname
# links, /lib64/ld-linux...). The host is Debian 12 with merged /usr, so the real paths are
# under /usr and the top-level lib, lib64, bin links are recreated as on the host.
copy_with_libs() {
  local root=$1 f line lib real dir link
  shift
  for f in "$@"; do
    while read -r line; do
      lib=""
      case $line in
        *" => not found"*) die "ldd $f: ${line%% *} not found" ;;
        *" => /"*) lib=${line#* => }; lib=${lib%% (*} ;;
        /*) lib=${line%% (*} ;; # the loader
      esac
      [ -n "$lib" ] || continue
      case $lib in "$root"/*) continue ;; esac # shipped in the image already ($ORIGIN rpath)
      real=$(realpath "$lib")
      [ -e "$root$real" ] || { mkdir -p "$root$(dirname "$real")"; cp "$real" "$root$real"; }
      dir=$(realpath "$(dirname "$lib")")
      link=$dir/$(basename "$lib")
      if [ "$link" != "$real" ] && [ ! -e "$root$link" ]; then
        mkdir -p "$root$dir"
        if [ "$(dirname "$real")" = "$dir" ]; then ln -s "$(basename "$real")" "$root$link"; else ln -s "$real" "$root$link"; fi
      fi
    done < <(ldd "$f")
  done
  for link in lib lib64 bin sbin; do
    if [ -L "/$link" ] && [ -e "$root/$(readlink "/$link")" ] && [ ! -e "$root/$link" ]; then
      ln -s "$(readlink "/$link")" "$root/$link"
    fi
  done
}

build_confluxd() {
  step "confluxd image"
  local bin=$CONFLUX_ROOT/dataplane/build/bin ctx=$WORK/confluxd root
  make -s -C "$CONFLUX_ROOT/dataplane" -j2 bin >/dev/null || die "make -C dataplane bin failed"
  rm -rf "$ctx" && mkdir -p "$ctx/rootfs/usr/bin"
  root=$ctx/rootfs
  install -m 0755 "$bin/confluxd" "$bin/conflux" "$root/usr/bin/"
  copy_with_libs "$root" "$root/usr/bin/confluxd" "$root/usr/bin/conflux"
  cp -r "$IMAGES_DIR/confluxd/files/." "$root/"
  # /tmp, and the store directory (a volume in Kubernetes) apart: the Dockerfile gives it
  # to the non-root user (COPY --chown applies to what is under the source directory)
  mkdir -p "$root/tmp" "$ctx/state/conflux"
  chmod 1777 "$root/tmp"
  info "rootfs: 2 programs, $(find "$root" -name '*.so*' -type f | wc -l) libraries, $(du -sh "$root" | cut -f1)"
  build confluxd "$ctx"
  # the image must run: the loader finds every library (usage on stdout, exit 0)
  local out
  out=$(docker run --rm --network none "${PREFIX}confluxd:$APP_VERSION" --help 2>&1) ||
    die "confluxd does not run in its image: $out"
  grep -q 'usage: confluxd' <<<"$out" || die "confluxd --help in its image printed: $out"
  out=$(docker run --rm --network none --entrypoint /usr/bin/conflux "${PREFIX}confluxd:$APP_VERSION" --help 2>&1) ||
    die "conflux does not run in the confluxd image: $out"
  step_done
}

# --- demo -------------------------------------------------------------------------------
build_demo() {
  step "demo image"
  local ctx=$WORK/demo root
  make -s -C "$CONFLUX_ROOT/demo" >/dev/null || die "make -C demo failed"
  rm -rf "$ctx" && mkdir -p "$ctx/rootfs/usr/bin" "$ctx/rootfs/usr/lib"
  root=$ctx/rootfs
  install -m 0755 "$CONFLUX_ROOT"/demo/build/bin/demo-* "$root/usr/bin/"
  # the SDK's libconflux, which the programs find in ../lib: through the pod's sidecar
  install -m 0644 "$CONFLUX_ROOT/demo/build/lib/libconflux.so.0" "$root/usr/lib/"
  copy_with_libs "$root" "$root"/usr/bin/demo-*
  cp -r "$IMAGES_DIR/confluxd/files/." "$root/" # the same non-root user and nsswitch.conf
  mkdir -p "$root/tmp" && chmod 1777 "$root/tmp"
  build demo "$ctx"
  local out
  out=$(docker run --rm --network none --entrypoint /usr/bin/demo-sink "${PREFIX}demo:$APP_VERSION" 2>&1) && die "demo-sink ran without CONFLUX_SPACE"
  grep -q 'CONFLUX_SPACE is not set' <<<"$out" || die "demo-sink in its image printed: $out"
  step_done
}

for n in "${names[@]}"; do "build_$n"; done

if [ -n "$load_cluster" ]; then
  for b in "${built[@]}"; do
    read -r _ dev app <<<"$b"
    "$CONFLUX_ROOT/hack/cluster.sh" load "$dev" "$load_cluster"
    "$CONFLUX_ROOT/hack/cluster.sh" load "$app" "$load_cluster"
  done
fi
for b in "${built[@]}"; do
  read -r name dev _ <<<"$b"
  echo "image $name $dev"
done
