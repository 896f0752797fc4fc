# Shared helpers for hack/ scripts: progress output, cache location, error exit.
# Source it; do not run it.

CONFLUX_ROOT=${CONFLUX_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
# Everything built or downloaded by hack/ lives here (git-ignored). CI points it at a
# folder that survives between runs on one machine; a fresh machine starts empty.
CONFLUX_CACHE=${CONFLUX_CACHE:-$CONFLUX_ROOT/.cache}
CONFLUX_BIN=$CONFLUX_CACHE/bin
mkdir -p "$CONFLUX_BIN"

_step_start=0
step() { _step_start=$(date +%s); printf '\033[1m==> %s\033[0m\n' "$*"; }
step_done() { printf '    done in %ss\n' "$(( $(date +%s) - _step_start ))"; }
info() { printf '    %s\n' "$*"; }
warn() { printf 'warning: %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
