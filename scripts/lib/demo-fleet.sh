# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# shellcheck disable=SC2154 # work, build, top, keep: scripts/demo.sh's
#
# scripts/demo.sh --fleet (sourced by scripts/demo.sh after it has built
# kop and kubesim; uses its step/die/wait_for/log_port of scripts/lib/demo.sh
# and its show/k/kq/poll, and $top, $build, $work, $pids, $keep).
#
# One kop for three clusters (docs/operations.md §12), each a kubesim with
# its own CA and tokens:
#
#   local  where kop runs (--kubeconfig): namespace kop-system, the CRD and
#          the ValidatingWebhookConfiguration of manifests/base, as the
#          default demo applies them;
#   east   a member given with --cluster east=KUBECONFIG;
#   west   a member added later through a Secret (--cluster-secrets).
#
# Each member gets the member overlay (manifests/overlays/member, §12.3):
# the CRD and the validating webhook calling kop by url, the latter at
# .../clusters/NAME, and kop's ServiceAccount and ClusterRole there. kop
# reaches a member with a token of that ServiceAccount (kubesim knows it
# through --token-auth-file, where a member's token controller would fill
# Secret kop-token), so the member's RBAC authorizes what kop does there.
# The url is kop's webhook port on 127.0.0.1, picked before kop starts so
# that the members are installed before kop is given their kubeconfigs,
# the order §12.3 asks for. (With a kubectl whose kustomize is older than
# 5.1, Debian 12's among them, the same objects but kop-token are made from
# manifests/base with sed instead: member_sed.)
#
# Then: the seed MyResource reconciled in local and in east (each in its
# own cluster), kop_cluster_ready per cluster; east frozen (SIGSTOP) and
# reported not ready while local keeps converging, then resumed (SIGCONT),
# ready again and a change there converged; west engaged by a labelled
# Secret holding an inline kubeconfig, reconciled, then disengaged when the
# Secret goes, after which kop writes nothing more there.

# The names, in the order they start; tokens and process ids per cluster.
clusters=(local east west)
declare -A sim_url sim_pid admin_token kop_token
sim_dir() { echo "$work/$1"; }

# A free TCP port on 127.0.0.1 below the kernel's ephemeral range, so that
# no other port-0 listener (kop's metrics and probes) is handed it before
# kop binds it.
free_port() {
  python3 - <<'PY'
import random, socket
lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
ports = list(range(max(1024, lo - 10000), lo)) or [0]
random.shuffle(ports)
for p in ports[:200]:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    print(s.getsockname()[1])
    break
PY
}
# kop's metrics, the lines of kop_cluster_ready.
ready_lines() {
  curl -s "http://127.0.0.1:$mport/metrics" | grep '^kop_cluster_ready' || true
}
ready_of() { # CLUSTER: 1, 0 or absent
  local v
  v=$(curl -s "http://127.0.0.1:$mport/metrics" |
    awk -v s="kop_cluster_ready{cluster=\"$1\"}" '$1 == s {print $2}')
  echo "${v:-absent}"
}
show_ready() {
  echo "\$ curl -s http://127.0.0.1:$mport/metrics | grep kop_cluster_ready"
  ready_lines
}
# kop's log lines with this msg for this cluster, after line $2 of the log,
# each reduced to the fields that matter.
kop_log_since() { # FROM_LINE MSG CLUSTER
  tail -n +"$(($1 + 1))" "$work/kop.log" |
    grep "\"msg\":\"$2\",\"cluster\":\"$3\"" |
    jq -c '{level, logger, msg, cluster} + (if .reason then {reason} else {} end)' 2>/dev/null || true
}
log_lines() { wc -l <"$work/kop.log"; }
# Until kop logs MSG for CLUSTER after FROM_LINE (TRIES of 0.2 s).
wait_log() { # FROM_LINE MSG CLUSTER TRIES
  for _ in $(seq "$4"); do
    [ -n "$(kop_log_since "$1" "$2" "$3")" ] && return 0
    sleep 0.2
  done
  return 1
}
# "True 3": the Available condition and readyReplicas of a MyResource.
available() { # CONTEXT NAME
  kq --context "$1" get myresources.v1.mygroup.example.com "$2" 2>/dev/null \
    -o jsonpath='{.status.conditions[?(@.type=="Available")].status} {.status.readyReplicas}'
}
# The seed MyResource under another name (and replicas).
seed_as() { # NAME [REPLICAS]
  sed -e "s/name: example-resource/name: $1/" -e "s/replicas: 3/replicas: ${2:-3}/" \
    manifests/samples/myresource.yaml >"$work/$1.yaml"
  echo "$work/$1.yaml"
}
# What kop made for a MyResource in one cluster, and its status. kubectl
# reads MyResources in v2, the preferred version: the cluster's apiserver
# converts them through kop's /convert (local: by the Service; a member: by
# url).
show_reconciled() { # CONTEXT NAME
  k --context "$1" get "myresource/$2" "deploy/$2" "svc/$2"
  local uid owner
  uid=$(kq --context "$1" get myresource "$2" -o jsonpath='{.metadata.uid}')
  owner=$(kq --context "$1" get deploy "$2" -o jsonpath='{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name} {.metadata.ownerReferences[0].uid}')
  kq --context "$1" get myresource "$2" \
    -o jsonpath="status:    ready={.status.replicas.ready}/{.spec.replicas} {range .status.conditions[*]}{.type}={.status} {end}{\"\\n\"}"
  echo "uid:       $uid"
  echo "owned by:  $owner (the Deployment's ownerReference)"
}

