/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim's webhook transport for Service references: what the
 * kube-apiserver's webhook rest client (k8s.io/apiserver/pkg/util/webhook
 * client.go -> client-go rest -> net/http Transport) does on the wire.
 *
 * DESIGN
 *  - One pool of idle HTTP/1.1-over-TLS connections per Service, port and
 *    caBundle (client-go shares a transport per TLS config and net/http
 *    pools per host). Idle connections are reused newest first (net/http
 *    getIdleConn), at most 25 kept (client-go transport/cache.go
 *    idleConnsPerHost), closed after 90 s idle (IdleConnTimeout, client-go
 *    utilnet.SetTransportDefaults; --webhook-idle-timeout) by a reaper
 *    thread, as net/http's idle timer does. A pooled connection is used without
 *    looking at the endpoint set: it stays with the endpoint it was dialed
 *    to until one side closes it.
 *  - Before reuse, a connection that the server closed while idle is
 *    dropped silently, as net/http's readLoop does the moment the close
 *    arrives; --webhook-skip-idle-check turns that off so a test can hit
 *    the race where the close arrives after the pick.
 *  - A new connection goes to a random ready endpoint (services.c).
 *  - Retries, as net/http's (*persistConn).shouldRetryRequest: a request
 *    on a REUSED connection that failed before a single byte reached the
 *    socket (nothingWrittenError) is sent again on another connection; a
 *    POST that was written and then lost is a failure (isReplayable is
 *    false for POST), a failure on a fresh connection too. On top, client-go
 *    rest (request.go request(), with_retry.go IsNextRetry/checkWait) sends
 *    the request again, up to 10 times, when the answer is 429 or >= 500
 *    with an integer Retry-After, after that many seconds; errors of a
 *    non-GET are never retried there. Neither the admission dispatchers
 *    nor the conversion webhook add a backoff of their own (webhook.go's
 *    WithExponentialBackoff is used by the authn/authz/audit webhooks).
 *  - Statistics (calls per endpoint, failures with a reason, retries,
 *    connections, traceparents sent) under whc->lock, a leaf lock: taken
 *    after ks->lock, never held across I/O or around ks->lock.
 *
 * Thread-safety: any thread; a connection belongs to one call at a time.
 */
#include "kubesim.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>
#include <psa/crypto.h>

#define MAX_IDLE_PER_POOL 25
#define MAX_REST_RETRIES 10
#define MAX_BODY (256u * 1024 * 1024)
#define KEEP_FAILURES 500
#define KEEP_TRACES 1000

struct conn {
    struct conn *next;
    int fd;
    char *addr; /* endpoint HOST:PORT */
    char local[64];
    char remote[64];
    mbedtls_ssl_context ssl;
    mbedtls_ssl_config conf;
    mbedtls_x509_crt ca;
    bool reused;        /* taken from the pool at least once */
    uint64_t nwrite;    /* bytes the socket accepted */
    int sys_errno;      /* last socket error */
    long long deadline; /* monotonic ms; 0 = do not wait */
    long long idle_since;
};

struct pool {
    struct pool *next;
    char *key; /* "ns/name:port caBundle" */
    struct conn *idle;
    size_t nidle;
};

struct ks_whclient {
    pthread_mutex_t lock;
    pthread_cond_t wake; /* the reaper: a connection went idle, or stop */
    pthread_t reaper;
    bool reaper_running;
    bool stop;
    long idle_ms;
    struct pool *pools;
    json_t *calls;    /* "ns/name" -> { endpoint -> count } */
    json_t *failures; /* [{service, endpoint, reason, error}] */
    json_t *reasons;  /* reason -> count */
    json_t *retries;  /* kind -> count */
    json_t *traces;   /* [{traceparent, service, path}] */
    json_int_t opened, reused;
};

static __thread char tl_trace[33];

/* ---- small helpers ---------------------------------------------------------- */

