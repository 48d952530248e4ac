/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kubernetes API client (see kop/client.h).
 *
 * Threads: the client itself is shared and read-only after creation except
 * for the token (its own mutex). Each thread that makes a request gets a
 * "struct tstate" (curl easy + multi handle) through a pthread key; the
 * client also keeps every tstate in a list so kop_client_free() can
 * release them. Transfers always run through the thread's multi handle
 * with curl_multi_poll(), so a kop_client_cancel can interrupt one from
 * another thread with curl_multi_wakeup().
 *
 * Lock order: client->lock (tstate list), client->token_lock and
 * cancel->lock are never held together. cancel->lock is held around
 * curl_multi_wakeup() (it only writes to a socketpair and cannot block) so
 * the multi handle cannot go away underneath it.
 */
#include "kop/client.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "kop/curltls.h"
#include "kop/dynbuf.h"
#include "kop/execcred.h"
#include "kop/file.h"
#include "kop/json.h"
#include "kop/kubeconfig.h"
#include "kop/jstream.h"
#include "kop/log.h"
#include "kop/metrics.h"
#include "kop/ratelimit.h"
#include "kop/trace.h"

#define LOGGER "kube-client"
#define MAX_BODY ((size_t)512 << 20)
/* A streamed LIST with no byte for this long has failed. */
#define LIST_IDLE_MS 60000
#define MAX_ERROR_BODY ((size_t)1 << 20)
#define MAX_ACCEPT 480 /* longest Accept header value sent */

/* The architecture as Go names it (client-go's User-Agent carries GOARCH). */
#if defined(__x86_64__)
#define GOARCH_NAME "amd64"
#elif defined(__aarch64__)
#define GOARCH_NAME "arm64"
#elif defined(__i386__)
#define GOARCH_NAME "386"
#elif defined(__arm__)
#define GOARCH_NAME "arm"
#else
#define GOARCH_NAME "unknown"
#endif

struct tstate {
    CURL *easy;
    CURLM *multi;
    struct kop_client *c;
    struct tstate *prev, *next;
};

struct kop_client {
    struct kop_client_cancel *abort; /* client-wide cancel (abortable), NULL */
    struct kop_kubeconfig cfg;
    struct kop_ratelimit *rl;
    char *user_agent;
    char *host;    /* host:port for metrics */
    char *cluster; /* the cluster label of its metrics */
    /* tls-server-name: URLs name this host (SNI and certificate check),
     * CURLOPT_CONNECT_TO sends them to the real server, and the Host
     * header still names the server. NULL when not configured. */
    char *url_base;
    char *host_header;
    struct curl_slist *connect_to;
    int max_retries;
    int64_t max_retry_wait_ms;
    int64_t token_reread_ns;
    int64_t timeout_ms;
    int64_t connect_timeout_ms;
    struct kop_metric_family *requests;

    pthread_key_t key;
    pthread_mutex_t lock; /* tstate list */
    struct tstate *threads;

    pthread_mutex_t token_lock;
    char *token;
    int64_t token_read_ns; /* 0: never read */

    /* users[].user.exec: the plugin's credential provider, shared with
     * the other clients of this configuration (kop/execcred.h), or NULL. */
    struct kop_execcred *exec;
};

struct kop_client_cancel {
    pthread_mutex_t lock;
    bool fired;
    CURLM *multi; /* the multi handle of the transfer in progress */
};

/* Wall clock in Unix ms: exec credentials expire at a wall-clock time. */
static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- cancel -------------------------------------------------------------- */

struct kop_client_cancel *kop_client_cancel_new(void)
{
    struct kop_client_cancel *cc = calloc(1, sizeof(*cc));
    if (cc)
        pthread_mutex_init(&cc->lock, NULL);
    return cc;
}

void kop_client_cancel_free(struct kop_client_cancel *cc)
{
    if (!cc)
        return;
    pthread_mutex_destroy(&cc->lock);
    free(cc);
}

void kop_client_cancel_fire(struct kop_client_cancel *cc)
{
    if (!cc)
        return;
    pthread_mutex_lock(&cc->lock);
    cc->fired = true;
    if (cc->multi)
        curl_multi_wakeup(cc->multi);
    pthread_mutex_unlock(&cc->lock);
}

void kop_client_cancel_reset(struct kop_client_cancel *cc)
{
    if (!cc)
        return;
    pthread_mutex_lock(&cc->lock);
    cc->fired = false;
    pthread_mutex_unlock(&cc->lock);
}

bool kop_client_cancel_fired(struct kop_client_cancel *cc)
{
    if (!cc)
        return false;
    pthread_mutex_lock(&cc->lock);
    bool f = cc->fired;
    pthread_mutex_unlock(&cc->lock);
    return f;
}

/* Attach the running multi; false when already fired. */
static bool cancel_attach(struct kop_client_cancel *cc, CURLM *multi)
{
    if (!cc)
        return true;
    pthread_mutex_lock(&cc->lock);
    bool ok = !cc->fired;
    if (ok)
        cc->multi = multi;
    pthread_mutex_unlock(&cc->lock);
    return ok;
}

static void cancel_detach(struct kop_client_cancel *cc)
{
    if (!cc)
        return;
    pthread_mutex_lock(&cc->lock);
    cc->multi = NULL;
    pthread_mutex_unlock(&cc->lock);
}

/* Sleep up to ms, returning early (-ECANCELED) when cc fires. Polls at
 * 20 ms: retries are rare and short. */
static int cancel_sleep(struct kop_client_cancel *cc, int64_t ms)
{
    int64_t end = now_ns() + ms * 1000000;
    for (;;) {
        if (kop_client_cancel_fired(cc))
            return -ECANCELED;
        int64_t left = end - now_ns();
        if (left <= 0)
            return 0;
        if (left > 20000000)
            left = 20000000;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)left};
        nanosleep(&ts, NULL);
    }
}

/* ---- errors -------------------------------------------------------------- */

int kop_client_errno(int code, const char *reason)
{
    if (code >= 200 && code < 300)
        return 0;
    switch (code) {
    case 400:
    case 415:
    case 422:
        return -EINVAL;
    case 401:
        return -EACCES;
    case 403:
        return -EPERM;
    case 404:
        return -ENOENT;
    case 405:
        return -EOPNOTSUPP;
    case 409:
        return (reason && strcmp(reason, "AlreadyExists") == 0) ? -EEXIST : -EBUSY;
    case 410:
        return -ESTALE;
    case 413:
        return -EMSGSIZE;
    case 429:
        return -EAGAIN;
    case 504:
        return -ETIMEDOUT;
    default:
        break;
    }
    if (code >= 500)
        return -EIO;
    return -EPROTO;
}

static int curl_errno(CURLcode cc)
{
    switch (cc) {
    case CURLE_OK:
        return 0;
    case CURLE_OPERATION_TIMEDOUT:
        return -ETIMEDOUT;
    case CURLE_COULDNT_CONNECT:
        return -ECONNREFUSED;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return -EHOSTUNREACH;
    case CURLE_OUT_OF_MEMORY:
        return -ENOMEM;
    case CURLE_ABORTED_BY_CALLBACK:
        return -ECANCELED;
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
        return -ECONNRESET;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_USE_SSL_FAILED:
        return -EPROTO;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
        return -EINVAL;
    default:
        return -EIO;
    }
}

static void status_clear(struct kop_api_status *st)
{
    if (st)
        memset(st, 0, sizeof(*st));
}

