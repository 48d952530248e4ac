# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# The npm packages of kubesim's CEL helper (tests/kubesim/cel: celhelper.mjs
# on @bufbuild/cel, docs/kubesim.md §6), for scripts that start kubesim
# (sourced, not run). npm takes its registry from the machine's own
# configuration.
#
#   cel_helper_install TOP
#       npm ci in TOP/tests/kubesim/cel, skipped while
#       node_modules/.kop-lock-sha256 holds the sha256 of its lock file;
#       returns non-zero, with the tail of npm's log on stderr, when npm ci
#       fails.

cel_helper_install() {
  local dir=$1/tests/kubesim/cel want have log
  want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
  have=$(cat "$dir/node_modules/.kop-lock-sha256" 2>/dev/null || true)
  [ "$want" = "$have" ] && return 0
  log=$(mktemp)
  if (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >"$log" 2>&1; then
    echo "$want" >"$dir/node_modules/.kop-lock-sha256"
    rm -f "$log"
    return 0
  fi
  echo "npm ci in tests/kubesim/cel failed:" >&2
  tail -n 20 "$log" >&2
  rm -f "$log"
  return 1
}
