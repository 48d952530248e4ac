#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Validation while kop is down (docs/operations.md §9.8), with kubectl
# against kubesim:
#   1. an object stored before the CRD's rules existed (replicas 2000,
#      under a CRD without the rules, as an older kop installed it);
#   2. the CRD of manifests/base/crd.yaml applied, and the validating
#      webhook registered as the fail-open overlay does (failurePolicy
#      Ignore); then kop is stopped;
#   3. kubectl is refused, in one message naming every field, a v1 object
#      with 5,000 replicas, port 0 and the image UPPER/Case:tag, and a v2
#      object with duplicate port names and protocol HTTP; a valid v1
#      object is created (v2 needs the conversion webhook, so kop);
#   4. ratcheting: an UPDATE of the old object that leaves its replicas as
#      they were is accepted, one that changes them to another invalid
#      value is refused;
#   5. kubectl explain shows the bounds of spec.replicas in v2.
# Exits non-zero on any failure; always stops what it started.
set -euo pipefail

root=${KOP_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${KOP_BUILD_ROOT:-$root/build}
kubesim=$build/tests/kubesim/kubesim
kop=${KOP_BIN:-$build/kop}

# shellcheck source=tests/scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tools failopen kubectl jq
scratch

bash "$root/scripts/gen-certs.sh" "$work/certs" >/dev/null 2>&1 || die "gen-certs.sh"
"$kop" --webhook-only --cert-dir "$work/certs" --webhook-port 0 \
  --metrics-bind-address 0 --health-probe-bind-address 0 >"$work/kop.log" 2>&1 &
kop_pid=$!
pids+=("$kop_pid")
wait_for "$work/kop.log" '"msg":"serving webhook"' || die "kop did not start its webhook"
port=$(grep -o '"msg":"serving webhook"[^}]*' "$work/kop.log" | grep -o '"port":[0-9]*' | head -n1 | cut -d: -f2)

"$kubesim" --listen 127.0.0.1:0 --kubeconfig-out "$work/kubeconfig" \
  --service "kop-system/kop-webhook-service=127.0.0.1:$port" >"$work/kubesim.log" 2>&1 &
pids+=($!)
wait_for "$work/kubesim.log" '^https://' || die "kubesim did not start"
export KUBECONFIG=$work/kubeconfig
k() { kubectl --cache-dir "$work/cache" "$@"; }

ca=$(base64 -w0 "$work/certs/ca.crt")
sed "s|^        service:|        caBundle: $ca\n        service:|" "$root/manifests/base/crd.yaml" >"$work/crd.yaml"

# ---- 1. an object from before the rules ----------------------------------------------
# The CRD as it was before it carried value rules: the same schema without
# minimum, maximum, maxLength, enum and x-kubernetes-validations.
k create --dry-run=client -o json -f "$work/crd.yaml" |
  jq 'walk(if type == "object" then del(.minimum, .maximum, .maxLength, .minLength, .enum,
    .["x-kubernetes-validations"]) else . end)' >"$work/crd-old.json" || die "the old CRD"
k apply -f "$work/crd-old.json" >"$work/apply.log" 2>&1 || die "apply the old CRD"
cat >"$work/legacy.yaml" <<'EOF'
apiVersion: mygroup.example.com/v1
kind: MyResource
metadata:
  name: legacy
spec:
  replicas: 2000
EOF
k apply -f "$work/legacy.yaml" >>"$work/apply.log" 2>&1 || die "create under the old CRD"
pass "an object with replicas 2000 stored under a CRD without rules"

# ---- 2. the CRD's rules, fail-open webhook, kop stopped ---------------------------------
k apply -f "$work/crd.yaml" >>"$work/apply.log" 2>&1 || die "apply crd.yaml: $(tail -3 "$work/apply.log")"
kubectl kustomize "$root/manifests/overlays/fail-open" >"$work/rendered.yaml"
grep -q 'failurePolicy: Ignore' "$work/rendered.yaml" || die "the fail-open overlay does not set Ignore"
sed -e "s|^      service:|      caBundle: $ca\n      service:|" -e 's|failurePolicy: Fail|failurePolicy: Ignore|' \
  "$root/manifests/base/webhook.yaml" >"$work/webhook.yaml"
