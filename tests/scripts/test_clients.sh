#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Real Kubernetes clients against kubesim (issue: kubesim answers every real
# client as the apiserver would):
#   1. kubectl explain, served from kubesim's OpenAPI v3 (the schema table of
#      tests/kubesim/kschema_table.c, and a CRD's own schemas), and
#      /openapi/v2 with the built-in definitions;
#   2. kubectl's own writes: it sends fieldValidation=Strict, so an unknown
#      field is the apiserver's 400 'strict decoding error: unknown field';
#      a wrong JSON type is a 400 too; a label selector syntax error is the
#      apiserver's message;
#   3. the official Python client (Debian's python3-kubernetes, installed by
#      scripts/install-deps.sh): tests/clients/python_client.py;
#   4. @kubernetes/client-node (pinned in tests/clients/package-lock.json,
#      installed here with npm ci): tests/clients/node_client.mjs;
#   5. the committed schema table is what scripts/gen-kube-schema.js makes.
# The node part is skipped (exit 77 when nothing else ran) only when npm
# cannot reach its registry.
set -euo pipefail

root=${KOP_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${KOP_BUILD_ROOT:-$root/build}
kubesim=$build/tests/kubesim/kubesim
checks=$root/tests/clients
python=/usr/bin/python3 # Debian's, where python3-kubernetes is installed

if ! command -v kubectl >/dev/null; then
  echo "clients: kubectl not installed (scripts/install-deps.sh), skipping"
  exit 77
fi

# shellcheck source=tests/scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
scratch

"$kubesim" --listen 127.0.0.1:0 --kubeconfig-out "$work/kubeconfig" --ca-out "$work/ca.pem" \
  --token clients-token >"$work/kubesim.log" 2>&1 &
pids+=($!)
wait_for "$work/kubesim.log" '^https://' || {
  fail "kubesim did not start: $(tail -n 5 "$work/kubesim.log")"
  finish
}
url=$(head -n 1 "$work/kubesim.log")
k() { kubectl --kubeconfig "$work/kubeconfig" --cache-dir "$work/cache" "$@"; }

# ---- 1. kubectl explain, OpenAPI v2 -------------------------------------------------------
if k explain deployment.spec >"$work/explain.out" 2>&1 &&
  grep -q '^KIND: *Deployment' "$work/explain.out" &&
  grep -q 'replicas.*<integer>' "$work/explain.out" &&
  grep -q 'template.*<PodTemplateSpec> -required-' "$work/explain.out"; then
  pass "kubectl explain deployment.spec"
else
  fail "kubectl explain deployment.spec: $(head -c 600 "$work/explain.out")"
fi
if k explain service.spec.ports.protocol >"$work/explain.out" 2>&1 &&
  grep -q 'The IP protocol for this port' "$work/explain.out" &&
  grep -q '"SCTP"' "$work/explain.out"; then
  pass "kubectl explain service.spec.ports.protocol (enum values)"
else
  fail "kubectl explain service.spec.ports.protocol: $(head -c 600 "$work/explain.out")"
fi
if ! k explain configmap.nosuchfield >"$work/explain.out" 2>&1 &&
  grep -q 'nosuchfield' "$work/explain.out"; then
  pass "kubectl explain of an unknown field fails"
else
  fail "kubectl explain configmap.nosuchfield: $(head -c 300 "$work/explain.out")"
fi
if curl -sf --cacert "$work/ca.pem" -H "Authorization: Bearer clients-token" \
  -H 'Accept: application/json' "$url/openapi/v2" >"$work/v2.json" &&
  jq -e '.swagger == "2.0" and
    (.definitions["io.k8s.api.core.v1.ServicePort"].properties.port.format == "int32") and
    (.definitions["io.k8s.api.apps.v1.Deployment"]["x-kubernetes-group-version-kind"][0].kind
      == "Deployment")' "$work/v2.json" >/dev/null; then
  pass "/openapi/v2 has the definitions"
else
  fail "/openapi/v2: $(head -c 300 "$work/v2.json")"
fi
# kube-openapi's negotiation: gnostic protobuf for kubectl's client-side
# validation, 406 with no body for a type it does not serve.
v2() { curl -s --cacert "$work/ca.pem" -H "Authorization: Bearer clients-token" -H "Accept: $1" \
  -o "$work/v2.out" -w '%{http_code} %{content_type} %{size_download}' "$url/openapi/v2"; }
got=$(v2 'application/com.github.proto-openapi.spec.v2@v1.0+protobuf')
case $got in
  "200 application/com.github.proto-openapi.spec.v2.v1.0+protobuf "*) pass "/openapi/v2 in protobuf" ;;
  *) fail "/openapi/v2 in protobuf: $got" ;;