static int rng(void *p, unsigned char *buf, size_t len)
{
    (void)p;
    while (len > 0) {
        ssize_t n = getrandom(buf, len, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

static void random_hex(char *out, size_t nbytes)
{
    unsigned char raw[16];
    if (nbytes > sizeof(raw) || rng(NULL, raw, nbytes) != 0)
        abort();
    for (size_t i = 0; i < nbytes; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
}

static const char *errno_text(int e)
{
    switch (e) {
    case ECONNREFUSED:
        return "connection refused";
    case ECONNRESET:
        return "connection reset by peer";
    case EPIPE:
        return "broken pipe";
    case ETIMEDOUT:
        return "connection timed out";
    case EHOSTUNREACH:
        return "no route to host";
    case ENETUNREACH:
        return "network is unreachable";
    case EADDRNOTAVAIL:
        return "cannot assign requested address";
    default:
        return "i/o error";
    }
}

/* Wait until fd is ready for events or the deadline (0: do not wait).
 * 0, or -ETIMEDOUT. */
static int wait_fd(int fd, short events, long long deadline)
{
    for (;;) {
        long long left = deadline ? deadline - ks_mono_ms() : 0;
        if (left < 0)
            left = 0;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, (int)(left > 60000 ? 60000 : left));
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return 0; /* let the read/write report it */
        if (n == 0 && (!deadline || ks_mono_ms() >= deadline))
            return -ETIMEDOUT;
    }
}

static int bio_send(void *ctx, const unsigned char *buf, size_t len)
{
    struct conn *c = ctx;
    for (;;) {
        ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0) {
            c->nwrite += (uint64_t)n;
            return (int)n;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (wait_fd(c->fd, POLLOUT, c->deadline) != 0)
                return c->deadline ? MBEDTLS_ERR_SSL_TIMEOUT : MBEDTLS_ERR_SSL_WANT_WRITE;
            continue;
        }
        c->sys_errno = errno;
        return MBEDTLS_ERR_NET_SEND_FAILED;
    }
}

static int bio_recv(void *ctx, unsigned char *buf, size_t len)
{
    struct conn *c = ctx;
    for (;;) {
        ssize_t n = recv(c->fd, buf, len, MSG_DONTWAIT);
        if (n >= 0)
            return (int)n; /* 0: EOF, mbedTLS reports MBEDTLS_ERR_SSL_CONN_EOF */
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (wait_fd(c->fd, POLLIN, c->deadline) != 0)
                return c->deadline ? MBEDTLS_ERR_SSL_TIMEOUT : MBEDTLS_ERR_SSL_WANT_READ;
            continue;
        }
        c->sys_errno = errno;
        return MBEDTLS_ERR_NET_RECV_FAILED;
    }
}

static void conn_close(struct conn *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    mbedtls_ssl_free(&c->ssl);
    mbedtls_ssl_config_free(&c->conf);
    mbedtls_x509_crt_free(&c->ca);
    free(c->addr);
    free(c);
}

static void sockname(int fd, bool peer, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    int rc = peer ? getpeername(fd, (struct sockaddr *)&ss, &sl)
                  : getsockname(fd, (struct sockaddr *)&ss, &sl);
    if (rc == 0 && ss.ss_family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        port = ntohs(in->sin_port);
    } else if (rc == 0 && ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *in = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof(host));
        port = ntohs(in->sin6_port);
    }
    snprintf(buf, len, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
}

/* ---- dialing -------------------------------------------------------------------- */

/* TCP connect to addr (HOST:PORT, HOST may be [v6]) by the deadline. */
static int dial_tcp(const char *addr, long long deadline, int *ret_fd, char **ret_err)
{
    const char *colon = strrchr(addr, ':');
    char host[256];
    size_t hl = (size_t)(colon - addr);
    const char *h = addr;
    if (hl >= 2 && addr[0] == '[' && addr[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (hl >= sizeof(host)) {
        *ret_err = ks_printf("dial tcp %s: address too long", addr);
        return -EINVAL;
    }
    memcpy(host, h, hl);
    host[hl] = '\0';
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0 || !ai) {
        *ret_err = ks_printf("dial tcp: lookup %s: no such host", host);
        return -ENOENT;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int err = fd < 0 ? errno : 0;
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        err = errno;
        if (err == EINPROGRESS) {
            err = 0;
            if (wait_fd(fd, POLLOUT, deadline) != 0) {
                err = ETIMEDOUT;
            } else {
                socklen_t sl = sizeof(err);
                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) != 0)
                    err = errno;
            }
        }
    }
    freeaddrinfo(ai);
    if (err != 0) {
        if (fd >= 0)
            close(fd);
        *ret_err = err == ETIMEDOUT && ks_mono_ms() >= deadline
                       ? ks_strdup("context deadline exceeded")
                       : ks_printf("dial tcp %s: connect: %s", addr, errno_text(err));
        return -err;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* net.Dialer's default */
    *ret_fd = fd;
    return 0;
}

/* Dial addr and run the TLS handshake for server name sni. */
static struct conn *conn_open(const char *addr, const char *sni, const char *ca_bundle,
                              long long deadline, char **ret_err, const char **ret_reason)
{
    struct conn *c = calloc(1, sizeof(*c));
    if (!c)
        abort();
    c->fd = -1;
    c->addr = ks_strdup(addr);
    c->deadline = deadline;
    /* TLS 1.3 runs on PSA crypto (idempotent, thread-safe) */
    if (psa_crypto_init() != PSA_SUCCESS)
        abort();
    mbedtls_ssl_init(&c->ssl);
    mbedtls_ssl_config_init(&c->conf);
    mbedtls_x509_crt_init(&c->ca);
    *ret_reason = "dial";
    if (dial_tcp(addr, deadline, &c->fd, ret_err) != 0) {
        if (ks_mono_ms() >= deadline)
            *ret_reason = "timeout";
        goto fail;
    }
    sockname(c->fd, false, c->local, sizeof(c->local));
    sockname(c->fd, true, c->remote, sizeof(c->remote));
    *ret_reason = "tls";
    if (ca_bundle && *ca_bundle) {
        size_t n = 0;
        unsigned char *pem = ks_base64_decode(ca_bundle, &n);
        int prc = pem ? mbedtls_x509_crt_parse(&c->ca, pem, n + 1) : -1;
        free(pem);
        if (prc < 0) {
            *ret_err = ks_strdup("unable to load root certificates: unable to parse bytes as "
                                 "PEM block");
            goto fail;
        }
    }
    if (mbedtls_ssl_config_defaults(&c->conf, MBEDTLS_SSL_IS_CLIENT, MBEDTLS_SSL_TRANSPORT_STREAM,
                                    MBEDTLS_SSL_PRESET_DEFAULT) != 0)
        abort();
    mbedtls_ssl_conf_authmode(&c->conf, MBEDTLS_SSL_VERIFY_REQUIRED);
    mbedtls_ssl_conf_ca_chain(&c->conf, &c->ca, NULL);
    mbedtls_ssl_conf_rng(&c->conf, rng, NULL);
    /* TLS 1.2 at least, 1.3 first: Go's client defaults (the apiserver's) */
    mbedtls_ssl_conf_min_tls_version(&c->conf, MBEDTLS_SSL_VERSION_TLS1_2);
    mbedtls_ssl_conf_max_tls_version(&c->conf, MBEDTLS_SSL_VERSION_TLS1_3);
    if (mbedtls_ssl_setup(&c->ssl, &c->conf) != 0 || mbedtls_ssl_set_hostname(&c->ssl, sni) != 0)
        abort();
    mbedtls_ssl_set_bio(&c->ssl, c, bio_send, bio_recv, NULL);
    int rc;
    do {
        rc = mbedtls_ssl_handshake(&c->ssl);
    } while (rc == MBEDTLS_ERR_SSL_WANT_READ || rc == MBEDTLS_ERR_SSL_WANT_WRITE);
    if (rc != 0) {
        uint32_t flags = mbedtls_ssl_get_verify_result(&c->ssl);
        if (rc == MBEDTLS_ERR_SSL_TIMEOUT) {
            *ret_reason = "timeout";
            *ret_err = ks_strdup("context deadline exceeded");
        } else if (rc == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED &&
                   (flags & MBEDTLS_X509_BADCERT_CN_MISMATCH) &&
                   !(flags & MBEDTLS_X509_BADCERT_NOT_TRUSTED)) {
            *ret_err = ks_printf("tls: failed to verify certificate: x509: certificate is not "
                                 "valid for %s",
                                 sni);
        } else if (rc == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED) {
            *ret_err = ks_strdup("tls: failed to verify certificate: x509: certificate signed by "
                                 "unknown authority");
        } else if (rc == MBEDTLS_ERR_SSL_CONN_EOF || rc == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY) {
            *ret_err = ks_strdup("EOF");
        } else if (c->sys_errno) {
            *ret_err = ks_printf("read tcp %s->%s: read: %s", c->local, c->remote,
                                 errno_text(c->sys_errno));
        } else {
            *ret_err = ks_printf("remote error: tls: handshake failure (-0x%04x)", -rc);
        }
        goto fail;
    }
    return c;
fail:
    conn_close(c);
    return NULL;
}

/* A pooled connection is still usable: nothing arrived on it, or only TLS
 * records that carry no data (what net/http's readLoop would have seen). */
static bool conn_alive(struct conn *c)
{
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    if (poll(&p, 1, 0) == 0)
        return true;
    unsigned char b;
    c->deadline = 0;
    int rc = mbedtls_ssl_read(&c->ssl, &b, 1);
    return rc == MBEDTLS_ERR_SSL_WANT_READ || rc == MBEDTLS_ERR_SSL_WANT_WRITE;
}

/* ---- HTTP/1.1 ----------------------------------------------------------------- */

struct rbuf {
    char *data;
    size_t len, cap, pos;
};

struct wh_resp {
    int status;
    bool close;
    bool has_retry_after;
    long retry_after;
    char *body;
    size_t len;
};

/* Read more bytes: > 0, 0 at EOF, or an mbedTLS error. */
static int fill(struct conn *c, struct rbuf *b)
{
    if (b->len + 16384 + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 32768;
        if (cap > MAX_BODY + 65536)
            return MBEDTLS_ERR_SSL_BAD_INPUT_DATA;
        char *nd = realloc(b->data, cap);
        if (!nd)
            abort();
        b->data = nd;
        b->cap = cap;
    }
    for (;;) {
        int n = mbedtls_ssl_read(&c->ssl, (unsigned char *)b->data + b->len, 16384);
        if (n > 0) {
            b->len += (size_t)n;
            b->data[b->len] = '\0';
            return n;
        }
        if (n == MBEDTLS_ERR_SSL_WANT_READ || n == MBEDTLS_ERR_SSL_WANT_WRITE)
            continue;
        if (n == 0 || n == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY || n == MBEDTLS_ERR_SSL_CONN_EOF)
            return 0;
        return n;
    }
}

/* Position just past the next CRLF at or after from, or 0. */
static size_t line_end(const struct rbuf *b, size_t from)
{
    for (size_t i = from; i + 1 < b->len; i++)
        if (b->data[i] == '\r' && b->data[i + 1] == '\n')
            return i + 2;
    return 0;
}

/* Make sure n bytes from b->pos are buffered. 0, 1 at EOF first, or error. */
static int need(struct conn *c, struct rbuf *b, size_t n)
{
    while (b->len - b->pos < n) {
        int rc = fill(c, b);
        if (rc <= 0)
            return rc == 0 ? 1 : rc;
    }
    return 0;
}

static int need_line(struct conn *c, struct rbuf *b, size_t *ret_end)
{
    for (;;) {
        size_t e = line_end(b, b->pos);
        if (e) {
            *ret_end = e;
            return 0;
        }
        if (b->len - b->pos > 65536)
            return MBEDTLS_ERR_SSL_BAD_INPUT_DATA;
        int rc = fill(c, b);
        if (rc <= 0)
            return rc == 0 ? 1 : rc;
    }
}

static void body_append(struct wh_resp *r, const char *p, size_t n)
{
    char *nb = realloc(r->body, r->len + n + 1);
    if (!nb)
        abort();
    memcpy(nb + r->len, p, n);
    r->len += n;
    nb[r->len] = '\0';
    r->body = nb;
}

/* Read one response. 0; 1 when the connection ended before (or inside)
 * it, *ret_any telling whether any byte came; or an mbedTLS error. */
static int read_response(struct conn *c, struct wh_resp *r, bool *ret_any)
{
    struct rbuf b = {0};
    int rc;
    size_t e;
    long long clen = -1;
    bool chunked = false;
    *ret_any = false;
again:
    rc = need_line(c, &b, &e);
    *ret_any = b.len > 0;
    if (rc != 0)
        goto out;
    int minor = 0;
    if (sscanf(b.data + b.pos, "HTTP/1.%d %d", &minor, &r->status) != 2) {
        rc = MBEDTLS_ERR_SSL_BAD_INPUT_DATA;
        goto out;
    }
    r->close = minor == 0;
    b.pos = e;
    for (;;) {
        rc = need_line(c, &b, &e);
        if (rc != 0)
            goto out;
        char *line = b.data + b.pos;
        size_t n = e - b.pos - 2;
        b.pos = e;
        if (n == 0)
            break;
        line[n] = '\0';
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        *colon = '\0';
        char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        if (strcasecmp(line, "Content-Length") == 0) {
            clen = strtoll(v, NULL, 10);
        } else if (strcasecmp(line, "Transfer-Encoding") == 0) {
            chunked = strcasestr(v, "chunked") != NULL;
        } else if (strcasecmp(line, "Connection") == 0) {
            if (strcasestr(v, "close"))
                r->close = true;
            else if (strcasestr(v, "keep-alive"))
                r->close = false;
        } else if (strcasecmp(line, "Retry-After") == 0) {
            char *end = NULL;
            long s = strtol(v, &end, 10);
            if (end && end != v && *end == '\0') { /* strconv.Atoi */
                r->has_retry_after = true;
                r->retry_after = s;
            }
        }
    }
    if (r->status >= 100 && r->status < 200 && r->status != 101) {
        clen = -1; /* 1xx: skip, read the real answer */
        chunked = false;
        goto again;
    }
    if (r->status == 204 || r->status == 304) {
        rc = 0;
    } else if (chunked) {
        for (;;) {
            rc = need_line(c, &b, &e);
            if (rc != 0)
                goto out;
            unsigned long long sz = strtoull(b.data + b.pos, NULL, 16);
            b.pos = e;
            if (sz == 0) {
                do { /* trailers up to the empty line */
                    rc = need_line(c, &b, &e);
                    if (rc != 0)
                        goto out;
                    size_t n = e - b.pos;
                    b.pos = e;
                    if (n == 2)
                        break;
                } while (true);
                break;
            }
            if (sz > MAX_BODY || r->len + sz > MAX_BODY) {
                rc = MBEDTLS_ERR_SSL_BAD_INPUT_DATA;
                goto out;
            }
            rc = need(c, &b, (size_t)sz + 2);
            if (rc != 0)
                goto out;
            body_append(r, b.data + b.pos, (size_t)sz);
            b.pos += (size_t)sz + 2;
        }
    } else if (clen >= 0) {
        if ((unsigned long long)clen > MAX_BODY) {
            rc = MBEDTLS_ERR_SSL_BAD_INPUT_DATA;
            goto out;
        }
        rc = need(c, &b, (size_t)clen);
        if (rc != 0)
            goto out;
        body_append(r, b.data + b.pos, (size_t)clen);
    } else { /* delimited by the end of the connection */
        r->close = true;
        while ((rc = fill(c, &b)) > 0)
            ;
        if (rc < 0)
            goto out;
        body_append(r, b.data + b.pos, b.len - b.pos);
        rc = 0;
    }
    if (!r->body)
        body_append(r, "", 0);
out:
    free(b.data);
    return rc;
}

static int write_all(struct conn *c, const char *p, size_t len)
{
    while (len > 0) {
        int n = mbedtls_ssl_write(&c->ssl, (const unsigned char *)p, len);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == MBEDTLS_ERR_SSL_WANT_READ || n == MBEDTLS_ERR_SSL_WANT_WRITE)
            continue;
        return n;
    }
    return 0;
}