/* Fill reason/message from a Status body (or the raw text). */
static void status_from_body(struct kop_api_status *st, const char *body, size_t len)
{
    if (!st)
        return;
    json_t *j = len ? json_loadb(body, len, 0, NULL) : NULL;
    const char *reason = json_string_value(json_object_get(j, "reason"));
    const char *msg = json_string_value(json_object_get(j, "message"));
    snprintf(st->reason, sizeof(st->reason), "%s", reason ? reason : "");
    if (msg) {
        kop_msgf(st->message, sizeof(st->message), "%s", msg);
    } else if (!j && len) {
        /* text/plain answers (APF 429, unknown paths, a proxy's error
         * page): keep the first line, made fit for JSON (it goes into
         * conditions, Events and log lines). */
        const char *eol = memchr(body, '\n', len);
        size_t n = eol ? (size_t)(eol - body) : len;
        if (n && body[n - 1] == '\r')
            n--;
        kop_utf8_sanitize(st->message, sizeof(st->message), body, n);
    }
    json_decref(j);
}

/* ---- per-thread curl handles --------------------------------------------- */

static void tstate_destroy(struct tstate *ts)
{
    if (!ts)
        return;
    if (ts->easy)
        curl_easy_cleanup(ts->easy);
    if (ts->multi)
        curl_multi_cleanup(ts->multi);
    free(ts);
}

static void tstate_unlink(struct kop_client *c, struct tstate *ts)
{
    if (ts->prev)
        ts->prev->next = ts->next;
    else
        c->threads = ts->next;
    if (ts->next)
        ts->next->prev = ts->prev;
}

/* pthread key destructor: the thread exits. */
static void tstate_thread_exit(void *p)
{
    struct tstate *ts = p;
    struct kop_client *c = ts->c;
    pthread_mutex_lock(&c->lock);
    tstate_unlink(c, ts);
    pthread_mutex_unlock(&c->lock);
    tstate_destroy(ts);
}

static struct tstate *tstate_get(struct kop_client *c)
{
    struct tstate *ts = pthread_getspecific(c->key);
    if (ts)
        return ts;
    ts = calloc(1, sizeof(*ts));
    if (!ts)
        return NULL;
    ts->c = c;
    ts->easy = curl_easy_init();
    ts->multi = curl_multi_init();
    if (!ts->easy || !ts->multi || pthread_setspecific(c->key, ts) != 0) {
        tstate_destroy(ts);
        return NULL;
    }
    pthread_mutex_lock(&c->lock);
    ts->next = c->threads;
    if (c->threads)
        c->threads->prev = ts;
    c->threads = ts;
    pthread_mutex_unlock(&c->lock);
    return ts;
}

/* ---- client -------------------------------------------------------------- */

static char *dup_or_null(const char *s, bool *oom)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *oom = true;
    return d;
}

static char *dup_mem(const char *s, size_t n, bool *oom)
{
    if (!s)
        return NULL;
    char *d = malloc(n + 1);
    if (!d) {
        *oom = true;
        return NULL;
    }
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

/*
 * A PEM private key as a curl blob. libcurl's mbedTLS backend hands the
 * blob to mbedtls_pk_parse_key() as it is, and mbedTLS reads PEM only when
 * the terminating NUL is counted in the length (without it the key does
 * not parse: CURLE_SSL_CERTPROBLEM); OpenSSL and GnuTLS read the PEM block
 * and ignore a NUL after it. Both key buffers the client uses hold that NUL
 * after their length: its own copy of the configuration (dup_mem) and the
 * exec plugin's credential (strdup).
 */
static struct curl_blob pem_key_blob(char *data, size_t len)
{
    bool pem = len > 0 && data[len - 1] != '\0' && memmem(data, len, "-----BEGIN ", 11);
    return (struct curl_blob){.data = data, .len = pem ? len + 1 : len, .flags = CURL_BLOB_COPY};
}

static int copy_config(const struct kop_kubeconfig *in, struct kop_kubeconfig *out)
{
    bool oom = false;
    out->server = dup_or_null(in->server, &oom);
    out->ca_file = dup_or_null(in->ca_file, &oom);
    out->ca_data = dup_mem(in->ca_data, in->ca_data_len, &oom);
    out->ca_data_len = in->ca_data_len;
    out->cert_file = dup_or_null(in->cert_file, &oom);
    out->cert_data = dup_mem(in->cert_data, in->cert_data_len, &oom);
    out->cert_data_len = in->cert_data_len;
    out->key_file = dup_or_null(in->key_file, &oom);
    out->key_data = dup_mem(in->key_data, in->key_data_len, &oom);
    out->key_data_len = in->key_data_len;
    out->token = dup_or_null(in->token, &oom);
    out->token_file = dup_or_null(in->token_file, &oom);
    out->tls_server_name = dup_or_null(in->tls_server_name, &oom);
    out->namespace = dup_or_null(in->namespace, &oom);
    out->insecure_skip_tls_verify = in->insecure_skip_tls_verify;
    out->in_cluster = in->in_cluster;
    return oom ? -ENOMEM : 0;
}

static char *host_of(const char *server)
{
    const char *p = strstr(server, "://");
    p = p ? p + 3 : server;
    return strndup(p, strcspn(p, "/"));
}

/* Set up the tls-server-name override (see struct kop_client). */
static int server_name_override(struct kop_client *c)
{
    const char *hp = c->host;
    const char *colon = NULL;
    if (hp[0] == '[') {
        const char *rb = strchr(hp, ']');
        if (!rb)
            return -EINVAL;
        colon = rb[1] == ':' ? rb + 1 : NULL;
    } else {
        colon = strrchr(hp, ':');
    }
    size_t hlen = colon ? (size_t)(colon - hp) : strlen(hp);
    bool https = strncmp(c->cfg.server, "http://", 7) != 0;
    const char *port = colon ? colon + 1 : (https ? "443" : "80");
    const char *name = c->cfg.tls_server_name;
    if (!*name || strpbrk(name, ":/[]@?# \t\r\n"))
        return -EINVAL;
    const char *path = strstr(c->cfg.server, "://");
    path = path ? path + 3 + strlen(hp) : "";
    size_t n = strlen(name) + strlen(port) + strlen(path) + sizeof("https://:");
    c->url_base = malloc(n);
    size_t cn = strlen(name) + strlen(port) + hlen + strlen(port) + 4;
    char *ct = malloc(cn);
    size_t hn = strlen(hp) + sizeof("Host: ");
    c->host_header = malloc(hn);
    if (!c->url_base || !ct || !c->host_header) {
        free(ct);
        return -ENOMEM;
    }
    snprintf(c->url_base, n, "%s://%s:%s%s", https ? "https" : "http", name, port, path);
    snprintf(ct, cn, "%s:%s:%.*s:%s", name, port, (int)hlen, hp, port);
    snprintf(c->host_header, hn, "Host: %s", hp);
    c->connect_to = curl_slist_append(NULL, ct);
    free(ct);
    return c->connect_to ? 0 : -ENOMEM;
}

int kop_client_new(const struct kop_client_options *opt, struct kop_client **ret)
{
    assert(opt);
    assert(opt->config);
    assert(ret);
    if (!opt->config->server)
        return -EINVAL;
    struct kop_client *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    int r = 0;
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->token_lock, NULL);
    if (pthread_key_create(&c->key, tstate_thread_exit) != 0) {
        pthread_mutex_destroy(&c->lock);
        pthread_mutex_destroy(&c->token_lock);
        free(c);
        return -EAGAIN;
    }
    r = copy_config(opt->config, &c->cfg);
    if (r < 0)
        goto out;
    c->rl = opt->ratelimit;
    if (opt->abortable) {
        c->abort = kop_client_cancel_new();
        if (!c->abort) {
            r = -ENOMEM;
            goto out;
        }
    }
    c->max_retries = opt->max_retries == 0 ? 5 : (opt->max_retries < 0 ? 0 : opt->max_retries);
    c->max_retry_wait_ms = opt->max_retry_wait_ms > 0 ? opt->max_retry_wait_ms : 10000;
    c->token_reread_ns = (opt->token_reread_ms > 0 ? opt->token_reread_ms : 60000) * 1000000;
    c->timeout_ms = opt->timeout_ms > 0 ? opt->timeout_ms : 60000;
    c->connect_timeout_ms = opt->connect_timeout_ms > 0 ? opt->connect_timeout_ms : 10000;
    if (opt->user_agent) {
        c->user_agent = strdup(opt->user_agent);
    } else {
        /* client-go's default (rest.DefaultKubernetesUserAgent): the
         * program's name, an unset version, the platform */
        char ua[256];
        kop_client_format_user_agent(ua, sizeof(ua), program_invocation_short_name, "v0.0.0");
        c->user_agent = strdup(ua);
    }
    c->host = host_of(c->cfg.server);
    c->cluster = strdup(opt->cluster ? opt->cluster : "local");
    if (c->host && c->cfg.tls_server_name) {
        r = server_name_override(c);
        if (r < 0)
            goto out;
    }
    if (opt->config->exec) {
        const struct kop_execcred_options eo = {.timeout_ms = opt->exec_timeout_ms,
                                                .metrics = opt->metrics};
        r = kop_execcred_get_shared(opt->config->exec, &eo, &c->exec);
        if (r < 0)
            goto out;
    }
    if (c->cfg.token && !c->cfg.token_file)
        c->token = strdup(c->cfg.token);
    if (!c->user_agent || !c->host || !c->cluster ||
        (c->cfg.token && !c->cfg.token_file && !c->token)) {
        r = -ENOMEM;
        goto out;
    }
    struct kop_metrics *m = opt->metrics ? opt->metrics : kop_metrics_global();
    static const char *const labels[] = {"code", "method", "host", "cluster", NULL};
    if (m)
        c->requests = kop_metrics_register(m, KOP_METRIC_COUNTER, "rest_client_requests_total",
                                           "Number of HTTP requests, partitioned by status code, "
                                           "method, and host.",
                                           labels, NULL, 0);
    *ret = c;
    return 0;
out:
    kop_client_free(c);
    return r;
}

