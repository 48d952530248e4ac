#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The optional monitoring component (manifests/components/monitoring/):
#   1. an overlay of manifests/ with the component renders: the install plus
#      the ServiceMonitor and the dashboard ConfigMap;
#   2. every object validates against the Kubernetes, cert-manager and
#      Prometheus Operator schemas (tests/manifests/check.js, npm
#      @kubernetes-models/prometheus-operator), and a broken ServiceMonitor
#      does not;
#   3. the ServiceMonitor selects kop-metrics-service, in its namespace, on
#      its metrics port and /metrics; the ConfigMap holds the dashboard JSON;
#   4. the dashboard (tests/manifests/dashboard.js) asks only for metrics kop
#      exports: kop (webhooks + reconciler + leader election) runs against
#      kubesim, serves one conversion and one admission request, and its
#      /metrics is scraped; a dashboard with a made-up metric fails.
# Prints "N passed, N failed" and exits non-zero on a failure.
set -euo pipefail

root=${KOP_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${KOP_BUILD_ROOT:-$root/build}
kubesim=$build/tests/kubesim/kubesim
kop=${KOP_BIN:-$build/kop}
checks=$root/tests/manifests
comp=$root/manifests/components/monitoring

# shellcheck source=tests/scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tools monitoring kubectl node npm curl
scratch

k() { kubectl --cache-dir "$work/cache" "$@"; }

if ! npm_checks; then
  fail "npm ci in tests/manifests: $npm_error"
  finish
fi

# ---- 1. rendering -------------------------------------------------------------
# An overlay as a user writes it (kustomize wants relative paths).
mkdir -p "$work/overlay"
rel=$(realpath --relative-to="$work/overlay" "$root/manifests")
printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%s]\ncomponents: [%s/components/monitoring]\n' \
  "$rel" "$rel" >"$work/overlay/kustomization.yaml"
k kustomize "$root/manifests" >"$work/default.yaml"
if k kustomize "$work/overlay" >"$work/monitoring.yaml" 2>"$work/kustomize.err"; then
  n0=$(grep -c '^kind:' "$work/default.yaml")
  n1=$(grep -c '^kind:' "$work/monitoring.yaml")
  if [ "$n1" -eq $((n0 + 2)) ] && grep -q '^kind: ServiceMonitor$' "$work/monitoring.yaml"; then
    pass "install + monitoring component renders ($n0 + ServiceMonitor + dashboard ConfigMap)"
  else
    fail "rendered $n1 objects, want $n0 + 2"
  fi
else
  fail "kustomize with the component: $(cat "$work/kustomize.err")"
  finish
fi

# ---- 2. schemas -------------------------------------------------------------------
node "$checks/check.js" schema "$work/monitoring.yaml" >"$work/schema.out" 2>&1 || true
count_lines "$work/schema.out"
node -e '
  const fs = require("fs");
  const YAML = require(require.resolve("yaml", {paths: [process.argv[3]]}));
  const docs = YAML.parseAllDocuments(fs.readFileSync(process.argv[1], "utf8")).map((d) => d.toJSON());
  const sm = docs.find((o) => o && o.kind === "ServiceMonitor");
  sm.spec.endpoints[0].scheme = "gopher";
  sm.spec.endpoints[0].bogusField = true;
  fs.writeFileSync(process.argv[2], YAML.stringify(sm));
' "$work/monitoring.yaml" "$work/broken-sm.yaml" "$checks"
node "$checks/check.js" schema "$work/broken-sm.yaml" >"$work/broken.out" 2>&1 || true
if grep -q '^FAIL schema ServiceMonitor' "$work/broken.out"; then
  pass "the Prometheus Operator schema rejects a broken ServiceMonitor"
else
  fail "a broken ServiceMonitor passed the schema check: $(cat "$work/broken.out")"
fi

# ---- 3. wiring ----------------------------------------------------------------------
node -e '
  const fs = require("fs");
  const YAML = require(require.resolve("yaml", {paths: [process.argv[3]]}));
  const docs = YAML.parseAllDocuments(fs.readFileSync(process.argv[1], "utf8")).map((d) => d.toJSON()).filter((o) => o);
  const check = (n, ok, why) => console.log(`${ok ? "PASS" : "FAIL"} ${n}${ok || !why ? "" : ": " + why}`);
  const sm = docs.find((o) => o.kind === "ServiceMonitor");
  const svcs = docs.filter((o) => o.kind === "Service");
  const sel = sm.spec.selector.matchLabels;
  const hit = svcs.filter((s) => Object.entries(sel).every(([k, v]) => (s.metadata.labels || {})[k] === v));
  check("ServiceMonitor selects exactly kop-metrics-service", hit.length === 1 && hit[0].metadata.name === "kop-metrics-service",
        hit.map((s) => s.metadata.name).join(", "));
  const svc = hit[0] || {metadata: {}, spec: {ports: []}};
  check("ServiceMonitor looks in the Service namespace", (sm.spec.namespaceSelector.matchNames || []).includes(svc.metadata.namespace) &&
        sm.metadata.namespace === svc.metadata.namespace);
  const ep = sm.spec.endpoints[0];
  const port = svc.spec.ports.find((p) => p.name === ep.port);
  check("endpoint port is the Service metrics port, path /metrics, http", !!port && ep.path === "/metrics" && ep.scheme === "http");
  const dep = docs.find((o) => o.kind === "Deployment");
  const cport = dep.spec.template.spec.containers[0].ports.find((p) => p.name === (port || {}).targetPort);
  const args = dep.spec.template.spec.containers[0].args || [];
  check("the Service port leads to the --metrics-bind-address port",
        !!cport && args.includes(`--metrics-bind-address=:${cport.containerPort}`));
  const cm = docs.find((o) => o.kind === "ConfigMap" && o.metadata.name === "kop-grafana-dashboard");
  check("dashboard ConfigMap holds kop-dashboard.json, labelled for the Grafana sidecar",
        !!cm && cm.data["kop-dashboard.json"] === fs.readFileSync(process.argv[2], "utf8") &&
        cm.metadata.labels.grafana_dashboard === "1");
