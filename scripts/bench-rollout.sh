#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# A rolling update and a leader crash under API load (issue 11's
# acceptance benchmark). kubesim (the project's API server) routes the
# conversion and validating webhooks to the Service kop-system/
# kop-webhook-service, whose endpoints are two kop replicas (webhooks and
# reconciler, --leader-elect), as a real apiserver routes them: a
# keep-alive pool, a new connection to a random ready endpoint, endpoint
# changes reaching it after --endpoint-propagation-delay (1 s), net/http's
# retry rules (docs/kubesim.md §5).
#
# tests/bench/rollout.py plays the rest of the cluster:
#   * load: CLIENTS processes, each with one keep-alive connection, together
#     RATE requests/s on a fixed schedule: v2 GETs (conversion), v2 UPDATEs
#     (conversion both ways and validation), v1 CREATEs (validation; each
#     new MyResource is work for the reconciler);
#   * kubelet: /readyz probed every 1 s (initialDelaySeconds 1, timeout 1 s,
#     failureThreshold 3); a pod whose container exited is not ready at
#     once;
#   * EndpointSlice controller: ready pods are the endpoints, a not-ready or
#     terminating one is removed; each change is POSTed to kubesim.
#
# The scenario, in phases (requests are counted by their start time):
#   before    the load runs 5 s against the two replicas;
#   rollout   a Deployment's rolling update with maxSurge 1, maxUnavailable 0:
#             start a new replica, wait until the kubelet finds it ready
#             (and so the endpoints controller adds it), mark an old one
#             terminating (removed from the endpoints) and SIGTERM it;
#             again for the second; the phase ends when the last old
#             replica has exited;
#   between   5 s;
#   kill      SIGKILL of the leader; the kubelet sees the container exit and
#             restarts it (same pod, same ports); the phase ends 5 s after
#             the Lease has a new holder (the survivor or the restarted
#             replica, whichever retries first once it expired) and the
#             restarted replica is ready;
#   after     5 s; then the load stops and every MyResource must converge
#             (status.observedGeneration = metadata.generation, readyReplicas
#             = spec.replicas, Available True) within 120 s.
# Prints requests sent and failed per phase (failures grouped by reason,
# from the clients and from kubesim's /_kubesim/stats webhook counters),
# the reconcile gap around each leader change (from the replicas' logs: the
# last child written by the old leader, the first by the new one), and the
# convergence check.
#
# Goal: 0 failed requests of >= 5,000 in the rollout phase; after the
# SIGKILL only the calls lost with the killed process (in flight on its
# connections, or dialed to it before its endpoint removal propagated);
# every MyResource converged; each leader change within the lease settings
# (a SIGTERM: the release is taken, and reconciling resumes, within 2.2
# retry periods, the jittered retry of client-go's elector; a SIGKILL:
# within the lease duration plus that; 1 s of slack each).
#
#   scripts/bench-rollout.sh [--control] [--rate R] [--clients N]
#     --control    kop runs with --shutdown-delay 0 (the same scenario; the
#                  rollout must then show failed requests: the proof that
#                  the emulation sees them)
#     --rate R     requests/s of all clients together (default 600)
#     --clients N  client processes (default 4)
# Exit status 0 when every goal of the mode is met.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# shellcheck source=scripts/lib/bench-common.sh
. scripts/lib/bench-common.sh

control=false rate=600 clients=4
bench_usage_line="usage: scripts/bench-rollout.sh [--control] [--rate R] [--clients N]"
while [ $# -gt 0 ]; do
  case $1 in
  --control) control=true ;;
  --rate) [ $# -ge 2 ] || bench_usage "--rate needs a value"; rate=$2; shift ;;
  --clients) [ $# -ge 2 ] || bench_usage "--clients needs a value"; clients=$2; shift ;;
  *) bench_usage ;;
  esac
  shift
done
bench_count --rate "$rate"
bench_count --clients "$clients"

die() { echo "bench-rollout: FAIL: $*" >&2; exit 1; }

scripts/install-deps.sh
bench_need_python3
# kubesim evaluates the CRD's CEL rules through its helper (docs/kubesim.md)
# shellcheck source=scripts/lib/celhelper.sh
. scripts/lib/celhelper.sh
cel_helper_install "$top" || die "installing the CEL helper's npm packages failed"

