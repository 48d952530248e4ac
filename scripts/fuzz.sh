#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Builds the libFuzzer targets (clang, ASan+UBSan, libraries instrumented
# with -fsanitize=fuzzer-no-link) and runs each target for a time budget,
# one at a time on one core, starting from the seeds in
# tests/fuzz/corpus/<target>/. Prints a summary (executions, exec/s, cov,
# corpus size, crashes) and exits non-zero when a target crashed.
#
#   scripts/fuzz.sh                  every target, 60 s each
#   scripts/fuzz.sh 300 store watch  those targets, 300 s each
#   KOP_FUZZ_SECONDS=10 scripts/fuzz.sh
#   KOP_FUZZ_BUILD_DIR=build-x scripts/fuzz.sh
#
# Inputs that found new coverage go to <build>/fuzz-corpus/<target>/ (the
# seeds in the source tree are only read). A crashing input is kept as
# <build>/fuzz-crashes/<target>/crash-<sha1> (also leak-, timeout-, oom-);
# reproduce it with <build>/tests/fuzz/fuzz_<target> FILE, minimise it with
# -minimize_crash=1 -runs=10000, and add it to tests/fuzz/corpus/<target>/ so
# that tests/test_fuzz_corpus.c replays it in every test run.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

secs=${KOP_FUZZ_SECONDS:-60}
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then
  secs=$1
  shift
fi
build=${KOP_FUZZ_BUILD_DIR:-build-fuzz}

# target -> -max_len (mirrors the table in tests/fuzz/targets.c)
declare -A max_len=(
  [conversion_review]=16384
  [admission_review]=16384
  [conversion]=8192
  [imageref]=512
  [watch]=16384
  [kubeconfig]=8192
  [store]=4096
  [config]=1024
  [jscan]=4096
)
all=(conversion_review admission_review conversion imageref watch kubeconfig store config jscan)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
for t in "${targets[@]}"; do
  [ -n "${max_len[$t]:-}" ] || { echo "fuzz.sh: unknown target $t (known: ${all[*]})" >&2; exit 2; }
done

command -v clang >/dev/null || { echo "fuzz.sh: clang is required" >&2; exit 2; }

opts=(-Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false
      -Dc_args=-fsanitize=fuzzer-no-link)
if [ ! -f "$build/build.ninja" ]; then
  CC=clang meson setup "$build" "${opts[@]}" >/dev/null || {
    echo "fuzz.sh: meson setup $build failed" >&2; exit 1; }
else
  meson configure "$build" "${opts[@]}" >/dev/null || {
    echo "fuzz.sh: meson configure $build failed" >&2; exit 1; }
fi
ninja -C "$build" -j2 $(printf 'tests/fuzz/fuzz_%s ' "${targets[@]}") >/dev/null || {
  echo "fuzz.sh: building the fuzz targets failed (is $build configured with CC=clang?)" >&2
  exit 1; }

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

summary=()
crashed=0
for t in "${targets[@]}"; do
  bin=$build/tests/fuzz/fuzz_$t
  work=$build/fuzz-corpus/$t
  crashes=$build/fuzz-crashes/$t
  log=$build/fuzz-logs/$t.log
  mkdir -p "$work" "$crashes" "$(dirname "$log")"
  before=$(find "$crashes" -type f | wc -l)
  echo "fuzz.sh: $t for ${secs}s (log: $log)"
  "$bin" -max_total_time="$secs" -max_len="${max_len[$t]}" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$crashes/" \
    "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  after=$(find "$crashes" -type f | wc -l)
  # last status line: "#123 DONE cov: 456 ft: 789 corp: 12/3Kb ... exec/s: 1000 ..."
  line=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$line")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$line")
  corp=$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' <<<"$line")
  new=$((after - before))
  status=ok
  if [ "$rc" -ne 0 ] || [ "$new" -gt 0 ]; then
    status="CRASH (rc $rc, $new new file(s) in $crashes)"
    crashed=1
    grep -E 'ERROR: |SUMMARY: |fuzz invariant broken|runtime error' "$log" | head -n 5 | sed 's/^/    /'
  fi
  summary+=("$(printf '%-18s %8s runs %7s exec/s  cov %-6s ft %-6s corpus %-5s %s' \
    "$t" "${runs:-?}" "${eps:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$status")")
done

echo
echo "fuzz.sh summary (${secs}s per target, build $build):"
printf '  %s\n' "${summary[@]}"
exit "$crashed"