step "starting three kubesims: local (where kop runs) and the members east and west"
# shellcheck source=scripts/lib/kubesim.sh
. scripts/lib/kubesim.sh
for c in "${clusters[@]}"; do
  mkdir -p "$(sim_dir "$c")"
  admin_token[$c]=demo-$c-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
  extra=()
  if [ "$c" != local ]; then
    # kop's ServiceAccount in the member, as its token controller would
    # issue a token for it (kop-token); the member's RBAC decides.
    kop_token[$c]=kop-$c-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
    printf '%s,system:serviceaccount:kop-system:kop,uid-kop-%s,"system:serviceaccounts,system:serviceaccounts:kop-system"\n' \
      "${kop_token[$c]}" "$c" >"$(sim_dir "$c")/tokens.csv"
    extra=(--token-auth-file "$(sim_dir "$c")/tokens.csv")
  fi
  kubesim_start "$build/tests/kubesim/kubesim" "$(sim_dir "$c")" "${admin_token[$c]}" \
    --deployment-ready-delay 1s --cel-helper "$top/tests/kubesim/cel" "${extra[@]}" ||
    die "kubesim $c did not start"
  pids+=("$kubesim_pid")
  sim_pid[$c]=$kubesim_pid
  sim_url[$c]=$kubesim_url
  ln -s "$c/kubesim.log" "$work/kubesim-$c.log" # for die's tails
  printf '%-5s %s  (pid %s, its own CA and admin token)\n' "$c" "$kubesim_url" "$kubesim_pid"
done
# One kubeconfig for kubectl with a context per cluster (you, the admin).
# Written as text: Debian 12's kubectl 1.20 crashes writing a new file
# with `kubectl config set-cluster`.
export KUBECONFIG=$work/kubeconfig
{
  echo "apiVersion: v1"
  echo "kind: Config"
  echo "clusters:"
  for c in "${clusters[@]}"; do
    echo "- name: $c"
    echo "  cluster: {server: '${sim_url[$c]}', certificate-authority-data: '$(base64 -w0 "$(sim_dir "$c")/kubesim-ca.pem")'}"
  done
  echo "users:"
  for c in "${clusters[@]}"; do
    echo "- name: admin-$c"
    echo "  user: {token: '${admin_token[$c]}'}"
  done
  echo "contexts:"
  for c in "${clusters[@]}"; do
    echo "- name: $c"
    echo "  context: {cluster: $c, user: admin-$c, namespace: default}"
  done
  echo "current-context: local"
} >"$KUBECONFIG"
echo "kubectl contexts local, east and west: export KUBECONFIG=$KUBECONFIG"

