#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# kop's conversion webhook side by side with two peers written the usual
# ways (docs/performance.md §2): a Go standard-library webhook (net/http, encoding/json
# into typed structs, what controller-runtime runs; tests/bench/peers/go) and
# a Node.js https webhook (JSON.parse / JSON.stringify; tests/bench/peers/node).
# All three serve the same certificate and get the same bodies:
# ConversionReviews (apiextensions.k8s.io/v1, desired mygroup.example.com/v2)
# of ~1.7 KB MyResource v1 objects (labels, annotations, managedFields, spec,
# status with conditions), with 1, 100 and 10,000 objects (~16.9 MB).
#
# Every server runs alone and fresh, pinned to core 0 (taskset -c 0); the
# load generator is pinned to core 1; all traffic on 127.0.0.1.
#   * First all three answer every size once: HTTP 200, result Success, uid
#     echoed, as many objects as asked in the same order (kind, name,
#     namespace, uid), all in v2; and the Go and Node objects must equal
#     kop's (compared after jq -S). Anything else stops the run.
#   * 1 and 100 objects: wrk, 1 thread, 64 keep-alive connections, SECONDS
#     each after a 2 s warm-up: requests/s, p99 latency and server CPU per
#     request (utime+stime delta from /proc/PID/stat over the completed
#     requests; the <= 64 requests in flight when wrk stops make this high
#     by at most 64/requests). The wrk script checks every response (200 and
#     "Success"); a bad one, a non-2xx or a socket error stops the run.
#     The three servers run side by side (idle while another is measured)
#     and are measured in ROUNDS interleaved rounds (kop, Go, Node, kop, ...):
#     the table shows each figure's median over the rounds, and the ratios
#     are also given per round, so a slow minute of a shared host moves one
#     round of all three instead of one server's only figure.
#   * 10,000 objects: RUNS sequential POSTs with curl over one keep-alive
#     connection: best and median wall time, server CPU per review, RSS
#     before, peak RSS during them (VmHWM after echo 5 > clear_refs), RSS
#     1 s after, and the peak growth over the body size.
#   * Handshakes: 500 fresh TLS connections, one after the other, from a
#     Python (OpenSSL) client offering its default groups and versions:
#     server CPU per full handshake; the group each server picked is
#     reported (openssl s_client's "Server Temp Key"). Then 500 resumed
#     ones: the client keeps the session of one connection that read an
#     answer (in TLS 1.3 the ticket comes after the handshake) and offers
#     it on 2,000 new connections, each checked to be resumed: server CPU
#     per resumed handshake.
# Prints machine, date, command, one table for kop / Go / Node and the
# ratios kop/Node and kop/Go.
#
#   scripts/bench-peers.sh [SECONDS]                 (default 10)
#
# Environment:
#   KOP_BIN          the kop binary to measure (default: build-release/kop,
#                    built here with meson and ninja); set it to compare two
#                    builds, or to measure a build made in another worktree.
#   BENCH_PEERS_RUNS sequential 10,000-object reviews per server (default 5).
#   BENCH_PEERS_ROUNDS interleaved rounds of the 1- and 100-object
#                    measurements (default 3).
#
# Installs what is missing from Debian's packages (golang-go, wrk, nodejs,
# jq, ...). The Go peer is built with the standard library only (no module
# downloads). Takes about 2 + 3 * (2 * ROUNDS * (SECONDS + 2) + 10) seconds
# plus builds.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# shellcheck source=scripts/lib/bench-common.sh
. scripts/lib/bench-common.sh
bench_usage_line="usage: scripts/bench-peers.sh [SECONDS]   (BENCH_PEERS_RUNS, BENCH_PEERS_ROUNDS: counts)"
bench_no_help "$@"
[ $# -le 1 ] || bench_usage "one argument at most"
secs=${1:-10}
runs=${BENCH_PEERS_RUNS:-5}
bench_count SECONDS "$secs"
rounds=${BENCH_PEERS_ROUNDS:-3}
bench_count BENCH_PEERS_RUNS "$runs"
bench_count BENCH_PEERS_ROUNDS "$rounds"

die() { echo "bench-peers: FAIL: $*" >&2; exit 1; }

# ---- dependencies -------------------------------------------------------------
if [ -z "${KOP_BIN:-}" ]; then
  scripts/install-deps.sh
fi
missing=()
for tool in go:golang-go wrk:wrk node:nodejs jq:jq curl:curl openssl:openssl \
  taskset:util-linux lscpu:util-linux ss:iproute2 timeout:coreutils; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  echo "bench-peers: installing ${missing[*]}"
  sudo=
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
bench_need_python3
[ "$(nproc)" -ge 2 ] || die "needs 2 cores (server on core 0, load generator on core 1)"

# ---- kop ----------------------------------------------------------------------
bench_kop

tmp=$(mktemp -d)
declare -A pid=() port=()
stop() { # stop NAME: TERM, then KILL after 5 s
  local p=${pid[$1]:-}
  [ -n "$p" ] || return 0
  kill "$p" 2>/dev/null || true
  for _ in $(seq 1 50); do
    kill -0 "$p" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$p" 2>/dev/null || true
  wait "$p" 2>/dev/null || true
  pid[$1]=
}
cleanup() {
  for name in "${!pid[@]}"; do stop "$name"; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

scripts/gen-certs.sh "$tmp/certs" >/dev/null

# ---- the peers ----------------------------------------------------------------
gocache=$(go env GOCACHE 2>/dev/null || true)
if [ -z "$gocache" ] || [ "$gocache" = off ]; then
  gocache="$tmp/gocache"
fi
(cd tests/bench/peers/go &&
  GOCACHE="$gocache" GOFLAGS='' GOPROXY=off GO111MODULE=on GOWORK=off \
    go build -o "$tmp/peer-go" .) || die "cannot build the Go peer"
# shellcheck disable=SC2046 # pkg-config prints a list of flags
cc -O2 -o "$tmp/bench-crypto" tests/bench/bench_crypto.c $(pkg-config --cflags --libs mbedcrypto) ||
  die "cannot build tests/bench/bench_crypto.c"
node_js="$top/tests/bench/peers/node/server.js"
node --check "$node_js" || die "the Node peer does not parse"

# ---- bodies -------------------------------------------------------------------
# shellcheck source=scripts/lib/review-gen.sh
. scripts/lib/review-gen.sh
sizes=(1 100 10000)
for n in "${sizes[@]}"; do
  review "$n" >"$tmp/r$n.json"
  jq -c '.request.objects[] | [.kind, .metadata.name, .metadata.namespace, .metadata.uid]' \
    "$tmp/r$n.json" >"$tmp/ids.$n" || die "generated review of $n objects is not JSON"
  [ "$(wc -l <"$tmp/ids.$n")" -eq "$n" ] || die "generated review of $n objects has the wrong count"
done
! grep -q -F 'Success' "$tmp/r10000.json" || die "bodies must not contain the word the checks look for"
bytes() { stat -c %s "$1"; }

# ---- servers ------------------------------------------------------------------
free_port() {
  local p
  for _ in $(seq 1 200); do
    p=$((20000 + RANDOM % 30000))
    if [ -z "$(ss -Htan "( sport = :$p )" 2>/dev/null)" ]; then
      echo "$p"
      return 0
    fi
  done
  die "no free port found"
}

names=(kop Go Node)
server_cmd() { # server_cmd NAME PORT: the command line, for the report (DIR = cert dir)
  case $1 in
    kop) echo "kop --webhook-only --cert-dir DIR --webhook-host 127.0.0.1 --webhook-port $2 --metrics-bind-address 0 --health-probe-bind-address 0 --log-level warn --shutdown-delay 0" ;;
    Go) echo "peer-go -cert-dir DIR -host 127.0.0.1 -port $2   (tests/bench/peers/go)" ;;
    Node) echo "node tests/bench/peers/node/server.js DIR 127.0.0.1 $2" ;;
  esac
}