/* ---- pool and statistics ---------------------------------------------------------- */

static void count(json_t *obj, const char *key, json_int_t by)
{
    json_t *v = json_object_get(obj, key);
    json_object_set_new(obj, key, json_integer(json_integer_value(v) + by));
}

static void stat_call(struct ks_whclient *w, const char *svc, const char *addr)
{
    pthread_mutex_lock(&w->lock);
    json_t *per = json_object_get(w->calls, svc);
    if (!per) {
        per = json_object();
        json_object_set_new(w->calls, svc, per);
    }
    count(per, addr, 1);
    pthread_mutex_unlock(&w->lock);
}

static void stat_failure(struct ks_whclient *w, const char *svc, const char *path, const char *addr,
                         const char *reason, const char *err)
{
    pthread_mutex_lock(&w->lock);
    count(w->reasons, reason, 1);
    if (json_array_size(w->failures) >= KEEP_FAILURES)
        json_array_remove(w->failures, 0);
    json_array_append_new(w->failures,
                          json_pack("{s:s,s:s,s:s,s:s,s:s}", "service", svc, "path", path,
                                    "endpoint", addr ? addr : "", "reason", reason, "error", err));
    pthread_mutex_unlock(&w->lock);
}

static void stat_bump(struct ks_whclient *w, json_t *obj, const char *key, json_int_t *field)
{
    pthread_mutex_lock(&w->lock);
    if (obj)
        count(obj, key, 1);
    if (field)
        (*field)++;
    pthread_mutex_unlock(&w->lock);
}

