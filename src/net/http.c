// SPDX-License-Identifier: Apache-2.0
/*
 * The HTTP server: libmicrohttpd daemons with a small router on top.
 *
 * A request goes through MHD's access handler several times: the first call
 * (headers parsed) picks the route and decides 404/405/413-by-Content-Length;
 * the following calls hand over body pieces, which are collected into a
 * buffer that never grows past the route's max_body (an overflowing chunked
 * body is answered 413 at once); the last call runs the handler and queues
 * its response. The per-request state is created by MHD's URI log callback
 * (which also sees the raw query string, MHD strips it from "url") and freed
 * by the request-completed callback, which MHD calls for every request whose
 * URI callback ran.
 *
 * In-flight requests are counted from the URI callback to completion; a
 * keep-alive connection waiting for its next request counts as idle. The
 * graceful stop (drain) quiesces the listen socket, refuses new connections
 * from the TLS front and marks every further response "Connection: close".
 * Before it, end_keepalive marks the responses alone (connections are still
 * taken), and close_idle closes the connections that sit between requests
 * with nothing unread (docs/operations.md, "Shutdown and draining").
 *
 * Deadlines. MHD's own timeout is reset by every byte, so a client sending
 * a byte now and then would hold a connection slot for ever. Every
 * connection is therefore tracked (MHD's connection notifications) in one
 * of five phases, and the ticker thread closes those past their deadline:
 *   HEADERS  the request line and headers must be in within header_timeout,
 *            counted from the connection's start for its first request and
 *            from the request line for later ones;
 *   BODY     after a grace of header_timeout the body must have come at
 *            min_body_rate bytes per second on average;
 *   BUSY     routing, waiting for the budget (which has its own deadline),
 *            the handler: no deadline of ours;
 *   REPLY    the response queued: the client must have read it within
 *            header_timeout plus its length at min_body_rate (a reply
 *            holds its share of the budget until it is sent, so a client
 *            that reads a large one a few bytes now and then would keep
 *            it from every other large request);
 *   IDLE     between requests: the next request line must come within the
 *            idle timeout, however the bytes trickle.
 * A connection is closed with shutdown() on a duplicate of its descriptor
 * made when it started (so the descriptor cannot have been reused); MHD
 * then sees the end of the stream and closes it. The lock order is
 * track_lock alone: nothing else is taken under it.
 *
 * Limits. A listening server (metrics, probes) counts its connections per
 * client address (kop/ipcount.h, the table the TLS front keeps too), under
 * track_lock, from MHD's start notification to its close or to our
 * shutdown() of it, whichever comes first. MHD's own limit is set one
 * above max_connections, so MHD accepts the newcomer that finds the server
 * full and we learn its address: then, by the rule the TLS front applies
 * (kop_ipcount_evict_from()), the connection of the address that holds the
 * most that has sat longest between requests with nothing unread (as
 * close_idle counts them: a request on its way is never cut) is closed for
 * it; else the newcomer itself is closed at once. Until MHD has seen such a
 * close it holds max_connections + 1 and does not accept (the newcomer
 * waits in the listen backlog). Without this, a few addresses holding idle
 * keep-alive connections kept the kubelet's probes out until their idle
 * timeout. The per-address limit stays MHD's (checked before we see the
 * connection). The TLS front's server (no listen socket) is limited by the
 * front.
 *
 * Threads. MHD runs its own poll thread(s) (a pool of `threads`), or,
 * for an external server, none: the caller's loop polls MHD's epoll
 * descriptor and the wake eventfd (see ext_wake) and calls
 * kop_http_server_run(), which runs a round under srv->lock so that
 * shutdown cannot stop MHD in the middle of a round; once that loop has
 * stopped, kop_http_server_shutdown() runs MHD itself while it waits for
 * the requests in flight. The TLS front runs the webhook server this way
 * (one thread, no hand-off per request: src/net/tls.c, "The HTTP server").
 * Callbacks run on whichever thread runs MHD; handlers of small requests
 * must therefore not block.
 *
 * The heavy lane. MHD runs the connections of one thread in turn, so a
 * handler that works for long on one request (a 7 MB review parsed whole,
 * one 4 MB object converted) holds up every connection of that thread, the
 * apiserver's small reviews included. A request whose body is over
 * HEAVY_MIN (or of unknown length) therefore does its work on the heavy
 * lane's own threads: its streamed bytes are gathered into batches of
 * HEAVY_BATCH, and each batch, the stream's end or the collecting route's
 * handler runs as a job on a lane thread while MHD keeps the connection
 * suspended (reading nothing more of it); the job resumes it when done.
 * Small requests never wait behind that work, and the scheduler shares the
 * cores between the lane and MHD's threads. A job is submitted after its
 * connection is suspended; once the lane is stopping (shutdown), jobs run
 * where they are submitted, so no connection is left suspended when MHD
 * stops. job_lock alone: nothing else is taken under it.
 */
#include "kop/http.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "kop/clock.h"
#include "kop/dynbuf.h"
#include "kop/ipcount.h"
#include "kop/log.h"
#include "kop/metrics.h"
#include "kop/netaddr.h"
#include "kop/thread.h"
#include "kop/trace.h"

#define LOGGER "http"
/* First allocation for a body of unknown length (chunked). */
#define BODY_INITIAL 4096
/* Bodies over this (or of unknown length) do their work on the heavy lane. */
#define HEAVY_MIN (256 * 1024)
/* Streamed bytes handed to the lane at a time. */
#define HEAVY_BATCH (256 * 1024)

struct route {
    struct kop_http_route r;
    struct kop_metric *latency;   /* histogram, webhook routes only */
    struct kop_metric *in_flight; /* gauge, webhook routes only */
};

struct kop_http_server {
    struct kop_http_server_options opts;
    char name[32];
    char *host;
    struct route *routes;
    size_t n_routes;
    struct kop_metric_family *wh_total;
    /* per route: its requests_total child for code 200, resolved on first
     * use (a lookup takes the registry lock) */
    _Atomic(struct kop_metric *) *wh_ok;
    struct MHD_Daemon *mhd;
    /* external: MHD's epoll set, and wake_fd, an eventfd written after
     * every resume from another thread (MHD drops its inter-thread channel
     * without a thread of its own, so nothing else would wake the caller's
     * loop); wake_pending is set after each write, so a round reads the
     * eventfd only when one came (see ext_wake) */
    int mhd_epfd, wake_fd;
    atomic_bool wake_pending;
    uint16_t port;
    atomic_uint in_flight;
    atomic_bool draining;
    atomic_bool no_keepalive; /* end_keepalive: every response closes */
    atomic_bool stopped;
    int quiesced_fd;      /* listen socket handed back by MHD_quiesce_daemon, -1 */
    pthread_mutex_t lock; /* guards mhd against stop racing add_connection/quiesce */
    /* the in-flight budget: bytes charged by requests, and the connections
     * suspended until some are given back (wait_lock guards the list) */
    atomic_size_t budget_used;
    atomic_size_t large_used; /* what requests over SMALL_REQUEST hold */
    pthread_mutex_t wait_lock;
    struct MHD_Connection **waiters;
    size_t n_waiters, cap_waiters;
    /* connections and their deadline phases (see Deadlines above) */
    pthread_mutex_t track_lock;
    struct track *tracks;
    int64_t header_timeout_ns, idle_timeout_ns, grace_ns;
    double min_body_rate;
    struct kop_metric *m_deadline;
    /* a listening server's connections per address and in all, counted
     * from their start to their close or kill (see Limits; track_lock) */
    bool limit;
    struct kop_ipcount ips;
    unsigned n_counted;
    struct kop_metric *m_rej_max, *m_rej_evicted;
    /* wakes the waiters every BUDGET_TICK_MS so they see their deadline,
     * and closes connections past theirs; waits on ticker_cond
     * (CLOCK_MONOTONIC), so that a shutdown does not wait for a tick */
    pthread_t ticker;
    bool ticker_running;
    pthread_mutex_t ticker_lock;
    pthread_cond_t ticker_cond;
    bool ticker_stop; /* under ticker_lock */
    /* the heavy lane (see above): a FIFO of requests and its threads */
    pthread_mutex_t job_lock;
    pthread_cond_t job_cond;
    struct req *job_head, *job_tail;
    pthread_t *lane;
    unsigned n_lane;
    bool lane_stop;   /* under job_lock */
    bool lane_joined; /* the caller of shutdown's */
};

enum track_phase { TP_HEADERS, TP_BODY, TP_BUSY, TP_REPLY, TP_IDLE };

struct track {
    struct track *prev, *next;
    int fd;      /* a duplicate, ours */
    int conn_fd; /* MHD's, as handed to kop_http_server_add_connection() */
    enum track_phase phase;
    bool killed;
    struct kop_ipcount_entry *ip; /* counted there (see Limits), NULL when not */
    bool requested;               /* a request line came on it (else HEADERS = fresh) */
    int64_t since;                /* phase start */
    uint64_t body_bytes;
    uint64_t reply_bytes; /* REPLY: what the response holds */
};

enum req_state {
    REQ_NEW,      /* URI seen, headers not yet handled */
    REQ_WAIT,     /* suspended until the in-flight budget has room */
    REQ_BODY,     /* collecting (or streaming) the body */
    REQ_DISCARD,  /* answer decided (pending_status); drop the body, answer at its end */
    REQ_ANSWERED, /* response queued */
    REQ_WORK,     /* suspended: the heavy lane runs its end (or handler) */
    REQ_REPLY,    /* the heavy lane's reply is ready to be queued */
};

enum job_kind { JOB_DATA, JOB_END };

struct req {
    struct kop_http_server *srv;
    char *query;
    bool path_nul; /* the raw path has "%00": MHD's decoded one stops there */
    const struct route *route;
    enum req_state state;
    int pending_status; /* REQ_DISCARD: 404, 405 or 413 */
    size_t discarded;
    struct kop_dynbuf body; /* a collected body; its capacity is charged */
    size_t len;             /* body bytes received (collected or streamed) */
    int64_t start_ns;
    bool wh_counted;
    uint64_t content_length; /* 0 when unknown (chunked) */
    size_t held;             /* bytes charged to the budget */
    bool large;              /* charged to the large lane too (see charge()) */
    int64_t wait_since;      /* REQ_WAIT: when the wait began */
    void *stream;            /* a streaming route's state */
    bool stream_failed;      /* its data callback failed: answer 500 */
    /* the heavy lane */
    bool heavy;                     /* its work runs there */
    char *batch;                    /* streamed bytes not yet handed to the stream */
    size_t batch_len, batch_cap;    /* batch_cap is charged to the budget */
    enum job_kind job;              /* what the lane does next */
    struct req *job_next;           /* the lane's FIFO */
    struct MHD_Connection *conn;    /* to resume */
    const char *url, *method;       /* MHD's, valid for the request */
    struct kop_http_response reply; /* REQ_REPLY: the answer the lane made */
    struct kop_span *span;          /* opts.trace: the request's SERVER span */
    int answered;                   /* the status queued, 0 before */
};

/* ---- small helpers ------------------------------------------------------ */

static unsigned method_bit(const char *m)
{
    static const struct {
        const char *name;
        unsigned bit;
    } tab[] = {
        {"GET", KOP_HTTP_GET},         {"HEAD", KOP_HTTP_HEAD},   {"POST", KOP_HTTP_POST},
        {"PUT", KOP_HTTP_PUT},         {"PATCH", KOP_HTTP_PATCH}, {"DELETE", KOP_HTTP_DELETE},
        {"OPTIONS", KOP_HTTP_OPTIONS},
    };
    for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
        if (strcmp(m, tab[i].name) == 0)
            return tab[i].bit;
    }
    return 0;
}

static void allow_header(unsigned mask, char *buf, size_t len)
{
    static const char *const names[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};
    size_t off = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (!(mask & (1u << i)))
            continue;
        int n = snprintf(buf + off, len - off, "%s%s", off ? ", " : "", names[i]);
        if (n < 0 || (size_t)n >= len - off)
            break;
        off += (size_t)n;
    }
}