k apply -f "$work/webhook.yaml" >>"$work/apply.log" 2>&1 || die "apply the webhook configuration"
kill "$kop_pid"
wait "$kop_pid" 2>/dev/null || true
pass "crd.yaml and a fail-open validating webhook applied; kop stopped"

# ---- 3. refused in one message; a valid object created ----------------------------------
refused() { # refused NAME FILE FIELD...
  local name=$1 file=$2
  shift 2
  if k apply -f "$file" >"$work/refused.log" 2>&1; then
    die "$name was admitted with kop down"
  fi
  # one 422 Invalid Status; kubectl prints its causes one per line
  [ "$(grep -c 'is invalid' "$work/refused.log")" = 1 ] ||
    die "$name: not one Invalid message: $(cat "$work/refused.log")"
  for f in "$@"; do
    grep -qF "$f" "$work/refused.log" || die "$name: no $f in: $(cat "$work/refused.log")"
  done
  pass "$name refused in one message naming $*"
}
cat >"$work/bad-v1.yaml" <<'EOF'
apiVersion: mygroup.example.com/v1
kind: MyResource
metadata:
  name: bad-v1
spec:
  replicas: 5000
  port: 0
  image: UPPER/Case:tag
EOF
refused "a v1 object" "$work/bad-v1.yaml" "spec.replicas: Invalid value: 5000" "spec.port: Invalid value: 0" \
  'spec.image: Invalid value: "string": repository name must be lowercase'
cat >"$work/bad-v2.yaml" <<'EOF'
apiVersion: mygroup.example.com/v2
kind: MyResource
metadata:
  name: bad-v2
spec:
  replicas: 5000
  image: {repository: UPPER/Case, tag: tag}
  ports:
    - {name: web, port: 0}
    - {name: web, port: 81, protocol: HTTP}
EOF
refused "a v2 object" "$work/bad-v2.yaml" "spec.replicas: Invalid value: 5000" \
  "spec.ports[0].port: Invalid value: 0" 'spec.ports[1].protocol: Invalid value: "string": supported values: "SCTP", "TCP", "UDP"' \
  'spec.ports: Invalid value: "array": port names must be unique' \
  'spec.image.repository: Invalid value: "string": repository name must be lowercase'
cat >"$work/good.yaml" <<'EOF'
apiVersion: mygroup.example.com/v1
kind: MyResource
metadata:
  name: good
spec:
  replicas: 3
  image: registry.example.com/team/app:1.0
  port: 8080
EOF
k apply -f "$work/good.yaml" >"$work/good.log" 2>&1 || die "a valid v1 object with kop down: $(cat "$work/good.log")"
pass "a valid v1 object is created with kop down"

# ---- 4. ratcheting ------------------------------------------------------------------------
k patch myresources.v1.mygroup.example.com legacy --type merge -p '{"spec":{"port":8080}}' \
  >"$work/ratchet.log" 2>&1 || die "an update that keeps replicas 2000: $(cat "$work/ratchet.log")"
pass "an update leaving the old invalid replicas as they were is accepted"
if k patch myresources.v1.mygroup.example.com legacy --type merge -p '{"spec":{"replicas":3000}}' \
  >"$work/ratchet.log" 2>&1; then
  die "replicas changed to 3000 was accepted"
fi
grep -qF 'spec.replicas: Invalid value: 3000' "$work/ratchet.log" || die "ratchet: $(cat "$work/ratchet.log")"
pass "changing the old invalid replicas to another invalid value is refused"

# ---- 5. kubectl explain ---------------------------------------------------------------------
k explain myresources.spec.replicas --api-version=mygroup.example.com/v2 >"$work/explain.log" 2>&1 ||
  die "kubectl explain: $(cat "$work/explain.log")"
grep -q '0 to 1000' "$work/explain.log" || die "explain shows no bounds: $(cat "$work/explain.log")"
pass "kubectl explain myresources.spec.replicas (v2) shows the bounds"

finish
