#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Builds kop's container image from scratch with buildah (Debian's
# package): no base image is pulled.
#
#   scripts/image.sh                 kop:<version> in buildah's local storage
#                                    and build-image/kop-<version>.oci.tar
#
# Steps: what is missing to build it (scripts/install-deps.sh --image:
# compilers, the -dev packages, buildah, the tools to build curl from
# source); the stripped release binary from scripts/image-build.sh (in
# build-image/, linked statically against a minimal libcurl that
# scripts/curl-minimal.sh builds from Debian's curl source once and caches
# in build-image/curl-cache/; Debian's libcurl4, with a warning, when that
# fails); its root filesystem from scripts/image-rootfs.sh (the binary,
# exactly the shared libraries ldd resolves, the loader, a two-line
# nsswitch.conf, the Debian copyright files and curl's; no shell, no
# package manager); `buildah from scratch`, copy, config (user
# 65532:65532, entrypoint kop, ports 9443/8080/8081, OCI labels), commit;
# `buildah push` to an OCI archive. Prints the image's size uncompressed
# (the bytes of its one layer) and the archive's size.
#
# Environment:
#   KOP_IMAGE_BUILD_DIR   meson build directory (default build-image)
#   KOP_IMAGE_CURL        debian: link Debian's libcurl4 instead of the
#                         minimal one (a ~21 MiB image)
#   KOP_IMAGE_INSTALL     0: install nothing (the tests use it); a missing
#                         curl source tool then means Debian's libcurl4
#   KOP_IMAGE_OUT         the OCI archive (default <build dir>/kop-<version>.oci.tar)
#   KOP_IMAGE_NAME        image name (default kop; the tag is the version)
#   KOP_BUILDAH_ROOT      a private buildah storage (root/, run/ below it,
#                         vfs driver) instead of the system's; the tests use it
#
# The Dockerfile builds the same files with the same script (docker build).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

bdir=${KOP_IMAGE_BUILD_DIR:-build-image}
name=${KOP_IMAGE_NAME:-kop}

# A fresh machine gets what the image needs (quick when it is all there).
[ "${KOP_IMAGE_INSTALL:-1}" = 0 ] || scripts/install-deps.sh --image
command -v buildah >/dev/null || {
  echo "image.sh: buildah is not installed (apt-get install --no-install-recommends buildah)" >&2
  exit 1
}
bh=(buildah)
if [ -n "${KOP_BUILDAH_ROOT:-}" ]; then
  mkdir -p "$KOP_BUILDAH_ROOT"
  bh+=(--root "$KOP_BUILDAH_ROOT/root" --runroot "$KOP_BUILDAH_ROOT/run" --storage-driver vfs)
fi

# ---- the release binary ------------------------------------------------------
work=$(mktemp -d)
ctr=
cleanup() {
  [ -n "$ctr" ] && "${bh[@]}" rm "$ctr" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

scripts/image-build.sh "$bdir" "$work/kop"
version=$("$work/kop" --version | awk 'NR == 1 { print $2 }')
[ -n "$version" ] || {
  echo "image.sh: cannot read the version from $work/kop --version" >&2
  exit 1
}
out=${KOP_IMAGE_OUT:-$bdir/$name-$version.oci.tar}
case $out in /*) ;; *) out=$top/$out ;; esac
scripts/image-rootfs.sh "$work/kop" "$work/rootfs" "$bdir/image-doc"

# ---- the image ---------------------------------------------------------------
created=$(git -C "$top" log -1 --format=%ct 2>/dev/null || date +%s)
revision=$(git -C "$top" rev-parse HEAD 2>/dev/null || echo unknown)
ctr=$("${bh[@]}" from scratch)
"${bh[@]}" copy "$ctr" "$work/rootfs" / >/dev/null
"${bh[@]}" config \
  --user 65532:65532 \
  --entrypoint '["/usr/local/bin/kop"]' --cmd '' \
  --workingdir / \
  --port 9443 --port 8080 --port 8081 \
  --label org.opencontainers.image.title=kop \
  --label "org.opencontainers.image.description=Kubernetes operator for MyResource (conversion and validating webhooks, reconciler)" \
  --label "org.opencontainers.image.version=$version" \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  --label "org.opencontainers.image.revision=$revision" \
  "$ctr"
"${bh[@]}" commit --quiet --format oci --timestamp "$created" --rm "$ctr" "$name:$version" >/dev/null
ctr=
rm -f "$out"
mkdir -p "$(dirname "$out")"
"${bh[@]}" push --quiet "$name:$version" "oci-archive:$out:$name:$version" >/dev/null

# ---- sizes -------------------------------------------------------------------
# The layer as the runtime unpacks it: the tar of the root filesystem.
layer=$(tar -C "$work/rootfs" --numeric-owner --owner=0 --group=0 -cf - . | wc -c)
files=$(du -sb "$work/rootfs" | cut -f1)
archive=$(stat -c %s "$out")
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo "image.sh: $name:$version built from scratch ($(find "$work/rootfs" -type f | wc -l) files)"
echo "image.sh: uncompressed $layer bytes ($(mib "$layer")); files $files bytes; binary $(stat -c %s "$work/kop") bytes"
echo "image.sh: OCI archive $out: $archive bytes ($(mib "$archive"), layer gzip-compressed)"
if [ ! -f "$bdir/image-doc/curl/copyright" ]; then
  echo "image.sh: WARNING: built with Debian's libcurl4, not the minimal one (see the WARNING above): over the 15 MB goal" >&2
fi
