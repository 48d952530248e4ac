/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP server on libmicrohttpd: a table of routes matched on the path only
 * (the query string is ignored for routing), per-route method masks and
 * body limits, Kubernetes Status answers for the errors the router decides
 * itself (404, 405 with Allow, 413), controller-runtime webhook metrics per
 * route, and a graceful shutdown.
 *
 * A server either listens itself (metrics and probe endpoints; plain HTTP)
 * or has no listen socket and is fed connected sockets with
 * kop_http_server_add_connection() (the TLS front, see kop/tls.h).
 *
 * Handlers run in MHD's worker threads, several at once when the server has
 * more than one thread. The request body is collected completely (never
 * more than the route's max_body) before the handler is called, or, on a
 * streaming route, handed over as it arrives (struct kop_http_stream).
 * Both count against the server's in-flight memory budget.
 *
 * Thread-safety: new/start/free are single-threaded; add_connection,
 * in_flight, end_keepalive, close_idle, drain, wait_idle and shutdown may
 * be called from any thread.
 * Handlers must be thread-safe when threads > 1.
 */
#ifndef KOP_HTTP_H
#define KOP_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct kop_metrics;
struct kop_trace_ctx;

/* Method bits for kop_http_route.methods. */
enum kop_http_method {
    KOP_HTTP_GET = 1u << 0,
    KOP_HTTP_HEAD = 1u << 1,
    KOP_HTTP_POST = 1u << 2,
    KOP_HTTP_PUT = 1u << 3,
    KOP_HTTP_PATCH = 1u << 4,
    KOP_HTTP_DELETE = 1u << 5,
    KOP_HTTP_OPTIONS = 1u << 6,
};

struct kop_http_request {
    const char *method;       /* "POST" */
    unsigned method_bit;      /* KOP_HTTP_POST, 0 for an unknown method */
    const char *path;         /* "/convert" (decoded, no query) */
    const char *query;        /* "timeout=10s" (raw, without '?'), "" when none */
    const char *content_type; /* Content-Type header, NULL when absent */
    const char *body;         /* NUL-terminated copy of the body ("" when none) */
    size_t body_len;
    const char *peer;                 /* "127.0.0.1" or "::1" */
    const struct sockaddr *peer_addr; /* NULL when unknown */
    socklen_t peer_addr_len;
    /* The request's SERVER span context (kop/trace.h): the trace id of the
     * client's traceparent (or a new one) and this request's span id; it is
     * also the handler thread's current context while the handler runs, so
     * log lines carry it. NULL when the server does not trace. */
    const struct kop_trace_ctx *trace;
    void *_conn; /* private */
};

/* Value of a request header (case-insensitive name), NULL when absent. Valid
 * while the handler runs. */
const char *kop_http_request_header(const struct kop_http_request *req, const char *name);

#define KOP_HTTP_MAX_HEADERS 4

struct kop_http_header {
    char name[48];
    char value[208];
};

struct kop_http_response {
    int status; /* default 200 */
    /* malloc'd; the server frees it (also when the status is bad). NULL and
     * body_len 0 for an empty body. */
    char *body;
    size_t body_len;
    /* Static string (or one that outlives the server); default
     * "application/json". */
    const char *content_type;
    unsigned n_headers;
    struct kop_http_header headers[KOP_HTTP_MAX_HEADERS];
};

/* Add a response header (copied). Returns 0, -ENOSPC when the table is full,
 * -E2BIG when name or value is too long, -EINVAL for CR/LF in them. */
int kop_http_response_header(struct kop_http_response *resp, const char *name, const char *value);

/*
 * Set resp to a Kubernetes metav1.Status failure:
 * {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
 *  "message":message,"reason":reason,"code":code}. Replaces (frees) any
 * body already set. Returns 0 or -ENOMEM (then resp has status "code" and
 * no body).
 */
int kop_http_response_status(struct kop_http_response *resp, int code, const char *reason,
                             const char *message);

typedef void kop_http_handler_fn(void *userdata, const struct kop_http_request *req,
                                 struct kop_http_response *resp);

/*
 * A route whose body is not collected but handed over piece by piece as it
 * arrives. begin runs once the headers are in (req->body is NULL) and
 * returns the request's state (NULL: ENOMEM, the connection is dropped);
 * data gets each piece and returns 0 or a negative errno (the request then
 * answers 500); memory says how many bytes the state holds now (charged to
 * the server's in-flight budget); end fills the response; free releases
 * the state, whether end ran or not.
 */
struct kop_http_stream {
    void *(*begin)(void *userdata, const struct kop_http_request *req, size_t content_length);
    int (*data)(void *state, const char *p, size_t n);
    size_t (*memory)(const void *state);
    void (*end)(void *state, const struct kop_http_request *req, struct kop_http_response *resp);
    void (*free)(void *state);
};

struct kop_http_route {
    const char *path;                     /* exact match (see prefix); must outlive the server */
    unsigned methods;                     /* KOP_HTTP_* mask; HEAD is accepted wherever GET is */
    size_t max_body;                      /* bytes; 0 = no body allowed */
    kop_http_handler_fn *fn;              /* a collected body, or: */
    const struct kop_http_stream *stream; /* a streamed one (fn unused) */
    void *userdata;
    /* Non-NULL: record <webhook_metric_prefix>_requests_total{webhook,code},
     * <webhook_metric_prefix>_latency_seconds{webhook} and
     * <webhook_metric_prefix>_requests_in_flight{webhook}; use the route
     * path, as controller-runtime does. */
    const char *webhook_name;
    /* path ends in '/' and the route serves every longer path under it
     * (req->path says which); an exact route of the same path wins. */
    bool prefix;
};

/* Defaults, also those of kop's command line (plain integers, so that
 * they can be spelled into a default flag value). */
#define KOP_HTTP_IDLE_TIMEOUT_S 120
#define KOP_HTTP_HEADER_TIMEOUT_S 10

struct kop_http_server_options {
    /* Listen address. host NULL or "" = all addresses (IPv6 dual-stack when
     * available, else IPv4); a literal IPv4/IPv6 address or "localhost".
     * port 0 = the kernel picks (see kop_http_server_port()). */
    const char *host;
    uint16_t port;
    /* No listen socket: connections come from kop_http_server_add_connection(). */
    bool no_listen;
    /*
     * Driven by the caller's event loop: MHD gets no thread of its own;
     * the caller polls kop_http_server_poll_fds() (readable: work to do)
     * and calls kop_http_server_run() from one thread, the one that also
     * calls kop_http_server_add_connection(). The TLS front does this so
     * that a request costs no thread hand-off (see kop/tls.h). threads
     * then sizes the heavy lane alone (the threads that work on bodies
     * over 256 KiB, src/net/http.c).
     */
    bool external;
    unsigned threads;       /* worker threads, 0 = 1 */
    size_t max_header_size; /* per-connection memory for the request head; 0 = 32 KiB */
    unsigned timeout_s; /* idle connection timeout, 0 = KOP_HTTP_IDLE_TIMEOUT_S; absolute between
                           requests, however the bytes of the next one trickle */
    /*
     * Most connections open at once, 0 = 1024. A listening server that is
     * full closes a newcomer at once, unless the newcomer's address holds
     * at least two fewer than the address holding the most (kop/ipcount.h,
     * the TLS front's rule): then that address's connection that has sat
     * longest between requests with nothing unread (as close_idle() counts
     * them; a request on its way is never cut) is closed for it. Both are
     * counted in <metric_prefix>_http_connections_rejected_total{server,
     * reason="max_connections"|"evicted"}.
     */
    unsigned max_connections;
    /* A listening server: most connections open at once from one address,
     * 0 = no limit (the TLS front has its own); over it a newcomer is
     * closed at once. */
    unsigned max_per_ip;
    /* Absolute deadlines, whatever the traffic: a request's line and
     * headers must be in within header_timeout_ms (from the connection's
     * start for its first request, from the request line for the next
     * ones; 0 = KOP_HTTP_HEADER_TIMEOUT_S), and after that same grace its body must have come
     * at min_body_rate bytes per second on average (0 = 16 KiB/s). A
     * connection past either is closed and counted in
     * <metric_prefix>_http_connections_timed_out_total{server}. */
    unsigned header_timeout_ms;
    size_t min_body_rate;
    const char *name; /* for logs ("webhook", "metrics"); may be NULL */
    /* Served over TLS (behind the TLS front): every answer of kop's own
     * also carries Strict-Transport-Security (max-age one year) and
     * X-Content-Type-Options: nosniff, which TLS scanners (testssl.sh)
     * expect of an HTTPS server; API clients ignore both. */
    bool tls_headers;
    struct kop_metrics *metrics; /* NULL = kop_metrics_global() */
    /* The server's own metric names start with "<metric_prefix>_" (NULL:
     * no prefix); its webhook routes' with "<webhook_metric_prefix>_"
     * (NULL: "webhook"), e.g. "controller_runtime_webhook" for the names
     * controller-runtime dashboards know. */
    const char *metric_prefix;
    const char *webhook_metric_prefix;
    /*
     * In-flight budget: bytes that collected and streamed request bodies
     * (and their streams' state) may hold at once; 0 = unlimited. A request
     * that would go over it waits, reading nothing (TCP pushes back on the
     * client), until others finish; after budget_wait_ms it is answered 503
     * with Retry-After. A request larger than the whole budget runs only
     * when nothing else holds any (so it is never starved). Requests over
     * 1 MiB together hold at most seven eighths of it: the last eighth is
     * kept for small ones, so large bodies never make them wait.
     */
    size_t budget;
    unsigned budget_wait_ms; /* 0 = 10 s */
    /*
     * Trace every request to a route: a SERVER span named "<method>
     * <route path>" with the HTTP semantic-convention attributes, a child
     * of the W3C traceparent header when it is valid, else the root of a
     * new trace (kop/trace.h). It ends when the request completes; it is
     * exported when a trace sink is installed.
     */
    bool trace;
};

struct kop_http_server;

/*
 * Create a server (not yet running). routes are copied (their strings are
 * not). Returns 0, -EINVAL (bad option or route), -ENOMEM.
 */
int kop_http_server_new(const struct kop_http_server_options *opts,
                        const struct kop_http_route *routes, size_t n_routes,
                        struct kop_http_server **ret_srv);

/* Start MHD (binds the listen socket). Returns 0, -EADDRINUSE, -EACCES,
 * -EINVAL or -EIO. */
int kop_http_server_start(struct kop_http_server *srv);

/*
 * An external server (options.external, started): the two descriptors
 * that become readable when kop_http_server_run() has work, MHD's epoll
 * set (socket readiness) and an eventfd (a connection resumed by another
 * thread), in fds[0] and fds[1]; poll both for input, level-triggered.
 * Returns 2, or 0 for any other server.
 */
int kop_http_server_poll_fds(const struct kop_http_server *srv, int fds[2]);

/*
 * An external server: do what is ready now (never blocks; handlers of
 * small requests run here). Returns when it must run again at the latest:
 * 0 = at once (MHD has work pending that raises no event), N ms (a
 * connection timeout), -1 = only when a poll descriptor is readable.
 * After kop_http_server_shutdown() began, or for any other server: -1 and
 * nothing done.
 */
int kop_http_server_run(struct kop_http_server *srv);

/* The bound port (after start), 0 without a listen socket. */
uint16_t kop_http_server_port(const struct kop_http_server *srv);

/*
 * Hand a connected socket to the server; addr is what handlers see as the
 * peer. The server owns fd afterwards in every case (closed on failure).
 * Returns 0, -ESHUTDOWN (draining or stopped) or -EIO.
 */
int kop_http_server_add_connection(struct kop_http_server *srv, int fd, const struct sockaddr *addr,
                                   socklen_t addr_len);

/*
 * For a caller relaying what libmicrohttpd writes on a connection handed
 * over with kop_http_server_add_connection() (the TLS front): when
 * buf[0..len) (the latest read, after the bytes held back from the read
 * before) ends with one of libmicrohttpd's own error responses (a request
 * it refused before kop saw it: a bad Content-Length, bad chunked framing,
 * headers too large, an unknown HTTP version), that response is rewritten
 * in place into kop's JSON Status with the same code and headers, so every
 * error has a JSON body; the stray copy of its header block libmicrohttpd
 * writes before some of them is dropped. Returns the new length (at most
 * cap; len when there is nothing to rewrite or no room). *ret_hold: how
 * many of the last bytes returned are the start of such a response whose
 * rest has not come yet; the caller keeps them back and puts them before
 * the next read (or sends them when the stream ends).
 */
size_t kop_http_json_errors(char *buf, size_t len, size_t cap, size_t *ret_hold);

/*
 * The first request line of a connection, p[0..n) as it arrived (empty
 * lines before it skipped, as RFC 9112 §2.2 allows): 1 when it has the
 * shape Go's net/http accepts, "METHOD SP request-target SP HTTP/d.d",
 * the method a token and the target free of blanks and control bytes;
 * -1 when it has not; 0 when no whole line has come yet. libmicrohttpd
 * closes a connection on some malformed lines without a word, where Go
 * answers 400: a caller relaying bytes to it (the TLS front) checks the
 * first line and answers with kop_http_error_response().
 */
int kop_http_request_line_ok(const char *p, size_t n);

/*
 * Write a complete HTTP/1.1 response with kop's JSON Status body for code
 * (its Kubernetes reason for 400, 413, 500, 503) and message into buf,
 * with Connection: close. Returns its length, or 0 when it does not fit
 * in cap bytes.
 */
size_t kop_http_error_response(char *buf, size_t cap, int code, const char *message);

/* Requests currently between their request line and their completion. */
unsigned kop_http_server_in_flight(const struct kop_http_server *srv);

/* Bytes of the in-flight budget in use now. */
size_t kop_http_server_budget_used(const struct kop_http_server *srv);

/*
 * Begin a graceful stop: close the listen socket, refuse add_connection,
 * and answer every further response with "Connection: close".
 */
void kop_http_server_drain(struct kop_http_server *srv);

/*
 * From now on every response carries "Connection: close" (MHD closes the
 * connection once it is sent, and the client knows not to reuse it), while
 * new connections are still taken: the first step of a drain that keeps
 * serving (the webhook after --shutdown-delay).
 */
void kop_http_server_end_keepalive(struct kop_http_server *srv);

/*
 * Close every connection that sits between requests (after a completed one,
 * or fresh without a request line yet) for at least min_idle_ms and has no
 * unread byte waiting: a request already on its way is never cut. The close
 * is asynchronous (MHD sees the end of the stream). Returns how many
 * connections stay open (busy, younger, or with bytes waiting).
 */
unsigned kop_http_server_close_idle(struct kop_http_server *srv, int min_idle_ms);

/*
 * Of the connections served on the descriptors fds[0..n) (as handed to
 * kop_http_server_add_connection(); sorted here, in place), the one that has
 * sat longest between requests, as close_idle() counts them. Returns its
 * descriptor, or -1 when none of them is between requests. A descriptor
 * MHD has closed meanwhile may name a newer connection: the caller only
 * asks about connections whose far end it has not seen close.
 */
int kop_http_server_longest_idle(struct kop_http_server *srv, int *fds, size_t n);

/* Wait until no request is in flight. Returns 0 or -ETIMEDOUT. */
int kop_http_server_wait_idle(struct kop_http_server *srv, int timeout_ms);

/*
 * drain + wait_idle(timeout_ms) + stop MHD (closes every connection; a
 * handler still running is waited for). Returns 0 or -ETIMEDOUT (requests
 * were cut short). Idempotent. An external server is run by this call
 * while it waits (its loop may go on calling kop_http_server_run(): the
 * rounds take turns, and do nothing once MHD is stopped).
 */
int kop_http_server_shutdown(struct kop_http_server *srv, int timeout_ms);

/* Shutdown with no grace when still running, then free. NULL is fine. */
void kop_http_server_free(struct kop_http_server *srv);

#endif /* KOP_HTTP_H */
