#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# kop under attack: a release build of kop --webhook-only on loopback serves
# a legitimate apiserver-like load (8 keep-alive TLS connections, conversion
# and admission reviews at a fixed rate, a kubelet-like /healthz probe every
# second on a new connection, 1 s timeout) while, one at a time, an attack
# runs for SECONDS (tests/bench/abuse.py; attackers use the source addresses
# 127.0.0.2-5, every client targets 127.0.0.1 only, and each stops by
# itself). Prints, per attack: legitimate requests sent and failed, their
# p99 against the no-attack baseline, the slowest probe answer, kop's peak
# RSS during the attack, and whether kop is alive at the end.
#
# Goal: no failed legitimate request, p99 <= 5x baseline and < 100 ms, every
# probe answered within 1 s, peak RSS < 128 MiB, kop alive.
#
# Everything shares two cores here, while in a cluster the apiserver, the
# kubelet and the attacking pods run elsewhere. So that the latencies
# measure kop and not the measuring client's wait for a core, the load and
# probe client runs at nice -10 and the attackers at nice 10; kop runs at
# the default priority and gets no help.
#
#   scripts/bench-abuse.sh [SECONDS]
#
# KOP_BIN: the kop binary to attack (default: build-release/kop, built
# here), e.g. a release build of the tree before a change.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# shellcheck source=scripts/lib/bench-common.sh
. scripts/lib/bench-common.sh
bench_usage_line="usage: scripts/bench-abuse.sh [SECONDS]"
bench_no_help "$@"
[ $# -le 1 ] || bench_usage "one argument at most"
secs=${1:-10}
bench_count SECONDS "$secs"

[ -n "${KOP_BIN:-}" ] || scripts/install-deps.sh
bench_need_python3
bench_kop
tool="$top/tests/bench/abuse.py"

tmp=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  jobs -p | xargs -r kill 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
scripts/gen-certs.sh "$tmp/certs" >/dev/null
ca="$tmp/certs/ca.crt"

port=$(bench_free_port)
health=$(bench_free_port)
metrics=$(bench_free_port)
"$kop" --webhook-only --shutdown-delay 0 --cert-dir "$tmp/certs" --webhook-host 127.0.0.1 --webhook-port "$port" \
  --health-probe-bind-address "127.0.0.1:$health" --metrics-bind-address "127.0.0.1:$metrics" \
  --log-level error >"$tmp/kop.log" 2>&1 &
pid=$!
ready=
for _ in $(seq 1 200); do
  if curl -sf -o /dev/null "http://127.0.0.1:$health/readyz"; then
    ready=1
    break
  fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.05
done
if [ -z "$ready" ]; then
  # e.g. a port taken between bench_free_port and kop's bind
  cat "$tmp/kop.log" >&2
  echo "bench-abuse: FAIL: kop did not become ready (log above)" >&2
  exit 1
fi

rss_watch() { # rss_watch FILE: max VmRSS (KiB) of kop until killed
  local max=0 v
  while v=$(awk '/VmRSS/ { print $2 }' "/proc/$pid/status" 2>/dev/null); do
    [ -n "$v" ] && [ "$v" -gt "$max" ] && max=$v && echo "$max" >"$1"
    sleep 0.1
  done
}

renegotiate() { # TLS 1.2 clients asking for renegotiation ("R"), 4 at a time
  local end=$((SECONDS + secs)) pids=()
  for _ in 1 2 3 4; do
    (
      while [ "$SECONDS" -lt "$end" ]; do
        { echo R; sleep 0.1; echo R; sleep 0.1; } |
          nice -n 10 timeout 2 openssl s_client -connect "127.0.0.1:$port" -tls1_2 -CAfile "$ca" \
            >/dev/null 2>&1 || true
      done
    ) &
    pids+=($!)
  done
  wait "${pids[@]}"
}

# run NAME: the load, and the attack NAME beside it ("baseline": none)
run() {
  local name=$1 rss="$tmp/rss.$1" w
  echo 0 >"$rss"
  rss_watch "$rss" &
  w=$!
  nice -n -10 python3 "$tool" load --port "$port" --health "$health" --ca "$ca" --seconds "$secs" \
    >"$tmp/load.$name" &
  local l=$!
  sleep 0.5 # the load's connections are up before the attack starts
  case $name in
  baseline) ;;
  renegotiation) renegotiate ;;
  *) nice -n 10 python3 "$tool" "$name" --port "$port" --health "$health" --ca "$ca" --seconds "$secs" ;;
  esac
  wait "$l"
  kill "$w" 2>/dev/null || true
  wait "$w" 2>/dev/null || true
  sleep 1 # connections of the attack time out before the next one
}

attacks=(slowloris-webhook slowloris-health slow-body half-open handshake-flood max-bodies
  after-413 hostile-json renegotiation)

echo "kop under attack"
echo "  date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "  machine: $(bench_machine)"
echo "  command: ${KOP_BIN:+KOP_BIN=$KOP_BIN }scripts/bench-abuse.sh $secs   (release build, kop --webhook-only, default limits)"
echo "  load:    8 keep-alive TLS connections, 100 reviews/s (conversion and admission alternate),"
echo "           /healthz every 1 s on a new connection with a 1 s timeout"
echo "  priority: load and probes at nice -10, attackers at nice 10, kop at 0 (see the header)"
echo
run baseline
base=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["p99_ms"])' "$tmp/load.baseline")
fails=0
printf '%-18s %6s %6s %9s %7s %10s %8s %7s  %s\n' attack sent failed "p99 ms" "x base" "probe max" "RSS MiB" alive verdict
for name in baseline "${attacks[@]}"; do
  [ "$name" = baseline ] || run "$name"
  alive=yes
  kill -0 "$pid" 2>/dev/null || alive=no
  python3 - "$tmp/load.$name" "$tmp/rss.$name" "$base" "$name" "$alive" <<'PY' || fails=$((fails + 1))
import json, sys
s = json.load(open(sys.argv[1]))
rss = int(open(sys.argv[2]).read().strip() or 0) / 1024
base, name, alive = float(sys.argv[3]), sys.argv[4], sys.argv[5]
ratio = s["p99_ms"] / base if base else 0
ok = (s["failed"] == 0 and s["probe_failed"] == 0 and s["p99_ms"] < 100 and ratio <= 5
      and rss < 128 and alive == "yes")
print("%-18s %6d %6d %9.1f %7.1f %8.0f ms %8.1f %7s  %s" % (
    name, s["sent"], s["failed"], s["p99_ms"], ratio, s["probe_max_ms"], rss, alive,
    "ok" if ok else "MISSED"))
sys.exit(0 if ok else 1)
PY
  [ "$alive" = yes ] || break
done
echo
echo "baseline p99 ${base} ms; goals: 0 failed, p99 <= 5x baseline and < 100 ms, probes < 1 s, RSS < 128 MiB"
timed_out=$(curl -s "http://127.0.0.1:$metrics/metrics" | awk '/^kop_http_connections_timed_out_total/ { printf "%s%s=%s", sep, $1, $2; sep=" " }')
throttled=$(curl -s "http://127.0.0.1:$metrics/metrics" | awk '/^kop_tls_handshakes_throttled_total/ { print $2 }')
echo "kop's counters at the end: ${timed_out:-no slow connections closed}; handshakes throttled: ${throttled:-0}"
exit $((fails > 0))
