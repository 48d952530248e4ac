# SPDX-License-Identifier: Apache-2.0
#
# What scripts/demo.sh and scripts/demo-migrate.sh share (sourced, not run):
# step headings, a scratch directory $work and the processes in $pids,
# cleaned up on exit unless $keep is true (set it before sourcing), and
# small helpers. The caller's `set -euo pipefail` applies.
#
#   step TEXT...                 a bold "==> TEXT" heading
#   die TEXT...                  the message and the tail of every $work/*.log, exit 1
#   wait_for FILE PATTERN [N]    until a line of FILE matches (N tries of 50 ms, 200)
#   log_port FILE MSG            the "port" field of kop's log line with this msg

bold=$'\033[1m' off=$'\033[0m'
[ -t 1 ] || { bold='' off=''; }
step() { printf '\n%s==> %s%s\n' "$bold" "$*" "$off"; }

work=$(mktemp -d)
pids=()
demo_cleanup() {
  if ! ${keep:-false}; then
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
  fi
}
trap demo_cleanup EXIT

die() {
  echo "demo: $*" >&2
  for f in "$work"/*.log; do
    [ -f "$f" ] && { echo "--- $f" >&2; tail -n 10 "$f" >&2; }
  done
  exit 1
}

wait_for() { # FILE PATTERN [TRIES of 50 ms]
  for _ in $(seq "${3:-200}"); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}

# The "port" field of a kop log line with this msg.
log_port() { # FILE MSG
  grep -o "\"msg\":\"$2\"[^}]*" "$1" | grep -o '"port":[0-9]*' | head -n 1 | cut -d: -f2
}