void kop_client_abort(struct kop_client *c)
{
    assert(c);
    kop_client_cancel_fire(c->abort);
}

void kop_client_abort_reset(struct kop_client *c)
{
    assert(c);
    kop_client_cancel_reset(c->abort);
}

void kop_client_free(struct kop_client *c)
{
    if (!c)
        return;
    /* The calling thread's handle is in the list too. */
    pthread_setspecific(c->key, NULL);
    pthread_key_delete(c->key);
    struct tstate *ts = c->threads;
    while (ts) {
        struct tstate *next = ts->next;
        tstate_destroy(ts);
        ts = next;
    }
    kop_kubeconfig_cleanup(&c->cfg);
    if (c->token) {
        explicit_bzero(c->token, strlen(c->token));
        free(c->token);
    }
    kop_client_cancel_free(c->abort);
    kop_execcred_unref(c->exec);
    free(c->user_agent);
    free(c->host);
    free(c->cluster);
    free(c->url_base);
    free(c->host_header);
    curl_slist_free_all(c->connect_to);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->token_lock);
    free(c);
}

const char *kop_client_namespace(const struct kop_client *c)
{
    assert(c);
    return c->cfg.namespace;
}

int kop_client_format_user_agent(char *buf, size_t len, const char *program, const char *version)
{
    assert(buf);
    if (len == 0)
        return -EINVAL;
    int n = snprintf(buf, len, "%s/%s (linux/%s) kubernetes/unknown",
                     program && *program ? program : "unknown",
                     version && *version ? version : "v0.0.0", GOARCH_NAME);
    return n < 0 ? -EINVAL : ((size_t)n >= len ? -ENOSPC : 0);
}

const char *kop_client_user_agent(const struct kop_client *c)
{
    assert(c);
    return c->user_agent;
}

/* ---- token --------------------------------------------------------------- */

