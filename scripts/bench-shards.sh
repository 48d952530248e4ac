#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Sharding benchmark (docs/reconcile.md §13 "Sharding"; issue: active-active). For each
# replica count R: a fresh kubesim with LATENCY ms injected on every
# request (/_kubesim/faults latencyMs), R replicas of
# `kop --sharding --kube-api-qps QPS` (webhook on, the owner label set at
# CREATE by the mutating webhook, routed by kubesim's Service stand-in to
# all replicas), then N MyResources created at once, and:
#   * time to converge: from the first create until every MyResource is
#     Available=True with observedGeneration == generation;
#   * kop_store_bytes of each replica at the end (its informers' cache);
#   * how the objects are spread (owner labels).
#
#   scripts/bench-shards.sh [-n N] [-r "1 2 4"] [-q QPS] [-l LATENCY_MS]
#
# Needs curl, jq, openssl, bc. The issue's setting is -n 5000 -r "1 2 4"
# -q 20 -l 10 (one replica needs about 0.28 s per object at 20 QPS: two
# creates, a status write and events share the bucket; some 24 minutes).
# Binaries from BUILD_DIR (default build-release, set up as a release
# build). A failing step names itself, the replicas that exited, and the
# tails of their logs and kubesim's; KEEP=1 keeps the scratch directory.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# shellcheck source=scripts/lib/bench-common.sh
. scripts/lib/bench-common.sh
build=${BUILD_DIR:-build-release}
n=5000
counts="1 2 4"
qps=20
latency=10
bench_usage_line="usage: scripts/bench-shards.sh [-n N] [-r \"1 2 4\"] [-q QPS] [-l LATENCY_MS]"
while getopts "n:r:q:l:" o; do
  case $o in
    n) bench_count N "$OPTARG"; n=$OPTARG ;;
    r) counts=$OPTARG ;;
    q) qps=$OPTARG ;;
    l) latency=$OPTARG ;;
    *) bench_usage ;;
  esac
done
[ $OPTIND -gt $# ] || bench_usage "no arguments after the options"
for r in $counts; do bench_count "a replica count" "$r"; done

bench_setup "$build" --buildtype=release -Dtests=false
ninja -C "$build" kop tests/kubesim/kubesim >/dev/null

work=$(mktemp -d)
pids=()
# shellcheck source=scripts/lib/kubesim.sh
. scripts/lib/kubesim.sh
stop_kops() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
cleanup() {
  stop_kops
  kubesim_stop
  [ -n "${KEEP:-}" ] && echo "kept $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT

step="setup"
# What went wrong, with what is needed to tell why: the step, the failed
# command, which replicas are gone, and the logs' tails.
fail() {
  trap - ERR
  echo "FAILED at step '$step': $*" >&2
  local i=0
  for p in "${pids[@]}"; do
    if ! kill -0 "$p" 2>/dev/null; then
      wait "$p" 2>/dev/null && st=0 || st=$?
      echo "  replica shard-$i (pid $p) exited, status $st" >&2
    fi
    echo "  --- tail of kop-$i.log" >&2
    tail -n 5 "$work/kop-$i.log" 2>/dev/null | sed 's/^/  /' >&2 || true
    i=$((i + 1))
  done
  if [ -n "$kubesim_pid" ] && ! kill -0 "$kubesim_pid" 2>/dev/null; then
    echo "  kubesim (pid $kubesim_pid) exited" >&2
  fi
  echo "  --- tail of kubesim.log" >&2
  tail -n 5 "$work/kubesim.log" 2>/dev/null | sed 's/^/  /' >&2 || true
  exit 1
}
trap 'fail "line $LINENO: $BASH_COMMAND (status $?)"' ERR

bash scripts/gen-certs.sh "$work/certs" >/dev/null 2>&1
ca_b64=$(base64 -w0 <"$work/certs/ca.crt")
api() { kubesim_api "$@"; } # METHOD PATH [BODY]
crd='{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"myresources.mygroup.example.com"},"spec":{"group":"mygroup.example.com","names":{"plural":"myresources","singular":"myresource","kind":"MyResource","shortNames":["myr"]},"scope":"Namespaced","versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","default":{},"properties":{"replicas":{"type":"integer","default":1},"image":{"type":"string","default":"nginx:1.14.2"},"port":{"type":"integer","default":80},"serviceType":{"type":"string","default":"ClusterIP"}}},"status":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}}]}}'
mwc='{"apiVersion":"admissionregistration.k8s.io/v1","kind":"MutatingWebhookConfiguration","metadata":{"name":"kop-shard-webhook"},"webhooks":[{"name":"mshard.mygroup.example.com","admissionReviewVersions":["v1"],"sideEffects":"None","failurePolicy":"Ignore","timeoutSeconds":5,"clientConfig":{"caBundle":"'$ca_b64'","service":{"namespace":"kop-system","name":"kop-webhook-service","path":"/mutate-mygroup-example-com-myresource-shard","port":443}},"rules":[{"apiGroups":["mygroup.example.com"],"apiVersions":["v1"],"operations":["CREATE"],"resources":["myresources"]}]}]}'

port_of() { # LOG MSG: the port in the log line MSG (30 s at most)
  local line='' port=''
  for _ in $(seq 300); do
    line=$(grep -s -m1 "\"msg\":\"$2\"" "$1" || true)
    [ -n "$line" ] && break
    sleep 0.1
  done
  port=$(echo "$line" | sed -n 's/.*"port":\([0-9]*\).*/\1/p')
  [ -n "$port" ] || return 1
  echo "$port"
}

converged() {
  api GET /apis/mygroup.example.com/v1/namespaces/default/myresources |
    jq '[.items[] | select(.status.observedGeneration == .metadata.generation and
          ([.status.conditions[]? | select(.type == "Available" and .status == "True")] | length) == 1)]
        | length'
}