build="build-release"
bench_setup "$build" --buildtype=release -Dtests=false
ninja -C "$build" kop tests/kubesim/kubesim >/dev/null
kop="$top/$build/kop"
kubesim="$top/$build/tests/kubesim/kubesim"
tool="$top/tests/bench/rollout.py"

# Lease settings (controller-runtime's defaults) and the drain.
lease=15 renew=10 retry=2
delay=5s
$control && delay=0

tmp=$(mktemp -d)
declare -A pid=() wport=() hport=() mport=()
others=()
cleanup() {
  [ -f "$tmp/stop" ] || touch "$tmp/stop"
  for p in "${pid[@]}" "${others[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pid[@]}" "${others[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ -n "${BENCH_ROLLOUT_KEEP:-}" ]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
now() { date +%s.%N; }
wait_for() { # FILE PATTERN TRIES(of 100 ms)
  for _ in $(seq "$3"); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

scripts/gen-certs.sh "$tmp/certs" >/dev/null
token=bench-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
"$kubesim" --listen 127.0.0.1:0 --kubeconfig-out "$tmp/kubeconfig" --ca-out "$tmp/kubesim-ca.pem" \
  --token "$token" --deployment-ready-delay 1s --endpoint-propagation-delay 1s \
  >"$tmp/kubesim.log" 2>&1 &
others+=($!)
wait_for "$tmp/kubesim.log" '^https://' 100 || die "kubesim did not start"
url=$(head -n 1 "$tmp/kubesim.log")
export KUBECONFIG=$tmp/kubeconfig
api() { # METHOD PATH [BODY]
  curl -sS --fail --cacert "$tmp/kubesim-ca.pem" -H "Authorization: Bearer $token" \
    -H 'Content-Type: application/json' -X "$1" ${3:+--data-binary "$3"} "$url$2"
}

ca=$(base64 -w0 "$tmp/certs/ca.crt")
sed "s|^        service:|        caBundle: $ca\n        service:|" manifests/base/crd.yaml >"$tmp/crd.yaml"
sed "s|^      service:|      caBundle: $ca\n      service:|" manifests/base/webhook.yaml >"$tmp/webhook.yaml"
kubectl --cache-dir "$tmp/cache" apply -f manifests/base/namespace.yaml -f "$tmp/crd.yaml" \
  -f "$tmp/webhook.yaml" >/dev/null || die "kubectl apply of the manifests"

mkdir -p "$tmp/pods/pods" "$tmp/out"
python3 "$tool" kubelet --url "$url" --ca "$tmp/kubesim-ca.pem" --token "$token" \
  --service kop-system/kop-webhook-service --pods "$tmp/pods" --period 1 --failure-threshold 3 &
others+=($!)

# start NAME: a replica (pod NAME), on the ports it had before if any.
start() {
  local n=$1
  [ -n "${wport[$n]:-}" ] || { wport[$n]=$(bench_free_port); hport[$n]=$(bench_free_port); mport[$n]=$(bench_free_port); }
  POD_NAME=$n "$kop" --kubeconfig "$tmp/kubeconfig" --cert-dir "$tmp/certs" \
    --webhook-host 127.0.0.1 --webhook-port "${wport[$n]}" \
    --metrics-bind-address "127.0.0.1:${mport[$n]}" --health-probe-bind-address "127.0.0.1:${hport[$n]}" \
    --leader-elect --leader-election-namespace kop-system \
    --leader-election-lease-duration ${lease}s --leader-election-renew-deadline ${renew}s \
    --leader-election-retry-period ${retry}s --kube-api-qps 100 --kube-api-burst 200 \
    --shutdown-delay "$delay" >>"$tmp/$n.log" 2>&1 &
  pid[$n]=$!
  echo "${pid[$n]} ${hport[$n]} 127.0.0.1:${wport[$n]} 0" >"$tmp/pods/pods/$n"
}
wait_ready() { # NAME: the kubelet found it ready (then the endpoints include it)
  for _ in $(seq 600); do
    [ -e "$tmp/pods/ready/$1" ] && return 0
    kill -0 "${pid[$1]}" 2>/dev/null || die "$1 exited: $(tail -n 3 "$tmp/$1.log")"
    sleep 0.1
  done
  die "$1 not ready within 60 s"
}
# terminate NAME: the pod is deleted: terminating (out of the endpoints) and SIGTERM.
terminate() {
  echo "${pid[$1]} ${hport[$1]} 127.0.0.1:${wport[$1]} 1" >"$tmp/pods/pods/$1"
  kill -TERM "${pid[$1]}"
  echo "$(now) SIGTERM $1" >>"$tmp/events"
}
leader() { # the replica whose /metrics says it leads
  local n m
  for n in "${!pid[@]}"; do
    kill -0 "${pid[$n]}" 2>/dev/null || continue
    m=$(curl -s --max-time 2 "http://127.0.0.1:${mport[$n]}/metrics" || true)
    grep -q '^leader_election_master_status{.*} 1' <<<"$m" && { echo "$n"; return 0; }
  done
  return 1
}
phase() { # NAME START END: counted in the report; kubesim's webhook stats of it saved
  echo "$1 $2 $3" >>"$tmp/phases"
  api GET /_kubesim/stats >"$tmp/stats.$1" || die "GET /_kubesim/stats"
  api DELETE /_kubesim/stats >/dev/null || die "DELETE /_kubesim/stats"
}

start kop-1
start kop-2
wait_ready kop-1
wait_ready kop-2
for _ in $(seq 600); do leader >/dev/null && break; sleep 0.1; done
leader >/dev/null || die "no replica leads"
sleep 1.5 # the endpoint set has propagated

echo "rolling update and leader crash under load"
echo "  date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "  machine: $(bench_machine), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "  command: scripts/bench-rollout.sh $(${control} && echo '--control ')--rate $rate --clients $clients   (release build)"
echo "  kop:     2 replicas, --shutdown-delay $delay, lease ${lease}s / renew ${renew}s / retry ${retry}s, --kube-api-qps 100"
echo "  kubesim: --endpoint-propagation-delay 1s; kubelet probe period 1 s, failureThreshold 3"
echo "  load:    $clients clients, $rate requests/s: per 20, 1 v1 CREATE, 10 v2 GETs, 9 v2 UPDATEs"

api DELETE /_kubesim/stats >/dev/null
python3 "$tool" load --url "$url" --ca "$tmp/kubesim-ca.pem" --token "$token" \
  --clients "$clients" --rate "$rate" --out "$tmp/out" --stop "$tmp/stop" &
others+=($!)
t=$(now)
sleep 5
t1=$(now)
phase before "$t" "$t1"

# ---- rolling update: kop-1, kop-2 -> kop-3, kop-4 -------------------------------------------
old=(kop-1 kop-2)
new=(kop-3 kop-4)
for i in 0 1; do
  start "${new[$i]}"
  echo "$(now) start ${new[$i]}" >>"$tmp/events"
  wait_ready "${new[$i]}"
  echo "$(now) ready ${new[$i]}" >>"$tmp/events"
  terminate "${old[$i]}"
done
codes=""
for o in "${old[@]}"; do
  rc=0
  wait "${pid[$o]}" || rc=$?
  echo "$(now) exited $o $rc" >>"$tmp/events"
  codes+=" $o=$rc"
  unset "pid[$o]"
  rm -f "$tmp/pods/pods/$o"
done
t2=$(now)
phase rollout "$t1" "$t2"
sleep 5
t3=$(now)
phase between "$t2" "$t3"

# ---- SIGKILL of the leader ------------------------------------------------------------------
victim=$(leader) || die "no replica leads before the SIGKILL"
kill -KILL "${pid[$victim]}"
echo "$(now) SIGKILL $victim" >>"$tmp/events"
wait "${pid[$victim]}" 2>/dev/null || true
# The kubelet notices the exit and restarts the container (same ports).
for _ in $(seq 50); do [ -e "$tmp/pods/ready/$victim" ] || break; sleep 0.1; done
start "$victim"
echo "$(now) restart $victim" >>"$tmp/events"
# Whichever replica gets the lease once it expires (the survivor, or the
# restarted one, a new identity) leads next.
became() { cat "$tmp"/kop-[34].log | grep -c '"msg":"became leader, reconciling"' || true; }
n0=$(became)
for _ in $(seq 600); do
  [ "$(became)" -gt "$n0" ] && break
  sleep 0.1
done
[ "$(became)" -gt "$n0" ] || die "nobody leads 60 s after the SIGKILL"
wait_ready "$victim"
sleep 5
t4=$(now)
phase kill "$t3" "$t4"
sleep 5
t5=$(now)
phase after "$t4" "$t5"
touch "$tmp/stop"
wait "${others[-1]}" || die "the load generator failed"

# ---- convergence ----------------------------------------------------------------------------
converge_start=$(now)
converged=no
for _ in $(seq 240); do
  api GET "/apis/mygroup.example.com/v1/namespaces/default/myresources" >"$tmp/list.json" || true
  if python3 - "$tmp/list.json" >"$tmp/converge" <<'PY'; then
import json, sys
items = json.load(open(sys.argv[1]))["items"]
bad = []
for o in items:
    st, sp, md = o.get("status") or {}, o.get("spec") or {}, o["metadata"]
    avail = [c for c in st.get("conditions", []) if c.get("type") == "Available"]
    if (st.get("observedGeneration") != md.get("generation")
            or st.get("readyReplicas") != sp.get("replicas")
            or not avail or avail[0].get("status") != "True"):
        bad.append(md["name"])
print(len(items), len(bad), " ".join(bad[:5]))
sys.exit(1 if bad or not items else 0)
PY
    converged=yes
    break
  fi
  sleep 0.5
done
converge_s=$(python3 -c "print('%.1f' % ($(now) - $converge_start))")

# ---- report ---------------------------------------------------------------------------------
python3 "$tool" report --out "$tmp/out" --phases "$tmp/phases" >"$tmp/report.json"
for n in kop-1 kop-2 kop-3 kop-4; do cp "$tmp/$n.log" "$tmp/out/" 2>/dev/null || true; done
python3 - "$tmp" "$control" "$lease" "$retry" "$converged" "$converge_s" "$codes" <<'PY'
import datetime, json, os, sys
tmp, control, lease, retry = sys.argv[1], sys.argv[2] == "true", int(sys.argv[3]), int(sys.argv[4])
converged, converge_s, codes = sys.argv[5] == "yes", sys.argv[6], sys.argv[7].split()
rep = json.load(open(os.path.join(tmp, "report.json")))

def why(reason):  # what the apiserver could not route around after a SIGKILL
    if "connection refused" in reason:
        return ("a new connection dialed the killed replica before its endpoint removal "
                "reached the apiserver; a failed dial is not retried (net/http)")
    if "reset by peer" in reason or "EOF" in reason:
        return ("the POST was written on a connection to the killed replica and lost with "
                "it; a written POST is not replayable (net/http)")
    return "not explained: a failure the crash should not cause"

ok = True
print()
print("%-8s %6s %7s %7s %6s %9s %8s  %s" % ("phase", "secs", "sent", "req/s", "failed", "conflicts", "p99 ms", "webhook calls failed in kubesim"))
for name in ("before", "rollout", "between", "kill", "after"):
    r = rep[name]
    st = json.load(open(os.path.join(tmp, "stats." + name))).get("webhooks", {})
    fr = {k: v for k, v in (st.get("failureReasons") or {}).items() if v}
    print("%-8s %6.1f %7d %7.1f %6d %9d %8.1f  %s" % (
        name, r["seconds"], r["sent"], r["rate"], r["failed"], r["conflicts"], r["p99_ms"],
        ", ".join("%s %d" % kv for kv in sorted(fr.items())) or "none"))
    for reason, n in sorted(r["reasons"].items(), key=lambda kv: -kv[1]):
        print("           %5d x %s" % (n, reason[:220]))
        if name == "kill":
            print("                   why: %s" % why(reason))
    rt = {k: v for k, v in (st.get("retries") or {}).items() if v}
    if rt:
        print("           kubesim retried: %s" % ", ".join("%s %d" % kv for kv in sorted(rt.items())))
roll, kill = rep["rollout"], rep["kill"]

def ts(s):  # kop's log "ts" (RFC 3339) -> epoch seconds
    s = s.replace("Z", "+00:00")
    return datetime.datetime.fromisoformat(s).timestamp()

# Each process is an instance: the pod's name, "#2" after a restart.
writes, became, released = [], [], {}
for n in ("kop-1", "kop-2", "kop-3", "kop-4"):
    try:
        f = open(os.path.join(tmp, n + ".log"))
    except OSError:
        continue
    inst, k = n, 0
    for line in f:
        try:
            j = json.loads(line)
        except ValueError:
            continue
        m = j.get("msg")
        if m == "starting kop":
            k += 1
            inst = n if k == 1 else "%s#%d" % (n, k)
        elif m in ("created child", "updated child"):
            writes.append((ts(j["ts"]), inst))
        elif m == "became leader, reconciling":
            became.append((ts(j["ts"]), inst))
        elif m == "released lease":
            released[inst] = ts(j["ts"])
writes.sort()
became.sort()
events = [l.split() for l in open(os.path.join(tmp, "events"))]
print()
print("leader changes (reconcile gap: the last child written by the old leader -> the first by the new one)")
for (t0, prev), (t, n) in zip(became, became[1:]):
    before = [w[0] for w in writes if w[0] < t and w[1] == prev]
    after = [w[0] for w in writes if w[0] >= t and w[1] == n]
    sig = [e for e in events if e[1] in ("SIGTERM", "SIGKILL") and e[2] == prev.split("#")[0]
           and t0 <= float(e[0]) < t]
    if not sig:
        print("  %s -> %s at %.3f: no signal found before it" % (prev, n, t))
        ok = False
        continue
    kind, ts_sig = sig[-1][1], float(sig[-1][0])
    gap = (after[0] - before[-1]) if before and after else float("nan")
    if kind == "SIGTERM":
        rel = released.get(prev)
        # The old leader reconciles through --shutdown-delay and its drain,
        # then releases the Lease; the next one acquires it at its next
        # try, which comes within 2.2 retry periods (client-go's
        # leaderelection.go: wait.JitterUntil with JitterFactor 1.2): both
        # the handover and the reconcile gap within that, plus 1 s of slack
        # for a loaded machine.
        bound = 2.2 * retry + 1.0
        good = rel is not None and t - rel <= bound and gap <= bound
        print("  SIGTERM %s: it released the Lease %.2f s after the signal, %s acquired it %.2f s later"
              % (prev, (rel or t) - ts_sig, n, t - (rel or t)))
    else:
        # Nobody releases: the others see the Lease expire lease duration
        # after they last saw it change (at most the kill), and take it at
        # their next try (within 2.2 retry periods).
        bound = lease + 2.2 * retry + 1.0
        good = t - ts_sig <= bound and gap <= bound
        print("  SIGKILL %s: %s acquired the Lease %.2f s after the signal" % (prev, n, t - ts_sig))
    print("    reconcile gap %.2f s (bound %.1f s: %s)" % (gap, bound, "ok" if good else "MISSED"))
    ok &= good
print()
print("old replicas' exit status: %s" % " ".join(codes))
conv = open(os.path.join(tmp, "converge")).read().split()
print("MyResources: %s, not converged: %s%s (checked for %s s after the load stopped)" % (
    conv[0] if conv else "?", conv[1] if len(conv) > 1 else "?",
    " (" + " ".join(conv[2:]) + ")" if len(conv) > 2 else "", converge_s))
ok &= converged and all(c.endswith("=0") for c in codes)
print()
if control:
    seen = roll["failed"] > 0
    print("control (--shutdown-delay 0): %d of %d requests failed during the rollout: %s" % (
        roll["failed"], roll["sent"], "the emulation sees them" if seen else "MISSED: none seen"))
    ok = seen and converged
else:
    good = roll["failed"] == 0 and roll["sent"] >= 5000
    ok &= good
    quiet = all(rep[p]["failed"] == 0 for p in ("before", "between", "after"))
    explained = all(not why(r).startswith("not explained") for r in kill["reasons"])
    ok &= quiet and explained
    print("rollout: %d failed of %d (goal 0 of >= 5,000): %s" % (roll["failed"], roll["sent"], "ok" if good else "MISSED"))
    print("kill:    %d failed of %d, %s" % (kill["failed"], kill["sent"],
          "each lost with the killed process" if explained else "MISSED: some not explained by the crash"))
    print("other phases: %s" % ("0 failed" if quiet else "MISSED: failures without a rollout or crash"))
sys.exit(0 if ok else 1)
PY