static bool is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* The token in path, trimmed of surrounding white space as client-go's
 * strings.TrimSpace does, into *ret_token (malloc'd). Returns 0, or
 * kop_file_read's errors (-ENOENT, -EACCES, ...; -EFBIG for a file over
 * KOP_CLIENT_MAX_TOKEN_FILE, which is refused rather than cut: a cut token
 * is only a 401 without a reason), -ENODATA when the file holds only white
 * space, -EBADMSG when the token holds a control byte (a NUL, CR or LF
 * inside would cut the token short or end the Authorization header early
 * and add headers of its own; Go's transport refuses such a header value).
 * The caller logs. */
static int read_token_file(const char *path, char **ret_token)
{
    char *buf = NULL;
    size_t n = 0;
    int r = kop_file_read(path, KOP_CLIENT_MAX_TOKEN_FILE, KOP_FILE_SECRET, &buf, &n);
    if (r < 0)
        return r;
    size_t len = n;
    while (n > 0 && is_space(buf[n - 1]))
        n--;
    size_t start = 0;
    while (start < n && is_space(buf[start]))
        start++;
    for (size_t i = start; r == 0 && i < n; i++) {
        unsigned char ch = (unsigned char)buf[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            r = -EBADMSG;
    }
    if (r == 0 && n == start)
        r = -ENODATA;
    char *t = NULL;
    if (r == 0) {
        t = strndup(buf + start, n - start);
        if (!t)
            r = -ENOMEM;
    }
    explicit_bzero(buf, len);
    free(buf);
    if (r == 0)
        *ret_token = t;
    return r;
}

/* Why the token file was not used: its path, and the limit when it is
 * over it (never a byte of its content). */
static void log_token_file_error(const char *path, int err)
{
    char msg[512];
    if (err == -EFBIG)
        snprintf(msg, sizeof(msg), "token file %.400s is larger than %zu bytes; not used", path,
                 KOP_CLIENT_MAX_TOKEN_FILE);
    else
        snprintf(msg, sizeof(msg), "token file %.400s %s; not used", path,
                 err == -EBADMSG   ? "holds a token with a control character"
                 : err == -ENODATA ? "holds no token"
                                   : "cannot be read");
    json_t *f = json_pack("{s:s}", "path", path);
    if (f && err == -EFBIG)
        json_object_set_new(f, "limitBytes", json_integer((json_int_t)KOP_CLIENT_MAX_TOKEN_FILE));
    kop_log_errno(KOP_LOG_ERROR, LOGGER, msg, err, f);
}

/* "Authorization: Bearer <token>" (malloc'd) or NULL when no token.
 * force: re-read the token file now. A configured token (or token file)
 * comes before the exec plugin's, as in client-go, whose exec round
 * tripper leaves a request that already carries Authorization alone.
 * *ret_exec (may be NULL): the exec token was used. */
static char *auth_header(struct kop_client *c, bool force, const struct kop_execcred_cred *cred,
                         bool *ret_exec)
{
    if (c->cfg.token_file) {
        int64_t now = now_ns();
        pthread_mutex_lock(&c->token_lock);
        bool stale = force || c->token_read_ns == 0 || now - c->token_read_ns >= c->token_reread_ns;
        pthread_mutex_unlock(&c->token_lock);
        if (stale) {
            /* File I/O outside the lock; a failed read keeps the old token. */
            char *t = NULL;
            int r = read_token_file(c->cfg.token_file, &t);
            if (r < 0)
                log_token_file_error(c->cfg.token_file, r);
            pthread_mutex_lock(&c->token_lock);
            if (t) {
                char *old = c->token;
                c->token = t;
                t = old;
            }
            c->token_read_ns = now;
            pthread_mutex_unlock(&c->token_lock);
            if (t) {
                explicit_bzero(t, strlen(t));
                free(t);
            }
        }
    }
    char *h = NULL;
    pthread_mutex_lock(&c->token_lock);
    if (c->token) {
        size_t n = strlen(c->token) + sizeof("Authorization: Bearer ");
        h = malloc(n);
        if (h)
            snprintf(h, n, "Authorization: Bearer %s", c->token);
    }
    pthread_mutex_unlock(&c->token_lock);
    if (!h && cred && cred->token) {
        size_t n = strlen(cred->token) + sizeof("Authorization: Bearer ");
        h = malloc(n);
        if (h)
            snprintf(h, n, "Authorization: Bearer %s", cred->token);
        if (h && ret_exec)
            *ret_exec = true;
    }
    return h;
}

static void free_secret(char *s)
{
    if (!s)
        return;
    explicit_bzero(s, strlen(s));
    free(s);
}

/* ---- paths --------------------------------------------------------------- */

static bool path_segment_ok(const char *s)
{
    return s && *s && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..") &&
           !strpbrk(s, "?#% \t\r\n");
}

int kop_client_path(const struct kop_resource *res, const char *ns, const char *name,
                    const char *subresource, char *buf, size_t len)
{
    assert(res);
    assert(buf);
    if (!path_segment_ok(res->version) || !path_segment_ok(res->resource))
        return -EINVAL;
    bool core = !res->group || !*res->group;
    if (!core && !path_segment_ok(res->group))
        return -EINVAL;
    if ((ns && *ns && !path_segment_ok(ns)) || (name && !path_segment_ok(name)) ||
        (subresource && !path_segment_ok(subresource)) || (subresource && !name))
        return -EINVAL;
    int n;
    char prefix[512];
    if (core)
        n = snprintf(prefix, sizeof(prefix), "/api/%s", res->version);
    else
        n = snprintf(prefix, sizeof(prefix), "/apis/%s/%s", res->group, res->version);
    if (n < 0 || (size_t)n >= sizeof(prefix))
        return -ENAMETOOLONG;
    if (res->namespaced && ns && *ns)
        n = snprintf(buf, len, "%s/namespaces/%s/%s%s%s%s%s", prefix, ns, res->resource,
                     name ? "/" : "", name ? name : "", subresource ? "/" : "",
                     subresource ? subresource : "");
    else
        n = snprintf(buf, len, "%s/%s%s%s%s%s", prefix, res->resource, name ? "/" : "",
                     name ? name : "", subresource ? "/" : "", subresource ? subresource : "");
    if (n < 0 || (size_t)n >= len)
        return -ENAMETOOLONG;
    return 0;
}

int kop_client_query_add(char *buf, size_t len, const char *key, const char *value)
{
    assert(buf);
    assert(key);
    assert(value);
    size_t n = strlen(buf);
    char sep = strchr(buf, '?') ? '&' : '?';
    size_t need = n + 1 + strlen(key) + 1 + strlen(value) * 3 + 1;
    if (need > len)
        return -ENAMETOOLONG;
    char *p = buf + n;
    *p++ = sep;
    size_t kl = strlen(key);
    memcpy(p, key, kl);
    p += kl;
    *p++ = '=';
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *v = (const unsigned char *)value; *v; v++) {
        if (isalnum(*v) || *v == '-' || *v == '_' || *v == '.' || *v == '~') {
            *p++ = (char)*v;
        } else {
            *p++ = '%';
            *p++ = hex[*v >> 4];
            *p++ = hex[*v & 15];
        }
    }
    *p = '\0';
    return 0;
}

/* ---- transfers ----------------------------------------------------------- */

struct xfer {
    struct kop_client *c;
    CURL *easy;
    /* body collection, capped at MAX_BODY or MAX_ERROR_BODY */
    struct kop_dynbuf body;
    /* streaming */
    kop_client_data_fn on_data;
    void *ud;
    int data_err;
    bool streaming; /* status 200 seen: bytes go to on_data */
    long code;
    int retry_after_s;
    int64_t last_byte_ns;
};

static size_t on_header(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct xfer *x = ud;
    size_t n = size * nmemb;
    x->last_byte_ns = now_ns();
    if (n >= 5 && strncmp(ptr, "HTTP/", 5) == 0) {
        x->retry_after_s = 0; /* a new response (after 100-continue or a redirect) */
        return n;
    }
    if (n > 12 && strncasecmp(ptr, "Retry-After:", 12) == 0) {
        char tmp[96];
        size_t k = n - 12 < sizeof(tmp) - 1 ? n - 12 : sizeof(tmp) - 1;
        memcpy(tmp, ptr + 12, k);
        tmp[k] = '\0';
        tmp[strcspn(tmp, "\r\n")] = '\0';
        char *end;
        long v = strtol(tmp, &end, 10);
        if (end == tmp) {
            /* An HTTP-date (RFC 9110 10.2.3): the time until then; a date
             * that is past or unreadable waits one second. */
            time_t when = curl_getdate(tmp, NULL);
            time_t now = time(NULL);
            v = when == (time_t)-1 || when <= now ? 1 : (long)(when - now);
        }
        if (v < 0)
            v = 0;
        if (v > 86400)
            v = 86400;
        x->retry_after_s = (int)v;
        if (x->retry_after_s == 0)
            x->retry_after_s = 1;
    }
    return n;
}

static int buf_append(struct xfer *x, const char *data, size_t n)
{
    int r = kop_dynbuf_add(&x->body, data, n);
    return r == -E2BIG ? -EMSGSIZE : r;
}

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct xfer *x = ud;
    size_t n = size * nmemb;
    x->last_byte_ns = now_ns();
    if (x->on_data) {
        if (!x->code)
            curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->code);
        if (x->code == 200) {
            int r = x->on_data(x->ud, ptr, n);
            if (r < 0) {
                x->data_err = r;
                return 0; /* aborts the transfer (CURLE_WRITE_ERROR) */
            }
            return n;
        }
    }
    int r = buf_append(x, ptr, n);
    if (r < 0) {
        x->data_err = r;
        return 0;
    }
    return n;
}

/* Run the configured easy handle on the thread's multi handle. Returns a
 * negative errno for transport failures, cancel and idle timeouts. */
