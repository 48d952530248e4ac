#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Installs what building and testing kop needs on Debian 12 or 13, from
# Debian's own packages. Idempotent and quick when everything is already
# there.
#
# mbedTLS 3.6 LTS: Debian 13's libmbedtls-dev; on Debian 12, whose own is
# the end-of-life 2.28 branch, scripts/mbedtls.sh builds Debian 13's source
# package into /usr/local (static libraries and pkg-config files, found by
# a plain `meson setup`) and looks for a newer Debian 13 release once a
# day.
#
#   scripts/install-deps.sh                everything (the image part unless
#                                          KOP_WITH_IMAGE=0)
#   scripts/install-deps.sh --image        the image part only: what
#                                          scripts/image.sh needs
#   scripts/install-deps.sh --image-build  the same without buildah: what the
#                                          Dockerfile's build stage needs
set -euo pipefail

mode=${1:-all}
case $mode in
  all | --image | --image-build) ;;
  *)
    echo "usage: $0 [--image | --image-build]" >&2
    exit 2
    ;;
esac

# The release binary: compilers and the fixed dependencies' -dev packages
# (libcurl4-openssl-dev also names the curl version scripts/curl-minimal.sh
# builds, and is what the image links when that build fails).
build=(
  build-essential pkg-config meson ninja-build
  libmicrohttpd-dev libjansson-dev libcurl4-openssl-dev libyaml-dev
)
# mbedTLS: the package where it is 3.6, else the tools scripts/mbedtls.sh
# builds Debian 13's source with (dpkg-source, the archive keyring, cmake,
# python3 for the source's scripts/config.py).
debian_major=$(sed -n 's/^VERSION_ID=//p' /etc/os-release | tr -d '"')
debian_major=${debian_major%%.*}
# The sanitizer runtimes of the distribution's default clang (14 in Debian
# 12, 19 in Debian 13).
if [ -n "$debian_major" ] && [ "$debian_major" -lt 13 ]; then
  clang_major=14
else
  clang_major=19
fi
if [ -n "$debian_major" ] && [ "$debian_major" -lt 13 ]; then
  mbedtls_from_source=1
  build+=(dpkg-dev debian-archive-keyring cmake python3)
else
  mbedtls_from_source=0
  build+=(libmbedtls-dev)
fi
# scripts/curl-minimal.sh: apt-get source (dpkg-source from dpkg-dev, the
# archive keyring), Debian's ./buildconf (autoconf, automake, libtool),
# patch.
curl_source=(dpkg-dev debian-archive-keyring patch autoconf automake libtool)

packages=(
  "${build[@]}"
  clang "libclang-rt-$clang_major-dev" clang-format
  check
  openssl curl ca-certificates procps jq
  # unzip: tests/scripts/test_helm.sh takes helm out of an npm package's zip.
  unzip
  # The official Python client, driven against kubesim by
  # tests/scripts/test_clients.sh (tests/clients/python_client.py).
  python3-kubernetes
)

# buildah builds and runs the container image (scripts/image.sh,
# tests/scripts/test_image.sh): ~16 MB to download, so it is installed by
# default; KOP_WITH_IMAGE=0 leaves it (and the curl source tools) out and
# the image test skips. Its recommended runtimes are not needed: the image
# is built from scratch and run with --isolation chroot.
image=0
case $mode in
  --image) packages=("${build[@]}" "${curl_source[@]}") image=1 ;;
  --image-build) packages=("${build[@]}" "${curl_source[@]}") ;;
  *)
    if [ "${KOP_WITH_IMAGE:-1}" != 0 ]; then
      packages+=("${curl_source[@]}")
      image=1
    fi
    ;;
esac

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ "$image" = 1 ] && ! command -v buildah >/dev/null 2>&1; then
  missing+=(buildah)
fi
if [ "$mode" = all ]; then
  # kubectl: any recent client will do; Debian ships one as kubernetes-client.
  if ! command -v kubectl >/dev/null 2>&1; then
    missing+=(kubernetes-client)
  fi
  # Node.js and npm validate the manifests against the official schemas
  # (tests/manifests); any Node >= 14 with npm will do, Debian's included.
  if ! command -v node >/dev/null 2>&1; then
    missing+=(nodejs)
  fi
  if ! command -v npm >/dev/null 2>&1; then
    missing+=(npm)
  fi
fi

if [ "$(id -u)" -ne 0 ]; then
  sudo=sudo
else
  sudo=
fi
if [ ${#missing[@]} -ne 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "$mbedtls_from_source" = 1 ]; then
  $sudo "$(dirname "$0")/mbedtls.sh" /usr/local
fi
