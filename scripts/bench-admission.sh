#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The admission webhook against the two hostile AdmissionReviews of
# docs/performance.md §3 (issue "The request path streams"):
#   * ports:   a v2 MyResource with 32,000 ports (~1 MB): its answer must be
#              a denial ("Too many: 32000") in less than 50 ms;
#   * numbers: 7 MiB of [0,0,0,...] in the object: it must raise kop's
#              peak RSS by less than 32 MiB, and be answered (a denial or a
#              4xx with a Status body), never a crash.
#
# A release build of `kop --webhook-only` runs alone and fresh, pinned to
# core 0; the client (python3, one keep-alive TLS connection) is pinned to
# core 1. Per body: one warm-up POST, then N POSTs one after the other.
# Reported per body: the answer (HTTP status and the first words of the
# message), wall time per request as the client sees it (median and
# max, from the first byte sent to the last byte read), kop's CPU per
# request (utime + stime from /proc over the N requests), RSS fresh
# (before any request), the peak RSS over the warm-up and the N requests
# (VmHWM after echo 5 > clear_refs) and the growth.
#
#   scripts/bench-admission.sh [-n N]          (N defaults to 20)
#
# KOP_BIN: the kop binary to measure (default: build-release/kop, built
# here). Installs python3, curl and openssl when missing.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# shellcheck source=scripts/lib/bench-common.sh
. scripts/lib/bench-common.sh
bench_usage_line="usage: scripts/bench-admission.sh [-n N]"
n=20
while [ $# -gt 0 ]; do
  case $1 in
    -n) [ $# -ge 2 ] || bench_usage "-n needs a value"; n=$2; shift 2 ;;
    -h | --help) bench_usage ;;
    *) bench_usage "unknown argument $1" ;;
  esac
done
bench_count N "$n"
die() { echo "bench-admission: FAIL: $*" >&2; exit 1; }
bench_need_tools curl:curl openssl:openssl taskset:util-linux
bench_need_python3
[ "$(nproc)" -ge 2 ] || die "needs 2 cores (kop on core 0, the client on core 1)"
bench_kop

bench_scratch
scripts/gen-certs.sh "$tmp/certs" >/dev/null

# The two bodies.
python3 - "$tmp" <<'EOF'
import sys
tmp = sys.argv[1]
head = ('{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{'
        '"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","kind":{"group":"mygroup.example.com",'
        '"version":"%s","kind":"MyResource"},"resource":{"group":"mygroup.example.com",'
        '"version":"%s","resource":"myresources"},"name":"res","namespace":"default",'
        '"operation":"CREATE","userInfo":{"username":"admin"},"object":{'
        '"apiVersion":"mygroup.example.com/%s","kind":"MyResource","metadata":{"name":"res",'
        '"namespace":"default"},"spec":{"replicas":3,%s}}}}')
ports = ",".join('{"name":"p%d","port":%d}' % (i, 1 + i % 65535) for i in range(32000))
with open(tmp + "/ports.json", "w") as f:
    f.write(head % ("v2", "v2", "v2", '"image":{"repository":"nginx","tag":"1.25"},"ports":['
                    + ports + "]"))
base = head % ("v1", "v1", "v1", '"image":"nginx:1.25","port":8080,"x":[%s]')
room = 7 * 1024 * 1024 - (len(base) - 2)
zeros = ",".join(["0"] * ((room + 1) // 2))[:room].rstrip(",")
with open(tmp + "/numbers.json", "w") as f:
    f.write(base % zeros)
EOF

cat >"$tmp/client.py" <<'EOF'
import http.client, json, os, ssl, statistics, sys, time
port, ca, body_path, n, pid = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
path = "/validate-mygroup-example-com-myresource?timeout=10s"
body = open(body_path, "rb").read()
ctx = ssl.create_default_context(cafile=ca)
ctx.check_hostname = False
conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=60)

def ticks():
    with open("/proc/%s/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])

def rss(field):
    with open("/proc/%s/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    return 0.0

def post():
    t0 = time.monotonic()
    conn.request("POST", path, body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    return time.monotonic() - t0, r.status, data

before = rss("VmRSS")  # fresh, before any request
with open("/proc/%s/clear_refs" % pid, "w") as f:
    f.write("5")
post()  # warm-up: the connection, the handshake, the first buffers
c0 = ticks()
walls = []
status, data = 0, b""
for _ in range(n):
    w, status, data = post()
    walls.append(w * 1000.0)
c1 = ticks()
peak = rss("VmHWM")
try:
    v = json.loads(data)
    resp = v.get("response") or {}
    msg = (resp.get("status") or {}).get("message") if resp else v.get("message")
    allowed = resp.get("allowed") if resp else None
except ValueError:
    msg, allowed = data[:60].decode("utf-8", "replace"), None
hz = os.sysconf("SC_CLK_TCK")
print("%d|%s|%s|%.1f|%.1f|%.2f|%.1f|%.1f|%.1f" % (
    status, allowed, (msg or "")[:200].replace("|", "/"), statistics.median(walls), max(walls),
    (c1 - c0) / hz * 1000.0 / n, before, peak, peak - before))
EOF

echo "admission webhook against hostile AdmissionReviews"
echo "  date:     $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "  machine:  $(bench_machine)"
echo "  command:  scripts/bench-admission.sh -n $n"
echo "  kop:      $kop ($("$kop" --version 2>&1 | head -n1))"
echo "  method:   kop fresh and alone on core 0, python3 client on core 1, one keep-alive"
echo "            TLS connection, 1 warm-up then $n POSTs of each body"
echo
printf '%-8s %9s %6s %8s %9s %8s %9s %9s %9s  %s\n' body bytes status wall-p50 wall-max \
  "cpu/req" "RSS-MiB" "peak-MiB" "growth" "answer"
for b in ports numbers; do
  port=$(bench_free_port)
  taskset -c 0 "$kop" --webhook-only --shutdown-delay 0 --cert-dir "$tmp/certs" \
    --webhook-host 127.0.0.1 --webhook-port "$port" --metrics-bind-address 0 \
    --health-probe-bind-address 0 --log-level warn >"$tmp/kop.log" 2>&1 &
  kpid=$!
  ok=
  for _ in $(seq 1 100); do
    if curl -s -o /dev/null --max-time 5 --cacert "$tmp/certs/ca.crt" \
      "https://127.0.0.1:$port/healthz"; then
      ok=1
      break
    fi
    kill -0 "$kpid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$ok" ] || { cat "$tmp/kop.log" >&2; die "$kop does not answer"; }
  out=$(taskset -c 1 python3 "$tmp/client.py" "$port" "$tmp/certs/ca.crt" "$tmp/$b.json" "$n" "$kpid") ||
    die "the client failed on $b"
  kill -0 "$kpid" 2>/dev/null || { cat "$tmp/kop.log" >&2; die "kop died on $b"; }
  kill "$kpid"
  wait "$kpid" 2>/dev/null || true
  kpid=
  IFS='|' read -r status allowed msg p50 pmax cpu before peak growth <<<"$out"
  printf '%-8s %9d %6s %6.1fms %7.1fms %6.2fms %9.1f %9.1f %9.1f  allowed=%s %s\n' "$b" \
    "$(stat -c %s "$tmp/$b.json")" "$status" "$p50" "$pmax" "$cpu" "$before" "$peak" "$growth" \
    "$allowed" "$msg"
done
echo
echo "budgets (docs/performance.md §3): ports answered in < 50 ms (wall-p50, wall-max);"
echo "numbers raise peak RSS by < 32 MiB (growth)"
