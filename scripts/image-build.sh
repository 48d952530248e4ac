#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The kop binary of the container image, built the same way by
# scripts/image.sh (buildah) and by the Dockerfile's build stage:
#
#   scripts/image-build.sh BUILD_DIR OUT_BINARY
#
# 1. libcurl: scripts/curl-minimal.sh BUILD_DIR/curl-cache builds (once;
#    cached there) a static libcurl from Debian's curl source package, HTTP
#    and HTTPS through mbedTLS only. When it cannot (no network, no source
#    for the installed version, a build failure), or KOP_IMAGE_CURL=debian,
#    the binary links Debian's libcurl4 instead, with a WARNING line saying
#    what that costs: its OpenSSL, Kerberos, LDAP, SSH... libraries go into
#    the image, ~21 MiB instead of ~12.
# 2. A release build of the binary alone in BUILD_DIR (meson
#    --buildtype=release -Dtests=false; pkg_config_path pointing at the
#    minimal libcurl; -ffunction-sections -fdata-sections and
#    --gc-sections, so only the parts of libcurl.a kop calls are linked).
#    An existing BUILD_DIR is reconfigured to the same options.
# 3. OUT_BINARY: the binary stripped (strip --strip-all).
# 4. BUILD_DIR/image-doc/: the licenses of what is linked statically
#    (curl/copyright, Debian's for the curl source package; on Debian 12
#    mbedtls/copyright, Debian 13's for the mbedtls source package), for
#    the third argument of scripts/image-rootfs.sh; a shared library's
#    copyright file comes with it instead.
#
# Static rather than a minimal libcurl.so.4 in the image: measured here,
# the stripped binary grows by ~0.26 MB with libcurl.a and --gc-sections,
# while the same configuration as a stripped shared library is 0.34 MB
# (all of libcurl's exported API, used or not); and every shared library
# in the image stays one that a Debian package owns.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD_DIR OUT_BINARY" >&2
  exit 2
fi
bdir=$1
out=$2
top=$(cd "$(dirname "$0")/.." && pwd)

warn_size="the image loads Debian's libcurl4 (OpenSSL, Kerberos/GSS-API, LDAP, SASL, SSH, RTMP, brotli, zstd, nghttp2, PSL, IDN) and is ~21 MiB instead of ~12, over the 15 MB goal"
prefix=
if [ "${KOP_IMAGE_CURL:-minimal}" = debian ]; then
  echo "image-build: WARNING: KOP_IMAGE_CURL=debian: $warn_size" >&2
elif ! prefix=$("$top/scripts/curl-minimal.sh" "$bdir/curl-cache"); then
  prefix=
  echo "image-build: WARNING: the minimal libcurl could not be built (above); $warn_size" >&2
fi

pcpath='[]'
[ -z "$prefix" ] || pcpath=$prefix/lib/pkgconfig
opts=(--buildtype=release -Dtests=false "-Dpkg_config_path=$pcpath"
  "-Dc_args=-ffunction-sections -fdata-sections" "-Dc_link_args=-Wl,--gc-sections")
if [ ! -f "$bdir/build.ninja" ]; then
  mkdir -p "$bdir"
  meson setup "$bdir" "${opts[@]}" >"$bdir/setup.log" 2>&1 || {
    cat "$bdir/setup.log" >&2
    exit 1
  }
else
  meson configure "$bdir" "${opts[@]}" >"$bdir/setup.log" 2>&1 || {
    cat "$bdir/setup.log" >&2
    exit 1
  }
fi
ninja -C "$bdir" ${KOP_JOBS:+-j"$KOP_JOBS"} kop >"$bdir/ninja.log" 2>&1 || {
  tail -n 30 "$bdir/ninja.log" >&2
  exit 1
}
strip --strip-all -o "$out" "$bdir/kop"

# The libcurl the binary got, checked rather than assumed.
doc=$bdir/image-doc
rm -rf "$doc"
mkdir -p "$doc"
if [ -n "$prefix" ]; then
  if ldd "$out" | grep -q 'libcurl\.so'; then
    echo "image-build: $bdir/kop loads a shared libcurl although it was built against $prefix" >&2
    exit 1
  fi
  install -D -m 0644 "$prefix/share/doc/curl/copyright" "$doc/curl/copyright"
  echo "image-build: libcurl $(basename "$prefix" | sed 's/^curl-//; s/-[0-9a-f]*-mbedtls.*$//') from Debian's source, HTTP/HTTPS over mbedTLS, linked statically" >&2
else
  echo "image-build: libcurl: Debian's libcurl4 (shared)" >&2
fi
# mbedTLS: a shared library of Debian 13's brings its copyright along
# (scripts/image-rootfs.sh); scripts/mbedtls.sh's static build on Debian 12
# leaves its own, Debian's debian/copyright of the source package.
if ! ldd "$out" | grep -q 'libmbedtls\.so'; then
  mbedtls_doc=$(pkg-config --variable=prefix mbedtls)/share/doc/mbedtls-kop/copyright
  [ -f "$mbedtls_doc" ] || {
    echo "image-build: $bdir/kop links mbedTLS statically but $mbedtls_doc is missing" >&2
    exit 1
  }
  install -D -m 0644 "$mbedtls_doc" "$doc/mbedtls/copyright"
fi
# The mbedTLS the binary runs is the one it was compiled against (a 2.28
# libmbedtls.so of Debian 12 picked by the linker would not be).
want=$(pkg-config --modversion mbedtls)
tls=$("$out" --version | sed -n 's/^tls: //p')
case $tls in
  "Mbed TLS $want "*) echo "image-build: $tls on the webhook port" >&2 ;;
  *)
    echo "image-build: $bdir/kop runs '$tls', not the Mbed TLS $want it was built against:" >&2
    ldd "$out" | grep -i mbed >&2 || true
    exit 1
    ;;
esac
