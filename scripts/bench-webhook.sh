#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Webhook benchmarks (docs/performance.md §3), run against a release build of kop
# --webhook-only on loopback:
#   * 1-object ConversionReview over keep-alive TLS with wrk: requests/s and
#     kop's CPU time per request (utime+stime from /proc, divided by the
#     request count), with 1 connection and with 8;
#   * the same over plain HTTP is not possible (kop only serves TLS), so the
#     TLS hop cost is reported by the net layer's own numbers;
#   * 100- and 10,000-object reviews: server CPU per review (curl, keep-alive);
#   * exec to the first successful TLS /convert.
# Prints machine, date, command and the numbers. Needs wrk and curl.
#
#   scripts/bench-webhook.sh [SECONDS]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# shellcheck source=scripts/lib/bench-common.sh
. scripts/lib/bench-common.sh
bench_usage_line="usage: scripts/bench-webhook.sh [SECONDS]"
bench_no_help "$@"
[ $# -le 1 ] || bench_usage "one argument at most"
secs=${1:-10}
bench_count SECONDS "$secs"

scripts/install-deps.sh
command -v wrk >/dev/null || { apt-get install -y -qq wrk >/dev/null; }

build="build-release"
bench_setup "$build" --buildtype=release -Dtests=false
ninja -C "$build" kop >/dev/null
kop="$top/$build/kop"

tmp=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
scripts/gen-certs.sh "$tmp/certs" >/dev/null

# ---- payloads ---------------------------------------------------------------
review() { # review N -> ConversionReview v1 -> v2 with N objects
  awk -v n="$1" 'BEGIN {
    printf "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\",\"request\":{\"uid\":\"bench-%d\",\"desiredAPIVersion\":\"mygroup.example.com/v2\",\"objects\":[", n
    for (i = 0; i < n; i++) {
      if (i) printf ","
      printf "{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\",\"metadata\":{\"name\":\"res-%d\",\"namespace\":\"default\",\"uid\":\"6f1c2f7e-0000-4000-8000-%012d\",\"resourceVersion\":\"%d\",\"generation\":1,\"creationTimestamp\":\"2026-01-01T00:00:00Z\",\"labels\":{\"app\":\"bench\"}},\"spec\":{\"replicas\":3,\"image\":\"registry.example.com:5000/team/app:1.%d\",\"port\":8080,\"serviceType\":\"ClusterIP\"},\"status\":{\"observedGeneration\":1,\"replicas\":3,\"readyReplicas\":3,\"conditions\":[{\"type\":\"Available\",\"status\":\"True\",\"lastTransitionTime\":\"2026-01-01T00:00:00Z\",\"reason\":\"MinimumReplicasAvailable\",\"message\":\"Deployment has minimum availability.\"}]}}", i, i, 1000 + i, i
    }
    printf "]}}"
  }'
}
review 1 >"$tmp/r1.json"
review 100 >"$tmp/r100.json"
review 10000 >"$tmp/r10000.json"

start_kop() {
  "$kop" --webhook-only --shutdown-delay 0 --cert-dir "$tmp/certs" --webhook-host 127.0.0.1 --webhook-port 0 \
    --metrics-bind-address 0 --health-probe-bind-address 0 --log-level warn \
    --log-format json >"$tmp/kop.log" 2>&1 &
  pid=$!
}

cpu_ticks() { # utime + stime of $pid, in clock ticks
  awk '{ print $14 + $15 }' "/proc/$pid/stat"
}
hz=$(getconf CLK_TCK)

# ---- exec to first successful /convert ----------------------------------------
# kop logs at warn here, so the port is fixed for this measurement.
port=$((20000 + RANDOM % 20000))
t0=$(date +%s%N)
"$kop" --webhook-only --shutdown-delay 0 --cert-dir "$tmp/certs" --webhook-host 127.0.0.1 --webhook-port "$port" \
  --metrics-bind-address 0 --health-probe-bind-address 0 --log-level warn >"$tmp/kop0.log" 2>&1 &
pid=$!
until curl -s -o /dev/null --cacert "$tmp/certs/ca.crt" -H 'Content-Type: application/json' \
  --data-binary @"$tmp/r1.json" "https://localhost:$port/convert"; do :; done
