#!/usr/bin/env bash
# The Debian packages, with dpkg-deb from a staged tree (no debian/ source package):
#   libconflux<MAJOR>   /usr/lib/libconflux.so.X.Y.Z and its soname link
#   libconflux-dev      /usr/include/conflux/, /usr/lib/pkgconfig/conflux.pc, the .so link
#   confluxd            /usr/bin/confluxd and the conflux CLI (libconflux linked in)
# Depends: from dpkg-shlibdeps over the ELF files of each package (the shared libraries they
# load: DPDK, UCX, OpenSSL, ...), so they follow what the build links. Written to $DIST.
source "$(dirname "$0")/lib.sh"
arch=$(dpkg --print-architecture)
work=$(mktemp -d /tmp/cxdeb-XXXXXX)
trap 'rm -rf "$work"' EXIT

make -s --no-print-directory -C "$ROOT/sdk" install DESTDIR="$work/stage" PREFIX=/usr >/dev/null
stage=$work/stage/usr
bin=$ROOT/dataplane/build/bin
[ -x "$bin/confluxd" ] && [ -x "$bin/conflux" ] || die "no $bin/confluxd or conflux (make -C dataplane)"

# the package roots
lib=libconflux$SOMAJOR
mkdir -p "$work/$lib/usr/lib" "$work/libconflux-dev/usr/lib" "$work/confluxd/usr/bin"
cp -a "$stage/lib/libconflux.so.$VERSION" "$stage/lib/libconflux.so.$SOMAJOR" "$work/$lib/usr/lib/"
cp -a "$stage/lib/libconflux.so" "$stage/lib/pkgconfig" "$work/libconflux-dev/usr/lib/"
cp -a "$stage/include" "$work/libconflux-dev/usr/"
install -m 755 "$bin/confluxd" "$bin/conflux" "$work/confluxd/usr/bin/"
strip --strip-debug "$work/$lib/usr/lib/libconflux.so.$VERSION" "$work/confluxd/usr/bin/"*

# shlibdeps PKG FILE...: the Depends of those ELF files. dpkg-shlibdeps reads a source
# package's debian/control: give it a minimal one; the library of this build is ours.
shlibdeps() {
  local pkg=$1; shift
  mkdir -p "$work/src/debian"
  printf 'Source: conflux\n\nPackage: %s\nArchitecture: any\n' "$pkg" > "$work/src/debian/control"
  (cd "$work/src" && dpkg-shlibdeps -O -x"$lib" -l"$work/$lib/usr/lib" "$@" 2> "$work/shlibdeps.log") |
    sed -n 's/^shlibs:Depends=//p' ||
    die "dpkg-shlibdeps $pkg: $(cat "$work/shlibdeps.log")"
}

# control PKG DEPENDS DESCRIPTION...: DEBIAN/control, then the .deb
control() {
  local pkg=$1 depends=$2; shift 2
  mkdir -p "$work/$pkg/DEBIAN"
  {
    echo "Package: $pkg"
    echo "Version: $VERSION"
    echo "Architecture: $arch"
    echo "Maintainer: Conflux <conflux@conflux.dev>"
    case $pkg in libconflux-dev) echo "Section: libdevel" ;; confluxd) echo "Section: net" ;; *) echo "Section: libs" ;; esac
    echo "Priority: optional"
    echo "Installed-Size: $(du -sk --exclude=DEBIAN "$work/$pkg" | cut -f1)"
    [ -z "$depends" ] || echo "Depends: $depends"
    echo "Homepage: https://conflux.dev"
    printf 'Description: %s\n' "$1"; shift
    for l in "$@"; do echo " $l"; done
  } > "$work/$pkg/DEBIAN/control"
  (cd "$work/$pkg" && find usr -type f -print0 | sort -z | xargs -0 md5sum) > "$work/$pkg/DEBIAN/md5sums"
  dpkg-deb --root-owner-group -Zxz --build "$work/$pkg" "$DIST/${pkg}_${VERSION}_$arch.deb" >/dev/null
  echo "packaging: $DIST/${pkg}_${VERSION}_$arch.deb (Depends: ${depends:-none})"
}

# the shared library's package: what a package linking it depends on, and ldconfig run
mkdir -p "$work/$lib/DEBIAN"
echo "libconflux $SOMAJOR $lib (>= $VERSION)" > "$work/$lib/DEBIAN/shlibs"
echo "activate-noawait ldconfig" > "$work/$lib/DEBIAN/triggers"
libdeps=$(shlibdeps "$lib" "$work/$lib/usr/lib/libconflux.so.$VERSION")
[ -n "$libdeps" ] || die "dpkg-shlibdeps found no dependencies of libconflux"
control "$lib" "$libdeps" "Conflux SDK: the shared library" \
  "libconflux, the C library of the Conflux SDK: formats, event channels and persistent" \
  "pipes, embedded or through a confluxd sidecar."
control libconflux-dev "$lib (= $VERSION)" "Conflux SDK: headers and pkg-config file" \
  "<conflux/conflux.h> and conflux.pc: cc app.c \$(pkg-config --cflags --libs conflux)."
binddeps=$(shlibdeps confluxd "$work/confluxd/usr/bin/confluxd" "$work/confluxd/usr/bin/conflux")
[ -n "$binddeps" ] || die "dpkg-shlibdeps found no dependencies of confluxd"
control confluxd "$binddeps" "Conflux data plane daemon and CLI" \
  "confluxd (space server, sidecar, relay) and the conflux command-line tool."
