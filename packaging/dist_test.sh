#!/usr/bin/env bash
# make test-dist: the packages as a user gets them, with nothing of this tree on any path.
# Builds the .debs, the wheel and the chart into a temporary dist, then
#   - checks each .deb's Depends are satisfied by this machine's installed packages;
#   - extracts the .debs into a fresh root (dpkg-deb -x) and, against that root only:
#     builds sdk/tests/install_app.c with pkg-config (PKG_CONFIG_SYSROOT_DIR), checks it loads
#     libconflux from the root, runs it embedded and through the packaged confluxd as sidecar;
#   - pip-installs the wheel into a fresh folder (no index) and runs a Python program;
#   - builds a Go program in a fresh module that takes the Go binding from a copy outside
#     the tree (replace), cgo flags from the packaged conflux.pc, and runs it.
source "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d /tmp/cxdist-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "dist_test: $*" >&2; exit 1; }
export DIST=$tmp/dist
"$ROOT/packaging/deb.sh"
"$ROOT/packaging/wheel.sh"
"$ROOT/packaging/chart.sh"
arch=$(dpkg --print-architecture)

# Depends: every alternative group has one installed package of a good version
for deb in "$DIST"/*.deb; do
  dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/^ *//' | grep . | while read -r group; do
    ok=
    IFS='|' read -ra alts <<< "$group"
    for alt in "${alts[@]}"; do
      read -r pkg op ver <<< "$(echo "$alt" | tr -d '()' | sed 's/^ *//')"
      case $pkg in libconflux*) ok=1; break ;; esac # ours: in the same set
      have=$(dpkg-query -W -f='${Version}' "$pkg:$arch" 2>/dev/null || dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null) || continue
      [ -n "$have" ] || continue
      if [ -z "$op" ] || dpkg --compare-versions "$have" "$op" "$ver"; then ok=1; break; fi
    done
    [ -n "$ok" ] || fail "$(basename "$deb"): Depends '$group' is not satisfied here"
  done
done
echo "dist_test: the Depends of $(ls "$DIST"/*.deb | wc -l) packages are satisfied"