/* Append s as a JSON string body (without quotes). Returns bytes needed. */
static size_t json_escape(char *out, size_t cap, const char *s)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char tmp[8];
        const char *rep = NULL;
        size_t rl = 1;
        switch (*p) {
        case '"':
            rep = "\\\"";
            rl = 2;
            break;
        case '\\':
            rep = "\\\\";
            rl = 2;
            break;
        case '\n':
            rep = "\\n";
            rl = 2;
            break;
        case '\r':
            rep = "\\r";
            rl = 2;
            break;
        case '\t':
            rep = "\\t";
            rl = 2;
            break;
        default:
            if (*p < 0x20) {
                snprintf(tmp, sizeof(tmp), "\\u%04x", *p);
                rep = tmp;
                rl = 6;
            }
            break;
        }
        if (rep) {
            if (n + rl <= cap)
                memcpy(out + n, rep, rl);
            n += rl;
        } else {
            if (n < cap)
                out[n] = (char)*p;
            n++;
        }
    }
    return n;
}

int kop_http_response_status(struct kop_http_response *resp, int code, const char *reason,
                             const char *message)
{
    static const char head[] = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
                               "\"status\":\"Failure\",\"message\":\"";
    free(resp->body);
    resp->body = NULL;
    resp->body_len = 0;
    resp->status = code;
    resp->content_type = "application/json";
    if (!message)
        message = "";
    if (!reason)
        reason = "";
    size_t ml = json_escape(NULL, 0, message);
    size_t rl = json_escape(NULL, 0, reason);
    size_t cap = sizeof(head) + ml + rl + 64;
    char *b = malloc(cap);
    if (!b)
        return -ENOMEM;
    size_t off = sizeof(head) - 1;
    memcpy(b, head, off);
    off += json_escape(b + off, ml, message);
    memcpy(b + off, "\",\"reason\":\"", 12);
    off += 12;
    off += json_escape(b + off, rl, reason);
    int n = snprintf(b + off, cap - off, "\",\"code\":%d}", code);
    if (n < 0 || (size_t)n >= cap - off) {
        free(b);
        return -ENOMEM;
    }
    resp->body = b;
    resp->body_len = off + (size_t)n;
    return 0;
}

/* The text of s[0..n) without its tags, blanks folded, into out (size > 0). */
static void html_text(const char *s, size_t n, char *out, size_t size)
{
    size_t o = 0;
    bool tag = false, blank = false;
    for (size_t i = 0; i < n && o + 1 < size; i++) {
        char c = s[i];
        if (c == '<')
            tag = true;
        else if (c == '>')
            tag = false;
        else if (!tag && (c == ' ' || c == '\t' || c == '\r' || c == '\n'))
            blank = o > 0;
        else if (!tag && (unsigned char)c >= 0x20) {
            if (blank && o + 2 < size)
                out[o++] = ' ';
            blank = false;
            out[o++] = c;
        }
    }
    out[o] = '\0';
}

/* RFC 9110 §5.6.2 tchar */
static bool is_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* The Kubernetes StatusReason of an error code kop answers itself. */
static const char *status_reason(int code)
{
    switch (code) {
    case 400:
        return "BadRequest";
    case 413:
        return "RequestEntityTooLarge";
    case 500:
        return "InternalError";
    case 503:
        return "ServiceUnavailable";
    default:
        return "";
    }
}

/*
 * A whole response with kop's JSON Status for code and msg into out (cap
 * bytes): head (its status line and header lines, each with its CRLF,
 * h bytes; it may not overlap out), then Content-Type, Content-Length,
 * the blank line and the body. Returns its length, 0 when it does not fit.
 */
static size_t put_status_response(char *out, size_t cap, const char *head, size_t h, int code,
                                  const char *msg)
{
    struct kop_http_response resp = {0};
    if (kop_http_response_status(&resp, code, status_reason(code), msg) < 0)
        return 0;
    char tail[96];
    int n =
        snprintf(tail, sizeof(tail),
                 "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n", resp.body_len);
    size_t len = 0;
    if (n > 0 && h + (size_t)n + resp.body_len <= cap) {
        memcpy(out, head, h);
        memcpy(out + h, tail, (size_t)n);
        memcpy(out + h + (size_t)n, resp.body, resp.body_len);
        len = h + (size_t)n + resp.body_len;
    }
    free(resp.body);
    return len;
}

/*
 * libmicrohttpd 0.9.75 answers a request it refuses itself with a static
 * HTML page: its header block (status line, Date, Connection: close,
 * Content-Length, no Content-Type) ends right before
 * "<html><head><title>", and it closes the connection after it. A JSON
 * body never holds a raw CRLF, and a chunked one ends in "0\r\n\r\n"
 * followed by a status line, so the marker below is only ever that page.
 * For a bad or too large Content-Length it first writes the header block
 * alone, then the whole page again: that lone block is dropped. All of it
 * is a few hundred bytes at the end of the stream: only the tail of a
 * read is searched.
 */
#define MHD_PAGE_MARK "\r\n\r\n<html><head><title>"
#define MHD_PAGE_TAIL 2048

/* The start of the status line "HTTP/1.x ddd " of the header block that
 * ends at end (buf[from..end), no blank line inside), or NULL. */
static const char *block_start(const char *buf, size_t from, const char *end)
{
    for (const char *p = end; p >= buf + from; p--) {
        if (p + 4 <= end && memcmp(p, "\r\n\r\n", 4) == 0)
            return NULL;
        if ((p == buf + from || p[-1] == '\n') && end - p >= 13 &&
            (memcmp(p, "HTTP/1.1 ", 9) == 0 || memcmp(p, "HTTP/1.0 ", 9) == 0) && p[9] >= '1' &&
            p[9] <= '5')
            return p;
    }
    return NULL;
}

/*
 * True when buf[start..end) (a header block, its blank line included) is
 * one libmicrohttpd writes for its own error page: an error code,
 * Connection: close, a Content-Length, no Content-Type.
 */
static bool mhd_error_head(const char *start, const char *end)
{
    size_t n = (size_t)(end - start);
    return start[9] >= '4' && memmem(start, n, "\r\nConnection: close\r\n", 21) &&
           memmem(start, n, "\r\nContent-Length: ", 18) &&
           !memmem(start, n, "\r\nContent-Type:", 15);
}

size_t kop_http_json_errors(char *buf, size_t len, size_t cap, size_t *ret_hold)
{
    size_t from = len > MHD_PAGE_TAIL ? len - MHD_PAGE_TAIL : 0;
    *ret_hold = 0;
    const char *mark = memmem(buf + from, len - from, MHD_PAGE_MARK, sizeof(MHD_PAGE_MARK) - 1);
    if (!mark) {
        /* a lone error header block at the very end: kept back, its page
         * (or its second copy) follows */
        const char *start = len >= 4 && memcmp(buf + len - 4, "\r\n\r\n", 4) == 0
                                ? block_start(buf, from, buf + len - 4)
                                : NULL;
        if (start && mhd_error_head(start, buf + len))
            *ret_hold = (size_t)(buf + len - start);
        return len;
    }
    const char *start = block_start(buf, from, mark);
    if (!start || !mhd_error_head(start, mark + 4))
        return len;
    size_t body = (size_t)(mark - buf) + 4;
    int code = (start[9] - '0') * 100 + (start[10] - '0') * 10 + (start[11] - '0');
    /* only a whole page, the last bytes read */
    const char *cl = memmem(start, (size_t)(mark - start), "\r\nContent-Length: ", 18);
    if (strtoul(cl + 18, NULL, 10) != len - body)
        return len;
    /* the lone copy of the same header block right before it goes too */
    if (start - buf >= 4 && memcmp(start - 4, "\r\n\r\n", 4) == 0) {
        const char *lone = block_start(buf, from, start - 4);
        if (lone && mhd_error_head(lone, start))
            start = lone;
    }
    char title[128], text[512], msg[700];
    const char *t0 = mark + sizeof(MHD_PAGE_MARK) - 1;
    const char *t1 = memmem(t0, (size_t)(buf + len - t0), "</title>", 8);
    if (!t1)
        return len;
    html_text(t0, (size_t)(t1 - t0), title, sizeof(title));
    html_text(t1, (size_t)(buf + len - t1), text, sizeof(text));
    snprintf(msg, sizeof(msg), "%s%s%s", title, text[0] ? ": " : "", text);
    /* the page's status line and header lines but Content-Length */
    const char *page = block_start(buf, from, mark);
    char head[1024];
    size_t h = 0;
    for (const char *line = page; line < mark + 2;) {
        const char *eol = memmem(line, (size_t)(mark + 2 - line), "\r\n", 2);
        size_t l = (size_t)(eol - line) + 2;
        if (strncasecmp(line, "Content-Length:", 15) != 0) {
            if (h + l >= sizeof(head))
                break;
            memcpy(head + h, line, l);
            h += l;
        }
        line = eol + 2;
    }
    size_t at = (size_t)(start - buf);
    size_t out = put_status_response(buf + at, cap - at, head, h, code, msg);
    return out ? at + out : len;
}

int kop_http_request_line_ok(const char *p, size_t n)
{
    size_t i = 0;
    while (i < n && (p[i] == '\r' || p[i] == '\n'))
        i++;
    const char *line = p + i, *nl = memchr(line, '\n', n - i);
    if (!nl)
        return 0;
    size_t len = (size_t)(nl - line);
    if (len && line[len - 1] == '\r')
        len--;
    size_t m = 0;
    while (m < len && is_tchar((unsigned char)line[m]))
        m++;
    if (m == 0 || m == len || line[m] != ' ')
        return -1;
    size_t t = m + 1, te = t;
    while (te < len && line[te] != ' ') {
        unsigned char c = (unsigned char)line[te];
        if (c < 0x20 || c == 0x7f)
            return -1;
        te++;
    }
    /* " HTTP/d.d" and nothing after it */
    const char *v = line + te;
    if (te == t || len - te != 9 || memcmp(v, " HTTP/", 6) != 0 || v[6] < '0' || v[6] > '9' ||
        v[7] != '.' || v[8] < '0' || v[8] > '9')
        return -1;
    return 1;
}

size_t kop_http_error_response(char *buf, size_t cap, int code, const char *message)
{
    const char *text = MHD_get_reason_phrase_for((unsigned)code);
    char head[128];
    int n = snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\nConnection: close\r\n", code,
                     text && *text ? text : "Error");
    if (n <= 0 || (size_t)n >= sizeof(head))
        return 0;
    return put_status_response(buf, cap, head, (size_t)n, code, message);
}

int kop_http_response_header(struct kop_http_response *resp, const char *name, const char *value)
{
    assert(resp);
    assert(name);
    assert(value);
    if (!*name || strpbrk(name, "\r\n:") || strpbrk(value, "\r\n"))
        return -EINVAL;
    if (resp->n_headers >= KOP_HTTP_MAX_HEADERS)
        return -ENOSPC;
    struct kop_http_header *h = &resp->headers[resp->n_headers];
    size_t nl = strlen(name), vl = strlen(value);
    if (nl >= sizeof(h->name) || vl >= sizeof(h->value))
        return -E2BIG;
    memcpy(h->name, name, nl + 1);
    memcpy(h->value, value, vl + 1);
    resp->n_headers++;
    return 0;
}

const char *kop_http_request_header(const struct kop_http_request *req, const char *name)
{
    assert(req);
    assert(name);
    if (!req->_conn)
        return NULL;
    return MHD_lookup_connection_value(req->_conn, MHD_HEADER_KIND, name);
}

/* ---- responses ---------------------------------------------------------- */

