#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The storage-v2 overlay's RBAC (manifests/overlays/storage-v2/rbac.yaml)
# against the requests kop really makes when it migrates, both ways:
#
#   1. kubesim without, then with --feature StorageVersionMigrator; each
#      time kop --webhook-only serves the conversion webhook (the CRD from
#      manifests/base with the dev CA as caBundle), 150 MyResources are
#      written as v1, the CRD flips to v2 storage (the overlay's patch),
#      kubesim's request statistics are reset, and kop runs with the
#      overlay's flags (--controller-only --leader-elect
#      --storage-version=v2 --storage-migration) until storedVersions is
#      ["v2"];
#   2. kop's requests of both runs (kubesim's /_kubesim/stats?userAgent=kop/)
#      are checked with tests/manifests/rbac.js against the rules bound to
#      kop's ServiceAccount in the rendered overlay: none is denied, and
#      every grant of the two migration roles was used (the base grants
#      are test_rbac.sh's business).
# Prints PASS/FAIL lines and exits non-zero on a failure.
set -euo pipefail

root=${KOP_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${KOP_BUILD_ROOT:-$root/build}
kubesim=$build/tests/kubesim/kubesim
kop=${KOP_BIN:-$build/kop}
checks=$root/tests/manifests
token=rbac-migration-token
n=150

# shellcheck source=tests/scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tools rbac-migration kubectl node npm curl
scratch

k() { kubectl --cache-dir "$work/cache" --kubeconfig "$work/kubeconfig" "$@"; }

npm_checks || die "npm ci in tests/manifests: $npm_error"
if [ ! -x "$kubesim" ] || [ ! -x "$kop" ]; then
  die "kubesim or kop not built ($kubesim, $kop)"
fi
k kustomize "$root/manifests/overlays/storage-v2" >"$work/storage-v2.yaml" 2>"$work/kustomize.log" ||
  die "kubectl kustomize manifests/overlays/storage-v2/"
bash "$root/scripts/gen-certs.sh" "$work/certs" >/dev/null 2>&1 || die "gen-certs.sh"
ca=$(base64 -w0 "$work/certs/ca.crt")
sed "s|^        service:|        caBundle: $ca\n        service:|" "$root/manifests/base/crd.yaml" \
  >"$work/crd.yaml"
for i in $(seq 1 "$n"); do
  printf -- '---\napiVersion: mygroup.example.com/v1\nkind: MyResource\nmetadata:\n  name: m-%03d\n  namespace: default\nspec:\n  replicas: 0\n' "$i"
done >"$work/many.yaml"

"$kop" --webhook-only --cert-dir "$work/certs" --webhook-host 127.0.0.1 --webhook-port 0 \
  --metrics-bind-address 0 --health-probe-bind-address 0 >"$work/webhook.log" 2>&1 &
pids+=($!)
wait_for "$work/webhook.log" '"msg":"serving webhook"' || die "kop --webhook-only did not start"
port=$(grep -o '"msg":"serving webhook"[^}]*' "$work/webhook.log" | grep -o '"port":[0-9]*' |
  head -n1 | cut -d: -f2)

# One migration; its requests by kop in $work/stats-$1.json.
run() { # NAME [KUBESIM FLAGS...]
  local name=$1
  shift
  "$kubesim" --listen 127.0.0.1:0 --kubeconfig-out "$work/kubeconfig" --token "$token" \
    --service "kop-system/kop-webhook-service=127.0.0.1:$port" "$@" >"$work/kubesim-$name.log" 2>&1 &
  local sim_pid=$!
  pids+=("$sim_pid")
  wait_for "$work/kubesim-$name.log" '^https://' || die "$name: kubesim did not start"
  local url
  url=$(head -n 1 "$work/kubesim-$name.log")
  grep -o 'certificate-authority-data: .*' "$work/kubeconfig" | cut -d' ' -f2 | base64 -d \
    >"$work/ca.pem"
  sim() { curl -sS --fail --cacert "$work/ca.pem" -H "Authorization: Bearer $token" "$@"; }
  k apply -f "$root/manifests/base/namespace.yaml" -f "$work/crd.yaml" >"$work/apply.log" 2>&1 ||
    die "$name: kubectl apply of the namespace and CRD"
  k apply -f "$work/many.yaml" >>"$work/apply.log" 2>&1 || die "$name: $n MyResources"
  k patch crd myresources.mygroup.example.com --type=json -p \
    '[{"op":"replace","path":"/spec/versions/0/storage","value":false},{"op":"replace","path":"/spec/versions/1/storage","value":true}]' \
    >>"$work/apply.log" 2>&1 || die "$name: the storage flip"
  sim -X DELETE "$url/_kubesim/stats" >/dev/null || die "$name: reset kubesim's stats"

  "$kop" --kubeconfig "$work/kubeconfig" --controller-only --leader-elect \
    --leader-election-namespace kop-system --leader-election-retry-period 500ms \
    --storage-version=v2 --storage-migration --kube-api-qps 200 --kube-api-burst 200 \
    --metrics-bind-address 0 --health-probe-bind-address 0 >"$work/kop-$name.log" 2>&1 &
  local kop_pid=$!
  pids+=("$kop_pid")
  local sv=
  for _ in $(seq 300); do
    sv=$(k get crd myresources.mygroup.example.com -o jsonpath='{.status.storedVersions}' 2>/dev/null || true)
    [ "$sv" = '["v2"]' ] && break
    sleep 0.2
  done
  if [ "$sv" = '["v2"]' ]; then
    pass "$name: kop migrated the objects and pruned storedVersions"
  else
    die "$name: storedVersions still $sv"
  fi
  kill -TERM "$kop_pid"
  wait "$kop_pid" 2>/dev/null || true
  sim "$url/_kubesim/stats?userAgent=kop%2F" >"$work/stats-$name.json" ||
    die "$name: GET /_kubesim/stats"
  kill -TERM "$sim_pid"
  wait "$sim_pid" 2>/dev/null || true
}

run self
run api --feature StorageVersionMigrator
if grep -q '"msg":"created a StorageVersionMigration"' "$work/kop-api.log" &&
  ! grep -q '"msg":"created a StorageVersionMigration"' "$work/kop-self.log"; then
  pass "kop used the StorageVersionMigration API only where it is served"
else
  fail "StorageVersionMigration use: self $(grep -c 'created a StorageVersionMigration' \
    "$work/kop-self.log"), api $(grep -c 'created a StorageVersionMigration' "$work/kop-api.log")"
fi

# ---- 2. both runs' requests against the overlay's RBAC -------------------------------
rc=0
NODE_PATH=$checks/node_modules node -e '
  const fs = require("fs");
  const YAML = require("yaml");
  const {checkRbac} = require(process.argv[1]);
  const reqs = [process.argv[2], process.argv[3]].flatMap(
      (f) => JSON.parse(fs.readFileSync(f, "utf8")).requests);
  const docs = YAML.parseAllDocuments(fs.readFileSync(process.argv[4], "utf8")).map((d) => d.toJS())
      .filter(Boolean);
  const {denied, unused} = checkRbac(reqs, docs, {serviceAccount: "kop", namespace: "kop-system"});
  const seen = new Map();
  for (const r of reqs) {
    const k = `${r.verb} ${r.group || "core"}/${r.resource}${r.subresource ? "/" + r.subresource : ""}`;
    seen.set(k, (seen.get(k) || 0) + 1);
  }
  for (const [k, n] of [...seen].sort()) console.log(`     ${String(n).padStart(5)}  ${k}`);
  const line = (ok, name, why) => console.log(ok ? `PASS ${name}` : `FAIL ${name}: ${why}`);
  line(reqs.length > 100, "kubesim recorded kop requests", `${reqs.length}`);
  line(denied.length === 0, "every request of the migration is allowed by the overlay",
       JSON.stringify(denied.slice(0, 5)));
  // The migration roles: each of their grants was used.
  const mine = /customresourcedefinitions|storageversionmigrations|configmaps|^update mygroup\.example\.com\/myresources$/;
  const idle = unused.filter((g) => mine.test(g));
  line(idle.length === 0, "every grant of the migration roles was used", JSON.stringify(idle));
' "$checks/rbac.js" "$work/stats-self.json" "$work/stats-api.json" "$work/storage-v2.yaml" \
  >"$work/rbac.out" 2>&1 || rc=$?
count_lines "$work/rbac.out"
if [ "$rc" -ne 0 ] || ! grep -q '^PASS every grant' "$work/rbac.out"; then
  fail "the RBAC check did not run to its end (exit $rc)"
fi
finish
