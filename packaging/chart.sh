#!/usr/bin/env bash
# The Helm chart (charts/conflux) packaged with `helm package`. Its version and appVersion
# must be the SDK's version, and the images it names by default (conflux/operator and
# conflux/confluxd, tag "" = appVersion) are the tags `make images` gives: one version for
# the packages, the chart and the images. Written to $DIST.
source "$(dirname "$0")/lib.sh"
chart=$ROOT/charts/conflux
helm=${CONFLUX_CACHE:-$ROOT/.cache}/bin/helm
[ -x "$helm" ] || helm=$(command -v helm) || die "no helm (make deps installs it in \$CONFLUX_CACHE/bin)"
field() { awk -v k="$1:" '$1 == k {gsub(/"/, "", $2); print $2}' "$chart/Chart.yaml"; }
[ "$(field version)" = "$VERSION" ] || die "charts/conflux/Chart.yaml version $(field version), not $VERSION"
[ "$(field appVersion)" = "$VERSION" ] || die "charts/conflux/Chart.yaml appVersion $(field appVersion), not $VERSION"
# the chart's own images take the appVersion: no tag written in values.yaml
for img in operator confluxd; do
  tag=$(awk -v s="$img:" '/^[a-z]/ {top = $1} top == s && $1 == "tag:" {print $2; exit}' "$chart/values.yaml")
  [ "$tag" = '""' ] || die "values.yaml $img.image.tag is $tag: leave it \"\" (the appVersion)"
done
"$helm" package "$chart" --destination "$DIST" >/dev/null
[ -f "$DIST/conflux-$VERSION.tgz" ] || die "helm package made no conflux-$VERSION.tgz"
echo "packaging: $DIST/conflux-$VERSION.tgz (appVersion $VERSION)"
