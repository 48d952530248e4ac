#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Fleet benchmark (docs/operations.md §12; the fleet issue's acceptance
# run): one kop over 4 clusters of N MyResources each against 4 kops of
# one cluster each, at the same per-cluster QPS, kubesim with LATENCY ms
# on every request. Goals: time to converge <= 1.1x, RSS <= 0.5x the four
# processes together, idle cost of one more engaged member <= 2 MiB.
#
#   A (fleet): 4 fresh kubesims (each its own token and CA), the CRD and
#     N MyResources (v1, replicas 1) in each, then one
#     `kop --controller-only --kubeconfig SIM0 --cluster c1=SIM1
#     --cluster c2=SIM2 --cluster c3=SIM3`.
#   B (four kops): 4 fresh kubesims made the same way, then 4
#     `kop --controller-only --kubeconfig SIMi`, one per cluster.
#   Both sides: --kube-api-qps QPS --kube-api-burst BURST (per cluster: a
#   member has its own token bucket) --max-concurrent-reconciles WORKERS
#   (per cluster: the fleet's pool has WORKERS threads per cluster).
#   The objects are created BEFORE kop starts, outside the measured window
#   (the same curl runs on both sides; the create phase is printed apart).
#   Time to converge: from the start of the kop process(es) until, in
#   every cluster, each MyResource has status.readyReplicas ==
#   spec.replicas, Available=True and observedGeneration == generation,
#   and N Deployments and N Services exist (bench-reconcile.sh's test);
#   the start-up (initial LISTs) is in the window on both sides. The time
#   of each cluster comes from a watch of its MyResources started before
#   kop (the moment its events show all N converged), confirmed by that
#   LIST test; a LIST every 2 s would cost more CPU than kop does.
#   RSS: VmRSS of the fleet kop, and the sum of the four, read when the
#   last cluster converged (VmHWM and the PSS sum printed beside it: the
#   four kops' RSS counts the pages of the shared libraries four times,
#   PSS once). kubesim's write counters give the writes per object of
#   each side (the same work, or the comparison is void); the CPU seconds
#   of the kops and the kubesims in the window show which one bounds it.
#   With -r REPEATS the sides alternate A, B, A, B, ...; the ratios are
#   taken per round and their median printed.
#
#   Idle cost of one more member: 4 fresh kubesims with the CRD and no
#   objects, and 4 kops side by side over 1, 2, 3 and 4 of them (the
#   local cluster and 0-3 members, same flags), every cluster engaged
#   (kop_cluster_ready 1) and then IDLE_S (default 10) seconds idle; VmRSS
#   of each. One member costs RSS(4 clusters) - RSS(3 clusters); the
#   least-squares slope over the four is printed beside it. Empty members
#   isolate what a member costs by itself (clients, informers, store, its
#   workers); its objects cost what they cost in a kop of one cluster too.
#
#   scripts/bench-fleet.sh [-n N] [-q QPS] [-b BURST] [-w WORKERS]
#                          [-l LATENCY_MS] [-r REPEATS]
#
# Defaults: -n 2500 -q 50 -b 100 (2x QPS) -w 4 -l 10 -r 1. A cluster
# takes ~4.9 kop requests per object (two creates, two status writes,
# Events), so its token bucket alone needs ~245 s for 2,500 objects at 50
# QPS. kubesim is the heavier side: alone, one kubesim spends ~146 s of
# CPU converging 2,500 objects (kop: ~7 s), most of it in its garbage
# collector's passes over every object, so four of them need ~1.4 of the
# 2 cores of a 2-core machine. When they get it, a side converges in its
# bucket's time and the whole run takes about 9 minutes; on a busier
# machine, or with the kubesims pinned to one core, a side took 320-410 s
# and the run 11-14 minutes. A higher QPS shortens the run (-q 100: about
# 7 minutes) but leaves both sides waiting on kubesim's CPU, which moves
# with whatever else runs (A/B 0.62-1.07 over three rounds at -q 100,
# 0.98-1.06 over four runs at 50 QPS). Nothing is pinned by default (as
# in bench-reconcile.sh and bench-shards.sh); PIN=1 puts the kops on core
# 0 and the kubesims, curl and jq on core 1 (one core for the fleet kop
# and for the four kops alike; slower: one core for four kubesims).
#
# Needs curl, jq, bc, taskset, python3. Binaries from BUILD_DIR (default
# build-release, set up as a release build). A failing step names itself,
# the kops that exited and the tails of their logs; KEEP=1 keeps the
# scratch directory.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# shellcheck source=scripts/lib/bench-common.sh
. scripts/lib/bench-common.sh
build=${BUILD_DIR:-build-release}
n=2500
qps=50
burst=
workers=4
latency=10
repeats=1
idle_s=${IDLE_S:-10}
bench_usage_line="usage: scripts/bench-fleet.sh [-n N] [-q QPS] [-b BURST] [-w WORKERS] [-l LATENCY_MS] [-r REPEATS]"
while getopts "n:q:b:w:l:r:" o; do
  case $o in
    n) bench_count N "$OPTARG"; n=$OPTARG ;;
    q) bench_count QPS "$OPTARG"; qps=$OPTARG ;;
    b) bench_count BURST "$OPTARG"; burst=$OPTARG ;;
    w) bench_count WORKERS "$OPTARG"; workers=$OPTARG ;;
    l) bench_count LATENCY_MS "$OPTARG"; latency=$OPTARG ;;
    r) bench_count REPEATS "$OPTARG"; repeats=$OPTARG ;;
    *) bench_usage ;;
  esac
