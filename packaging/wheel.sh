#!/usr/bin/env bash
# The Python binding's wheel (sdk/python/pyproject.toml): pure Python, built offline with
# Debian's pip, setuptools and wheel (no build isolation, nothing downloaded). Written to $DIST.
source "$(dirname "$0")/lib.sh"
py=$ROOT/sdk/python
work=$(mktemp -d /tmp/cxwheel-XXXXXX)
# setuptools builds in the source folder: its build/ and egg-info go with the run
trap 'rm -rf "$work" "$py/build" "$py/conflux.egg-info"' EXIT
PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1 \
  /usr/bin/python3 -m pip wheel -q --no-deps --no-build-isolation -w "$work" "$py" >/dev/null
whl=$work/conflux-$VERSION-py3-none-any.whl
[ -f "$whl" ] || die "pip wheel made no $(basename "$whl"): $(ls "$work")"
cp "$whl" "$DIST/"
echo "packaging: $DIST/$(basename "$whl")"
