#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Installs what is missing, builds, and runs every test suite: plain (gcc),
# under ASan+UBSan (clang) and the concurrent modules under TSan (clang).
# Exits non-zero on any failure.
#
#   scripts/test.sh            everything
#   KOP_TEST_QUICK=1 scripts/test.sh    plain build only
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

scripts/install-deps.sh || { echo "test.sh: installing dependencies failed" >&2; exit 1; }
# kubesim's CEL helper (x-kubernetes-validations): without it CRDs with
# rules are refused, so a failed install fails the run, never skips CEL.
# shellcheck source=scripts/lib/celhelper.sh
. scripts/lib/celhelper.sh
cel_helper_install "$top" ||
  { echo "test.sh: installing the CEL helper's npm packages (tests/kubesim/cel) failed" >&2; exit 1; }

jobs=$(nproc 2>/dev/null || echo 2)
failed_runs=()
total_ok=0
total_fail=0

count_results() {
  # Sum up meson's JSON test log of one build directory.
  local log=$1/meson-logs/testlog.json ok fail
  [ -f "$log" ] || return 0
  ok=$(grep -c '"result": "OK"' "$log" || true)
  fail=$(grep -c -E '"result": "(FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS)"' "$log" || true)
  total_ok=$((total_ok + ok))
  total_fail=$((total_fail + fail))
}

run() {
  # run NAME BUILDDIR "meson setup args" [meson test args...]
  local name=$1 dir=$2 setup=$3
  shift 3
  echo "=== $name: configure + build ($dir)"
  if [ ! -f "$dir/build.ninja" ]; then
    # shellcheck disable=SC2086
    # Warnings are errors here (and in CI), not in the project's default.
    if ! meson setup "$dir" --werror $setup >"$dir.setup.log" 2>&1; then
      cat "$dir.setup.log"; failed_runs+=("$name (configure)"); return
    fi
  fi
  if ! ninja -C "$dir" -j "$jobs" >"$dir.build.log" 2>&1; then
    tail -n 60 "$dir.build.log"; failed_runs+=("$name (build)"); return
  fi
  echo "=== $name: test"
  if ! meson test -C "$dir" --print-errorlogs --num-processes "$jobs" "$@"; then
    failed_runs+=("$name")
  fi
  count_results "$dir"
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$top/tests/tsan.supp}

CC=gcc run plain build ""

if [ -z "${KOP_TEST_QUICK:-}" ]; then
  CC=clang CK_FORK=no run asan build-asan "-Db_sanitize=address,undefined -Db_lundef=false" \
    --timeout-multiplier 3
  # Concurrent modules under TSan (those that exist in this tree).
  tsan_tests=()
  for t in metrics log ratelimit store informer workqueue events client execcred leader tls http manager migrator controller; do
    [ -f "tests/test_$t.c" ] && tsan_tests+=("$t")
  done
  # In-process integration suites whose threads are kop's own.
  for t in informer leader; do
    [ -f "tests/integration/test_$t.c" ] && tsan_tests+=("integration_$t")
  done
  if [ ${#tsan_tests[@]} -gt 0 ]; then
    CC=clang CK_FORK=no run tsan build-tsan "-Db_sanitize=thread -Db_lundef=false" \
      --timeout-multiplier 4 "${tsan_tests[@]}"
  fi
fi

# Optional coverage-guided fuzzing (libFuzzer, clang), e.g.
# KOP_FUZZ_SECONDS=30 scripts/test.sh. The corpus in tests/fuzz/corpus is
# replayed by the fuzz_corpus suite in every run above.
if [ -n "${KOP_FUZZ_SECONDS:-}" ]; then
  scripts/fuzz.sh "$KOP_FUZZ_SECONDS" || failed_runs+=("fuzz")
fi

echo
if [ ${#failed_runs[@]} -ne 0 ]; then
  echo "test.sh: FAILED: ${failed_runs[*]}"
  echo "$total_ok passed, $total_fail failed"
  exit 1
fi
echo "test.sh: all suites passed"
echo "$total_ok passed, $total_fail failed"