start() { # start NAME: a fresh server on core 0, ready when /convert answers 200
  local name=$1 p
  p=$(free_port)
  case $name in
    kop)
      taskset -c 0 "$kop" --webhook-only --shutdown-delay 0 --cert-dir "$tmp/certs" --webhook-host 127.0.0.1 \
        --webhook-port "$p" --metrics-bind-address 0 --health-probe-bind-address 0 \
        --log-level warn >"$tmp/$name.log" 2>&1 &
      ;;
    Go)
      taskset -c 0 "$tmp/peer-go" -cert-dir "$tmp/certs" -host 127.0.0.1 -port "$p" \
        >"$tmp/$name.log" 2>&1 &
      ;;
    Node)
      taskset -c 0 node "$node_js" "$tmp/certs" 127.0.0.1 "$p" >"$tmp/$name.log" 2>&1 &
      ;;
  esac
  pid[$name]=$!
  port[$name]=$p
  local code=
  for _ in $(seq 1 200); do
    kill -0 "${pid[$name]}" 2>/dev/null || { cat "$tmp/$name.log" >&2; die "$name exited at start"; }
    code=$(post "$name" "$tmp/r1.json" /dev/null 5 || true)
    [ "$code" = 200 ] && return 0
    sleep 0.1
  done
  cat "$tmp/$name.log" >&2
  die "$name does not answer on 127.0.0.1:$p (last HTTP code '${code}')"
}