done
[ $OPTIND -gt $# ] || bench_usage "no arguments after the options"
bench_count IDLE_S "$idle_s"
burst=${burst:-$((2 * qps))}

bench_need_tools curl:curl jq:jq bc:bc taskset:util-linux
bench_need_python3
bench_setup "$build" --buildtype=release -Dtests=false
ninja -C "$build" kop tests/kubesim/kubesim >/dev/null
kop=$build/kop
simbin=$build/tests/kubesim/kubesim

# PIN=1: one core for the kops, the other for the kubesims and this
# script's curl and jq (the script moves to core 1, what it starts
# inherits that, and the kops are started on core 0).
machine=$(bench_machine)
kop_pin=()
sim_core=
if [ "${PIN:-0}" = 1 ] && [ "$(nproc)" -ge 2 ]; then
  kop_pin=(taskset -c 0)
  sim_core=1
  taskset -pc "$sim_core" $$ >/dev/null
fi

work=$(mktemp -d)
kop_pids=()
kop_logs=()
watch_pids=()
sim_pids=()
sim_dirs=()
# shellcheck source=scripts/lib/kubesim.sh
. scripts/lib/kubesim.sh
stop_kops() {
  local p
  for p in "${kop_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${kop_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  kop_pids=()
  kop_logs=()
}
stop_sims() {
  local p
  for p in "${sim_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${sim_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  sim_pids=()
  sim_dirs=()
}
cleanup() {
  stop_kops
  stop_sims
  if [ -n "${KEEP:-}" ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step="setup"
fail() {
  trap - ERR
  echo "FAILED at step '$step': $*" >&2
  local i p st
  for i in "${!kop_pids[@]}"; do
    p=${kop_pids[$i]}
    if ! kill -0 "$p" 2>/dev/null; then
      wait "$p" 2>/dev/null && st=0 || st=$?
      echo "  kop $i (pid $p) exited, status $st" >&2
    fi
    echo "  --- tail of ${kop_logs[$i]##*/}" >&2
    tail -n 5 "${kop_logs[$i]}" 2>/dev/null | sed 's/^/  /' >&2 || true
  done
  for i in "${!sim_pids[@]}"; do
    kill -0 "${sim_pids[$i]}" 2>/dev/null || echo "  kubesim $i (pid ${sim_pids[$i]}) exited" >&2
  done
  exit 1
}
trap 'fail "line $LINENO: $BASH_COMMAND (status $?)"' ERR

crd='{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"myresources.mygroup.example.com"},"spec":{"group":"mygroup.example.com","names":{"plural":"myresources","singular":"myresource","kind":"MyResource","shortNames":["myr"]},"scope":"Namespaced","versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","default":{},"properties":{"replicas":{"type":"integer","default":1},"image":{"type":"string","default":"nginx:1.14.2"},"port":{"type":"integer","default":80},"serviceType":{"type":"string","default":"ClusterIP"}}},"status":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}}]}}'

# sapi I METHOD PATH [BODY]: a request to kubesim I.
sapi() {
  local d=${sim_dirs[$1]}
  curl -sS --cacert "$d/kubesim-ca.pem" -H "Authorization: Bearer $(cat "$d/token")" \
    -H "Content-Type: application/json" -X "$2" "$(cat "$d/url")$3" ${4:+--data-binary "$4"}
}

# sims_start TAG: 4 fresh kubesims, each with its own token and CA, the
# CRD registered in each.
sims_start() {
  local i d st
  for i in 0 1 2 3; do
    d=$work/$1-sim$i
    mkdir -p "$d"
    st=0
    kubesim_start "$simbin" "$d" "bench-fleet-$1-$i" --latency "${latency}ms" \
      --deployment-ready-delay 200ms --history-size 1000000 || st=$?
    sim_pids+=("$kubesim_pid") # stopped on exit even when it did not start
    [ "$st" = 0 ] || fail "kubesim $i did not start"
    echo "$kubesim_url" >"$d/url"
    echo "$kubesim_token" >"$d/token"
    sim_dirs+=("$d")
    sapi "$i" POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions "$crd" >/dev/null
  done
}

# create_objects: N MyResources in each kubesim, the four at once, each
# over 8 parallel connections; kubesim's counters are reset afterwards.
create_objects() {
  local i j d u tok cfg c p cpids=()
  for i in 0 1 2 3; do
    d=${sim_dirs[$i]}
    u=$(cat "$d/url")
    tok=$(cat "$d/token")
    cfg=$d/create.cfg
    for j in $(seq 0 $((n - 1))); do
      [ "$j" = 0 ] || echo "next"
      echo "url = \"$u/apis/mygroup.example.com/v1/namespaces/default/myresources\""
      echo "request = \"POST\""
      echo "cacert = \"$d/kubesim-ca.pem\""
      echo "header = \"Authorization: Bearer $tok\""
      echo "header = \"Content-Type: application/json\""
      echo "data = \"{\\\"apiVersion\\\":\\\"mygroup.example.com/v1\\\",\\\"kind\\\":\\\"MyResource\\\",\\\"metadata\\\":{\\\"name\\\":\\\"bench-$j\\\"},\\\"spec\\\":{\\\"replicas\\\":1}}\""
      echo "output = \"/dev/null\""
    done >"$cfg"
  done
  for i in 0 1 2 3; do
    curl -sS --no-progress-meter --parallel --parallel-max 8 -K "${sim_dirs[$i]}/create.cfg" &
    cpids+=($!)
  done
  for p in "${cpids[@]}"; do wait "$p"; done
  for i in 0 1 2 3; do
    c=$(sapi "$i" GET '/apis/mygroup.example.com/v1/namespaces/default/myresources' | jq '.items | length')
    [ "$c" = "$n" ] || fail "kubesim $i holds $c MyResources, not $n"
    sapi "$i" DELETE /_kubesim/stats >/dev/null
  done
}

# myr_ok I: how many MyResources of kubesim I have status.readyReplicas ==
# spec.replicas, Available=True and observedGeneration == generation.
# children_ok I: true when kubesim I holds N Deployments and N Services of
# kop's (listed only once the MyResources are done: the lists of 2,500
# children are the expensive part of a poll).
myr_ok() {
  sapi "$1" GET /apis/mygroup.example.com/v1/namespaces/default/myresources |
    jq '[.items[] | select(.status.observedGeneration == .metadata.generation and
          .status.readyReplicas == .spec.replicas and
          ([.status.conditions[]? | select(.type == "Available" and .status == "True")] | length) == 1)]
        | length'
}
children_ok() {
  local deps svcs
  deps=$(sapi "$1" GET '/apis/apps/v1/namespaces/default/deployments?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dkop' | jq '.items | length')
  svcs=$(sapi "$1" GET '/api/v1/namespaces/default/services?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dkop' | jq '.items | length')
  [ "$deps" = "$n" ] && [ "$svcs" = "$n" ]
}

# kop_port NAME: a free port for kop NAME's metrics, in $work/NAME.port
# (taken before the clock starts: python3 takes a while to start).
# kop_start NAME ARGS...: one kop, pinned when pinning, its metrics on that
# port, warnings only.
kop_port() { bench_free_port >"$work/$1.port"; }
kop_start() {
  local name=$1 port
  shift
  port=$(cat "$work/$name.port")
  "${kop_pin[@]}" "$kop" --controller-only "$@" --kube-api-qps "$qps" --kube-api-burst "$burst" \
    --max-concurrent-reconciles "$workers" --metrics-bind-address "127.0.0.1:$port" \
    --health-probe-bind-address 0 --log-level warn >"$work/$name.log" 2>&1 &
  kop_pids+=($!)
  kop_logs+=("$work/$name.log")
}

# metric NAME PATTERN: the sum of the samples of kop NAME's metrics whose
# line matches PATTERN.
metric() {
  curl -sS "http://127.0.0.1:$(cat "$work/$1.port")/metrics" |
    awk -v pat="$2" '$0 ~ pat && $0 !~ /^#/ {s += $NF} END {printf "%.0f", s}'
}

# cpu_s PID...: their user+system CPU seconds so far.
cpu_s() {
  local p t=0 tck
  tck=$(getconf CLK_TCK)
  for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
  printf '%.1f' "$(echo "scale=2; $t / $tck" | bc)"
}
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
pss_kib() { awk '/^Pss:/ {print $2}' "/proc/$1/smaps_rollup"; }
hwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }
mib() { printf '%.1f' "$(echo "scale=3; $1 / 1024" | bc)"; }