' "$work/monitoring.yaml" "$comp/kop-dashboard.json" "$checks" >"$work/wiring.out" 2>&1 || true
count_lines "$work/wiring.out"
grep -q '^PASS ServiceMonitor selects' "$work/wiring.out" || grep -q '^FAIL ServiceMonitor selects' "$work/wiring.out" ||
  fail "wiring check did not run: $(tail -n 3 "$work/wiring.out")"

# ---- 4. the dashboard against kop's real metrics -----------------------------------
if [ ! -x "$kubesim" ] || [ ! -x "$kop" ]; then
  fail "kubesim or kop not built ($kubesim, $kop)"
  finish
fi
bash "$root/scripts/gen-certs.sh" "$work/certs" >/dev/null 2>&1 || {
  fail "gen-certs.sh"
  finish
}
"$kubesim" --listen 127.0.0.1:0 --kubeconfig-out "$work/kubeconfig" >"$work/kubesim.log" 2>&1 &
pids+=($!)
wait_for "$work/kubesim.log" '^https://' || {
  fail "kubesim did not start: $(tail -n 5 "$work/kubesim.log")"
  finish
}
export KUBECONFIG=$work/kubeconfig
k apply -f "$root/manifests/base/namespace.yaml" -f "$root/manifests/base/crd.yaml" >"$work/apply.log" 2>&1 ||
  fail "kubesim: apply namespace and CRD: $(cat "$work/apply.log")"
"$kop" --kubeconfig "$work/kubeconfig" --cert-dir "$work/certs" --webhook-host 127.0.0.1 --webhook-port 0 \
  --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 \
  --leader-elect --leader-election-namespace kop-system >"$work/kop.log" 2>&1 &
pids+=($!)
wait_for "$work/kop.log" '"msg":"serving webhook"' || {
  fail "kop did not start: $(tail -n 5 "$work/kop.log")"
  finish
}
port() { grep -o "\"msg\":\"$1\"[^}]*" "$work/kop.log" | grep -o '"port":[0-9]*' | head -n 1 | cut -d: -f2; }
wport=$(port "serving webhook")
mport=$(port "serving metrics")
# One conversion and one admission request, so that the per-request
# families have samples.
curl -s --cacert "$work/certs/ca.crt" -H 'Content-Type: application/json' \
  --data-binary @"$root/tests/data/vectors/k8s-docs-conversionreview-v1-request-two-objects.json" \
  "https://localhost:$wport/convert" -o /dev/null || true
curl -s --cacert "$work/certs/ca.crt" -H 'Content-Type: application/json' -d '{}' \
  "https://localhost:$wport/validate-mygroup-example-com-myresource" -o /dev/null || true
for _ in $(seq 50); do
  curl -s "http://127.0.0.1:$mport/metrics" >"$work/metrics.txt" || true
  grep -q '^leader_election_master_status{[^}]*} 1' "$work/metrics.txt" && break
  sleep 0.1
done
if grep -q '^# TYPE controller_runtime_webhook_requests_total' "$work/metrics.txt"; then
  pass "scraped kop's /metrics: $(grep -c '^# TYPE' "$work/metrics.txt") families"
else
  fail "scrape of kop's /metrics: $(head -c 300 "$work/metrics.txt")"
fi
node "$checks/dashboard.js" "$comp/kop-dashboard.json" "$work/metrics.txt" >"$work/dash.out" 2>&1 || true
count_lines "$work/dash.out"
node -e '
  const fs = require("fs");
  const d = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
  d.panels.find((p) => p.targets).targets[0].expr = "rate(controller_runtime_webhook_requests_totals[5m])";
  fs.writeFileSync(process.argv[2], JSON.stringify(d));
' "$comp/kop-dashboard.json" "$work/bad-dashboard.json"
node "$checks/dashboard.js" "$work/bad-dashboard.json" "$work/metrics.txt" >"$work/bad.out" 2>&1 || true
if grep -q '^FAIL .*not exported by kop: controller_runtime_webhook_requests_totals' "$work/bad.out"; then
  pass "the dashboard check rejects a metric kop does not export"
else
  fail "the dashboard check missed a made-up metric: $(grep FAIL "$work/bad.out" | head -n 3)"
fi

finish
