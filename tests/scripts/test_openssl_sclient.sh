#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The webhook's TLS policy as a real client sees it (openssl s_client):
# TLS 1.3 by default and TLS 1.2 on request, each with an AEAD suite and
# ALPN http/1.1; TLS 1.0 and 1.1 are refused; X25519 and P-256 and no
# other group; session tickets resume both versions, never with 0-RTT; a
# client offering only h2 never gets h2; in TLS 1.2 the key exchange group
# is the server's cheap preference.
set -uo pipefail
# kop stops at once on SIGTERM (the shutdown delay has its own suite)
export KOP_SHUTDOWN_DELAY=${KOP_SHUTDOWN_DELAY:-0}
root=${KOP_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
kop=${KOP_BIN:-$root/build/kop}
tmp=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

pass=0
fail=0
check() { # check NAME COND...
  local name=$1
  shift
  if "$@"; then
    echo "ok   - $name"
    pass=$((pass + 1))
  else
    echo "FAIL - $name"
    fail=$((fail + 1))
  fi
}

"$root/scripts/gen-certs.sh" "$tmp/certs" >/dev/null
"$kop" --webhook-only --cert-dir "$tmp/certs" --webhook-host 127.0.0.1 --webhook-port 0 \
  --metrics-bind-address 0 --health-probe-bind-address 0 >"$tmp/kop.log" 2>&1 &
pid=$!
port=
for _ in $(seq 1 600); do
  port=$(grep -o '"msg":"serving webhook"[^}]*' "$tmp/kop.log" 2>/dev/null |
    grep -o '"port":[0-9]*' | head -n 1 | cut -d: -f2)
  [ -n "$port" ] && break
  sleep 0.05
done
if [ -z "$port" ]; then
  echo "kop did not start:"
  cat "$tmp/kop.log"
  echo "0 passed, 1 failed"
  exit 1
fi

sclient() {
  timeout 10 openssl s_client -connect "127.0.0.1:$port" -servername localhost \
    -CAfile "$tmp/certs/ca.crt" "$@" </dev/null 2>&1
}

out=$(sclient -alpn http/1.1)
check "a default client negotiates TLS 1.3" grep -q '^New, TLSv1.3, Cipher is TLS_' <<<"$out"
check "TLS 1.3 handshake verifies against the dev CA" grep -q 'Verify return code: 0 (ok)' <<<"$out"
check "TLS 1.3: ALPN http/1.1 selected" grep -q 'ALPN protocol: http/1.1' <<<"$out"
check "TLS 1.3: X25519 key share taken (no HelloRetryRequest)" grep -E -q '(Server|Peer) Temp Key: X25519' <<<"$out"
for suite in TLS_AES_128_GCM_SHA256 TLS_CHACHA20_POLY1305_SHA256; do
  out=$(sclient -ciphersuites "$suite")
  check "TLS 1.3 suite $suite" grep -q "^New, TLSv1.3, Cipher is $suite" <<<"$out"
done
for suite in TLS_AES_256_GCM_SHA384 TLS_AES_128_CCM_SHA256; do
  out=$(sclient -ciphersuites "$suite")
  check "TLS 1.3 suite $suite not offered" grep -q 'Cipher is (NONE)' <<<"$out"
done
out=$(sclient)
check "TLS 1.3: OpenSSL's default order gets ChaCha20-Poly1305, not AES-256-GCM" \
  grep -q '^New, TLSv1.3, Cipher is TLS_CHACHA20_POLY1305_SHA256' <<<"$out"
out=$(sclient -groups P-256)
check "TLS 1.3 over P-256" grep -E -q '(Server|Peer) Temp Key: (ECDH, )?prime256v1' <<<"$out"
out=$(sclient -groups P-384:P-521:X448)
check "TLS 1.3: no group but X25519 and P-256" grep -q 'Cipher is (NONE)' <<<"$out"

# Session tickets, both versions. In TLS 1.3 the ticket comes after the
# handshake, so the client sends a request and reads the answer first.
request='GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n'
ticket() { # ticket FILE ARGS...: a session saved to FILE
  local f=$1
  shift
  printf "$request" | timeout 10 openssl s_client -connect "127.0.0.1:$port" -servername localhost \
    -CAfile "$tmp/certs/ca.crt" -ign_eof -sess_out "$f" "$@" 2>&1
}
out=$(ticket "$tmp/s13")
check "TLS 1.3: a ticket that allows no early data" grep -q 'Max Early Data: 0' <<<"$out"
out=$(sclient -sess_in "$tmp/s13")
check "TLS 1.3 session resumed from its ticket" grep -q '^Reused, TLSv1.3' <<<"$out"
printf 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n' >"$tmp/early"
out=$(sclient -sess_in "$tmp/s13" -early_data "$tmp/early")
check "TLS 1.3: no 0-RTT" bash -c '! grep -q "Early data was accepted" <<<"$1"' _ "$out"
out=$(ticket "$tmp/s12" -tls1_2)
check "TLS 1.2: a session ticket" grep -q 'TLS session ticket lifetime hint: 3600' <<<"$out"
out=$(sclient -tls1_2 -sess_in "$tmp/s12")
check "TLS 1.2 session resumed from its ticket" grep -q '^Reused, TLSv1.2' <<<"$out"

out=$(sclient -tls1_2 -alpn http/1.1)
check "TLS 1.2 handshake verifies against the dev CA" grep -q 'Verify return code: 0 (ok)' <<<"$out"
check "TLS 1.2 negotiated" grep -q 'Protocol *: TLSv1.2' <<<"$out"
check "ALPN http/1.1 selected" grep -q 'ALPN protocol: http/1.1' <<<"$out"
check "AEAD suite with ECDHE" grep -E -q 'Cipher *: ECDHE-(ECDSA|RSA)-(AES(128|256)-GCM-SHA(256|384)|CHACHA20-POLY1305)' <<<"$out"

# Key exchange: the server's preference (P-256) whatever order the client
# lists the groups in; mbedTLS's own default picked secp521r1 from a
# client offering it, at several times the handshake CPU. (In TLS 1.2 the
# client's groups also gate the ECDSA certificate's curve: a client must
# offer P-256 to use the dev P-256 certificate at all.)
# OpenSSL 3.0 (Debian 12) says "Server Temp Key", 3.5 (Debian 13) "Peer Temp Key".
grp() { grep -E -q "(Server|Peer) Temp Key: (ECDH, )?$1" <<<"$2"; }
out=$(sclient -tls1_2 -groups X25519:X448:P-521:P-384:P-256)
check "every group offered -> P-256" grp prime256v1 "$out"
out=$(sclient -tls1_2 -groups P-384:P-256)
check "P-384 listed before P-256 -> P-256" grp prime256v1 "$out"
out=$(sclient -tls1_2 -groups P-521:P-256)
check "P-521 listed before P-256 -> P-256" grp prime256v1 "$out"
out=$(sclient -tls1_2 -groups X25519:P-256)
check "X25519 listed before P-256 -> P-256" grp prime256v1 "$out"

# SECLEVEL=0 makes the client willing to speak the old versions, so a
# refusal comes from the server: it answers with a protocol_version alert
# and no cipher is agreed.
refused() { grep -q 'Cipher is (NONE)' <<<"$1" && grep -q 'no peer certificate available' <<<"$1"; }
out=$(sclient -tls1 -cipher 'DEFAULT@SECLEVEL=0')
check "TLS 1.0 refused" refused "$out"
check "TLS 1.0 refusal is a protocol_version alert" grep -q 'alert protocol version' <<<"$out"
out=$(sclient -tls1_1 -cipher 'DEFAULT@SECLEVEL=0')
check "TLS 1.1 refused" refused "$out"

out=$(sclient -tls1_2 -alpn h2)
check "a client offering only h2 does not get h2" bash -c '! grep -q "ALPN protocol: h2" <<<"$1"' _ "$out"
out=$(sclient -tls1_2 -alpn h2,http/1.1)
check "h2,http/1.1 offered -> http/1.1" grep -q 'ALPN protocol: http/1.1' <<<"$out"

out=$(sclient -tls1_2 -cipher 'AES128-GCM-SHA256')
check "static-RSA (non-ECDHE) suite refused" refused "$out"
out=$(sclient -tls1_2 -cipher 'ECDHE-ECDSA-AES128-SHA256')
check "CBC (non-AEAD) suite refused" refused "$out"

# The server still answers after all of that.
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$tmp/certs/ca.crt" \
  "https://localhost:$port/convert" -X POST -H 'Content-Type: application/json' -d '{}')
check "server still serving (POST /convert answers 400 for an empty review)" test "$code" = 400

kill -TERM "$pid"
wait "$pid"
rc=$?
pid=
check "SIGTERM exits 0" test "$rc" = 0

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
