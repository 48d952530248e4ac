#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The webhook port's TLS as outside tools judge it (docs/security.md):
#
#   1. testssl.sh (Debian's package) against kop with the development
#      certificates (scripts/gen-certs.sh): the protocols offered (the
#      target: TLS 1.2 and 1.3 and nothing else), and every finding rated
#      MEDIUM or worse (the target: none). testssl.sh's JSON is kept.
#   2. A Go crypto/tls client with its default configuration (what the
#      kube-apiserver's webhook client is): the version, suite and group it
#      negotiates (the target: TLS 1.3), then the same client limited to
#      TLS 1.2, and a resumption with a session cache for each.
#
#   scripts/bench-tls.sh [OUT_DIR]   (default: a temporary directory)
#
# The findings that rate the development CA itself (self-signed, not in
# any trust store) are reported apart: a cluster's certificate comes from
# cert-manager or the cluster's own CA. Installs what is missing
# (testssl.sh, golang-go, bsdextrautils and dnsutils for testssl.sh).
# KOP_BIN: the binary to check (default: build-release/kop, built here).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# shellcheck source=scripts/lib/bench-common.sh
. scripts/lib/bench-common.sh
bench_usage_line="usage: scripts/bench-tls.sh [OUT_DIR]"
bench_no_help "$@"
[ $# -le 1 ] || bench_usage "one argument at most"
bench_need_tools testssl:testssl.sh go:golang-go hexdump:bsdextrautils dig:dnsutils jq:jq openssl:openssl
bench_kop
bench_scratch
out=${1:-$tmp/out}
mkdir -p "$out"

scripts/gen-certs.sh "$tmp/certs" >/dev/null
port=$(bench_free_port)
KOP_SHUTDOWN_DELAY=0 "$kop" --webhook-only --cert-dir "$tmp/certs" --webhook-host 127.0.0.1 \
  --webhook-port "$port" --metrics-bind-address 0 --health-probe-bind-address 0 \
  >"$tmp/kop.log" 2>&1 &
kpid=$!
for _ in $(seq 1 100); do
  curl -s -o /dev/null --cacert "$tmp/certs/ca.crt" "https://localhost:$port/healthz" && break
  sleep 0.05
done

echo "kop's webhook TLS as testssl.sh and a Go client see it"
echo "  date:     $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "  machine:  $(bench_machine)"
echo "  kop:      $("$kop" --version | paste -sd ';' | sed 's/;/; /g')"
echo "  testssl:  $(dpkg-query -W -f='${Version}' testssl.sh 2>/dev/null)"
echo "  go:       $(go version | awk '{ print $3 }')"
echo

# ---- 1. testssl.sh ------------------------------------------------------------
json=$out/testssl.json
rm -f "$json" # testssl.sh appends to an existing file
testssl --quiet --color 0 --warnings off --openssl-timeout 5 --jsonfile "$json" \
  "localhost:$port" >"$out/testssl.txt" 2>&1 || true
[ -s "$json" ] || die_msg="testssl.sh wrote no JSON (see $out/testssl.txt)"
if [ -n "${die_msg:-}" ]; then
  echo "bench-tls: $die_msg" >&2
  exit 1
fi
offered() { jq -r --arg id "$1" '.[] | select(.id == $id) | .finding' "$json"; }
echo "protocols (testssl.sh):"
for p in SSLv2 SSLv3 TLS1 TLS1_1 TLS1_2 TLS1_3; do
  printf '  %-8s %s\n' "$p" "$(offered "$p")"
done
# The development CA is nobody's: its findings are about the certificate
# given, not about kop.
ca_ids=$'\t(cert_chain_of_trust|cert_trust|cert_revocation|cert_caIssuers|cert_crlDistributionPoints|cert_ocspURL|OCSP_stapling|cert_mustStapleExtension|DNS_CAArecord|cert_certificateTransparency|cert_validityPeriod|cert_expirationStatus)\t'
echo "findings MEDIUM or worse:"
jq -r '.[] | select(.severity == "MEDIUM" or .severity == "HIGH" or .severity == "CRITICAL") |
  "\(.severity)\t\(.id)\t\(.finding)"' "$json" | grep -E -v "$ca_ids" | sed 's/^/  /' || echo "  none"
echo "findings about the development certificate itself (not counted):"
jq -r '.[] | select(.severity == "MEDIUM" or .severity == "HIGH" or .severity == "CRITICAL" or .severity == "LOW") |
  "\(.severity)\t\(.id)\t\(.finding)"' "$json" | grep -E "$ca_ids" | sed 's/^/  /' || echo "  none"
echo "suites offered (testssl.sh, server order):"
jq -r '.[] | select(.id | test("^cipher_order|^cipherorder_")) | "  \(.id): \(.finding)"' "$json"
echo

# ---- 2. a Go client with default settings -------------------------------------
mkdir -p "$tmp/goclient"
cat >"$tmp/goclient/main.go" <<'GO'
package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

var versions = map[uint16]string{tls.VersionTLS12: "TLS 1.2", tls.VersionTLS13: "TLS 1.3"}

func dial(addr string, cfg *tls.Config) tls.ConnectionState {
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		os.Exit(1)
	}
	// a request and a byte of the answer: a TLS 1.3 ticket comes after the handshake
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
	b := make([]byte, 1)
	c.Read(b)
	st := c.ConnectionState()
	c.Close()
	return st
}

func main() {
	pem, err := os.ReadFile(os.Args[2])
	if err != nil {
		panic(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	for _, max := range []uint16{0, tls.VersionTLS12} {
		// Go's defaults, as the apiserver's webhook client has them, plus
		// a session cache for the second dial.
		cfg := &tls.Config{RootCAs: pool, ServerName: "localhost", MaxVersion: max,
			ClientSessionCache: tls.NewLRUClientSessionCache(4)}
		first := dial(os.Args[1], cfg)
		second := dial(os.Args[1], cfg)
		name := "default"
		if max != 0 {
			name = "max TLS 1.2"
		}
		fmt.Printf("  %-12s %s, %s; resumed on the next dial: %v\n", name+":",
			versions[first.Version], tls.CipherSuiteName(first.CipherSuite), second.DidResume)
	}
}
GO
(cd "$tmp/goclient" && GOCACHE=$tmp/gocache go run main.go "127.0.0.1:$port" "$tmp/certs/ca.crt") \
  >"$out/go.txt" 2>&1 || {
  cat "$out/go.txt" >&2
  exit 1
}
echo "Go crypto/tls client ($(go version | awk '{ print $3 }')):"
cat "$out/go.txt"
echo "  key exchange group offered first by Go, taken by kop: $(timeout 10 openssl s_client \
  -connect "127.0.0.1:$port" -groups X25519:P-256 </dev/null 2>/dev/null |
  sed -E -n 's/^(Server|Peer) Temp Key: //p' | head -n1)"
echo
echo "testssl.sh's full report: $out/testssl.txt (JSON: $json)"