step "local: the namespace, the CRD and the ValidatingWebhookConfiguration from manifests/base"
echo "(caBundle = certs/dev/ca.crt, as cert-manager's cainjector would fill it in)"
ca=$(base64 -w0 certs/dev/ca.crt)
sed "s|^        service:|        caBundle: $ca\n        service:|" manifests/base/crd.yaml >"$work/crd.yaml"
sed "s|^      service:|      caBundle: $ca\n      service:|" manifests/base/webhook.yaml >"$work/webhook.yaml"
k --context local apply -f manifests/base/namespace.yaml -f "$work/crd.yaml" -f "$work/webhook.yaml"

# What the member overlay renders for member C, made without kustomize
# (for a kubectl whose kustomize is older than 5.1, as Debian 12's): the
# namespace; the ServiceAccount, ClusterRole and ClusterRoleBinding of
# base/rbac.yaml (its first three documents; the Lease Role stays local);
# the CRD and the validating webhook of manifests/base with their
# clientConfig by url. No Secret kop-token: kubesim would leave it empty.
member_sed() { # C
  cat manifests/base/namespace.yaml
  echo "---"
  awk '/^---/ && ++n == 3 {exit} {print}' manifests/base/rbac.yaml
  echo "---"
  awk -v url="$kop_url/convert" -v ca="$ca" '
    /^        service:$/ {print "        url: " url; print "        caBundle: " ca; skip = 1; next}
    skip && /^          / {next}
    {skip = 0; print}' manifests/base/crd.yaml
  echo "---"
  awk -v url="$kop_url/validate-mygroup-example-com-myresource/clusters/$1" -v ca="$ca" '
    /^      service:$/ {print "      url: " url; print "      caBundle: " ca; skip = 1; next}
    skip && /^        / {next}
    {skip = 0; print}' manifests/base/webhook.yaml
}

wport=$(free_port)
[ -n "$wport" ] || die "no free port for kop's webhooks"
kop_url=https://127.0.0.1:$wport
step "east and west: the member overlay (manifests/overlays/member, docs/operations.md §12.3)"
echo "kop's webhooks will listen on $kop_url; each member's apiserver calls them by that url"
for c in east west; do
  mkdir -p "$work/$c-install"
  cp -r manifests "$work/$c-install/"
  {
    echo "url=$kop_url"
    echo "cluster=$c"
    echo "caBundle=$ca"
  } >"$work/$c-install/manifests/overlays/member/member.env"
done
echo "\$ cat member.env   # in a copy of manifests/ per member; here east's"
sed "s|^caBundle=.*|caBundle=<base64 of certs/dev/ca.crt>|" "$work/east-install/manifests/overlays/member/member.env"
if kq kustomize "$work/east-install/manifests/overlays/member" >/dev/null 2>&1; then
  (cd "$work/east-install" && k --context east apply -k manifests/overlays/member)
  show --context west apply -k manifests/overlays/member
  n=$(kq --context west apply -k "$work/west-install/manifests/overlays/member" | wc -l)
else
  echo "(this kubectl's kustomize cannot build the overlay, which needs kustomize 5.1 or later;"
  echo " applying what it renders instead, made from manifests/base with sed)"
  for c in east west; do member_sed "$c" >"$work/$c-member.yaml"; done
  (cd "$work" && k --context east apply -f east-member.yaml)
  show --context west apply -f west-member.yaml
  n=$(kq --context west apply -f "$work/west-member.yaml" | wc -l)
fi
echo "($n objects, as in east, with cluster=west)"
for c in east west; do
  kq --context "$c" get validatingwebhookconfiguration kop-validating-webhook \
    -o jsonpath="$c's validating webhook calls {.webhooks[0].clientConfig.url}{\"\\n\"}"
done
echo "(kubesim has no token controller: it knows kop's token in each member from --token-auth-file)"

# kop's kubeconfig for a member, everything inline (§12.5): the member's
# server and CA, the token of kop's ServiceAccount there; what §12.4 builds
# with kubectl config set-cluster --embed-certs and set-credentials --token.
member_kubeconfig() { # CLUSTER
  cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: $1
  cluster:
    server: ${sim_url[$1]}
    certificate-authority-data: $(base64 -w0 "$(sim_dir "$1")/kubesim-ca.pem")
users:
- name: kop
  user:
    token: ${kop_token[$1]}
contexts:
- name: $1
  context: {cluster: $1, user: kop}
current-context: $1
EOF
}
member_kubeconfig east >"$work/member-east.kubeconfig"

