#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Store benchmark (docs/performance.md §3.4: store memory per cached child
# object < 2 KiB).
# Builds tests/bench/bench_store.c and runs it: heap per cached Deployment,
# kop_store_bytes per object, compact JSON size, put/get/list times.
#
#   scripts/bench-store.sh [-n N]          (default N = 10000)
#   BUILD_DIR=builddir scripts/bench-store.sh
#
# Uses the meson target bench_store when the build defines it; otherwise
# compiles the benchmark by hand against the build's static libraries. The
# build should be optimized (meson's default here is debugoptimized).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
build=${BUILD_DIR:-build}

if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" --buildtype=debugoptimized >/dev/null
fi

target=$(ninja -C "$build" -t targets all 2>/dev/null |
  sed -n 's/^\(tests\/\(bench\/\)\{0,1\}bench_store\): .*/\1/p' | head -n 1)
if [ -n "$target" ]; then
  ninja -C "$build" "$target" >/dev/null
  bin=$build/$target
else
  ninja -C "$build" src/core/libkop_core.a src/kube/libkop_kube.a >/dev/null
  bin=$build/bench_store
  # shellcheck disable=SC2046 # pkg-config output is a list of flags
  ${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror \
    -Iinclude -I"$build" tests/bench/bench_store.c -o "$bin" \
    "$build/src/kube/libkop_kube.a" "$build/src/core/libkop_core.a" \
    $(pkg-config --cflags --libs jansson libcurl yaml-0.1) -lpthread -lm
fi

echo "command: scripts/bench-store.sh $*"
KOP_SOURCE_ROOT=$top "$bin" "$@"