static void record_webhook(struct req *rq, int status)
{
    const struct route *rt = rq->route;
    if (!rt || !rt->r.webhook_name || !rq->wh_counted)
        return;
    struct kop_metric *total = NULL;
    _Atomic(struct kop_metric *) *ok = &rq->srv->wh_ok[rt - rq->srv->routes];
    if (status == 200)
        total = atomic_load_explicit(ok, memory_order_acquire);
    if (!total) {
        char code[16];
        snprintf(code, sizeof(code), "%d", status);
        total = kop_metric_child(rq->srv->wh_total, rt->r.webhook_name, code);
        if (status == 200)
            atomic_store_explicit(ok, total, memory_order_release);
    }
    kop_counter_inc(total);
    double secs = (double)(kop_clock_now_ns() - rq->start_ns) / 1e9;
    kop_histogram_observe(rt->latency, secs);
}

static void track_reply(struct kop_http_server *srv, struct MHD_Connection *conn, size_t n);

/* Queue resp on conn; frees resp->body in every case. */
static enum MHD_Result send_response(struct MHD_Connection *conn, struct req *rq,
                                     struct kop_http_response *resp, bool close)
{
    struct MHD_Response *r;
    if (resp->body && resp->body_len) {
        r = MHD_create_response_from_buffer(resp->body_len, resp->body, MHD_RESPMEM_MUST_FREE);
    } else {
        free(resp->body);
        resp->body = NULL;
        r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    }
    if (!r) {
        free(resp->body);
        resp->body = NULL;
        return MHD_NO;
    }
    resp->body = NULL;
    size_t body_len = resp->body_len;
    enum MHD_Result ok = MHD_YES;
    if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                                resp->content_type ? resp->content_type : "application/json") !=
        MHD_YES)
        ok = MHD_NO;
    for (unsigned i = 0; i < resp->n_headers && i < KOP_HTTP_MAX_HEADERS; i++) {
        /* MHD refuses some headers (e.g. an empty value); drop them rather
         * than the whole answer. */
        if (MHD_add_response_header(r, resp->headers[i].name, resp->headers[i].value) != MHD_YES)
            kop_logf(KOP_LOG_DEBUG, LOGGER, "%s: response header %s dropped", rq->srv->name,
                     resp->headers[i].name);
    }
    if (rq->srv->opts.tls_headers &&
        (MHD_add_response_header(r, "Strict-Transport-Security", "max-age=31536000") != MHD_YES ||
         MHD_add_response_header(r, "X-Content-Type-Options", "nosniff") != MHD_YES))
        ok = MHD_NO;
    if (close || atomic_load(&rq->srv->draining) || atomic_load(&rq->srv->no_keepalive))
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    int status = resp->status > 0 ? resp->status : 200;
    if (status < 100 || status > 599)
        status = 500; /* a handler bug must still produce an answer */
    if (ok == MHD_YES)
        ok = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    if (ok == MHD_YES) {
        rq->state = REQ_ANSWERED;
        rq->answered = status;
        record_webhook(rq, status);
        track_reply(rq->srv, conn, body_len);
    }
    return ok;
}

static enum MHD_Result send_status(struct MHD_Connection *conn, struct req *rq, int code,
                                   const char *reason, const char *message, const char *allow)
{
    struct kop_http_response resp = {0};
    if (kop_http_response_status(&resp, code, reason, message) < 0)
        return MHD_NO;
    if (allow)
        kop_http_response_header(&resp, MHD_HTTP_HEADER_ALLOW, allow);
    /* An error answered before the body was read: close afterwards instead
     * of reading (and discarding) a body we refused. */
    return send_response(conn, rq, &resp, code == 413);
}

static enum MHD_Result too_large(struct MHD_Connection *conn, struct req *rq)
{
    char msg[96];
    snprintf(msg, sizeof(msg), "the request body is larger than %zu bytes", rq->route->r.max_body);
    return send_status(conn, rq, 413, "RequestEntityTooLarge", msg, NULL);
}

static enum MHD_Result over_budget(struct MHD_Connection *conn, struct req *rq);

static enum MHD_Result send_pending(struct MHD_Connection *conn, struct req *rq)
{
    switch (rq->pending_status) {
    case 404:
        return send_status(conn, rq, 404, "NotFound",
                           "the server could not find the requested resource", NULL);
    case 405: {
        char allow[96];
        unsigned allowed = rq->route->r.methods;
        if (allowed & KOP_HTTP_GET)
            allowed |= KOP_HTTP_HEAD;
        allow_header(allowed, allow, sizeof(allow));
        return send_status(conn, rq, 405, "MethodNotAllowed",
                           "the server does not allow this method on the requested resource",
                           allow);
    }
    case 503:
        return over_budget(conn, rq);
    default:
        return too_large(conn, rq);
    }
}

/*
 * The request's framing and headers, read as Go's net/http (the
 * apiserver's own stack) reads them, before any body byte:
 *  - at most one Transfer-Encoding header, and it says "chunked" (else
 *    501, "too many transfer encodings" or "unsupported transfer
 *    encoding"; RFC 9112 §6.1);
 *  - Content-Length headers that disagree: 400 (RFC 9112 §6.3);
 *  - an HTTP/1.1 request has exactly one Host header (else 400, §3.2);
 *  - header names are tokens, values hold no control byte but HTAB (else
 *    400; RFC 9110 §5.5).
 * libmicrohttpd takes the first header of each kind and, for a transfer
 * coding it does not know, reads until the connection ends: either way
 * what follows could be smuggled in as another request.
 */
struct framing { /* the request's headers, read once (framing_header) */
    unsigned n_te, n_host;
    const char *te;
    const char *cl;
    bool cl_differ;
    const char *bad_name, *bad_value;  /* the first header with one */
    const char *folded;                /* the first header continued by an obs-fold */
    const char *value_end, *value_key; /* the last header's (value_went_on) */
};

/*
 * An answer decided on the first call. MHD (0.9.75) closes the connection
 * after a response queued before the body was read, so without a body the
 * answer waits for the (immediate) final call and the connection stays
 * alive; with a body, the answer goes out at once and the body is never
 * read.
 */
static enum MHD_Result decide(struct MHD_Connection *conn, struct req *rq, const struct framing *f,
                              int status)
{
    rq->pending_status = status;
    rq->state = REQ_DISCARD;
    bool body = f->te || (f->cl && strcmp(f->cl, "0") != 0);
    if (body || status == 413)
        return send_pending(conn, rq);
    return MHD_YES;
}

/* ---- the in-flight budget ------------------------------------------------ */

/* After MHD_resume_connection(): an external server's loop must run MHD.
 * The flag is set after the write, and a round clears it before it reads:
 * whenever the eventfd holds a count, a flag set after that write is
 * still to come or still set, so the count is drained at the latest by
 * the round after, and a round without a wake costs no read(). */
static void ext_wake(struct kop_http_server *srv)
{
    uint64_t one = 1;
    if (srv->wake_fd < 0)
        return;
    if (write(srv->wake_fd, &one, sizeof(one)) < 0) {
        /* saturated: the loop wakes anyway */
    }
    atomic_store(&srv->wake_pending, true);
}

#define BUDGET_WAIT_MS_DEFAULT 10000

/* Let every waiting request try again (they re-suspend when it still does
 * not fit). */
static void wake_waiters(struct kop_http_server *srv)
{
    pthread_mutex_lock(&srv->wait_lock);
    for (size_t i = 0; i < srv->n_waiters; i++)
        MHD_resume_connection(srv->waiters[i]);
    bool any = srv->n_waiters > 0;
    srv->n_waiters = 0;
    pthread_mutex_unlock(&srv->wait_lock);
    if (any)
        ext_wake(srv);
}

static void forget_waiter(struct kop_http_server *srv, struct MHD_Connection *conn)
{
    pthread_mutex_lock(&srv->wait_lock);
    for (size_t i = 0; i < srv->n_waiters; i++) {
        if (srv->waiters[i] == conn) {
            srv->waiters[i] = srv->waiters[--srv->n_waiters];
            break;
        }
    }
    pthread_mutex_unlock(&srv->wait_lock);
}

/*
 * Large requests (a first charge over SMALL_REQUEST) together may hold the
 * budget less its eighth; that eighth is kept for the small ones (every
 * admission review and the usual conversion), so a few large bodies, slow
 * or not, never make the small requests wait. A large request larger than
 * its lane still runs when no other large one holds any.
 */
#define SMALL_REQUEST (1024 * 1024)

/* The small requests' eighth is theirs whatever the large ones hold: a
 * large streamed request cannot be refused once it runs, and its reply may
 * grow past its first charge (and past the whole budget); the small ones
 * then still run in their own eighth. used is the budget in use. */
static bool small_lane_has_room(const struct kop_http_server *srv, size_t used, size_t delta)
{
    size_t large = atomic_load(&srv->large_used);
    size_t small = used > large ? used - large : 0;
    return small + delta <= srv->opts.budget / 8;
}

/* Charge rq up to total bytes; only the first charge of a request may be
 * refused (later growth is counted so that others wait for it). */
static bool charge(struct kop_http_server *srv, struct req *rq, size_t total, bool may_refuse)
{
    if (total <= rq->held)
        return true;
    size_t delta = total - rq->held;
    size_t budget = srv->opts.budget;
    bool large = rq->large || (may_refuse && total > SMALL_REQUEST);
    if (large && budget) {
        size_t lane = budget - budget / 8;
        size_t cur = atomic_load(&srv->large_used);
        do {
            if (may_refuse && cur + delta > lane && cur > 0)
                return false;
        } while (!atomic_compare_exchange_weak(&srv->large_used, &cur, cur + delta));
    }
    size_t cur = atomic_load(&srv->budget_used);
    do {
        if (may_refuse && budget && cur + delta > budget && cur > 0 &&
            (large || !small_lane_has_room(srv, cur, delta))) {
            if (large && budget)
                atomic_fetch_sub(&srv->large_used, delta);
            return false;
        }
    } while (!atomic_compare_exchange_weak(&srv->budget_used, &cur, cur + delta));
    rq->held = total;
    rq->large = large && budget;
    return true;
}

#define BUDGET_TICK_MS 100

/* ---- deadlines ------------------------------------------------------------ */

