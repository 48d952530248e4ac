#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Informer benchmark (docs/performance.md §3.4: store memory per cached child object
# < 2 KiB). Builds tests/bench/bench_informer.c and kubesim, then runs it:
# N Deployments created in kubesim through kop_client (token bucket off),
# the informer's LIST+sync time, kop_store_bytes per object, and the heap
# and RSS deltas of the sync.
#
#   scripts/bench-informer.sh [-n N]          (default N = 10000)
#   BUILD_DIR=builddir scripts/bench-informer.sh
#
# Uses the meson target bench_informer when the build defines it; otherwise
# compiles the benchmark by hand against the build's static libraries. The
# build should be optimized (meson's default here is debugoptimized).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
build=${BUILD_DIR:-build}

if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" --buildtype=debugoptimized >/dev/null
fi

ninja -C "$build" tests/kubesim/kubesim >/dev/null
target=$(ninja -C "$build" -t targets all 2>/dev/null |
  sed -n 's/^\(tests\/\(bench\/\)\{0,1\}bench_informer\): .*/\1/p' | head -n 1)
if [ -n "$target" ]; then
  ninja -C "$build" "$target" >/dev/null
  bin=$build/$target
else
  ninja -C "$build" src/core/libkop_core.a src/kube/libkop_kube.a >/dev/null
  bin=$build/bench_informer
  # shellcheck disable=SC2046 # pkg-config output is a list of flags
  ${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror \
    -Iinclude -I"$build" tests/bench/bench_informer.c -o "$bin" \
    "$build/src/kube/libkop_kube.a" "$build/src/core/libkop_core.a" \
    $(pkg-config --cflags --libs jansson libcurl yaml-0.1) -lpthread -lm
fi

echo "command: scripts/bench-informer.sh $*"
echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "machine: $(uname -srm), $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
KOP_BUILD_ROOT=$top/$build "$bin" "$@"
