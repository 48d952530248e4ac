#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Store benchmark (docs/performance.md §3.4: store memory per cached child
# object < 2 KiB).
# Builds tests/bench/bench_store.c and runs it: heap per cached Deployment,
# kop_store_bytes per object, compact JSON size, put/get/list times.
#
#   scripts/bench-store.sh [-n N] [DEPLOYMENT_LIST_JSON]   (default N = 10000)
#   BUILD_DIR=builddir scripts/bench-store.sh
#
# Uses the meson target bench_store when the build defines it; otherwise
# compiles the benchmark by hand against the build's static libraries. The
# build should be optimized (meson's default here is debugoptimized).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# shellcheck source=scripts/lib/bench-common.sh
. scripts/lib/bench-common.sh
build=${BUILD_DIR:-build}

bench_usage_line="usage: scripts/bench-store.sh [-n N] [DEPLOYMENT_LIST_JSON]"
bench_n_and_one_arg "$@"

bench_setup "$build" --buildtype=debugoptimized
bench_c_program "$build" bench_store

echo "command: scripts/bench-store.sh $*"
KOP_SOURCE_ROOT=$top "$bench_bin" "$@"