static struct track *conn_track(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void track_phase(struct kop_http_server *srv, struct MHD_Connection *conn,
                        enum track_phase phase)
{
    struct track *tr = conn_track(conn);
    if (!tr)
        return;
    pthread_mutex_lock(&srv->track_lock);
    bool first = phase == TP_HEADERS && !tr->requested;
    if (phase == TP_HEADERS)
        tr->requested = true;
    if (first) {
        /* the first request line: its deadline runs from the connection's
         * start */
    } else if (tr->phase != phase) {
        tr->phase = phase;
        tr->since = kop_clock_now_ns();
        tr->body_bytes = 0;
    }
    pthread_mutex_unlock(&srv->track_lock);
}

/* The response (n bytes) is queued: it must be read at min_body_rate (see
 * Deadlines). */
static void track_reply(struct kop_http_server *srv, struct MHD_Connection *conn, size_t n)
{
    track_phase(srv, conn, TP_REPLY);
    struct track *tr = conn_track(conn);
    if (!tr)
        return;
    pthread_mutex_lock(&srv->track_lock);
    tr->reply_bytes = n;
    pthread_mutex_unlock(&srv->track_lock);
}

static void track_body(struct kop_http_server *srv, struct MHD_Connection *conn, size_t n)
{
    struct track *tr = conn_track(conn);
    if (!tr)
        return;
    pthread_mutex_lock(&srv->track_lock);
    tr->body_bytes += n;
    pthread_mutex_unlock(&srv->track_lock);
}

/* Bytes waiting in fd's receive queue; a failing ioctl counts as some, so
 * the connection is left alone. */
static int unread_bytes(int fd)
{
    int n = 0;
    if (ioctl(fd, FIONREAD, &n) < 0)
        return 1;
    return n;
}

/* Between requests (after a completed one, IDLE, or fresh with no request
 * line yet) with no request byte waiting unread: a request already on its
 * way is never cut. track_lock held. */
static bool track_between(const struct track *tr)
{
    if (tr->killed)
        return false;
    if (tr->phase != TP_IDLE && !(tr->phase == TP_HEADERS && !tr->requested))
        return false;
    return unread_bytes(tr->fd) == 0;
}

static int cmp_fd(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Of the connections on MHD's descriptors fds[0..n) (sorted ascending;
 * NULL: any) and counted at ip (NULL: any), the one that has sat longest
 * between requests; NULL when none is between requests. track_lock held. */
static struct track *idlest(struct kop_http_server *srv, const int *fds, size_t n,
                            const struct kop_ipcount_entry *ip)
{
    struct track *best = NULL;
    for (struct track *tr = srv->tracks; tr; tr = tr->next) {
        if (fds && !bsearch(&tr->conn_fd, fds, n, sizeof(*fds), cmp_fd))
            continue;
        if ((ip && tr->ip != ip) || !track_between(tr))
            continue;
        if (!best || tr->since < best->since)
            best = tr;
    }
    return best;
}

/* Stop counting tr against its address and the server (see Limits).
 * track_lock held. */
static void track_uncount(struct kop_http_server *srv, struct track *tr)
{
    if (!tr->ip)
        return;
    srv->n_counted--;
    if (--tr->ip->count == 0)
        kop_ipcount_remove(&srv->ips, tr->ip);
    tr->ip = NULL;
}

/* Close tr: MHD sees the end of the stream and closes it; its slot is free
 * from now on. track_lock held. */
static void track_kill(struct kop_http_server *srv, struct track *tr)
{
    tr->killed = true;
    shutdown(tr->fd, SHUT_RDWR);
    track_uncount(srv, tr);
}

/*
 * A listening server's newcomer tr from sa (see Limits): counted, when the
 * server has room or an idle connection of the address that holds the
 * most gives up its slot for it; else closed. Returns whether a connection
 * gave up its slot. track_lock held.
 */
static bool admit(struct kop_http_server *srv, struct track *tr, const struct sockaddr *sa)
{
    struct kop_ipcount_entry *mine = kop_ipcount_find(&srv->ips, sa);
    bool evicted = false;
    if (srv->n_counted >= srv->opts.max_connections) {
        const struct kop_ipcount_entry *top = kop_ipcount_evict_from(&srv->ips, mine);
        struct track *victim = top ? idlest(srv, NULL, 0, top) : NULL;
        if (!victim) {
            kop_counter_inc(srv->m_rej_max);
            track_kill(srv, tr);
            return false;
        }
        /* counted first, so whoever sees the close sees it */
        kop_counter_inc(srv->m_rej_evicted);
        track_kill(srv, victim); /* of top, which is not mine: mine stays */
        evicted = true;
    }
    if (!mine && kop_ipcount_add(&srv->ips, sa, &mine) < 0) {
        track_kill(srv, tr); /* ENOMEM: never served uncounted */
        return evicted;
    }
    mine->count++;
    tr->ip = mine;
    srv->n_counted++;
    return evicted;
}

static void notify_cb(void *cls, struct MHD_Connection *conn, void **socket_context,
                      enum MHD_ConnectionNotificationCode toe)
{
    struct kop_http_server *srv = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct track *tr = calloc(1, sizeof(*tr));
        if (!tr)
            return; /* untracked: MHD's own timeout still applies */
        tr->fd = ci ? fcntl(ci->connect_fd, F_DUPFD_CLOEXEC, 0) : -1;
        if (tr->fd < 0) {
            free(tr);
            return;
        }
        tr->conn_fd = ci->connect_fd;
        tr->phase = TP_HEADERS;
        tr->since = kop_clock_now_ns();
        const union MHD_ConnectionInfo *ai =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        bool evicted = false;
        pthread_mutex_lock(&srv->track_lock);
        if (srv->limit)
            evicted = admit(srv, tr, ai ? ai->client_addr : NULL);
        tr->next = srv->tracks;
        if (srv->tracks)
            srv->tracks->prev = tr;
        srv->tracks = tr;
        pthread_mutex_unlock(&srv->track_lock);
        *socket_context = tr;
        if (evicted)
            kop_logf(KOP_LOG_DEBUG, LOGGER,
                     "%s: an idle connection closed at max_connections: its address holds the "
                     "most",
                     srv->name);
        return;
    }
    struct track *tr = *socket_context;
    if (!tr)
        return;
    *socket_context = NULL;
    pthread_mutex_lock(&srv->track_lock);
    track_uncount(srv, tr);
    if (tr->prev)
        tr->prev->next = tr->next;
    else
        srv->tracks = tr->next;
    if (tr->next)
        tr->next->prev = tr->prev;
    pthread_mutex_unlock(&srv->track_lock);
    close(tr->fd);
    free(tr);
}

static bool track_expired(const struct kop_http_server *srv, const struct track *tr, int64_t now)
{
    int64_t age = now - tr->since;
    switch (tr->phase) {
    case TP_HEADERS:
        return age > srv->header_timeout_ns;
    case TP_IDLE:
        return age > srv->idle_timeout_ns;
    case TP_BODY:
        if (age <= srv->grace_ns)
            return false;
        return (double)tr->body_bytes < srv->min_body_rate * (double)(age - srv->grace_ns) / 1e9;
    case TP_REPLY:
        /* however the client reads: MHD's own timeout is reset by every
         * byte it takes, and a reply holds its share of the budget */
        return age > srv->grace_ns + (int64_t)((double)tr->reply_bytes / srv->min_body_rate * 1e9);
    case TP_BUSY:
        break;
    }
    return false;
}

/* Close the connections past their deadline (see Deadlines above). */
static void reap_slow(struct kop_http_server *srv)
{
    int64_t now = kop_clock_now_ns();
    pthread_mutex_lock(&srv->track_lock);
    for (struct track *tr = srv->tracks; tr; tr = tr->next) {
        if (tr->killed || !track_expired(srv, tr, now))
            continue;
        /* counted first (an atomic add), so whoever sees the close sees it */
        kop_counter_inc(srv->m_deadline);
        track_kill(srv, tr);
    }
    pthread_mutex_unlock(&srv->track_lock);
}

/* Freed memory goes back to the kernel when nothing is in flight, at most
 * every TRIM_EVERY_MS: after a burst of connections or a large review the
 * worker threads' malloc arenas keep their pages otherwise, and RSS keeps
 * the burst's high-water mark. */
#define TRIM_EVERY_MS 5000

/* Under AddressSanitizer or ThreadSanitizer the heap is the sanitizer's:
 * glibc's malloc_trim() would only initialise glibc's own allocator from
 * this thread (making it the main arena's thread without counting it), and
 * the thread exits then fail glibc's arena assertion ("a->attached_threads
 * > 0") at shutdown. There is nothing of glibc's to trim there. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TRIM_HEAP 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TRIM_HEAP 0
#endif
#endif
#ifndef TRIM_HEAP
#define TRIM_HEAP 1
#endif

static void *ticker_main(void *arg)
{
    struct kop_http_server *srv = arg;
    int64_t last_trim = kop_clock_now_ns();
    pthread_mutex_lock(&srv->ticker_lock);
    for (;;) {
        struct timespec ts = kop_clock_deadline_ms(BUDGET_TICK_MS);
        while (!srv->ticker_stop &&
               pthread_cond_timedwait(&srv->ticker_cond, &srv->ticker_lock, &ts) != ETIMEDOUT)
            ;
        if (srv->ticker_stop)
            break;
        pthread_mutex_unlock(&srv->ticker_lock);
        if (srv->opts.budget)
            wake_waiters(srv);
        reap_slow(srv);
        int64_t now = kop_clock_now_ns();
        if (TRIM_HEAP && now - last_trim > (int64_t)TRIM_EVERY_MS * KOP_NSEC_PER_MSEC &&
            atomic_load(&srv->in_flight) == 0) {
            malloc_trim(0);
            last_trim = now;
        }
        pthread_mutex_lock(&srv->ticker_lock);
    }
    pthread_mutex_unlock(&srv->ticker_lock);
    return NULL;
}

/* Give back what rq holds beyond keep bytes. */
static void release(struct kop_http_server *srv, struct req *rq, size_t keep)
{
    if (rq->held <= keep)
        return;
    atomic_fetch_sub(&srv->budget_used, rq->held - keep);
    if (rq->large)
        atomic_fetch_sub(&srv->large_used, rq->held - keep);
    rq->held = keep;
    wake_waiters(srv);
}

/* Suspend conn until the budget has room. Returns false when it cannot wait
 * (ENOMEM): the caller answers 503. */
static bool wait_for_budget(struct kop_http_server *srv, struct MHD_Connection *conn)
{
    bool ok = false;
    pthread_mutex_lock(&srv->wait_lock);
    if (srv->n_waiters == srv->cap_waiters) {
        size_t cap = srv->cap_waiters ? srv->cap_waiters * 2 : 16;
        struct MHD_Connection **w = realloc(srv->waiters, cap * sizeof(*w));
        if (w) {
            srv->waiters = w;
            srv->cap_waiters = cap;
        }
    }
    if (srv->n_waiters < srv->cap_waiters) {
        /* suspended under the lock: a wake-up cannot come before it */
        MHD_suspend_connection(conn);
        srv->waiters[srv->n_waiters++] = conn;
        ok = true;
    }
    pthread_mutex_unlock(&srv->wait_lock);
    return ok;
}

/* ---- MHD callbacks ------------------------------------------------------ */

static void *uri_cb(void *cls, const char *uri, struct MHD_Connection *conn)
{
    struct kop_http_server *srv = cls;
    struct req *rq = calloc(1, sizeof(*rq));
    if (!rq)
        return NULL;
    rq->srv = srv;
    const char *q = uri ? strchr(uri, '?') : NULL;
    /* MHD decodes the path in place into a C string, so "/convert%00x"
     * reaches the router as "/convert"; Go routes "/convert\0x", which is
     * no route */
    for (const char *p = uri; p && *p && p != q && !rq->path_nul; p++)
        rq->path_nul = p[0] == '%' && p[1] == '0' && p[2] == '0';
    rq->query = strdup(q ? q + 1 : "");
    if (!rq->query) {
        free(rq);
        return NULL;
    }
    rq->start_ns = kop_clock_now_ns();
    atomic_fetch_add(&srv->in_flight, 1);
    track_phase(srv, conn, TP_HEADERS);
    return rq;
}

static void fill_request(struct MHD_Connection *conn, const struct req *rq, const char *url,
                         const char *method, char *peer, struct kop_http_request *req);

/*
 * The request's SERVER span (opts.trace), with the attributes of the
 * OpenTelemetry HTTP semantic conventions for servers (semconv
 * docs/http/http-spans.md: span name "{method} {http.route}").
 */
static void start_span(struct MHD_Connection *conn, struct req *rq, const char *url,
                       const char *method)
{
    struct kop_trace_ctx parent;
    const char *tp = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "traceparent");
    bool remote = kop_trace_parse(tp, &parent) == 0;
    char name[96];
    snprintf(name, sizeof(name), "%s %s", method_bit(method) ? method : "HTTP", rq->route->r.path);
    rq->span = kop_span_start(name, KOP_SPAN_SERVER, remote ? &parent : NULL);
    if (!rq->span || !rq->span->recording)
        return;
    char peer[INET6_ADDRSTRLEN];
    struct kop_http_request req;
    fill_request(conn, rq, url, method, peer, &req);
    kop_span_set_str(rq->span, "http.request.method", method_bit(method) ? method : "_OTHER");
    kop_span_set_str(rq->span, "http.route", rq->route->r.path);
    kop_span_set_str(rq->span, "url.path", url);
    if (peer[0])
        kop_span_set_str(rq->span, "client.address", peer);
    kop_span_set_str(rq->span, "user_agent.original",
                     MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "User-Agent"));
}

