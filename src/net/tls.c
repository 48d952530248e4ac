// SPDX-License-Identifier: Apache-2.0
/*
 * The TLS front: mbedTLS terminates TLS on the webhook port and hands each
 * connection's plaintext to libmicrohttpd over a socketpair.
 *
 * DESIGN
 *
 * Threads. One loop thread owns the listen socket, every connection, the
 * certificate generations and the CTR_DRBG. One handshake worker runs the
 * handshake steps (mbedtls_ssl_handshake: the ECDHE and signature work)
 * of the connections the loop hands it, one at a time; while it has a
 * connection the loop touches nothing of it but the hand-off flags (see
 * "Handshakes"). The DRBG is then used by the worker alone (record
 * protection with the AEAD suites takes no randomness); mbedTLS's
 * threading layer (Debian builds it with pthreads) guards it anyway.
 * Other threads talk to the loop through atomics and an eventfd
 * (shutdown). MHD only ever sees the far end of each socketpair.
 *
 * The HTTP server. When the server behind the front is external (kop's
 * webhook: kop/http.h), MHD has no thread of its own: the loop runs it.
 * MHD's epoll set and the server's wake eventfd sit in the loop's (IT_HTTP,
 * level-triggered: readable while MHD has socket events, or a connection
 * was resumed by another thread) and one round of
 * kop_http_server_run() follows each batch of events; it also runs at
 * once when the loop has handed it HTTP_FED_RUN request bytes since its
 * last round, so a large body is parsed while it is still in the cache
 * rather than after every connection's bytes of the batch; when it says
 * it has work that raises no event (0) the next epoll_wait does not block,
 * and its timeouts bound the wait. A request then costs no thread
 * hand-off: the loop decrypts, MHD parses, the handler converts, the loop
 * encrypts, one thread on one core, which costs less CPU than MHD's own
 * threads behind the same socketpairs: no wake-up and no cache refill per
 * request (scripts/bench-pair.sh compares the two; figures in
 * docs/performance.md §4). Handlers must not block: bodies over the heavy lane's
 * threshold are worked on its threads (kop/http.h), and the webhook's
 * handlers only compute. With a server that runs its own threads (tests,
 * plain HTTP) the loop only pumps.
 *
 * Connection states.
 *   PEEK       accepted; waiting for the first TLS record. The ClientHello
 *              is read with MSG_PEEK to choose the ssl_config: a client that
 *              offers ALPN without "http/1.1" (only "h2") is given the config
 *              without ALPN, because mbedTLS would otherwise abort the
 *              handshake with no_application_protocol. Edge-triggered, so a
 *              partial record does not spin the loop.
 *   HANDSHAKE  mbedtls_ssl_handshake() driven by readiness; deadline =
 *              accept time + handshake timeout.
 *   OPEN       socketpair created, far end given to MHD with the real peer
 *              address; bytes pumped both ways (below); closed after
 *              idle_timeout without traffic.
 *
 * Pumping (pump()). Two buffers per connection: tp (TLS -> plain, 16 KiB,
 * decrypted, waiting for the socketpair) and tt (plain -> TLS, 64 KiB,
 * waiting for mbedtls_ssl_write). tt takes up to four records' worth of a
 * response in one recv(), and every record but the last sealed from it is
 * sent with MSG_MORE: the kernel sends one segment and wakes the client
 * once per tt instead of once per record (a 100-object review's reply:
 * 3 sends instead of 11), which saves CPU on both sides of the loopback
 * (docs/performance.md §4). The
 * last record of tt goes without MSG_MORE, so nothing is held back when
 * MHD has no more for now. A buffer is refilled only when empty, so a side whose
 * peer does not drain stops being read (backpressure: a client that never
 * reads its responses stalls only its own MHD connection). mbedtls_ssl_read
 * is called again until WANT_READ, which also drains plaintext that mbedTLS
 * holds from an already-read record (mbedtls_ssl_get_bytes_avail). The BIO
 * reads ahead (one recv() per 16 KiB instead of one per record header and
 * body); WANT_READ is only returned once that buffer is empty and the
 * socket said EAGAIN (or a short read, then level-triggered epoll reports
 * more), so buffered ciphertext or plaintext is never stranded: while tp is
 * full the connection is pumped again when the socketpair drains.
 * ssl_write is retried with the same buffer after WANT_WRITE, as mbedTLS
 * requires. EOF: close_notify or TCP EOF from the client: shutdown(SHUT_WR)
 * towards MHD once tp is flushed. MHD closing its end: flush tt, send
 * close_notify, close.
 *
 * Fairness. One pump() call decrypts and encrypts at most PUMP_BUDGET
 * bytes; a connection with work left goes to a run queue (FIFO) and gets
 * its next turn after the ready connections of the next batch, and
 * epoll_wait does not block while the queue is not empty (its buffered
 * bytes would raise no event). Once MHD stopped reading a request (it
 * answered early, e.g. 413, and closed) nothing more is decrypted: the
 * answer is relayed and the connection lingers (C_LINGER), where raw input
 * is dropped a few reads per event and at most LINGER_MAX_BYTES in all.
 * So no client, however fast it sends, holds the loop for more than one
 * budget at a time.
 *
 * Certificates. A generation (struct certgen) is a parsed chain + key and
 * two ssl_configs (with and without ALPN), refcounted: the front holds one
 * ref to the current generation and every connection one ref to the
 * generation it was set up with, so a reload never disturbs live sessions.
 * Reloads are triggered by inotify on cert_dir (debounced 100 ms) and by a
 * stat check of tls.crt/tls.key every reload_interval_ms; a pair is loaded
 * when the (dev, inode, size, mtime) signature of either file differs from
 * the loaded one and from the last one that failed.
 *
 * Handshakes. A handshake step costs milliseconds (ECDHE and the ECDSA or
 * RSA signature in mbedTLS's portable code, several times slower than Go's
 * or OpenSSL's; the CPU per full handshake is measured by
 * scripts/bench-peers.sh, docs/performance.md §2), so a burst of new
 * connections would hold every established connection's request behind
 * the sum of their handshakes. Events of connections
 * in PEEK or HANDSHAKE are therefore queued (FIFO) and taken after each
 * batch of ready connections: PEEK (reading the ClientHello, choosing the
 * config) runs on the loop; every handshake step is handed to the worker
 * thread (hw_dispatch: the socket leaves the epoll set, the connection is
 * hw_busy), which runs mbedtls_ssl_handshake() and hands it back through
 * hw_done and an eventfd; the loop then carries on (hw_collect: WANT_READ
 * or WANT_WRITE registers it again, done opens it, an error closes it). A
 * connection closed while with the worker (a deadline, the shutdown) is
 * closed when it comes back; at shutdown the worker stops after its
 * current step and the loop closes what it still had. So established
 * connections never wait behind public-key work. The worker runs HW_NICE
 * above the process's niceness: when the loop and the worker want the
 * same core, the loop's requests go first (CFS weights 1024 against 110)
 * and new handshakes take what is left; on an otherwise idle core a
 * handshake costs what it did. scripts/bench-abuse.sh measures the effect
 * (the p99 of legitimate requests on established connections under a
 * handshake flood and under hostile JSON, a new connection per body, with
 * and without the niceness; results belong in docs/performance.md §6).
 * Without a worker (its thread could not be created) the loop runs
 * the steps itself, HS_SLICE_NS at a time.
 *
 * Limits. Over the per-address limit a new connection is accepted and
 * closed at once; so is one over max_connections, unless its address holds
 * at least two fewer than the address that holds most: then one of that
 * address's connections that does no work is closed for it (evict_for():
 * a few addresses holding idle keep-alive connections would otherwise keep
 * every other client, the apiserver included, out until their idle
 * timeout; the per-address counts and this rule are kop/ipcount.h, which
 * the plain HTTP servers use too). New handshakes from one address are
 * rate-limited by a token bucket (handshakes_per_ip_per_s, burst
 * max_per_ip): over it a connection is accepted but left out of the epoll
 * set in a waiting list, looked at every THR_TICK_MS, until its address
 * has a token; its handshake deadline runs meanwhile. Waiting rather than
 * refusing keeps the apiserver (one address, many connections) served
 * whatever its pattern; a flood from a few addresses costs at most their
 * rate in public-key work. An address's entry (count and bucket) is kept
 * while its bucket is not full, so closing connections does not reset it. Handshake and idle
 * deadlines are checked every 250 ms. No per-connection work blocks: one slow or hostile client
 * costs only its own buffers.
 */
#include "kop/tls.h"

#include <assert.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/oid.h>
#include <mbedtls/pk.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/ssl.h>
#include <mbedtls/ssl_ticket.h>
#include <mbedtls/version.h>
#include <mbedtls/x509_crt.h>
#include <psa/crypto.h>

#include "kop/clock.h"
#include "kop/file.h"
#include "kop/http.h"
#include "kop/ipcount.h"
#include "kop/log.h"
#include "kop/metrics.h"
#include "kop/netaddr.h"
#include "kop/thread.h"

#define LOGGER "tls"
#define BUF_SIZE 16384
/* Response bytes taken from MHD at a time (see "Pumping"). */
#define TT_SIZE (4 * BUF_SIZE)
#define TICK_MS 250
#define MAX_RECORD (16384 + 2048 + 5)
#define LINGER_MS 5000
/* Handshake work done per loop iteration once the ready connections have
 * been served (at least one step always runs). */
#define HS_SLICE_NS (1000 * 1000)
/* What the handshake worker adds to the process's niceness (see
 * "Handshakes"; at most 19); raising one's own needs no privilege. */
#define HW_NICE 10
/* Bytes one connection may decrypt plus encrypt per turn (pump()); a
 * connection with work left goes to the back of the run queue. */
#define PUMP_BUDGET (256 * 1024)
/* What a lingering connection may still make us read and drop, per event
 * and in all (see C_LINGER). */
#define LINGER_READS 4
#define LINGER_MAX_BYTES (1024 * 1024)
/* Request bytes handed to an external HTTP server after which it runs at
 * once, not after the batch (see "The HTTP server"). */
#define HTTP_FED_RUN (64 * 1024)
/* How often connections waiting for a handshake token look again. */
#define THR_TICK_MS 10

/*
 * Cipher suites. TLS 1.3: ChaCha20-Poly1305 and AES-128-GCM, not
 * AES-256-GCM. mbedTLS takes the client's first choice among these, and
 * OpenSSL clients list AES-256-GCM first, the slowest AEAD of this mbedTLS
 * build; RFC 8446 §9.1 requires only AES-128-GCM, and Go (the apiserver's
 * client) asks for AES-128-GCM first where it has AES hardware, so leaving
 * AES-256-GCM out costs no client anything. TLS 1.2, server preference
 * order: ChaCha20-Poly1305 first, which measured faster than AES-128-GCM
 * in this build, AES-NI and PCLMULQDQ code included (docs/performance.md,
 * "Record crypto"), then the AES-GCM suites. AEAD with ECDHE only.
 */
static const int ciphersuites[] = {
    MBEDTLS_TLS1_3_CHACHA20_POLY1305_SHA256,
    MBEDTLS_TLS1_3_AES_128_GCM_SHA256,
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    MBEDTLS_TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    MBEDTLS_TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    MBEDTLS_TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    0,
};

