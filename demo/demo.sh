#!/usr/bin/env bash
# make demo / make demo-down: the Conflux demo on the local kind cluster (demo/README.md).
#
#   demo/demo.sh up [CLUSTER]     images, helm install, the sample workflow, progress until
#                                 the sink has every result, then the pipe "summary"
#   demo/demo.sh down [CLUSTER]   remove the workflow, the release, the namespaces, the volume
#
# The cluster must be up (make demo brings it up first: make cluster). Environment:
# DEMO_SEGMENTS (default 200), DEMO_TIMEOUT (seconds to wait for the sink, default 300).
set -euo pipefail
source "$(dirname "$0")/../hack/lib.sh"

cmd=${1:-}
NAME=${2:-conflux}
NS=conflux-demo
SYSNS=conflux-system
RELEASE=conflux
PV=conflux-demo-space
PVDIR=/var/lib/conflux-demo-space
SEGMENTS=${DEMO_SEGMENTS:-200}
TIMEOUT=${DEMO_TIMEOUT:-300}
K8S_VERSION=$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$CONFLUX_ROOT/hack/k8s/go.mod")
KUBECTL=$CONFLUX_CACHE/k8s/$K8S_VERSION/bin/kubectl
HELM=$CONFLUX_BIN/helm
export KUBECONFIG=$CONFLUX_CACHE/kube/$NAME.kubeconfig
k() { "$KUBECTL" "$@"; }

preflight() {
  [ -x "$KUBECTL" ] && [ -x "$HELM" ] || die "kubectl or helm missing: run make deps"
  [ -f "$KUBECONFIG" ] && k get --raw /readyz >/dev/null 2>&1 ||
    die "cluster '$NAME' is not up (make cluster NAME=$NAME)"
}

# wait_for SECONDS WHAT COMMAND...: runs COMMAND every 2 s until it succeeds, printing WHAT
wait_for() {
  local secs=$1 what=$2 t0; shift 2
  t0=$(date +%s)
  until "$@" >/dev/null 2>&1; do
    (( $(date +%s) - t0 < secs )) || die "timed out after ${secs}s waiting for $what"
    sleep 2
  done
  info "$what ($(( $(date +%s) - t0 ))s)"
}

# the node holding the space's volume: the first worker of the fabric-a domain
space_node() { k get nodes -l conflux.dev/fabric=fabric-a -o jsonpath='{.items[0].metadata.name}'; }