echo "machine: $(uname -srm), $(nproc) cpus"
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "command: scripts/bench-shards.sh -n $n -r \"$counts\" -q $qps -l $latency"
for r in $counts; do
  step="R=$r: start kubesim"
  kubesim_start "$build/tests/kubesim/kubesim" "$work" "bench-shards" \
    --deployment-ready-delay 100ms --history-size 1000000 || fail "kubesim did not start"
  api POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions "$crd" >/dev/null
  api POST /api/v1/namespaces '{"metadata":{"name":"kop-system"}}' >/dev/null
  api POST /apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations "$mwc" >/dev/null
  metrics=()
  eps=
  step="R=$r: start $r replicas"
  for i in $(seq 0 $((r - 1))); do
    POD_NAME=shard-$i "$build/kop" --sharding --kubeconfig "$work/kubeconfig" \
      --leader-election-namespace kop-system --leader-election-retry-period 1s \
      --kube-api-qps "$qps" --kube-api-burst "$qps" --cert-dir "$work/certs" \
      --webhook-port 0 --webhook-host 127.0.0.1 --metrics-bind-address 127.0.0.1:0 \
      --health-probe-bind-address 0 --log-level info >"$work/kop-$i.log" 2>&1 &
    pids+=($!)
    mport=$(port_of "$work/kop-$i.log" "serving metrics") || fail "shard-$i: no metrics port"
    wport=$(port_of "$work/kop-$i.log" "serving webhook") || fail "shard-$i: no webhook port"
    metrics+=("$mport")
    eps="$eps${eps:+,}{\"address\":\"127.0.0.1:$wport\",\"ready\":true}"
  done
  api POST /_kubesim/endpoints "{\"service\":\"kop-system/kop-webhook-service\",\"endpoints\":[$eps]}" >/dev/null
  # Every replica has joined (its membership Lease) before the objects come.
  step="R=$r: membership"
  for _ in $(seq 200); do
    m=$(api GET /apis/coordination.k8s.io/v1/namespaces/kop-system/leases |
      jq '[.items[] | select(.metadata.name | startswith("kop-shard-"))] | length')
    [ "$m" = "$r" ] && break
    sleep 0.1
  done
  sleep 3 # one membership list on every replica
  api POST /_kubesim/faults "{\"latencyMs\":$latency}" >/dev/null

  cfg=$work/create.cfg
  : >"$cfg"
  for i in $(seq 0 $((n - 1))); do
    {
      echo "next"
      echo "url = \"$kubesim_url/apis/mygroup.example.com/v1/namespaces/default/myresources\""
      echo "request = \"POST\""
      echo "cacert = \"$work/kubesim-ca.pem\""
      echo "header = \"Authorization: Bearer bench-shards\""
      echo "header = \"Content-Type: application/json\""
      echo "data = \"{\\\"metadata\\\":{\\\"name\\\":\\\"bench-$i\\\"},\\\"spec\\\":{\\\"replicas\\\":1}}\""
      echo "output = \"/dev/null\""
    } >>"$cfg"
  done
  sed -i '1d' "$cfg"
  step="R=$r: create $n MyResources"
  t0=$(date +%s.%N)
  curl -sS --no-progress-meter -K "$cfg" --parallel --parallel-max 16
  step="R=$r: wait for convergence"
  deadline=$(($(date +%s) + 3600))
  while :; do
    ok=$(converged)
    [ "$ok" = "$n" ] && break
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || fail "a replica exited ($ok/$n converged)"; done
    [ "$(date +%s)" -le "$deadline" ] || fail "did not converge within an hour: $ok/$n"
    sleep 2
  done
  t1=$(date +%s.%N)
  step="R=$r: read owners and store bytes"
  spread=$(api GET /apis/mygroup.example.com/v1/namespaces/default/myresources |
    jq -c '[.items[].metadata.labels["shard.kop.io/owner"] // "none"] | group_by(.) | map({(.[0]): length}) | add')
  bytes=
  for p in "${metrics[@]}"; do
    b=$(curl -sS "http://127.0.0.1:$p/metrics" | sed -n 's/^kop_store_bytes{cluster="local"} \(.*\)$/\1/p')
    [ -n "$b" ] || fail "no kop_store_bytes on metrics port $p"
    bytes="$bytes${bytes:+ }$(printf '%.0f' "$b")"
  done
  printf 'replicas %d: converged in %.1f s; kop_store_bytes per replica: %s; owners: %s\n' \
    "$r" "$(echo "$t1 - $t0" | bc)" "$bytes" "$spread"
  stop_kops
  kubesim_stop
done
