#!/usr/bin/env bash
# make wan / make wan-down: two kind clusters joined over an emulated WAN link.
#
#   hack/wan.sh join A B [--delay 20ms] [--loss 1%]   join clusters A and B (again: new values)
#   hack/wan.sh leave A B                             remove everything join added
#   hack/wan.sh status A B                            show it, node by node
#
# Both clusters' nodes sit on docker's `kind` network and reach each other; cluster.sh gives
# each cluster its own pod subnet. join makes, in every node of A (and the same in B):
#   - routes "B's node podCIDR via that B node" (proto 147), so pod IPs route across;
#   - a tun device cxwan0 served by conflux-wanem (hack/wan: holds each packet for the
#     delay, drops the loss share at random, writes the rest back in order), because this
#     kernel has no sch_netem;
#   - mangle chain CONFLUX-WAN: packets from A's pods to B's pods get fwmark 0x10000, and
#     rule "fwmark 0x10000/0x10000 lookup 147" (table 147: default dev cxwan0) sends them
#     through the delay line; what comes back out of cxwan0 is routed on by the main table;
#   - nat chain CONFLUX-WAN-NAT, ahead of conflux-cni's masquerade: A's pods to B's pods
#     keep their source address (pod IPs are preserved across clusters);
#   - raw chain CONFLUX-WAN-RAW: packets coming back out of cxwan0 are not tracked again.
# Each direction is delayed once, at the sender's node: the round trip between the
# clusters' pods is twice the delay. Traffic inside a cluster, and from the nodes
# themselves, is untouched. leave removes every route, rule, device, chain, file and process.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

KIND=$CONFLUX_BIN/kind
DEV=cxwan0
TABLE=147        # routing table, rule preference and route protocol of what join adds
MARK=0x10000     # a bit kube-proxy does not use (0x4000, 0x8000)
DEV_ADDR=169.254.147.147/32  # link-local, on each node's own device only
WANEM=$CONFLUX_BIN/conflux-wanem
IN_NODE=/usr/local/bin/conflux-wanem
PIDFILE=/run/conflux-wanem.pid
LOG=/var/log/conflux-wanem.log

usage() { die "usage: hack/wan.sh join|leave|status A B [--delay 20ms] [--loss 1%]"; }

cmd=${1:-}; A=${2:-}; B=${3:-}
[ -n "$cmd" ] && [ -n "$A" ] && [ -n "$B" ] || usage
[ "$A" != "$B" ] || die "clusters A and B must differ (both '$A')"
shift 3
DELAY=20ms LOSS=1%
while [ $# -gt 0 ]; do
  case $1 in
    --delay) DELAY=${2:-}; shift 2 ;;
    --delay=*) DELAY=${1#*=}; shift ;;
    --loss) LOSS=${2:-}; shift 2 ;;
    --loss=*) LOSS=${1#*=}; shift ;;
    *) usage ;;
  esac
done
[[ $DELAY =~ ^[0-9]+(\.[0-9]+)?(us|ms|s)$ ]] || die "--delay '$DELAY': a duration such as 20ms"
# loss: "1%" or a share "0.01"
if [[ $LOSS =~ ^([0-9]+(\.[0-9]+)?)%$ ]]; then
  LOSS_SHARE=$(awk -v p="${BASH_REMATCH[1]}" 'BEGIN { printf "%.6f", p / 100 }')
elif [[ $LOSS =~ ^0(\.[0-9]+)?$|^1$ ]]; then
  LOSS_SHARE=$LOSS
else
  die "--loss '$LOSS': a percentage such as 1% or a share such as 0.01"
fi
awk -v l="$LOSS_SHARE" 'BEGIN { exit !(l >= 0 && l <= 1) }' || die "--loss '$LOSS': at most 100%"

