#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Memory of kop's first LIST when the cluster holds large objects kop does
# not own (issue: "metadata informers buffer whole LIST pages"): kubesim
# with N Services in one namespace, each with an annotation of S KiB (the
# apiserver allows 256 KiB of annotations per object), then
# `kop --controller-only` starts and lists them through its metadata
# informers (500 objects per page). Prints kop's peak RSS (VmHWM) until
# /readyz says the caches synced, and its RSS afterwards, for each kop
# binary given (compare two builds side by side in one run).
#
#   scripts/bench-list-memory.sh [-n N] [-s KIB] [KOP_BIN...]
#   (default: N=300, S=200, the kop of build-release)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# shellcheck source=scripts/lib/bench-common.sh
. scripts/lib/bench-common.sh
n=300
kib=200
bench_usage_line="usage: scripts/bench-list-memory.sh [-n N] [-s KIB] [KOP_BIN...]"
while getopts "n:s:" o; do
  case $o in
    n) bench_count N "$OPTARG"; n=$OPTARG ;;
    s) bench_count KIB "$OPTARG"; kib=$OPTARG ;;
    *) bench_usage ;;
  esac
done
shift $((OPTIND - 1))

scripts/install-deps.sh >/dev/null
build="build-release"
bench_setup "$build" --buildtype=release -Dtests=false
ninja -C "$build" kop tests/kubesim/kubesim >/dev/null
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=("$top/$build/kop")

bench_kubesim_scratch

token=bench-list-token
kubesim_start "$build/tests/kubesim/kubesim" "$work" "$token" || exit 1
url=$kubesim_url
api() { kubesim_api "$@"; } # METHOD PATH [BODY]
api POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions '{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"myresources.mygroup.example.com"},"spec":{"group":"mygroup.example.com","names":{"plural":"myresources","singular":"myresource","kind":"MyResource"},"scope":"Namespaced","versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}' >/dev/null

# N Services with a large annotation, over one connection.
big=$(head -c $((kib * 1024)) /dev/zero | tr '\0' 'a')
printf '{"metadata":{"name":"NAME","annotations":{"example.com/blob":"%s"}},"spec":{"ports":[{"port":80}]}}' "$big" >"$work/svc.json"
cfg=$work/create.cfg
: >"$cfg"
for i in $(seq 0 $((n - 1))); do
  sed "s/NAME/big-$i/" "$work/svc.json" >"$work/svc-$i.json"
  {
    [ "$i" -gt 0 ] && echo "next"
    echo "url = \"$url/api/v1/namespaces/default/services\""
    echo "request = \"POST\""
    echo "cacert = \"$work/kubesim-ca.pem\""
    echo "header = \"Authorization: Bearer $token\""
    echo "header = \"Content-Type: application/json\""
    echo "data-binary = \"@$work/svc-$i.json\""
    echo "output = \"/dev/null\""
  } >>"$cfg"
done
curl -sS -K "$cfg"
rm -f "$work"/svc-*.json

echo "kop's first LIST over $n Services with a $kib KiB annotation each"
echo "  date: $(date -u +%Y-%m-%dT%H:%M:%SZ); machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
echo "  command: scripts/bench-list-memory.sh -n $n -s $kib ${*:-}"
printf '  %-50s %12s %12s %10s\n' "kop" "peak RSS MiB" "after MiB" "sync s"
for bin in "${bins[@]}"; do
  port=$((20000 + RANDOM % 20000))
  t0=$(date +%s.%N)
  "$bin" --controller-only --kubeconfig "$work/kubeconfig" --kube-api-qps 0 \
    --metrics-bind-address 0 --health-probe-bind-address "127.0.0.1:$port" --log-level warn \
    >"$work/kop.out" 2>&1 &
  kop_pid=$!
  synced=
  for _ in $(seq 1200); do
    if curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then synced=1; break; fi
    kill -0 "$kop_pid" 2>/dev/null || break
    sleep 0.05
  done
  t1=$(date +%s.%N)
  if [ -z "$synced" ]; then
    echo "  $bin: did not sync (or died)"; tail -5 "$work/kop.out"
    kill "$kop_pid" 2>/dev/null; wait "$kop_pid" 2>/dev/null || true; kop_pid=
    continue
  fi
  sleep 1
  hwm=$(awk '/VmHWM/ {print $2}' "/proc/$kop_pid/status")
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$kop_pid/status")
  awk -v b="$bin" -v h="$hwm" -v r="$rss" -v t0="$t0" -v t1="$t1" \
    'BEGIN { printf "  %-50s %12.1f %12.1f %10.2f\n", b, h / 1024, r / 1024, t1 - t0 }'
  kill "$kop_pid"; wait "$kop_pid" 2>/dev/null || true; kop_pid=
done
