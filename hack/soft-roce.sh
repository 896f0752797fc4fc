#!/usr/bin/env bash
# make soft-roce: gives every node of kind cluster NAME (default conflux) a soft-RoCE
# device, where the host kernel has the rdma_rxe module.
#
#   hack/soft-roce.sh [NAME]
#
# For each node container: `rdma link add rxe_<node> type rxe netdev eth0`, run in the
# node's network namespace (so the rxe device sits on the node's own eth0), then the
# host's /dev/infiniband character devices are created inside the node (same
# major:minor; the node's device cgroup admits them) so pods on it can open uverbs.
# Where the kernel has no rdma_rxe (modprobe fails) or the rdma tool is missing, it says
# so and why, changes nothing, and exits 0: RDMA tests then fall back to TCP.
# Idempotent: existing links and device nodes are left alone.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

NAME=${1:-conflux}
[ -n "$NAME" ] || NAME=conflux

skip() {
  printf 'soft-roce: SKIPPED on this host: %s\n' "$1"
  printf 'soft-roce: the cluster has no RDMA devices; Conflux uses TCP between nodes.\n'
  exit 0
}

step "soft-RoCE for cluster '$NAME'"
command -v rdma >/dev/null || skip "the 'rdma' tool (iproute2) is not installed"
command -v nsenter >/dev/null || skip "nsenter (util-linux) is not installed"

if [ ! -d /sys/module/rdma_rxe ]; then
  modprobe=$(command -v modprobe || echo /sbin/modprobe)
  if [ ! -x "$modprobe" ]; then
    skip "rdma_rxe is not loaded and modprobe is not installed (Debian package kmod)"
  fi
  if ! err=$("$modprobe" rdma_rxe 2>&1); then
    skip "'modprobe rdma_rxe' failed: ${err:-exit status $?}"
  fi
  info "loaded rdma_rxe"
fi

nodes=$(docker ps --filter "label=io.x-k8s.kind.cluster=$NAME" --format '{{.Names}}' | sort)
[ -n "$nodes" ] || die "no running nodes for cluster '$NAME' (hack/cluster.sh up $NAME)"

for node in $nodes; do
  pid=$(docker inspect -f '{{.State.Pid}}' "$node")
  link=rxe_${node//-/_}
  if nsenter -t "$pid" -n rdma link show 2>/dev/null | grep -q "link $link/"; then
    info "$node: $link exists"
  else
    nsenter -t "$pid" -n rdma link add "$link" type rxe netdev eth0 ||
      die "$node: rdma link add $link type rxe netdev eth0 failed"
    info "$node: added $link on eth0"
  fi
  if [ -d /dev/infiniband ]; then
    docker exec "$node" mkdir -p /dev/infiniband
    for dev in /dev/infiniband/*; do
      [ -c "$dev" ] || continue
      majmin=$(stat -c '%t %T' "$dev")
      read -r maj min <<<"$majmin"
      docker exec "$node" sh -c "[ -c '$dev' ] || { mknod '$dev' c $((16#$maj)) $((16#$min)) && chmod 666 '$dev'; }"
    done
    info "$node: /dev/infiniband: $(docker exec "$node" ls /dev/infiniband | tr '\n' ' ')"
  else
    warn "$node: the host has no /dev/infiniband (is ib_uverbs loaded?)"
  fi
done
step_done
