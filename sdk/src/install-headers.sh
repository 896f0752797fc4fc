#!/usr/bin/env bash
# Installs conflux.h and the data plane's module headers it includes (found by the compiler,
# so the set follows the includes) under DEST, their "module/x.h" includes rewritten to
# paths relative to each file, so the installed tree needs no include path of its own.
#   src/install-headers.sh DEST DATAPLANE_SRC [CC]
set -euo pipefail
dest=$1 src=$2 cc=${3:-cc}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dest"
install -m 644 "$here/include/conflux.h" "$dest/conflux.h"
deps=$("$cc" -MM -MT x -I"$src" "$here/include/conflux.h" | tr -d '\\' | tr ' ' '\n' | grep '\.h$' |
       grep -v '/include/conflux\.h$')
for h in $deps; do
  rel=$(realpath --relative-to="$src" "$h")
  case $rel in
    */*/*|../*) echo "install-headers: $h is not a module header of $src" >&2; exit 1 ;;
  esac
  mkdir -p "$dest/$(dirname "$rel")"
  sed -E 's|^(#include ")([a-z_]+/[a-z_0-9]+\.h")|\1../\2|' "$h" > "$dest/$rel"
  chmod 644 "$dest/$rel"
done