static int perform(struct tstate *ts, struct xfer *x, struct kop_client_cancel *cc,
                   struct kop_client_cancel *abort_cc, int64_t idle_ns, int64_t limit_ns,
                   char *errbuf)
{
    int r = 0;
    /* The client-wide abort is shared by many threads: it is polled, not
     * attached (its wake-up would reach one of them only). */
    if (kop_client_cancel_fired(abort_cc))
        return -ECANCELED;
    if (!cancel_attach(cc, ts->multi))
        return -ECANCELED;
    if (curl_multi_add_handle(ts->multi, ts->easy) != CURLM_OK) {
        cancel_detach(cc);
        return -ENOMEM;
    }
    x->last_byte_ns = now_ns();
    int64_t deadline = limit_ns > 0 ? x->last_byte_ns + limit_ns : 0;
    int running = 1;
    while (running) {
        CURLMcode mc = curl_multi_perform(ts->multi, &running);
        if (mc != CURLM_OK) {
            r = -EIO;
            break;
        }
        if (!running)
            break;
        if (kop_client_cancel_fired(cc) || kop_client_cancel_fired(abort_cc)) {
            r = -ECANCELED;
            break;
        }
        int timeout = abort_cc ? 200 : 1000;
        if (idle_ns > 0) {
            int64_t left = x->last_byte_ns + idle_ns - now_ns();
            if (left <= 0) {
                r = -ETIMEDOUT;
                break;
            }
            if (left / 1000000 < timeout)
                timeout = (int)(left / 1000000) + 1;
        }
        if (deadline > 0) {
            int64_t left = deadline - now_ns();
            if (left <= 0) {
                snprintf(errbuf, CURL_ERROR_SIZE, "the stream outlived its time limit");
                r = -ETIME;
                break;
            }
            if (left / 1000000 < timeout)
                timeout = (int)(left / 1000000) + 1;
        }
        mc = curl_multi_poll(ts->multi, NULL, 0, timeout, NULL);
        if (mc != CURLM_OK) {
            r = -EIO;
            break;
        }
    }
    if (r == 0) {
        int left;
        CURLMsg *msg;
        CURLcode res = CURLE_OK;
        bool found = false;
        for (;;) {
            msg = curl_multi_info_read(ts->multi, &left);
            if (!msg)
                break;
            if (msg->msg == CURLMSG_DONE && msg->easy_handle == ts->easy) {
                res = msg->data.result;
                found = true;
            }
        }
        if (!found)
            res = CURLE_RECV_ERROR;
        if (res == CURLE_WRITE_ERROR && x->data_err) {
            /* Say what stopped it, not libcurl's "Failure writing output". */
            char eb[96];
            r = x->data_err;
            snprintf(errbuf, CURL_ERROR_SIZE, "%s the response: %s",
                     x->streaming || x->on_data ? "stopped reading" : "cannot keep",
                     strerror_r(-r, eb, sizeof(eb)));
        } else {
            r = curl_errno(res);
        }
        if (res != CURLE_OK && !errbuf[0])
            snprintf(errbuf, CURL_ERROR_SIZE, "%s", curl_easy_strerror(res));
    }
    curl_multi_remove_handle(ts->multi, ts->easy);
    cancel_detach(cc);
    return r;
}

static void count_request(struct kop_client *c, const char *method, long code)
{
    if (!c->requests)
        return;
    char cs[24];
    if (code > 0)
        snprintf(cs, sizeof(cs), "%ld", code);
    else
        snprintf(cs, sizeof(cs), "<error>");
    kop_counter_inc(kop_metric_child(c->requests, cs, method, c->host, c->cluster));
}

static int setup_easy(struct kop_client *c, CURL *e, const char *method, const char *url,
                      struct curl_slist *headers, const char *body, size_t body_len, bool streaming,
                      const struct kop_execcred_cred *cred, char *errbuf)
{
    curl_easy_reset(e);
    int bad = 0;
    bad |= curl_easy_setopt(e, CURLOPT_URL, url);
    bad |= curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
    bad |= curl_easy_setopt(e, CURLOPT_USERAGENT, c->user_agent);
    bad |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    bad |= curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    bad |= curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
    bad |= curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 15L);
    bad |= curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    bad |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    bad |= curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    bad |= curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)c->connect_timeout_ms);
    if (!streaming)
        bad |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)c->timeout_ms);
    /* Never follow redirects: credentials must not go elsewhere. */
    bad |= curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    if (strcmp(method, "GET") == 0) {
        bad |= curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    } else {
        bad |= curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
        if (body) {
            bad |= curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
            bad |= curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
        }
    }
    const struct kop_kubeconfig *k = &c->cfg;
    if (k->ca_data) {
        struct curl_blob b = {.data = k->ca_data, .len = k->ca_data_len, .flags = CURL_BLOB_COPY};
        bad |= curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &b);
    } else if (k->ca_file) {
        bad |= curl_easy_setopt(e, CURLOPT_CAINFO, k->ca_file);
    }
    /* The exec plugin's client certificate, unless the kubeconfig names one. */
    bool exec_cert = cred && cred->cert_data && !k->cert_data && !k->cert_file;
    if (exec_cert) {
        struct curl_blob b = {
            .data = cred->cert_data, .len = cred->cert_data_len, .flags = CURL_BLOB_COPY};
        bad |= curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &b);
        bad |= curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
        struct curl_blob kb = pem_key_blob(cred->key_data, cred->key_data_len);
        bad |= curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &kb);
        bad |= curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
    } else if (k->cert_data) {
        struct curl_blob b = {
            .data = k->cert_data, .len = k->cert_data_len, .flags = CURL_BLOB_COPY};
        bad |= curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &b);
        bad |= curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
    } else if (k->cert_file) {
        bad |= curl_easy_setopt(e, CURLOPT_SSLCERT, k->cert_file);
    }
    if (exec_cert) {
        /* set above */
    } else if (k->key_data) {
        struct curl_blob b = pem_key_blob(k->key_data, k->key_data_len);
        bad |= curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &b);
        bad |= curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
    } else if (k->key_file) {
        bad |= curl_easy_setopt(e, CURLOPT_SSLKEY, k->key_file);
    }
    if (c->connect_to)
        bad |= curl_easy_setopt(e, CURLOPT_CONNECT_TO, c->connect_to);
    /* iPAddress SANs with libcurl's mbedTLS backend (kop/curltls.h) */
    bad |= kop_curltls_setup(e) ? 1 : 0;
    if (k->insecure_skip_tls_verify) {
        bad |= curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        bad |= curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    return bad ? -EINVAL : 0;
}

/* The request's cancel and the client-wide abort, for a plugin run. */
struct cancel_pair {
    struct kop_client_cancel *cc, *abort;
};

static bool cancel_pair_fired(void *ud)
{
    const struct cancel_pair *cp = ud;
    return kop_client_cancel_fired(cp->cc) || kop_client_cancel_fired(cp->abort);
}

/*
 * The CLIENT span of one HTTP attempt, a child of the thread's current
 * span, with the OpenTelemetry HTTP client attributes (semconv
 * docs/http/http-spans.md; span name "{method}"); its "traceparent: ..."
 * header line into hdr. NULL (hdr empty) on ENOMEM.
 */
static struct kop_span *client_span(const char *method, const char *url, int resend, char *hdr,
                                    size_t hdr_len)
{
    struct kop_trace_ctx cur;
    char tp[KOP_TRACEPARENT_SIZE];
    if (!kop_trace_current(&cur))
        return NULL;
    struct kop_span *span = kop_span_start(method, KOP_SPAN_CLIENT, &cur);
    if (!span || kop_trace_format(&span->ctx, tp, sizeof(tp)) < 0) {
        kop_span_free(span);
        return NULL;
    }
    snprintf(hdr, hdr_len, "traceparent: %s", tp);
    kop_span_set_str(span, "http.request.method", method);
    kop_span_set_str(span, "url.full", url);
    if (resend > 0)
        kop_span_set_int(span, "http.request.resend_count", resend);
    return span;
}

static void end_client_span(struct kop_span *span, int r, long code, const char *errbuf)
{
    if (!span)
        return;
    if (code)
        kop_span_set_int(span, "http.response.status_code", code);
    /* a client span is an error for a transport failure or any 4xx/5xx */
    if (r < 0 && !code)
        kop_span_set_status(span, KOP_SPAN_ERROR, errbuf);
    else if (code >= 400)
        kop_span_set_status(span, KOP_SPAN_ERROR, NULL);
    kop_span_end(span);
}

/* One request's fixed parts, as the caller gave them. */
struct req {
    const char *method, *path, *url;
    const char *content_type, *accept, *body;
    size_t body_len;
    struct kop_client_cancel *cc;
    kop_client_data_fn on_data;
    void *ud;
    bool retry_stream;
    int64_t idle_ms, limit_ms;
};