# the root: the packages' files only
root=$tmp/root
for deb in "$DIST"/*.deb; do dpkg-deb -x "$deb" "$root"; done
[ "$(readlink "$root/usr/lib/libconflux.so.$SOMAJOR")" = "libconflux.so.$VERSION" ] || fail "no soname link in the root"
unset CPATH C_INCLUDE_PATH LIBRARY_PATH PKG_CONFIG_LIBDIR PYTHONPATH CONFLUX_LIB CONFLUX_SOCKET
export PKG_CONFIG_PATH=$root/usr/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root
export LD_LIBRARY_PATH=$root/usr/lib CONFLUXD=$root/usr/bin/confluxd
cd "$tmp" # nothing of the tree in the working directory either
[ "$(pkg-config --modversion conflux)" = "$VERSION" ] || fail "pkg-config --modversion"
"$root/usr/bin/conflux" --help >/dev/null 2>&1 || fail "the packaged conflux CLI does not run"

# C
cp "$ROOT/sdk/tests/install_app.c" "$tmp/app.c"
# shellcheck disable=SC2046
${CC:-cc} -std=c11 -pedantic -Wall -Wextra -Werror -o "$tmp/app" "$tmp/app.c" \
  $(pkg-config --cflags --libs conflux) -pthread || fail "the C program does not build from the packages"
deps=$(ldd "$tmp/app")
[[ $deps == *"libconflux.so.$SOMAJOR => $root/usr/lib/"* ]] || fail "the C program does not load $root: $deps"
"$tmp/app" || fail "the C program failed (embedded)"
"$ROOT/sdk/tests/with_sidecar.sh" "$tmp/app" || fail "the C program failed (through the packaged confluxd)"

# Python
PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 /usr/bin/python3 -m pip install -q --no-deps --root-user-action=ignore \
  --target "$tmp/py" "$DIST/conflux-$VERSION-py3-none-any.whl" || fail "pip install of the wheel"
cat > "$tmp/app.py" <<'PY'
import sys
import numpy as np
import conflux

root, version, site = sys.argv[1:]
assert conflux.__file__.startswith(site), conflux.__file__
assert conflux.__version__ == version, conflux.__version__
with open("/proc/self/maps") as f:
    loaded = {l.split()[-1] for l in f if "libconflux" in l}
assert loaded and all(p.startswith(root) for p in loaded), loaded
dt = np.dtype([("step", "<i4"), ("energy", "<f8")], align=True)
with conflux.ChannelContext(listen="tcp://127.0.0.1:0") as ctx:
    ch = ctx.create(dtype=dt, reliable=True, format_name="ev")
    sink = ch.sink(dt)
    a = np.zeros(50, dt)
    a["step"] = np.arange(50)
    assert ch.source().submit(a, timeout=10) == 50
    got = [int(sink.get(timeout=10).data["step"]) for _ in range(50)]
    assert got == list(range(50)), got
print(f"app.py: conflux {conflux.__version__} from {sorted(loaded)[0]}, 50 events delivered")
PY
PYTHONPATH=$tmp/py PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 "$tmp/app.py" "$root" "$VERSION" "$tmp/py" ||
  fail "the Python program failed"

# Go: the binding's module copied out of the tree, used through a replace
mkdir -p "$tmp/gosdk" "$tmp/goapp"
cp "$ROOT"/sdk/go/go.mod "$ROOT"/sdk/go/*.go "$ROOT"/sdk/go/*.c "$tmp/gosdk/"
rm -f "$tmp"/gosdk/*_test.go
cat > "$tmp/goapp/go.mod" <<EOF2
module example.com/app

go 1.24

require conflux.dev/sdk/go v0.0.0

replace conflux.dev/sdk/go => ../gosdk
EOF2
cat > "$tmp/goapp/main.go" <<'GO'
package main

import (
	"fmt"
	"os"

	conflux "conflux.dev/sdk/go"
)

func main() {
	if v := conflux.Version(); v != os.Args[1] {
		fmt.Fprintf(os.Stderr, "library %s, want %s\n", v, os.Args[1])
		os.Exit(1)
	}
	c, err := conflux.NewContext(&conflux.ContextOptions{Listen: "tcp://127.0.0.1:0"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	c.Close()
	fmt.Printf("goapp: conflux %s\n", conflux.Version())
}
GO
(cd "$tmp/goapp" && GOPROXY=off GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=1 go build -o "$tmp/goapp/app" .) ||
  fail "the Go program does not build from the packages"
deps=$(ldd "$tmp/goapp/app")
[[ $deps == *"libconflux.so.$SOMAJOR => $root/usr/lib/"* ]] || fail "the Go program does not load $root: $deps"
"$tmp/goapp/app" "$VERSION" || fail "the Go program failed"

# the images' OCI archives (make dist-images): the converter over an archive laid out as
# `docker save` writes it (one layer holding one file), then the result checked
/usr/bin/python3 - "$tmp/saved.tar" <<'PY'
import hashlib, io, json, sys, tarfile
def add(t, name, data):
    i = tarfile.TarInfo(name); i.size = len(data); t.addfile(i, io.BytesIO(data))
layer = io.BytesIO()
with tarfile.open(fileobj=layer, mode="w") as l:
    add(l, "usr/bin/hello", b"hello\n")
layer = layer.getvalue()
config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers",
                     "diff_ids": ["sha256:" + hashlib.sha256(layer).hexdigest()]}}).encode()
with tarfile.open(sys.argv[1], "w") as t:
    add(t, "abc/layer.tar", layer)
    add(t, "cfg.json", config)
    add(t, "manifest.json", json.dumps([{"Config": "cfg.json", "RepoTags": ["conflux/x:1"],
                                         "Layers": ["abc/layer.tar"]}]).encode())
PY
"$ROOT/packaging/oci_archive.py" convert "$tmp/saved.tar" "$tmp/x.oci.tar" "conflux/x:$VERSION"
[ "$("$ROOT/packaging/oci_archive.py" check "$tmp/x.oci.tar")" = "oci_archive: $tmp/x.oci.tar: conflux/x:$VERSION" ] ||
  fail "the OCI archive does not check"
echo "dist_test: passed (C, Python and Go against the packages in $root; an OCI archive)"
