#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Development certificates for the webhook server.
#
#   scripts/gen-certs.sh [OUTDIR [CADIR]]
#
# Writes OUTDIR/tls.crt and OUTDIR/tls.key (cert-manager Secret layout), an
# ECDSA P-256 serving certificate signed by the CA in CADIR (ca.crt/ca.key,
# created there when missing; CADIR defaults to OUTDIR). OUTDIR defaults to
# certs/dev. SANs: localhost, 127.0.0.1, ::1 and the in-cluster service names.
# Extra DNS SANs may be given in $KOP_EXTRA_SANS (comma separated).
# Private keys are git-ignored.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$here/certs/dev}
cadir=${2:-$out}
days=${KOP_CERT_DAYS:-825}
mkdir -p "$out" "$cadir"
umask 077

if [ ! -s "$cadir/ca.crt" ] || [ ! -s "$cadir/ca.key" ]; then
  openssl ecparam -name prime256v1 -genkey -noout -out "$cadir/ca.key"
  openssl req -x509 -new -key "$cadir/ca.key" -sha256 -days 3650 \
    -subj "/O=kop development/CN=kop-dev-ca" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$cadir/ca.crt" 2>/dev/null
fi

sans="DNS:localhost,IP:127.0.0.1,IP:::1,DNS:kop-webhook-service,DNS:kop-webhook-service.kop-system,DNS:kop-webhook-service.kop-system.svc,DNS:kop-webhook-service.kop-system.svc.cluster.local"
if [ -n "${KOP_EXTRA_SANS:-}" ]; then
  IFS=',' read -r -a extra <<<"$KOP_EXTRA_SANS"
  for s in "${extra[@]}"; do sans="$sans,DNS:$s"; done
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
openssl ecparam -name prime256v1 -genkey -noout -out "$tmp/tls.key"
openssl req -new -key "$tmp/tls.key" -subj "/O=kop development/CN=kop-webhook-service.kop-system.svc" \
  -out "$tmp/tls.csr" 2>/dev/null
cat >"$tmp/ext.cnf" <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=$sans
EXT
openssl x509 -req -in "$tmp/tls.csr" -CA "$cadir/ca.crt" -CAkey "$cadir/ca.key" \
  -CAcreateserial -CAserial "$tmp/ca.srl" -days "$days" -sha256 \
  -extfile "$tmp/ext.cnf" -out "$tmp/tls.crt" 2>/dev/null
chmod 644 "$tmp/tls.crt"
[ "$cadir" = "$out" ] || cp "$cadir/ca.crt" "$out/ca.crt"
# Replace both files by rename so a watcher never sees half a pair.
mv -f "$tmp/tls.key" "$out/tls.key"
mv -f "$tmp/tls.crt" "$out/tls.crt"
echo "certificates in $out (CA: $cadir/ca.crt)"