post() { # post NAME FILE OUT [MAXTIME]: prints the HTTP code
  curl -s --max-time "${4:-120}" --cacert "$tmp/certs/ca.crt" \
    -H 'Content-Type: application/json' -H 'Expect:' --data-binary @"$2" -o "$3" \
    -w '%{http_code}' "https://127.0.0.1:${port[$1]}/convert"
}

stat_field() { # stat_field NAME KEY: a kB value from /proc/PID/status
  awk -v k="$2:" '$1 == k { print $2 }' "/proc/${pid[$1]}/status"
}
cpu_ticks() { # utime + stime of NAME, in clock ticks (fields 14 and 15)
  sed 's/^.*) //' "/proc/${pid[$1]}/stat" | awk '{ print $12 + $13 }'
}
hz=$(getconf CLK_TCK)

# ---- correctness first --------------------------------------------------------
verify() { # verify NAME N
  local name=$1 n=$2 out="$tmp/out.$1.$2.json" code uid
  uid=$(printf '0b6d2b5e-bench-4c1d-9e0f-%012d' "$n")
  code=$(post "$name" "$tmp/r$n.json" "$out") || die "$name: POST of $n objects failed (curl exit $?)"
  [ "$code" = 200 ] || { head -c 600 "$out" >&2; echo >&2; die "$name: $n objects: HTTP $code"; }
  jq -e --arg uid "$uid" --argjson n "$n" '
    .apiVersion == "apiextensions.k8s.io/v1" and .kind == "ConversionReview"
    and .response.uid == $uid and .response.result.status == "Success"
    and (.response.convertedObjects | length) == $n
    and all(.response.convertedObjects[]; .apiVersion == "mygroup.example.com/v2")' \
    "$out" >/dev/null || { head -c 600 "$out" >&2; echo >&2; die "$name: $n objects: not a Success review with $n v2 objects and uid $uid"; }
  jq -c '.response.convertedObjects[] | [.kind, .metadata.name, .metadata.namespace, .metadata.uid]' \
    "$out" | cmp -s - "$tmp/ids.$n" || die "$name: $n objects: kinds, names, namespaces or uids differ from the request (or their order)"
  jq -S -c '.response.convertedObjects[]' "$out" >"$tmp/norm.$name.$n"
  val[$name,resp$n]=$(bytes "$out")
  rm -f "$out"
  if [ "$name" != kop ] && ! cmp -s "$tmp/norm.kop.$n" "$tmp/norm.$name.$n"; then
    local line
    line=$(cmp "$tmp/norm.kop.$n" "$tmp/norm.$name.$n" | awk '{ print $NF }' || true)
    echo "kop:   $(sed -n "${line}p" "$tmp/norm.kop.$n")" >&2
    echo "$name: $(sed -n "${line}p" "$tmp/norm.$name.$n")" >&2
    die "$name: $n objects: converted objects differ from kop's (object $line)"
  fi
}

declare -A tls=() val=()
for name in "${names[@]}"; do start "$name"; done
for name in "${names[@]}"; do
  for n in "${sizes[@]}"; do verify "$name" "$n"; done
  tls[$name]=$(curl -sv -o /dev/null --max-time 10 --cacert "$tmp/certs/ca.crt" \
    -H 'Content-Type: application/json' --data-binary @"$tmp/r1.json" \
    "https://127.0.0.1:${port[$name]}/convert" 2>&1 | sed -n 's/^\* SSL connection using //p' | head -n1)
