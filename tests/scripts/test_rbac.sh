#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# kop's default RBAC (manifests/, rendered with `kubectl kustomize`) covers
# every request the full operator makes, and grants nothing more.
#
#   1. kubesim starts; kubectl applies the CRD and the kop-system
#      namespace; kubesim's request statistics are reset;
#   2. the full operator runs (webhooks + reconciler + --leader-elect in
#      kop-system + events) through a scenario driven with curl: the seed
#      MyResource created and Available, scaled and given a new port, its
#      Service deleted by someone and restored, a name taken by a foreign
#      Deployment and Service (kop reads them after AlreadyExists), paused,
#      deleted (garbage collection), and SIGTERM (the Lease released);
#      kop runs as its ServiceAccount (a token of kubesim's
#      --token-auth-file for system:serviceaccount:kop-system:kop) with the
#      rendered RBAC applied, and kubesim authorizes every request by RBAC
#      as the apiserver does: a refused request is a 403 kop logs, and
#      fails the test;
#   3. kubesim's /_kubesim/stats?userAgent=kop/ lists every API request
#      it served to a client whose User-Agent starts with "kop/" (kop's
#      own; the test's curl and kubectl requests are left out);
#      tests/manifests/rbac.js checks them against the rules bound to kop's
#      ServiceAccount: a request no rule allows fails, and so does a grant
#      kop never used (except the documented exemption: update on
#      myresources/finalizers, for OwnerReferencesPermissionEnforcement);
#   4. people: the manifests' aggregated ClusterRoles put MyResources into
#      the cluster's edit and view, so a user bound to edit in a namespace
#      (a RoleBinding) creates, patches and deletes them there and nowhere
#      else and never writes their status, and one bound to view reads
#      them and their status and writes nothing.
#
# The webhook configurations are not installed: the webhooks are called by
# the apiserver and make no API requests, so they add nothing to check.
# Prints PASS/FAIL lines and exits non-zero on a failure.
set -euo pipefail

