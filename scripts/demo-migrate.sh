#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The storage flip from v1 to v2, step by step (docs/operations.md §10.1 "Storage version
# migration"), against kubesim:
#
#   - kop runs as installed by default (v1 storage); 200 MyResources are
#     written, one of them as v2 with data v1 cannot hold (paused, two
#     ports): stored as v1 with the v2-extras annotation;
#   - the CRD makes v2 its storage version (the patch of
#     manifests/overlays/storage-v2/): status.storedVersions becomes
#     ["v1","v2"], nothing is rewritten, and v1 cannot leave the CRD yet;
#   - kop restarts with the overlay's flags (--storage-version=v2
#     --storage-migration): it rewrites every object stored as v1 (or, with
#     --with-api, creates a StorageVersionMigration that kubesim runs), then
#     removes v1 from storedVersions; its log lines, Events and metrics;
#   - every object is now stored as v2, the v2-only data is intact, and v1
#     may leave spec.versions.
#
# Where each object is stored comes from kubesim's /_kubesim/storage (a real
# apiserver does not say; etcdctl would).
#
#   scripts/demo-migrate.sh             kop rewrites the objects itself
#   scripts/demo-migrate.sh --with-api  storagemigration.k8s.io/v1beta1 served
#   scripts/demo-migrate.sh --keep      leave kubesim and kop running
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
keep=false
with_api=false
for a in "$@"; do
  case $a in
  --keep) keep=true ;;
  --with-api) with_api=true ;;
  *) echo "usage: scripts/demo-migrate.sh [--with-api] [--keep]" >&2; exit 2 ;;
  esac
done

# shellcheck source=scripts/lib/demo.sh
. scripts/lib/demo.sh
build=${KOP_DEMO_BUILD_DIR:-build}
n=${KOP_DEMO_OBJECTS:-200}

step "building kop and kubesim"
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null
ninja -C "$build" kop tests/kubesim/kubesim >/dev/null
scripts/gen-certs.sh certs/dev >/dev/null

k() { # kubectl, showing the command first
  echo "\$ kubectl $*"
  kubectl --cache-dir "$work/cache" "$@"
}
kq() { kubectl --cache-dir "$work/cache" "$@"; }
sim() { # METHOD PATH [BODY]
  curl -sS --fail --cacert "$work/kubesim-ca.pem" -H "Authorization: Bearer $token" \
    -H 'Content-Type: application/json' -X "$1" ${3:+--data-binary "$3"} "$url$2"
}
stored() { # how many objects are stored in each version
  local doc v1 v2
  doc=$(sim GET "/_kubesim/storage?resource=myresources.mygroup.example.com")
  v1=$({ grep -o '"version":"v1"' <<<"$doc" || true; } | wc -l)
  v2=$({ grep -o '"version":"v2"' <<<"$doc" || true; } | wc -l)
  echo "stored as v1: $v1, stored as v2: $v2   (kubesim's /_kubesim/storage)"
}
crd_v2_only() { # the CRD as it is now, without v1, into crd-v2-only.json
  kq get crd myresources.mygroup.example.com -o json |
    node -e 'let s="";process.stdin.on("data",(d)=>{s+=d}).on("end",()=>{const c=JSON.parse(s);
      c.spec.versions=c.spec.versions.filter((v)=>v.name!=="v1");console.log(JSON.stringify(c))})' \
      >"$work/crd-v2-only.json"
}
stored_versions() {
  kq get crd myresources.mygroup.example.com -o jsonpath='{.status.storedVersions}'
}

step "kubesim$($with_api && echo ' with --feature StorageVersionMigrator')"
token=demo-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
features=()
$with_api && features=(--feature StorageVersionMigrator)
# shellcheck source=scripts/lib/kubesim.sh
. scripts/lib/kubesim.sh
kubesim_start "$build/tests/kubesim/kubesim" "$work" "$token" "${features[@]}" ||
  die "kubesim did not start"
pids+=("$kubesim_pid")
url=$kubesim_url
export KUBECONFIG=$work/kubeconfig
ca=$(base64 -w0 certs/dev/ca.crt)
sed "s|^        service:|        caBundle: $ca\n        service:|" manifests/base/crd.yaml >"$work/crd.yaml"
k apply -f manifests/base/namespace.yaml -f "$work/crd.yaml"