done
for name in "${names[@]}"; do stop "$name"; done
rm -f "$tmp"/norm.*

# ---- measurements -------------------------------------------------------------
for n in 1 100; do review_lua "$tmp" "$n"; done

wrk_run() { # wrk_run NAME N SECONDS OUT
  timeout $(($3 + 60)) taskset -c 1 wrk -t 1 -c 64 -d "${3}s" --latency --timeout 30s \
    -s "$tmp/post$2.lua" "https://127.0.0.1:${port[$1]}/convert" >"$4" 2>&1 ||
    { cat "$4" >&2; die "$1: wrk failed on $2 objects"; }
  if ! grep -q '^bad responses: 0$' "$4" || grep -q -E 'Non-2xx|Socket errors' "$4"; then
    cat "$4" >&2
    die "$1: $2 objects: some responses were not HTTP 200 with a Success result"
  fi
}

to_ms() { # wrk latency (850.00us, 1.23ms, 2.00s, 1.00m) -> ms
  awk -v v="$1" 'BEGIN {
    n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
    if (u == "us") n /= 1000; else if (u == "s") n *= 1000; else if (u == "m") n *= 60000
    printf "%.3f", n }'
}

measure_wrk() { # measure_wrk NAME N ROUND: one round's figures, appended to lists
  local name=$1 n=$2 round=$3 before after reqs p99
  wrk_run "$name" "$n" 2 "$tmp/warm.out"
  before=$(cpu_ticks "$name")
  wrk_run "$name" "$n" "$secs" "$tmp/wrk.out"
  after=$(cpu_ticks "$name")
  reqs=$(awk '/ requests in / { print $1 }' "$tmp/wrk.out")
  [ "${reqs:-0}" -gt 0 ] || { cat "$tmp/wrk.out" >&2; die "$name: no request completed"; }
  p99=$(awk '$1 == "99%" { print $2 }' "$tmp/wrk.out")
  val[$name,rps$n,$round]=$(awk '/^Requests\/sec:/ { print $2 }' "$tmp/wrk.out")
  val[$name,p99_$n,$round]=$(to_ms "$p99")
  val[$name,cpu$n,$round]=$(awk -v t=$((after - before)) -v hz="$hz" -v r="$reqs" \
    'BEGIN { printf "%.4f", t / hz * 1000 / r }') # ms
  val[$name,reqs$n]=$((${val[$name,reqs$n]:-0} + reqs))
}