/*
 * Key exchange groups: X25519 and P-256, what every TLS client offers (Go's
 * crypto/tls, the apiserver's, sends an X25519 key share first). In TLS
 * 1.3 mbedTLS takes the first key share the client sent that is in this
 * list, so no client that sent one of them pays a HelloRetryRequest; in
 * TLS 1.2 the server's order decides, and P-256 is the cheaper of the two
 * in this build (docs/performance.md, "Handshakes").
 */
static const uint16_t groups[] = {
    MBEDTLS_SSL_IANA_TLS_GROUP_SECP256R1,
    MBEDTLS_SSL_IANA_TLS_GROUP_X25519,
    MBEDTLS_SSL_IANA_TLS_GROUP_NONE,
};

/* Session tickets: the key encrypting them changes every TICKET_LIFETIME_S
 * and the previous one is still accepted, so a ticket lives at most that
 * long (mbedtls_ssl_ticket_setup). */
#define TICKET_LIFETIME_S 3600

static const char *alpn_list[] = {"http/1.1", NULL};

enum item_kind { IT_LISTEN, IT_WAKE, IT_INOTIFY, IT_NET, IT_PLAIN, IT_HSDONE, IT_HTTP };

struct ep_item {
    enum item_kind kind;
    struct conn *conn;
};

struct certgen {
    int refs;
    mbedtls_x509_crt chain;
    mbedtls_pk_context key;
    mbedtls_x509_crt client_ca;     /* with --client-ca-file */
    mbedtls_ssl_config conf;        /* ALPN http/1.1 */
    mbedtls_ssl_config conf_noalpn; /* for clients that offer ALPN without http/1.1 */
    double not_after;
};

struct filesig {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    int err; /* -errno when stat failed */
    bool regular;
};

/* An address's entry in t->ips (kop/ipcount.h): its connections, and: */
struct ipent {
    struct kop_ipcount_entry base; /* first */
    /* Handshake token bucket (see "Limits" in DESIGN); the entry outlives
     * its last connection until the bucket is full again. */
    double tokens;
    int64_t refilled;
};

/* C_LINGER: the response is out and close_notify sent, but the client may
 * still be sending (an early 413 answers before the body is read). Closing
 * a socket with unread input makes the kernel send a RST, which can destroy
 * the response in the client's receive buffer before it reads it; so the
 * write side is shut down and input is read and discarded until the client
 * closes or LINGER_MS pass (what nginx calls lingering close). */
enum conn_state { C_PEEK, C_HANDSHAKE, C_OPEN, C_LINGER };

struct conn {
    struct conn *prev, *next;
    struct ep_item it_net, it_plain;
    int fd, pfd;
    int mhd_fd; /* pfd's far end as MHD knows it (kop_http_server_longest_idle) */
    enum conn_state st;
    bool dead, ssl_ready, tls_eof, plain_eof, plain_shut, net_rd, net_wr;
    /* MHD stopped reading (it answered early, e.g. 413, and closed): the
     * rest of the request is discarded while its answer is still relayed. */
    bool plain_wr_dead;
    /* Readiness hints: false after a short read or EAGAIN, true again on an
     * EPOLLIN event. Both fds are level-triggered once past PEEK, so
     * skipping a read that would fail with EAGAIN is safe. */
    bool net_readable, plain_readable;
    uint32_t ev_net, ev_plain;
    struct sockaddr_storage peer;
    socklen_t peer_len;
    struct ipent *ip;
    int64_t deadline, last_io;
    struct certgen *gen;
    mbedtls_ssl_context ssl;
    size_t tp_off, tp_len, tt_off, tt_len;
    unsigned char *tp, *tt;
    /* The start of one of MHD's own error responses whose rest has not
     * come yet (kop_http_json_errors): put before the next read. */
    unsigned char held[256];
    size_t held_len;
    /* The first request line was looked at (refuse_line()). */
    bool line_checked;
    /* Read-ahead for mbedTLS: one recv() serves a record's header and body
     * (and often the next record). */
    unsigned char *rb;
    size_t rb_off, rb_len;
    /* The record being sealed is not the last of tt: sent with MSG_MORE. */
    bool more;
    /* Queued for a handshake step (see "Handshakes" in DESIGN): the events
     * seen while queued, and the queue links. */
    bool hs_queued;
    uint32_t hs_events;
    struct conn *hs_prev, *hs_next;
    /* Queued for another turn: its budget ran out with work left (see
     * "Fairness" in DESIGN). */
    bool rr_queued;
    struct conn *rr_prev, *rr_next;
    size_t lingered; /* C_LINGER: bytes read and dropped */
    /* Waiting for a handshake token of its address; not in the epoll set. */
    bool thr_queued;
    struct conn *thr_prev, *thr_next;
    /* Its handshake step is with the worker (see "Handshakes" in DESIGN):
     * the loop touches nothing of it but these flags until it is back. */
    bool hw_busy;
    bool hw_close; /* closed meanwhile: close once back */
    int hw_rc;     /* the step's mbedtls_ssl_handshake() result */
    struct conn *hw_next;
};

struct kop_tls {
    struct kop_tls_options o;
    char *cert_dir, *crt_path, *key_path;
    char *ca_path;       /* --client-ca-file; NULL: no client certificates */
    char **client_names; /* allowed client certificate names, NULL-terminated; NULL: any */
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    mbedtls_ssl_ticket_context tickets;
    struct certgen *gen;
    struct filesig sig_crt, sig_key, sig_ca, bad_crt, bad_key, bad_ca;
    int lfd, epfd, evfd, infd;
    /* The handshake worker: steps handed over (FIFO) and handed back
     * (hw_done, then the eventfd hw_evfd); hw_lock guards both lists and
     * hw_stop, and nothing is taken under it. */
    pthread_t hw_thread;
    bool hw_started;
    pthread_mutex_t hw_lock;
    pthread_cond_t hw_cond;
    struct conn *hw_head, *hw_tail, *hw_done;
    bool hw_stop;
    int hw_evfd;
    struct ep_item it_hsdone;
    uint16_t port;
    pthread_t thread;
    bool thread_started;
    atomic_bool ready, stop_accept, stop_loop, shut_done;
    struct conn *conns;               /* live */
    struct conn *zombies;             /* closed during this batch, freed after it */
    struct conn *hs_head, *hs_tail;   /* handshake steps waiting, FIFO */
    struct conn *rr_head, *rr_tail;   /* connections with work left, FIFO */
    struct conn *thr_head, *thr_tail; /* waiting for a handshake token, FIFO */
    double hs_burst;
    unsigned n_conns;
    struct kop_ipcount ips; /* of struct ipent */
    int64_t next_tick, next_stat, reload_due, listen_paused_until;
    struct ep_item it_listen, it_wake, it_inotify;
    /* An external HTTP server (see "The HTTP server"): its poll
     * descriptors (-1: MHD runs its own threads), whether to run it this
     * iteration, and when at the latest (0 = none due). */
    int http_fd[2];
    struct ep_item it_http;
    bool http_due;
    int64_t http_at;
    size_t fed; /* request bytes handed to it since its last round */
    unsigned char peek[MAX_RECORD];
    /* metrics */
    struct kop_metric *m_reads, *m_read_errors, *m_expiry, *m_active;
    struct kop_metric *m_rej_max, *m_rej_ip, *m_rej_hs_timeout, *m_rej_hs_error, *m_rej_idle;
    struct kop_metric *m_rej_evicted;
    struct kop_metric *m_throttled;
};

/* ---- certificates ------------------------------------------------------- */

static void certgen_unref(struct certgen *g)
{
    if (!g || --g->refs > 0)
        return;
    mbedtls_ssl_config_free(&g->conf);
    mbedtls_ssl_config_free(&g->conf_noalpn);
    mbedtls_x509_crt_free(&g->chain);
    mbedtls_pk_free(&g->key);
    mbedtls_x509_crt_free(&g->client_ca);
    free(g);
}

static int mbedtls_to_errno(int rc)
{
    switch (rc) {
    case MBEDTLS_ERR_PK_FILE_IO_ERROR:
    case MBEDTLS_ERR_X509_FILE_IO_ERROR:
        return -ENOENT;
    case MBEDTLS_ERR_PK_ALLOC_FAILED:
    case MBEDTLS_ERR_X509_ALLOC_FAILED:
    case MBEDTLS_ERR_SSL_ALLOC_FAILED:
        return -ENOMEM;
    default:
        return -EBADMSG;
    }
}

/* Does the client certificate crt carry one of names, as its subject's CN
 * or one of its DNS names? */
static bool client_name_ok(const mbedtls_x509_crt *crt, char *const *names)
{
    for (const mbedtls_x509_name *n = &crt->subject; n; n = n->next) {
        if (MBEDTLS_OID_CMP(MBEDTLS_OID_AT_CN, &n->oid) != 0)
            continue;
        for (char *const *a = names; *a; a++) {
            if (n->val.len == strlen(*a) && memcmp(n->val.p, *a, n->val.len) == 0)
                return true;
        }
    }
    for (const mbedtls_x509_sequence *san = &crt->subject_alt_names; san && san->buf.p;
         san = san->next) {
        if (san->buf.tag != (MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_X509_SAN_DNS_NAME))
            continue;
        for (char *const *a = names; *a; a++) {
            if (san->buf.len == strlen(*a) && memcmp(san->buf.p, *a, san->buf.len) == 0)
                return true;
        }
    }
    return false;
}

/* mbedTLS's verify callback with --client-cert-allowed-names: the leaf
 * (depth 0) of a chain the CA signed must carry an allowed name. */
static int verify_client(void *arg, mbedtls_x509_crt *crt, int depth, uint32_t *flags)
{
    struct kop_tls *t = arg;
    if (depth == 0 && !client_name_ok(crt, t->client_names))
        *flags |= MBEDTLS_X509_BADCERT_CN_MISMATCH;
    return 0;
}