step "starting one kop: local (--kubeconfig), east (--cluster), and members from Secrets (--cluster-secrets)"
"$build/kop" --kubeconfig "$(sim_dir local)/kubeconfig" \
  --cluster "east=$work/member-east.kubeconfig" --cluster-secrets \
  --leader-election-namespace kop-system \
  --cert-dir certs/dev --webhook-host 127.0.0.1 --webhook-port "$wport" \
  --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 \
  >"$work/kop.log" 2>&1 &
kop_pid=$!
pids+=("$kop_pid")
cat <<EOF
\$ kop --kubeconfig local/kubeconfig \\
      --cluster east=member-east.kubeconfig \\
      --cluster-secrets --leader-election-namespace kop-system \\
      --cert-dir certs/dev --webhook-port $wport ...
(member-east.kubeconfig: east's server, CA and kop's token there, built as §12.4 shows)
EOF
wait_for "$work/kop.log" '"msg":"serving webhook"' 100 ||
  die "kop did not start (is port $wport taken? run the demo again)"
mport=$(log_port "$work/kop.log" "serving metrics")
hport=$(log_port "$work/kop.log" "serving health probes")
poll 100 200 curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$hport/readyz" >/dev/null ||
  die "kop not ready"
echo "kop (pid $kop_pid): webhooks :$wport, metrics :$mport, probes :$hport; /readyz 200"
# local's webhook Service kop-system/kop-webhook-service: kop, ready (as the
# EndpointSlice controller writes it; see the default demo).
set_ep="{\"service\":\"kop-system/kop-webhook-service\",\"endpoints\":[{\"address\":\"127.0.0.1:$wport\",\"ready\":true}]}"
curl -sS --fail --cacert "$(sim_dir local)/kubesim-ca.pem" -H "Authorization: Bearer ${admin_token[local]}" \
  -H 'Content-Type: application/json' -X POST --data-binary "$set_ep" \
  "${sim_url[local]}/_kubesim/endpoints" >/dev/null || die "POST /_kubesim/endpoints"
echo "local's webhook Service kop-system/kop-webhook-service -> 127.0.0.1:$wport"
active() { # the endpoints new connections use in local
  curl -sS --cacert "$(sim_dir local)/kubesim-ca.pem" -H "Authorization: Bearer ${admin_token[local]}" \
    "${sim_url[local]}/_kubesim/endpoints" |
    jq -r '.services[] | select(.name == "kop-webhook-service") | [.active[].address] | join(" ")'
}
poll 50 "127.0.0.1:$wport" active >/dev/null || die "the endpoints did not take effect"
for c in local east; do
  wait_log 0 "cluster ready" "$c" 100 || die "kop did not report $c ready"
  kop_log_since 0 "cluster ready" "$c"
done
poll 50 1 ready_of east >/dev/null || die "kop_cluster_ready{cluster=\"east\"} is not 1"
show_ready

step "the seed MyResource (manifests/samples/myresource.yaml) in local and in east"
for c in local east; do
  k --context "$c" apply -f manifests/samples/myresource.yaml
done
for c in local east; do
  poll 100 "True 3" available "$c" example-resource || die "the MyResource in $c did not become Available"
done
for c in local east; do
  echo
  echo "-- $c: what kop made there (in $c's API, with $c's owner uid)"
  show_reconciled "$c" example-resource
done
echo
show_ready

step "east's apiserver stops answering (SIGSTOP): kop reports east not ready, local keeps working"
from=$(log_lines)
echo "\$ kill -STOP ${sim_pid[east]}   # east's kubesim"
kill -STOP "${sim_pid[east]}"
t0=$(date +%s%N)
poll 100 0 ready_of east >/dev/null || die "kop still reports east ready"
wait_log "$from" "cluster not ready" east 50 || die "no \"cluster not ready\" log line for east"
echo "kop noticed in $((($(date +%s%N) - t0) / 1000000)) ms:"
kop_log_since "$from" "cluster not ready" east | head -n 1
show_ready
echo "\$ curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$hport/readyz   # kop itself stays ready"
curl -s -o /dev/null -w '%{http_code}\n' "http://127.0.0.1:$hport/readyz"
echo
echo "-- meanwhile, a new MyResource in local converges as before"
k --context local apply -f "$(seed_as while-east-sleeps 2)"
poll 100 "True 2" available local while-east-sleeps || die "local did not converge while east was frozen"
k --context local get myresource/while-east-sleeps deploy/while-east-sleeps svc/while-east-sleeps

