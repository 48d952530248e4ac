# SPDX-License-Identifier: Apache-2.0
#
# Shared by the shell suites in tests/scripts: PASS/FAIL/SKIP lines with
# their counts, the closing line ("N passed, N failed, N skipped") and exit
# status, a skip when a tool is missing, the scratch directory $work and the
# background processes in $pids (both gone at exit: `scratch`), stopping on
# a failed step with the logs (`die`), waiting for a line in a log, and the
# npm packages that validate manifests (tests/manifests; npm_checks needs
# $checks, the tests/manifests directory).

# kop started by a suite stops at once on SIGTERM (the shutdown delay has
# its own suite, integration_shutdown).
export KOP_SHUTDOWN_DELAY=${KOP_SHUTDOWN_DELAY:-0}

passed=0
failed=0
skipped=0

# Skip the suite (exit 77) when one of the tools is missing.
need_tools() { # SUITE TOOL...
  local suite=$1 tool
  shift
  for tool in "$@"; do
    command -v "$tool" >/dev/null || {
      echo "$suite: $tool not installed, skipping"
      exit 77
    }
  done
}

# $work, a scratch directory, and $pids, background processes: at exit the
# processes are stopped and the directory removed.
scratch() {
  work=$(mktemp -d)
  pids=()
  trap scratch_cleanup EXIT
}
scratch_cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
pass() {
  passed=$((passed + 1))
  echo "PASS $*"
}
fail() {
  failed=$((failed + 1))
  echo "FAIL $*"
}
skip() {
  skipped=$((skipped + 1))
  echo "SKIP $*"
}
finish() {
  echo "$passed passed, $failed failed, $skipped skipped"
  [ "$failed" -eq 0 ] || exit 1
  exit 0
}
# A step the rest depends on failed: show the logs and stop.
die() {
  fail "$*"
  local f
  for f in "$work"/*.log; do
    [ -f "$f" ] && { echo "--- $(basename "$f")"; tail -n 15 "$f"; }
  done
  echo "$passed passed, $failed failed"
  exit 1
}
# Add the PASS/FAIL lines of another tool's output file to the counts.
count_lines() { # file
  passed=$((passed + $(grep -c '^PASS ' "$1" || true)))
  failed=$((failed + $(grep -c '^FAIL ' "$1" || true)))
  cat "$1"
}
wait_for() { # file pattern [tries of 0.1 s]
  for _ in $(seq "${3:-300}"); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
# Install tests/manifests' npm packages when its lock file changed. Returns
# non-zero (the log tail in $npm_error) when npm ci fails.
npm_checks() {
  local want have
  want=$(sha256sum "$checks/package-lock.json" | cut -d' ' -f1)
  have=$(cat "$checks/node_modules/.kop-lock-sha256" 2>/dev/null || true)
  [ "$want" = "$have" ] && return 0
  if (cd "$checks" && npm ci --no-audit --no-fund --loglevel=error) >"$work/npm.log" 2>&1; then
    echo "$want" >"$checks/node_modules/.kop-lock-sha256"
    return 0
  fi
  npm_error=$(tail -n 5 "$work/npm.log")
  return 1
}