static int conf_setup(struct kop_tls *t, struct certgen *g, mbedtls_ssl_config *conf, bool alpn)
{
    mbedtls_ssl_config_init(conf);
    int rc = mbedtls_ssl_config_defaults(conf, MBEDTLS_SSL_IS_SERVER, MBEDTLS_SSL_TRANSPORT_STREAM,
                                         MBEDTLS_SSL_PRESET_DEFAULT);
    if (rc != 0)
        return -ENOMEM;
    mbedtls_ssl_conf_rng(conf, mbedtls_ctr_drbg_random, &t->drbg);
    mbedtls_ssl_conf_min_tls_version(conf, MBEDTLS_SSL_VERSION_TLS1_2);
    mbedtls_ssl_conf_max_tls_version(conf, MBEDTLS_SSL_VERSION_TLS1_3);
    mbedtls_ssl_conf_ciphersuites(conf, ciphersuites);
    mbedtls_ssl_conf_groups(conf, groups);
    /* (EC)DHE always, also when a ticket resumes a session: no mode
     * without forward secrecy (the build has no PSK-only mode either). */
    mbedtls_ssl_conf_tls13_key_exchange_modes(
        conf, MBEDTLS_SSL_TLS1_3_KEY_EXCHANGE_MODE_EPHEMERAL |
                  MBEDTLS_SSL_TLS1_3_KEY_EXCHANGE_MODE_PSK_EPHEMERAL);
    mbedtls_ssl_conf_session_tickets_cb(conf, mbedtls_ssl_ticket_write, mbedtls_ssl_ticket_parse,
                                        &t->tickets);
    /* Renegotiation is compiled out of the build (scripts/mbedtls.sh). */
    mbedtls_ssl_conf_legacy_renegotiation(conf, MBEDTLS_SSL_LEGACY_NO_RENEGOTIATION);
    if (alpn) {
        rc = mbedtls_ssl_conf_alpn_protocols(conf, alpn_list);
        if (rc != 0)
            return -EINVAL;
    }
    if (t->ca_path) {
        mbedtls_ssl_conf_ca_chain(conf, &g->client_ca, NULL);
        mbedtls_ssl_conf_authmode(conf, MBEDTLS_SSL_VERIFY_REQUIRED);
        if (t->client_names)
            mbedtls_ssl_conf_verify(conf, verify_client, t);
    } else {
        mbedtls_ssl_conf_authmode(conf, MBEDTLS_SSL_VERIFY_NONE);
    }
    rc = mbedtls_ssl_conf_own_cert(conf, &g->chain, &g->key);
    if (rc != 0)
        return mbedtls_to_errno(rc);
    return 0;
}

static double x509_time_unix(const mbedtls_x509_time *xt)
{
    struct tm tm = {
        .tm_year = xt->year - 1900,
        .tm_mon = xt->mon - 1,
        .tm_mday = xt->day,
        .tm_hour = xt->hour,
        .tm_min = xt->min,
        .tm_sec = xt->sec,
    };
    return (double)timegm(&tm);
}

/* The largest certificate, chain or key file read (a CA bundle is ~200 KiB). */
#define MAX_PEM_FILE ((size_t)1 << 20)

/*
 * Certificates from the file at path appended to crt. Read by kop's file
 * reader, not mbedTLS's: a regular file only (a FIFO swapped in would
 * block the thread for ever) and at most MAX_PEM_FILE bytes.
 */
static int crt_load(mbedtls_x509_crt *crt, const char *path)
{
    char *pem = NULL;
    size_t len = 0;
    int r = kop_file_read(path, MAX_PEM_FILE, 0, &pem, &len);
    if (r < 0)
        return r;
    /* PEM input is parsed with its terminating NUL */
    int rc = mbedtls_x509_crt_parse(crt, (const unsigned char *)pem, len + 1);
    free(pem);
    return rc == 0 ? 0 : rc > 0 ? -EBADMSG : mbedtls_to_errno(rc);
}

/* The private key in the file at path, read as crt_load() reads; the
 * copy is wiped. */
static int key_load(mbedtls_pk_context *key, const char *path, mbedtls_ctr_drbg_context *drbg)
{
    char *pem = NULL;
    size_t len = 0;
    int r = kop_file_read(path, MAX_PEM_FILE, KOP_FILE_SECRET, &pem, &len);
    if (r < 0)
        return r;
    int rc = mbedtls_pk_parse_key(key, (const unsigned char *)pem, len + 1, NULL, 0,
                                  mbedtls_ctr_drbg_random, drbg);
    mbedtls_platform_zeroize(pem, len);
    free(pem);
    return rc == 0 ? 0 : mbedtls_to_errno(rc);
}

/* Parse the pair (and the client CA) at the configured paths into a new
 * generation (refs 1). */
static int certgen_load(struct kop_tls *t, struct certgen **ret_gen, char *why, size_t why_len)
{
    struct certgen *g = calloc(1, sizeof(*g));
    if (!g)
        return -ENOMEM;
    g->refs = 1;
    mbedtls_x509_crt_init(&g->chain);
    mbedtls_pk_init(&g->key);
    mbedtls_x509_crt_init(&g->client_ca);
    mbedtls_ssl_config_init(&g->conf);
    mbedtls_ssl_config_init(&g->conf_noalpn);
    int r;
    r = crt_load(&g->chain, t->crt_path);
    if (r < 0) {
        snprintf(why, why_len, "cannot %s %s", r == -EBADMSG ? "parse" : "read", "tls.crt");
        goto out;
    }
    r = key_load(&g->key, t->key_path, &t->drbg);
    if (r < 0) {
        snprintf(why, why_len, "cannot %s %s", r == -EBADMSG ? "parse" : "read", "tls.key");
        goto out;
    }
    int rc = mbedtls_pk_check_pair(&g->chain.pk, &g->key, mbedtls_ctr_drbg_random, &t->drbg);
    if (rc != 0) {
        r = -EBADMSG;
        snprintf(why, why_len, "tls.key does not match the certificate in tls.crt");
        goto out;
    }
    if (t->ca_path) {
        r = crt_load(&g->client_ca, t->ca_path);
        if (r < 0) {
            snprintf(why, why_len, "cannot %s the client CA file %s",
                     r == -EBADMSG ? "parse" : "read", t->ca_path);
            goto out;
        }
    }
    r = conf_setup(t, g, &g->conf, true);
    if (r == 0)
        r = conf_setup(t, g, &g->conf_noalpn, false);
    if (r < 0) {
        snprintf(why, why_len, "cannot configure TLS with this pair");
        goto out;
    }
    g->not_after = x509_time_unix(&g->chain.valid_to);
    *ret_gen = g;
    return 0;
out:
    certgen_unref(g);
    return r;
}

static void file_sig(const char *path, struct filesig *s)
{
    struct stat st;
    memset(s, 0, sizeof(*s));
    if (stat(path, &st) < 0) {
        s->err = -errno;
        return;
    }
    s->dev = st.st_dev;
    s->ino = st.st_ino;
    s->size = st.st_size;
    s->mtime = st.st_mtim;
    s->regular = S_ISREG(st.st_mode);
}

static bool sig_eq(const struct filesig *a, const struct filesig *b)
{
    return a->err == b->err && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* Load the pair and the client CA when one of their files changed (or
 * always when force): a new generation holds all three. */
static int certs_check(struct kop_tls *t, bool force)
{
    struct filesig c, k, a = {0};
    file_sig(t->crt_path, &c);
    file_sig(t->key_path, &k);
    if (t->ca_path)
        file_sig(t->ca_path, &a);
    if (!force && sig_eq(&c, &t->sig_crt) && sig_eq(&k, &t->sig_key) && sig_eq(&a, &t->sig_ca))
        return 0;
    if (!force && sig_eq(&c, &t->bad_crt) && sig_eq(&k, &t->bad_key) && sig_eq(&a, &t->bad_ca))
        return 0;
    kop_counter_inc(t->m_reads);
    struct certgen *g = NULL;
    char why[160] = "";
    int r;
    if ((!c.err && !c.regular) || (!k.err && !k.regular)) {
        /* Opening a FIFO would block the loop thread, and with it every
         * connection, until someone writes to it. */
        r = -EBADMSG;
        snprintf(why, sizeof(why), "tls.crt and tls.key must be regular files");
    } else {
        r = certgen_load(t, &g, why, sizeof(why));
    }
    if (r < 0) {
        kop_counter_inc(t->m_read_errors);
        t->bad_crt = c;
        t->bad_key = k;
        t->bad_ca = a;
        json_t *f = json_pack("{s:s, s:s, s:i}", "certDir", t->cert_dir, "error", why, "errno", -r);
        kop_log(KOP_LOG_ERROR, LOGGER,
                t->gen ? "cannot load the new serving certificate; keeping the previous one"
                       : "cannot load the serving certificate",
                f);
        return r;
    }
    bool ca_changed = t->gen && !sig_eq(&a, &t->sig_ca);
    certgen_unref(t->gen);
    t->gen = g;
    t->sig_crt = c;
    t->sig_key = k;
    t->sig_ca = a;
    memset(&t->bad_crt, 0, sizeof(t->bad_crt));
    memset(&t->bad_key, 0, sizeof(t->bad_key));
    memset(&t->bad_ca, 0, sizeof(t->bad_ca));
    if (ca_changed)
        kop_logf(KOP_LOG_INFO, LOGGER, "client CA reloaded from %s", t->ca_path);
    kop_gauge_set(t->m_expiry, g->not_after);
    char serial[128] = "";
    mbedtls_x509_serial_gets(serial, sizeof(serial), &g->chain.serial);
    char na[32];
    kop_clock_rfc3339((int64_t)g->not_after * KOP_NSEC_PER_SEC, na, sizeof(na));
    json_t *f =
        json_pack("{s:s, s:s, s:s}", "certDir", t->cert_dir, "serial", serial, "notAfter", na);
    kop_log(KOP_LOG_INFO, LOGGER, "serving certificate loaded", f);
    return 0;
}

/* ---- per-address accounting --------------------------------------------- */

static struct ipent *ip_get(struct kop_tls *t, const struct sockaddr_storage *ss, bool create)
{
    const struct sockaddr *sa = (const struct sockaddr *)ss;
    struct kop_ipcount_entry *e = kop_ipcount_find(&t->ips, sa);
    if (e || !create)
        return (struct ipent *)e;
    if (kop_ipcount_add(&t->ips, sa, &e) < 0)
        return NULL;
    struct ipent *ip = (struct ipent *)e;
    ip->tokens = t->hs_burst;
    ip->refilled = kop_clock_now_ns();
    return ip;
}

static void ip_refill(struct kop_tls *t, struct ipent *e, int64_t now)
{
    if (now > e->refilled) {
        e->tokens += (double)(now - e->refilled) / 1e9 * t->o.handshakes_per_ip_per_s;
        if (e->tokens > t->hs_burst)
            e->tokens = t->hs_burst;
    }
    e->refilled = now;
}

/* Take a handshake token of e's address; false when there is none now. */
static bool ip_take(struct kop_tls *t, struct ipent *e, int64_t now)
{
    ip_refill(t, e, now);
    if (e->tokens < 1)
        return false;
    e->tokens -= 1;
    return true;
}

static void ip_put(struct kop_tls *t, struct ipent *e)
{
    if (!e || --e->base.count > 0 || e->tokens < t->hs_burst)
        return; /* an unfull bucket is kept (ip_gc frees it once full) */
    kop_ipcount_remove(&t->ips, &e->base);
}

struct ip_gc_ctx {
    struct kop_tls *t;
    int64_t now;
};

static bool ip_gc_drop(void *ctx, struct kop_ipcount_entry *base)
{
    const struct ip_gc_ctx *g = ctx;
    struct ipent *e = (struct ipent *)base;
    if (e->base.count > 0)
        return false;
    ip_refill(g->t, e, g->now);
    return e->tokens >= g->t->hs_burst;
}

/* Free the entries without connections whose bucket has refilled. */
static void ip_gc(struct kop_tls *t, int64_t now)
{
    struct ip_gc_ctx g = {t, now};
    kop_ipcount_sweep(&t->ips, ip_gc_drop, &g);
}

/* An IPv4-mapped IPv6 address (dual-stack listener) becomes plain IPv4, so
 * limits and handlers see "127.0.0.1". */
static void unmap_v4(struct sockaddr_storage *ss, socklen_t *len)
{
    if (ss->ss_family != AF_INET6)
        return;
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(const void *)ss;
    if (!IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr))
        return;
    struct sockaddr_in s4 = {.sin_family = AF_INET, .sin_port = s6->sin6_port};
    memcpy(&s4.sin_addr, &s6->sin6_addr.s6_addr[12], 4);
    memset(ss, 0, sizeof(*ss));
    memcpy(ss, &s4, sizeof(s4));
    *len = sizeof(s4);
}

