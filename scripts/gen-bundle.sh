#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Generates kop's OLM bundle from the kustomize output, so it never drifts
# from manifests/:
#
#   scripts/gen-bundle.sh [OUTDIR]      default: bundle/
#
# Writes OUTDIR/manifests/ (ClusterServiceVersion, CRD, metrics Service),
# OUTDIR/metadata/annotations.yaml and OUTDIR/bundle.Dockerfile
# (scripts/bundle/gen.js says what comes from where). KOP_BUNDLE_IMAGE sets
# the operator image (default: the kustomization's, kop:<version>).
# Needs kubectl and Node.js with the packages of tests/manifests (installed
# here from its package-lock.json when missing, as the manifest test does).
#
# Build the bundle image:  buildah bud -f bundle/bundle.Dockerfile -t kop-bundle:0.1.0 bundle/
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$top/bundle}
mods=$top/tests/manifests

want=$(sha256sum "$mods/package-lock.json" | cut -d' ' -f1)
have=$(cat "$mods/node_modules/.kop-lock-sha256" 2>/dev/null || true)
if [ "$want" != "$have" ]; then
  (cd "$mods" && npm ci --no-audit --no-fund --loglevel=error) >&2
  echo "$want" >"$mods/node_modules/.kop-lock-sha256"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
kubectl --cache-dir "$work/cache" kustomize "$top/manifests" >"$work/rendered.yaml"
NODE_PATH=$mods/node_modules node "$top/scripts/bundle/gen.js" "$work/rendered.yaml" "$work/bundle"
rm -rf "$out/manifests" "$out/metadata" "$out/bundle.Dockerfile"
mkdir -p "$out"
cp -r "$work/bundle/." "$out/"
echo "gen-bundle: $(find "$out" -type f | wc -l) files in $out"
