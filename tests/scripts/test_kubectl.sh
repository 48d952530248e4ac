#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# kubectl against kubesim, with kop --webhook-only serving the conversion
# and validating webhooks: apply the MyResource CRD (caBundle filled with
# the dev CA, as cainjector would) and the webhook configuration, apply the
# seed MyResource in v1, read it back as v2 (conversion webhook), see a
# watch event, and delete it. Exits non-zero on any failure; always stops
# what it started.
set -euo pipefail
# kop stops at once on SIGTERM (the shutdown delay has its own suite)
export KOP_SHUTDOWN_DELAY=${KOP_SHUTDOWN_DELAY:-0}

root=${KOP_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${KOP_BUILD_ROOT:-$root/build}
kubesim=$build/tests/kubesim/kubesim
kop=${KOP_BIN:-$build/kop}

if ! command -v kubectl >/dev/null; then
  echo "kubectl: not installed, skipping"
  exit 77
fi

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null || true
  done
  for p in "${pids[@]}"; do
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "kubectl: FAIL: $*"
  for f in "$work"/*.log; do
    [ -f "$f" ] && { echo "--- $f"; tail -n 20 "$f"; }
  done
  exit 1
}

wait_for() { # file pattern
  for _ in $(seq 300); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# Dev certificates for the webhook server.
bash "$root/scripts/gen-certs.sh" "$work/certs" >/dev/null 2>&1 || fail "gen-certs.sh"

"$kop" --webhook-only --cert-dir "$work/certs" --webhook-port 0 \
  --metrics-bind-address 0 --health-probe-bind-address 0 >"$work/kop.log" 2>&1 &
pids+=($!)
wait_for "$work/kop.log" '"msg":"serving webhook"' || fail "kop did not start its webhook"
port=$(grep -o '"msg":"serving webhook"[^}]*' "$work/kop.log" | grep -o '"port":[0-9]*' | head -n1 | cut -d: -f2)
[ -n "$port" ] || fail "no webhook port in kop's log"

"$kubesim" --listen 127.0.0.1:0 --kubeconfig-out "$work/kubeconfig" \
  --service "kop-system/kop-webhook-service=127.0.0.1:$port" >"$work/kubesim.log" 2>&1 &
pids+=($!)
wait_for "$work/kubesim.log" '^https://' || fail "kubesim did not start"

export KUBECONFIG=$work/kubeconfig
k() { kubectl --cache-dir "$work/cache" "$@"; }

# The CRD and webhook configuration with the dev CA injected.
ca=$(base64 -w0 "$work/certs/ca.crt")
crd=$root/manifests/base/crd.yaml
[ -f "$crd" ] || fail "missing $crd"
sed "s|^        service:|        caBundle: $ca\n        service:|" "$crd" >"$work/crd.yaml"
k apply -f "$work/crd.yaml" >"$work/apply.log" 2>&1 || fail "apply crd"
if [ -f "$root/manifests/base/webhook.yaml" ]; then
  sed "s|^      service:|      caBundle: $ca\n      service:|" "$root/manifests/base/webhook.yaml" >"$work/webhook.yaml"
  k apply -f "$work/webhook.yaml" >>"$work/apply.log" 2>&1 || fail "apply webhook configuration"
fi

cat >"$work/seed.yaml" <<'EOF'
apiVersion: mygroup.example.com/v1
kind: MyResource
metadata:
  name: example-resource
spec:
  replicas: 3
EOF
k apply -f "$work/seed.yaml" >>"$work/apply.log" 2>&1 || fail "apply seed MyResource"

# v2 through the conversion webhook.
k get myresources.v2.mygroup.example.com example-resource -o json >"$work/v2.json" 2>"$work/get.log" ||
  fail "get v2"
grep -q '"apiVersion": "mygroup.example.com/v2"' "$work/v2.json" || fail "not v2: $(cat "$work/v2.json")"
grep -q '"repository": "nginx"' "$work/v2.json" || fail "v2 image not split: $(cat "$work/v2.json")"
grep -q '"port": 80' "$work/v2.json" || fail "v2 ports missing"
grep -q '"replicas": 3' "$work/v2.json" || fail "replicas lost"

# What only the validating webhook checks is denied by it: a name that is
# a DNS-1123 subdomain (the apiserver's own rule) but not a DNS-1035
# label. Value rules the CRD carries are refused before any webhook
# (tests/scripts/test_failopen.sh).
cat >"$work/bad.yaml" <<'EOF'
apiVersion: mygroup.example.com/v2
kind: MyResource
metadata:
  name: not.a.label
spec:
  replicas: 3
EOF
if k apply -f "$work/bad.yaml" >"$work/deny.log" 2>&1; then
  fail "invalid MyResource was admitted"
fi
grep -q 'denied the request' "$work/deny.log" || fail "no denial message: $(cat "$work/deny.log")"
grep -q 'metadata.name: Invalid value: "not.a.label": a DNS-1035 label' "$work/deny.log" ||
  fail "the webhook's message: $(cat "$work/deny.log")"

# A watch sees a change.
timeout 120 kubectl --cache-dir "$work/cache" get myresources.v1.mygroup.example.com -w \
  --output-watch-events >"$work/watch.log" 2>&1 &
watch_pid=$!
pids+=($watch_pid)
wait_for "$work/watch.log" 'example-resource' || fail "watch printed nothing"
k patch myresources.v1.mygroup.example.com example-resource --type merge \
  -p '{"spec":{"replicas":4}}' >>"$work/apply.log" 2>&1 || fail "patch"
wait_for "$work/watch.log" 'MODIFIED' || fail "watch saw no MODIFIED event: $(cat "$work/watch.log")"
kill "$watch_pid" 2>/dev/null || true

# Patches of the wrong shape get the apiserver's answers (jsonPatcher.applyJSPatch
# in apiserver/pkg/endpoints/handlers/patch.go, fieldValidation Strict from kubectl).
bad_patch() { # bad_patch TYPE PATCH EXPECTED-MESSAGE
  if k patch myresources.v1.mygroup.example.com example-resource --type "$1" -p "$2" \
    >"$work/patch.log" 2>&1; then
    fail "$1 patch $2 was applied"
  fi
  grep -qF "$3" "$work/patch.log" || fail "$1 patch $2: $(cat "$work/patch.log")"
}
bad_patch merge '[1,2]' \
  'Error from server (BadRequest): error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}'
bad_patch merge 'null' 'Error from server (BadRequest): Invalid JSON Patch'
bad_patch json '{"op":"add"}' \
  'error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp'
bad_patch json '[{"op":1,"path":"/spec"}]' \
  'json: cannot unmarshal number into Go struct field jsonPatchOp.op of type string'
k patch myresources.v1.mygroup.example.com example-resource --type json -p 'null' \
  >"$work/patch.log" 2>&1 || fail "a null JSON patch (no operations): $(cat "$work/patch.log")"
grep -q 'patched (no change)' "$work/patch.log" || fail "null JSON patch: $(cat "$work/patch.log")"

# kubectl get prints the server's columns (Table output).
k get myresources.v1.mygroup.example.com >"$work/table.log" 2>&1 || fail "get table"
grep -Eq '^NAME +REPLICAS +READY +IMAGE +AGE' "$work/table.log" ||
  fail "no printer columns: $(cat "$work/table.log")"
grep -Eq '^example-resource +4 ' "$work/table.log" || fail "bad row: $(cat "$work/table.log")"
k get namespaces >"$work/table.log" 2>&1 || fail "get namespaces"
grep -Eq '^default +Active +[0-9]+[smhd]' "$work/table.log" ||
  fail "bad namespace row: $(cat "$work/table.log")"

# kubectl scale goes through deployments/scale.
cat >"$work/deploy.yaml" <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers: [{name: web, image: nginx}]
EOF
k apply -f "$work/deploy.yaml" >>"$work/apply.log" 2>&1 || fail "apply deployment"
k scale deployment web --replicas=3 >>"$work/apply.log" 2>&1 || fail "scale: $(tail -3 "$work/apply.log")"
[ "$(k get deployment web -o jsonpath='{.spec.replicas}')" = 3 ] || fail "scale did not set replicas"
k get deployment web -o json --show-managed-fields |
  jq -e '.metadata.managedFields[] | select(.subresource=="scale" and .operation=="Update") |
  .fieldsV1["f:spec"] | has("f:replicas")' >/dev/null || fail "scale recorded no managedFields entry"
k get deployment web >"$work/table.log" 2>&1 || fail "get deployment"
grep -Eq '^NAME +READY +UP-TO-DATE +AVAILABLE +AGE' "$work/table.log" ||
  fail "no deployment columns: $(cat "$work/table.log")"

# kubectl create sends built-in kinds as protobuf: every built-in kind
# kubesim serves goes in that way and reads back as the JSON the apiserver
# writes.
k create namespace pb >>"$work/apply.log" 2>&1 || fail "create namespace: $(tail -3 "$work/apply.log")"
k -n pb create configmap cm1 --from-literal=a=b >>"$work/apply.log" 2>&1 || fail "create configmap"
k -n pb create secret generic s1 --from-literal=pw=hunter2 >>"$work/apply.log" 2>&1 ||
  fail "create secret"
k -n pb create deployment d1 --image=nginx --replicas=2 --port=8080 >>"$work/apply.log" 2>&1 ||
  fail "create deployment"
k -n pb create service clusterip s1 --tcp=80:http >>"$work/apply.log" 2>&1 || fail "create service"
k -n pb create serviceaccount sa1 >>"$work/apply.log" 2>&1 || fail "create serviceaccount"
k -n pb create role r1 --verb=get,list --resource=pods >>"$work/apply.log" 2>&1 || fail "create role"
k -n pb create rolebinding rb1 --role=r1 --serviceaccount=pb:sa1 >>"$work/apply.log" 2>&1 ||
  fail "create rolebinding"
k create clusterrole cr1 --verb=get --resource=configmaps >>"$work/apply.log" 2>&1 ||
  fail "create clusterrole"
k create clusterrolebinding crb1 --clusterrole=cr1 --user=u1 >>"$work/apply.log" 2>&1 ||
  fail "create clusterrolebinding"
k -n pb create poddisruptionbudget pdb1 --selector=app=d1 --min-available=50% >>"$work/apply.log" 2>&1 ||
  fail "create poddisruptionbudget"
k -n pb run p1 --image=busybox --labels=app=p1 --env=A=1 --port=9090 -- sleep 10 >>"$work/apply.log" 2>&1 ||
  fail "run pod"
k -n pb get configmap cm1 -o jsonpath='{.data.a}' | grep -qx b || fail "configmap data"
[ "$(k -n pb get secret s1 -o jsonpath='{.data.pw}')" = "$(printf hunter2 | base64)" ] ||
  fail "secret data is not base64 of the value"
k -n pb get secret s1 -o jsonpath='{.type}' | grep -qx Opaque || fail "secret type"
d1=$(k -n pb get deployment d1 -o json)
grep -q '"replicas": 2' <<<"$d1" || fail "deployment replicas: $d1"
grep -q '"containerPort": 8080' <<<"$d1" || fail "deployment port: $d1"
grep -q '"maxSurge": "25%"' <<<"$d1" || fail "deployment IntOrString default: $d1"
[ "$(k -n pb get service s1 -o jsonpath='{.spec.ports[0].targetPort}')" = http ] ||
  fail "service targetPort (IntOrString string)"
[ "$(k -n pb get service s1 -o jsonpath='{.spec.ports[0].port}')" = 80 ] || fail "service port"
[ "$(k -n pb get pdb pdb1 -o jsonpath='{.spec.minAvailable}')" = 50% ] || fail "pdb minAvailable"
[ "$(k -n pb get rolebinding rb1 -o jsonpath='{.subjects[0].name}')" = sa1 ] || fail "rolebinding"
[ "$(k get clusterrole cr1 -o jsonpath='{.rules[0].resources[0]}')" = configmaps ] ||
  fail "clusterrole rules"
p1=$(k -n pb get pod p1 -o json)
grep -q '"sleep"' <<<"$p1" || fail "pod args: $p1"
grep -q '"containerPort": 9090' <<<"$p1" || fail "pod port: $p1"
# Other media types and kinds without a protobuf form still get the 415.
ca_file=$work/kubesim-ca.crt
grep certificate-authority-data "$work/kubeconfig" | awk '{print $2}' | base64 -d >"$ca_file"
url=$(head -n1 "$work/kubesim.log")
token=$(grep 'token:' "$work/kubeconfig" | awk '{print $2}')
c() { curl -sS --cacert "$ca_file" -H "Authorization: Bearer $token" "$@"; }
pbct='application/vnd.kubernetes.protobuf'
code=$(c -o "$work/pb.out" -w '%{http_code}' -X POST -H "Content-Type: $pbct" --data-binary 'k8s' \
  "$url/api/v1/namespaces/pb/configmaps")
[ "$code" = 400 ] || fail "truncated protobuf: $code $(cat "$work/pb.out")"
# "k8s\0" + Unknown{typeMeta{apiVersion, kind}} of a custom resource
printf 'k8s\0\x0a\x24\x0a\x16mygroup.example.com/v1\x12\x0aMyResource' >"$work/cr.pb"
code=$(c -o "$work/pb.out" -w '%{http_code}' -X POST -H "Content-Type: $pbct" \
  --data-binary @"$work/cr.pb" "$url/apis/mygroup.example.com/v1/namespaces/pb/myresources")
[ "$code" = 415 ] || fail "protobuf custom resource: $code $(cat "$work/pb.out")"
# A client that takes only protobuf gets protobuf (JSON stays the answer
# whenever the client takes it); the bytes go back in as a create.
code=$(c -o "$work/cm1.pb" -w '%{http_code} %{content_type}' -H "Accept: $pbct" \
  "$url/api/v1/namespaces/pb/configmaps/cm1")
[ "$code" = "200 $pbct" ] || fail "protobuf answer: $code"
[ "$(head -c 3 "$work/cm1.pb")" = k8s ] || fail "no k8s envelope"
code=$(c -o /dev/null -w '%{content_type}' -H "Accept: $pbct,application/json" \
  "$url/api/v1/namespaces/pb/configmaps/cm1")
[ "$code" = application/json ] || fail "JSON not preferred: $code"
code=$(c -o /dev/null -w '%{content_type}' \
  -H "Accept: $pbct;as=PartialObjectMetadata;g=meta.k8s.io;v=v1" "$url/api/v1/namespaces/pb/configmaps/cm1")
[ "$code" = application/json ] || fail "protobuf PartialObjectMetadata answered as $code"
k -n pb delete configmap cm1 >>"$work/apply.log" 2>&1 || fail "delete cm1"
code=$(c -o "$work/pb.out" -w '%{http_code}' -X POST -H "Content-Type: $pbct" \
  --data-binary @"$work/cm1.pb" "$url/api/v1/namespaces/pb/configmaps")
[ "$code" = 201 ] || fail "protobuf create from protobuf answer: $code $(cat "$work/pb.out")"
k -n pb get configmap cm1 -o jsonpath='{.data.a}' | grep -qx b || fail "round trip lost data"
# Kinds kubectl has no create generator for: stored from JSON, read back
# in protobuf, deleted, created again from those bytes: the same object.
cat >"$work/more.yaml" <<'EOF2'
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: l1, namespace: pb}
spec: {holderIdentity: me, leaseDurationSeconds: 15, acquireTime: "2024-05-06T07:08:09.123456Z", leaseTransitions: 2}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: np1, namespace: pb}
spec:
  podSelector: {matchLabels: {app: d1}}
  policyTypes: [Ingress]
  ingress: [{ports: [{port: 8080, protocol: TCP}, {port: http}], from: [{ipBlock: {cidr: 10.0.0.0/8}}]}]
---
apiVersion: v1
kind: Event
metadata: {name: ev1, namespace: pb}
involvedObject: {kind: Pod, name: p1, namespace: pb}
reason: Tested
message: hello
type: Normal
count: 3
firstTimestamp: "2024-05-06T07:08:09Z"
---
apiVersion: v1
kind: Pod
metadata: {name: p2, namespace: pb}
spec:
  volumes: [{name: cfg, configMap: {name: cm1, defaultMode: 420}}, {name: tmp, emptyDir: {sizeLimit: 64Mi}}]
  containers:
  - name: c
    image: busybox
    env: [{name: K, valueFrom: {configMapKeyRef: {name: cm1, key: a}}}]
    readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 5}
    resources: {limits: {cpu: 500m, memory: 1Gi}}
    volumeMounts: [{name: cfg, mountPath: /cfg}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: vwc1}
webhooks:
- name: v.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  timeoutSeconds: 5
  clientConfig: {url: "https://127.0.0.1:1/validate", caBundle: "AAEC"}
  rules: [{apiGroups: ["nothing.example.com"], apiVersions: [v1], operations: [CREATE], resources: [things]}]
EOF2
k apply -f "$work/more.yaml" >>"$work/apply.log" 2>&1 || fail "apply more kinds: $(tail -3 "$work/apply.log")"
for obj in api/v1/namespaces/pb/events/ev1 api/v1/namespaces/pb/pods/p2 \
  apis/coordination.k8s.io/v1/namespaces/pb/leases/l1 \
  apis/networking.k8s.io/v1/namespaces/pb/networkpolicies/np1 \
  apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/vwc1 \
  api/v1/namespaces/pb/secrets/s1 api/v1/namespaces/pb/services/s1 \
  apis/apps/v1/namespaces/pb/deployments/d1 apis/policy/v1/namespaces/pb/poddisruptionbudgets/pdb1 \
  apis/rbac.authorization.k8s.io/v1/namespaces/pb/rolebindings/rb1 \
  apis/rbac.authorization.k8s.io/v1/clusterroles/cr1; do
  c -H 'Accept: application/json' "$url/$obj" | jq -S 'del(.metadata, .status)' >"$work/before.json"
  code=$(c -o "$work/obj.pb" -w '%{http_code}' -H "Accept: $pbct" "$url/$obj")
  [ "$code" = 200 ] || fail "protobuf GET $obj: $code"
  code=$(c -o /dev/null -w '%{http_code}' -X DELETE "$url/$obj")
  [ "$code" = 200 ] || fail "DELETE $obj: $code"
  code=$(c -o "$work/pb.out" -w '%{http_code}' -X POST -H "Content-Type: $pbct" \
    --data-binary @"$work/obj.pb" "$url/${obj%/*}")
  [ "$code" = 201 ] || fail "protobuf POST $obj: $code $(cat "$work/pb.out")"
  c -H 'Accept: application/json' "$url/$obj" | jq -S 'del(.metadata, .status)' >"$work/after.json"
  diff "$work/before.json" "$work/after.json" >"$work/diff.log" || { cat "$work/before.json" "$work/diff.log"; fail "$obj changed"; }
done
grep -q '"acquireTime": "2024-05-06T07:08:09.123456Z"' <<<"$(k -n pb get lease l1 -o json)" ||
  fail "lease MicroTime"
code=$(c -o "$work/pb.out" -w '%{http_code}' -H "Accept: $pbct" \
  "$url/apis/mygroup.example.com/v1/namespaces/pb/myresources")
[ "$code" = 406 ] || fail "protobuf list of a CR: $code"
code=$(c -o "$work/pb.out" -w '%{http_code}' -X POST -H 'Content-Type: application/cbor' \
  --data-binary 'x' "$url/api/v1/namespaces/pb/configmaps")
[ "$code" = 415 ] || fail "cbor accepted: $code"

# Server-side apply: managedFields per manager, a 409 naming the other
# manager and the fields, --force-conflicts takes them over, Update
# operations (create, label) recorded too, and a field dropped from the
# configuration is removed.
mf() { k -n pb get "$1" -o json --show-managed-fields; }
# d1 was created again by curl above: the manager defaults to the
# User-Agent up to its first "/".
grep -q '"manager": "curl"' <<<"$(mf deployment/d1)" || fail "create recorded no manager"
jq -e '.metadata.managedFields[] | select(.manager=="kubectl-create" and .operation=="Update") |
  .fieldsV1 | has("f:rules")' <<<"$(mf role/r1)" >/dev/null || fail "kubectl create recorded no manager"
cat >"$work/ssa.yaml" <<'EOF2'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: d1
  namespace: pb
spec:
  replicas: 4
  selector:
    matchLabels: {app: d1}
  template:
    metadata:
      labels: {app: d1}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
        env: [{name: A, value: "1"}, {name: B, value: "2"}]
EOF2
if k apply --server-side -f "$work/ssa.yaml" >"$work/ssa.log" 2>&1; then
  fail "apply over curl's fields did not conflict"
fi
grep -q 'Apply failed with 2 conflicts: conflicts with "curl" using apps/v1 at ' "$work/ssa.log" ||
  fail "conflict message: $(cat "$work/ssa.log")"
grep -q '^- .spec.replicas$' "$work/ssa.log" || fail "conflict lacks .spec.replicas: $(cat "$work/ssa.log")"
grep -q '^- .spec.template.spec.containers\[name="nginx"\].image$' "$work/ssa.log" ||
  fail "conflict lacks the image: $(cat "$work/ssa.log")"
[ "$(k -n pb get deployment d1 -o jsonpath='{.spec.replicas}')" = 2 ] || fail "conflicting apply wrote"
k apply --server-side --force-conflicts -f "$work/ssa.yaml" >>"$work/ssa.log" 2>&1 ||
  fail "forced apply: $(tail -3 "$work/ssa.log")"
d1=$(mf deployment/d1)
[ "$(jq -r '.spec.replicas' <<<"$d1")" = 4 ] || fail "forced apply did not set replicas"
[ "$(jq -r '.metadata.managedFields[] | select(.manager=="kubectl" and .operation=="Apply") |
  .fieldsV1["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"nginx\"}"]["f:env"] |
  keys | join(" ")' <<<"$d1")" = 'k:{"name":"A"} k:{"name":"B"}' ] ||
  fail "apply's field set: $(jq -c '.metadata.managedFields' <<<"$d1")"
jq -e '.metadata.managedFields[] | select(.manager=="curl") | .fieldsV1["f:spec"] |
  has("f:replicas") | not' <<<"$d1" >/dev/null || fail "curl still owns replicas"
k -n pb label deployment d1 tier=web >>"$work/ssa.log" 2>&1 || fail "label"
jq -e '.metadata.managedFields[] | select(.manager=="kubectl-label" and .operation=="Update") |
  .fieldsV1["f:metadata"]["f:labels"] | has("f:tier")' <<<"$(mf deployment/d1)" >/dev/null ||
  fail "label recorded no Update entry"
# Another manager sharing a value co-owns it without a conflict.
cat >"$work/ssa2.yaml" <<'EOF2'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: d1
  namespace: pb
spec:
  replicas: 4
EOF2
k apply --server-side --field-manager=hpa-like -f "$work/ssa2.yaml" >>"$work/ssa.log" 2>&1 ||
  fail "co-owning apply conflicted: $(tail -3 "$work/ssa.log")"
# Dropping env B from the configuration removes it; replicas stays (co-owned).
sed -i 's/, {name: B, value: "2"}//; /replicas: 4/d' "$work/ssa.yaml"
k apply --server-side -f "$work/ssa.yaml" >>"$work/ssa.log" 2>&1 || fail "apply without B"
[ "$(k -n pb get deployment d1 -o jsonpath='{.spec.template.spec.containers[0].env[*].name}')" = A ] ||
  fail "env B not removed"
[ "$(k -n pb get deployment d1 -o jsonpath='{.spec.replicas}')" = 4 ] || fail "co-owned replicas lost"
# fieldManager is required for apply.
code=$(c -o "$work/pb.out" -w '%{http_code}' -X PATCH -H 'Content-Type: application/apply-patch+yaml' \
  --data-binary '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm1"}}' \
  "$url/api/v1/namespaces/pb/configmaps/cm1")
[ "$code" = 422 ] && grep -q 'fieldManager: Required value' "$work/pb.out" ||
  fail "apply without fieldManager: $code $(cat "$work/pb.out")"

# kubectl's move from client-side to server-side apply (csaupgrade: the
# client-side manager's fields handed to "kubectl" by a JSON patch, then
# applied again) keeps the object: a map or list node the configuration
# still fills is not removed (kubesim dropped data and labels), and the
# Service's allocated clusterIP, ipFamilies and nodePort belong to no
# manager, as create.go records managedFields before BeginCreate.
cat >"$work/mig.yaml" <<'EOF2'
apiVersion: v1
kind: ConfigMap
metadata: {name: mig, namespace: pb, labels: {a: b}}
data: {k1: v1, k2: v2}
---
apiVersion: v1
kind: Service
metadata: {name: mig, namespace: pb}
spec:
  selector: {app: mig}
  type: NodePort
  ports: [{name: http, port: 80}]
EOF2
k apply -f "$work/mig.yaml" >"$work/mig.log" 2>&1 || fail "client-side apply: $(cat "$work/mig.log")"
jq -e '.metadata.managedFields[] | select(.manager=="kubectl-client-side-apply") | .fieldsV1["f:spec"] |
  (has("f:clusterIP") or has("f:ipFamilies") or
   (.["f:ports"]["k:{\"port\":80,\"protocol\":\"TCP\"}"] | has("f:nodePort"))) | not' \
  <<<"$(mf service/mig)" >/dev/null || fail "allocated fields owned: $(mf service/mig | jq -c .metadata.managedFields)"
jq -e '.metadata.managedFields[] | select(.manager=="kubectl-client-side-apply") | .fieldsV1["f:spec"] |
  has("f:sessionAffinity") and has("f:externalTrafficPolicy")' <<<"$(mf service/mig)" >/dev/null ||
  fail "defaulted fields not owned: $(mf service/mig | jq -c .metadata.managedFields)"
k apply --server-side -f "$work/mig.yaml" >>"$work/mig.log" 2>&1 || fail "server-side apply: $(cat "$work/mig.log")"
grep -q 'failed to re-apply' "$work/mig.log" && fail "migration re-apply failed: $(cat "$work/mig.log")"
[ "$(k -n pb get configmap mig -o jsonpath='{.data.k2} {.metadata.labels.a}')" = "v2 b" ] ||
  fail "migration lost data: $(k -n pb get configmap mig -o json)"
[ "$(k -n pb get service mig -o jsonpath='{.spec.ports[0].port}')" = 80 ] ||
  fail "migration lost ports: $(k -n pb get service mig -o json)"

# get -w on a built-in kind sees a change made through protobuf.
timeout 120 kubectl --cache-dir "$work/cache" -n pb get configmaps -w --output-watch-events \
  >"$work/watch2.log" 2>&1 &
watch_pid=$!
pids+=($watch_pid)
wait_for "$work/watch2.log" 'cm1' || fail "configmap watch printed nothing"
k -n pb create configmap cm2 --from-literal=x=y >>"$work/apply.log" 2>&1 || fail "create cm2"
wait_for "$work/watch2.log" 'ADDED.*cm2' || fail "watch saw no cm2: $(cat "$work/watch2.log")"
kill "$watch_pid" 2>/dev/null || true

# kubectl auth can-i / whoami (authorization.k8s.io and authentication.k8s.io
# reviews, the RBAC authorizer and impersonation of kubesim): the shipped
# RBAC grants kop exactly what manifests/base/rbac.yaml says.
k create namespace kop-system >>"$work/auth.log" 2>&1 || true
k apply -n kop-system -f "$root/manifests/base/rbac.yaml" >>"$work/auth.log" 2>&1 ||
  fail "apply the RBAC: $(tail -3 "$work/auth.log")"
[ "$(k auth can-i create myresources.mygroup.example.com)" = yes ] || fail "the admin may not create"
sa=system:serviceaccount:kop-system:kop
can() { # can EXPECTED ARGS...: kubectl auth can-i as kop's service account
  local want=$1 got
  shift
  got=$(k auth can-i "$@" --as="$sa" 2>>"$work/auth.log") || true
  [ "$got" = "$want" ] || fail "auth can-i $* as $sa: '$got', want $want"
}
can yes list myresources.mygroup.example.com --all-namespaces
can yes watch myresources.mygroup.example.com -n default
can yes patch myresources.mygroup.example.com --subresource=status -n default
can no update myresources.mygroup.example.com -n default
can no patch myresources.mygroup.example.com -n default
can yes create deployments.apps -n default
can no delete deployments.apps -n default
can yes patch services -n team-a
can no get secrets -n kop-system
can yes update leases.coordination.k8s.io/kop-leader -n kop-system
can no update leases.coordination.k8s.io -n default
can yes create selfsubjectaccessreviews.authorization.k8s.io
k auth can-i --list -n kop-system --as="$sa" >"$work/auth-list.out" 2>>"$work/auth.log" ||
  fail "auth can-i --list: $(tail -3 "$work/auth.log")"
grep -q '^leases.coordination.k8s.io .*\[get create update\]' "$work/auth-list.out" ||
  fail "auth can-i --list lacks the Lease rule: $(cat "$work/auth-list.out")"
k auth whoami --as="$sa" -o jsonpath='{.status.userInfo.groups}' >"$work/whoami.out" 2>>"$work/auth.log" ||
  fail "auth whoami: $(tail -3 "$work/auth.log")"
grep -q '"system:serviceaccounts:kop-system"' "$work/whoami.out" ||
  fail "whoami groups: $(cat "$work/whoami.out")"
# A review created from a file (kubectl validates it on the client with
# /openapi/v2, the kind having no PATCH operation in /openapi/v3).
cat >"$work/sar.yaml" <<EOF2
apiVersion: authorization.k8s.io/v1
kind: SubjectAccessReview
spec:
  user: $sa
  groups: [system:serviceaccounts, system:serviceaccounts:kop-system, system:authenticated]
  resourceAttributes: {verb: watch, group: apps, resource: deployments}
EOF2
[ "$(k create -f "$work/sar.yaml" -o jsonpath='{.status.allowed}' 2>>"$work/auth.log")" = true ] ||
  fail "kubectl create -f of a SubjectAccessReview: $(tail -3 "$work/auth.log")"
# Impersonating groups alone is the apiserver's internal error (kubectl
# itself refuses --as-group without --as, so curl).
code=$(c -o "$work/imp.out" -w '%{http_code}' -H 'Impersonate-Group: devs' "$url/api/v1/namespaces")
[ "$code" = 500 ] && grep -q 'without impersonating a user' "$work/imp.out" ||
  fail "impersonating a group alone: $code $(cat "$work/imp.out")"

# kubectl rollout: the Deployment controller's ReplicaSets carry the
# revisions; undo takes the previous template back.
k create deployment roll --image=nginx:1.25 >>"$work/roll.log" 2>&1 || fail "create deployment roll"
k rollout status deployment/roll --timeout=30s >>"$work/roll.log" 2>&1 || fail "rollout status roll"
k set image deployment/roll nginx=nginx:1.26 >>"$work/roll.log" 2>&1 || fail "set image"
k rollout status deployment/roll --timeout=30s >>"$work/roll.log" 2>&1 || fail "rollout status after set image"
for _ in $(seq 1 100); do
  [ "$(k get rs -l app=roll -o name 2>/dev/null | wc -l)" = 2 ] && break
  sleep 0.1
done
k rollout history deployment/roll >"$work/history.out" 2>&1 || fail "rollout history: $(cat "$work/history.out")"
grep -q '^2 ' "$work/history.out" || fail "rollout history without revision 2: $(cat "$work/history.out")"
k rollout undo deployment/roll >>"$work/roll.log" 2>&1 || fail "rollout undo: $(tail -3 "$work/roll.log")"
[ "$(k get deployment roll -o jsonpath='{.spec.template.spec.containers[0].image}')" = nginx:1.25 ] ||
  fail "rollout undo did not take the old image back"
k get all >"$work/all.out" 2>&1 && grep -q 'replicaset.apps/roll-' "$work/all.out" ||
  fail "kubectl get all shows no ReplicaSet: $(cat "$work/all.out")"

# Endpoints and EndpointSlices: a Service's ready Pod, as the controllers
# list it, in get and describe.
cat >"$work/ep.yaml" <<'EOF'
apiVersion: v1
kind: Service
metadata:
  name: ep-svc
spec:
  selector:
    app: ep
  ports:
  - port: 80
    targetPort: 8080
---
apiVersion: v1
kind: Pod
metadata:
  name: ep-pod
  labels:
    app: ep
spec:
  containers:
  - name: c
    image: nginx
EOF
k apply -f "$work/ep.yaml" >>"$work/apply.log" 2>&1 || fail "apply ep.yaml"
k patch pod ep-pod --subresource=status --type=merge \
  -p '{"status":{"podIP":"10.244.0.9","conditions":[{"type":"Ready","status":"True"}]}}' \
  >>"$work/apply.log" 2>&1 || fail "patch pod status"
for _ in $(seq 50); do
  k get ep ep-svc >"$work/ep.out" 2>&1 && grep -q '10.244.0.9:8080' "$work/ep.out" && break
  sleep 0.1
done
grep -q '^ep-svc  *10.244.0.9:8080 ' "$work/ep.out" || fail "kubectl get ep: $(cat "$work/ep.out")"
k get endpointslices -l kubernetes.io/service-name=ep-svc >"$work/eps.out" 2>&1 || fail "get endpointslices"
grep -Eq '^ep-svc-[a-z0-9]{5} +IPv4 +8080 +10.244.0.9 ' "$work/eps.out" ||
  fail "kubectl get endpointslices: $(cat "$work/eps.out")"
k describe svc ep-svc >"$work/describe-svc.out" 2>&1 || fail "describe svc"
grep -q '^Endpoints: *10.244.0.9:8080' "$work/describe-svc.out" ||
  fail "kubectl describe svc shows no endpoints: $(cat "$work/describe-svc.out")"

# The health endpoints as the generic apiserver serves them: "ok", or with
# ?verbose one line per check; ?exclude names are marked, unknown ones
# warned about; one check at /readyz/NAME.
[ "$(k get --raw /readyz)" = ok ] || fail "/readyz"
k get --raw '/readyz?verbose&exclude=etcd&exclude=nope' >"$work/readyz.out" 2>&1 || fail "/readyz?verbose"
grep -qx '\[+\]ping ok' "$work/readyz.out" || fail "readyz ping: $(cat "$work/readyz.out")"
grep -qx '\[+\]etcd excluded: ok' "$work/readyz.out" || fail "readyz exclude: $(cat "$work/readyz.out")"
grep -qx '\[+\]shutdown ok' "$work/readyz.out" || fail "readyz shutdown: $(cat "$work/readyz.out")"
grep -qx 'warn: some health checks cannot be excluded: no matches for "nope"' "$work/readyz.out" ||
  fail "readyz unknown exclude: $(cat "$work/readyz.out")"
[ "$(tail -n1 "$work/readyz.out")" = "readyz check passed" ] || fail "readyz tail: $(cat "$work/readyz.out")"
k get --raw '/livez?verbose' >"$work/livez.out" 2>&1 || fail "/livez?verbose"
[ "$(tail -n1 "$work/livez.out")" = "livez check passed" ] || fail "livez: $(cat "$work/livez.out")"
if grep -q shutdown "$work/livez.out"; then fail "livez has readyz's shutdown check"; fi
[ "$(k get --raw /readyz/poststarthook/rbac/bootstrap-roles)" = ok ] || fail "/readyz/CHECK"
if k get --raw /readyz/nope >/dev/null 2>&1; then fail "/readyz/nope answered"; fi

# Delete works (kubectl waits for the object to go).
k delete -f "$work/seed.yaml" --timeout=20s >>"$work/apply.log" 2>&1 || fail "delete"
if k get myresources.v1.mygroup.example.com example-resource >/dev/null 2>&1; then
  fail "object still there after delete"
fi
echo "kubectl: all checks passed"