/* What a request has tried so far: the memory of its retry state machine. */
struct tries {
    int backoffs;                   /* retries after a Retry-After backoff */
    int sent;                       /* HTTP attempts, the credential retries included */
    bool token_reread;              /* the token file was read again after a 401 */
    bool plugin_rerun;              /* the plugin's credential was dropped after a 401 */
    bool exec_used;                 /* this attempt sent the plugin's credential */
    struct kop_execcred_cred *cred; /* this attempt's plugin credential, or NULL */
};

/* After an answer that is not a 2xx: what the next attempt is. */
enum next_try {
    NEXT_GIVE_UP,
    NEXT_REREAD_TOKEN,  /* at once, with the token file read again */
    NEXT_RERUN_PLUGIN,  /* at once, with a fresh credential from the plugin */
    NEXT_AFTER_BACKOFF, /* after the Retry-After the server asked for */
};

/*
 * The one place that decides. A 401 first gets a fresh credential, once
 * per source, without counting as a retry: the token may just have
 * rotated, or the plugin's credential been revoked (or expired before its
 * expirationTimestamp; client-go's exec.go refreshes on 401 as well).
 * 429 and 5xx with a Retry-After are retried up to max_retries times; a
 * stream only when asked (a LIST; never a watch): its body was not handed
 * on, since the answer was not a 2xx.
 */
static enum next_try decide_next(const struct kop_client *c, const struct req *rq,
                                 const struct tries *t, long code, int retry_after_s)
{
    if (code == 401 && c->cfg.token_file && !t->token_reread)
        return NEXT_REREAD_TOKEN;
    if (code == 401 && t->exec_used && !t->plugin_rerun)
        return NEXT_RERUN_PLUGIN;
    if ((code == 429 || code >= 500) && retry_after_s > 0 && t->backoffs < c->max_retries &&
        (!rq->on_data || rq->retry_stream))
        return NEXT_AFTER_BACKOFF;
    return NEXT_GIVE_UP;
}

/* The exec plugin's credential for this attempt into t->cred (kept NULL
 * without a plugin). */
static int get_plugin_cred(struct kop_client *c, const struct req *rq, struct kop_api_status *st,
                           struct tries *t)
{
    kop_execcred_cred_unref(t->cred);
    t->cred = NULL;
    if (!c->exec)
        return 0;
    /* Sized so that the message fits st->message with its prefix. */
    static const char prefix[] = "getting credentials: ";
    char m[sizeof(st->message) - sizeof(prefix) + 1] = "";
    struct cancel_pair cp = {rq->cc, c->abort};
    int r = kop_execcred_get_cancellable(c->exec, wall_ms(),
                                         rq->cc || c->abort ? cancel_pair_fired : NULL, &cp,
                                         &t->cred, m, sizeof(m));
    if (r >= 0 || r == -ECANCELED)
        return r;
    /* One errno for "no credential" whatever the plugin did, so that no
     * caller mistakes it for an answer (-ENOENT, ...). */
    if (st)
        snprintf(st->message, sizeof(st->message), "%s%s", prefix, m);
    return r == -ENOMEM ? r : -ENOKEY;
}

/* The attempt's header list into *ret (NULL entries of fixed are left
 * out). -ENOMEM frees what was built. */
static int header_list(const char *const *fixed, size_t n, struct curl_slist **ret)
{
    struct curl_slist *h = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!fixed[i])
            continue;
        struct curl_slist *t = curl_slist_append(h, fixed[i]);
        if (!t) {
            curl_slist_free_all(h);
            return -ENOMEM;
        }
        h = t;
    }
    *ret = h;
    return 0;
}

/*
 * One HTTP attempt: the rate limiter's slot, the credential, the request.
 * Returns 0 with *ret_code when an answer came (any status), or the error
 * that ends the request (no retry after it).
 */