up() {
  preflight
  step "images (built here, loaded into '$NAME')"
  local line tag log=$CONFLUX_CACHE/demo-images.log
  line=$("$CONFLUX_ROOT/hack/build-images.sh" --load "$NAME" operator confluxd demo 2>"$log" | grep '^image ') ||
    { cat "$log" >&2; die "building or loading the images failed (log above)"; }
  tag=$(awk '$2=="demo" {print $3}' <<<"$line"); tag=${tag##*:}
  while read -r _ _ ref; do info "$ref"; done <<<"$line"
  info "(build and load output: $log)"
  step_done

  step "helm install $RELEASE (namespace $SYSNS)"
  local op dd
  op=$(awk '$2=="operator" {print $3}' <<<"$line"); dd=$(awk '$2=="confluxd" {print $3}' <<<"$line")
  "$HELM" upgrade --install "$RELEASE" "$CONFLUX_ROOT/charts/conflux" -n "$SYSNS" --create-namespace \
    --set operator.image.repository="${op%%:*}" --set operator.image.tag="${op##*:}" \
    --set operator.image.pullPolicy=Never \
    --set confluxd.image.repository="${dd%%:*}" --set confluxd.image.tag="${dd##*:}" \
    --wait --timeout 3m >/dev/null
  wait_for 120 "operator ready" k -n "$SYSNS" rollout status deploy -l app.kubernetes.io/instance="$RELEASE" --timeout=5s
  step_done

  step "namespace $NS, the space's volume, the workflow"
  k create namespace "$NS" --dry-run=client -o yaml | k apply -f - >/dev/null
  local node; node=$(space_node)
  [ -n "$node" ] || die "no node labelled conflux.dev/fabric=fabric-a"
  docker exec "$node" mkdir -p "$PVDIR"
  k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolume
metadata: {name: $PV, labels: {app.kubernetes.io/part-of: conflux-demo}}
spec:
  capacity: {storage: 64Mi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: $PV
  claimRef: {namespace: $NS, name: data-demo-0}
  local: {path: $PVDIR}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [$node]}]
YAML
  # the webhooks may not answer for a few seconds after the operator turns Ready (the
  # Service gets its endpoint, the certificate is written): apply until they do
  local manifest err t0=$(date +%s)
  manifest=$(sed -e "s/DEMO_TAG/$tag/g" -e "s/DEMO_SEGMENTS_VALUE/$SEGMENTS/g" "$CONFLUX_ROOT/demo/manifests/demo.yaml")
  until err=$(k apply -f - <<<"$manifest" 2>&1 >/dev/null); do
    grep -q 'failed calling webhook' <<<"$err" && (( $(date +%s) - t0 < 90 )) || die "kubectl apply: $err"
    sleep 2
  done
  k -n "$NS" get space,channel,workflow -o name | sed 's/^/    applied /'
  step_done

  step "waiting for the space and the components"
  wait_for 180 "space 'demo' ready" k -n "$NS" wait space/demo --for=condition=Ready --timeout=5s
  wait_for 180 "channels registered" k -n "$NS" wait channel --all --for=condition=Ready --timeout=5s
  k -n "$NS" get spaces,channels
  step_done

  step "events flowing: the sink's progress (up to ${TIMEOUT}s)"
  local t0=$(date +%s) shown=0
  while :; do
    local lines n
    lines=$(k -n "$NS" logs deploy/demo-sink -c sink 2>/dev/null | grep '^sink: ' || true)
    n=$(grep -c . <<<"$lines" || true)
    # a restarted sink starts a new log: show it from its beginning
    (( n >= shown )) || shown=0
    (( n > shown )) && { tail -n +$((shown + 1)) <<<"$lines" | sed 's/^/    /'; shown=$n; }
    grep -q '^sink: complete' <<<"$lines" && break
    (( $(date +%s) - t0 < TIMEOUT )) || { k -n "$NS" get workflow,pods -o wide; die "the sink did not complete in ${TIMEOUT}s"; }
    sleep 2
  done
  k -n "$NS" get workflow demo
  k -n "$NS" get pods -o wide
  for p in $(k -n "$NS" get pods -l conflux.dev/component=stage -o name 2>/dev/null || true); do
    k -n "$NS" logs "$p" -c stage | tail -1 | sed 's/^/    /'
  done
  step_done

  step "the pipe 'summary', read with the conflux CLI from a pod (first 5 of $SEGMENTS)"
  k -n "$NS" delete pod conflux-cli --ignore-not-found >/dev/null
  k -n "$NS" run conflux-cli --restart=Never --image="$dd" --image-pull-policy=Never \
    --command -- /usr/bin/conflux --space tcp://demo.$NS.svc:7400 cat summary --json >/dev/null
  wait_for 60 "CLI pod finished" bash -c "[ \"\$('$KUBECTL' -n $NS get pod conflux-cli -o jsonpath='{.status.phase}')\" = Succeeded ]"
  local out; out=$(k -n "$NS" logs conflux-cli)
  head -5 <<<"$out" | sed 's/^/    /'
  info "$(grep -c '"segment"' <<<"$out") results in 'summary'"
  k -n "$NS" delete pod conflux-cli --wait=false >/dev/null
  step_done
  echo "demo is up: kubectl -n $NS get workflows,channels,pods (KUBECONFIG=$KUBECONFIG); make demo-down removes it"
}

down() {
  preflight
  step "removing the demo"
  # Conflux objects first, while the operator still runs their finalizers
  if k get namespace "$NS" >/dev/null 2>&1; then
    k -n "$NS" delete workflow --all --wait=true --timeout=60s >/dev/null || true
    k -n "$NS" delete channel --all --wait=true --timeout=60s >/dev/null || true
    k -n "$NS" delete space --all --wait=true --timeout=60s >/dev/null || true
  fi
  "$HELM" uninstall "$RELEASE" -n "$SYSNS" --wait >/dev/null 2>&1 || true
  k delete namespace "$NS" "$SYSNS" --ignore-not-found --wait=true --timeout=120s >/dev/null || true
  k delete pv "$PV" --ignore-not-found >/dev/null
  local node; node=$(space_node)
  [ -z "$node" ] || docker exec "$node" rm -rf "$PVDIR"
  step_done
}

case $cmd in
  up) up ;;
  down) down ;;
  *) die "usage: demo/demo.sh up|down [CLUSTER]" ;;
esac
