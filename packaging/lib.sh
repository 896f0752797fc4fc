# Shared by the packaging scripts: the tree, the one version, the output folder. Source it.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# dist/ of the tree unless DIST names another folder (the test builds into a temporary one)
DIST=${DIST:-$ROOT/dist}
# The version is written once, in the data plane's api/conflux_version.h.
VERSION=$(sed -n 's/^#define CONFLUX_VERSION_STRING "\(.*\)"/\1/p' "$ROOT/dataplane/src/api/conflux_version.h")
[[ $VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "packaging: no version in conflux_version.h" >&2; exit 1; }
SOMAJOR=${VERSION%%.*}
die() { echo "packaging: $*" >&2; exit 1; }
mkdir -p "$DIST"
