#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The token bucket in real time (docs/performance.md §3.7: over 10 s at qps=50/burst=100
# the request count is within 2% of 600): threads call the blocking wait as
# fast as they can; prints machine, date, command and the grant count.
#
#   scripts/bench-ratelimit.sh [QPS [BURST [SECONDS [THREADS]]]]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# shellcheck source=scripts/lib/bench-common.sh
. scripts/lib/bench-common.sh
scripts/install-deps.sh
build=${BUILD_DIR:-build}
bench_setup "$build"
ninja -C "$build" tests/bench_ratelimit >/dev/null
echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "machine: $(bench_cpus)"
echo "command: scripts/bench-ratelimit.sh $*"
"$build/tests/bench_ratelimit" "$@"