median() { # median V...: of numbers
  printf '%s\n' "$@" | sort -g |
    awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# The medians over the rounds go where the table reads them (val[NAME,KEY]).
wrk_medians() {
  local name n key r vs
  for name in "${names[@]}"; do
    for n in 1 100; do
      for key in rps$n p99_$n cpu$n; do
        vs=()
        for r in $(seq 1 "$rounds"); do vs+=("${val[$name,$key,$r]}"); done
        val[$name,$key]=$(median "${vs[@]}")
      done
    done
  done
}

# "0.71 0.75 0.69 (median 0.71)": kop's CPU/request over PEER's, round by round.
round_ratios() { # round_ratios PEER N
  local r rs=()
  for r in $(seq 1 "$rounds"); do
    rs+=("$(awk -v k="${val[kop,cpu$2,$r]}" -v p="${val[$1,cpu$2,$r]}" 'BEGIN { printf "%.2f", k / p }')")
  done
  echo "${rs[*]} (median $(median "${rs[@]}"))"
}

measure_big() { # measure_big NAME
  local name=$1 url before after rss0 hwm rss1 i args=()
  url="https://127.0.0.1:${port[$name]}/convert"
  for i in $(seq 1 "$runs"); do args+=("$url" -o "$tmp/big.$i.out"); done
  rss0=$(stat_field "$name" VmRSS)
  echo 5 >"/proc/${pid[$name]}/clear_refs"
  before=$(cpu_ticks "$name")
  timeout $((runs * 120 + 30)) taskset -c 1 curl -s --max-time $((runs * 120)) \
    --cacert "$tmp/certs/ca.crt" -H 'Content-Type: application/json' -H 'Expect:' \
    --data-binary @"$tmp/r10000.json" -w '%{http_code} %{time_total} %{num_connects}\n' \
    "${args[@]}" >"$tmp/big.txt" || die "$name: curl failed on 10,000 objects"
  after=$(cpu_ticks "$name")
  hwm=$(stat_field "$name" VmHWM)
  sleep 1
  rss1=$(stat_field "$name" VmRSS)
  [ "$(wc -l <"$tmp/big.txt")" -eq "$runs" ] || die "$name: $(wc -l <"$tmp/big.txt") of $runs answers"
  awk '$1 != 200 { exit 1 }' "$tmp/big.txt" || { cat "$tmp/big.txt" >&2; die "$name: 10,000 objects: not HTTP 200"; }
  for i in $(seq 1 "$runs"); do
    grep -q -F '"status":"Success"' "$tmp/big.$i.out" || die "$name: 10,000 objects: run $i has no Success result"
    rm -f "$tmp/big.$i.out"
  done
  val[$name,conns]=$(awk '{ s += $3 } END { print s }' "$tmp/big.txt")
  val[$name,best]=$(awk '{ print $2 }' "$tmp/big.txt" | sort -g | head -n1)
  val[$name,median]=$(awk '{ print $2 }' "$tmp/big.txt" | sort -g |
    awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
  val[$name,bigcpu]=$(awk -v t=$((after - before)) -v hz="$hz" -v r="$runs" 'BEGIN { printf "%.3f", t / hz / r }')
  val[$name,rss0]=$(awk -v k="$rss0" 'BEGIN { printf "%.1f", k / 1024 }')
  val[$name,hwm]=$(awk -v k="$hwm" 'BEGIN { printf "%.1f", k / 1024 }')
  val[$name,rss1]=$(awk -v k="$rss1" 'BEGIN { printf "%.1f", k / 1024 }')
  val[$name,growth]=$(awk -v a="$hwm" -v b="$rss0" 'BEGIN { printf "%.1f", (a - b) / 1024 }')
  val[$name,gratio]=$(awk -v a="$hwm" -v b="$rss0" -v s="$(bytes "$tmp/r10000.json")" \
    'BEGIN { printf "%.2f", (a - b) * 1024 / s }')
}

# Full handshakes, one after the other: the server CPU each costs.
cat >"$tmp/handshakes.py" <<'PY'
import socket, ssl, sys
port, n, ca, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
ctx = ssl.create_default_context(cafile=ca)
ctx.check_hostname = False
session = None
if mode == "resumed":
    # One connection that reads a byte of an answer: the session then holds
    # the ticket (TLS 1.3 sends it after the handshake).
    with socket.create_connection(("127.0.0.1", port)) as raw:
        with ctx.wrap_socket(raw) as t:
            t.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            t.recv(1)
            session = t.session
for _ in range(n):
    with socket.create_connection(("127.0.0.1", port)) as raw:
        with ctx.wrap_socket(raw, session=session) as t:
            t.do_handshake()
            if session is not None and not t.session_reused:
                sys.exit("session not resumed (%s)" % t.version())
PY
handshakes=500
# Resumed ones cost a fraction of a full one: more of them, so that the
# clock ticks (1/hz s) they add up to are many.
resumed=2000
measure_handshakes() { # measure_handshakes NAME
  local name=$1 before after
  val[$name,group]=$(timeout 10 openssl s_client -connect "127.0.0.1:${port[$name]}" \
    -CAfile "$tmp/certs/ca.crt" </dev/null 2>/dev/null | sed -E -n 's/^(Server|Peer) Temp Key: //p' | head -n1)
  before=$(cpu_ticks "$name")
  taskset -c 1 python3 "$tmp/handshakes.py" "${port[$name]}" "$handshakes" "$tmp/certs/ca.crt" full ||
    die "$name: a handshake failed"
  after=$(cpu_ticks "$name")
  val[$name,hs]=$(awk -v t=$((after - before)) -v hz="$hz" -v n="$handshakes" \
    'BEGIN { printf "%.4f", t / hz * 1000 / n }') # ms
  # Resumed: the one full handshake that fetches the ticket is left out
  # of the count (measured alone, then subtracted).
  before=$(cpu_ticks "$name")
  taskset -c 1 python3 "$tmp/handshakes.py" "${port[$name]}" "$resumed" "$tmp/certs/ca.crt" resumed ||
    die "$name: a resumed handshake failed"
  after=$(cpu_ticks "$name")
  val[$name,hsr]=$(awk -v t=$((after - before)) -v hz="$hz" -v n="$resumed" -v full="${val[$name,hs]}" \
    'BEGIN { v = (t / hz * 1000 - full) / n; printf "%.4f", v < 0 ? 0 : v }') # ms
}

load_before=$(cut -d" " -f1-3 /proc/loadavg)
# The record crypto floor: mbedTLS's AEAD speed on the servers' core.
taskset -c 0 "$tmp/bench-crypto" 16384 256 >"$tmp/crypto.txt" || die "bench_crypto failed"
for name in "${names[@]}"; do
  start "$name"
  val[$name,idle]=$(awk -v k="$(stat_field "$name" VmRSS)" 'BEGIN { printf "%.1f", k / 1024 }')
done
for round in $(seq 1 "$rounds"); do
  for n in 1 100; do
    for name in "${names[@]}"; do measure_wrk "$name" "$n" "$round"; done
  done
done
wrk_medians
for name in "${names[@]}"; do
  measure_big "$name"
  measure_handshakes "$name"
  stop "$name"
done

load_after=$(cut -d" " -f1-3 /proc/loadavg)

# ---- report -------------------------------------------------------------------
mb() { awk -v b="$1" 'BEGIN { printf "%.2f MB", b / 1e6 }'; }
echo "kop conversion webhook against a Go stdlib and a Node.js peer"
echo "  date:     $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "  machine:  $(lscpu | sed -n 's/^Model name: *//p' | head -n1), nproc $(nproc), $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
echo "  command:  ${KOP_BIN:+KOP_BIN=$KOP_BIN }${BENCH_PEERS_RUNS:+BENCH_PEERS_RUNS=$runs }${BENCH_PEERS_ROUNDS:+BENCH_PEERS_ROUNDS=$rounds }scripts/bench-peers.sh $secs"
echo "  loadavg:  $load_before before the measurements, $load_after after (anything else running shares the two cores)"
if [ -n "${KOP_BIN:-}" ]; then
  kop_from="KOP_BIN"
else
  kop_from="build-release at $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  git diff --quiet HEAD -- src include meson.build 2>/dev/null || kop_from="$kop_from, with uncommitted changes to src/include"
fi
echo "  kop:      $("$kop" --version 2>&1 | head -n1) ($kop_from)"
echo "  peers:    $(go version | awk '{ print $3 }') (GOMAXPROCS follows the affinity: 1), node $(node --version)"
echo "  clients:  wrk $(wrk -v 2>&1 | head -n1 | awk '{ print $2 }') and $(curl --version | head -n1 | awk '{ print $1, $2 }') on core 1; servers on core 0, one measured at a time"
echo "  rounds:   1 and 100 objects: $rounds interleaved rounds of ${secs} s per server and size (the table: medians);"
echo "            10,000 objects and handshakes: once per server, then it stops"
echo "  bodies:   1 object $(bytes "$tmp/r1.json") B, 100 objects $(mb "$(bytes "$tmp/r100.json")"), 10,000 objects $(mb "$(bytes "$tmp/r10000.json")") ($(($(bytes "$tmp/r10000.json") / 10000)) B/object)"
echo "  servers:  (DIR: the certificate directory, PORT: a free port)"
for name in "${names[@]}"; do
  printf '    %-6s  %s\n' "$name" "$(server_cmd "$name" PORT)"
done
for name in "${names[@]}"; do
  printf '  TLS %-5s %s (as curl negotiates it)\n' "$name:" "${tls[$name]:-?}"
done
echo "  checked:  every server answered 1, 100 and 10,000 objects with 200, Success, the uid, the"
echo "            objects in order, and Go's and Node's objects equal kop's (jq -S); every wrk and"
echo "            curl response below was 200 with Success"
echo

rows=(
  "1 object, wrk 64 conns: req/s|rps1|%.0f"
  "1 object: p99 latency (ms)|p99_1|%.2f"
  "1 object: server CPU/request (us)|cpu1|us"
  "100 objects, wrk 64 conns: req/s|rps100|%.0f"
  "100 objects: p99 latency (ms)|p99_100|%.1f"
  "100 objects: server CPU/request (ms)|cpu100|%.3f"
  "10,000 objects: wall, best of $runs (s)|best|%.3f"
  "10,000 objects: wall, median (s)|median|%.3f"
  "10,000 objects: server CPU/review (s)|bigcpu|%.3f"
  "RSS idle, fresh start (MiB)|idle|%.1f"
  "RSS before the 10,000 reviews (MiB)|rss0|%.1f"
  "peak RSS during them (MiB)|hwm|%.1f"
  "RSS 1 s after them (MiB)|rss1|%.1f"
  "peak RSS growth (MiB)|growth|%.1f"
  "peak growth / body size|gratio|%.2f"
  "full TLS handshake: server CPU (ms)|hs|%.2f"
  "resumed TLS handshake: server CPU (ms)|hsr|%.3f"
)
printf '%-40s %10s %10s %10s %9s %9s\n' "" kop Go Node kop/Node kop/Go
for row in "${rows[@]}"; do
  IFS='|' read -r label key fmt <<<"$row"
  k=${val[kop,$key]} g=${val[Go,$key]} nd=${val[Node,$key]}
  if [ "$fmt" = us ]; then
    k=$(awk -v v="$k" 'BEGIN { print v * 1000 }')
    g=$(awk -v v="$g" 'BEGIN { print v * 1000 }')
    nd=$(awk -v v="$nd" 'BEGIN { print v * 1000 }')
    fmt=%.1f
  fi
  awk -v l="$label" -v f="$fmt" -v k="$k" -v g="$g" -v n="$nd" 'BEGIN {
    r1 = (n + 0 != 0) ? sprintf("%.2f", k / n) : "-"
    r2 = (g + 0 != 0) ? sprintf("%.2f", k / g) : "-"
    printf "%-40s %10s %10s %10s %9s %9s\n", l, sprintf(f, k), sprintf(f, g), sprintf(f, n), r1, r2 }'
done
echo
echo "kop/Node CPU/request per round: 1 object $(round_ratios Node 1); 100 objects $(round_ratios Node 100)"
echo "kop/Go CPU/request per round:   1 object $(round_ratios Go 1); 100 objects $(round_ratios Go 100)"
echo "requests completed in $rounds x ${secs}s: 1 object: kop ${val[kop,reqs1]}, Go ${val[Go,reqs1]}, Node ${val[Node,reqs1]};" \
  "100 objects: kop ${val[kop,reqs100]}, Go ${val[Go,reqs100]}, Node ${val[Node,reqs100]}"
echo "TLS connections for the $runs 10,000-object reviews: kop ${val[kop,conns]}, Go ${val[Go,conns]}, Node ${val[Node,conns]}"
echo "handshakes: $handshakes full and $resumed resumed from python3 $(python3 -c 'import ssl; print(ssl.OPENSSL_VERSION)'), default groups;" \
  "key exchange picked: kop ${val[kop,group]:-?}; Go ${val[Go,group]:-?}; Node ${val[Node,group]:-?}"
echo "ratios below 1 favour kop for CPU, latency, wall and memory; above 1 for req/s"
echo
# What sealing and opening the records alone costs kop per request (the
# system's mbedTLS, 16 KiB records, the suite kop negotiated): a floor no
# change to kop's own code can go under, next to Node's whole CPU/request.
mbs_cp=$(awk '$1 == "chacha20-poly1305" { print $2 }' "$tmp/crypto.txt")
mbs_gcm=$(awk '$1 == "aes-128-gcm" { print $2 }' "$tmp/crypto.txt")
case ${tls[kop]:-} in
  *CHACHA20*) mbs=$mbs_cp suite="ChaCha20-Poly1305" ;;
  *) mbs=$mbs_gcm suite="AES-128-GCM" ;;
esac
echo "record crypto floor (mbedTLS $suite on core 0: $mbs MB/s; AES-128-GCM $mbs_gcm, ChaCha20-Poly1305 $mbs_cp):"
for n in 1 100; do
  awk -v n="$n" -v req="$(bytes "$tmp/r$n.json")" -v resp="${val[kop,resp$n]}" -v mbs="$mbs" \
    -v kop="${val[kop,cpu$n]}" -v node="${val[Node,cpu$n]}" 'BEGIN {
    us = (req + resp) / mbs
    printf "  %3d object(s): %d B in + %d B out = %.1f us of record crypto = %.0f%% of kop CPU/request, %.2fx Node CPU/request\n",
      n, req, resp, us, 100 * us / (kop * 1000), us / (node * 1000) }'
done
