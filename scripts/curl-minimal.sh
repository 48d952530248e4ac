#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# A minimal libcurl for kop's container image, built from Debian's own curl
# source package: the same version as the installed libcurl4-openssl-dev,
# with Debian's patches, configured for what kop uses and nothing else.
#
#   scripts/curl-minimal.sh CACHE_DIR
#
# Prints the install prefix (CACHE_DIR/curl-<Debian version>-<hash of this
# script>) on stdout; below it: lib/libcurl.a (static, -fPIC, one section
# per function so the linker's --gc-sections keeps only what kop calls),
# include/curl/, lib/pkgconfig/libcurl.pc (its Libs name mbedTLS, since there
# is no shared library to carry them) and share/doc/curl/copyright (the
# source package's debian/copyright: the license that goes into the image).
# A second run with the same Debian version and the same script prints the
# cached prefix at once. Exits non-zero, the reason on stderr, when the
# source cannot be fetched or built (scripts/image-build.sh then falls back
# to Debian's libcurl); the full log is CACHE_DIR/curl-build.log.
#
# Why: Debian's libcurl4 (OpenSSL flavour) loads libcrypto, libssl, the
# krb5/GSS-API stack, OpenLDAP, SASL, libssh2, librtmp, brotli, zstd,
# nghttp2, libpsl, libidn2 and zlib: ~10 MB of the image for protocols and
# features kop never asks for. kop speaks HTTP/1.1 and HTTPS to the API
# server and to webhooks (client certificates and CAs given as blobs or
# files, CURLOPT_CONNECT_TO, proxies from the environment), so this build
# keeps HTTP, HTTPS through mbedTLS (the 3.6 LTS kop links anyway), proxy
# support, IPv6 and the threaded resolver, and leaves out every other
# protocol, GSS-API, HTTP/2, IDN, PSL, compression (kop sets no
# CURLOPT_ACCEPT_ENCODING, so libcurl never decodes a body), cookies, HSTS,
# alt-svc, DoH, MIME, netrc, NTLM and Unix sockets. No default CA
# directory (Debian's has /etc/ssl/certs): the mbedTLS backend fails every
# handshake when that directory is missing, even with a CA given, and the
# image has none (the default bundle file is read only when no CA is given).
#
# How, as debian/rules does for the OpenSSL flavour: `apt-get source`
# (applies debian/patches), the last two patches of the series (90_gnutls,
# 99_nss: the other flavours' library names) taken back out, ./buildconf,
# the patched ltmain.sh put back, configure with dpkg-buildflags' hardening
# flags, plus stack clash protection and CET, which Debian 12's lack
# (Debian's -D_DEB_HOST_ARCH and -DCURL_PATCHSTAMP only matter to the
# NSS backend and the curl tool, which are not built). apt runs with a private configuration
# below CACHE_DIR (deb-src lines for <codename>, -updates and -security on
# the mirrors of this machine's own apt sources, or $KOP_DEBIAN_MIRROR and
# $KOP_DEBIAN_SECURITY_MIRROR: scripts/lib/debsrc.sh); /etc/apt is not
# touched. mbedTLS is the one pkg-config finds (Debian 13's package, or on
# Debian 12 scripts/mbedtls.sh's build in /usr/local), named by its prefix
# so that Debian 12's own 2.28, if installed, is never picked. Tools:
# apt-get, dpkg-source (dpkg-dev), patch, autoreconf/libtoolize (autoconf,
# automake, libtool), make, cc: `scripts/install-deps.sh --image` installs
# them.
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 CACHE_DIR" >&2
  exit 2
fi
mkdir -p "$1"
cache=$(cd "$1" && pwd)
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
log=$cache/curl-build.log
jobs=${KOP_JOBS:-2}

die() {
  echo "curl-minimal: $*" >&2
  exit 1
}

version=$(dpkg-query -W -f='${Version}' libcurl4-openssl-dev 2>/dev/null) ||
  die "libcurl4-openssl-dev is not installed (its version is the one to build)"
