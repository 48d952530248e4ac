#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The quick start: installs what is missing, builds, and runs the full
# operator the way a cluster would: two kop replicas with leader election
# against kubesim (the project's in-memory API server), using the real
# manifests, with the caBundles filled from the dev CA the way cert-manager's
# cainjector would. Then, with kubectl:
#
#   - the seed MyResource (manifests/samples/myresource.yaml) applied, read
#     back in v1 and in v2 (kubesim calls kop's conversion webhook);
#   - the Deployment and Service kop made for it, with their ownerReference;
#   - its status reaching Available with 3 ready replicas;
#   - the Lease holder, and which replica leads (their /metrics);
#   - the validating webhook denying a bad object (every mistake in one
#     message);
#   - someone deletes the Service: kop puts it back;
#   - the leader stops (SIGTERM): it releases the Lease and the other
#     replica takes over at once; the webhooks keep answering through it.
#
# Wiring: kubesim starts first and writes the kubeconfig; both replicas
# serve the webhooks on ports the kernel picks; then kubesim is told the
# endpoints of the webhook Service (kop-system/kop-webhook-service) with
# POST /_kubesim/endpoints: both replicas, ready, as the EndpointSlice
# controller writes them. When the leader gets SIGTERM its endpoint turns
# not ready first (a terminating pod's), so calls go to the other replica.
#
#   scripts/demo.sh          run, show, stop everything
#   scripts/demo.sh --keep   leave kubesim and both replicas running
#   scripts/demo.sh --fleet  instead: one kop for three clusters, a local
#                            one and two members (docs/operations.md §12;
#                            scripts/lib/demo-fleet.sh); with --keep too
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
keep=false
fleet=false
for a in "$@"; do
  case $a in
  --keep) keep=true ;;
  --fleet) fleet=true ;;
  *) echo "usage: scripts/demo.sh [--fleet] [--keep]" >&2; exit 2 ;;
  esac
done

# shellcheck source=scripts/lib/demo.sh
. scripts/lib/demo.sh

# The build directory (KOP_DEMO_BUILD_DIR to use another one).
build=${KOP_DEMO_BUILD_DIR:-build}

step "installing what is missing and building"
scripts/install-deps.sh
# kubesim's CEL helper, for the CRD's x-kubernetes-validations
# shellcheck source=scripts/lib/celhelper.sh
. scripts/lib/celhelper.sh
cel_helper_install "$top" || die "installing the CEL helper's npm packages (tests/kubesim/cel) failed"
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null
ninja -C "$build" kop tests/kubesim/kubesim >/dev/null
scripts/gen-certs.sh certs/dev >/dev/null
echo "built $build/kop and $build/tests/kubesim/kubesim; dev certificates in certs/dev/"