/* Close what idled past the timeout in every pool (lock held); the closed
 * ones are chained on *ret_dead for closing without the lock. */
static void reap(struct ks_whclient *w, long long now, struct conn **ret_dead)
{
    for (struct pool *p = w->pools; p; p = p->next) {
        struct conn **pp = &p->idle;
        while (*pp) {
            struct conn *c = *pp;
            if (now - c->idle_since >= w->idle_ms) {
                *pp = c->next;
                p->nidle--;
                c->next = *ret_dead;
                *ret_dead = c;
            } else {
                pp = &c->next;
            }
        }
    }
}

static void close_chain(struct conn *c)
{
    while (c) {
        struct conn *next = c->next;
        conn_close(c);
        c = next;
    }
}

static struct pool *pool_get_locked(struct ks_whclient *w, const char *key)
{
    for (struct pool *p = w->pools; p; p = p->next)
        if (strcmp(p->key, key) == 0)
            return p;
    struct pool *p = calloc(1, sizeof(*p));
    if (!p)
        abort();
    p->key = ks_strdup(key);
    p->next = w->pools;
    w->pools = p;
    return p;
}

/* The newest usable idle connection of the pool, or NULL. */
static struct conn *take_idle(struct ks_server *ks, const char *key)
{
    struct ks_whclient *w = ks->whc;
    for (;;) {
        struct conn *dead = NULL;
        pthread_mutex_lock(&w->lock);
        reap(w, ks_mono_ms(), &dead);
        struct pool *p = pool_get_locked(w, key);
        struct conn *c = p->idle;
        if (c) {
            p->idle = c->next;
            p->nidle--;
            c->next = NULL;
        }
        pthread_mutex_unlock(&w->lock);
        close_chain(dead);
        if (!c)
            return NULL;
        if (ks->skip_idle_check || conn_alive(c)) {
            c->reused = true;
            return c;
        }
        conn_close(c); /* the server closed it while idle */
    }
}