# watch_start I FILE: a watch of kubesim I's MyResources from now on
# (before kop starts); the first time its events show all N converged
# (the test of myr_ok), the time goes into FILE. A cheap signal in place
# of listing 2,500 objects every second; wait_converged confirms it with
# the LIST test. The pipeline ends by itself once it wrote (jq halts,
# curl on the next bookmark) or when kubesim stops.
watch_start() {
  local d=${sim_dirs[$1]} rv
  rv=$(sapi "$1" GET '/apis/mygroup.example.com/v1/namespaces/default/myresources?limit=1' |
    jq -r '.metadata.resourceVersion')
  (
    curl -sSN --cacert "$d/kubesim-ca.pem" -H "Authorization: Bearer $(cat "$d/token")" \
      "$(cat "$d/url")/apis/mygroup.example.com/v1/namespaces/default/myresources?watch=1&allowWatchBookmarks=true&timeoutSeconds=3600&resourceVersion=$rv" 2>/dev/null |
      jq -n --unbuffered --argjson n "$n" '
        foreach (inputs | select(.type == "ADDED" or .type == "MODIFIED") | .object) as $o
          ({m: {}, c: 0};
           ($o | .status.observedGeneration == .metadata.generation and
              .status.readyReplicas == .spec.replicas and
              ([.status.conditions[]? | select(.type == "Available" and .status == "True")] | length) == 1) as $ok
           | (.m[$o.metadata.name] // false) as $was
           | .c += (if $ok then 1 else 0 end) - (if $was then 1 else 0 end)
           | .m[$o.metadata.name] = $ok;
           if .c == $n then "converged" else empty end)
        | ., halt' 2>/dev/null |
      { read -r _ && date +%s.%N >"$2"; }
  ) &
  watch_pids[$1]=$!
}

# wait_converged TAG: until every kubesim is converged (the kops must stay
# up); sets t_conv[I], seconds after $t0 when kubesim I converged: the
# time of its watch's signal once the LIST test confirms it, else (the
# watch ended without one, or the LIST disagreed) of the first LIST test
# passed, every 2 s.
wait_converged() {
  local i f done_n=0 ok=("" "" "" "") poll=("" "" "" "") p deadline now
  t_conv=("" "" "" "")
  deadline=$(($(date +%s) + 3600))
  while :; do
    for i in 0 1 2 3; do
      [ -z "${t_conv[$i]}" ] || continue
      f=$work/$1-conv$i
      if [ -z "${poll[$i]}" ]; then
        if [ -s "$f" ]; then
          ok[i]=$(myr_ok "$i")
          if [ "${ok[$i]}" = "$n" ] && children_ok "$i"; then
            t_conv[i]=$(echo "$(cat "$f") - $t0" | bc)
            done_n=$((done_n + 1))
          else
            poll[i]=1
          fi
        elif ! kill -0 "${watch_pids[$i]}" 2>/dev/null && [ ! -s "$f" ]; then
          poll[i]=1
        fi
      elif [ -n "${poll[$i]}" ]; then
        now=$(date +%s.%N)
        ok[i]=$(myr_ok "$i")
        if [ "${ok[$i]}" = "$n" ] && children_ok "$i"; then
          t_conv[i]=$(echo "$now - $t0" | bc)
          done_n=$((done_n + 1))
        fi
      fi
    done
    [ "$done_n" -lt 4 ] || break
    for p in "${kop_pids[@]}"; do kill -0 "$p" 2>/dev/null || fail "a kop exited"; done
    [ "$(date +%s)" -le "$deadline" ] || fail "did not converge within an hour (${ok[*]} of $n)"
    if [ -n "${poll[*]}" ]; then sleep 2; else sleep 0.5; fi
  done
  polled=$(for i in 0 1 2 3; do [ -z "${poll[$i]}" ] || printf 'c%s ' "$i"; done)
}

# side_writes: kop's writes in the four kubesims by resource and verb
# (the benchmark's creates were before the counters' reset), summed;
# side_wpo: their total per object.
count_writes() {
  local i w
  side_writes=$(for i in 0 1 2 3; do sapi "$i" GET /_kubesim/stats | jq -c '.writes'; done |
    jq -s -c 'reduce .[] as $w ({}; reduce ($w | to_entries[]) as $r (.;
      reduce ($r.value | to_entries[]) as $v (.; .[$r.key][$v.key] += $v.value)))')
  w=$(echo "$side_writes" | jq '[.[][]] | add // 0')
  side_wpo=$(printf '%.2f' "$(echo "scale=4; $w / (4 * $n)" | bc)")
}