static int send_once(struct kop_client *c, struct tstate *ts, const struct req *rq, struct tries *t,
                     struct xfer *x, struct kop_api_status *st, long *ret_code)
{
    int r = kop_ratelimit_wait(c->rl);
    if (r < 0)
        return r;
    if (kop_client_cancel_fired(c->abort))
        return -ECANCELED; /* aborted while it waited for its slot */
    r = get_plugin_cred(c, rq, st, t);
    if (r < 0)
        return r;
    t->exec_used = t->cred && t->cred->cert_data && !c->cfg.cert_data && !c->cfg.cert_file;
    char *auth = auth_header(c, false, t->cred, &t->exec_used);
    char ct[256], ac[MAX_ACCEPT + 16];
    snprintf(ct, sizeof(ct), "Content-Type: %s",
             rq->content_type ? rq->content_type : "application/json");
    snprintf(ac, sizeof(ac), "Accept: %s", rq->accept ? rq->accept : "application/json");
    /* A call made under a span (a reconcile's) is a CLIENT child span of
     * it, and the server gets its traceparent (W3C Trace Context). */
    char tp[KOP_TRACEPARENT_SIZE + 16] = "";
    struct kop_span *span = client_span(rq->method, rq->url, t->sent, tp, sizeof(tp));
    const char *fixed[] = {ac,   "Expect:",      rq->body ? ct : NULL,
                           auth, c->host_header, tp[0] ? tp : NULL};
    struct curl_slist *h = NULL;
    r = header_list(fixed, sizeof(fixed) / sizeof(fixed[0]), &h);
    free_secret(auth);
    kop_dynbuf_free(&x->body);
    *x = (struct xfer){.c = c, .easy = ts->easy, .on_data = rq->on_data, .ud = rq->ud};
    kop_dynbuf_init(&x->body, rq->on_data ? MAX_ERROR_BODY : MAX_BODY);
    if (r < 0) {
        kop_span_free(span);
        return r;
    }
    char errbuf[CURL_ERROR_SIZE] = "";
    r = setup_easy(c, ts->easy, rq->method, rq->url, h, rq->body, rq->body_len, rq->on_data != NULL,
                   t->cred, errbuf);
    if (r == 0) {
        curl_easy_setopt(ts->easy, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(ts->easy, CURLOPT_HEADERDATA, x);
        curl_easy_setopt(ts->easy, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(ts->easy, CURLOPT_WRITEDATA, x);
        r = perform(ts, x, rq->cc, c->abort, rq->idle_ms * 1000000, rq->limit_ms * 1000000, errbuf);
    }
    long code = 0;
    curl_easy_getinfo(ts->easy, CURLINFO_RESPONSE_CODE, &code);
    /* Drop the header list (it holds the token) before anything else. */
    curl_easy_setopt(ts->easy, CURLOPT_HTTPHEADER, NULL);
    for (struct curl_slist *p = h; p; p = p->next)
        explicit_bzero(p->data, strlen(p->data));
    curl_slist_free_all(h);
    count_request(c, rq->method, r == 0 || code ? code : 0);
    end_client_span(span, r, code, errbuf);
    t->sent++;
    if (st) {
        st->attempts = t->sent;
        st->code = (int)code;
        st->retry_after_s = x->retry_after_s;
    }
    if (r < 0) {
        /* Transport error, cancel, idle watch or on_data's error (also
         * when a response had started): no retry. */
        if (st)
            snprintf(st->message, sizeof(st->message), "%s", errbuf);
        return r;
    }
    *ret_code = code;
    return 0;
}

/* The attempts of one request, until an answer or an error ends it. */
static int send_with_retries(struct kop_client *c, struct tstate *ts, const struct req *rq,
                             struct xfer *x, struct kop_api_status *st)
{
    struct tries t = {0};
    int r;
    for (;;) {
        long code = 0;
        r = send_once(c, ts, rq, &t, x, st, &code);
        if (r < 0)
            break;
        if (code >= 200 && code < 300)
            break;
        status_from_body(st, kop_dynbuf_ptr(&x->body), kop_dynbuf_len(&x->body));
        r = kop_client_errno((int)code, st ? st->reason : NULL);
        enum next_try next = decide_next(c, rq, &t, code, x->retry_after_s);
        if (next == NEXT_GIVE_UP)
            break;
        if (next == NEXT_REREAD_TOKEN) {
            t.token_reread = true;
            free_secret(auth_header(c, true, NULL, NULL));
        } else if (next == NEXT_RERUN_PLUGIN) {
            t.plugin_rerun = true;
            kop_execcred_invalidate(c->exec, t.cred);
            kop_logf(KOP_LOG_INFO, LOGGER,
                     "%s %s: HTTP 401 with the exec plugin's credential, "
                     "running the plugin again",
                     rq->method, rq->path);
        } else {
            int64_t wait = (int64_t)x->retry_after_s * 1000;
            if (wait > c->max_retry_wait_ms)
                wait = c->max_retry_wait_ms;
            kop_logf(KOP_LOG_DEBUG, LOGGER, "%s %s: HTTP %ld, retrying in %lld ms (attempt %d)",
                     rq->method, rq->path, code, (long long)wait, t.backoffs + 1);
            r = cancel_sleep(rq->cc, wait);
            if (r < 0)
                break;
            t.backoffs++;
        }
    }
    kop_execcred_cred_unref(t.cred);
    return r;
}

/* One request with retries. Exactly one of (ret_body) or (on_data) mode. */
static int do_request(struct kop_client *c, const char *method, const char *path,
                      const char *content_type, const char *accept, const char *body,
                      size_t body_len, struct kop_client_cancel *cc, kop_client_data_fn on_data,
                      void *ud, bool retry_stream, int64_t idle_ms, int64_t limit_ms,
                      struct kop_api_status *st, char **ret_body, size_t *ret_len)
{
    status_clear(st);
    assert(c);
    assert(method);
    assert(path);
    if (path[0] != '/')
        return -EINVAL;
    /* A header value with a line break would inject headers. */
    if (accept && (accept[strcspn(accept, "\r\n")] != '\0' || strlen(accept) > MAX_ACCEPT))
        return -EINVAL;
    struct tstate *ts = tstate_get(c);
    if (!ts)
        return -ENOMEM;
    const char *base = c->url_base ? c->url_base : c->cfg.server;
    size_t ulen = strlen(base) + strlen(path) + 1;
    char *url = malloc(ulen);
    if (!url)
        return -ENOMEM;
    snprintf(url, ulen, "%s%s", base, path);
    const struct req rq = {.method = method,
                           .path = path,
                           .url = url,
                           .content_type = content_type,
                           .accept = accept,
                           .body = body,
                           .body_len = body_len,
                           .cc = cc,
                           .on_data = on_data,
                           .ud = ud,
                           .retry_stream = retry_stream,
                           .idle_ms = idle_ms,
                           .limit_ms = limit_ms};
    struct xfer x = {0};
    int r = send_with_retries(c, ts, &rq, &x, st);
    free(url);
    if (r == 0 && ret_body) {
        /* NULL for a response without a body, as before the buffer was
         * used; take cannot fail on a buffer that holds memory. */
        *ret_body = NULL;
        *ret_len = 0;
        if (kop_dynbuf_capacity(&x.body) > 0)
            r = kop_dynbuf_take(&x.body, ret_body, ret_len);
    }
    kop_dynbuf_free(&x.body);
    return r;
}

int kop_client_request(struct kop_client *c, const struct kop_request *req,
                       struct kop_api_status *status, json_t **ret_obj)
{
    status_clear(status);
    assert(c);
    assert(req);
    char *body = NULL;
    size_t body_len = 0;
    if (req->body) {
        int r = kop_json_dump(req->body, JSON_COMPACT, &body, &body_len);
        if (r < 0)
            return r;
    }
    char *resp = NULL;
    size_t resp_len = 0;
    int r = do_request(c, req->method, req->path, req->content_type, req->accept, body, body_len,
                       req->cancel, NULL, NULL, false, 0, 0, status, &resp, &resp_len);
    free(body);
    if (r < 0)
        return r;
    json_t *obj = NULL;
    if (resp_len > 0) {
        json_error_t err;
        obj = json_loadb(resp, resp_len, 0, &err);
        if (!obj) {
            if (status)
                snprintf(status->message, sizeof(status->message), "invalid JSON in response: %s",
                         err.text);
            free(resp);
            return -EBADMSG;
        }
    }
    free(resp);
    if (ret_obj)
        *ret_obj = obj;
    else
        json_decref(obj);
    return 0;
}

static int simple(struct kop_client *c, const char *method, const struct kop_resource *res,
                  const char *ns, const char *name, const char *sub, const char *ctype,
                  const json_t *body, const char *query, struct kop_api_status *status,
                  json_t **ret_obj)
{
    status_clear(status);
    char path[4096];
    int r = kop_client_path(res, ns, name, sub, path, sizeof(path));
    if (r < 0)
        return r;
    if (query) {
        if (strlen(path) + strlen(query) + 1 > sizeof(path))
            return -ENAMETOOLONG;
        strncat(path, query, sizeof(path) - strlen(path) - 1);
    }
    struct kop_request req = {.method = method, .path = path, .content_type = ctype, .body = body};
    return kop_client_request(c, &req, status, ret_obj);
}

static const char *obj_name(const json_t *obj)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
}

int kop_client_get(struct kop_client *c, const struct kop_resource *res, const char *ns,
                   const char *name, struct kop_api_status *status, json_t **ret_obj)
{
    if (!name)
        return -EINVAL;
    return simple(c, "GET", res, ns, name, NULL, NULL, NULL, NULL, status, ret_obj);
}

/* The path of a LIST with its query. */
static int list_path(const struct kop_resource *res, const char *ns,
                     const struct kop_list_options *o, char *path, size_t size)
{
    int r = kop_client_path(res, ns, NULL, NULL, path, size);
    if (r < 0 || !o)
        return r;
    char lim[32];
    snprintf(lim, sizeof(lim), "%ld", o->limit);
    if (r == 0 && o->label_selector && *o->label_selector)
        r = kop_client_query_add(path, size, "labelSelector", o->label_selector);
    if (r == 0 && o->field_selector && *o->field_selector)
        r = kop_client_query_add(path, size, "fieldSelector", o->field_selector);
    if (r == 0 && o->limit > 0)
        r = kop_client_query_add(path, size, "limit", lim);
    if (r == 0 && o->continue_token && *o->continue_token)
        r = kop_client_query_add(path, size, "continue", o->continue_token);
    if (r == 0 && o->resource_version && *o->resource_version)
        r = kop_client_query_add(path, size, "resourceVersion", o->resource_version);
    return r;
}

int kop_client_list(struct kop_client *c, const struct kop_resource *res, const char *ns,
                    const struct kop_list_options *o, struct kop_api_status *status,
                    json_t **ret_list)
{
    status_clear(status);
    char path[8192];
    int r = list_path(res, ns, o, path, sizeof(path));
    if (r < 0)
        return r;
    struct kop_request req = {.method = "GET", .path = path, .accept = o ? o->accept : NULL};
    return kop_client_request(c, &req, status, ret_list);
}

/* ---- a LIST streamed item by item ------------------------------------------ */

struct list_stream {
    struct kop_jstream *js;
    kop_client_item_fn item_fn;
    void *ud;
    const char *const *drop;
    json_t *meta;
    bool bad_items;
};

static int ls_member(void *ud, unsigned level, const char *key, const char *p, size_t n)
{
    struct list_stream *ls = ud;
    if (level != 1)
        return 0;
    if (strcmp(key, "metadata") == 0) {
        json_decref(ls->meta);
        ls->meta = kop_jscan_decode(p, n);
        return ls->meta ? 0 : -ENOMEM;
    }
    if (strcmp(key, "items") == 0 && !(n == 4 && memcmp(p, "null", 4) == 0))
        ls->bad_items = true; /* an array is streamed, never reported */
    return 0;
}

static int ls_elem(void *ud, size_t idx, const char *p, size_t n, const struct kop_jscan *scan)
{
    struct list_stream *ls = ud;
    (void)idx;
    (void)scan;
    json_t *item = kop_jscan_decode_without(p, n, ls->drop);
    if (!item)
        return -ENOMEM;
    int r = ls->item_fn(ls->ud, item);
    json_decref(item);
    return r;
}

static int ls_data(void *ud, const char *data, size_t len)
{
    struct list_stream *ls = ud;
    return kop_jstream_feed(ls->js, data, len);
}

int kop_client_list_stream(struct kop_client *c, const struct kop_resource *res, const char *ns,
                           const struct kop_list_options *o, kop_client_item_fn item_fn, void *ud,
                           struct kop_client_cancel *cancel, struct kop_api_status *status,
                           json_t **ret_meta)
{
    status_clear(status);
    assert(item_fn);
    char path[8192];
    int r = list_path(res, ns, o, path, sizeof(path));
    if (r < 0)
        return r;
    struct list_stream ls = {.item_fn = item_fn, .ud = ud, .drop = o ? o->drop : NULL};
    size_t max_item = o && o->max_item_bytes ? o->max_item_bytes : KOP_CLIENT_MAX_ITEM_BYTES;
    const struct kop_jstream_options jo = {.path = {"items", NULL},
                                           .member_fn = ls_member,
                                           .elem_fn = ls_elem,
                                           .ud = &ls,
                                           .max_value = max_item};
    r = kop_jstream_new(&jo, &ls.js);
    if (r < 0)
        return r;
    r = do_request(c, "GET", path, NULL, o ? o->accept : NULL, NULL, 0, cancel, ls_data, &ls, true,
                   LIST_IDLE_MS, 0, status, NULL, NULL);
    int fr = r == 0 ? kop_jstream_finish(ls.js) : 0;
    if (fr == -E2BIG) {
        /* Bounded memory: a hostile or broken server cannot make the
         * informer hold an item of any size. */
        if (status)
            snprintf(status->message, sizeof(status->message),
                     "a value in the list is larger than %zu bytes", max_item);
        r = -EMSGSIZE;
    } else if (fr < 0) {
        if (status)
            snprintf(status->message, sizeof(status->message), "invalid JSON in response: %s",
                     kop_jstream_error(ls.js));
        r = -EBADMSG;
    }
    if (r == 0 && ls.bad_items) {
        if (status)
            snprintf(status->message, sizeof(status->message), "the list's items are not a list");
        r = -EBADMSG;
    }
    if (r == 0 && ret_meta) {
        *ret_meta = ls.meta ? ls.meta : json_object();
        ls.meta = NULL;
        if (!*ret_meta)
            r = -ENOMEM;
    }
    json_decref(ls.meta);
    kop_jstream_free(ls.js);
    return r;
}

int kop_client_create(struct kop_client *c, const struct kop_resource *res, const char *ns,
                      const json_t *obj, struct kop_api_status *status, json_t **ret_obj)
{
    if (!json_is_object(obj))
        return -EINVAL;
    return simple(c, "POST", res, ns, NULL, NULL, NULL, obj, NULL, status, ret_obj);
}

/* PUT of obj to the object (subresource NULL) or to its subresource; the
 * name defaults to obj's own. */
static int put(struct kop_client *c, const struct kop_resource *res, const char *ns,
               const char *name, const char *subresource, const json_t *obj,
               struct kop_api_status *status, json_t **ret_obj)
{
    if (!json_is_object(obj))
        return -EINVAL;
    if (!name)
        name = obj_name(obj);
    if (!name)
        return -EINVAL;
    return simple(c, "PUT", res, ns, name, subresource, NULL, obj, NULL, status, ret_obj);
}

int kop_client_update(struct kop_client *c, const struct kop_resource *res, const char *ns,
                      const char *name, const json_t *obj, struct kop_api_status *status,
                      json_t **ret_obj)
{
    return put(c, res, ns, name, NULL, obj, status, ret_obj);
}

int kop_client_update_status(struct kop_client *c, const struct kop_resource *res, const char *ns,
                             const char *name, const json_t *obj, struct kop_api_status *status,
                             json_t **ret_obj)
{
    return put(c, res, ns, name, "status", obj, status, ret_obj);
}

int kop_client_patch(struct kop_client *c, const struct kop_resource *res, const char *ns,
                     const char *name, const json_t *patch, struct kop_api_status *status,
                     json_t **ret_obj)
{
    if (!name || !json_is_object(patch))
        return -EINVAL;
    return simple(c, "PATCH", res, ns, name, NULL, "application/merge-patch+json", patch, NULL,
                  status, ret_obj);
}

int kop_client_patch_status(struct kop_client *c, const struct kop_resource *res, const char *ns,
                            const char *name, const json_t *patch, struct kop_api_status *status,
                            json_t **ret_obj)
{
    if (!name || !json_is_object(patch))
        return -EINVAL;
    return simple(c, "PATCH", res, ns, name, "status", "application/merge-patch+json", patch, NULL,
                  status, ret_obj);
}

int kop_client_delete(struct kop_client *c, const struct kop_resource *res, const char *ns,
                      const char *name, const struct kop_delete_options *o,
                      struct kop_api_status *status, json_t **ret_obj)
{
    if (!name)
        return -EINVAL;
    json_t *body = NULL;
    if (o && (o->propagation_policy || o->precondition_uid || o->precondition_resource_version)) {
        body = json_pack("{s:s, s:s}", "kind", "DeleteOptions", "apiVersion", "v1");
        if (!body)
            return -ENOMEM;
        if (o->propagation_policy)
            json_object_set_new(body, "propagationPolicy", json_string(o->propagation_policy));
        if (o->precondition_uid || o->precondition_resource_version) {
            json_t *pre = json_object();
            if (o->precondition_uid)
                json_object_set_new(pre, "uid", json_string(o->precondition_uid));
            if (o->precondition_resource_version)
                json_object_set_new(pre, "resourceVersion",
                                    json_string(o->precondition_resource_version));
            json_object_set_new(body, "preconditions", pre);
        }
    }
    int r = simple(c, "DELETE", res, ns, name, NULL, NULL, body, NULL, status, ret_obj);
    json_decref(body);
    return r;
}

int kop_client_watch(struct kop_client *c, const char *path, kop_client_data_fn on_data, void *ud,
                     struct kop_client_cancel *cancel, int64_t idle_timeout_ms,
                     struct kop_api_status *status)
{
    return kop_client_watch_accept(c, path, NULL, on_data, ud, cancel, idle_timeout_ms, status);
}

int kop_client_watch_accept(struct kop_client *c, const char *path, const char *accept,
                            kop_client_data_fn on_data, void *ud, struct kop_client_cancel *cancel,
                            int64_t idle_timeout_ms, struct kop_api_status *status)
{
    return kop_client_watch_limit(c, path, accept, on_data, ud, cancel, idle_timeout_ms, 0, status);
}

int kop_client_watch_limit(struct kop_client *c, const char *path, const char *accept,
                           kop_client_data_fn on_data, void *ud, struct kop_client_cancel *cancel,
                           int64_t idle_timeout_ms, int64_t limit_ms, struct kop_api_status *status)
{
    assert(on_data);
    return do_request(c, "GET", path, NULL, accept, NULL, 0, cancel, on_data, ud, false,
                      idle_timeout_ms, limit_ms > 0 ? limit_ms : 0, status, NULL, NULL);
}
