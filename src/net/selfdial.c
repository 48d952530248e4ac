// SPDX-License-Identifier: Apache-2.0
/*
 * The webhook's readiness self-check: a TLS client of kop's own port. See
 * kop/selfdial.h.
 *
 * Everything is non-blocking with one deadline: connect (poll for
 * POLLOUT), the handshake (mbedtls_ssl_handshake until done, polling for
 * whichever direction it wants), the request, the answer's status line.
 * The mbedTLS client state (config, DRBG) is this object's own and only
 * used under its mutex; the TLS front's server state is never touched.
 */
#include "kop/selfdial.h"

#include <assert.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/ssl.h>
#include <psa/crypto.h>

#include "kop/clock.h"
#include "kop/netaddr.h"

#define TIMEOUT_MS_DEFAULT 800
#define CACHE_MS_DEFAULT 1000

struct kop_selfdial {
    struct sockaddr_storage addr;
    socklen_t addr_len;
    int timeout_ms;
    int64_t cache_ns;
    bool client_auth;

    pthread_mutex_t lock;
    bool have;  /* a result is cached */
    int64_t at; /* when it was made */
    int result; /* 0 or -errno */
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    mbedtls_ssl_config conf;
};

/* Where to dial: the bind host, with the wildcard addresses turned into
 * the loopback of their family (the listener takes both families when it
 * binds every address). */
/* h is name, bare or in brackets ("[::]" as written in bind addresses). */
static bool is_host(const char *h, const char *name)
{
    size_t n = strlen(name);
    return strcmp(h, name) == 0 ||
           (h[0] == '[' && strncmp(h + 1, name, n) == 0 && h[n + 1] == ']' && h[n + 2] == '\0');
}

/* The address to dial for a server bound to host: a wildcard is dialled
 * on loopback of its family; a name as the TLS front binds it. */
static int resolve(const char *host, uint16_t port, struct sockaddr_storage *ss, socklen_t *len)
{
    const char *h = host ? host : "";
    if (is_host(h, "") || is_host(h, "0.0.0.0"))
        h = "127.0.0.1";
    else if (is_host(h, "::"))
        h = "::1";
    return kop_netaddr_resolve(h, port, 0, ss, len);
}

int kop_selfdial_new(const struct kop_selfdial_options *opts, struct kop_selfdial **ret)
{
    assert(opts);
    assert(ret);
    if (!opts->port)
        return -EINVAL;
    struct kop_selfdial *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    int r = resolve(opts->host, opts->port, &d->addr, &d->addr_len);
    if (r < 0) {
        free(d);
        return r;
    }
    d->timeout_ms = opts->timeout_ms > 0 ? opts->timeout_ms : TIMEOUT_MS_DEFAULT;
    d->cache_ns =
        (int64_t)(opts->cache_ms > 0 ? opts->cache_ms : CACHE_MS_DEFAULT) * KOP_NSEC_PER_MSEC;
    d->client_auth = opts->client_auth;
    pthread_mutex_init(&d->lock, NULL);
    mbedtls_entropy_init(&d->entropy);
    mbedtls_ctr_drbg_init(&d->drbg);
    mbedtls_ssl_config_init(&d->conf);
    static const unsigned char pers[] = "selfdial";
    r = -EIO;
    if (psa_crypto_init() != PSA_SUCCESS)
        goto fail;
    if (mbedtls_ctr_drbg_seed(&d->drbg, mbedtls_entropy_func, &d->entropy, pers,
                              sizeof(pers) - 1) != 0)
        goto fail;
    if (mbedtls_ssl_config_defaults(&d->conf, MBEDTLS_SSL_IS_CLIENT, MBEDTLS_SSL_TRANSPORT_STREAM,
                                    MBEDTLS_SSL_PRESET_DEFAULT) != 0)
        goto fail;
    /* Whether this process serves, not whether its certificate is trusted
     * (see kop/selfdial.h): optional, so that the verify callback
     * (saw_cert) sees the certificate arrive, and accepts it. */
    mbedtls_ssl_conf_authmode(&d->conf, MBEDTLS_SSL_VERIFY_OPTIONAL);
    mbedtls_ssl_conf_min_tls_version(&d->conf, MBEDTLS_SSL_VERSION_TLS1_2);
    mbedtls_ssl_conf_rng(&d->conf, mbedtls_ctr_drbg_random, &d->drbg);
    *ret = d;
    return 0;
fail:
    kop_selfdial_free(d);
    return r;
}