show() { # print a kubectl command line
  local shown=kubectl a
  for a in "$@"; do
    case $a in *[\ \"\{\}\(\)\$]*) shown+=" '$a'" ;; *) shown+=" $a" ;; esac
  done
  echo "\$ $shown"
}
k() { # kubectl, showing the command first
  show "$@"
  kubectl --cache-dir "$work/cache" "$@"
}
kq() { kubectl --cache-dir "$work/cache" "$@"; } # quiet: no echo of the command
# Until COMMAND prints WANT (every 0.2 s, at most TRIES times).
poll() { # TRIES WANT COMMAND...
  local tries=$1 want=$2 got=
  shift 2
  for _ in $(seq "$tries"); do
    got=$("$@" 2>/dev/null || true)
    [ "$got" = "$want" ] && return 0
    sleep 0.2
  done
  echo "(still '$got', wanted '$want')"
  return 1
}

if $fleet; then
  # shellcheck source=scripts/lib/demo-fleet.sh
  . scripts/lib/demo-fleet.sh
  exit 0
fi

step "starting kubesim"
token=demo-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
# shellcheck source=scripts/lib/kubesim.sh
. scripts/lib/kubesim.sh
kubesim_start "$build/tests/kubesim/kubesim" "$work" "$token" --deployment-ready-delay 1s ||
  die "kubesim did not start"
pids+=("$kubesim_pid")
url=$kubesim_url
echo "kubesim at $url"
export KUBECONFIG=$work/kubeconfig

step "applying the namespace, the CRD and the ValidatingWebhookConfiguration from manifests/base"
echo "(caBundle = certs/dev/ca.crt, as cert-manager's cainjector would fill it in)"
ca=$(base64 -w0 certs/dev/ca.crt)
sed "s|^        service:|        caBundle: $ca\n        service:|" manifests/base/crd.yaml >"$work/crd.yaml"
sed "s|^      service:|      caBundle: $ca\n      service:|" manifests/base/webhook.yaml >"$work/webhook.yaml"
k apply -f manifests/base/namespace.yaml -f "$work/crd.yaml" -f "$work/webhook.yaml"

step "starting two kop replicas (webhooks + reconciler, --leader-elect, Lease in kop-system)"
start_replica() { # NAME WEBHOOK_PORT
  POD_NAME=$1 "$build/kop" --kubeconfig "$work/kubeconfig" --cert-dir certs/dev \
    --webhook-host 127.0.0.1 --webhook-port "$2" \
    --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 \
    --leader-elect --leader-election-namespace kop-system \
    --leader-election-lease-duration 15s --leader-election-renew-deadline 10s \
    --leader-election-retry-period 1s >"$work/$1.log" 2>&1 &
  pids+=($!)
  pid[$1]=$!
}
declare -A pid
start_replica kop-a 0
start_replica kop-b 0
for r in kop-a kop-b; do
  wait_for "$work/$r.log" '"msg":"serving webhook"' 100 || die "$r did not start"
done
declare -A mport hport
for r in kop-a kop-b; do
  mport[$r]=$(log_port "$work/$r.log" "serving metrics")
  hport[$r]=$(log_port "$work/$r.log" "serving health probes")
  echo "$r: webhook :$(log_port "$work/$r.log" "serving webhook"), metrics :${mport[$r]}, probes :${hport[$r]}"
done
for r in kop-a kop-b; do
  poll 100 200 curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${hport[$r]}/readyz" >/dev/null ||
    die "$r not ready"
done
for _ in $(seq 300); do
  grep -q '"msg":"became leader, reconciling"' "$work/kop-a.log" "$work/kop-b.log" && break
  sleep 0.05
done
echo "both replicas ready (/readyz 200)"

step "the webhook Service kop-system/kop-webhook-service has both replicas as endpoints"
declare -A wport
for r in kop-a kop-b; do
  wport[$r]=$(log_port "$work/$r.log" "serving webhook")
  [ -n "${wport[$r]}" ] || die "no webhook port in $r's log"
done
# endpoints READY-A READY-B: the Service's EndpointSlice as the controller
# writes it (a terminating pod's endpoint is not ready); new connections see
# it after kubesim's propagation delay (1 s), which the wait below covers.
endpoints() {
  local set="{\"service\":\"kop-system/kop-webhook-service\",\"endpoints\":[{\"address\":\"127.0.0.1:${wport[kop-a]}\",\"ready\":$1},{\"address\":\"127.0.0.1:${wport[kop-b]}\",\"ready\":$2}]}"
  echo "\$ curl -X POST $url/_kubesim/endpoints -d '$set'"
  curl -sS --fail --cacert "$work/kubesim-ca.pem" -H "Authorization: Bearer $token" \
    -H 'Content-Type: application/json' -X POST --data-binary "$set" \
    "$url/_kubesim/endpoints" >/dev/null || die "POST /_kubesim/endpoints"
}
active() { # the endpoint set new connections use, as "ADDRESS:READY ..."
  curl -sS --cacert "$work/kubesim-ca.pem" -H "Authorization: Bearer $token" \
    "$url/_kubesim/endpoints" |
    jq -r '.services[] | select(.name == "kop-webhook-service") |
      [.active[] | "\(.address):\(if .ready == false then false else true end)"] | join(" ")'
}
endpoints true true
poll 50 "127.0.0.1:${wport[kop-a]}:true 127.0.0.1:${wport[kop-b]}:true" active >/dev/null ||
  die "the endpoints did not take effect"

step "applying the seed MyResource (v1; the validating webhook admits it)"
sed -n '/^apiVersion/,$p' manifests/samples/myresource.yaml
k apply -f manifests/samples/myresource.yaml

step "waiting for its status: Available, 3 ready replicas"
if poll 100 "True 3" kq get myresources.v1.mygroup.example.com example-resource \
  -o jsonpath='{.status.conditions[?(@.type=="Available")].status} {.status.readyReplicas}'; then
  k get myresources.v1.mygroup.example.com example-resource
  k get myresources.v1.mygroup.example.com example-resource -o jsonpath='readyReplicas: {.status.readyReplicas}  conditions: {range .status.conditions[*]}{.type}={.status} {end}{"\n"}'
else
  die "the MyResource did not become Available"
fi

step "the MyResource in v1 (storage version, defaults applied) and in v2 (through kop's conversion webhook)"
for v in v1 v2; do
  show get myresources.$v.mygroup.example.com example-resource -o yaml | sed 's/$/   # apiVersion and spec/'
  kq get myresources.$v.mygroup.example.com example-resource -o yaml 2>/dev/null |
    sed -n '/^apiVersion/p; /^spec:/,/^status:/p' | sed '$d'
done

step "the Deployment and Service kop created for it"
k get deploy,svc -o wide
show get deploy,svc example-resource -o yaml | sed 's/$/   # ownerReferences/'
kq get deploy example-resource -o yaml | sed -n '/^  ownerReferences:/,/^    uid:/p' | sed 's/^/deployment: /'
kq get svc example-resource -o yaml | sed -n '/^  ownerReferences:/,/^    uid:/p' | sed 's/^/service:    /'

step "leader election: the Lease and each replica's leader_election_master_status"
k get lease -n kop-system kop-leader -o jsonpath='holder: {.spec.holderIdentity}  transitions: {.spec.leaseTransitions}{"\n"}'
leader=
for r in kop-a kop-b; do
  s=$(curl -s "http://127.0.0.1:${mport[$r]}/metrics" | grep '^leader_election_master_status' || true)
  echo "$r: ${s:-leader_election_master_status (absent)}"
  case $s in *' 1') leader=$r ;; esac
  n=$(curl -s "http://127.0.0.1:${mport[$r]}/metrics" |
    awk '/^controller_runtime_reconcile_total/ {n += $NF} END {print n + 0}')
  echo "$r: reconciles so far: $n"