step "east resumes (SIGCONT): ready again, and a change made there converges"
from=$(log_lines)
echo "\$ kill -CONT ${sim_pid[east]}"
kill -CONT "${sim_pid[east]}"
t0=$(date +%s%N)
wait_log "$from" "cluster ready" east 100 || die "kop did not report east ready again"
echo "ready again after $((($(date +%s%N) - t0) / 1000000)) ms:"
kop_log_since "$from" "cluster ready" east
show_ready
k --context east patch myresource example-resource --type merge -p '{"spec":{"replicas":5}}'
poll 100 "True 5" available east example-resource || die "east did not converge after the resume"
k --context east get myresource/example-resource deploy/example-resource

step "west, before kop knows it: its validating webhook (.../clusters/west) refuses MyResources"
k --context west apply -f manifests/samples/myresource.yaml 2>&1 | fold -s -w 100 || true
echo "(kop refuses to admit for a cluster it does not reconcile: nobody would reconcile the object)"

step "west joins through a Secret: an inline kubeconfig labelled kop.io/cluster=west in local's kop-system"
member_kubeconfig west >"$work/member-west.kubeconfig"
echo "\$ cat member-west.kubeconfig   # west's server, CA and kop's token there, all inline (§12.4)"
sed -e 's/\(certificate-authority-data: \).*/\1<base64 of west'"'"'s CA certificate>/' \
  -e 's/\(token: \).*/\1<the token of kop'"'"'s ServiceAccount in west>/' "$work/member-west.kubeconfig"
from=$(log_lines)
(cd "$work" && k --context local -n kop-system create secret generic kop-cluster-west \
  --from-file=kubeconfig=member-west.kubeconfig)
k --context local -n kop-system label secret kop-cluster-west kop.io/cluster=west
wait_log "$from" "member cluster engaged" west 100 || die "kop did not engage west"
kop_log_since "$from" "member cluster engaged" west
wait_log "$from" "cluster ready" west 100 || die "kop did not report west ready"
kop_log_since "$from" "cluster ready" west
poll 50 1 ready_of west >/dev/null || die "kop_cluster_ready{cluster=\"west\"} is not 1"
show_ready
echo
k --context west apply -f manifests/samples/myresource.yaml
poll 100 "True 3" available west example-resource || die "the MyResource in west did not become Available"
show_reconciled west example-resource

step "the Secret is deleted: kop disengages west and writes nothing more there"
from=$(log_lines)
k --context local -n kop-system delete secret kop-cluster-west
wait_log "$from" "member cluster disengaged" west 100 || die "kop did not disengage west"
kop_log_since "$from" "member cluster disengaged" west
poll 50 absent ready_of west >/dev/null || die "kop_cluster_ready{cluster=\"west\"} stayed"
show_ready
echo "(west's series is gone; what kop made in west stays: disengaging deletes nothing)"
echo
echo "-- someone deletes the Service example-resource in local and in west; kop restores local's only"
k --context local delete svc example-resource
k --context west delete svc example-resource
echo "(waiting 5 s)"
sleep 5
k --context local get svc example-resource
k --context west get svc example-resource 2>&1 || true
echo
echo "-- and west's webhook refuses new MyResources again, since kop no longer reconciles west"
k --context west apply -f "$(seed_as after-west-left)" 2>&1 | fold -s -w 100 || true

step "done"
echo "One kop reconciled three clusters, each in its own API: local and east from the start,"
echo "east frozen and resumed without holding up local, and west engaged and disengaged"
echo "by a labelled Secret holding its inline kubeconfig."
if $keep; then
  echo
  echo "Still running (pids ${pids[*]}):  export KUBECONFIG=$KUBECONFIG"
  echo "  kubectl --context local|east|west ...   kop's metrics: http://127.0.0.1:$mport/metrics"
  echo "Logs: $work/kop.log, $work/*/kubesim.log   Stop with: kill ${pids[*]}"
fi
