# SPDX-License-Identifier: Apache-2.0
#
# kop's container image: build on Debian 12 with the project's fixed
# dependencies, run on debian:12-slim with only their runtime libraries.
#
#   docker build -t kop:0.1.0 .
#
# The result runs as the unprivileged user 65532 (no passwd entry needed)
# with the binary as PID 1: kop handles SIGTERM/SIGINT itself. The
# Deployment's preStop hook runs /bin/sleep, which the slim image has.

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
# Release build of the binary only (kubesim is configured, not built).
RUN meson setup build --buildtype=release -Dtests=false \
    && ninja -C build kop \
    && strip build/kop \
    && build/kop --version

# ---- run --------------------------------------------------------------------
FROM debian:12-slim

# Runtime libraries of the build dependencies above (libcurl4 is the
# OpenSSL flavour libcurl4-openssl-dev links), and the CA bundle.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libmicrohttpd12 \
        libmbedtls14 \
        libmbedx509-1 \
        libmbedcrypto7 \
        libjansson4 \
        libcurl4 \
        libyaml-0-2 \
        ca-certificates \
    && rm -rf /var/lib/apt/lists/*

COPY --from=builder /src/build/kop /usr/local/bin/kop
COPY --from=builder /src/LICENSE /usr/share/doc/kop/LICENSE

LABEL org.opencontainers.image.title="kop" \
      org.opencontainers.image.description="Kubernetes operator for MyResource (conversion and validating webhooks, reconciler)" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"

USER 65532:65532
EXPOSE 9443 8080 8081
ENTRYPOINT ["/usr/local/bin/kop"]
