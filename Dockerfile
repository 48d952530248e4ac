# SPDX-License-Identifier: Apache-2.0
#
# kop's container image: build on Debian 12 with the project's fixed
# dependencies, run FROM scratch with only what the binary loads. The same
# files as scripts/image.sh (buildah) puts in its image: both take the root
# filesystem from scripts/image-rootfs.sh.
#
#   docker build -t kop:0.1.0 .
#
# The result runs as the unprivileged user 65532 (no passwd entry needed)
# with the binary as PID 1: kop handles SIGTERM/SIGINT itself. There is no
# shell: the Deployment's preStop pause is the kubelet's sleep action.

# ---- build ------------------------------------------------------------------
FROM debian:12 AS builder

RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        build-essential \
        meson \
        ninja-build \
        pkg-config \
        libmicrohttpd-dev \
        libmbedtls-dev \
        libjansson-dev \
        libcurl4-openssl-dev \
        libyaml-dev \
        check \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY . .
# Release build of the binary only (kubesim is configured, not built), then
# the image's root filesystem: the stripped binary, the shared libraries it
# loads (from the Debian packages installed above), the loader,
# /etc/nsswitch.conf and the packages' copyright files.
RUN meson setup build-docker --buildtype=release -Dtests=false \
    && ninja -C build-docker kop \
    && strip --strip-all -o /kop build-docker/kop \
    && /kop --version \
    && scripts/image-rootfs.sh /kop /rootfs

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