/* ---- epoll helpers ------------------------------------------------------ */

static int ep_set(struct kop_tls *t, int fd, struct ep_item *it, uint32_t *cur, uint32_t want)
{
    if (fd < 0 || *cur == want)
        return 0;
    struct epoll_event ev = {.events = want, .data.ptr = it};
    int op = *cur ? (want ? EPOLL_CTL_MOD : EPOLL_CTL_DEL) : EPOLL_CTL_ADD;
    if (!want && !*cur)
        return 0;
    if (epoll_ctl(t->epfd, op, fd, &ev) < 0)
        return -errno;
    *cur = want;
    return 0;
}

/* ---- connections -------------------------------------------------------- */

static void hs_unqueue(struct kop_tls *t, struct conn *c)
{
    if (!c->hs_queued)
        return;
    if (c->hs_prev)
        c->hs_prev->hs_next = c->hs_next;
    else
        t->hs_head = c->hs_next;
    if (c->hs_next)
        c->hs_next->hs_prev = c->hs_prev;
    else
        t->hs_tail = c->hs_prev;
    c->hs_prev = c->hs_next = NULL;
    c->hs_queued = false;
}

static void rr_unqueue(struct kop_tls *t, struct conn *c)
{
    if (!c->rr_queued)
        return;
    if (c->rr_prev)
        c->rr_prev->rr_next = c->rr_next;
    else
        t->rr_head = c->rr_next;
    if (c->rr_next)
        c->rr_next->rr_prev = c->rr_prev;
    else
        t->rr_tail = c->rr_prev;
    c->rr_prev = c->rr_next = NULL;
    c->rr_queued = false;
}

static void rr_queue(struct kop_tls *t, struct conn *c)
{
    if (c->rr_queued || c->dead)
        return;
    c->rr_queued = true;
    c->rr_prev = t->rr_tail;
    c->rr_next = NULL;
    if (t->rr_tail)
        t->rr_tail->rr_next = c;
    else
        t->rr_head = c;
    t->rr_tail = c;
}

static void thr_unqueue(struct kop_tls *t, struct conn *c)
{
    if (!c->thr_queued)
        return;
    if (c->thr_prev)
        c->thr_prev->thr_next = c->thr_next;
    else
        t->thr_head = c->thr_next;
    if (c->thr_next)
        c->thr_next->thr_prev = c->thr_prev;
    else
        t->thr_tail = c->thr_prev;
    c->thr_prev = c->thr_next = NULL;
    c->thr_queued = false;
}

static void thr_queue(struct kop_tls *t, struct conn *c)
{
    c->thr_queued = true;
    c->thr_prev = t->thr_tail;
    c->thr_next = NULL;
    if (t->thr_tail)
        t->thr_tail->thr_next = c;
    else
        t->thr_head = c;
    t->thr_tail = c;
}

static void conn_close(struct kop_tls *t, struct conn *c)
{
    if (c->dead)
        return;
    if (c->hw_busy) {
        c->hw_close = true; /* the worker has it: closed once it is back */
        return;
    }
    c->dead = true;
    hs_unqueue(t, c);
    rr_unqueue(t, c);
    thr_unqueue(t, c);
    if (c->fd >= 0) {
        if (c->st == C_OPEN && !c->plain_eof) {
            /* Best effort; never waits. */
            mbedtls_ssl_close_notify(&c->ssl);
        }
        /* Deregister explicitly: a forked child may briefly hold a copy of
         * the descriptor, and epoll follows the open file, not the fd. */
        ep_set(t, c->fd, &c->it_net, &c->ev_net, 0);
        close(c->fd);
        c->fd = -1;
    }
    if (c->pfd >= 0) {
        ep_set(t, c->pfd, &c->it_plain, &c->ev_plain, 0);
        close(c->pfd);
        c->pfd = -1;
    }
    if (c->prev)
        c->prev->next = c->next;
    else
        t->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->next = t->zombies;
    c->prev = NULL;
    t->zombies = c;
    t->n_conns--;
    kop_gauge_add(t->m_active, -1);
    ip_put(t, c->ip);
    c->ip = NULL;
}

static void conn_free(struct conn *c)
{
    if (c->ssl_ready)
        mbedtls_ssl_free(&c->ssl);
    certgen_unref(c->gen);
    free(c->tp);
    free(c->tt);
    free(c->rb);
    free(c);
}

static void reap_zombies(struct kop_tls *t)
{
    while (t->zombies) {
        struct conn *c = t->zombies;
        t->zombies = c->next;
        conn_free(c);
    }
}

static int bio_send(void *ctx, const unsigned char *buf, size_t len)
{
    struct conn *c = ctx;
    ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL | (c->more ? MSG_MORE : 0));
    if (n >= 0)
        return (int)n;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return MBEDTLS_ERR_SSL_WANT_WRITE;
    if (errno == EPIPE || errno == ECONNRESET)
        return MBEDTLS_ERR_NET_CONN_RESET;
    return MBEDTLS_ERR_NET_SEND_FAILED;
}

static int bio_recv(void *ctx, unsigned char *buf, size_t len)
{
    struct conn *c = ctx;
    if (c->rb_off == c->rb_len) {
        if (!c->net_readable)
            return MBEDTLS_ERR_SSL_WANT_READ;
        if (!c->rb) {
            c->rb = malloc(BUF_SIZE);
            if (!c->rb)
                return MBEDTLS_ERR_SSL_ALLOC_FAILED;
        }
        ssize_t n = recv(c->fd, c->rb, BUF_SIZE, 0);
        if (n == 0)
            return 0;
        if (n > 0) {
            c->rb_off = 0;
            c->rb_len = (size_t)n;
            if ((size_t)n < BUF_SIZE)
                c->net_readable = false;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            c->net_readable = false;
            return MBEDTLS_ERR_SSL_WANT_READ;
        }
        if (n < 0)
            goto err;
    }
    size_t k = c->rb_len - c->rb_off;
    if (k > len)
        k = len;
    memcpy(buf, c->rb + c->rb_off, k);
    c->rb_off += k;
    return (int)k;
err:
    if (errno == ECONNRESET)
        return MBEDTLS_ERR_NET_CONN_RESET;
    return MBEDTLS_ERR_NET_RECV_FAILED;
}

static void log_conn(enum kop_log_level lvl, const struct conn *c, const char *msg, int rc)
{
    if (!kop_log_enabled(lvl))
        return;
    char addr[INET6_ADDRSTRLEN] = "";
    if (c->peer.ss_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)&c->peer)->sin_addr, addr,
                  sizeof(addr));
    else if (c->peer.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)&c->peer)->sin6_addr, addr,
                  sizeof(addr));
    char err[128] = "";
    if (rc)
        mbedtls_strerror(rc, err, sizeof(err));
    json_t *f = json_pack("{s:s, s:s}", "peer", addr, "error", err);
    kop_log(lvl, LOGGER, msg, f);
}

/*
 * ClientHello inspection: true when the first record is a complete
 * ClientHello whose ALPN extension lacks "http/1.1". Anything unexpected
 * returns false (mbedTLS then judges the bytes itself).
 */
static bool alpn_without_http11(const unsigned char *p, size_t n)
{
    if (n < 5 || p[0] != 0x16)
        return false;
    size_t rl = ((size_t)p[3] << 8) | p[4];
    if (n < 5 + rl)
        return false;
    const unsigned char *h = p + 5, *end = p + 5 + rl;
    if (end - h < 4 || h[0] != 0x01)
        return false;
    size_t hl = ((size_t)h[1] << 16) | ((size_t)h[2] << 8) | h[3];
    h += 4;
    if ((size_t)(end - h) < hl)
        return false;
    end = h + hl;
    if (end - h < 34)
        return false;
    h += 34; /* version + random */
    if (end - h < 1 || (size_t)(end - h) < 1u + h[0])
        return false;
    h += 1 + h[0]; /* session id */
    if (end - h < 2)
        return false;
    size_t cs = ((size_t)h[0] << 8) | h[1];
    if ((size_t)(end - h) < 2 + cs)
        return false;
    h += 2 + cs;
    if (end - h < 1 || (size_t)(end - h) < 1u + h[0])
        return false;
    h += 1 + h[0]; /* compression */
    if (end - h < 2)
        return false;
    size_t el = ((size_t)h[0] << 8) | h[1];
    h += 2;
    if ((size_t)(end - h) < el)
        return false;
    end = h + el;
    while (end - h >= 4) {
        unsigned type = ((unsigned)h[0] << 8) | h[1];
        size_t len = ((size_t)h[2] << 8) | h[3];
        h += 4;
        if ((size_t)(end - h) < len)
            return false;
        if (type == 16) { /* application_layer_protocol_negotiation */
            const unsigned char *q = h, *qe = h + len;
            if (qe - q < 2)
                return false;
            q += 2;
            while (q < qe) {
                size_t pl = *q++;
                if ((size_t)(qe - q) < pl)
                    return false;
                if (pl == 8 && memcmp(q, "http/1.1", 8) == 0)
                    return false;
                q += pl;
            }
            return true;
        }
        h += len;
    }
    return false;
}

static int conn_open(struct kop_tls *t, struct conn *c);
static void http_run(struct kop_tls *t, int64_t now);
static int pump(struct kop_tls *t, struct conn *c, int64_t now);

/* What a handshake step's result means for c. Returns <0 to close, 0 (or
 * pump()'s result once established). */
static int hs_result(struct kop_tls *t, struct conn *c, int rc, int64_t now)
{
    c->net_rd = c->net_wr = false;
    if (rc == MBEDTLS_ERR_SSL_WANT_READ) {
        c->net_rd = true;
        return 0;
    }
    if (rc == MBEDTLS_ERR_SSL_WANT_WRITE) {
        c->net_wr = true;
        return 0;
    }
    if (rc != 0) {
        kop_counter_inc(t->m_rej_hs_error);
        log_conn(KOP_LOG_DEBUG, c, "TLS handshake failed", rc);
        return -EPROTO;
    }
    int r = conn_open(t, c);
    if (r < 0)
        return r;
    c->last_io = now;
    return pump(t, c, now);
}

static void hw_dispatch(struct kop_tls *t, struct conn *c);

/* A handshake step: on the worker (returns HS_WITH_WORKER), or here when
 * there is none. Returns <0 to close. */
#define HS_WITH_WORKER 2
static int conn_handshake(struct kop_tls *t, struct conn *c, int64_t now)
{
    if (!t->hw_started)
        return hs_result(t, c, mbedtls_ssl_handshake(&c->ssl), now);
    /* out of the epoll set while the worker has it */
    if (ep_set(t, c->fd, &c->it_net, &c->ev_net, 0) < 0)
        return -EIO;
    hw_dispatch(t, c);
    return HS_WITH_WORKER;
}