static void put_idle(struct ks_whclient *w, const char *key, struct conn *c)
{
    pthread_mutex_lock(&w->lock);
    struct pool *p = pool_get_locked(w, key);
    if (p->nidle < MAX_IDLE_PER_POOL) {
        c->idle_since = ks_mono_ms();
        c->next = p->idle;
        p->idle = c;
        p->nidle++;
        c = NULL;
        pthread_cond_signal(&w->wake);
    }
    pthread_mutex_unlock(&w->lock);
    conn_close(c);
}

/* Closes idle connections when their idle timeout passes. */
static void *reaper_main(void *arg)
{
    struct ks_whclient *w = arg;
    pthread_mutex_lock(&w->lock);
    while (!w->stop) {
        struct conn *dead = NULL;
        long long now = ks_mono_ms();
        reap(w, now, &dead);
        if (dead) {
            pthread_mutex_unlock(&w->lock);
            close_chain(dead);
            pthread_mutex_lock(&w->lock);
            continue;
        }
        long long next = now + 60000;
        for (struct pool *p = w->pools; p; p = p->next)
            for (struct conn *c = p->idle; c; c = c->next)
                if (c->idle_since + w->idle_ms < next)
                    next = c->idle_since + w->idle_ms;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        long long wait = next - now + 1;
        ts.tv_sec += (time_t)(wait / 1000);
        ts.tv_nsec += (long)(wait % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&w->wake, &w->lock, &ts);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

/* ---- the call ------------------------------------------------------------------------ */

/* net/http Transport.roundTrip for one request: a pooled connection or a
 * new one to a random ready endpoint; on a reused connection that failed
 * with nothing written, again. 0 with *r filled, or -EIO with *ret_err
 * and *ret_reason; *ret_addr is the endpoint last tried (malloc'd or NULL). */
static int round_trip(struct ks_server *ks, const struct ks_wh_call *call, const char *svc,
                      const char *key, const char *sni, const char *req, size_t req_len,
                      long long deadline, struct wh_resp *r, char **ret_err,
                      const char **ret_reason, char **ret_addr)
{
    struct ks_whclient *w = ks->whc;
    for (;;) {
        struct conn *c = take_idle(ks, key);
        if (c) {
            stat_bump(w, NULL, NULL, &w->reused);
        } else {
            char *addr = NULL;
            int prc = ks_services_pick(ks, call->ns, call->name, &addr);
            if (prc == -ENOENT) {
                *ret_reason = "no-service";
                *ret_err = ks_printf("service \"%s\" not found", call->name);
                return -EIO;
            }
            if (prc != 0) {
                *ret_reason = "no-endpoints";
                *ret_err = ks_printf("no endpoints available for service \"%s\"", call->name);
                return -EIO;
            }
            free(*ret_addr);
            *ret_addr = addr;
            c = conn_open(addr, sni, call->ca_bundle, deadline, ret_err, ret_reason);
            if (!c)
                return -EIO;
            stat_bump(w, NULL, NULL, &w->opened);
        }
        free(*ret_addr);
        *ret_addr = ks_strdup(c->addr);
        uint64_t start = c->nwrite;
        c->deadline = deadline;
        c->sys_errno = 0;
        int rc = write_all(c, req, req_len);
        bool any = false;
        if (rc == 0)
            rc = read_response(c, r, &any);
        bool nothing_written = c->nwrite == start;
        if (!nothing_written)
            stat_call(w, svc, c->addr);
        if (rc == 0) {
            if (r->close)
                conn_close(c);
            else
                put_idle(w, key, c);
            return 0;
        }
        if (c->reused && nothing_written) {
            /* transport.go shouldRetryRequest: nothingWrittenError on a
             * reused connection, the body can be rewound (GetBody) */
            stat_bump(w, w->retries, "nothing-written", NULL);
            conn_close(c);
            free(r->body);
            memset(r, 0, sizeof(*r));
            continue;
        }
        if (rc == MBEDTLS_ERR_SSL_TIMEOUT) {
            *ret_reason = "timeout";
            *ret_err = ks_strdup("context deadline exceeded");
        } else if (nothing_written) {
            *ret_reason = "write";
            *ret_err = ks_printf("write tcp %s->%s: write: %s", c->local, c->remote,
                                 errno_text(c->sys_errno ? c->sys_errno : EPIPE));
        } else if (rc == 1) {
            *ret_reason = "lost-after-write";
            *ret_err = ks_strdup(any ? "unexpected EOF" : "EOF");
        } else if (c->sys_errno) {
            *ret_reason = "lost-after-write";
            *ret_err = ks_printf("read tcp %s->%s: read: %s", c->local, c->remote,
                                 errno_text(c->sys_errno));
        } else {
            *ret_reason = "bad-response";
            *ret_err = ks_strdup("net/http: HTTP/1.x transport connection broken: malformed "
                                 "HTTP response");
        }
        conn_close(c);
        return -EIO;
    }
}

int ks_whclient_post(struct ks_server *ks, const struct ks_wh_call *call, char **ret_body,
                     char **ret_err)
{
    struct ks_whclient *w = ks->whc;
    char *sni = ks_printf("%s.%s.svc", call->name, call->ns);
    char *url = ks_printf("https://%s:%ld%s", sni, call->port, call->path);
    char *svc = ks_printf("%s/%s", call->ns, call->name);
    char *key = ks_printf("%s:%ld %s", svc, call->port, ks_nz(call->ca_bundle));
    char trace_hdr[80] = "";
    long long deadline = ks_mono_ms() + call->timeout_ms;
    char *req = NULL, *err = NULL, *addr = NULL;
    const char *reason = NULL;
    int rc = -EIO;

    if (ks->tracing) {
        char trace[33], span[17];
        if (tl_trace[0])
            memcpy(trace, tl_trace, sizeof(trace));
        else
            random_hex(trace, 16);
        random_hex(span, 8);
        snprintf(trace_hdr, sizeof(trace_hdr), "00-%s-%s-01", trace, span);
        pthread_mutex_lock(&w->lock);
        if (json_array_size(w->traces) >= KEEP_TRACES)
            json_array_remove(w->traces, 0);
        json_array_append_new(w->traces, json_pack("{s:s,s:s,s:s}", "traceparent", trace_hdr,
                                                   "service", svc, "path", call->path));
        pthread_mutex_unlock(&w->lock);
    }
    size_t plen = strlen(call->payload);
    char *head = ks_printf("POST %s HTTP/1.1\r\nHost: %s:%ld\r\nUser-Agent: "
                           "kube-apiserver-admission\r\nContent-Length: %zu\r\nAccept: "
                           "application/json, */*\r\nContent-Type: application/json\r\n%s%s%s\r\n",
                           call->path, sni, call->port, plen, trace_hdr[0] ? "Traceparent: " : "",
                           trace_hdr, trace_hdr[0] ? "\r\n" : "");
    size_t hlen = strlen(head);
    req = malloc(hlen + plen + 1);
    if (!req)
        abort();
    memcpy(req, head, hlen);
    memcpy(req + hlen, call->payload, plen + 1);
    free(head);

    for (int attempt = 0;; attempt++) {
        struct wh_resp r = {0};
        if (round_trip(ks, call, svc, key, sni, req, hlen + plen, deadline, &r, &err, &reason,
                       &addr) != 0) {
            free(r.body);
            break;
        }
        /* client-go rest: 429 / 5xx with Retry-After are sent again */
        if ((r.status == 429 || r.status >= 500) && r.has_retry_after &&
            attempt < MAX_REST_RETRIES) {
            free(r.body);
            stat_bump(w, w->retries, "retry-after", NULL);
            long long wait = r.retry_after > 0 ? r.retry_after * 1000LL : 0;
            if (ks_mono_ms() + wait >= deadline) {
                reason = "timeout";
                err = ks_strdup("context deadline exceeded");
                break;
            }
            struct timespec ts = {.tv_sec = (time_t)(wait / 1000),
                                  .tv_nsec = (long)(wait % 1000) * 1000000};
            nanosleep(&ts, NULL);
            continue;
        }
        if (r.status < 200 || r.status > 299) {
            char snippet[256];
            snprintf(snippet, sizeof(snippet), "%s", r.body ? r.body : "");
            reason = "http-status";
            err = ks_printf("an error on the server (\"%s\") has prevented the request from "
                            "succeeding",
                            snippet);
            free(r.body);
            /* the caller prints it as is (not a transport error) */
            stat_failure(w, svc, call->path, addr, reason, err);
            *ret_err = err;
            err = NULL;
            goto out;
        }
        *ret_body = r.body;
        rc = 0;
        goto out;
    }
    stat_failure(w, svc, call->path, addr, reason ? reason : "unknown", err ? err : "");
    *ret_err = ks_printf("Post \"%s\": %s", url, err ? err : "unknown error");
    if (ks->verbose)
        fprintf(stderr, "kubesim: webhook %s (%s): %s\n", url, ks_nz(addr), ks_nz(err));
out:
    free(err);
    free(addr);
    free(req);
    free(key);
    free(svc);
    free(url);
    free(sni);
    return rc;
}

/* ---- lifecycle, stats, traces ------------------------------------------------------ */

int ks_whclient_new(struct ks_server *ks, long idle_ms)
{
    struct ks_whclient *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    pthread_mutex_init(&w->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->wake, &ca);
    pthread_condattr_destroy(&ca);
    w->idle_ms = idle_ms;
    w->calls = json_object();
    w->failures = json_array();
    w->reasons = json_object();
    w->retries = json_object();
    w->traces = json_array();
    ks->whc = w;
    if (pthread_create(&w->reaper, NULL, reaper_main, w) != 0) {
        ks_whclient_free(ks);
        return -EAGAIN;
    }
    w->reaper_running = true;
    return 0;
}

void ks_whclient_free(struct ks_server *ks)
{
    struct ks_whclient *w = ks->whc;
    if (!w)
        return;
    if (w->reaper_running) {
        pthread_mutex_lock(&w->lock);
        w->stop = true;
        pthread_cond_signal(&w->wake);
        pthread_mutex_unlock(&w->lock);
        pthread_join(w->reaper, NULL);
    }
    while (w->pools) {
        struct pool *p = w->pools;
        w->pools = p->next;
        close_chain(p->idle);
        free(p->key);
        free(p);
    }
    json_decref(w->calls);
    json_decref(w->failures);
    json_decref(w->reasons);
    json_decref(w->retries);
    json_decref(w->traces);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->lock);
    free(w);
    ks->whc = NULL;
}

void ks_whclient_flush(struct ks_server *ks, const char *ns, const char *name)
{
    struct ks_whclient *w = ks->whc;
    char *prefix = ks_printf("%s/%s:", ks_nz(ns), ks_nz(name));
    struct conn *dead = NULL;
    pthread_mutex_lock(&w->lock);
    for (struct pool *p = w->pools; p; p = p->next) {
        if (strncmp(p->key, prefix, strlen(prefix)) != 0)
            continue;
        while (p->idle) {
            struct conn *c = p->idle;
            p->idle = c->next;
            c->next = dead;
            dead = c;
        }
        p->nidle = 0;
    }
    pthread_mutex_unlock(&w->lock);
    close_chain(dead);
    free(prefix);
}

json_t *ks_whclient_stats(struct ks_server *ks)
{
    struct ks_whclient *w = ks->whc;
    pthread_mutex_lock(&w->lock);
    size_t idle = 0;
    for (struct pool *p = w->pools; p; p = p->next)
        idle += p->nidle;
    json_t *doc = json_pack("{s:O,s:O,s:O,s:O,s:{s:I,s:I,s:I},s:O}", "calls", w->calls, "failures",
                            w->failures, "failureReasons", w->reasons, "retries", w->retries,
                            "connections", "opened", w->opened, "reused", w->reused, "idle",
                            (json_int_t)idle, "traceparents", w->traces);
    json_t *copy = json_deep_copy(doc); /* the counters keep changing under the lock */
    json_decref(doc);
    pthread_mutex_unlock(&w->lock);
    return copy;
}

void ks_whclient_stats_reset(struct ks_server *ks)
{
    struct ks_whclient *w = ks->whc;
    pthread_mutex_lock(&w->lock);
    json_object_clear(w->calls);
    json_array_clear(w->failures);
    json_object_clear(w->reasons);
    json_object_clear(w->retries);
    json_array_clear(w->traces);
    w->opened = w->reused = 0;
    pthread_mutex_unlock(&w->lock);
}

static bool is_hex(const char *s, size_t n)
{
    bool nonzero = false;
    for (size_t i = 0; i < n; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
        nonzero |= s[i] != '0';
    }
    return nonzero;
}

void ks_trace_begin(struct ks_server *ks, const char *incoming)
{
    tl_trace[0] = '\0';
    if (!ks->tracing)
        return;
    /* W3C Trace Context: version "00", 32 hex trace-id, 16 hex parent-id,
     * 2 hex flags; an all-zero id is invalid */
    if (incoming && strlen(incoming) >= 55 && strncmp(incoming, "00-", 3) == 0 &&
        incoming[35] == '-' && incoming[52] == '-' && is_hex(incoming + 3, 32) &&
        is_hex(incoming + 36, 16)) {
        memcpy(tl_trace, incoming + 3, 32);
        tl_trace[32] = '\0';
        return;
    }
    random_hex(tl_trace, 16);
}

void ks_trace_end(void)
{
    tl_trace[0] = '\0';
}
