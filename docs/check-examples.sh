#!/usr/bin/env bash
# Keeps the docs true (`make test-docs`). For every Markdown page of docs/ and every README:
#   - a README is at most 8 KiB (what a folder is for, its invariants, how to test it;
#     results, rationale and reference live in bench/*/RESULTS.md and docs/)
#   - every relative link points to a file or folder that exists
#   - the tagged examples (docs/tools/examples.py says how to tag them) are extracted: C
#     programs are built against the SDK as sdk/Makefile builds its own, Go programs as a
#     module using sdk/go, manifests are checked field by field against crds/; each run block
#     runs against a real space server (confluxd --role=space), once embedded and once
#     through a sidecar (confluxd --role=sidecar, CONFLUX_SOCKET: sdk/tests/with_sidecar.sh),
#     and what it prints must equal its output block.
# usage: docs/check-examples.sh [PAGE...]    (default: every page)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
python=${PYTHON:-/usr/bin/python3}
confluxd=${CONFLUXD:-$root/dataplane/build/bin/confluxd}
export CONFLUXD=$confluxd
readme_max=8192
fail=0
bad() { echo "check-examples: $*"; fail=1; }

if [ $# -gt 0 ]; then pages=("$@"); else
  mapfile -t pages < <(find docs -name '*.md'; find . -name README.md -not -path './.cache/*' \
    -not -path '*/build/*' -not -path '*/node_modules/*' -not -path './.git/*' | sed 's|^\./||' | sort)
fi

# 1. README sizes
for p in "${pages[@]}"; do
  case $p in */README.md|README.md)
    n=$(wc -c < "$p")
    [ "$n" -le $readme_max ] || bad "$p is $n bytes (at most $readme_max: move results to bench/*/RESULTS.md, rationale to docs/decisions/, reference to docs/)";;
  esac
done

# 2. Relative links (outside code; URLs and anchors within a page skipped)
"$python" docs/tools/examples.py links "${pages[@]}" | sed 's/^/check-examples: /' || fail=1

# 3. Examples
work=$(mktemp -d /tmp/cxdocs-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/bin"
ln -s "$python" "$work/bin/python3" # the Python where `make deps` puts numpy and cffi

"$python" docs/tools/examples.py extract "$work/pages" "${pages[@]}" > "$work/index"
[ -s "$work/index" ] || { echo "check-examples: no tagged example found"; exit 1; }

# C flags and libraries: sdk/Makefile's own, read from it (one definition).
sdkvar() { make -s --no-print-directory -C sdk --eval "print-%: ; @echo \$(\$*)" "print-$1"; }
cflags=$(sdkvar CFLAGS) ldflags=$(sdkvar LDFLAGS) ldlibs=$(sdkvar LDLIBS) cc=$(sdkvar CC)
read -ra goenv <<< "$(sdkvar GOENV)"
# the Go binding links through pkg-config (#cgo pkg-config: conflux): the install the SDK stages
export PKG_CONFIG_PATH=$(sdkvar PKG_CONFIG_PATH)

space_up() { # dir: starts a space server storing in dir/store; sets space and pids
  "$confluxd" --role=space --dir="$1/store" --listen=tcp://127.0.0.1:0 --quiet > "$1/space.out" 2> "$1/space.log" &
  pids+=($!)
  space=
  for _ in $(seq 100); do
    space=$(awk '/^listening /{print $2}' "$1/space.out" 2>/dev/null)
    [ -n "$space" ] && return 0
    sleep 0.1
  done
  echo "check-examples: the space server did not start:"; cat "$1/space.log"; exit 1
}

examples=0 runs=0
while read -r n page; do
  d=$work/pages/$n
  echo "$page"
  # build
  for f in "$d"/*.c; do
    [ -e "$f" ] || continue
    (cd sdk && $cc $cflags -o "${f%.c}" "$f" $ldflags $ldlibs) > "$d/build.log" 2>&1 ||
      { bad "$page: $(basename "$f") does not build:"; cat "$d/build.log"; continue; }
    examples=$((examples + 1)); echo "  built $(basename "$f")"
  done
  for f in "$d"/*.go; do
    [ -e "$f" ] || continue
    m=${f%.go}.mod; mkdir -p "$m"; cp "$f" "$m/main.go"
    printf 'module example\n\ngo 1.24\n\nrequire conflux.dev/sdk/go v0.0.0\n\nreplace conflux.dev/sdk/go => %s\n' \
      "$root/sdk/go" > "$m/go.mod"
    (cd "$m" && env "${goenv[@]}" go build -o "${f%.go}" .) > "$d/build.log" 2>&1 ||
      { bad "$page: $(basename "$f") does not build:"; cat "$d/build.log"; continue; }
    examples=$((examples + 1)); echo "  built $(basename "$f")"
  done
  for f in "$d"/*.py; do
    [ -e "$f" ] || continue
    "$python" -m py_compile "$f" 2> "$d/build.log" ||
      { bad "$page: $(basename "$f") does not compile:"; cat "$d/build.log"; continue; }
    examples=$((examples + 1))
  done
  for f in "$d"/*.yaml; do
    [ -e "$f" ] || continue
    "$python" docs/tools/crd_check.py crds "$f" || bad "$page: $(basename "$f") does not match the CRDs"
    examples=$((examples + 1))
  done
  # run, embedded and through a sidecar
  for mode in embedded sidecar; do
    [ -e "$d/run-1.sh" ] || break
    m=$work/run-$n-$mode
    cp -r "$d" "$m"
    space_up "$m"
    for r in "$m"/run-*.sh; do
      k=$(basename "$r" .sh)
      wrap=(); [ $mode = sidecar ] && wrap=(sdk/tests/with_sidecar.sh)
      if ! SPACE=$space PATH="$m:$work/bin:$PATH" PYTHONPATH="$root/sdk/python" PYTHONDONTWRITEBYTECODE=1 \
        "${wrap[@]}" timeout 60 bash -c 'cd "$1" && bash -euo pipefail "$2" > "$2.got" 2> "$2.err"' _ "$m" "$r" \
        > "$m/$k.wrap" 2>&1; then
        bad "$page: $(head -1 "$r" | cut -c3-): the run block failed ($mode):"
        cat "$m/$k.sh.got" "$m/$k.sh.err" "$m/$k.wrap" 2>/dev/null | sed 's/^/    /'
        continue
      fi
      runs=$((runs + 1))
      if [ -e "$m/$k.out" ] && ! diff -u "$m/$k.out" "$m/$k.sh.got" > "$m/$k.diff"; then
        bad "$page: $(head -1 "$r" | cut -c3-): the output differs from the page ($mode):"
        sed 's/^/    /' "$m/$k.diff"
        continue
      fi
      echo "  $k ran $mode$([ -e "$m/$k.out" ] && echo ', output as on the page')"
    done
    kill "${pids[-1]}" && wait "${pids[-1]}" 2>/dev/null || true
  done
done < "$work/index"

[ $fail -eq 0 ] || { echo "check-examples: FAILED"; exit 1; }
echo "check-examples: ${#pages[@]} pages, $examples examples built or checked, $runs runs; all as the pages say"
