# SPDX-License-Identifier: Apache-2.0
#
# Shared by the shell suites in tests/scripts: PASS/FAIL/SKIP lines with
# their counts, the closing line ("N passed, N failed, N skipped") and exit
# status, waiting for a line in a log, and the npm packages that validate
# manifests (tests/manifests). Source it after setting $work (a scratch
# directory) and, for npm_checks, $checks (the tests/manifests directory).

# kop started by a suite stops at once on SIGTERM (the shutdown delay has
# its own suite, integration_shutdown).
export KOP_SHUTDOWN_DELAY=${KOP_SHUTDOWN_DELAY:-0}

passed=0
failed=0
skipped=0
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