static void end_span(struct req *rq, enum MHD_RequestTerminationCode toe)
{
    if (!rq->span)
        return;
    if (rq->answered)
        kop_span_set_int(rq->span, "http.response.status_code", rq->answered);
    /* a server span is an error for 5xx only; 4xx is the client's */
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
        kop_span_set_status(rq->span, KOP_SPAN_ERROR,
                            "the connection ended before the response was sent");
    else if (rq->answered >= 500)
        kop_span_set_status(rq->span, KOP_SPAN_ERROR, NULL);
    kop_span_end(rq->span);
    rq->span = NULL;
}

static void completed_cb(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct kop_http_server *srv = cls;
    struct req *rq = *con_cls;
    if (!rq)
        return;
    *con_cls = NULL;
    if (rq->wh_counted && rq->route)
        kop_gauge_add(rq->route->in_flight, -1);
    end_span(rq, toe);
    if (rq->stream)
        rq->route->r.stream->free(rq->stream);
    if (rq->state == REQ_WAIT)
        forget_waiter(srv, conn);
    release(srv, rq, 0);
    kop_dynbuf_free(&rq->body);
    free(rq->batch);
    if (rq->state == REQ_REPLY)
        free(rq->reply.body); /* made, never queued */
    free(rq->query);
    free(rq);
    atomic_fetch_sub(&srv->in_flight, 1);
    track_phase(srv, conn, TP_IDLE);
}

/* The route of path: an exact one first, else the first prefix route
 * whose path (ending in '/') starts path and leaves something after it. */
static const struct route *find_route(const struct kop_http_server *srv, const char *path)
{
    for (size_t i = 0; i < srv->n_routes; i++) {
        if (!srv->routes[i].r.prefix && strcmp(srv->routes[i].r.path, path) == 0)
            return &srv->routes[i];
    }
    for (size_t i = 0; i < srv->n_routes; i++) {
        const char *rp = srv->routes[i].r.path;
        size_t n = strlen(rp);
        if (srv->routes[i].r.prefix && strncmp(rp, path, n) == 0 && path[n] != '\0')
            return &srv->routes[i];
    }
    return NULL;
}

static int parse_content_length(const char *s, uint64_t *ret)
{
    if (!s)
        return -ENOENT;
    while (*s == ' ' || *s == '\t')
        s++;
    if (*s < '0' || *s > '9')
        return -EINVAL;
    uint64_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (v > (UINT64_MAX - 9) / 10)
            return -ERANGE;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    while (*s == ' ' || *s == '\t')
        s++;
    if (*s)
        return -EINVAL;
    *ret = v;
    return 0;
}

static enum MHD_Result start_body(struct MHD_Connection *conn, struct req *rq, const char *url,
                                  const char *method);
static void fill_request(struct MHD_Connection *conn, const struct req *rq, const char *url,
                         const char *method, char *peer, struct kop_http_request *req);

/*
 * True when MHD made this header out of an obs-fold (a line that starts
 * with SP or HTAB, RFC 9112 §5.2). libmicrohttpd 0.9.75 appends such a
 * continuation to the header's *name* and keeps the first line's value:
 * "Content-Length:\r\n 52" comes as a header "Content-Length52" with an
 * empty value, so the framing header vanishes (the body is read as the next
 * request) where Go, the apiserver's stack, reads "Content-Length: 52". An
 * unfolded header is where MHD read it, "name\0", the blanks after the
 * colon, then the value; a fold lengthened the name over that, or moved it
 * to a new block of the connection's memory pool (the value stays in the
 * read buffer, same pool: the walk below stays inside it and stops at the
 * first byte that is not a blank).
 */
static bool header_folded(const char *key, size_t key_size, const char *value)
{
    uintptr_t k = (uintptr_t)key, v = (uintptr_t)value;
    if (v < k + key_size + 1)
        return true;
    for (const char *p = key + key_size + 1; (uintptr_t)p < v; p++) {
        if (*p != ' ' && *p != '\t')
            return true;
    }
    return false;
}

/*
 * A NUL inside a header value. MHD 0.9.75 hands values over as C strings:
 * "Content-Type: application/json\0junk" arrives as "application/json"
 * where Go and the apiserver's stack refuse the request (RFC 9110 §5.5).
 * MHD ends a value in its read buffer by writing '\0' over the first
 * trailing blank or over the line end, and the next header's name starts
 * the next line. So from just past where the value ends to where the next
 * name starts (end: NULL for the last header) there are only blanks and
 * line ends ('\0', CR, LF: MHD may have cut them), unless the value went
 * on after a NUL. The walk stays inside the header block.
 */
static bool value_went_on(const char *value_end, const char *next_key)
{
    for (const char *p = value_end + 1; !next_key || p < next_key; p++) {
        if (*p == ' ' || *p == '\t')
            continue;
        if (!next_key) /* the last header: up to its line end */
            return *p != '\0' && *p != '\r' && *p != '\n';
        if (*p != '\0' && *p != '\r' && *p != '\n')
            return true;
    }
    return false;
}

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      size_t key_size, const char *value, size_t value_size)
{
    struct framing *f = cls;
    (void)kind;
    if (!key)
        return MHD_YES;
    if (value && !f->folded && header_folded(key, key_size, value))
        f->folded = key;
    else if (f->value_end && !f->folded && !f->bad_value && value_went_on(f->value_end, key))
        f->bad_value = f->value_key;
    f->value_end = value ? value + value_size : NULL;
    f->value_key = key;
    if (!value) {
        value = "";
        value_size = 0;
    }
    /* Go's httpguts.ValidHeaderFieldName / ValidHeaderFieldValue: a
     * token; no control byte but HTAB (RFC 9110 §5.5: CR, LF and NUL in
     * a value must be refused or replaced) */
    for (size_t i = 0; i < key_size && !f->bad_name; i++) {
        if (!is_tchar((unsigned char)key[i]))
            f->bad_name = key;
    }
    if (key_size == 0 && !f->bad_name)
        f->bad_name = key;
    for (size_t i = 0; i < value_size && !f->bad_value; i++) {
        unsigned char c = (unsigned char)value[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            f->bad_value = key;
    }
    if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0) {
        f->n_host++;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        if (f->n_te++ == 0)
            f->te = value;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        if (!f->cl)
            f->cl = value;
        else if (strcmp(f->cl, value) != 0)
            f->cl_differ = true;
    }
    return MHD_YES;
}

/* True when the framing is refused: answered (*ret, what the access
 * handler returns) before any body byte is read, the connection then
 * closed. False: the request goes on. */
static bool refuse_framing(struct MHD_Connection *conn, struct req *rq, const char *version,
                           const struct framing *f, enum MHD_Result *ret)
{
    char msg[160];
    int code;
    bool http11 = !version || strcmp(version, MHD_HTTP_VERSION_1_0) != 0;
    if (f->folded) {
        /* RFC 9112 §5.2 lets a server refuse an obs-fold; what MHD made
         * of it is neither what was sent nor what Go would read */
        code = 400;
        snprintf(msg, sizeof(msg), "obsolete line folding in a header");
    } else if (f->bad_name) {
        code = 400;
        snprintf(msg, sizeof(msg), "invalid header name");
    } else if (f->bad_value) {
        code = 400;
        snprintf(msg, sizeof(msg), "invalid header value in %.64s", f->bad_value);
    } else if (http11 && f->n_host != 1) {
        code = 400;
        snprintf(msg, sizeof(msg), "%s",
                 f->n_host ? "too many Host headers" : "missing required Host header");
    } else if (f->n_te > 1) {
        code = 501;
        snprintf(msg, sizeof(msg), "too many transfer encodings: %u Transfer-Encoding headers",
                 f->n_te);
    } else if (f->n_te == 1 && strcasecmp(f->te, "chunked") != 0) {
        code = 501;
        snprintf(msg, sizeof(msg), "unsupported transfer encoding: \"%.64s\"", f->te);
    } else if (f->cl_differ) {
        code = 400;
        snprintf(msg, sizeof(msg), "the request has Content-Length headers that disagree");
    } else {
        return false;
    }
    kop_logf(KOP_LOG_DEBUG, LOGGER, "%s: %s: answered %d", rq->srv->name, msg, code);
    rq->state = REQ_DISCARD;
    rq->pending_status = code;
    struct kop_http_response resp = {0};
    if (kop_http_response_status(&resp, code, status_reason(code), msg) < 0) {
        *ret = MHD_NO;
        return true;
    }
    *ret = send_response(conn, rq, &resp, true);
    return true;
}

/* First call: framing and Host, route, method, Content-Length. */
static enum MHD_Result begin_request(struct MHD_Connection *conn, struct req *rq, const char *url,
                                     const char *method, const char *version)
{
    struct kop_http_server *srv = rq->srv;
    struct framing f = {0};
    MHD_get_connection_values_n(conn, MHD_HEADER_KIND, framing_header, &f);
    if (f.value_end && !f.folded && !f.bad_value && value_went_on(f.value_end, NULL))
        f.bad_value = f.value_key;
    enum MHD_Result refused;
    if (refuse_framing(conn, rq, version, &f, &refused))
        return refused;
    const struct route *rt = rq->path_nul ? NULL : find_route(srv, url);
    if (!rt)
        return decide(conn, rq, &f, 404);
    rq->route = rt;
    if (srv->opts.trace)
        start_span(conn, rq, url, method);
    if (rt->r.webhook_name) {
        rq->wh_counted = true;
        kop_gauge_add(rt->in_flight, 1);
    }
    unsigned mb = method_bit(method);
    unsigned allowed = rt->r.methods;
    if (allowed & KOP_HTTP_GET)
        allowed |= KOP_HTTP_HEAD;
    if (!(mb & allowed))
        return decide(conn, rq, &f, 405);
    uint64_t cl = 0;
    /* chunked wins over a Content-Length sent with it (RFC 9112 §6.3; Go
     * drops the header): the length is unknown, the body is cut at the
     * route's limit as it comes. Taking the header's word would let
     * "Content-Length: 1" keep a large chunked body off the heavy lane */
    int r = f.te ? -ENOENT : parse_content_length(f.cl, &cl);
    if (r == 0 && cl > rt->r.max_body)
        return decide(conn, rq, &f, 413);
    rq->content_length = r == 0 ? cl : 0;
    rq->url = url;
    rq->method = method;
    /* unknown length (chunked) may be any size: heavy too */
    rq->heavy =
        srv->n_lane > 0 && rt->r.max_body > HEAVY_MIN && (cl > HEAVY_MIN || (r != 0 && f.te));
    rq->wait_since = kop_clock_now_ns();
    return start_body(conn, rq, url, method);
}

static enum MHD_Result over_budget(struct MHD_Connection *conn, struct req *rq)
{
    struct kop_http_response resp = {0};
    kop_logf(KOP_LOG_WARN, LOGGER,
             "%s: in-flight memory budget of %zu bytes exhausted: answered 503", rq->srv->name,
             rq->srv->opts.budget);
    if (kop_http_response_status(&resp, 503, "ServiceUnavailable",
                                 "the webhook is over its in-flight memory budget; retry") < 0)
        return MHD_NO;
    kop_http_response_header(&resp, "Retry-After", "1");
    /* the body was not read: close rather than read it for nothing */
    return send_response(conn, rq, &resp, true);
}

/* What a request of this length is charged before its body is read: a
 * collected body is its length; a streamed one holds about its reply,
 * which is about its length (see kop/convstream.h). */
static size_t first_charge(const struct req *rq)
{
    uint64_t cl = rq->content_length;
    if (rq->route->r.stream)
        cl += cl / 8;
    return cl > SIZE_MAX ? SIZE_MAX : (size_t)cl;
}

/* Reserve the budget, then set up the body (a buffer or a stream). Waits
 * (suspends the connection) while the budget has no room. */
