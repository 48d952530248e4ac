# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# The ConversionReviews the webhook benchmarks send (sourced, not run):
#
#   review N
#       prints a ConversionReview (apiextensions.k8s.io/v1, desired
#       mygroup.example.com/v2, uid 0b6d2b5e-bench-4c1d-9e0f-<N, 12 digits>)
#       of N ~1.7 KB MyResource v1 objects: labels, annotations,
#       managedFields, spec (four image reference shapes), status with two
#       conditions; object i is the same in every review. The word
#       "Success" never appears in it.
#   review_lua DIR N
#       writes DIR/post<N>.lua, a wrk script that POSTs DIR/r<N>.json
#       (written by the caller, e.g. with review N) and counts the
#       responses that are not 200 with "Success"; at the end wrk prints
#       "bad responses: <count>".

review() { # review N: a ConversionReview v1 -> v2 of N MyResource v1 objects
  awk -v n="$1" '
  function hex64(seed,   s, k) {
    s = ""
    for (k = 1; k <= 8; k++) s = s sprintf("%08x", (seed * 2654435761 + k * 40503) % 4294967296)
    return s
  }
  BEGIN {
    split("ClusterIP NodePort LoadBalancer", stypes, " ")
    printf "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\",\"request\":{\"uid\":\"0b6d2b5e-bench-4c1d-9e0f-%012d\",\"desiredAPIVersion\":\"mygroup.example.com/v2\",\"objects\":[", n
    for (i = 0; i < n; i++) {
      name = sprintf("web-%05d", i)
      ns = sprintf("team-%02d", i % 16)
      m = i % 4
      if (m == 0) image = sprintf("registry.example.com:5000/payments/web:1.%d.%d", i % 50, i % 7)
      else if (m == 1) image = sprintf("docker.io/library/nginx:1.25.%d", i % 10)
      else if (m == 2) image = "ghcr.io/example/web@sha256:" hex64(i)
      else image = sprintf("quay.io/example/web:v2.%d@sha256:", i % 30) hex64(i + 7)
      replicas = i % 10 + 1
      ready = replicas - (i % 3 == 0 ? 1 : 0)
      port = 8080 + i % 3
      stype = stypes[i % 3 + 1]
      gen = i % 7 + 1
      day = i % 28 + 1; hh = i % 24; mm = i % 60; ss = (i * 7) % 60
      if (i) printf ","
      printf "{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\",\"metadata\":{"
      printf "\"name\":\"%s\",\"namespace\":\"%s\",\"uid\":\"6f1c2f7e-%04x-4%03x-8%03x-%012d\",\"resourceVersion\":\"%d\",\"generation\":%d,\"creationTimestamp\":\"2026-01-%02dT%02d:%02d:%02dZ\",", name, ns, i % 65536, i % 4096, (i * 7) % 4096, i, 4810000 + i * 3, gen, day, hh, mm, ss
      printf "\"labels\":{\"app.kubernetes.io/name\":\"%s\",\"app.kubernetes.io/instance\":\"%s-prod\"},", name, name
      printf "\"annotations\":{\"example.com/owner\":\"payments-team@example.com\",\"example.com/runbook\":\"https://runbooks.example.com/storefront/web\",\"example.com/change-ticket\":\"CHG-%07d\"},", 1200000 + i
      printf "\"managedFields\":[{\"manager\":\"kubectl-client-side-apply\",\"operation\":\"Update\",\"apiVersion\":\"mygroup.example.com/v1\",\"time\":\"2026-01-%02dT%02d:%02d:%02dZ\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:metadata\":{\"f:labels\":{\".\":{},\"f:app.kubernetes.io/name\":{}}},\"f:spec\":{\".\":{},\"f:image\":{},\"f:port\":{},\"f:replicas\":{},\"f:serviceType\":{}}}},", day, hh, mm, ss
      printf "{\"manager\":\"kop\",\"operation\":\"Update\",\"apiVersion\":\"mygroup.example.com/v1\",\"time\":\"2026-01-%02dT%02d:%02d:%02dZ\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:status\":{\".\":{},\"f:conditions\":{},\"f:observedGeneration\":{},\"f:readyReplicas\":{},\"f:replicas\":{}}},\"subresource\":\"status\"}]},", day, (i + 1) % 24, mm, ss
      printf "\"spec\":{\"replicas\":%d,\"image\":\"%s\",\"port\":%d,\"serviceType\":\"%s\"},", replicas, image, port, stype
      printf "\"status\":{\"observedGeneration\":%d,\"replicas\":%d,\"readyReplicas\":%d,\"conditions\":[", gen, replicas, ready
      printf "{\"type\":\"Available\",\"status\":\"True\",\"lastTransitionTime\":\"2026-01-%02dT%02d:%02d:%02dZ\",\"reason\":\"MinimumReplicasAvailable\",\"message\":\"Deployment has minimum availability.\"},", day, (i + 1) % 24, mm, ss
      printf "{\"type\":\"Progressing\",\"status\":\"True\",\"lastTransitionTime\":\"2026-01-%02dT%02d:%02d:%02dZ\",\"reason\":\"NewReplicaSetAvailable\",\"message\":\"ReplicaSet \\\"%s-7d9f8c6b5\\\" has successfully progressed.\"}]}}", day, hh, mm, ss, name
    }
    printf "]}}"
  }'
}

review_lua() {
  cat >"$1/post$2.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = assert(io.open("$1/r$2.json", "rb"))
wrk.body = f:read("*a")
f:close()
local threads = {}
function setup(thread) table.insert(threads, thread) end
bad = 0
function response(status, headers, body)
  if status ~= 200 or not string.find(body, '"Success"', 1, true) then bad = bad + 1 end
end
function done(summary, latency, requests)
  local n = 0
  for _, t in ipairs(threads) do n = n + t:get("bad") end
  io.write(string.format("bad responses: %d\\n", n))
end
LUA
}
