#!/usr/bin/env bash
# The SDK as a user gets it: `make install PREFIX=<temp>`, then
#   - the library's links and soname, and its exports: exactly the calls of the API's table
#     (dataplane/src/api/cx_api_calls.h, routed and local), nothing of the data plane else,
#     and exactly the calls the installed headers declare;
#   - the installed headers compile as C11 and C++17 with only PREFIX/include;
#   - a program built with nothing but pkg-config (no repository include path) under
#     -std=c11 -pedantic -Werror, run embedded and through a sidecar: the library's version
#     is the header's, and a typed channel with a local sink delivers every event.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
sdk=$here/..
dp=$sdk/../dataplane
cc=${CC:-cc}
tmp=$(mktemp -d /tmp/cxsdk-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "install_test: $*" >&2; exit 1; }

make -s --no-print-directory -C "$sdk" install PREFIX="$tmp/prefix" >/dev/null
lib=$tmp/prefix/lib
version=$(sed -n 's/^#define CONFLUX_VERSION_STRING "\(.*\)"/\1/p' "$dp/src/api/conflux_version.h")
major=${version%%.*}

# the files and links
[ -f "$lib/libconflux.so.$version" ] && [ ! -L "$lib/libconflux.so.$version" ] || fail "no $lib/libconflux.so.$version"
[ "$(readlink "$lib/libconflux.so.$major")" = "libconflux.so.$version" ] || fail "libconflux.so.$major link"
[ "$(readlink "$lib/libconflux.so")" = "libconflux.so.$major" ] || fail "libconflux.so link"
soname=$(objdump -p "$lib/libconflux.so.$version" | awk '$1 == "SONAME" {print $2}')
[ "$soname" = "libconflux.so.$major" ] || fail "soname $soname"
[ -f "$tmp/prefix/include/conflux/conflux.h" ] || fail "no include/conflux/conflux.h"

# the exports against the table
printf '#include "api/cx_api_calls.h"\n#define R(k, r, n, i, p, a) n\n#define L(n) n\nCX_API_CALLS(R) CX_API_LOCAL_CALLS(L)\n' |
  "$cc" -E -P -I"$dp/src" -x c - | tr ' ' '\n' | grep . | sort -u > "$tmp/want"
nm -D --defined-only "$lib/libconflux.so.$version" | awk '$2 != "A" {print $3}' | sed 's/@.*//' |
  sort -u > "$tmp/got"
if ! diff -u "$tmp/want" "$tmp/got" > "$tmp/diff"; then
  cat "$tmp/diff" >&2; fail "the exports differ from the table (- missing, + extra)"
fi
# and the table against the installed headers: every call they declare (not static inline;
# gcc -aux-info lists the prototypes, gcc whatever CC is)
printf '#include <conflux/conflux.h>\n' > "$tmp/decl.c"
gcc -std=c11 -fsyntax-only -aux-info "$tmp/aux" -I"$tmp/prefix/include" "$tmp/decl.c"
grep -F "$tmp/prefix/include/conflux/" "$tmp/aux" | grep -v ' static ' |
  sed -E 's/.*\*\/ extern [^(]*[ *]([a-z_0-9]+) \(.*/\1/' | sort -u > "$tmp/declared"
if ! diff -u "$tmp/want" "$tmp/declared" > "$tmp/diff"; then
  cat "$tmp/diff" >&2; fail "the installed headers declare other calls than the table (- not declared, + not in the table)"
fi
echo "install_test: $(wc -l < "$tmp/got") exports, exactly the table's and the installed headers' calls"

# a program built with pkg-config only
export PKG_CONFIG_PATH=$lib/pkgconfig
unset PKG_CONFIG_LIBDIR CPATH C_INCLUDE_PATH LIBRARY_PATH
[ "$(pkg-config --modversion conflux)" = "$version" ] || fail "pkg-config --modversion"
# shellcheck disable=SC2046
"$cc" -std=c11 -pedantic -Wall -Wextra -Werror -o "$tmp/app" "$here/install_app.c" \
  $(pkg-config --cflags --libs conflux) -pthread || fail "the pkg-config build failed"
deps=$(ldd "$tmp/app")
[[ $deps == *"libconflux.so.$major => $lib/"* ]] || fail "the program does not load $lib: $deps"
# the tree needs no include path of its own: <conflux/conflux.h> from PREFIX/include, C and C++
printf '#include <conflux/conflux.h>\nint main(void) { return conflux_version()[0] == 0; }\n' > "$tmp/plain.c"
"$cc" -std=c11 -pedantic -Wall -Wextra -Werror -fsyntax-only -I"$tmp/prefix/include" "$tmp/plain.c" ||
  fail "<conflux/conflux.h> does not compile as C11"
${CXX:-c++} -std=c++17 -Wall -Wextra -Werror -fsyntax-only -x c++ -I"$tmp/prefix/include" "$tmp/plain.c" ||
  fail "<conflux/conflux.h> does not compile as C++17"
env -u CONFLUX_SOCKET "$tmp/app" || fail "the program failed (embedded)"
"$here/with_sidecar.sh" "$tmp/app" || fail "the program failed (through a sidecar)"
echo "install_test: passed"