void kop_selfdial_free(struct kop_selfdial *d)
{
    if (!d)
        return;
    mbedtls_ssl_config_free(&d->conf);
    mbedtls_ctr_drbg_free(&d->drbg);
    mbedtls_entropy_free(&d->entropy);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

/* Wait until fd is ready for events or the deadline passes. 0, -ETIMEDOUT
 * or -errno. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = (deadline - kop_clock_now_ns()) / KOP_NSEC_PER_MSEC;
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, (int)left);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -errno;
    }
}

static int bio_send(void *ctx, const unsigned char *buf, size_t len)
{
    int fd = *(int *)ctx;
    ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
    if (n >= 0)
        return (int)n;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return MBEDTLS_ERR_SSL_WANT_WRITE;
    return MBEDTLS_ERR_NET_SEND_FAILED;
}

static int bio_recv(void *ctx, unsigned char *buf, size_t len)
{
    int fd = *(int *)ctx;
    ssize_t n = recv(fd, buf, len, 0);
    if (n >= 0)
        return (int)n; /* 0: EOF, which mbedTLS reports as such */
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return MBEDTLS_ERR_SSL_WANT_READ;
    return MBEDTLS_ERR_NET_RECV_FAILED;
}

static int dial(struct kop_selfdial *d, int64_t deadline, int *ret_fd)
{
    int fd = socket(d->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int r = 0;
    if (connect(fd, (struct sockaddr *)&d->addr, d->addr_len) < 0) {
        if (errno != EINPROGRESS) {
            r = -errno;
            goto out;
        }
        r = wait_fd(fd, POLLOUT, deadline);
        if (r < 0)
            goto out;
        int err = 0;
        socklen_t el = sizeof(err);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
            err = errno;
        if (err) {
            r = -err;
            goto out;
        }
    }
out:
    if (r < 0) {
        close(fd);
        return r;
    }
    *ret_fd = fd;
    return 0;
}

enum op { OP_HANDSHAKE, OP_WRITE, OP_READ };

/* One mbedTLS call driven to completion: retried while it wants to read or
 * write and the deadline allows. Returns its final code, or
 * MBEDTLS_ERR_SSL_TIMEOUT. */
static int drive(mbedtls_ssl_context *ssl, int fd, int64_t deadline, enum op op, unsigned char *buf,
                 size_t len)
{
    for (;;) {
        int rc;
        if (op == OP_HANDSHAKE)
            rc = mbedtls_ssl_handshake(ssl);
        else if (op == OP_WRITE)
            rc = mbedtls_ssl_write(ssl, buf, len);
        else
            rc = mbedtls_ssl_read(ssl, buf, len);
        short ev = rc == MBEDTLS_ERR_SSL_WANT_READ    ? POLLIN
                   : rc == MBEDTLS_ERR_SSL_WANT_WRITE ? POLLOUT
                                                      : 0;
        if (!ev)
            return rc;
        if (wait_fd(fd, ev, deadline) < 0)
            return MBEDTLS_ERR_SSL_TIMEOUT;
    }
}

/* Is buf the start of an HTTP/1.x status line ("HTTP/1.1 404 ")? */
static bool status_line(const char *buf, size_t n)
{
    if (n < 12 || memcmp(buf, "HTTP/1.", 7) != 0 || buf[8] != ' ')
        return false;
    for (int i = 9; i < 12; i++) {
        if (buf[i] < '0' || buf[i] > '9')
            return false;
    }
    return buf[9] >= '1' && buf[9] <= '5';
}

/* mbedTLS's verify callback: the server's certificate arrived (its whole
 * first flight up to it was read); any chain is accepted. */
static int saw_cert(void *arg, mbedtls_x509_crt *crt, int depth, uint32_t *flags)
{
    *(bool *)arg = true;
    *flags = 0;
    return 0;
}

/* Did the server turn the check's missing client certificate down? rc is
 * the failure of a handshake, write or read: a fatal alert, or the
 * connection closed (TLS 1.2: while the check still wrote its second
 * flight; TLS 1.3: after its Finished, when the handshake is over for the
 * client and the refusal comes instead of the answer). In TLS 1.3 the
 * server's alert is sealed with the handshake keys, since it never took
 * the client's Finished, while the client reads with the application
 * keys already: it shows as a bad record MAC. */
static bool refused_client_cert(const struct kop_selfdial *d, bool seen, int rc)
{
    return d->client_auth && seen &&
           (rc == MBEDTLS_ERR_SSL_FATAL_ALERT_MESSAGE || rc == MBEDTLS_ERR_SSL_INVALID_MAC ||
            rc == MBEDTLS_ERR_SSL_CONN_EOF || rc == MBEDTLS_ERR_NET_CONN_RESET ||
            rc == MBEDTLS_ERR_NET_RECV_FAILED || rc == MBEDTLS_ERR_NET_SEND_FAILED ||
            rc == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY || rc == 0);
}

static int run_check(struct kop_selfdial *d)
{
    int64_t deadline = kop_clock_now_ns() + (int64_t)d->timeout_ms * KOP_NSEC_PER_MSEC;
    int fd = -1;
    int r = dial(d, deadline, &fd);
    if (r < 0)
        return r;
    mbedtls_ssl_context ssl;
    mbedtls_ssl_init(&ssl);
    r = -EPROTO;
    if (mbedtls_ssl_setup(&ssl, &d->conf) != 0) {
        r = -ENOMEM;
        goto out;
    }
    mbedtls_ssl_set_bio(&ssl, &fd, bio_send, bio_recv, NULL);
    bool seen = false;
    mbedtls_ssl_set_verify(&ssl, saw_cert, &seen);
    int rc = drive(&ssl, fd, deadline, OP_HANDSHAKE, NULL, 0);
    if (rc == MBEDTLS_ERR_SSL_TIMEOUT) {
        r = -ETIMEDOUT;
        goto out;
    }
    if (rc != 0) {
        if (refused_client_cert(d, seen, rc))
            r = 0;
        goto out;
    }
    char req[] = "GET /healthz HTTP/1.1\r\nHost: localhost\r\n"
                 "User-Agent: readyz-selfdial\r\nConnection: close\r\n\r\n";
    size_t off = 0;
    while (off < sizeof(req) - 1) {
        rc = drive(&ssl, fd, deadline, OP_WRITE, (unsigned char *)req + off, sizeof(req) - 1 - off);
        if (rc <= 0) {
            r = rc == MBEDTLS_ERR_SSL_TIMEOUT      ? -ETIMEDOUT
                : refused_client_cert(d, seen, rc) ? 0
                                                   : -EPROTO;
            goto out;
        }
        off += (size_t)rc;
    }
    char buf[64];
    size_t got = 0;
    while (got < 12) {
        rc = drive(&ssl, fd, deadline, OP_READ, (unsigned char *)buf + got, sizeof(buf) - got);
        if (rc <= 0) {
            r = rc == MBEDTLS_ERR_SSL_TIMEOUT      ? -ETIMEDOUT
                : refused_client_cert(d, seen, rc) ? 0
                                                   : -EPROTO;
            goto out;
        }
        got += (size_t)rc;
    }
    r = status_line(buf, got) ? 0 : -EPROTO;
    /* close_notify, best effort: the socket closes either way */
    (void)mbedtls_ssl_close_notify(&ssl);
out:
    mbedtls_ssl_free(&ssl);
    close(fd);
    return r;
}

int kop_selfdial_check(struct kop_selfdial *d)
{
    assert(d);
    pthread_mutex_lock(&d->lock);
    int64_t now = kop_clock_now_ns();
    if (!d->have || now - d->at >= d->cache_ns) {
        d->result = run_check(d);
        d->at = kop_clock_now_ns();
        d->have = true;
    }
    int r = d->result;
    pthread_mutex_unlock(&d->lock);
    return r;
}
