/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TLS front of the webhook server: mbedTLS terminates TLS and hands the
 * plaintext stream of each connection to a kop_http_server (created with
 * no_listen) over a socketpair.
 *
 * Protocol: TLS 1.3 and 1.2 (mbedTLS 3.6), (EC)DHE over X25519 or P-256
 * with AEAD suites only (AES-GCM, ChaCha20-Poly1305), session tickets for
 * both versions (keys rotated hourly; no 0-RTT), no renegotiation, ALPN
 * "http/1.1" (a client that offers ALPN without http/1.1, e.g. only "h2",
 * is answered without ALPN and speaks HTTP/1.1), any SNI name (one
 * certificate).
 *
 * Certificates: cert_dir/tls.crt (chain, leaf first) and cert_dir/tls.key,
 * and the client CA bundle when there is one. Their directories are
 * watched (inotify plus a stat check every reload_interval_ms) and a
 * change to any of the three files loads all of them for new handshakes
 * while live connections keep the ones they were made with. A bad set
 * (unreadable, unparseable, key not matching the certificate) is logged
 * and the previous one kept. Metrics (registry from the options, default global; P_ is the
 * options' metric_prefix and "_", nothing without one):
 *   certwatcher_read_certificate_total         counter, every load attempt
 *   certwatcher_read_certificate_errors_total  counter, failed attempts
 *   P_serving_cert_expiry_seconds              gauge, notAfter of the serving
 *                                              certificate in use, Unix seconds
 *   P_tls_connections_active                   gauge
 *   P_tls_connections_rejected_total{reason}   counter: max_connections,
 *                                              per_ip, handshake_timeout,
 *                                              handshake_error, idle_timeout
 *   P_tls_handshakes_throttled_total           counter, connections that waited
 *                                              for their address's handshake rate
 *
 * Thread-safety: new/start/free are single-threaded; ready, port and
 * shutdown may be called from any thread. The front runs a loop thread
 * (connections, records) and a handshake thread (the public-key work of
 * handshakes, one connection at a time, handed over and back).
 */
#ifndef KOP_TLS_H
#define KOP_TLS_H

#include <stdbool.h>
#include <stdint.h>

struct kop_http_server;
struct kop_metrics;

/* Defaults, also those of kop's command line (plain integers, so that
 * they can be spelled into a default flag value). The idle timeout's is
 * KOP_HTTP_IDLE_TIMEOUT_S (kop/http.h): one flag sets both servers'. */
#define KOP_TLS_HANDSHAKE_TIMEOUT_S 10
#define KOP_TLS_MAX_CONNECTIONS 1024

struct kop_tls_options {
    const char *host;           /* NULL or "" = all addresses (IPv6 dual stack if possible) */
    uint16_t port;              /* 0 = the kernel picks, see kop_tls_port() */
    const char *cert_dir;       /* holds tls.crt and tls.key */
    const char *client_ca_file; /* non-NULL: require a client certificate signed by these CAs */
    /* NULL-terminated, NULL = any: with client_ca_file, the client
     * certificate must also carry one of these names as its subject CN or
     * a DNS subjectAltName (copied). */
    const char *const *client_names;
    int handshake_timeout_ms; /* 0 = KOP_TLS_HANDSHAKE_TIMEOUT_S */
    int idle_timeout_ms;      /* established connection with no traffic; 0 = 120 s */
    unsigned max_connections; /* 0 = KOP_TLS_MAX_CONNECTIONS */
    unsigned max_per_ip;      /* 0 = no per-address limit */
    /* New handshakes per second from one address, 0 = 64. A burst of
     * max_per_ip (else max_connections) handshakes is always allowed; over
     * the rate a connection waits for its handshake (the handshake timeout
     * runs), it is not refused. */
    unsigned handshakes_per_ip_per_s;
    int reload_interval_ms;       /* stat check of the certificate files; 0 = 2000 */
    struct kop_http_server *http; /* started, no_listen; not owned */
    struct kop_metrics *metrics;  /* NULL = kop_metrics_global() */
    const char *metric_prefix;    /* see above; NULL = none */
};

struct kop_tls;

/*
 * Load the certificate pair (and the client CA), seed the DRBG and bind the
 * listen socket. Returns 0, -EINVAL (bad options; client_names without
 * client_ca_file), -ENOENT / -EACCES (files),
 * -EBADMSG (a file does not parse or the key does not match), -EADDRINUSE,
 * -ENOMEM, -EIO.
 */
int kop_tls_new(const struct kop_tls_options *opts, struct kop_tls **ret_tls);

/* Start the loop thread. Returns 0 or -errno. */
int kop_tls_start(struct kop_tls *tls);

/* Certificate loaded and the loop thread accepting. */
bool kop_tls_ready(const struct kop_tls *tls);

/* The bound port. */
uint16_t kop_tls_port(const struct kop_tls *tls);

/*
 * Graceful stop: stop accepting at once, drain the HTTP server (responses
 * get "Connection: close"), keep pumping until no request is in flight or
 * timeout_ms passed, then close every connection and stop the loop thread.
 * The HTTP server itself is left to its owner. Returns 0 or -ETIMEDOUT.
 * Idempotent.
 */
int kop_tls_shutdown(struct kop_tls *tls, int timeout_ms);

/* Shutdown without grace when still running, then free. NULL is fine. */
void kop_tls_free(struct kop_tls *tls);

/* The TLS library kop runs on, e.g. "Mbed TLS 3.6.6" (static storage). */
const char *kop_tls_library(void);

/*
 * Make mbedTLS ready for the whole process: its PSA crypto core, which TLS
 * 1.3 runs on. Once, before the first TLS use of any kind, libcurl's
 * included: libcurl 7.88's mbedTLS backend (the image's) never calls
 * psa_crypto_init, and mbedTLS 3.6 then refuses to set up a connection
 * whose configuration allows TLS 1.3 ("ssl_init failed"). Idempotent.
 * Returns 0 or -EIO.
 */
int kop_tls_global_init(void);

#endif /* KOP_TLS_H */