[ -n "$version" ] || die "libcurl4-openssl-dev is not installed"
upstream=${version%%-*}
upstream=${upstream#*:}
# shellcheck source=scripts/lib/debsrc.sh
. "$(dirname "$self")/lib/debsrc.sh"
mbedtls_version=$(pkg-config --modversion mbedtls 2>/dev/null) ||
  die "pkg-config finds no mbedTLS (scripts/install-deps.sh installs 3.6)"
mbedtls_prefix=$(pkg-config --variable=prefix mbedtls)
# The build depends on this script, the source helper and the mbedTLS it links.
prefix=$cache/curl-$version-$(cat "$self" "$(dirname "$self")/lib/debsrc.sh" |
  sha256sum | cut -c1-8)-mbedtls$mbedtls_version
if [ -f "$prefix/.built" ]; then
  echo "$prefix"
  exit 0
fi

for tool in apt-get dpkg-source patch autoreconf libtoolize make cc dpkg-buildflags pkg-config; do
  command -v "$tool" >/dev/null || die "$tool is missing (scripts/install-deps.sh --image installs it)"
done
codename=$(sed -n "s/^VERSION_CODENAME=//p" /etc/os-release | tr -d '"')
[ -n "$codename" ] || die "no VERSION_CODENAME in /etc/os-release (not Debian?)"

: >"$log"

# ---- the source, through a private apt configuration -----------------------------
debsrc_setup "$cache/apt" "$codename" || die "cannot fetch the source lists (log: $log)"

work=$cache/curl-work
rm -rf "$work"
mkdir -p "$work"
debsrc_get "$work" "curl=$version"
src=$work/curl-$upstream
[ -d "$src/debian/patches" ] || die "apt-get source left no $src (log: $log)"

# debian/rules: "pop the last patch (nss)", "pop the second last (gnutls)".
series=$(grep -v '^[[:space:]]*#' "$src/debian/patches/series" | grep -v '^[[:space:]]*$')
[ "$(tail -n 2 <<<"$series" | tr '\n' ' ')" = "90_gnutls.patch 99_nss.patch " ] ||
  die "debian/patches/series no longer ends with 90_gnutls.patch 99_nss.patch; see debian/rules"
for p in 99_nss.patch 90_gnutls.patch; do
  run "reverting $p" patch -d "$src" -R -p1 --no-backup-if-mismatch -i "debian/patches/$p"
done
cp "$src/ltmain.sh" "$work/ltmain.sh.debian"
(cd "$src" && run "buildconf" ./buildconf)
cp "$work/ltmain.sh.debian" "$src/ltmain.sh"

# curl 7.88's mbedTLS backend calls mbedtls_ssl_setup() before it gives
# the configuration its RNG; mbedTLS 3.6 checks for one there and fails
# every connection ("mbedTLS: ssl_init failed"; later curl releases
# configure first). kop's one change to curl's source: the RNG is set
# before that call too (the later call sets the same again).
vtls=$src/lib/vtls/mbedtls.c
anchor='  mbedtls_ssl_init(&backend->ssl);'
[ "$(grep -c -F -x "$anchor" "$vtls")" = 1 ] ||
  die "lib/vtls/mbedtls.c no longer has one '$anchor'; see this script's RNG fix"
sed -i "s|^  mbedtls_ssl_init(&backend->ssl);\$|  mbedtls_ssl_conf_rng(\&backend->config, mbedtls_ctr_drbg_random, \&backend->ctr_drbg);\n&|" "$vtls"
grep -q -B1 -F -x "$anchor" "$vtls" && grep -B1 -F -x "$anchor" "$vtls" | grep -q 'mbedtls_ssl_conf_rng' ||
  die "the RNG fix did not apply to lib/vtls/mbedtls.c"

# ---- configure and build --------------------------------------------------------
debsrc_buildflags hardening=+all
features=(
  --disable-shared --enable-static --with-pic
  --enable-http --enable-proxy --enable-ipv6 --enable-threaded-resolver
  --with-mbedtls="$mbedtls_prefix" --without-openssl --without-gnutls
  --with-ca-bundle=/etc/ssl/certs/ca-certificates.crt --without-ca-path
  --disable-ftp --disable-file --disable-ldap --disable-ldaps --disable-rtsp --disable-dict
  --disable-telnet --disable-tftp --disable-pop3 --disable-imap --disable-smb --disable-smtp
  --disable-gopher --disable-mqtt --disable-websockets
  --disable-ntlm --disable-ntlm-wb --disable-tls-srp --disable-unix-sockets --disable-cookies
  --disable-doh --disable-mime --disable-netrc --disable-alt-svc --disable-hsts
  --disable-dnsshuffle --disable-get-easy-options --disable-progress-meter --disable-headers-api
  --disable-manual --disable-libcurl-option
  --without-zlib --without-brotli --without-zstd --without-nghttp2 --without-libpsl
  --without-libidn2 --without-libssh2 --without-libssh --without-librtmp --without-gssapi
  --without-zsh-functions-dir --without-fish-functions-dir
)
mkdir -p "$work/build"
# Builds for other Debian versions or an older script are stale.
find "$cache" -mindepth 1 -maxdepth 1 -type d -name 'curl-[0-9]*' -exec rm -rf {} +
(cd "$work/build" && run configure "$src/configure" --prefix="$prefix" \
  --disable-dependency-tracking "${features[@]}" \
  CFLAGS="$CFLAGS -ffunction-sections -fdata-sections" \
  CPPFLAGS="$CPPFLAGS" \
  LDFLAGS="$LDFLAGS")
grep -q '^ *Protocols: *HTTP HTTPS *$' "$log" || die "configure did not settle on HTTP and HTTPS only (log: $log)"
grep -q '^ *SSL: *enabled (mbedTLS)' "$log" || die "configure did not pick mbedTLS (log: $log)"
run "make" make -C "$work/build/lib" -j"$jobs"
# Installed under a temporary name: a prefix exists only when complete.
for d in lib include; do
  run "install ($d)" make -C "$work/build/$d" install prefix="$prefix.tmp"
done
run "install (libcurl.pc)" make -C "$work/build" install-pkgconfigDATA prefix="$prefix.tmp"
sed -i "s|$prefix.tmp|$prefix|g" "$prefix.tmp/lib/pkgconfig/libcurl.pc"
# configure names mbedTLS by -l alone: with Debian 12's own libmbedtls-dev
# installed, a linker would take its 2.28 libmbedtls.so from /usr/lib
# before the 3.6 build in /usr/local. Its directory goes in front.
mbedtls_libdir=$(pkg-config --variable=libdir mbedtls)
sed -i "s|-lmbedtls -lmbedx509 -lmbedcrypto|-L$mbedtls_libdir -lmbedtls -lmbedx509 -lmbedcrypto|g" \
  "$prefix.tmp/lib/pkgconfig/libcurl.pc"
rm -f "$prefix.tmp/lib/libcurl.la"
install -D -m 0644 "$src/debian/copyright" "$prefix.tmp/share/doc/curl/copyright"
mv "$prefix.tmp" "$prefix"
touch "$prefix/.built"
rm -rf "$work"
echo "$prefix"