esac
got=$(v2 'text/html')
case $got in
  "406 "*" 0") pass "/openapi/v2: 406 for text/html" ;;
  *) fail "/openapi/v2 for text/html: $got" ;;
esac
# A List (kubectl get -o yaml of several objects) is validated on the client
# with /openapi/v2's definitions, then applied item by item.
k create configmap list-a --from-literal=x=1 >"$work/list.log" 2>&1 &&
  k create configmap list-b --from-literal=x=2 >>"$work/list.log" 2>&1 &&
  k get configmap list-a list-b -o yaml >"$work/list.yaml" 2>>"$work/list.log" ||
  fail "configmaps for the List: $(tail -3 "$work/list.log")"
sed -i 's/x: "2"/x: "22"/' "$work/list.yaml"
if k apply -f "$work/list.yaml" >>"$work/list.log" 2>&1 &&
  [ "$(k get configmap list-b -o jsonpath='{.data.x}')" = 22 ]; then
  pass "kubectl apply -f of a List"
else
  fail "kubectl apply -f of a List: $(tail -3 "$work/list.log")"
fi
printf 'apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: list-c}\n  bogus: 1\n' \
  >"$work/badlist.yaml"
if ! k apply -f "$work/badlist.yaml" >"$work/badlist.out" 2>&1 &&
  grep -q 'unknown field "bogus" in io.k8s.api.core.v1.ConfigMap' "$work/badlist.out"; then
  pass "kubectl's client-side validation of a List item"
else
  fail "a List with an unknown field: $(cat "$work/badlist.out")"
fi

# A CRD's versions are published as the apiextensions-apiserver does: the
# version's schema, metadata a reference to ObjectMeta, and the kind found by
# its x-kubernetes-group-version-kind.
if k apply -f "$root/manifests/base/crd.yaml" >"$work/crd.out" 2>&1 &&
  k explain myresources.spec.replicas >"$work/explain.out" 2>&1 &&
  grep -q '^VERSION: *v2' "$work/explain.out" &&
  grep -q 'Desired number of pods' "$work/explain.out" &&
  k explain myresource.metadata.labels >"$work/explain.out" 2>&1 &&
  grep -q 'labels <map\[string\]string>' "$work/explain.out" &&
  k explain myresource --api-version=mygroup.example.com/v1 >"$work/explain.out" 2>&1 &&
  grep -q '^VERSION: *v1' "$work/explain.out" &&
  grep -q 'MyResource runs an image' "$work/explain.out"; then
  pass "kubectl explain of the CRD's kind, v2 and v1"
else
  fail "kubectl explain myresource: $(cat "$work/crd.out") $(head -c 600 "$work/explain.out")"