static int conn_peek(struct kop_tls *t, struct conn *c, int64_t now)
{
    ssize_t n = recv(c->fd, t->peek, sizeof(t->peek), MSG_PEEK);
    if (n == 0)
        return -ECONNRESET;
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return 0;
        return -errno;
    }
    const unsigned char *p = t->peek;
    if (p[0] == 0x16 && n >= 5) {
        size_t rl = ((size_t)p[3] << 8) | p[4];
        if ((size_t)n < 5 + rl && 5 + rl <= sizeof(t->peek))
            return 0; /* wait for the rest of the record (edge-triggered) */
    }
    bool noalpn = alpn_without_http11(p, (size_t)n);
    mbedtls_ssl_init(&c->ssl);
    c->ssl_ready = true;
    c->gen = t->gen;
    c->gen->refs++;
    if (mbedtls_ssl_setup(&c->ssl, noalpn ? &c->gen->conf_noalpn : &c->gen->conf) != 0)
        return -ENOMEM;
    mbedtls_ssl_set_bio(&c->ssl, c, bio_send, bio_recv, NULL);
    c->st = C_HANDSHAKE;
    return conn_handshake(t, c, now);
}

static int conn_open(struct kop_tls *t, struct conn *c)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
        return -errno;
    c->tp = malloc(BUF_SIZE);
    c->tt = malloc(TT_SIZE);
    if (!c->tp || !c->tt) {
        close(sv[0]);
        close(sv[1]);
        return -ENOMEM;
    }
    c->pfd = sv[0];
    c->mhd_fd = sv[1];
    c->plain_readable = true;
    int r = kop_http_server_add_connection(t->o.http, sv[1], (const struct sockaddr *)&c->peer,
                                           c->peer_len);
    if (r < 0)
        return r;
    c->st = C_OPEN;
    return 0;
}

/*
 * The connection's first request line, when the first bytes decrypted hold
 * all of it, must have the shape Go accepts (kop_http_request_line_ok):
 * libmicrohttpd closes on some malformed lines without a word ("GARBAGE",
 * a line starting with a blank), where Go, the apiserver's stack, answers
 * 400. Such a line is answered here with a JSON Status, MHD's end closed
 * unread, and the connection closes once the answer is out. Returns
 * whether it was refused.
 */
static bool refuse_line(struct kop_tls *t, struct conn *c)
{
    c->line_checked = true;
    const char *p = (const char *)c->tp + c->tp_off;
    if (kop_http_request_line_ok(p, c->tp_len - c->tp_off) >= 0 || c->tt_len || c->held_len)
        return false;
    size_t n = kop_http_error_response((char *)c->tt, TT_SIZE, 400, "malformed HTTP request line");
    if (!n)
        return false;
    c->tt_len = n;
    c->tt_off = 0;
    c->tp_off = c->tp_len = 0;
    c->plain_eof = true;
    if (c->ev_plain)
        ep_set(t, c->pfd, &c->it_plain, &c->ev_plain, 0);
    close(c->pfd);
    c->pfd = -1;
    log_conn(KOP_LOG_DEBUG, c, "malformed request line refused", 0);
    return true;
}

/* Decrypted bytes (tp) -> MHD. Returns whether anything moved. */
static bool plain_send(struct kop_tls *t, struct conn *c)
{
    bool sent = false;
    if (!c->line_checked && c->tp_len > c->tp_off && c->pfd >= 0 && refuse_line(t, c))
        sent = true;
    if (c->tp_len > c->tp_off && c->pfd >= 0) {
        ssize_t n = send(c->pfd, c->tp + c->tp_off, c->tp_len - c->tp_off, MSG_NOSIGNAL);
        if (n > 0) {
            c->tp_off += (size_t)n;
            t->fed += (size_t)n;
            if (c->tp_off == c->tp_len)
                c->tp_off = c->tp_len = 0;
            sent = true;
        } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            /* MHD closed its end, perhaps with an answer still queued
             * for us: drop the request bytes, keep relaying. */
            c->plain_wr_dead = true;
            c->tp_off = c->tp_len = 0;
            sent = true;
        }
    } else if (c->tp_len > c->tp_off) {
        c->tp_off = c->tp_len = 0; /* nobody to deliver them to */
    }
    return sent;
}

/* MHD -> tt. Returns whether anything moved (or the plain side ended). */
static bool plain_recv(struct kop_tls *t, struct conn *c)
{
    bool moved = false;
    if (c->tt_len == 0 && !c->plain_eof && c->plain_readable) {
        size_t kept = c->held_len;
        memcpy(c->tt, c->held, kept);
        ssize_t n = recv(c->pfd, c->tt + kept, TT_SIZE - kept, 0);
        if (n > 0) {
            /* MHD's own HTML error pages become JSON Status bodies */
            size_t hold = 0;
            size_t len = kop_http_json_errors((char *)c->tt, kept + (size_t)n, TT_SIZE, &hold);
            if (hold > sizeof(c->held))
                hold = 0;
            memcpy(c->held, c->tt + len - hold, hold);
            c->held_len = hold;
            c->tt_len = len - hold;
            moved = true;
            if ((size_t)n < TT_SIZE - kept)
                c->plain_readable = false;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            c->plain_readable = false;
        } else {
            c->plain_eof = true;
            moved = true;
            c->tt_len = kept; /* what was held back goes out as it is */
            c->held_len = 0;
            /* Nobody reads the plain side any more. */
            if (c->ev_plain)
                ep_set(t, c->pfd, &c->it_plain, &c->ev_plain, 0);
            close(c->pfd);
            c->pfd = -1;
            c->tp_off = c->tp_len = 0;
        }
    }
    return moved;
}

/* tt -> TLS (the same buffer again after WANT_WRITE). Returns 1 when
 * bytes went out, 0 when none did, -ECONNRESET. */
static int tls_send(struct conn *c, size_t *spent)
{
    int sent = 0;
    if (c->tt_len > c->tt_off) {
        /* mbedtls_ssl_write seals one record a call: all but tt's last
         * go out with MSG_MORE (see "Pumping") */
        int max = mbedtls_ssl_get_max_out_record_payload(&c->ssl);
        c->more = max > 0 && c->tt_len - c->tt_off > (size_t)max;
        int rc = mbedtls_ssl_write(&c->ssl, c->tt + c->tt_off, c->tt_len - c->tt_off);
        c->more = false;
        if (rc > 0) {
            c->tt_off += (size_t)rc;
            *spent += (size_t)rc;
            if (c->tt_off == c->tt_len)
                c->tt_off = c->tt_len = 0;
            sent = 1;
        } else if (rc == MBEDTLS_ERR_SSL_WANT_WRITE) {
            c->net_wr = true;
        } else if (rc == MBEDTLS_ERR_SSL_WANT_READ) {
            c->net_rd = true;
        } else {
            log_conn(KOP_LOG_DEBUG, c, "TLS write failed", rc);
            return -ECONNRESET;
        }
    }
    return sent;
}

static int pump(struct kop_tls *t, struct conn *c, int64_t now)
{
    bool progress, any = false;
    size_t spent = 0;
    rr_unqueue(t, c);
    do {
        if (spent >= PUMP_BUDGET) {
            /* Fairness: the rest waits for this connection's next turn. */
            rr_queue(t, c);
            break;
        }
        progress = false;
        c->net_rd = c->net_wr = false;
        if (plain_send(t, c))
            progress = true;
        /* TLS -> tp, until WANT_READ (drains mbedTLS's buffered record too).
         * Once MHD stopped reading (it answered early and closed) nothing
         * more is decrypted: the client's further bytes have no reader, so
         * the answer is relayed and the connection closed (C_LINGER). */
        bool plain_gone = c->plain_wr_dead || c->plain_eof || c->pfd < 0;
        if (c->tp_len == 0 && !c->tls_eof && !plain_gone) {
            int rc = mbedtls_ssl_read(&c->ssl, c->tp, BUF_SIZE);
            if (rc > 0) {
                c->tp_len = (size_t)rc;
                spent += (size_t)rc;
                progress = true;
                continue;
            } else if (rc == MBEDTLS_ERR_SSL_WANT_READ) {
                c->net_rd = true;
            } else if (rc == MBEDTLS_ERR_SSL_WANT_WRITE) {
                c->net_wr = true;
            } else if (rc == 0 || rc == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY) {
                c->tls_eof = true;
                progress = true;
            } else {
                log_conn(KOP_LOG_DEBUG, c, "TLS read failed", rc);
                return -ECONNRESET;
            }
        }
        if (c->plain_wr_dead && c->tp_len > 0)
            c->tp_off = c->tp_len = 0;
        if (c->tls_eof && c->tp_len == 0 && !c->plain_shut && c->pfd >= 0) {
            shutdown(c->pfd, SHUT_WR);
            c->plain_shut = true;
        }
        if (plain_recv(t, c))
            progress = true;
        int w = tls_send(c, &spent);
        if (w < 0)
            return w;
        if (w > 0)
            progress = true;
        if (progress)
            any = true;
    } while (progress);
    if (any)
        c->last_io = now;
    if (c->plain_eof && c->tt_len == 0) {
        /* Response stream finished: close_notify, then close. */
        int rc = mbedtls_ssl_close_notify(&c->ssl);
        if (rc == MBEDTLS_ERR_SSL_WANT_WRITE) {
            c->net_wr = true;
            c->net_rd = false;
            return 0;
        }
        return 1;
    }
    if (c->tls_eof && c->plain_eof)
        return 1;
    return 0;
}

/* Register interest according to the connection's wants. */
static int conn_update(struct kop_tls *t, struct conn *c)
{
    uint32_t net = 0, plain = 0;
    if (c->st == C_PEEK) {
        net = EPOLLIN | EPOLLET;
    } else {
        if (c->net_rd)
            net |= EPOLLIN;
        if (c->net_wr)
            net |= EPOLLOUT;
    }
    if (c->st == C_OPEN && c->pfd >= 0) {
        if (c->tp_len > c->tp_off && !c->plain_wr_dead)
            plain |= EPOLLOUT;
        if (c->tt_len == 0 && !c->plain_eof)
            plain |= EPOLLIN;
    }
    /* With no interest the client socket is left out of the epoll set (a
     * level-triggered hangup would otherwise spin); errors surface at the
     * next read or write, or the idle timeout closes it. */
    int r = ep_set(t, c->fd, &c->it_net, &c->ev_net, net);
    if (r == 0)
        r = ep_set(t, c->pfd, &c->it_plain, &c->ev_plain, plain);
    return r;
}

/* Enter C_LINGER (see enum conn_state). Returns 0, or 1 to close now. */
static int conn_linger(struct kop_tls *t, struct conn *c, int64_t now)
{
    rr_unqueue(t, c);
    if (c->tls_eof || shutdown(c->fd, SHUT_WR) < 0)
        return 1;
    if (c->pfd >= 0) {
        ep_set(t, c->pfd, &c->it_plain, &c->ev_plain, 0);
        close(c->pfd);
        c->pfd = -1;
    }
    c->st = C_LINGER;
    c->deadline = now + (int64_t)LINGER_MS * KOP_NSEC_PER_MSEC;
    if (ep_set(t, c->fd, &c->it_net, &c->ev_net, EPOLLIN) < 0)
        return 1;
    return 0;
}