t1=$(date +%s%N)
startup_ms=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1e6 }')
rss_idle_kb=$(awk '/VmRSS/ { print $2 }' "/proc/$pid/status")
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=

# ---- wrk, 1-object reviews --------------------------------------------------
start_kop
for _ in $(seq 1 100); do
  port=$(grep -o '"serving webhook"[^}]*' "$tmp/kop.log" 2>/dev/null | grep -o '"port":[0-9]*' | cut -d: -f2 || true)
  [ -n "$port" ] && break
  sleep 0.05
done
# kop logs at warn: the "serving webhook" line is info, so find the port in /proc.
if [ -z "$port" ]; then
  port=$(awk -v p="$pid" 'BEGIN{}' /dev/null; ss -ltnp 2>/dev/null | grep "pid=$pid," | grep -o '127.0.0.1:[0-9]*' | head -n1 | cut -d: -f2)
fi
[ -n "$port" ] || { echo "cannot find kop's port"; cat "$tmp/kop.log"; exit 1; }

cat >"$tmp/post.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open("$tmp/r1.json", "rb")
wrk.body = f:read("*a")
f:close()
LUA

run_wrk() { # run_wrk CONNS THREADS
  local before after reqs
  before=$(cpu_ticks)
  wrk -t "$2" -c "$1" -d "${secs}s" -s "$tmp/post.lua" "https://localhost:$port/convert?timeout=10s" >"$tmp/wrk.out"
  after=$(cpu_ticks)
  reqs=$(awk '/requests in/ { print $1 }' "$tmp/wrk.out")
  rps=$(awk '/Requests\/sec/ { print $2 }' "$tmp/wrk.out")
  errs=$(grep -E 'Non-2xx|Socket errors' "$tmp/wrk.out" || true)
  us=$(awk -v t=$((after - before)) -v hz="$hz" -v n="$reqs" 'BEGIN { printf "%.1f", t / hz * 1e6 / n }')
  printf '  %-28s %10s req/s   %6s us CPU/request   %s\n' "$1 conn, $2 thread(s):" "$rps" "$us" "${errs:-no errors}"
}

echo "kop webhook benchmark"
echo "  date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "  machine: $(bench_machine)"
echo "  command: scripts/bench-webhook.sh $secs   (release build, wrk $(wrk -v 2>&1 | head -n1 | awk '{print $2}'))"
echo
echo "exec to first successful TLS /convert: ${startup_ms} ms; idle RSS after it: ${rss_idle_kb} KiB"
echo
echo "1-object ConversionReview (v1 -> v2) over keep-alive TLS, ${secs}s each:"
run_wrk 1 1
run_wrk 8 2

big() { # big FILE RUNS: server CPU per review, wall time per review
  local before after
  before=$(cpu_ticks)
  local urls=()
  for _ in $(seq 1 "$2"); do urls+=("https://localhost:$port/convert"); done
  local t0 t1
  t0=$(date +%s%N)
  curl -s --cacert "$tmp/certs/ca.crt" -H 'Content-Type: application/json' \
    -H 'Expect:' --data-binary @"$1" "${urls[@]}" >/dev/null
  t1=$(date +%s%N)
  after=$(cpu_ticks)
  printf '  %-10s %8.2f ms server CPU/review   %8.2f ms wall/review (%d runs, %s bytes)\n' \
    "$(basename "$1" .json | sed 's/^r//') objects" \
    "$(awk -v t=$((after - before)) -v hz="$hz" -v n="$2" 'BEGIN { print t / hz * 1000 / n }')" \
    "$(awk -v a="$t0" -v b="$t1" -v n="$2" 'BEGIN { print (b - a) / 1e6 / n }')" "$2" \
    "$(stat -c %s "$1")"
}
echo
echo "large reviews (curl, one keep-alive connection):"
big "$tmp/r100.json" 500
big "$tmp/r10000.json" 10
echo
echo "RSS after the run: $(awk '/VmRSS/ { print $2 }' "/proc/$pid/status") KiB"