nodes() { "$KIND" get nodes --name "$1" 2>/dev/null | sort; }
node_ip() { docker inspect -f '{{ (index .NetworkSettings.Networks "kind").IPAddress }}' "$1"; }
pod_subnet() { "$CONFLUX_ROOT/hack/cluster.sh" config "$1" | awk -F'"' '/podSubnet:/ {print $2}'; }
# "podCIDR nodeIP" for every node of cluster $1 that has a podCIDR
pod_routes() {
  local cp=$1-control-plane line name cidr
  docker exec "$cp" kubectl --kubeconfig /etc/kubernetes/admin.conf --request-timeout=20s get nodes \
    -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.spec.podCIDR}{"\n"}{end}' |
  while read -r name cidr; do
    if [ -z "$cidr" ]; then warn "node $name of '$1' has no podCIDR yet: not routed"; continue; fi
    echo "$cidr $(node_ip "$name")"
  done
}

need_cluster() {
  [ -x "$KIND" ] || die "kind not found at $KIND: run hack/install-deps.sh go-tools"
  [ -n "$(nodes "$1")" ] || die "cluster '$1' has no nodes: hack/cluster.sh up $1"
}

build_wanem() {
  step "building conflux-wanem (static) into $WANEM"
  (cd "$CONFLUX_ROOT/hack/wan" && CGO_ENABLED=0 go build -trimpath -o "$WANEM" .)
  step_done
}

# Runs on a node (bash -s): removes whatever join added there. Safe to run twice.
LEAVE_NODE='
pid=$(cat '$PIDFILE' 2>/dev/null || true)
if [ -n "$pid" ] && [ "$(cat /proc/$pid/comm 2>/dev/null)" = conflux-wanem ]; then
  kill "$pid"
  for i in $(seq 50); do [ -d /proc/$pid ] || break; sleep 0.1; done
fi
rm -f '$PIDFILE' '$IN_NODE' '$LOG'
# /dev/net/tun, when join had to make it (a node started without --privileged)
if [ -e /run/conflux-wanem.mknod ]; then rm -f /dev/net/tun /run/conflux-wanem.mknod; rmdir /dev/net 2>/dev/null || true; fi
ip link del '$DEV' 2>/dev/null || true
while ip rule del pref '$TABLE' 2>/dev/null; do :; done
ip route flush table '$TABLE' 2>/dev/null || true
ip route flush proto '$TABLE' 2>/dev/null || true
for t in mangle:PREROUTING:CONFLUX-WAN nat:POSTROUTING:CONFLUX-WAN-NAT raw:PREROUTING:CONFLUX-WAN-RAW; do
  IFS=: read -r table hook chain <<<"$t"
  while iptables -t $table -D $hook -j $chain 2>/dev/null; do :; done
  iptables -t $table -F $chain 2>/dev/null || true
  iptables -t $table -X $chain 2>/dev/null || true
done
'

# Runs on a node (bash -s) with OWN FOREIGN ROUTES set: everything but the process.
JOIN_NODE='
set -e
while read -r cidr ip; do
  [ -n "$cidr" ] && ip route replace "$cidr" via "$ip" dev eth0 onlink proto '$TABLE'
done <<<"$ROUTES"
# reverse-path filtering: what comes back out of the device has a source routed elsewhere
# (the veth of the pod), so loose mode on it, and an address on it (an address-less device
# fails even the loose check)
sysctl -qw net.ipv4.conf.'$DEV'.rp_filter=2
ip addr add '$DEV_ADDR' dev '$DEV' scope link
ip route replace default dev '$DEV' table '$TABLE'
ip rule add fwmark '$MARK'/'$MARK' lookup '$TABLE' pref '$TABLE'
iptables -t mangle -N CONFLUX-WAN
iptables -t mangle -A CONFLUX-WAN -i '$DEV' -j RETURN
iptables -t mangle -A CONFLUX-WAN -s "$OWN" -d "$FOREIGN" -j MARK --set-xmark '$MARK'/'$MARK'
iptables -t mangle -I PREROUTING 1 -j CONFLUX-WAN
iptables -t nat -N CONFLUX-WAN-NAT
iptables -t nat -A CONFLUX-WAN-NAT -s "$OWN" -d "$FOREIGN" -j ACCEPT
iptables -t nat -I POSTROUTING 1 -j CONFLUX-WAN-NAT
iptables -t raw -N CONFLUX-WAN-RAW
iptables -t raw -A CONFLUX-WAN-RAW -i '$DEV' -j CT --notrack
iptables -t raw -I PREROUTING 1 -j CONFLUX-WAN-RAW
'

