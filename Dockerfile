# SPDX-License-Identifier: Apache-2.0
#
# kop's container image: build on Debian 12 with the project's fixed
# dependencies (mbedTLS 3.6 LTS from Debian 13's source, libcurl from
# Debian's curl source with HTTP/HTTPS over mbedTLS only, both linked
# statically), run FROM scratch with only what the
# binary loads. The same files as scripts/image.sh (buildah) puts in its
# image: both build the binary with scripts/image-build.sh and take the
# root filesystem from scripts/image-rootfs.sh.
#
#   docker build -t kop:0.1.0 .
#
# The result runs as the unprivileged user 65532 (no passwd entry needed)
# with the binary as PID 1: kop handles SIGTERM/SIGINT itself. There is no
# shell: the Deployment's preStop pause is the kubelet's sleep action.

# ---- build ------------------------------------------------------------------
FROM debian:12 AS builder

# Compilers, the fixed dependencies' -dev packages and the tools that build
# curl from Debian's source (the same list scripts/image.sh installs), and
# mbedTLS 3.6 LTS built from Debian 13's source (scripts/mbedtls.sh).
COPY scripts/install-deps.sh scripts/mbedtls.sh /src/scripts/
COPY scripts/lib/debsrc.sh /src/scripts/lib/
RUN /src/scripts/install-deps.sh --image-build

# The minimal libcurl first, in its own layer: it depends only on the
# installed libcurl4-openssl-dev's version and on this script, so a change
# to kop's sources does not rebuild it. When it cannot be built (no
# network), image-build.sh below tries once more and falls back to Debian's
# libcurl4 with a WARNING (a ~21 MiB image).
COPY scripts/curl-minimal.sh /src/scripts/
RUN /src/scripts/curl-minimal.sh /src/build-docker/curl-cache || true

WORKDIR /src
COPY . .
# The release binary (scripts/image-build.sh: statically linked against the
# minimal libcurl cached above, stripped), then the image's root
# filesystem: the binary, the shared libraries it loads (from the Debian
# packages installed above), the loader, /etc/nsswitch.conf, the packages'
# copyright files and curl's.
RUN scripts/image-build.sh build-docker /kop \
    && /kop --version \
    && scripts/image-rootfs.sh /kop /rootfs build-docker/image-doc

# ---- run --------------------------------------------------------------------
FROM scratch

COPY --from=builder /rootfs/ /

LABEL org.opencontainers.image.title="kop" \
      org.opencontainers.image.description="Kubernetes operator for MyResource (conversion and validating webhooks, reconciler)" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"

USER 65532:65532
WORKDIR /
EXPOSE 9443 8080 8081
ENTRYPOINT ["/usr/local/bin/kop"]
