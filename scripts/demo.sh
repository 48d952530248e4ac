#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The quick start: installs what is missing, builds, starts kubesim (the
# project's in-memory API server) and kop on loopback, applies the CRD, the
# webhook configuration and the seed MyResource with kubectl, and shows
# what happened.
#
# What runs today: kop serves the conversion and validating webhooks
# (--webhook-only); kubesim calls them exactly as a kube-apiserver would.
# The reconciler (Deployment + Service per MyResource) is not part of this
# build yet, so no children are created.
#
#   scripts/demo.sh          run, show, stop everything
#   scripts/demo.sh --keep   leave kubesim and kop running (prints how to stop)
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
keep=false
[ "${1:-}" = "--keep" ] && keep=true

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

step "installing what is missing and building"
scripts/install-deps.sh
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build kop tests/kubesim/kubesim >/dev/null
scripts/gen-certs.sh certs/dev >/dev/null

work=$(mktemp -d)
pids=()
cleanup() {
  if ! $keep; then
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
  fi
}
trap cleanup EXIT

wait_for() { # FILE PATTERN
  for _ in $(seq 200); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "demo: timed out waiting for '$2' in $1:" >&2
  cat "$1" >&2
  exit 1
}

step "starting kop --webhook-only (TLS on a port the kernel picks)"
build/kop --webhook-only --cert-dir certs/dev --webhook-host 127.0.0.1 --webhook-port 0 \
  --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 \
  >"$work/kop.log" 2>&1 &
pids+=($!)
wait_for "$work/kop.log" '"msg":"serving webhook"'
port=$(grep -o '"msg":"serving webhook"[^}]*' "$work/kop.log" | grep -o '"port":[0-9]*' | cut -d: -f2)
mport=$(grep -o '"msg":"serving metrics"[^}]*' "$work/kop.log" | grep -o '"port":[0-9]*' | cut -d: -f2)
cat "$work/kop.log"

step "starting kubesim, which sends kop-system/kop-webhook-service to 127.0.0.1:$port"
build/tests/kubesim/kubesim --listen 127.0.0.1:0 --kubeconfig-out "$work/kubeconfig" \
  --service "kop-system/kop-webhook-service=127.0.0.1:$port" >"$work/kubesim.log" 2>&1 &
pids+=($!)
wait_for "$work/kubesim.log" '^https://'
echo "kubesim at $(head -n 1 "$work/kubesim.log")"
export KUBECONFIG=$work/kubeconfig
k() { echo "\$ kubectl $*"; kubectl --cache-dir "$work/cache" "$@"; }

step "applying the CRD and the ValidatingWebhookConfiguration (caBundle = dev CA, as cainjector would)"
ca=$(base64 -w0 certs/dev/ca.crt)
sed "s|^        service:|        caBundle: $ca\n        service:|" manifests/base/crd.yaml >"$work/crd.yaml"
sed "s|^      service:|      caBundle: $ca\n      service:|" manifests/base/webhook.yaml >"$work/webhook.yaml"
k apply -f "$work/crd.yaml"
k apply -f "$work/webhook.yaml"

step "applying the seed MyResource (v1)"
cat manifests/samples/myresource.yaml
k apply -f manifests/samples/myresource.yaml

step "reading it back in v1 (storage version, defaults applied)"
k get myresources.v1.mygroup.example.com example-resource -o yaml

step "reading it in v2: kubesim calls kop's conversion webhook"
k get myresources.v2.mygroup.example.com example-resource -o yaml

step "the validating webhook at work: a v2 object with several mistakes"
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
k apply -f "$work/bad.yaml" || true

step "kop's metrics (webhook requests so far)"
curl -s "http://127.0.0.1:$mport/metrics" | grep -E '^controller_runtime_webhook_requests_total|^kop_serving_cert_expiry_seconds|^process_resident_memory_bytes'

step "done"
echo "kop served the conversion and admission webhooks for kubectl through kubesim."
echo "The reconciler (Deployment + Service per MyResource) is not part of this build yet."
if $keep; then
  echo
  echo "Still running (pids ${pids[*]}):  export KUBECONFIG=$work/kubeconfig"
  echo "Stop with: kill ${pids[*]}"
fi