static enum MHD_Result start_body(struct MHD_Connection *conn, struct req *rq, const char *url,
                                  const char *method)
{
    struct kop_http_server *srv = rq->srv;
    const struct route *rt = rq->route;
    size_t want = first_charge(rq);
    if (!charge(srv, rq, want, true)) {
        unsigned wait_ms =
            srv->opts.budget_wait_ms ? srv->opts.budget_wait_ms : BUDGET_WAIT_MS_DEFAULT;
        bool late = kop_clock_now_ns() - rq->wait_since > (int64_t)wait_ms * KOP_NSEC_PER_MSEC;
        if (late || atomic_load(&srv->draining) || !wait_for_budget(srv, conn)) {
            if (rq->state == REQ_NEW && over_budget(conn, rq) == MHD_YES)
                return MHD_YES;
            /* MHD takes no answer once the upload has begun: read and drop
             * the body (nothing is kept), answer at its end */
            rq->state = REQ_DISCARD;
            rq->pending_status = 503;
            return MHD_YES;
        }
        rq->state = REQ_WAIT;
        return MHD_YES;
    }
    kop_dynbuf_init(&rq->body, rt->r.max_body);
    if (rt->r.stream) {
        char peer[INET6_ADDRSTRLEN];
        struct kop_http_request req;
        fill_request(conn, rq, url, method, peer, &req);
        struct kop_trace_ctx prev = kop_trace_set_current(req.trace);
        rq->stream = rt->r.stream->begin(rt->r.userdata, &req, (size_t)rq->content_length);
        kop_trace_set_current(&prev);
        if (!rq->stream)
            return MHD_NO;
        charge(srv, rq, rt->r.stream->memory(rq->stream), false);
    } else if (rq->content_length > 0) {
        /* Exactly the announced length (at most max_body, checked on the
         * headers), plus the '\0'. */
        if (kop_dynbuf_reserve(&rq->body, (size_t)rq->content_length) < 0)
            return MHD_NO;
    }
    rq->state = REQ_BODY;
    return MHD_YES;
}

/* Room for n more body bytes: a body of unknown length starts at
 * BODY_INITIAL bytes (at most the route's limit), then doubles. */
static int grow_body(struct req *rq, size_t n)
{
    size_t max = rq->route->r.max_body;
    if (kop_dynbuf_capacity(&rq->body) == 0) {
        int r = kop_dynbuf_reserve(&rq->body, BODY_INITIAL - 1 < max ? BODY_INITIAL - 1 : max);
        if (r < 0)
            return r;
    }
    return kop_dynbuf_reserve(&rq->body, n);
}

/* The request's input is gone, its reply is about to be sent: it keeps
 * holding what the reply takes until it is completely sent (completion
 * releases it), so another large request cannot start while a large reply
 * is still in memory. */
static void hold_reply(struct req *rq, size_t reply_len)
{
    if (reply_len > rq->held)
        charge(rq->srv, rq, reply_len, false);
    else
        release(rq->srv, rq, reply_len);
}

/* The request as handlers see it (body not set). peer: INET6_ADDRSTRLEN bytes. */
static void fill_request(struct MHD_Connection *conn, const struct req *rq, const char *url,
                         const char *method, char *peer, struct kop_http_request *req)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    socklen_t salen = 0;
    peer[0] = '\0';
    if (sa && sa->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, peer,
                  INET6_ADDRSTRLEN);
        salen = sizeof(struct sockaddr_in);
    } else if (sa && sa->sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, peer,
                  INET6_ADDRSTRLEN);
        salen = sizeof(struct sockaddr_in6);
    } else {
        sa = NULL;
    }
    *req = (struct kop_http_request){
        .method = method,
        .method_bit = method_bit(method),
        .path = url,
        .query = rq->query,
        .content_type =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE),
        .peer = peer,
        .peer_addr = sa,
        .peer_addr_len = salen,
        .trace = rq->span ? &rq->span->ctx : NULL,
        ._conn = conn,
    };
}

/* Hand p to the stream (rq->len already counts it). */
static void feed_stream(struct req *rq, const char *p, size_t n)
{
    const struct kop_http_stream *st = rq->route->r.stream;
    if (rq->stream_failed || n == 0)
        return;
    if (st->data(rq->stream, p, n) < 0) {
        rq->stream_failed = true;
        return;
    }
    size_t m = st->memory(rq->stream) + rq->batch_cap;
    if (m > rq->held)
        charge(rq->srv, rq, m, false);
}

/* A piece of a streamed body. */
static void stream_data(struct req *rq, const char *p, size_t n)
{
    rq->len += n;
    feed_stream(rq, p, n);
}

/* ---- the heavy lane (see the top of the file) ---------------------------- */

static void flush_batch(struct req *rq)
{
    feed_stream(rq, rq->batch, rq->batch_len);
    rq->batch_len = 0;
}

/* Gather a piece of a heavy request's streamed body. Returns false when
 * the batch is full (a job is due). */
static bool append_batch(struct req *rq, const char *p, size_t n)
{
    rq->len += n;
    if (rq->stream_failed)
        return true;
    if (rq->batch_cap - rq->batch_len < n) {
        size_t cap = rq->batch_len + n > HEAVY_BATCH ? rq->batch_len + n : HEAVY_BATCH;
        char *b = realloc(rq->batch, cap);
        if (!b) {
            rq->stream_failed = true;
            return true;
        }
        rq->batch = b;
        rq->batch_cap = cap;
        size_t m = rq->route->r.stream->memory(rq->stream) + cap;
        if (m > rq->held)
            charge(rq->srv, rq, m, false);
    }
    memcpy(rq->batch + rq->batch_len, p, n);
    rq->batch_len += n;
    return rq->batch_len < HEAVY_BATCH;
}

static void finish_handler(struct req *rq, struct MHD_Connection *conn,
                           struct kop_http_response *resp);

/* The request's work at its end, the answer in resp: the stream's end, or
 * the collecting route's handler. On an MHD thread or the lane, with the
 * request's span current on that thread (its log lines carry the ids). */
static void finish_work(struct req *rq, struct MHD_Connection *conn, struct kop_http_response *resp)
{
    struct kop_trace_ctx prev = kop_trace_set_current(rq->span ? &rq->span->ctx : NULL);
    finish_handler(rq, conn, resp);
    kop_trace_set_current(&prev);
}

static void finish_handler(struct req *rq, struct MHD_Connection *conn,
                           struct kop_http_response *resp)
{
    const struct route *rt = rq->route;
    char peer[INET6_ADDRSTRLEN];
    struct kop_http_request req;
    fill_request(conn, rq, rq->url, rq->method, peer, &req);
    if (rt->r.stream) {
        flush_batch(rq);
        free(rq->batch);
        rq->batch = NULL;
        rq->batch_cap = 0;
        if (rq->stream_failed)
            kop_http_response_status(resp, 500, "InternalError",
                                     "internal error reading the request");
        else
            rt->r.stream->end(rq->stream, &req, resp);
        rt->r.stream->free(rq->stream);
        rq->stream = NULL;
        return;
    }
    req.body = kop_dynbuf_ptr(&rq->body); /* "" when there is none */
    req.body_len = kop_dynbuf_len(&rq->body);
    rt->r.fn(rt->r.userdata, &req, resp);
    /* The body is no longer needed; free it before the response is sent. */
    kop_dynbuf_free(&rq->body);
    rq->len = 0;
}

static bool suspended(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_SUSPENDED);
    return ci && ci->suspended == MHD_YES;
}

static void run_job(struct req *rq)
{
    if (rq->job == JOB_DATA) {
        flush_batch(rq);
        return;
    }
    rq->reply = (struct kop_http_response){.status = 200, .content_type = "application/json"};
    finish_work(rq, rq->conn, &rq->reply);
    rq->state = REQ_REPLY;
}

/* Run rq's job on the lane: suspends its connection, which the lane
 * resumes when done. Returns false when the job ran here instead (no lane,
 * or it is stopping). */
static bool submit_job(struct kop_http_server *srv, struct MHD_Connection *conn, struct req *rq,
                       enum job_kind job)
{
    rq->job = job;
    rq->conn = conn;
    pthread_mutex_lock(&srv->job_lock);
    bool lane = srv->n_lane > 0 && !srv->lane_stop;
    if (lane) {
        /* suspended first: the lane may resume it as soon as it is queued */
        MHD_suspend_connection(conn);
        rq->job_next = NULL;
        if (srv->job_tail)
            srv->job_tail->job_next = rq;
        else
            srv->job_head = rq;
        srv->job_tail = rq;
        pthread_cond_signal(&srv->job_cond);
    }
    pthread_mutex_unlock(&srv->job_lock);
    if (!lane)
        run_job(rq);
    return lane;
}

static void *lane_main(void *arg)
{
    struct kop_http_server *srv = arg;
    pthread_mutex_lock(&srv->job_lock);
    for (;;) {
        while (!srv->job_head && !srv->lane_stop)
            pthread_cond_wait(&srv->job_cond, &srv->job_lock);
        struct req *rq = srv->job_head;
        if (!rq)
            break; /* stopping, nothing left */
        srv->job_head = rq->job_next;
        if (!srv->job_head)
            srv->job_tail = NULL;
        pthread_mutex_unlock(&srv->job_lock);
        struct MHD_Connection *conn = rq->conn;
        run_job(rq);
        /* rq belongs to MHD again from here on */
        MHD_resume_connection(conn);
        ext_wake(srv);
        pthread_mutex_lock(&srv->job_lock);
    }
    pthread_mutex_unlock(&srv->job_lock);
    return NULL;
}

/* Finish the lane's queue and stop its threads; later jobs run where they
 * are submitted. */
static void lane_stop(struct kop_http_server *srv)
{
    pthread_mutex_lock(&srv->job_lock);
    srv->lane_stop = true;
    pthread_cond_broadcast(&srv->job_cond);
    pthread_mutex_unlock(&srv->job_lock);
    /* n_lane stays: MHD's threads may still read it (submit_job looks at
     * lane_stop under the lock) */
    if (!srv->lane_joined) {
        for (unsigned i = 0; i < srv->n_lane; i++)
            pthread_join(srv->lane[i], NULL);
        srv->lane_joined = true;
    }
}

static enum MHD_Result send_reply(struct MHD_Connection *conn, struct req *rq,
                                  struct kop_http_response *resp)
{
    hold_reply(rq, resp->body_len);
    return send_response(conn, rq, resp, false);
}

/* The final call: the work, here or on the lane, then the answer. */
static enum MHD_Result run_handler(struct MHD_Connection *conn, struct req *rq)
{
    if (rq->heavy) {
        rq->state = REQ_WORK;
        if (submit_job(rq->srv, conn, rq, JOB_END))
            return MHD_YES;
        return send_reply(conn, rq, &rq->reply);
    }
    struct kop_http_response resp = {.status = 200, .content_type = "application/json"};
    finish_work(rq, conn, &resp);
    return send_reply(conn, rq, &resp);
}

/* The path of a request target in absolute-form ("https://host/p?q" comes
 * as "https://host/p": "/p"; RFC 9112 §3.2.2, a server must accept that
 * form, and Go's routes on the path), else the target itself. */
static const char *target_path(const char *url)
{
    const char *p = NULL;
    if (strncasecmp(url, "http://", 7) == 0)
        p = url + 7;
    else if (strncasecmp(url, "https://", 8) == 0)
        p = url + 8;
    if (!p)
        return url;
    const char *slash = strchr(p, '/');
    return slash ? slash : "/";
}

/* A chunked (or lying) body went past the route's limit: drop what was
 * collected and answer 413. */
static enum MHD_Result body_too_large(struct MHD_Connection *conn, struct req *rq,
                                      size_t *upload_data_size)
{
    kop_dynbuf_free(&rq->body);
    free(rq->batch);
    rq->batch = NULL;
    rq->batch_len = rq->batch_cap = 0;
    if (rq->stream) {
        rq->route->r.stream->free(rq->stream);
        rq->stream = NULL;
    }
    release(rq->srv, rq, 0);
    rq->len = 0;
    *upload_data_size = 0;
    rq->state = REQ_DISCARD;
    rq->pending_status = 413;
    if (too_large(conn, rq) == MHD_YES)
        return MHD_YES;
    /* This MHD refuses a response mid-upload: answer at the end. */
    return MHD_YES;
}

