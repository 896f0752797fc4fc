#!/usr/bin/env bash
# make dist-images: the images `make images` built (conflux/operator and conflux/confluxd,
# tagged with the chart's appVersion = the version), saved as OCI image layout archives in
# $DIST. Builds nothing: an image missing is an error.
source "$(dirname "$0")/lib.sh"
prefix=${CONFLUX_IMAGE_PREFIX:-conflux/}
command -v docker >/dev/null || die "docker not found"
work=$(mktemp -d /tmp/cximages-XXXXXX)
trap 'rm -rf "$work"' EXIT
for name in operator confluxd; do
  ref=$prefix$name:$VERSION
  docker image inspect "$ref" >/dev/null 2>&1 || die "no image $ref: build it with make images"
  docker save -o "$work/$name.tar" "$ref"
  out=$DIST/${prefix//\//-}$name-$VERSION.oci.tar
  "$ROOT/packaging/oci_archive.py" convert "$work/$name.tar" "$out" "$ref"
  "$ROOT/packaging/oci_archive.py" check "$out"
done