STATUS_NODE='
pid=$(cat '$PIDFILE' 2>/dev/null || true)
if [ -n "$pid" ] && [ "$(cat /proc/$pid/comm 2>/dev/null)" = conflux-wanem ]; then
  echo "process: conflux-wanem pid $pid: $(tail -n1 '$LOG' 2>/dev/null)"
fi
ip -br link show '$DEV' 2>/dev/null | sed "s/^/device: /" || true
ip rule show pref '$TABLE' | sed "s/^/rule: /"
ip route show table '$TABLE' 2>/dev/null | sed "s/^/table '$TABLE': /"
ip route show proto '$TABLE' | sed "s/^/route: /"
for t in mangle:CONFLUX-WAN nat:CONFLUX-WAN-NAT raw:CONFLUX-WAN-RAW; do
  iptables -t ${t%%:*} -S ${t#*:} 2>/dev/null | sed "s/^/${t%%:*}: /"
done
[ -e '$IN_NODE' ] && echo "file: '$IN_NODE'"
[ -e /run/conflux-wanem.mknod ] && echo "file: /dev/net/tun (made by join)"
true
'

leave() {
  local c n
  for c in "$A" "$B"; do
    for n in $(nodes "$c"); do
      docker exec -i "$n" bash -s <<<"$LEAVE_NODE" || warn "cleanup on $n failed"
      info "$n: left"
    done
  done
}

join_cluster() { # own foreign
  local own=$1 foreign=$2 own_net foreign_net routes n out
  own_net=$(pod_subnet "$own"); foreign_net=$(pod_subnet "$foreign")
  routes=$(pod_routes "$foreign")
  [ -n "$routes" ] || die "no node of '$foreign' has a podCIDR yet"
  step "cluster '$own': pods $own_net reach $foreign_net through $DEV (delay $DELAY, loss $LOSS)"
  for n in $(nodes "$own"); do
    docker exec -i "$n" bash -s <<<"$LEAVE_NODE"
    docker cp "$WANEM" "$n:$IN_NODE" >/dev/null
    # a node started without --privileged (hack/kind/docker-shim) may lack the device node
    docker exec "$n" bash -c '[ -c /dev/net/tun ] || { mkdir -p /dev/net && mknod /dev/net/tun c 10 200 && touch /run/conflux-wanem.mknod; }'
    docker exec -d "$n" bash -c "echo \$\$ >$PIDFILE; exec $IN_NODE --dev $DEV --delay $DELAY --loss $LOSS_SHARE >>$LOG 2>&1"
    local i=0
    until docker exec "$n" test -e /sys/class/net/$DEV; do
      (( ++i > 50 )) && { docker exec "$n" cat "$LOG" >&2 || true; die "$n: conflux-wanem did not create $DEV"; }
      sleep 0.2
    done
    if ! out=$(docker exec -i -e OWN="$own_net" -e FOREIGN="$foreign_net" -e ROUTES="$routes" "$n" bash -s <<<"$JOIN_NODE" 2>&1); then
      printf '%s\n' "$out" >&2
      die "$n: setting up the WAN path failed (hack/wan.sh leave $A $B removes what was made)"
    fi
    info "$n: $(docker exec "$n" head -n1 "$LOG")"
  done
  step_done
}

case $cmd in
  join)
    need_cluster "$A"; need_cluster "$B"
    build_wanem
    join_cluster "$A" "$B"
    join_cluster "$B" "$A"
    printf '\nclusters %s and %s joined: %s each way, %s loss (hack/wan.sh status %s %s)\n' "$A" "$B" "$DELAY" "$LOSS" "$A" "$B"
    ;;
  leave)
    [ -x "$KIND" ] || die "kind not found at $KIND"
    step "removing the WAN link between '$A' and '$B'"
    leave
    step_done
    ;;
  status)
    [ -x "$KIND" ] || die "kind not found at $KIND"
    for c in "$A" "$B"; do
      for n in $(nodes "$c"); do
        out=$(docker exec -i "$n" bash -s <<<"$STATUS_NODE" 2>&1 || true)
        if [ -n "$out" ]; then echo "$n: joined"; sed 's/^/    /' <<<"$out"; else echo "$n: clean"; fi
      done
    done
    ;;
  *) usage ;;
esac