static enum MHD_Result access_cb(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls)
{
    struct req *rq = *con_cls;
    if (!rq)
        return MHD_NO; /* URI callback failed (ENOMEM) */
    if (*upload_data_size)
        track_body(rq->srv, conn, *upload_data_size);
    switch (rq->state) {
    case REQ_NEW: {
        track_phase(rq->srv, conn, TP_BUSY);
        enum MHD_Result res = begin_request(conn, rq, target_path(url), method, version);
        if (rq->state == REQ_BODY || (rq->state == REQ_DISCARD && res == MHD_YES))
            track_phase(rq->srv, conn, TP_BODY);
        return res;
    }
    case REQ_WAIT: {
        /* resumed: try again (the upload, if any, stays with MHD) */
        enum MHD_Result res = start_body(conn, rq, target_path(url), method);
        if (rq->state != REQ_WAIT)
            track_phase(rq->srv, conn, TP_BODY);
        /* The call that follows a resume carries no data and is not the
         * final one: the body (still unread) comes in the next calls. */
        if (rq->state != REQ_BODY || res != MHD_YES || *upload_data_size == 0)
            return res;
        __attribute__((fallthrough));
    }
    case REQ_BODY:
        if (*upload_data_size) {
            size_t n = *upload_data_size;
            if (n > rq->route->r.max_body - rq->len)
                return body_too_large(conn, rq, upload_data_size);
            if (rq->stream && rq->heavy) {
                /* MHD hands over a chunked body's next chunk at once, even
                 * to a connection suspended for its job: take nothing until
                 * MHD has resumed it (only MHD's thread, ours, changes that) */
                if (suspended(conn))
                    return MHD_YES;
                *upload_data_size = 0;
                if (!append_batch(rq, upload_data, n))
                    submit_job(rq->srv, conn, rq, JOB_DATA);
                return MHD_YES;
            }
            if (rq->stream) {
                stream_data(rq, upload_data, n);
                *upload_data_size = 0;
                return MHD_YES;
            }
            int r = grow_body(rq, n);
            if (r < 0)
                return MHD_NO;
            charge(rq->srv, rq, kop_dynbuf_capacity(&rq->body), false);
            r = kop_dynbuf_add(&rq->body, upload_data, n); /* room was made */
            if (r < 0)
                return MHD_NO;
            rq->len += n;
            *upload_data_size = 0;
            return MHD_YES;
        }
        track_phase(rq->srv, conn, TP_BUSY);
        return run_handler(conn, rq);
    case REQ_DISCARD:
        if (*upload_data_size) {
            /* Only reached when MHD would not take an early answer. Bound
             * what a client can make us read for nothing. */
            rq->discarded += *upload_data_size;
            *upload_data_size = 0;
            if (rq->pending_status == 503)
                return rq->discarded > rq->route->r.max_body ? MHD_NO : MHD_YES;
            return rq->discarded > (1u << 20) ? MHD_NO : MHD_YES;
        }
        return send_pending(conn, rq);
    case REQ_ANSWERED:
    case REQ_WORK: /* not called while suspended; nothing to do if it were */
        *upload_data_size = 0;
        return MHD_YES;
    case REQ_REPLY:
        *upload_data_size = 0;
        return send_reply(conn, rq, &rq->reply);
    }
    return MHD_NO;
}

__attribute__((format(printf, 2, 0))) static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
    struct kop_http_server *srv = cls;
    if (!kop_log_enabled(KOP_LOG_DEBUG))
        return;
    char buf[256];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    size_t l = strlen(buf);
    while (l && (buf[l - 1] == '\n' || buf[l - 1] == '\r'))
        buf[--l] = '\0';
    kop_logf(KOP_LOG_DEBUG, LOGGER, "%s: libmicrohttpd: %s", srv->name, buf);
}

/* ---- lifecycle ---------------------------------------------------------- */

/* "<prefix>_<name>", or name alone without a prefix. */
static void metric_name(char *buf, size_t len, const char *prefix, const char *name)
{
    if (prefix && *prefix)
        snprintf(buf, len, "%s_%s", prefix, name);
    else
        snprintf(buf, len, "%s", name);
}

/* The locks and condition variables kop_http_server_new made. */
static void destroy_sync(struct kop_http_server *srv)
{
    pthread_cond_destroy(&srv->ticker_cond);
    pthread_mutex_destroy(&srv->ticker_lock);
    pthread_mutex_destroy(&srv->lock);
    pthread_mutex_destroy(&srv->wait_lock);
    pthread_mutex_destroy(&srv->track_lock);
    pthread_mutex_destroy(&srv->job_lock);
    pthread_cond_destroy(&srv->job_cond);
}

/* The server's metrics and its webhook routes' (srv->routes copied). A
 * failed registration leaves a NULL metric, which every update accepts. */
static void register_server_metrics(struct kop_http_server *srv,
                                    const struct kop_http_server_options *opts)
{
    bool any_webhook = false;
    for (size_t i = 0; i < srv->n_routes; i++) {
        if (srv->routes[i].r.webhook_name)
            any_webhook = true;
    }
    struct kop_metrics *m = opts->metrics ? opts->metrics : kop_metrics_global();
    static const char *const l_srv[] = {"server", NULL};
    char mname[160];
    metric_name(mname, sizeof(mname), opts->metric_prefix, "http_connections_timed_out_total");
    srv->m_deadline = kop_metric_child(
        kop_metrics_register(m, KOP_METRIC_COUNTER, mname,
                             "Connections closed because a client was too slow (headers not in "
                             "time, body under the minimum rate, idle too long), by server",
                             l_srv, NULL, 0),
        srv->name);
    if (srv->limit) {
        static const char *const l_sr[] = {"server", "reason", NULL};
        metric_name(mname, sizeof(mname), opts->metric_prefix, "http_connections_rejected_total");
        struct kop_metric_family *rej = kop_metrics_register(
            m, KOP_METRIC_COUNTER, mname,
            "Connections a listening server refused or closed at max_connections, by server and "
            "reason (max_connections: the newcomer; evicted: an idle connection of the address "
            "that held the most, for a newcomer of one that held fewer)",
            l_sr, NULL, 0);
        srv->m_rej_max = kop_metric_child(rej, srv->name, "max_connections");
        srv->m_rej_evicted = kop_metric_child(rej, srv->name, "evicted");
    }
    if (any_webhook) {
        static const char *const l_wc[] = {"webhook", "code", NULL};
        static const char *const l_w[] = {"webhook", NULL};
        const char *wp = opts->webhook_metric_prefix ? opts->webhook_metric_prefix : "webhook";
        metric_name(mname, sizeof(mname), wp, "requests_total");
        srv->wh_total = kop_metrics_register(
            m, KOP_METRIC_COUNTER, mname, "Total number of admission requests by HTTP status code.",
            l_wc, NULL, 0);
        metric_name(mname, sizeof(mname), wp, "latency_seconds");
        struct kop_metric_family *lat = kop_metrics_register(
            m, KOP_METRIC_HISTOGRAM, mname,
            "Histogram of the latency of processing admission requests", l_w, NULL, 0);
        metric_name(mname, sizeof(mname), wp, "requests_in_flight");
        struct kop_metric_family *infl = kop_metrics_register(
            m, KOP_METRIC_GAUGE, mname, "Current number of admission requests being served.", l_w,
            NULL, 0);
        for (size_t i = 0; i < srv->n_routes; i++) {
            const char *w = srv->routes[i].r.webhook_name;
            if (!w)
                continue;
            srv->routes[i].latency = lat ? kop_metric_child(lat, w) : NULL;
            srv->routes[i].in_flight = infl ? kop_metric_child(infl, w) : NULL;
        }
    }
}

int kop_http_server_new(const struct kop_http_server_options *opts,
                        const struct kop_http_route *routes, size_t n_routes,
                        struct kop_http_server **ret_srv)
{
    assert(opts);
    assert(routes || n_routes == 0);
    assert(ret_srv);
    for (size_t i = 0; i < n_routes; i++) {
        if (!routes[i].path || routes[i].path[0] != '/' || (!routes[i].fn && !routes[i].stream) ||
            !routes[i].methods ||
            (routes[i].prefix && routes[i].path[strlen(routes[i].path) - 1] != '/'))
            return -EINVAL;
    }
    struct kop_http_server *srv = calloc(1, sizeof(*srv));
    if (!srv)
        return -ENOMEM;
    srv->opts = *opts;
    snprintf(srv->name, sizeof(srv->name), "%s", opts->name ? opts->name : "http");
    srv->opts.name = srv->name;
    srv->opts.host = NULL;
    if (kop_clock_cond_init(&srv->ticker_cond) != 0) {
        free(srv);
        return -ENOMEM;
    }
    pthread_mutex_init(&srv->ticker_lock, NULL);
    pthread_mutex_init(&srv->lock, NULL);
    pthread_mutex_init(&srv->wait_lock, NULL);
    pthread_mutex_init(&srv->track_lock, NULL);
    pthread_mutex_init(&srv->job_lock, NULL);
    pthread_cond_init(&srv->job_cond, NULL);
    srv->quiesced_fd = -1;
    srv->mhd_epfd = srv->wake_fd = -1;
    if (!srv->opts.header_timeout_ms)
        srv->opts.header_timeout_ms = KOP_HTTP_HEADER_TIMEOUT_S * 1000;
    if (!srv->opts.min_body_rate)
        srv->opts.min_body_rate = 16384;
    if (!srv->opts.timeout_s)
        srv->opts.timeout_s = KOP_HTTP_IDLE_TIMEOUT_S;
    if (!srv->opts.max_connections)
        srv->opts.max_connections = 1024;
    srv->limit = !opts->no_listen;
    kop_ipcount_init(&srv->ips, 0);
    srv->header_timeout_ns = (int64_t)srv->opts.header_timeout_ms * KOP_NSEC_PER_MSEC;
    srv->grace_ns = srv->header_timeout_ns;
    srv->idle_timeout_ns = (int64_t)srv->opts.timeout_s * KOP_NSEC_PER_SEC;
    srv->min_body_rate = (double)srv->opts.min_body_rate;
    int r = -ENOMEM;
    srv->routes = calloc(n_routes ? n_routes : 1, sizeof(*srv->routes));
    srv->wh_ok = calloc(n_routes ? n_routes : 1, sizeof(*srv->wh_ok));
    if (!srv->routes || !srv->wh_ok)
        goto out;
    srv->n_routes = n_routes;
    for (size_t i = 0; i < n_routes; i++)
        srv->routes[i].r = routes[i];
    register_server_metrics(srv, opts);
    if (opts->host && *opts->host) {
        /* "[::1]" as written in bind addresses. */
        const char *h = opts->host;
        size_t hl = strlen(h);
        if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
            h++;
            hl -= 2;
        }
        srv->host = strndup(h, hl);
        if (!srv->host)
            goto out;
        srv->opts.host = srv->host;
    }
    *ret_srv = srv;
    return 0;
out:
    free(srv->routes);
    free((void *)srv->wh_ok);
    free(srv->host);
    destroy_sync(srv);
    free(srv);
    return r;
}

/* An external server's poll descriptors: MHD's epoll set, and wake_fd. */
static int ext_setup(struct kop_http_server *srv, struct MHD_Daemon *d)
{
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD);
    int mfd = di ? di->epoll_fd : -1;
    int wfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (mfd < 0 || wfd < 0) {
        if (wfd >= 0)
            close(wfd);
        return -1;
    }
    srv->mhd_epfd = mfd; /* MHD's own: closed by MHD_stop_daemon */
    srv->wake_fd = wfd;
    return 0;
}

