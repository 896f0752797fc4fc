#!/usr/bin/env bash
# Copies the generated CRDs and RBAC rules into the Helm chart:
#   hack/sync-chart.sh <crd dir> <role.yaml> <chart dir>
# Each CRD becomes templates/crds/<file>, gated by .Values.crds.enabled and annotated with
# helm.sh/resource-policy: keep when .Values.crds.keep. The ClusterRole rules go to
# files/rbac-rules.yaml, which templates/rbac.yaml reads. Never edit the copies by hand.
set -euo pipefail
crds=$1 role=$2 chart=$3
mkdir -p "$chart/templates/crds" "$chart/files"
rm -f "$chart/templates/crds/"*.yaml
for f in "$crds"/*.yaml; do
  out="$chart/templates/crds/$(basename "$f")"
  {
    echo "{{- if .Values.crds.enabled }}"
    echo "# Generated from crds/$(basename "$f") by operator/hack/sync-chart.sh; do not edit."
    awk '
      /^  annotations:$/ && !done {
        print
        print "    {{- if .Values.crds.keep }}"
        print "    helm.sh/resource-policy: keep"
        print "    {{- end }}"
        done = 1; next
      }
      /^  name:/ && !labelled {
        print
        print "  labels:"
        print "    {{- include \"conflux.labels\" . | nindent 4 }}"
        labelled = 1; next
      }
      { print }' "$f" | grep -v '^---$'
    echo "{{- end }}"
  } > "$out"
done
# The rules only: the chart names and binds the ClusterRole itself.
awk '/^rules:/ {on=1} on {print}' "$role" > "$chart/files/rbac-rules.yaml"
