#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Two kop builds side by side: which one spends less CPU per conversion
# review? For a change to the request path, where the machine's own drift
# between runs (other tenants, caches) is larger than the change.
#
# Each round runs both binaries, one after the other (the order swapped
# every round), each fresh, alone and pinned to core 0, with wrk pinned to
# core 1: 64 keep-alive TLS connections posting the 1-object and the
# 100-object ConversionReview of bench-peers.sh (scripts/lib/review-gen.sh),
# 2 s of warm-up, then SECONDS measured. Per run: server CPU per request
# (utime + stime from /proc over the completed requests) and context
# switches per request (all threads, from /proc/PID/task/*/status). Every
# response must be 200 with "Success".
#
# Prints machine, date, command, every run, and per size the median CPU
# per request of each build, the median (and range) of the per-round
# ratios B/A, and the context switches per request. A ratio from one round
# compares runs seconds apart; its median over the rounds is the figure.
#
#   scripts/bench-pair.sh [-r ROUNDS] [-s SECONDS] KOP_A KOP_B
#
# ROUNDS defaults to 10, SECONDS to 3 (about ROUNDS * 4 * (SECONDS + 4) s).
# KOP_A and KOP_B are kop binaries (release builds, e.g. one built in a
# worktree of the old commit). Installs wrk, curl, python3 when missing.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# shellcheck source=scripts/lib/bench-common.sh
. scripts/lib/bench-common.sh
# shellcheck source=scripts/lib/review-gen.sh
. scripts/lib/review-gen.sh
bench_usage_line="usage: scripts/bench-pair.sh [-r ROUNDS] [-s SECONDS] KOP_A KOP_B"
rounds=10
secs=3
while [ $# -gt 0 ]; do
  case $1 in
    -r) [ $# -ge 2 ] || bench_usage "-r needs a value"; rounds=$2; shift 2 ;;
    -s) [ $# -ge 2 ] || bench_usage "-s needs a value"; secs=$2; shift 2 ;;
    -h | --help) bench_usage ;;
    -*) bench_usage "unknown option $1" ;;
    *) break ;;
  esac
done
[ $# -eq 2 ] || bench_usage "two kop binaries, please"
bench_count ROUNDS "$rounds"
bench_count SECONDS "$secs"
bins=("$1" "$2")
for b in "${bins[@]}"; do
  [ -x "$b" ] || bench_usage "not an executable: $b"
done

die() { echo "bench-pair: FAIL: $*" >&2; exit 1; }
bench_need_tools wrk:wrk curl:curl openssl:openssl taskset:util-linux ss:iproute2
bench_need_python3
[ "$(nproc)" -ge 2 ] || die "needs 2 cores (server on core 0, wrk on core 1)"

bench_scratch
scripts/gen-certs.sh "$tmp/certs" >/dev/null
for n in 1 100; do
  review "$n" >"$tmp/r$n.json"
  review_lua "$tmp" "$n"
done

ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }
switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ { s += $2 } END { print s + 0 }'; }
wrk_run() { # wrk_run PORT N SECONDS OUT
  timeout $(($3 + 60)) taskset -c 1 wrk -t 1 -c 64 -d "${3}s" --timeout 30s \
    -s "$tmp/post$2.lua" "https://127.0.0.1:$1/convert" >"$4" 2>&1 || { cat "$4" >&2; die "wrk failed"; }
  if ! grep -q '^bad responses: 0$' "$4" || grep -q -E 'Non-2xx|Socket errors' "$4"; then
    cat "$4" >&2
    die "some responses were not HTTP 200 with a Success result"
  fi
}

run_one() { # run_one WHICH(A|B) N: prints "WHICH N cpu_us cs_per_req"
  local which=$1 n=$2 bin port b0 b1 c0 c1 reqs
  bin=${bins[0]}
  [ "$which" = B ] && bin=${bins[1]}
  port=$(bench_free_port)
  taskset -c 0 "$bin" --webhook-only --shutdown-delay 0 --cert-dir "$tmp/certs" \
    --webhook-host 127.0.0.1 --webhook-port "$port" --metrics-bind-address 0 \
    --health-probe-bind-address 0 --log-level warn >"$tmp/kop.log" 2>&1 &
  kpid=$!
  local ok=
  for _ in $(seq 1 100); do
    if curl -s -o /dev/null --max-time 5 --cacert "$tmp/certs/ca.crt" -H 'Content-Type: application/json' \
      --data-binary @"$tmp/r1.json" "https://127.0.0.1:$port/convert"; then
      ok=1
      break
    fi
    kill -0 "$kpid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$ok" ] || { cat "$tmp/kop.log" >&2; die "$bin does not answer"; }
  wrk_run "$port" "$n" 2 "$tmp/warm.out"
  b0=$(ticks "$kpid")
  c0=$(switches "$kpid")
  wrk_run "$port" "$n" "$secs" "$tmp/wrk.out"
  b1=$(ticks "$kpid")
  c1=$(switches "$kpid")
  kill "$kpid"
  wait "$kpid" 2>/dev/null || true
  kpid=
  reqs=$(awk '/ requests in / { print $1 }' "$tmp/wrk.out")
  [ "${reqs:-0}" -gt 0 ] || die "no request completed"
  awk -v w="$which" -v n="$n" -v t=$((b1 - b0)) -v hz="$(getconf CLK_TCK)" -v r="$reqs" -v c=$((c1 - c0)) \
    'BEGIN { printf "%s %d %.1f %.2f\n", w, n, t / hz * 1e6 / r, c / r }'
}

echo "kop builds side by side (CPU per conversion review)"
echo "  date:     $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "  machine:  $(bench_machine)"
echo "  command:  scripts/bench-pair.sh -r $rounds -s $secs A B"
echo "  A:        ${bins[0]} ($("${bins[0]}" --version 2>&1 | head -n1))"
echo "  B:        ${bins[1]} ($("${bins[1]}" --version 2>&1 | head -n1))"
echo "  method:   per round A then B (B then A every other round), fresh, alone on core 0;"
echo "            wrk -t1 -c64 on core 1, 2 s warm-up, ${secs} s measured; 1 and 100 objects"
echo
: >"$tmp/runs"
for r in $(seq 1 "$rounds"); do
  order=(A B)
  [ $((r % 2)) -eq 0 ] && order=(B A)
  for n in 1 100; do
    for w in "${order[@]}"; do
      line=$(run_one "$w" "$n")
      echo "$r $line" >>"$tmp/runs"
      read -r lw ln lcpu lcs <<<"$line"
      echo "  round $r: $lw, $ln object(s): $lcpu us CPU/request, $lcs context switches/request"
    done
  done
done
echo
python3 - "$tmp/runs" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    r, w, n, cpu, cs = line.split()
    runs.setdefault(int(n), {}).setdefault(int(r), {})[w] = (float(cpu), float(cs))
for n in sorted(runs):
    rounds = [v for v in runs[n].values() if "A" in v and "B" in v]
    a = [v["A"][0] for v in rounds]
    b = [v["B"][0] for v in rounds]
    ratio = sorted(y / x for x, y in zip(a, b))
    print(f"{n} object{'s' if n > 1 else ''}: A {statistics.median(a):.1f} us, B {statistics.median(b):.1f} us per request (medians of {len(rounds)} rounds);"
          f" B/A per round: median {statistics.median(ratio):.3f} (range {ratio[0]:.3f}-{ratio[-1]:.3f});"
          f" context switches/request A {statistics.median(v['A'][1] for v in rounds):.2f}, B {statistics.median(v['B'][1] for v in rounds):.2f}")
PY