int kop_http_server_start(struct kop_http_server *srv)
{
    assert(srv);
    if (srv->mhd)
        return -EINVAL;
    const struct kop_http_server_options *o = &srv->opts;
    /* external: MHD's epoll set is polled and run by the caller's loop
     * (the TLS front), so no thread of MHD's own and no pool. MHD's own
     * threads poll() instead: with epoll, MHD_quiesce_daemon() and MHD's
     * thread both take the listen socket out of the epoll set, unlocked,
     * and the one that comes second aborts the process (libmicrohttpd
     * 0.9.75 daemon.c, "Failed to remove listen FD from epoll set"); with
     * poll(), quiescing only sets a flag and wakes the thread. An external
     * server quiesces under srv->lock, which every MHD round holds. */
    unsigned flags = (o->external ? MHD_USE_EPOLL : MHD_USE_POLL_INTERNAL_THREAD) | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
    struct sockaddr_storage ss;
    socklen_t sslen = 0;
    bool have_addr = false;
    if (o->no_listen) {
        flags |= MHD_USE_NO_LISTEN_SOCKET;
    } else if (o->host && *o->host) {
        int r = kop_netaddr_resolve(o->host, o->port, KOP_NETADDR_PASSIVE, &ss, &sslen);
        if (r < 0)
            return r;
        have_addr = true;
        if (ss.ss_family == AF_INET6)
            flags |= MHD_USE_IPv6;
    } else {
        flags |= MHD_USE_DUAL_STACK;
    }
    unsigned threads = o->threads ? o->threads : 1;
    struct MHD_OptionItem ops[16];
    size_t n = 0;
    ops[n++] = (struct MHD_OptionItem){MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)uri_cb, srv};
    ops[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)completed_cb, srv};
    ops[n++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_logger, srv};
    ops[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)notify_cb, srv};
    if (o->max_per_ip && !o->no_listen)
        ops[n++] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                                           (intptr_t)o->max_per_ip, NULL};
    ops[n++] =
        (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                (intptr_t)(o->max_header_size ? o->max_header_size : 32768), NULL};
    ops[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)o->timeout_s, NULL};
    /* one more for a listening server: the newcomer that finds it full,
     * which gets a slot or is closed (see Limits) */
    ops[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT,
                                       (intptr_t)o->max_connections + (srv->limit ? 1 : 0), NULL};
    if (threads > 1 && !o->external)
        ops[n++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)threads, NULL};
    if (have_addr)
        ops[n++] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, &ss};
    ops[n++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};

    /* the heavy lane, as many threads as MHD's, where a body may be heavy */
    bool heavy = false;
    for (size_t i = 0; i < srv->n_routes; i++)
        heavy = heavy || srv->routes[i].r.max_body > HEAVY_MIN;
    if (heavy) {
        srv->lane = calloc(threads, sizeof(*srv->lane));
        for (unsigned i = 0; srv->lane && i < threads; i++) {
            if (kop_thread_start(&srv->lane[i], lane_main, srv, "http-lane") < 0)
                break;
            srv->n_lane++; /* before MHD's threads start, which read it */
        }
    }
    uint16_t port = o->no_listen ? 0 : o->port;
    struct MHD_Daemon *d = MHD_start_daemon(flags, port, NULL, NULL, access_cb, srv,
                                            MHD_OPTION_ARRAY, ops, MHD_OPTION_END);
    if (!d && (flags & MHD_USE_DUAL_STACK)) {
        /* No IPv6 on this host: all IPv4 addresses. */
        flags &= ~(unsigned)MHD_USE_DUAL_STACK;
        d = MHD_start_daemon(flags, port, NULL, NULL, access_cb, srv, MHD_OPTION_ARRAY, ops,
                             MHD_OPTION_END);
    }
    if (!d) {
        int e = errno;
        lane_stop(srv);
        kop_logf(KOP_LOG_ERROR, LOGGER, "%s: cannot start HTTP server on port %u", srv->name,
                 (unsigned)o->port);
        return e == EADDRINUSE || e == EACCES ? -e : -EIO;
    }
    if (!o->no_listen) {
        const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
        srv->port = di ? di->port : o->port;
    }
    if (o->external && ext_setup(srv, d) < 0) {
        MHD_stop_daemon(d);
        lane_stop(srv);
        kop_logf(KOP_LOG_ERROR, LOGGER, "%s: cannot set up its poll descriptor", srv->name);
        return -EIO;
    }
    pthread_mutex_lock(&srv->lock);
    srv->mhd = d;
    if (kop_thread_start(&srv->ticker, ticker_main, srv, "http-ticker") == 0)
        srv->ticker_running = true;
    pthread_mutex_unlock(&srv->lock);
    return 0;
}

int kop_http_server_poll_fds(const struct kop_http_server *srv, int fds[2])
{
    assert(srv);
    if (srv->mhd_epfd < 0)
        return 0;
    fds[0] = srv->mhd_epfd;
    fds[1] = srv->wake_fd;
    return 2;
}

/* One non-blocking round of an external daemon (lock held): the ms until
 * it must run again, 0 = at once, -1 = on its descriptor only. */
static int run_locked(struct MHD_Daemon *d, int32_t wait_ms)
{
    (void)MHD_run_wait(d, wait_ms);
    MHD_UNSIGNED_LONG_LONG to = 0;
    if (MHD_get_timeout(d, &to) != MHD_YES)
        return -1;
    return to > INT_MAX ? INT_MAX : (int)to;
}

int kop_http_server_run(struct kop_http_server *srv)
{
    assert(srv);
    if (!srv->opts.external)
        return -1;
    int r = -1;
    /* the lock keeps shutdown from stopping MHD (and closing wake_fd)
     * under a round */
    pthread_mutex_lock(&srv->lock);
    if (srv->mhd && !atomic_load(&srv->stopped)) {
        /* before the round, which resumes what was resumed before the
         * write (see ext_wake) */
        uint64_t n;
        if (atomic_exchange(&srv->wake_pending, false) && read(srv->wake_fd, &n, sizeof(n)) < 0) {
            /* EAGAIN: drained by an earlier round */
        }
        r = run_locked(srv->mhd, 0);
    }
    pthread_mutex_unlock(&srv->lock);
    return r;
}

uint16_t kop_http_server_port(const struct kop_http_server *srv)
{
    return srv ? srv->port : 0;
}

int kop_http_server_add_connection(struct kop_http_server *srv, int fd, const struct sockaddr *addr,
                                   socklen_t addr_len)
{
    assert(srv);
    int r = 0;
    pthread_mutex_lock(&srv->lock);
    if (!srv->mhd || atomic_load(&srv->draining) || atomic_load(&srv->stopped)) {
        close(fd);
        r = -ESHUTDOWN;
    } else if (MHD_add_connection(srv->mhd, fd, addr, addr_len) != MHD_YES) {
        /* MHD closed fd. */
        r = -EIO;
    }
    pthread_mutex_unlock(&srv->lock);
    return r;
}

size_t kop_http_server_budget_used(const struct kop_http_server *srv)
{
    return srv ? atomic_load(&((struct kop_http_server *)srv)->budget_used) : 0;
}

unsigned kop_http_server_in_flight(const struct kop_http_server *srv)
{
    return srv ? atomic_load(&((struct kop_http_server *)srv)->in_flight) : 0;
}

void kop_http_server_drain(struct kop_http_server *srv)
{
    assert(srv);
    pthread_mutex_lock(&srv->lock);
    if (!atomic_exchange(&srv->draining, true) && srv->mhd && !srv->opts.no_listen) {
        /* MHD's threads may still be polling the socket, so the
         * descriptor is not closed until MHD has stopped;
         * shutdown() already makes the kernel refuse new connections. */
        MHD_socket s = MHD_quiesce_daemon(srv->mhd);
        if (s != MHD_INVALID_SOCKET) {
            shutdown(s, SHUT_RDWR);
            srv->quiesced_fd = s;
        }
    }
    pthread_mutex_unlock(&srv->lock);
    /* a request waiting for the budget answers 503 now (MHD must not be
     * stopped with suspended connections) */
    wake_waiters(srv);
}

void kop_http_server_end_keepalive(struct kop_http_server *srv)
{
    if (srv)
        atomic_store(&srv->no_keepalive, true);
}

int kop_http_server_longest_idle(struct kop_http_server *srv, int *fds, size_t n)
{
    assert(srv);
    assert(fds || n == 0);
    if (n == 0)
        return -1;
    qsort(fds, n, sizeof(*fds), cmp_fd); /* idlest() looks them up */
    pthread_mutex_lock(&srv->track_lock);
    const struct track *tr = idlest(srv, fds, n, NULL);
    int fd = tr ? tr->conn_fd : -1;
    pthread_mutex_unlock(&srv->track_lock);
    return fd;
}

unsigned kop_http_server_close_idle(struct kop_http_server *srv, int min_idle_ms)
{
    assert(srv);
    int64_t now = kop_clock_now_ns();
    int64_t min_idle = (int64_t)(min_idle_ms > 0 ? min_idle_ms : 0) * KOP_NSEC_PER_MSEC;
    unsigned open = 0;
    pthread_mutex_lock(&srv->track_lock);
    for (struct track *tr = srv->tracks; tr; tr = tr->next) {
        if (tr->killed)
            continue;
        if (now - tr->since < min_idle || !track_between(tr)) {
            open++;
            continue;
        }
        track_kill(srv, tr);
    }
    pthread_mutex_unlock(&srv->track_lock);
    return open;
}

/* Until no request is in flight, at most timeout_ms (then -ETIMEDOUT),
 * in 5 ms steps. run: an external server's MHD is run in each step (its
 * caller's loop may have stopped), so handlers and lane jobs in flight can
 * finish; the wait ends if MHD was stopped meanwhile. */
static int wait_in_flight(struct kop_http_server *srv, int timeout_ms, bool run)
{
    int64_t deadline = kop_clock_now_ns() + (int64_t)timeout_ms * KOP_NSEC_PER_MSEC;
    while (atomic_load(&srv->in_flight) > 0) {
        if (kop_clock_now_ns() >= deadline)
            return -ETIMEDOUT;
        if (!run) {
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        pthread_mutex_lock(&srv->lock);
        struct MHD_Daemon *d = srv->mhd;
        if (d)
            (void)run_locked(d, 5);
        pthread_mutex_unlock(&srv->lock);
        if (!d)
            return 0;
    }
    return 0;
}

int kop_http_server_wait_idle(struct kop_http_server *srv, int timeout_ms)
{
    return srv ? wait_in_flight(srv, timeout_ms, false) : 0;
}

int kop_http_server_shutdown(struct kop_http_server *srv, int timeout_ms)
{
    assert(srv);
    kop_http_server_drain(srv);
    int r = wait_in_flight(srv, timeout_ms, srv->opts.external);
    pthread_mutex_lock(&srv->lock);
    struct MHD_Daemon *d = srv->mhd;
    srv->mhd = NULL;
    atomic_store(&srv->stopped, true);
    pthread_mutex_unlock(&srv->lock);
    if (srv->ticker_running) {
        pthread_mutex_lock(&srv->ticker_lock);
        srv->ticker_stop = true;
        pthread_cond_signal(&srv->ticker_cond);
        pthread_mutex_unlock(&srv->ticker_lock);
        pthread_join(srv->ticker, NULL);
        srv->ticker_running = false;
    }
    wake_waiters(srv);
    /* every job queued resumes its connection (MHD must not stop with a
     * suspended one); later ones run where they are submitted */
    lane_stop(srv);
    if (d)
        MHD_stop_daemon(d);
    pthread_mutex_lock(&srv->lock);
    if (srv->wake_fd >= 0) {
        close(srv->wake_fd); /* mhd_epfd was MHD's, closed with it */
        srv->mhd_epfd = srv->wake_fd = -1;
    }
    pthread_mutex_unlock(&srv->lock);
    if (srv->quiesced_fd >= 0) {
        close(srv->quiesced_fd);
        srv->quiesced_fd = -1;
    }
    return r;
}

void kop_http_server_free(struct kop_http_server *srv)
{
    if (!srv)
        return;
    kop_http_server_shutdown(srv, 0);
    free(srv->routes);
    free((void *)srv->wh_ok);
    free(srv->host);
    free(srv->waiters);
    free(srv->lane);
    kop_ipcount_cleanup(&srv->ips);
    destroy_sync(srv);
    free(srv);
}