/* Discard what the client still sends. Returns 0 to keep lingering, 1 when
 * the client closed (or failed). */
static int conn_drain(struct conn *c)
{
    char scratch[BUF_SIZE];
    for (int i = 0; i < LINGER_READS; i++) {
        ssize_t n = recv(c->fd, scratch, sizeof(scratch), 0);
        if (n > 0) {
            c->lingered += (size_t)n;
            /* A client that keeps streaming is not waiting for an answer. */
            if (c->lingered > LINGER_MAX_BYTES)
                return 1;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return 0;
        return 1;
    }
    return 0;
}

static void conn_event(struct kop_tls *t, struct conn *c, enum item_kind kind, uint32_t events,
                       int64_t now)
{
    if (c->dead)
        return;
    if (kind == IT_NET && (events & EPOLLERR)) {
        conn_close(t, c);
        return;
    }
    if (events & (EPOLLIN | EPOLLHUP)) {
        if (kind == IT_NET)
            c->net_readable = true;
        else
            c->plain_readable = true;
    }
    int r;
    switch (c->st) {
    case C_PEEK:
        r = conn_peek(t, c, now);
        break;
    case C_HANDSHAKE:
        r = conn_handshake(t, c, now);
        break;
    case C_LINGER:
        if (kind == IT_NET && conn_drain(c) != 0)
            conn_close(t, c);
        return;
    default:
        r = pump(t, c, now);
        if (r == 1)
            r = conn_linger(t, c, now);
        if (c->st == C_LINGER && r == 0)
            return;
        break;
    }
    if (r == HS_WITH_WORKER)
        return; /* back through hw_collect() */
    if (r == 0)
        r = conn_update(t, c);
    if (r != 0)
        conn_close(t, c);
    /* MHD takes large request bytes while they are hot in the cache */
    if (t->http_fd[0] >= 0 && t->fed >= HTTP_FED_RUN)
        http_run(t, now);
}

/* A handshake step is due: queue it behind the ones already waiting. In
 * HANDSHAKE the socket leaves the epoll set meanwhile (level-triggered, it
 * would otherwise fill every batch while it waits); the step's
 * conn_update() registers it again. PEEK stays registered: it is
 * edge-triggered, and registering it again would report a partial
 * ClientHello again and again. */
static void hs_defer(struct kop_tls *t, struct conn *c, uint32_t events)
{
    if (c->dead)
        return; /* closed earlier in this batch; freed before the queue runs */
    c->hs_events |= events;
    if (c->hs_queued)
        return;
    if (c->st == C_HANDSHAKE && ep_set(t, c->fd, &c->it_net, &c->ev_net, 0) < 0) {
        conn_close(t, c);
        return;
    }
    c->hs_queued = true;
    c->hs_prev = t->hs_tail;
    c->hs_next = NULL;
    if (t->hs_tail)
        t->hs_tail->hs_next = c;
    else
        t->hs_head = c;
    t->hs_tail = c;
}

/* Run queued handshake steps for about HS_SLICE_NS, oldest first. */
static void hs_run(struct kop_tls *t, int64_t now)
{
    int64_t start = kop_clock_now_ns();
    do {
        struct conn *c = t->hs_head;
        if (!c)
            break;
        hs_unqueue(t, c);
        uint32_t ev = c->hs_events;
        c->hs_events = 0;
        conn_event(t, c, IT_NET, ev, now);
    } while (kop_clock_now_ns() - start < HS_SLICE_NS);
}

/* Give every connection whose budget ran out one more turn (those that
 * run out again go to the back). */
static void rr_run(struct kop_tls *t, int64_t now)
{
    struct conn *last = t->rr_tail;
    while (t->rr_head) {
        struct conn *c = t->rr_head;
        rr_unqueue(t, c);
        conn_event(t, c, IT_NET, 0, now);
        if (c == last)
            break;
    }
}

/* ---- the handshake worker ---------------------------------------------- */

static void hw_dispatch(struct kop_tls *t, struct conn *c)
{
    c->hw_busy = true;
    pthread_mutex_lock(&t->hw_lock);
    c->hw_next = NULL;
    if (t->hw_tail)
        t->hw_tail->hw_next = c;
    else
        t->hw_head = c;
    t->hw_tail = c;
    pthread_cond_signal(&t->hw_cond);
    pthread_mutex_unlock(&t->hw_lock);
}

static void *hw_main(void *arg)
{
    struct kop_tls *t = arg;
    /* relative to the niceness kop was started with, at most 19 */
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, (id_t)gettid());
    if (errno == 0) {
        nice = nice + HW_NICE > 19 ? 19 : nice + HW_NICE;
        if (setpriority(PRIO_PROCESS, (id_t)gettid(), nice) != 0)
            kop_logf(KOP_LOG_DEBUG, LOGGER, "handshake thread keeps its niceness: errno %d", errno);
    }
    pthread_mutex_lock(&t->hw_lock);
    for (;;) {
        while (!t->hw_head && !t->hw_stop)
            pthread_cond_wait(&t->hw_cond, &t->hw_lock);
        struct conn *c = t->hw_head;
        if (t->hw_stop || !c)
            break; /* what is left is handed back by hw_stop() */
        t->hw_head = c->hw_next;
        if (!t->hw_head)
            t->hw_tail = NULL;
        pthread_mutex_unlock(&t->hw_lock);
        c->hw_rc = mbedtls_ssl_handshake(&c->ssl);
        pthread_mutex_lock(&t->hw_lock);
        c->hw_next = t->hw_done;
        t->hw_done = c;
        uint64_t one = 1;
        if (write(t->hw_evfd, &one, sizeof(one)) < 0) {
            /* the counter is at its maximum: the loop is behind anyway */
        }
    }
    pthread_mutex_unlock(&t->hw_lock);
    return NULL;
}

/* Take back the steps the worker finished (oldest first) and carry on
 * with each connection as conn_event() would have. */
static void hw_collect(struct kop_tls *t, int64_t now)
{
    pthread_mutex_lock(&t->hw_lock);
    struct conn *done = t->hw_done;
    t->hw_done = NULL;
    pthread_mutex_unlock(&t->hw_lock);
    struct conn *fifo = NULL;
    while (done) { /* the list is newest first */
        struct conn *n = done->hw_next;
        done->hw_next = fifo;
        fifo = done;
        done = n;
    }
    while (fifo) {
        struct conn *c = fifo;
        fifo = c->hw_next;
        c->hw_next = NULL;
        c->hw_busy = false;
        if (c->hw_close) {
            conn_close(t, c);
            continue;
        }
        int r = hs_result(t, c, c->hw_rc, now);
        if (r == 0)
            r = conn_update(t, c);
        if (r != 0)
            conn_close(t, c);
    }
}

/* Stop the worker (after its current step) and close every connection it
 * still had. Loop thread. */
static void hw_stop(struct kop_tls *t)
{
    if (!t->hw_started)
        return;
    pthread_mutex_lock(&t->hw_lock);
    t->hw_stop = true;
    pthread_cond_broadcast(&t->hw_cond);
    pthread_mutex_unlock(&t->hw_lock);
    pthread_join(t->hw_thread, NULL);
    t->hw_started = false;
    for (struct conn *c = t->hw_head, *n; c; c = n) {
        n = c->hw_next;
        c->hw_busy = false;
        c->hw_next = NULL;
        conn_close(t, c);
    }
    t->hw_head = t->hw_tail = NULL;
    for (struct conn *c = t->hw_done, *n; c; c = n) {
        n = c->hw_next;
        c->hw_busy = false;
        c->hw_next = NULL;
        conn_close(t, c);
    }
    t->hw_done = NULL;
}

/* OPEN with nothing of a request on its way through the front: no
 * ciphertext unread, nothing decrypted or to encrypt buffered, MHD's end
 * still open. Whether MHD sits between requests is asked separately. */
static bool conn_quiet(const struct conn *c)
{
    if (c->st != C_OPEN || c->dead || c->plain_eof || c->tls_eof || c->tp_len || c->tt_len ||
        c->held_len || c->rb_off != c->rb_len || c->rr_queued)
        return false;
    if (mbedtls_ssl_get_bytes_avail(&c->ssl) > 0)
        return false;
    struct pollfd p = {.fd = c->pfd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) != 0)
        return false; /* MHD closed its end (or we cannot tell) */
    int n = 0;
    return ioctl(c->fd, FIONREAD, &n) == 0 && n == 0;
}

/*
 * At max_connections a newcomer may take the slot of a connection of the
 * address that holds most, when that address holds at least two more than
 * the newcomer's (so it ends with no fewer than the newcomer; see "Limits";
 * the rule is kop_ipcount_evict_from(), shared with the plain HTTP
 * servers). The victim does no work: one waiting for its handshake token
 * first, then one that has not finished its handshake (not with the
 * worker), then the open one that has sat longest between requests.
 * Returns whether a slot was freed. One pass over the address table and
 * one over the connections: at most max_connections each.
 */
static bool evict_for(struct kop_tls *t, const struct sockaddr_storage *ss)
{
    struct ipent *mine = ip_get(t, ss, false);
    struct ipent *top = (struct ipent *)kop_ipcount_evict_from(&t->ips, mine ? &mine->base : NULL);
    if (!top)
        return false;
    struct conn *waiting = NULL, *hs = NULL;
    size_t n = 0, cap = top->base.count;
    int *fds = malloc(cap * sizeof(*fds));
    for (struct conn *c = t->conns; c; c = c->next) {
        if (c->ip != top || c->dead || c->hw_busy)
            continue;
        if (c->thr_queued) {
            if (!waiting || c->deadline < waiting->deadline)
                waiting = c;
        } else if (c->st == C_PEEK || c->st == C_HANDSHAKE) {
            if (!hs || c->deadline < hs->deadline)
                hs = c;
        } else if (fds && n < cap && conn_quiet(c)) {
            fds[n++] = c->mhd_fd;
        }
    }
    struct conn *victim = waiting ? waiting : hs;
    if (!victim && n) {
        int fd = kop_http_server_longest_idle(t->o.http, fds, n);
        for (struct conn *c = t->conns; c && fd >= 0; c = c->next) {
            if (c->ip == top && c->st == C_OPEN && c->mhd_fd == fd) {
                victim = c;
                break;
            }
        }
    }
    free(fds);
    if (!victim)
        return false;
    kop_counter_inc(t->m_rej_evicted);
    log_conn(KOP_LOG_DEBUG, victim, "closed at max_connections: its address holds the most", 0);
    conn_close(t, victim);
    return true;
}

