/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The webhook server of kop: the TLS front (kop/tls.h) in front of an HTTP
 * server (kop/http.h) with two routes,
 *
 *   POST /convert                                  ConversionReview
 *   POST /validate-mygroup-example-com-myresource  AdmissionReview
 *   POST /mutate-mygroup-example-com-myresource-shard  AdmissionReview
 *        (only with --sharding: the owner label at CREATE, kop/sharder.h)
 *
 * Each request is parsed, converted or judged and answered inside a
 * per-thread arena (kop/arena.h) bound to jansson for the duration of the
 * request, so a 10,000-object ConversionReview costs no malloc per value.
 *
 * Logs: one line per request at debug level ("conversionUID" /
 * "admissionUID" as trace ids); conversion failures at warn, denials and
 * malformed requests at info.
 *
 * Thread-safety: new/start/free single-threaded; ready/port/shutdown from
 * any thread (ready may block up to 800 ms for its self-dial). Handlers run
 * in the HTTP server's worker threads.
 */
#ifndef KOP_WEBHOOK_H
#define KOP_WEBHOOK_H

#include <stdbool.h>
#include <stdint.h>

#include "kop/admission.h"
#include "kop/config.h"

#define KOP_WEBHOOK_CONVERT_PATH "/convert"
#define KOP_WEBHOOK_VALIDATE_PATH "/validate-mygroup-example-com-myresource"
/* A cluster's validating path is this followed by its name (members'
 * ValidatingWebhookConfigurations; docs/operations.md §12). */
#define KOP_WEBHOOK_CLUSTERS_PATH KOP_WEBHOOK_VALIDATE_PATH "/clusters/"

struct kop_webhook;
struct kop_http_request;
struct kop_http_response;

struct kop_webhook_options {
    const struct kop_config *cfg; /* flags: port, host, cert dir, limits, registries */
    /* Admission rule 4 (name collisions), NULL until a store exists. */
    kop_admission_child_lookup_fn *child_lookup;
    void *child_lookup_userdata;
    /* The clusters (kop/controller.h): KOP_WEBHOOK_VALIDATE_PATH
     * "/clusters/NAME" runs rule 4 with cluster_child_lookup on the handle
     * cluster(cluster_userdata, NAME); a NULL handle (or cluster NULL: no
     * reconciler) denies the request with 404 and a message naming NAME. */
    void *(*cluster)(void *ud, const char *name);
    void (*cluster_put)(void *handle); /* releases cluster()'s handle; required with cluster */
    kop_admission_child_lookup_fn *cluster_child_lookup;
    void *cluster_userdata;
    /* --sharding: the mutating route KOP_SHARDER_MUTATE_PATH (kop/sharder.h)
     * served by this handler; NULL: not served. */
    void (*shard_mutate)(void *ud, const struct kop_http_request *req,
                         struct kop_http_response *resp);
    void *shard_mutate_userdata;
};

/*
 * Load the certificate, bind the port and start serving. Logs "serving
 * webhook" with the bound port. Returns 0 or a negative errno from the TLS
 * or HTTP layer (-ENOENT: no certificate in --cert-dir, -EADDRINUSE, ...).
 */
int kop_webhook_start(const struct kop_webhook_options *opts, struct kop_webhook **ret);

/*
 * Ready to serve: the certificate is loaded, the listener accepts, and a
 * self-dial of the port (kop/selfdial.h: TLS handshake + one HTTP request,
 * cached 1 s, at most 800 ms) was answered. NULL or shut down: false.
 * A failed self-dial is logged at debug level.
 */
bool kop_webhook_ready(struct kop_webhook *w);

uint16_t kop_webhook_port(const struct kop_webhook *w);

/*
 * Graceful stop within timeout_ms. With idle_grace_ms > 0 (kop shuts down
 * after --shutdown-delay) a keep-alive drain comes first while the listener
 * still accepts: every answer carries "Connection: close", and connections
 * between requests are closed once they have been idle for idle_grace_ms
 * with nothing unread (at most half of timeout_ms goes to this; see
 * docs/operations.md, "Shutdown and draining", for why idle connections
 * are not closed at once). Then, as with idle_grace_ms 0: stop accepting,
 * let in-flight requests finish, close the rest. Returns 0 or -ETIMEDOUT.
 * Idempotent.
 */
int kop_webhook_shutdown(struct kop_webhook *w, int idle_grace_ms, int timeout_ms);

/* NULL-safe; shuts down without grace when still running. */
void kop_webhook_free(struct kop_webhook *w);

#endif /* KOP_WEBHOOK_H */
