#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# mbedTLS 3.6 LTS for a Debian whose own libmbedtls-dev is older (Debian 12
# ships the 2.28 branch, end of life since 2024): builds Debian 13's
# `mbedtls` source package (3.6.x, with Debian's patches and security
# fixes) with a configuration made for kop and installs it below PREFIX,
# where a plain `meson setup` finds it through pkg-config.
#
#   scripts/mbedtls.sh [--check] [PREFIX]     PREFIX defaults to /usr/local
#
# What lands below PREFIX: include/mbedtls, include/psa, lib/libmbedtls.a,
# lib/libmbedx509.a, lib/libmbedcrypto.a (static, -fPIC: kop is a PIE),
# lib/pkgconfig/mbed{tls,x509,crypto}.pc, share/doc/mbedtls-kop/copyright
# (Debian's debian/copyright, the license that goes into the image) and
# share/doc/mbedtls-kop/stamp (the Debian version and a hash of this
# script). Static, so the binary carries its TLS library and nothing in
# the system's library path competes with Debian's own libmbedtls14.
#
# Quick when current: with the same script, a stamp younger than a day is
# taken as is; an older one makes the script look up the newest version of
# the package in Debian 13 (so a security release is picked up within a
# day) and rebuild only if it changed. If that look-up fails (no network)
# the installed build is kept, with a warning. --check only says whether a
# build is installed and current (exit 0) or not (exit 1).
#
# The configuration (kop_config below): Debian's changes (threading with
# pthreads: kop shares the DRBG and PSA keys between threads; deprecation
# warnings, so kop's -Werror build uses no deprecated call), and on top of
# mbedTLS's defaults:
#   kept    TLS 1.2 and 1.3, both as server (the webhook port) and client
#           (the self-check, kubesim's webhook client, the image's libcurl);
#           ECDHE with ECDSA or RSA certificates (cert-manager issues RSA by
#           default); TLS 1.3 ephemeral and PSK-ephemeral key exchange (the
#           latter for ticket resumption); session tickets; AES-GCM,
#           ChaCha20-Poly1305; X25519, P-256, P-384, P-521; X.509 parsing
#           and writing (certgen), CRLs (libcurl).
#   dropped DTLS and its cookies, SRTP and connection IDs; renegotiation;
#           key exchanges without forward secrecy (static RSA, static ECDH)
#           and the PSK and DHE ones, TLS 1.3 PSK without (EC)DHE; 0-RTT
#           (mbedTLS's default already); DES, ARIA, Camellia, CCM;
#           RIPEMD-160; finite-field DH; the brainpool, secp192/224 and
#           Koblitz curves and Curve448; the session cache (tickets
#           instead); context serialisation; the self tests.
#   speed   on x86_64 -maes -mpclmul, so the AES-NI and PCLMULQDQ code is
#           built from intrinsics rather than mbedTLS's inline assembly
#           (mbedTLS still checks the CPU at run time before it uses them;
#           the record crypto figures are in docs/performance.md).
# Compiler flags are Debian's, from dpkg-buildflags with hardening=+all,
# plus stack clash protection and CET where dpkg does not add them.
#
# The source comes through a private apt configuration with deb-src lines
# for Debian 13 (trixie, trixie-updates, trixie-security) on the mirrors of
# this machine's own apt sources (scripts/lib/debsrc.sh); /etc/apt is not
# touched. Tools: apt-get, dpkg-source (dpkg-dev), cmake, python3 (the
# source's scripts/config.py), make, cc: scripts/install-deps.sh installs
# them before it runs this. The log of the last build is
# $KOP_CACHE/mbedtls-build.log ($KOP_CACHE: ~/.cache/kop).
set -euo pipefail

check=0
if [ "${1:-}" = --check ]; then
  check=1
  shift
fi
if [ $# -gt 1 ] || [[ ${1:-} == -* ]]; then
  echo "usage: $0 [--check] [PREFIX]" >&2
  exit 2
fi
prefix=${1:-/usr/local}
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
# shellcheck source=scripts/lib/debsrc.sh
. "$(dirname "$self")/lib/debsrc.sh"

suite=${KOP_MBEDTLS_SUITE:-trixie}
cache=${KOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kop}
mkdir -p "$cache"
log=$cache/mbedtls-build.log
jobs=${KOP_JOBS:-$(nproc 2>/dev/null || echo 2)}
doc=$prefix/share/doc/mbedtls-kop
stamp=$doc/stamp
hash=$(cat "$self" "$(dirname "$self")/lib/debsrc.sh" | sha256sum | cut -c1-12)

die() {
  echo "mbedtls: $*" >&2
  exit 1
}

installed_version=
if [ -f "$stamp" ] && [ -f "$prefix/lib/libmbedtls.a" ] &&
  [ "$(sed -n 's/^script //p' "$stamp")" = "$hash" ]; then
  installed_version=$(sed -n 's/^version //p' "$stamp")
fi
if [ "$check" = 1 ]; then
  [ -n "$installed_version" ] && exit 0
  exit 1
fi
if [ -n "$installed_version" ] && [ -n "$(find "$stamp" -mmin -1440)" ]; then
  exit 0
fi

for tool in apt-get apt-cache dpkg-source cmake python3 make cc dpkg-buildflags; do
  command -v "$tool" >/dev/null || die "$tool is missing (scripts/install-deps.sh installs it)"
done

: >"$log"
if ! debsrc_setup "$cache/apt-$suite" "$suite"; then
  if [ -n "$installed_version" ]; then
    echo "mbedtls: WARNING: cannot look up Debian's mbedtls (above); keeping the installed $installed_version" >&2
    exit 0
  fi
  die "cannot fetch Debian $suite's source lists"
fi
version=$(debsrc_version mbedtls)
[ -n "$version" ] || die "no mbedtls source package in Debian $suite"
case $version in
  3.6.*) ;;
  *) die "Debian $suite's mbedtls is $version, not the 3.6 LTS branch kop is written for" ;;
