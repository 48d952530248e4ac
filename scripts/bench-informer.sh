#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Informer benchmark (docs/performance.md §3.4: store memory per cached child object
# < 2 KiB). Builds tests/bench/bench_informer.c and kubesim, then runs it:
# N Deployments created in kubesim through kop_client (token bucket off),
# the informer's LIST+sync time, kop_store_bytes per object, and the heap
# and RSS deltas of the sync.
#
#   scripts/bench-informer.sh [-n N] [KUBESIM_BIN]   (default N = 10000)
#   BUILD_DIR=builddir scripts/bench-informer.sh
#
# Uses the meson target bench_informer when the build defines it; otherwise
# compiles the benchmark by hand against the build's static libraries. The
# build should be optimized (meson's default here is debugoptimized).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# shellcheck source=scripts/lib/bench-common.sh
. scripts/lib/bench-common.sh
build=${BUILD_DIR:-build}

bench_usage_line="usage: scripts/bench-informer.sh [-n N] [KUBESIM_BIN]"
bench_n_and_one_arg "$@"

bench_setup "$build" --buildtype=debugoptimized
ninja -C "$build" tests/kubesim/kubesim >/dev/null
bench_c_program "$build" bench_informer

echo "command: scripts/bench-informer.sh $*"
echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "machine: $(uname -srm), $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
KOP_BUILD_ROOT=$top/$build "$bench_bin" "$@"