fi
if curl -sf --cacert "$work/ca.pem" -H "Authorization: Bearer clients-token" \
  "$url/openapi/v3/apis/mygroup.example.com/v1" >"$work/v3.json" &&
  jq -e '.components.schemas["com.example.mygroup.v1.MyResourceList"] as $l |
    ($l["x-kubernetes-group-version-kind"][0].kind == "MyResourceList") and
    ($l.properties.items.items["$ref"] == "#/components/schemas/com.example.mygroup.v1.MyResource") and
    (.components.schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"].type == "object") and
    (.components.schemas | has("com.example.mygroup.v2.MyResource") | not)' \
    "$work/v3.json" >/dev/null; then
  pass "/openapi/v3 of a CRD group-version: its kind and list kind"
else
  fail "/openapi/v3/apis/mygroup.example.com/v1: $(jq -c '.components.schemas | keys' "$work/v3.json" 2>&1 | head -c 400)"
fi

# A dry-run create stores nothing and answers without a resourceVersion
# (the registry's dry run returns the object it was given).
if k create -f "$root/manifests/samples/myresource.yaml" --dry-run=server -o json \
  >"$work/dry.json" 2>"$work/dry.err" &&
  jq -e '.metadata.uid != null and (.metadata | has("resourceVersion") | not)' \
    "$work/dry.json" >/dev/null &&
  ! k get -f "$root/manifests/samples/myresource.yaml" >/dev/null 2>&1; then
  pass "kubectl create --dry-run=server of a custom resource"
else
  fail "kubectl create --dry-run=server: $(head -c 400 "$work/dry.json") $(cat "$work/dry.err")"
fi

# ---- 2. what kubectl writes, checked as the apiserver does -------------------------------
cat >"$work/bad-field.yaml" <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: typo
dta:
  a: b
EOF
if ! k create -f "$work/bad-field.yaml" >"$work/create.out" 2>&1 &&
  grep -q 'strict decoding error: unknown field "dta"' "$work/create.out"; then
  pass "kubectl create: unknown field refused (fieldValidation=Strict)"
else
  fail "kubectl create with an unknown field: $(cat "$work/create.out")"
fi
if k create -f "$work/bad-field.yaml" --validate=warn >"$work/create.out" 2>&1 &&
  grep -q 'unknown field "dta"' "$work/create.out"; then
  pass "kubectl create --validate=warn: stored with a warning"
else
  fail "kubectl create --validate=warn: $(cat "$work/create.out")"
fi
cat >"$work/bad-type.yaml" <<'EOF'
apiVersion: v1
kind: Service
metadata:
  name: bad
spec:
  selector:
    x: true
  ports:
  - port: 80
EOF
if ! k create -f "$work/bad-type.yaml" >"$work/create.out" 2>&1 &&
  grep -q 'cannot unmarshal bool into Go struct field ServiceSpec.spec.selector of type string' \
    "$work/create.out"; then
  pass "kubectl create: wrong JSON type refused"
else
  fail "kubectl create with a wrong type: $(cat "$work/create.out")"
fi
if ! k get configmaps -l 'a in b' >"$work/get.out" 2>&1 &&
  grep -q "unable to parse requirement: found 'b' expected: '('" "$work/get.out"; then
  pass "kubectl get -l with a syntax error: the apiserver's message"
else
  fail "kubectl get -l 'a in b': $(cat "$work/get.out")"
fi

# ---- 3. python3-kubernetes ----------------------------------------------------------------------
k create -f - >/dev/null <<'EOF'
{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "python"}}
EOF
if ! "$python" -c 'import kubernetes' 2>/dev/null; then
  fail "python3-kubernetes is not installed (scripts/install-deps.sh installs it)"
else
  rc=0
  timeout 300 "$python" "$checks/python_client.py" "$work/kubeconfig" python \
    >"$work/python.out" 2>&1 || rc=$?
  sed 's/^\(PASS\|FAIL\) /\1 python: /' "$work/python.out" >"$work/python.lines"
  count_lines "$work/python.lines"
  if [ "$rc" -ne 0 ] && ! grep -q '^FAIL ' "$work/python.out"; then
    fail "python client: exit $rc"
  fi
fi

# ---- 4. @kubernetes/client-node ---------------------------------------------------------------------
k create -f - >/dev/null <<'EOF'
{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "node"}}
EOF
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  fail "node/npm are not installed (scripts/install-deps.sh installs them)"
elif ! npm_checks; then
  if npm ping >/dev/null 2>&1; then
    fail "npm ci in tests/clients: $npm_error"
  else
    skip "@kubernetes/client-node: the npm registry is unreachable"
  fi
else
  rc=0
  (cd "$checks" && timeout 300 node node_client.mjs "$work/kubeconfig" node) \
    >"$work/node.out" 2>&1 || rc=$?
  sed 's/^\(PASS\|FAIL\) /\1 node: /' "$work/node.out" >"$work/node.lines"
  count_lines "$work/node.lines"
  if [ "$rc" -ne 0 ] && ! grep -q '^FAIL ' "$work/node.out"; then
    fail "node client: exit $rc"
  fi
fi

# ---- 5. the committed schema table is what the generator makes ------------------------------
# (from the kubernetes-models version pinned in tests/manifests)
if command -v node >/dev/null && command -v npm >/dev/null; then
  checks=$root/tests/manifests
  if npm_checks; then
    if node "$root/scripts/gen-kube-schema.js" >"$work/table.c" 2>"$work/gen.err" &&
      cmp -s "$work/table.c" "$root/tests/kubesim/kschema_table.c"; then
      pass "tests/kubesim/kschema_table.c is scripts/gen-kube-schema.js's output"
    else
      fail "tests/kubesim/kschema_table.c differs from the generator's output (re-run" \
        "scripts/gen-kube-schema.js): $(head -c 300 "$work/gen.err")"
    fi
  elif npm ping >/dev/null 2>&1; then
    fail "npm ci in tests/manifests: $npm_error"
  else
    skip "schema table regeneration: the npm registry is unreachable"
  fi
fi

if [ "$passed" -eq 0 ] && [ "$failed" -eq 0 ]; then
  exit 77
fi
finish
