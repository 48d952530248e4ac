#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Installs what building and testing kop needs on Debian 12, from Debian's
# own packages. Idempotent and quick when everything is already there.
set -euo pipefail

packages=(
  build-essential pkg-config meson ninja-build
  clang libclang-rt-14-dev clang-format
  libmicrohttpd-dev libmbedtls-dev libjansson-dev libcurl4-openssl-dev
  libyaml-dev check
  openssl curl ca-certificates procps jq
  # unzip: tests/scripts/test_helm.sh takes helm out of an npm package's zip.
  unzip
  # The official Python client, driven against kubesim by
  # tests/scripts/test_clients.sh (tests/clients/python_client.py).
  python3-kubernetes
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
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

# buildah builds and runs the container image (scripts/image.sh,
# tests/scripts/test_image.sh): ~16 MB to download, so it is installed by
# default; KOP_WITH_IMAGE=0 leaves it out and the image test skips. Its
# recommended runtimes are not needed: the image is built from scratch and
# run with --isolation chroot.
if [ "${KOP_WITH_IMAGE:-1}" != 0 ] && ! command -v buildah >/dev/null 2>&1; then
  missing+=(buildah)
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  sudo=sudo
else
  sudo=
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