root=${KOP_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${KOP_BUILD_ROOT:-$root/build}
kubesim=$build/tests/kubesim/kubesim
kop=${KOP_BIN:-$build/kop}
checks=$root/tests/manifests
token=rbac-test-token
ns=default

# shellcheck source=tests/scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tools rbac kubectl node npm curl
scratch

k() { kubectl --cache-dir "$work/cache" "$@"; }

# ---- npm packages for rbac.js (as test_manifests.sh installs them) -------------
npm_checks || die "npm ci in tests/manifests: $npm_error"
if [ ! -x "$kubesim" ] || [ ! -x "$kop" ]; then
  die "kubesim or kop not built ($kubesim, $kop)"
fi

# ---- 1. kubesim, CRD, namespace --------------------------------------------------
k kustomize "$root/manifests" >"$work/default.yaml" 2>"$work/kustomize.log" ||
  die "kubectl kustomize manifests/"
sa_token=rbac-test-kop-sa-token
printf '%s,system:serviceaccount:kop-system:kop,uid-kop-sa,"system:serviceaccounts,system:serviceaccounts:kop-system"\n' \
  "$sa_token" >"$work/tokens.csv"
# Two people for part 4: bound to the built-in edit and view in team-a.
printf 'rbac-test-dev-token,dev,uid-dev\nrbac-test-auditor-token,auditor,uid-auditor\n' >>"$work/tokens.csv"
"$kubesim" --listen 127.0.0.1:0 --kubeconfig-out "$work/kubeconfig" --token "$token" \
  --token-auth-file "$work/tokens.csv" --authorization-mode RBAC \
  --deployment-ready-delay 100ms >"$work/kubesim.log" 2>&1 &
pids+=($!)
wait_for "$work/kubesim.log" '^https://' || die "kubesim did not start"
url=$(head -n 1 "$work/kubesim.log")
export KUBECONFIG=$work/kubeconfig
k apply -f "$root/manifests/base/crd.yaml" -f "$root/manifests/base/namespace.yaml" \
  >"$work/apply.log" 2>&1 || die "kubectl apply of the CRD and namespace"
# The rendered RBAC (and ServiceAccount), as the install applies it.
node -e '
  const Y = require(process.argv[1]); const fs = require("fs");
  const kinds = new Set(["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]);
  const docs = Y.parseAllDocuments(fs.readFileSync(process.argv[2], "utf8")).map((d) => d.toJSON())
    .filter((o) => o && kinds.has(o.kind));
  process.stdout.write(docs.map((o) => Y.stringify(o)).join("---\n"));
' "$checks/node_modules/yaml" "$work/default.yaml" >"$work/rbac.yaml" || die "the RBAC of the manifests"
k apply -f "$work/rbac.yaml" >>"$work/apply.log" 2>&1 || die "kubectl apply of the RBAC: $(tail -3 "$work/apply.log")"
sed "s/token: $token\$/token: $sa_token/" "$work/kubeconfig" >"$work/kop-kubeconfig"
grep -q "token: $sa_token\$" "$work/kop-kubeconfig" || die "no token in kubesim's kubeconfig"

# The test's own API requests go through as() (api() as the admin), with a
# User-Agent of its own (kubesim records each request's User-Agent).
as() { # TOKEN METHOD PATH [BODY] -> the HTTP code on stdout, the body in $work/body
  local ctype=application/json
  [ "$2" = PATCH ] && ctype=application/merge-patch+json
  curl -sS --cacert "$work/ca.pem" -H "Authorization: Bearer $1" -H "Content-Type: $ctype" \
    -A "test-rbac/1" -X "$2" ${4:+--data-binary "$4"} -o "$work/body" -w '%{http_code}' "$url$3" ||
    true
}
api() { # METHOD PATH [BODY] -> body on stdout, HTTP code in $work/code (as the admin)
  as "$token" "$@" >"$work/code"
  cat "$work/body"
}
# kubesim's CA, from the kubeconfig it wrote.
grep -o 'certificate-authority-data: .*' "$work/kubeconfig" | cut -d' ' -f2 | base64 -d >"$work/ca.pem" ||
  die "no CA in kubesim's kubeconfig"
curl -sS --cacert "$work/ca.pem" -H "Authorization: Bearer $token" -X DELETE \
  "$url/_kubesim/stats" >/dev/null || die "reset kubesim's stats"

# Poll: until CHECK (a node expression on the JSON body "o") holds for GET PATH.
# CHECK may use o === null for a 404.
until_json() { # timeout_s PATH CHECK
  local end=$((SECONDS + $1)) body
  while [ $SECONDS -lt "$end" ]; do
    body=$(api GET "$2")
    [ "$(cat "$work/code")" = 200 ] || body=null
    if printf '%s' "$body" | node -e '
      const o = JSON.parse(require("fs").readFileSync(0, "utf8"));
      const cond = (t) => ((o && o.status && o.status.conditions) || []).find((c) => c.type === t) || {};
      process.exit((() => '"$3"')() ? 0 : 1);' 2>/dev/null; then
      return 0
    fi
    sleep 0.2
  done
  return 1
}

myr=/apis/mygroup.example.com/v1/namespaces/$ns/myresources
dep=/apis/apps/v1/namespaces/$ns/deployments
svc=/api/v1/namespaces/$ns/services
lease=/apis/coordination.k8s.io/v1/namespaces/kop-system/leases/kop-leader

# ---- 2. the full operator through a scenario -------------------------------------
bash "$root/scripts/gen-certs.sh" "$work/certs" >/dev/null 2>&1 || die "gen-certs.sh"
"$kop" --kubeconfig "$work/kop-kubeconfig" --cert-dir "$work/certs" \
  --webhook-host 127.0.0.1 --webhook-port 0 \
  --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 \
  --leader-elect --leader-election-namespace kop-system \
  --leader-election-retry-period 500ms >"$work/kop.log" 2>&1 &
kop_pid=$!
pids+=("$kop_pid")
wait_for "$work/kop.log" '"msg":"became leader, reconciling"' || die "kop did not lead"
pass "kop (webhooks, reconciler, leader election) runs and leads"

seed=$(node -e 'const Y = require(process.argv[1]); const fs = require("fs");
  process.stdout.write(JSON.stringify(Y.parse(fs.readFileSync(process.argv[2], "utf8"))));' \
  "$checks/node_modules/yaml" "$root/manifests/samples/myresource.yaml")
api POST "$myr" "$seed" >/dev/null
[ "$(cat "$work/code")" = 201 ] || die "create the seed MyResource: $(cat "$work/body")"
if until_json 20 "$myr/example-resource" \
  'o && o.status && o.status.readyReplicas === 3 && cond("Available").status === "True"'; then
  pass "seed MyResource Available with 3 ready replicas"
else
  die "seed MyResource not Available"
fi

# A new port changes both children: both are patched.
api PATCH "$myr/example-resource" '{"spec":{"replicas":4,"port":8080}}' >/dev/null
if until_json 20 "$dep/example-resource" 'o && o.spec.replicas === 4' &&
  until_json 20 "$svc/example-resource" 'o && o.spec.ports[0].port === 8080'; then
  pass "update: the Deployment and the Service follow the spec"
else
  fail "update: the children did not follow"
fi

old_uid=$(api GET "$svc/example-resource" | node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(0,"utf8")).metadata.uid)')
api DELETE "$svc/example-resource" >/dev/null
if until_json 20 "$svc/example-resource" "o && o.metadata.uid !== '$old_uid'"; then
  pass "a deleted Service is restored"
else
  fail "the deleted Service was not restored"
fi

# A name already taken by objects kop does not control (no managed-by label,
# so not in kop's cache): create -> AlreadyExists -> kop reads them.
api POST "$dep" '{"metadata":{"name":"taken"},"spec":{"replicas":1,"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"busybox:1"}]}}}}' >/dev/null
api POST "$svc" '{"metadata":{"name":"taken"},"spec":{"ports":[{"port":80}]}}' >/dev/null
api POST "$myr" '{"apiVersion":"mygroup.example.com/v1","kind":"MyResource","metadata":{"name":"taken"},"spec":{}}' >/dev/null
if until_json 20 "$myr/taken" 'cond("Degraded").reason === "OwnershipConflict"'; then
  pass "a foreign Deployment/Service of the same name is left alone (OwnershipConflict)"
else
  fail "no OwnershipConflict for a foreign child"
fi

api PATCH "$myr/example-resource" \
  '{"metadata":{"annotations":{"mygroup.example.com/v2-extras":"{\"paused\":true}"}}}' >/dev/null
if until_json 20 "$myr/example-resource" 'cond("Paused").status === "True"'; then
  pass "paused: condition Paused=True"
else
  fail "paused: no Paused condition"
fi

api DELETE "$myr/example-resource" >/dev/null
if until_json 20 "$dep/example-resource" 'o === null'; then
  pass "delete: the children are garbage-collected"
else
  fail "delete: the Deployment is still there"
fi
# Events are sent by their own thread: wait until kop has created and
# patched (a repeated event) some before stopping it, not a fixed time.
until_json 30 "/_kubesim/stats?userAgent=kop%2F" \
  'o && o.writes && o.writes.events && o.writes.events.create > 0 && o.writes.events.patch > 0' ||
  echo "     (kop sent no Event create and patch yet)"

kill -TERM "$kop_pid"
rc=0
wait "$kop_pid" || rc=$?
if [ "$rc" -eq 0 ] && grep -q '"msg":"released lease"' "$work/kop.log"; then
  pass "SIGTERM: kop exits 0 and releases the Lease"
else
  fail "SIGTERM: exit $rc; $(grep -c 'released lease' "$work/kop.log") release lines"
fi
if until_json 5 "$lease" 'o && o.spec.holderIdentity === ""'; then
  pass "the Lease is free after the shutdown"
else
  fail "the Lease is still held after the shutdown"
fi
if grep -q -i 'forbidden' "$work/kop.log"; then
  fail "kubesim refused kop requests its RBAC does not allow: $(grep -i -m 3 'forbidden' "$work/kop.log")"
else
  pass "no request of kop's was refused by the RBAC"
fi

# ---- 3. kop's requests against the RBAC ------------------------------------------
curl -sS --cacert "$work/ca.pem" -H "Authorization: Bearer $token" "$url/_kubesim/stats" \
  >"$work/stats-all.json" || die "GET /_kubesim/stats"
curl -sS --cacert "$work/ca.pem" -H "Authorization: Bearer $token" \
  "$url/_kubesim/stats?userAgent=kop%2F" >"$work/stats.json" || die "GET /_kubesim/stats?userAgent=kop/"
# Every request is either kop's or the test's own (curl, kubectl): kop
# sent no request under another User-Agent.
node -e '
  const fs = require("fs");
  const all = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
  const kop = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
  const agents = new Map();
  for (const r of all.requests) {
    const a = (r.userAgent || "(none)").split(" ")[0];
    agents.set(a, (agents.get(a) || 0) + 1);
  }
  const mine = all.requests.filter((r) => (r.userAgent || "").startsWith("test-rbac/")).length;
  const other = all.requests.length - mine - kop.requests.length;
  console.log(all.requests.length + " requests, " + mine + " by the test, " +
              kop.requests.length + " by kop (" +
              [...agents].map(([a, n]) => a + " " + n).join(", ") + ")");
  process.exit(other === 0 && kop.total === kop.requests.length ? 0 : 1);
' "$work/stats-all.json" "$work/stats.json" >"$work/split.log" 2>&1 ||
  die "requests by an unknown client: $(cat "$work/split.log")"
echo "     $(cat "$work/split.log")"
if node -e 'process.exit(JSON.parse(require("fs").readFileSync(process.argv[1],"utf8")).requests.length > 20 ? 0 : 1)' \
  "$work/stats.json"; then
  pass "kubesim recorded kop's requests"
else
  die "too few requests recorded for kop"
fi
# Summary of what kop asked for (verb group/resource[/sub] [namespace]).
node -e '
  const s = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const seen = new Map();
  for (const r of s.requests) {
    const k = `${r.verb} ${r.group || "core"}/${r.resource}${r.subresource ? "/" + r.subresource : ""}` +
              `${r.namespace ? " in " + r.namespace : ""}`;
    seen.set(k, (seen.get(k) || 0) + 1);
  }
  for (const [k, n] of [...seen].sort()) console.log(`     ${String(n).padStart(5)}  ${k}`);
' "$work/stats.json"

rc=0
node "$checks/rbac.js" "$work/stats.json" "$work/default.yaml" >"$work/rbac.out" 2>&1 || rc=$?
passed=$((passed + $(grep -c '^PASS ' "$work/rbac.out" || true)))
failed=$((failed + $(grep -c '^FAIL ' "$work/rbac.out" || true)))
cat "$work/rbac.out"
if [ "$rc" -ne 0 ] && ! grep -q '^FAIL ' "$work/rbac.out"; then
  fail "rbac.js: exit $rc"
fi

# ---- 4. people: MyResources through the cluster's own edit and view ---------------
# The manifests' aggregated ClusterRoles (rbac-users.yaml, applied with the
# rest of the RBAC above) put MyResources into edit and view: a RoleBinding
# to edit lets a team write them in its namespace, one to view read them.
{
  k create namespace team-a
  k create rolebinding dev-edit --clusterrole=edit --user=dev -n team-a
  k create rolebinding auditor-view --clusterrole=view --user=auditor -n team-a
} >>"$work/apply.log" 2>&1 || die "team-a and its bindings: $(tail -3 "$work/apply.log")"
dev=rbac-test-dev-token auditor=rbac-test-auditor-token
team=/apis/mygroup.example.com/v1/namespaces/team-a/myresources
mr='{"apiVersion":"mygroup.example.com/v1","kind":"MyResource","metadata":{"name":"team-web"},"spec":{"replicas":1,"image":"nginx:1.25","port":8080}}'
mr_default=${mr/team-web/dev-elsewhere}
c1=$(as "$dev" POST "$team" "$mr") c2=$(as "$dev" PATCH "$team/team-web" '{"spec":{"replicas":2}}')
c3=$(as "$dev" POST "/apis/mygroup.example.com/v1/namespaces/default/myresources" "$mr_default")
c4=$(as "$dev" PATCH "$team/team-web/status" '{"status":{"readyReplicas":9}}')
if [ "$c1" = 201 ] && [ "$c2" = 200 ] && [ "$c3" = 403 ] && [ "$c4" = 403 ]; then
  pass "edit in team-a: MyResources created and patched there, not elsewhere, status not written"
else
  fail "edit in team-a: create $c1 (201), patch $c2 (200), other namespace $c3 (403), status $c4 (403)"
fi
c1=$(as "$auditor" GET "$team") c2=$(as "$auditor" GET "$team/team-web/status")
c3=$(as "$auditor" POST "$team" "${mr/team-web/auditor-web}") c4=$(as "$auditor" DELETE "$team/team-web")
if [ "$c1" = 200 ] && [ "$c2" = 200 ] && [ "$c3" = 403 ] && [ "$c4" = 403 ]; then
  pass "view in team-a: MyResources and their status read, nothing written"
else
  fail "view in team-a: list $c1 (200), status $c2 (200), create $c3 (403), delete $c4 (403)"
fi
c1=$(as "$dev" DELETE "$team/team-web")
if [ "$c1" = 200 ]; then
  pass "edit in team-a: the MyResource deleted"
else
  fail "edit in team-a: delete $c1 (200)"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