esac
if [ "$version" = "$installed_version" ]; then
  touch "$stamp"
  exit 0
fi

echo "mbedtls: building mbedTLS $version (Debian $suite's source) into $prefix" >&2
work=$(mktemp -d "$cache/mbedtls-work.XXXXXX")
trap 'rm -rf "$work"' EXIT
debsrc_get "$work" "mbedtls=$version"
src=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'mbedtls-*' | head -n 1)
[ -n "$src" ] && [ -f "$src/include/mbedtls/mbedtls_config.h" ] || die "apt-get source left no source tree (log: $log)"

# ---- kop's configuration ---------------------------------------------------------
kop_set=(
  MBEDTLS_THREADING_C MBEDTLS_THREADING_PTHREAD MBEDTLS_DEPRECATED_WARNING
)
kop_unset=(
  MBEDTLS_SSL_PROTO_DTLS MBEDTLS_SSL_DTLS_ANTI_REPLAY MBEDTLS_SSL_DTLS_HELLO_VERIFY
  MBEDTLS_SSL_DTLS_CLIENT_PORT_REUSE MBEDTLS_SSL_DTLS_CONNECTION_ID
  MBEDTLS_SSL_DTLS_CONNECTION_ID_COMPAT MBEDTLS_SSL_DTLS_SRTP MBEDTLS_SSL_COOKIE_C
  MBEDTLS_SSL_RENEGOTIATION MBEDTLS_SSL_CONTEXT_SERIALIZATION MBEDTLS_SSL_CACHE_C
  MBEDTLS_SSL_EARLY_DATA
  MBEDTLS_KEY_EXCHANGE_PSK_ENABLED MBEDTLS_KEY_EXCHANGE_DHE_PSK_ENABLED
  MBEDTLS_KEY_EXCHANGE_ECDHE_PSK_ENABLED MBEDTLS_KEY_EXCHANGE_RSA_PSK_ENABLED
  MBEDTLS_KEY_EXCHANGE_RSA_ENABLED MBEDTLS_KEY_EXCHANGE_DHE_RSA_ENABLED
  MBEDTLS_KEY_EXCHANGE_ECDH_ECDSA_ENABLED MBEDTLS_KEY_EXCHANGE_ECDH_RSA_ENABLED
  MBEDTLS_KEY_EXCHANGE_ECJPAKE_ENABLED MBEDTLS_ECJPAKE_C
  MBEDTLS_SSL_TLS1_3_KEY_EXCHANGE_MODE_PSK_ENABLED
  MBEDTLS_DES_C MBEDTLS_ARIA_C MBEDTLS_CAMELLIA_C MBEDTLS_CCM_C MBEDTLS_RIPEMD160_C
  MBEDTLS_DHM_C
  MBEDTLS_ECP_DP_SECP192R1_ENABLED MBEDTLS_ECP_DP_SECP224R1_ENABLED
  MBEDTLS_ECP_DP_SECP192K1_ENABLED MBEDTLS_ECP_DP_SECP224K1_ENABLED
  MBEDTLS_ECP_DP_SECP256K1_ENABLED MBEDTLS_ECP_DP_BP256R1_ENABLED
  MBEDTLS_ECP_DP_BP384R1_ENABLED MBEDTLS_ECP_DP_BP512R1_ENABLED
  MBEDTLS_ECP_DP_CURVE448_ENABLED
  MBEDTLS_SELF_TEST
)
for o in "${kop_set[@]}"; do
  run "config.py set $o" python3 "$src/scripts/config.py" -f "$src/include/mbedtls/mbedtls_config.h" set "$o"
done
for o in "${kop_unset[@]}"; do
  run "config.py unset $o" python3 "$src/scripts/config.py" -f "$src/include/mbedtls/mbedtls_config.h" unset "$o"
done

# ---- build and install -----------------------------------------------------------
# AES-NI and PCLMULQDQ from intrinsics on x86_64 (see the header).
aes=()
[ "$(uname -m)" != x86_64 ] || aes=(-maes -mpclmul)
debsrc_buildflags 'hardening=+all optimize=-lto' "${aes[@]}"
run cmake cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=None \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib \
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DUSE_STATIC_MBEDTLS_LIBRARY=ON -DUSE_SHARED_MBEDTLS_LIBRARY=OFF \
  -DENABLE_PROGRAMS=OFF -DENABLE_TESTING=OFF -DMBEDTLS_FATAL_WARNINGS=OFF \
  -DCMAKE_C_FLAGS="$CFLAGS $CPPFLAGS"
run make cmake --build "$work/build" -j "$jobs"

# The previous build's files go first, so no stale header outlives it.
if [ -f "$doc/files" ]; then
  while IFS= read -r f; do
    case $f in "$prefix"/*) rm -f "$f" ;; esac
  done <"$doc/files"
fi
rm -rf "$prefix/include/mbedtls" "$prefix/include/psa" "$prefix/include/everest"
run install cmake --install "$work/build"
mkdir -p "$doc"
install -m 0644 "$src/debian/copyright" "$doc/copyright"
cp "$work/build/install_manifest.txt" "$doc/files"
printf 'version %s\nscript %s\nsuite %s\n' "$version" "$hash" "$suite" >"$stamp"
echo "mbedtls: mbedTLS $version installed below $prefix" >&2