max_of() { printf '%s\n' "$@" | sort -g | tail -n 1; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {printf "%.3f", (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

# run_fleet ROUND / run_four ROUND: one side; sets side_t (s), side_rss and
# side_hwm and side_pss (KiB), side_wpo, side_create (s), side_each (per cluster),
# side_cpu (CPU seconds of the kops and the kubesims in the measured
# window), side_ready (clusters ready), side_recs (reconciles), side_store (bytes in
# the informers' stores).
run_fleet() {
  step="round $1, fleet: kubesims and objects"
  sims_start "a$1"
  local tc0 tc1 i
  tc0=$(date +%s.%N)
  create_objects
  tc1=$(date +%s.%N)
  side_create=$(echo "$tc1 - $tc0" | bc)
  step="round $1, fleet: converge"
  for i in 0 1 2 3; do watch_start "$i" "$work/a$1-conv$i"; done
  kop_port "a$1-fleet"
  sim_cpu0=$(cpu_s "${sim_pids[@]}")
  t0=$(date +%s.%N)
  kop_start "a$1-fleet" --kubeconfig "${sim_dirs[0]}/kubeconfig" \
    --cluster "c1=${sim_dirs[1]}/kubeconfig" --cluster "c2=${sim_dirs[2]}/kubeconfig" \
    --cluster "c3=${sim_dirs[3]}/kubeconfig"
  wait_converged "a$1"
  side_cpu="kop $(cpu_s "${kop_pids[@]}") s, kubesims $(echo "$(cpu_s "${sim_pids[@]}") - $sim_cpu0" | bc) s"
  side_rss=$(rss_kib "${kop_pids[0]}")
  side_hwm=$(hwm_kib "${kop_pids[0]}")
  side_pss=$(pss_kib "${kop_pids[0]}")
  side_t=$(max_of "${t_conv[@]}")
  side_each=$(printf '%.1f ' "${t_conv[@]}")${polled:+(timed by LIST: $polled)}
  count_writes
  side_ready=$(metric "a$1-fleet" '^kop_cluster_ready')
  side_recs=$(metric "a$1-fleet" '^controller_runtime_reconcile_total')
  side_store=$(metric "a$1-fleet" '^kop_store_bytes')
  stop_kops
  stop_sims
}

run_four() {
  step="round $1, four kops: kubesims and objects"
  sims_start "b$1"
  local tc0 tc1 i
  tc0=$(date +%s.%N)
  create_objects
  tc1=$(date +%s.%N)
  side_create=$(echo "$tc1 - $tc0" | bc)
  step="round $1, four kops: converge"
  for i in 0 1 2 3; do watch_start "$i" "$work/b$1-conv$i"; done
  for i in 0 1 2 3; do kop_port "b$1-kop$i"; done
  sim_cpu0=$(cpu_s "${sim_pids[@]}")
  t0=$(date +%s.%N)
  for i in 0 1 2 3; do
    kop_start "b$1-kop$i" --kubeconfig "${sim_dirs[$i]}/kubeconfig"
  done
  wait_converged "b$1"
  side_cpu="kops $(cpu_s "${kop_pids[@]}") s, kubesims $(echo "$(cpu_s "${sim_pids[@]}") - $sim_cpu0" | bc) s"
  side_rss=0
  side_hwm=0
  side_pss=0
  for i in 0 1 2 3; do
    side_rss=$((side_rss + $(rss_kib "${kop_pids[$i]}")))
    side_hwm=$((side_hwm + $(hwm_kib "${kop_pids[$i]}")))
    side_pss=$((side_pss + $(pss_kib "${kop_pids[$i]}")))
  done
  side_t=$(max_of "${t_conv[@]}")
  side_each=$(printf '%.1f ' "${t_conv[@]}")${polled:+(timed by LIST: $polled)}
  count_writes
  side_ready=0
  side_recs=0
  side_store=0
  for i in 0 1 2 3; do
    side_ready=$((side_ready + $(metric "b$1-kop$i" '^kop_cluster_ready')))
    side_recs=$((side_recs + $(metric "b$1-kop$i" '^controller_runtime_reconcile_total')))
    side_store=$((side_store + $(metric "b$1-kop$i" '^kop_store_bytes')))
  done
  stop_kops
  stop_sims
}

# run_idle: 4 kops over 1..4 empty clusters; sets idle_rss[K-1] (KiB).
run_idle() {
  step="idle: kubesims"
  sims_start idle
  local k i args ready deadline
  step="idle: kops"
  for k in 1 2 3 4; do
    args=(--kubeconfig "${sim_dirs[0]}/kubeconfig")
    for i in $(seq 1 $((k - 1))); do args+=(--cluster "c$i=${sim_dirs[$i]}/kubeconfig"); done
    kop_port "idle-$k"
    kop_start "idle-$k" "${args[@]}"
  done
  step="idle: every cluster engaged"
  deadline=$(($(date +%s) + 60))
  for k in 1 2 3 4; do
    while :; do
      ready=$(metric "idle-$k" '^kop_cluster_ready' 2>/dev/null) || ready=0
      [ "$ready" = "$k" ] && break
      kill -0 "${kop_pids[$((k - 1))]}" 2>/dev/null || fail "kop over $k clusters exited"
      [ "$(date +%s)" -le "$deadline" ] || fail "kop over $k clusters: $ready of $k ready"
      sleep 0.2
    done
  done
  sleep "$idle_s"
  idle_rss=()
  for k in 1 2 3 4; do idle_rss+=("$(rss_kib "${kop_pids[$((k - 1))]}")"); done
  stop_kops
  stop_sims
}

echo "machine: $(uname -srm), $machine"
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "command: scripts/bench-fleet.sh -n $n -q $qps -b $burst -w $workers -l $latency -r $repeats" \
  "(kop --kube-api-qps $qps --kube-api-burst $burst --max-concurrent-reconciles $workers)"
if [ -n "$sim_core" ]; then
  echo "pinning: kops on core 0, kubesims and the polling on core $sim_core"
else
  echo "pinning: none"
fi

r_time=()
r_rss=()
for round in $(seq 1 "$repeats"); do
  run_fleet "$round"
  a_t=$side_t a_rss=$side_rss
  echo "  fleet writes by resource: $side_writes"
  printf 'round %d, fleet (1 kop, 4 clusters): created in %.1f s; converged in %.1f s (per cluster: %s); RSS %s MiB (HWM %s, PSS %s); stores %s MiB; CPU %s; %s writes/object; clusters ready %s; reconciles %s\n' \
    "$round" "$side_create" "$side_t" "$side_each" "$(mib "$side_rss")" "$(mib "$side_hwm")" "$(mib "$side_pss")" \
    "$(mib $((side_store / 1024)))" "$side_cpu" "$side_wpo" "$side_ready" "$side_recs"
  run_four "$round"
  printf 'round %d, four kops (1 cluster each): created in %.1f s; converged in %.1f s (per cluster: %s); RSS %s MiB together (HWM %s, PSS %s); stores %s MiB; CPU %s; %s writes/object; clusters ready %s; reconciles %s\n' \
    "$round" "$side_create" "$side_t" "$side_each" "$(mib "$side_rss")" "$(mib "$side_hwm")" "$(mib "$side_pss")" \
    "$(mib $((side_store / 1024)))" "$side_cpu" "$side_wpo" "$side_ready" "$side_recs"
  echo "  four kops' writes by resource: $side_writes"
  r_time+=("$(printf '%.3f' "$(echo "scale=4; $a_t / $side_t" | bc)")")
  r_rss+=("$(printf '%.3f' "$(echo "scale=4; $a_rss / $side_rss" | bc)")")
  last_a_t=$a_t last_a_rss=$a_rss last_b_t=$side_t last_b_rss=$side_rss
done

run_idle
echo "idle RSS over 1, 2, 3, 4 empty clusters: $(for v in "${idle_rss[@]}"; do printf '%s ' "$(mib "$v")"; done)MiB"
member=$((idle_rss[3] - idle_rss[2]))
slope=$(printf '%s\n' "${idle_rss[@]}" |
  awk '{x = NR; sx += x; sy += $1; sxx += x * x; sxy += x * $1} END {printf "%.0f", (NR * sxy - sx * sy) / (NR * sxx - sx * sx)}')

t_med=$(median "${r_time[@]}")
rss_med=$(median "${r_rss[@]}")
verdict() { # VALUE GOAL: met / missed (descriptive)
  if [ "$(echo "$1 <= $2" | bc)" = 1 ]; then echo met; else echo missed; fi
}
echo
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
last=
[ "$repeats" = 1 ] || last=", last round"
echo "| measure | fleet (A$last) | four kops (B$last) | A/B | goal |"
echo "|---|---|---|---|---|"
printf '| time to converge, %d x %d objects | %.1f s | %.1f s | **%s** (rounds: %s) | <= 1.1x: %s |\n' \
  4 "$n" "$last_a_t" "$last_b_t" "$t_med" "${r_time[*]}" "$(verdict "$t_med" 1.1)"
printf '| RSS at convergence | %s MiB | %s MiB (sum of 4) | **%s** (rounds: %s) | <= 0.5x: %s |\n' \
  "$(mib "$last_a_rss")" "$(mib "$last_b_rss")" "$rss_med" "${r_rss[*]}" "$(verdict "$rss_med" 0.5)"
printf '| idle cost of one more member (4 vs 3 empty clusters) | %s MiB | | (slope over 1-4: %s MiB) | <= 2 MiB: %s |\n' \
  "$(mib "$member")" "$(mib "$slope")" "$(verdict "$member" 2048)"