static void do_accept(struct kop_tls *t, int64_t now)
{
    for (int i = 0; i < 64 && t->lfd >= 0; i++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int fd = accept4(t->lfd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* Out of descriptors: pause accepting for a moment rather
                 * than spin on a listen socket we cannot serve. */
                kop_logf(KOP_LOG_WARN, LOGGER, "accept: out of resources (errno %d)", errno);
                struct epoll_event ev = {0};
                epoll_ctl(t->epfd, EPOLL_CTL_DEL, t->lfd, &ev);
                t->listen_paused_until = now + 100 * KOP_NSEC_PER_MSEC;
            }
            return;
        }
        unmap_v4(&ss, &len);
        if (t->n_conns >= t->o.max_connections && !evict_for(t, &ss)) {
            kop_counter_inc(t->m_rej_max);
            close(fd);
            continue;
        }
        struct ipent *ip = ip_get(t, &ss, true);
        if (ip && t->o.max_per_ip && ip->base.count >= t->o.max_per_ip) {
            kop_counter_inc(t->m_rej_ip);
            close(fd);
            continue;
        }
        struct conn *c = ip ? calloc(1, sizeof(*c)) : NULL;
        if (ip)
            ip->base.count++; /* balanced by ip_put() below or in conn_close() */
        if (!c) {
            ip_put(t, ip);
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c->fd = fd;
        c->pfd = -1;
        c->ip = ip;
        c->peer = ss;
        c->peer_len = len;
        c->st = C_PEEK;
        c->net_readable = true;
        c->deadline = now + (int64_t)t->o.handshake_timeout_ms * KOP_NSEC_PER_MSEC;
        c->last_io = now;
        c->it_net = (struct ep_item){IT_NET, c};
        c->it_plain = (struct ep_item){IT_PLAIN, c};
        c->next = t->conns;
        if (t->conns)
            t->conns->prev = c;
        t->conns = c;
        t->n_conns++;
        kop_gauge_add(t->m_active, 1);
        if (!ip_take(t, ip, now)) {
            /* Over its address's handshake rate: the connection waits, outside the epoll set, until
             * a token comes; the handshake deadline runs meanwhile. */
            kop_counter_inc(t->m_throttled);
            thr_queue(t, c);
            continue;
        }
        if (conn_update(t, c) < 0)
            conn_close(t, c);
    }
}

/* Let waiting connections whose address has a token now start their
 * handshake (registering a PEEK socket reports a ClientHello that is
 * already there). */
static void thr_run(struct kop_tls *t, int64_t now)
{
    for (struct conn *c = t->thr_head, *n; c; c = n) {
        n = c->thr_next;
        if (!ip_take(t, c->ip, now))
            continue;
        thr_unqueue(t, c);
        if (conn_update(t, c) < 0)
            conn_close(t, c);
    }
}

static void stop_listening(struct kop_tls *t)
{
    if (t->lfd < 0)
        return;
    struct epoll_event ev = {0};
    epoll_ctl(t->epfd, EPOLL_CTL_DEL, t->lfd, &ev);
    close(t->lfd);
    t->lfd = -1;
    atomic_store(&t->ready, false);
    /* Connections still in their handshake carry no request yet. */
    for (struct conn *c = t->conns, *n; c; c = n) {
        n = c->next;
        if (c->st != C_OPEN)
            conn_close(t, c);
    }
}

static void housekeeping(struct kop_tls *t, int64_t now)
{
    int64_t idle = (int64_t)t->o.idle_timeout_ms * KOP_NSEC_PER_MSEC;
    for (struct conn *c = t->conns, *n; c; c = n) {
        n = c->next;
        if (c->st == C_LINGER) {
            if (now >= c->deadline)
                conn_close(t, c);
        } else if (c->hw_busy) {
            continue; /* its deadline is looked at once it is back */
        } else if (c->st != C_OPEN && now >= c->deadline) {
            kop_counter_inc(t->m_rej_hs_timeout);
            log_conn(KOP_LOG_DEBUG, c, "TLS handshake timed out", 0);
            conn_close(t, c);
        } else if (c->st == C_OPEN && now - c->last_io >= idle) {
            kop_counter_inc(t->m_rej_idle);
            conn_close(t, c);
        }
    }
    ip_gc(t, now);
    if (t->listen_paused_until && now >= t->listen_paused_until && t->lfd >= 0) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &t->it_listen};
        epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->lfd, &ev);
        t->listen_paused_until = 0;
    }
    if ((t->reload_due && now >= t->reload_due) || now >= t->next_stat) {
        t->reload_due = 0;
        t->next_stat = now + (int64_t)t->o.reload_interval_ms * KOP_NSEC_PER_MSEC;
        certs_check(t, false);
    }
}

/* A round of the external HTTP server (see "The HTTP server"). */
static void http_run(struct kop_tls *t, int64_t now)
{
    t->http_due = false;
    t->fed = 0;
    int ms = kop_http_server_run(t->o.http);
    if (ms == 0)
        t->http_due = true; /* work pending that raises no event */
    t->http_at = ms > 0 ? now + (int64_t)ms * KOP_NSEC_PER_MSEC : 0;
}

static void drain_fd(int fd)
{
    char buf[4096];
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
}

static void *loop_main(void *arg)
{
    struct kop_tls *t = arg;
    struct epoll_event evs[64];
    while (!atomic_load(&t->stop_loop)) {
        int timeout = t->hs_head || t->rr_head || t->http_due ? 0
                      : t->thr_head                           ? THR_TICK_MS
                                                              : TICK_MS;
        if (t->http_at && timeout > 0) {
            /* rounded up: woken before it, the loop would spin */
            int64_t ms =
                (t->http_at - kop_clock_now_ns() + KOP_NSEC_PER_MSEC - 1) / KOP_NSEC_PER_MSEC;
            timeout = ms <= 0 ? 0 : ms < timeout ? (int)ms : timeout;
        }
        int n = epoll_wait(t->epfd, evs, 64, timeout);
        int64_t now = kop_clock_now_ns();
        for (int i = 0; i < n; i++) {
            struct ep_item *it = evs[i].data.ptr;
            switch (it->kind) {
            case IT_LISTEN:
                do_accept(t, now);
                break;
            case IT_WAKE:
                drain_fd(t->evfd);
                if (atomic_load(&t->stop_accept))
                    stop_listening(t);
                break;
            case IT_INOTIFY:
                drain_fd(t->infd);
                if (!t->reload_due)
                    t->reload_due = now + 100 * KOP_NSEC_PER_MSEC;
                break;
            case IT_HSDONE:
                drain_fd(t->hw_evfd);
                hw_collect(t, now);
                break;
            case IT_HTTP:
                t->http_due = true;
                break;
            case IT_NET:
            case IT_PLAIN:
                if (it->conn->st == C_PEEK || it->conn->st == C_HANDSHAKE)
                    hs_defer(t, it->conn, evs[i].events);
                else
                    conn_event(t, it->conn, it->kind, evs[i].events, now);
                break;
            }
        }
        reap_zombies(t);
        if (t->thr_head) {
            thr_run(t, now);
            reap_zombies(t);
        }
        if (t->rr_head) {
            rr_run(t, now);
            reap_zombies(t);
        }
        if (t->hs_head) {
            hs_run(t, now);
            reap_zombies(t);
        }
        if (t->http_due || (t->http_at && now >= t->http_at))
            http_run(t, now);
        if (now >= t->next_tick || (n == 0 && timeout > 0)) {
            t->next_tick = now + TICK_MS * KOP_NSEC_PER_MSEC;
            housekeeping(t, now);
            reap_zombies(t);
        }
    }
    stop_listening(t);
    hw_stop(t);
    while (t->conns)
        conn_close(t, t->conns);
    reap_zombies(t);
    return NULL;
}

/* ---- listen socket ------------------------------------------------------ */

static int open_listener(const char *host, uint16_t port, int *ret_fd, uint16_t *ret_port)
{
    struct sockaddr_storage ss;
    socklen_t len;
    memset(&ss, 0, sizeof(ss));
    bool any = !host || !*host;
    if (any) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)(void *)&ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_addr = in6addr_any;
        s6->sin6_port = htons(port);
        len = sizeof(*s6);
    } else {
        int r = kop_netaddr_resolve(host, port, KOP_NETADDR_PASSIVE, &ss, &len);
        if (r < 0)
            return r;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 && any && errno == EAFNOSUPPORT) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)(void *)&ss;
        memset(&ss, 0, sizeof(ss));
        s4->sin_family = AF_INET;
        s4->sin_addr.s_addr = htonl(INADDR_ANY);
        s4->sin_port = htons(port);
        len = sizeof(*s4);
        fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    }
    if (fd < 0)
        return -errno;
    int one = 1, zero = 0, r;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (ss.ss_family == AF_INET6 && any)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, SOMAXCONN) < 0) {
        r = -errno;
        close(fd);
        return r;
    }
    struct sockaddr_storage b;
    socklen_t bl = sizeof(b);
    if (getsockname(fd, (struct sockaddr *)&b, &bl) < 0) {
        r = -errno;
        close(fd);
        return r;
    }
    *ret_port = ntohs(b.ss_family == AF_INET ? ((struct sockaddr_in *)(void *)&b)->sin_port
                                             : ((struct sockaddr_in6 *)(void *)&b)->sin6_port);
    *ret_fd = fd;
    return 0;
}

/* ---- lifecycle ---------------------------------------------------------- */

static char *path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static void register_metrics(struct kop_tls *t)
{
    struct kop_metrics *m = t->o.metrics ? t->o.metrics : kop_metrics_global();
    t->m_reads = kop_metric_child(
        kop_metrics_register(m, KOP_METRIC_COUNTER, "certwatcher_read_certificate_total",
                             "Total number of certificate reads", NULL, NULL, 0));
    t->m_read_errors = kop_metric_child(
        kop_metrics_register(m, KOP_METRIC_COUNTER, "certwatcher_read_certificate_errors_total",
                             "Total number of certificate read errors", NULL, NULL, 0));
    char n[160];
    const char *p = t->o.metric_prefix && *t->o.metric_prefix ? t->o.metric_prefix : NULL;
#define NAME(s) (snprintf(n, sizeof(n), "%s%s%s", p ? p : "", p ? "_" : "", (s)), n)
    t->m_expiry = kop_metric_child(kop_metrics_register(
        m, KOP_METRIC_GAUGE, NAME("serving_cert_expiry_seconds"),
        "notAfter of the serving certificate in use, as Unix time in seconds", NULL, NULL, 0));
    t->m_active =
        kop_metric_child(kop_metrics_register(m, KOP_METRIC_GAUGE, NAME("tls_connections_active"),
                                              "Open TLS connections", NULL, NULL, 0));
    static const char *const lr[] = {"reason", NULL};
    struct kop_metric_family *rej = kop_metrics_register(
        m, KOP_METRIC_COUNTER, NAME("tls_connections_rejected_total"),
        "TLS connections refused or closed by a limit, by reason", lr, NULL, 0);
    t->m_rej_max = kop_metric_child(rej, "max_connections");
    t->m_rej_ip = kop_metric_child(rej, "per_ip");
    t->m_rej_hs_timeout = kop_metric_child(rej, "handshake_timeout");
    t->m_rej_hs_error = kop_metric_child(rej, "handshake_error");
    t->m_rej_idle = kop_metric_child(rej, "idle_timeout");
    t->m_rej_evicted = kop_metric_child(rej, "evicted");
    t->m_throttled = kop_metric_child(kop_metrics_register(
        m, KOP_METRIC_COUNTER, NAME("tls_handshakes_throttled_total"),
        "Connections whose handshake waited for their address's handshake rate", NULL, NULL, 0));
#undef NAME
}

