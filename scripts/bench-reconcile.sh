#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Reconciler benchmark (docs/performance.md §3.6: 10,000 MyResources converge against
# kubesim with the QPS limiter off; a resync of converged objects makes
# zero writes).
#
# Starts kubesim and `kop --controller-only --kube-api-qps 0` against it,
# waits for kop's caches, creates N MyResources (v1, replicas 1) over one
# keep-alive connection, and measures:
#   * time to converge: from the first create until every MyResource has
#     status.readyReplicas == spec.replicas, Available=True and
#     observedGeneration == generation, and N Deployments and N Services
#     exist;
#   * writes per converged object: kubesim's write counters (all resources
#     except the N MyResource creates of the benchmark itself) / N, with
#     the breakdown by resource and verb;
#   * writes during a forced resync of the converged set (--sync-period);
#   * kop's RSS (VmRSS, VmHWM) at the end.
#
#   scripts/bench-reconcile.sh [-n N] [-w WORKERS] [-s SYNC_PERIOD]
#   BUILD_DIR=builddir scripts/bench-reconcile.sh
#
# Needs curl and jq. The build should be optimized (debugoptimized here).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# shellcheck source=scripts/lib/bench-common.sh
. scripts/lib/bench-common.sh
build=${BUILD_DIR:-build}
n=10000
workers=4
sync=60s
bench_usage_line="usage: scripts/bench-reconcile.sh [-n N] [-w WORKERS] [-s SYNC_PERIOD]"
while getopts "n:w:s:" o; do
  case $o in
    n) bench_count N "$OPTARG"; n=$OPTARG ;;
    w) bench_count WORKERS "$OPTARG"; workers=$OPTARG ;;
    s) sync=$OPTARG ;;
    *) bench_usage ;;
  esac
done
[ $OPTIND -gt $# ] || bench_usage "no arguments after the options"

bench_setup "$build" --buildtype=debugoptimized
ninja -C "$build" kop tests/kubesim/kubesim >/dev/null

bench_kubesim_scratch

token=bench-reconcile-token
kubesim_start "$build/tests/kubesim/kubesim" "$work" "$token" --deployment-ready-delay 200ms \
  --history-size 1000000 || exit 1
url=$kubesim_url

api() { kubesim_api "$@"; } # METHOD PATH [BODY]

api POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions '{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"myresources.mygroup.example.com"},"spec":{"group":"mygroup.example.com","names":{"plural":"myresources","singular":"myresource","kind":"MyResource","shortNames":["myr"]},"scope":"Namespaced","versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","default":{},"properties":{"replicas":{"type":"integer","default":1},"image":{"type":"string","default":"nginx:1.14.2"},"port":{"type":"integer","default":80},"serviceType":{"type":"string","default":"ClusterIP"}}},"status":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}}]}}' >/dev/null

"$build/kop" --controller-only --kubeconfig "$work/kubeconfig" --kube-api-qps 0 \
  --max-concurrent-reconciles "$workers" --sync-period "$sync" \
  --metrics-bind-address 0 --health-probe-bind-address 0 --log-level warn \
  >"$work/kop.out" 2>&1 &
kop_pid=$!
sleep 1
kill -0 "$kop_pid" || { cat "$work/kop.out" >&2; exit 1; }

# One curl process, one connection, N POSTs.
cfg=$work/create.cfg
: >"$cfg"
for i in $(seq 0 $((n - 1))); do
  {
    echo "next"
    echo "url = \"$url/apis/mygroup.example.com/v1/namespaces/default/myresources\""
    echo "request = \"POST\""
    echo "cacert = \"$work/kubesim-ca.pem\""
    echo "header = \"Authorization: Bearer $token\""
    echo "header = \"Content-Type: application/json\""
    echo "data = \"{\\\"apiVersion\\\":\\\"mygroup.example.com/v1\\\",\\\"kind\\\":\\\"MyResource\\\",\\\"metadata\\\":{\\\"name\\\":\\\"bench-$i\\\"},\\\"spec\\\":{\\\"replicas\\\":1}}\""
    echo "output = \"/dev/null\""
  } >>"$cfg"
done
sed -i '1d' "$cfg" # no "next" before the first request

api DELETE /_kubesim/stats >/dev/null
t0=$(date +%s.%N)
curl -sS -K "$cfg"
t_created=$(date +%s.%N)

converged() {
  local ok deps svcs
  ok=$(api GET /apis/mygroup.example.com/v1/namespaces/default/myresources |
    jq '[.items[] | select(.status.observedGeneration == .metadata.generation and
          .status.readyReplicas == .spec.replicas and
          ([.status.conditions[]? | select(.type == "Available" and .status == "True")] | length) == 1)]
        | length')
  deps=$(api GET '/apis/apps/v1/namespaces/default/deployments?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dkop' | jq '.items | length')
  svcs=$(api GET '/api/v1/namespaces/default/services?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dkop' | jq '.items | length')
  echo "$ok $deps $svcs"
  [ "$ok" = "$n" ] && [ "$deps" = "$n" ] && [ "$svcs" = "$n" ]
}

deadline=$(($(date +%s) + 1800))
while :; do
  if state=$(converged); then break; fi
  if [ "$(date +%s)" -gt "$deadline" ]; then echo "did not converge: $state" >&2; exit 1; fi
  sleep 1
done
t1=$(date +%s.%N)

stats=$(api GET /_kubesim/stats)
writes=$(echo "$stats" | jq '.writeTotal')
child_writes=$((writes - n))
breakdown=$(echo "$stats" | jq -c '.writes')
rss=$(grep -E 'VmRSS|VmHWM' "/proc/$kop_pid/status" | tr -s ' \t' ' ' | paste -sd' ')

# Forced resync of the converged set: zero writes expected.
sync_s=$(echo "$sync" | sed -n 's/^\([0-9]*\)s$/\1/p')
resync_writes=skipped
if [ -n "$sync_s" ] && [ "$sync_s" -le 120 ]; then
  before=$(api GET /_kubesim/stats | jq '.writeTotal')
  sleep $((sync_s + 5))
  after=$(api GET /_kubesim/stats | jq '.writeTotal')
  resync_writes=$((after - before))
fi

echo "machine: $(uname -srm), $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "command: scripts/bench-reconcile.sh -n $n -w $workers -s $sync (kop --kube-api-qps 0 --max-concurrent-reconciles $workers)"
echo "objects: $n"
printf 'create phase: %.1f s (kubesim POSTs, kop reconciling meanwhile)\n' "$(echo "$t_created - $t0" | bc)"
printf 'time to converge: %.1f s (first create -> all Available, children exist)\n' "$(echo "$t1 - $t0" | bc)"
echo "writes by kop: $child_writes ($(echo "scale=2; $child_writes / $n" | bc) per object; events included)"
echo "writes by resource: $breakdown"
echo "writes during a resync of the converged set: $resync_writes"
echo "kop memory at the end: $rss"
