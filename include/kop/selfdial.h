/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The webhook's readiness self-check: dial the webhook's own port, make a
 * real TLS handshake and send one HTTP request, as controller-runtime's
 * webhook StartedChecker dials its own listener (pkg/webhook/server.go,
 * StartedChecker: tls.DialWithDialer with InsecureSkipVerify). kop goes one
 * step further and asks for an answer, so the HTTP server behind the TLS
 * front is checked too: "GET /healthz" (no webhook route, so the router
 * answers 404 itself; no webhook metric counts it). Any HTTP status line
 * passes.
 *
 * The server's certificate is not verified (the check is whether this
 * process serves, not whether its certificate is trusted). With
 * client_auth (--client-ca-file) the server demands a client certificate
 * that the check does not have: the check then passes once the server's
 * certificate has arrived (its first flight was read up to it) and the
 * server turns the empty client certificate down (an alert or a close:
 * during the handshake in TLS 1.2, instead of the answer in TLS 1.3).
 *
 * The result is cached for cache_ms, and one check never takes more than
 * timeout_ms (connect, handshake, request and answer together), so a
 * /readyz that runs it answers within the kubelet's 1 s probe timeout.
 *
 * Thread-safety: check may be called from any thread (checks are
 * serialised by a mutex; a caller waits for the one under way and uses its
 * result). new/free single-threaded.
 */
#ifndef KOP_SELFDIAL_H
#define KOP_SELFDIAL_H

#include <stdbool.h>
#include <stdint.h>

struct kop_selfdial;

struct kop_selfdial_options {
    /* The webhook's bind host: NULL, "", "0.0.0.0" or "::" dial the
     * loopback address of that family; otherwise this address or name. */
    const char *host;
    uint16_t port;
    int timeout_ms;   /* whole check; 0 = 800 */
    int cache_ms;     /* a result is reused this long; 0 = 1000 */
    bool client_auth; /* the server requires a client certificate (see above) */
};

/* Returns 0, -EINVAL (no port), -ENOMEM or -EIO (the random generator). */
int kop_selfdial_new(const struct kop_selfdial_options *opts, struct kop_selfdial **ret);

/*
 * 0 when the webhook port answered over TLS, else a negative errno
 * (-ECONNREFUSED, -ETIMEDOUT, -EPROTO: the handshake or the answer was
 * wrong, ...). Cached (see above).
 */
int kop_selfdial_check(struct kop_selfdial *d);

/* NULL-safe. */
void kop_selfdial_free(struct kop_selfdial *d);

#endif /* KOP_SELFDIAL_H */