/* The options with their defaults filled in; the strings are copied by
 * copy_strings(), so the caller's pointers are not kept. */
static void set_options(struct kop_tls *t, const struct kop_tls_options *opts)
{
    t->o = *opts;
    if (t->o.handshake_timeout_ms <= 0)
        t->o.handshake_timeout_ms = KOP_TLS_HANDSHAKE_TIMEOUT_S * 1000;
    if (t->o.idle_timeout_ms <= 0)
        t->o.idle_timeout_ms = KOP_HTTP_IDLE_TIMEOUT_S * 1000;
    if (!t->o.max_connections)
        t->o.max_connections = KOP_TLS_MAX_CONNECTIONS;
    if (t->o.reload_interval_ms <= 0)
        t->o.reload_interval_ms = 2000;
    if (!t->o.handshakes_per_ip_per_s)
        t->o.handshakes_per_ip_per_s = 64;
    /* A client may open every connection its address is allowed at once
     * (the apiserver after a restart of kop). */
    t->hs_burst = t->o.max_per_ip ? t->o.max_per_ip : t->o.max_connections;
    if (t->hs_burst < t->o.handshakes_per_ip_per_s)
        t->hs_burst = t->o.handshakes_per_ip_per_s;
    t->o.host = NULL;
    t->o.client_ca_file = NULL;
    t->o.client_names = NULL;
}

/* Returns 0 or -ENOMEM. */
static int copy_strings(struct kop_tls *t, const struct kop_tls_options *opts)
{
    if (opts->client_ca_file && !(t->ca_path = strdup(opts->client_ca_file)))
        return -ENOMEM;
    if (opts->client_names) {
        size_t n = 0;
        while (opts->client_names[n])
            n++;
        t->client_names = calloc(n + 1, sizeof(char *));
        if (!t->client_names)
            return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
            if (!(t->client_names[i] = strdup(opts->client_names[i])))
                return -ENOMEM;
        }
    }
    t->cert_dir = strdup(opts->cert_dir);
    t->crt_path = path_join(opts->cert_dir, "tls.crt");
    t->key_path = path_join(opts->cert_dir, "tls.key");
    if (!t->cert_dir || !t->crt_path || !t->key_path)
        return -ENOMEM;
    return 0;
}

/* Watch the certificate directories. inotify is an accelerator; the
 * periodic stat check is the guarantee. */
static void watch_cert_dirs(struct kop_tls *t)
{
    t->infd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (t->infd < 0)
        return;
    uint32_t mask = IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE | IN_DELETE |
                    IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF;
    struct epoll_event ev3 = {.events = EPOLLIN, .data.ptr = &t->it_inotify};
    if (inotify_add_watch(t->infd, t->cert_dir, mask) < 0 ||
        epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->infd, &ev3) < 0) {
        close(t->infd);
        t->infd = -1;
    }
    /* The client CA's directory too (a mounted ConfigMap elsewhere);
     * without the watch its changes still arrive by the stat check. */
    char *dir = t->ca_path ? strdup(t->ca_path) : NULL;
    char *slash = dir ? strrchr(dir, '/') : NULL;
    if (t->infd >= 0 && slash) {
        slash[slash == dir] = '\0';
        (void)inotify_add_watch(t->infd, dir, mask);
    }
    free(dir);
}

int kop_tls_new(const struct kop_tls_options *opts, struct kop_tls **ret_tls)
{
    assert(opts);
    assert(opts->http);
    assert(ret_tls);
    if (!opts->cert_dir)
        return -EINVAL;
    if (opts->client_names && !opts->client_ca_file)
        return -EINVAL;
    struct kop_tls *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    int r = -ENOMEM;
    t->lfd = t->epfd = t->evfd = t->infd = t->hw_evfd = t->http_fd[0] = t->http_fd[1] = -1;
    kop_ipcount_init(&t->ips, sizeof(struct ipent));
    pthread_mutex_init(&t->hw_lock, NULL);
    pthread_cond_init(&t->hw_cond, NULL);
    set_options(t, opts);
    mbedtls_entropy_init(&t->entropy);
    mbedtls_ctr_drbg_init(&t->drbg);
    mbedtls_ssl_ticket_init(&t->tickets);
    if (copy_strings(t, opts) < 0)
        goto out;
    register_metrics(t);
    /* TLS 1.3 runs on PSA crypto; idempotent and thread-safe. */
    if (psa_crypto_init() != PSA_SUCCESS) {
        r = -EIO;
        goto out;
    }
    static const unsigned char pers[] = "tls-front";
    if (mbedtls_ctr_drbg_seed(&t->drbg, mbedtls_entropy_func, &t->entropy, pers,
                              sizeof(pers) - 1) != 0) {
        r = -EIO;
        goto out;
    }
    if (mbedtls_ssl_ticket_setup(&t->tickets, mbedtls_ctr_drbg_random, &t->drbg,
                                 MBEDTLS_CIPHER_AES_256_GCM, TICKET_LIFETIME_S) != 0) {
        r = -EIO;
        goto out;
    }
    r = certs_check(t, true);
    if (r < 0)
        goto out;
    t->epfd = epoll_create1(EPOLL_CLOEXEC);
    t->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    t->hw_evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (t->epfd < 0 || t->evfd < 0 || t->hw_evfd < 0) {
        r = -errno;
        goto out;
    }
    r = open_listener(opts->host, opts->port, &t->lfd, &t->port);
    if (r < 0) {
        kop_logf(KOP_LOG_ERROR, LOGGER, "cannot listen on port %u (errno %d)", (unsigned)opts->port,
                 -r);
        goto out;
    }
    t->it_listen = (struct ep_item){IT_LISTEN, NULL};
    t->it_wake = (struct ep_item){IT_WAKE, NULL};
    t->it_inotify = (struct ep_item){IT_INOTIFY, NULL};
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &t->it_listen};
    struct epoll_event ev2 = {.events = EPOLLIN, .data.ptr = &t->it_wake};
    t->it_hsdone = (struct ep_item){IT_HSDONE, NULL};
    struct epoll_event ev4 = {.events = EPOLLIN, .data.ptr = &t->it_hsdone};
    if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->lfd, &ev) < 0 ||
        epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->evfd, &ev2) < 0 ||
        epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->hw_evfd, &ev4) < 0) {
        r = -errno;
        goto out;
    }
    watch_cert_dirs(t);
    *ret_tls = t;
    return 0;
out:
    kop_tls_free(t);
    return r;
}

int kop_tls_start(struct kop_tls *t)
{
    assert(t);
    if (t->thread_started)
        return -EINVAL;
    int64_t now = kop_clock_now_ns();
    t->next_tick = now;
    t->next_stat = now + (int64_t)t->o.reload_interval_ms * KOP_NSEC_PER_MSEC;
    /* An external HTTP server is run by the loop: its descriptors join our
     * epoll set (level-triggered: readable while MHD has work). */
    if (kop_http_server_poll_fds(t->o.http, t->http_fd) == 2) {
        t->it_http = (struct ep_item){IT_HTTP, NULL};
        for (int i = 0; i < 2; i++) {
            struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &t->it_http};
            if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->http_fd[i], &ev) < 0)
                return -errno;
        }
        t->http_due = true;
    }
    /* The handshake worker first: the loop hands it steps from the start.
     * Without it (thread creation failed) the loop runs them itself. */
    if (kop_thread_start(&t->hw_thread, hw_main, t, "tls-handshake") == 0)
        t->hw_started = true;
    else
        kop_logf(KOP_LOG_WARN, LOGGER, "no handshake thread: handshakes run on the TLS loop");
    int r = kop_thread_start(&t->thread, loop_main, t, "tls-loop");
    if (r < 0) {
        hw_stop(t);
        return r;
    }
    t->thread_started = true;
    atomic_store(&t->ready, true);
    return 0;
}

bool kop_tls_ready(const struct kop_tls *t)
{
    return t && atomic_load(&((struct kop_tls *)t)->ready);
}

uint16_t kop_tls_port(const struct kop_tls *t)
{
    return t ? t->port : 0;
}

static void wake(struct kop_tls *t)
{
    uint64_t one = 1;
    if (t->evfd >= 0 && write(t->evfd, &one, sizeof(one)) < 0) {
        /* The counter is saturated: the loop will wake anyway. */
    }
}

int kop_tls_shutdown(struct kop_tls *t, int timeout_ms)
{
    assert(t);
    if (atomic_exchange(&t->shut_done, true))
        return 0;
    int r = 0;
    atomic_store(&t->ready, false);
    atomic_store(&t->stop_accept, true);
    wake(t);
    if (t->thread_started) {
        kop_http_server_drain(t->o.http);
        int64_t deadline = kop_clock_now_ns() + (int64_t)timeout_ms * KOP_NSEC_PER_MSEC;
        /* Two idle observations 20 ms apart: a request whose bytes are still
         * between the socketpair ends is not in flight in MHD yet. */
        for (int quiet = 0; quiet < 2;) {
            int64_t left = (deadline - kop_clock_now_ns()) / KOP_NSEC_PER_MSEC;
            if (left <= 0) {
                r = kop_http_server_in_flight(t->o.http) ? -ETIMEDOUT : 0;
                break;
            }
            if (kop_http_server_wait_idle(t->o.http, (int)left) < 0) {
                r = -ETIMEDOUT;
                break;
            }
            quiet++;
            struct timespec ts = {0, 20 * 1000 * 1000};
            nanosleep(&ts, NULL);
            if (kop_http_server_in_flight(t->o.http))
                quiet = 0;
        }
        atomic_store(&t->stop_loop, true);
        wake(t);
        pthread_join(t->thread, NULL);
        t->thread_started = false;
    }
    return r;
}

static char tls_name[32];

static void tls_library_name(void)
{
    /* the linked library's, not the headers' (at least 18 bytes) */
    mbedtls_version_get_string_full(tls_name);
}

int kop_tls_global_init(void)
{
    return psa_crypto_init() == PSA_SUCCESS ? 0 : -EIO;
}

const char *kop_tls_library(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, tls_library_name);
    return tls_name;
}

void kop_tls_free(struct kop_tls *t)
{
    if (!t)
        return;
    if (t->thread_started)
        kop_tls_shutdown(t, 0);
    if (t->lfd >= 0)
        close(t->lfd);
    while (t->conns)
        conn_close(t, t->conns);
    reap_zombies(t);
    kop_ipcount_cleanup(&t->ips);
    if (t->infd >= 0)
        close(t->infd);
    if (t->evfd >= 0)
        close(t->evfd);
    if (t->hw_evfd >= 0)
        close(t->hw_evfd);
    if (t->epfd >= 0)
        close(t->epfd);
    pthread_mutex_destroy(&t->hw_lock);
    pthread_cond_destroy(&t->hw_cond);
    certgen_unref(t->gen);
    mbedtls_ssl_ticket_free(&t->tickets);
    mbedtls_ctr_drbg_free(&t->drbg);
    mbedtls_entropy_free(&t->entropy);
    free(t->cert_dir);
    free(t->crt_path);
    free(t->key_path);
    free(t->ca_path);
    for (char **n = t->client_names; n && *n; n++)
        free(*n);
    free(t->client_names);
    free(t);
}