done
[ -n "$leader" ] || die "no replica reports leading"
follower=kop-a
[ "$leader" = kop-a ] && follower=kop-b
echo "=> $leader leads and reconciles; $follower serves webhooks and keeps its cache warm"

step "validation at work: a v2 object with several mistakes (the CRD's own rules, docs/api.md §4.5)"
cat >"$work/bad.yaml" <<'YAML'
apiVersion: mygroup.example.com/v2
kind: MyResource
metadata:
  name: bad-example
spec:
  replicas: 5000
  image:
    repository: Nginx
  ports:
    - {name: web, port: 80}
    - {name: web, port: 70000, protocol: ICMP}
  service:
    type: External
YAML
cat "$work/bad.yaml"
k apply -f "$work/bad.yaml" 2>&1 | fold -s -w 100 || true
echo "(the apiserver refused it before any webhook call; a name that is no DNS-1035 label is the webhook's:)"
sed -e 's/name: bad-example/name: bad.example/' -e '/replicas: 5000/,$d' "$work/bad.yaml" >"$work/bad-name.yaml"
k apply -f "$work/bad-name.yaml" 2>&1 | fold -s -w 100 || true

step "someone deletes the Service; kop puts it back"
old=$(kq get svc example-resource -o jsonpath='{.metadata.uid}')
k delete svc example-resource
if poll 50 yes sh -c "u=\$(kubectl --cache-dir '$work/cache' get svc example-resource -o jsonpath='{.metadata.uid}' 2>/dev/null) && [ -n \"\$u\" ] && [ \"\$u\" != '$old' ] && echo yes"; then
  k get svc example-resource -o wide
  echo "(uid was $old, now $(kq get svc example-resource -o jsonpath='{.metadata.uid}'))"
else
  die "the Service did not come back"
fi
k get events --field-selector involvedObject.name=example-resource 2>/dev/null | tail -n 4 || true

step "the leader ($leader) gets SIGTERM: it releases the Lease and $follower takes over"
t0=$(date +%s%N)
# The pod is terminating: its endpoint stops being ready while kop keeps
# serving through --shutdown-delay, so no webhook call meets a closed port.
if [ "$leader" = kop-a ]; then endpoints false true; else endpoints true false; fi
kill -TERM "${pid[$leader]}"
rc=0
wait "${pid[$leader]}" 2>/dev/null || rc=$?
echo "$leader exited with status $rc"
for i in "${!pids[@]}"; do [ "${pids[$i]}" = "${pid[$leader]}" ] && unset 'pids[i]'; done
pids=("${pids[@]}")
grep -o '"msg":"released lease"[^}]*' "$work/$leader.log" | head -n 1 || true
wait_for "$work/$follower.log" '"msg":"became leader, reconciling"' 200 ||
  die "$follower did not take over"
ms=$((($(date +%s%N) - t0) / 1000000))
echo "$follower leads $ms ms after the SIGTERM (an expired lease would take 15 s)"
k get lease -n kop-system kop-leader -o jsonpath='holder: {.spec.holderIdentity}  transitions: {.spec.leaseTransitions}{"\n"}'
echo "the webhooks still answer, through $follower:"
k get myresources.v2.mygroup.example.com example-resource \
  -o jsonpath='{.apiVersion} {.metadata.name} replicas={.spec.replicas}{"\n"}' ||
  die "the conversion webhook does not answer after the handover"

step "done"
echo "Two kop replicas served the conversion and admission webhooks through kubesim;"
echo "the leader turned the seed MyResource into a Deployment and a Service, restored the"
echo "deleted Service, and handed the Lease over on SIGTERM while the webhooks kept answering."
if $keep; then
  echo
  echo "Still running (pids ${pids[*]}):  export KUBECONFIG=$work/kubeconfig"
  echo "Logs: $work/*.log   Stop with: kill ${pids[*]}"
fi
