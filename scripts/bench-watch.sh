#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Watch-line decode benchmark (the informer's watch loop): CPU per event of
# jansson's json_loadb (what the watch parser used before) against
# kop_watch_parser as the informer runs it (jscan validation, then a
# decode that leaves metadata.managedFields out) and the same parser
# decoding everything. Builds tests/bench/bench_watch.c and runs it pinned
# to core 0.
#
#   scripts/bench-watch.sh [-n PASSES] [DEPLOYMENT_LIST_JSON]   (default 10)
#   BUILD_DIR=builddir scripts/bench-watch.sh
#
# Compiles the benchmark against the build's static libraries. The build
# should be optimized (meson's default here is debugoptimized).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# shellcheck source=scripts/lib/bench-common.sh
. scripts/lib/bench-common.sh
build=${BUILD_DIR:-build}

bench_usage_line="usage: scripts/bench-watch.sh [-n PASSES] [DEPLOYMENT_LIST_JSON]"
bench_no_help "$@"

bench_setup "$build" --buildtype=debugoptimized
bench_c_program "$build" bench_watch

echo "machine: $(bench_machine)"
echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "command: scripts/bench-watch.sh $*"
KOP_SOURCE_ROOT=$top taskset -c 0 "$bench_bin" "$@"