start_kop() { # NAME FLAGS...
  local name=$1
  shift
  POD_NAME=$name "$build/kop" --kubeconfig "$work/kubeconfig" --cert-dir certs/dev \
    --webhook-host 127.0.0.1 --webhook-port 0 \
    --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 0 \
    --leader-elect --leader-election-namespace kop-system \
    --leader-election-lease-duration 4s --leader-election-renew-deadline 3s \
    --leader-election-retry-period 500ms --kube-api-qps 50 --kube-api-burst 50 \
    "$@" >"$work/$name.log" 2>&1 &
  pids+=($!)
  kop_pid=$!
  wait_for "$work/$name.log" '"msg":"serving webhook"' 100 || die "$name did not start"
  local port
  port=$(log_port "$work/$name.log" "serving webhook")
  mport=$(log_port "$work/$name.log" "serving metrics")
  # The webhook Service goes to this kop (as its ready endpoint would).
  sim POST /_kubesim/services \
    "{\"namespace\":\"kop-system\",\"name\":\"kop-webhook-service\",\"target\":\"127.0.0.1:$port\"}" \
    >/dev/null || die "POST /_kubesim/services"
}

step "kop as installed by default (v1 storage); $n MyResources written as v1, one as v2"
start_kop kop-1
for i in $(seq 1 "$n"); do
  printf -- '---\napiVersion: mygroup.example.com/v1\nkind: MyResource\nmetadata:\n  name: app-%03d\n  namespace: default\nspec:\n  replicas: %d\n  image: nginx:1.25\n' "$i" $((i % 4))
done >"$work/many.yaml"
kq apply -f "$work/many.yaml" >/dev/null
echo "(applied $n objects from $work/many.yaml)"
cat >"$work/rich.yaml" <<'YAML'
apiVersion: mygroup.example.com/v2
kind: MyResource
metadata:
  name: rich
  namespace: default
spec:
  paused: true
  image: {repository: nginx, tag: "1.25"}
  ports:
    - {name: web, port: 8080}
    - {name: metrics, port: 9090}
YAML
cat "$work/rich.yaml"
k apply -f "$work/rich.yaml"
stored
echo "storedVersions: $(stored_versions)"
echo "as stored (v1), the v2-only data waits in an annotation:"
kq get myresources.v1.mygroup.example.com rich -o jsonpath='  {.metadata.annotations.mygroup\.example\.com/v2-extras}{"\n"}'

step "v2 becomes the storage version (the CRD patch of manifests/overlays/storage-v2)"
k patch crd myresources.mygroup.example.com --type=json -p \
  '[{"op":"replace","path":"/spec/versions/0/storage","value":false},{"op":"replace","path":"/spec/versions/1/storage","value":true}]'
echo "storedVersions: $(stored_versions)   (v2 added; v1 stays while objects may be stored as v1)"
stored
echo "the flip rewrote nothing (only writes since, such as status updates, store v2). Dropping v1 from the CRD is refused:"
crd_v2_only
k replace -f "$work/crd-v2-only.json" 2>&1 | fold -s -w 100 || true

step "kop restarts with the overlay's flags: --storage-version=v2 --storage-migration"
kill -TERM "$kop_pid"
wait "$kop_pid" 2>/dev/null || true
start_kop kop-2 --storage-version=v2 --storage-migration
for _ in $(seq 600); do
  [ "$(stored_versions)" = '["v2"]' ] && break
  sleep 0.1
done
[ "$(stored_versions)" = '["v2"]' ] || die "storedVersions still $(stored_versions)"
echo "kop's log (logger \"migrator\"):"
grep '"logger":"migrator"' "$work/kop-2.log" | sed 's/^{"ts":"[^"]*",/  {/' | cut -c1-220

step "afterwards"
echo "storedVersions: $(stored_versions)"
stored
if $with_api; then
  k get storageversionmigrations.storagemigration.k8s.io \
    -o jsonpath='{range .items[*]}{.metadata.name}: {range .status.conditions[*]}{.type}={.status} {end}{"\n"}{end}'
fi
echo "Events on the CRD:"
for _ in $(seq 50); do
  kq get events -n default --field-selector involvedObject.kind=CustomResourceDefinition \
    -o jsonpath='{range .items[*]}{.reason}{end}' 2>/dev/null | grep -q Succeeded && break
  sleep 0.1
done
kq get events -n default --field-selector involvedObject.kind=CustomResourceDefinition \
  -o jsonpath='{range .items[*]}  {.type} {.reason}: {.message}{"\n"}{end}'
echo "kop's metrics:"
curl -s "http://127.0.0.1:$mport/metrics" | grep '^kop_storage_migration' | sed 's/^/  /'
echo "the v2-only data is intact, now stored in v2 itself:"
k get myresources.v2.mygroup.example.com rich -o jsonpath='  paused={.spec.paused} ports={.spec.ports}{"\n"}'
echo "and v1 may now leave the CRD (a later release would):"
crd_v2_only
k replace -f "$work/crd-v2-only.json"

step "done"
if $keep; then
  echo "Still running (pids ${pids[*]}):  export KUBECONFIG=$work/kubeconfig"
  echo "Logs: $work/*.log   Stop with: kill ${pids[*]}"
fi
