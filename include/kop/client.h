/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kubernetes API client on libcurl: typed verbs (GET, LIST, CREATE, UPDATE,
 * JSON merge PATCH, DELETE, the /status subresource), a generic request,
 * and a streaming call for watches.
 *
 * Every request (each retry too) first waits on the shared token bucket.
 * Each thread gets its own curl easy handle (and multi handle, used to
 * make requests cancellable from another thread), created on first use
 * and kept for the thread's life, so connections are reused per thread
 * with TCP keep-alive; nothing curl-related is shared between threads.
 *
 * Errors: 0 or a negative errno. HTTP statuses map as 400/422/415 -EINVAL,
 * 401 -EACCES, 403 -EPERM, 404 -ENOENT, 405 -EOPNOTSUPP, 409 -EEXIST
 * (reason AlreadyExists) or -EBUSY (Conflict and anything else), 410
 * -ESTALE, 413 -EMSGSIZE, 429 -EAGAIN, 504 -ETIMEDOUT, other 5xx -EIO,
 * other 4xx -EPROTO. Transport: timeout -ETIMEDOUT, refused -ECONNREFUSED,
 * name/host unreachable -EHOSTUNREACH, reset/empty reply -ECONNRESET, TLS
 * failures -EPROTO, cancelled -ECANCELED, a body that is not JSON
 * -EBADMSG. The Kubernetes Status (code, reason, message) is copied into a
 * struct kop_api_status for logs.
 *
 * Requests send "Accept: application/json" unless the caller names another
 * value (metadata-only lists and watches ask for PartialObjectMetadata).
 *
 * 429 and 5xx answers that carry Retry-After are retried up to
 * max_retries times, waiting Retry-After seconds (capped). A 401 with a
 * token file re-reads the file once and retries. The token file is
 * otherwise re-read every token_reread_ms (60 s) so rotated bound tokens
 * are picked up. A token file larger than KOP_CLIENT_MAX_TOKEN_FILE, empty,
 * unreadable, or whose token holds a control character is not used (the
 * token read before, if any, stays in use) and is logged at error level
 * with its path (and the limit). The token and Authorization header are
 * never logged.
 *
 * A kubeconfig user with an exec credential plugin (kop/execcred.h): each
 * request takes the plugin's cached token or client certificate (running
 * the plugin when there is none or it expired); a 401 to a request made
 * with it runs the plugin again and retries the request once. When no
 * credential can be had the request fails with -ENOKEY and the plugin's
 * error in status->message. A request waiting for the plugin stays
 * cancellable (the plugin it runs is then killed). exec_timeout_ms bounds
 * one plugin run.
 *
 * Metrics: rest_client_requests_total{code,method,host}, counted per HTTP
 * attempt; code is "<error>" when no response arrived.
 *
 * Thread-safety: a client may be used from any number of threads at once;
 * kop_client_free() only after every thread stopped using it.
 */
#ifndef KOP_CLIENT_H
#define KOP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* The largest token file read, in bytes (kubeconfig tokenFile, the
 * in-cluster ServiceAccount token). client-go sets no limit; a projected
 * ServiceAccount token is about 1 KiB and the largest OIDC tokens a few
 * KiB, so 64 KiB leaves room while bounding what a reader holds. */
#define KOP_CLIENT_MAX_TOKEN_FILE ((size_t)64 << 10)

struct kop_kubeconfig;
struct kop_ratelimit;
struct kop_metrics;
struct kop_client;

/* A resource type: core ("" or NULL group -> /api/v1) or a group
 * (/apis/G/V). */
struct kop_resource {
    const char *group;
    const char *version;
    const char *resource; /* plural, lowercase */
    bool namespaced;
};

/* What the server said, for logs. Filled by every call that takes one
 * (may be NULL), on success and failure. */
struct kop_api_status {
    int code;          /* HTTP status; 0 when no response arrived */
    char reason[64];   /* Status.reason ("AlreadyExists", "Conflict", ...) */
    char message[512]; /* Status.message, or the transport error */
    int retry_after_s; /* Retry-After of the last response in seconds (an HTTP-date
                        * counts from now; past: 1), 0 if none */
    int attempts;      /* HTTP attempts made */
};

struct kop_client_options {
    const struct kop_kubeconfig *config; /* copied */
    struct kop_ratelimit *ratelimit;     /* borrowed; NULL: no limit */
    struct kop_metrics *metrics;         /* NULL: kop_metrics_global() */
    const char *cluster;                 /* cluster label of its metrics; NULL: "local" */
    const char *user_agent;              /* NULL: client-go's default, see below */
    int max_retries;                     /* 0: 5; negative: none */
    int64_t max_retry_wait_ms;           /* cap on Retry-After; 0: 10 s */
    int64_t token_reread_ms;             /* 0: 60 s */
    int64_t timeout_ms;                  /* whole request (not watches); 0: 60 s */
    int64_t connect_timeout_ms;          /* 0: 10 s */
    int64_t exec_timeout_ms;             /* one exec credential plugin run; 0: 60 s */
    /* kop_client_abort() may cancel every request of this client (the
     * reconciler's writes when the lease is lost). */
    bool abortable;
};

/* Lets another thread abort a request in progress (informer stop). */
struct kop_client_cancel;

/* NULL on ENOMEM. */
struct kop_client_cancel *kop_client_cancel_new(void);
void kop_client_cancel_free(struct kop_client_cancel *cc);
/* Abort the current and every later request using cc (-ECANCELED) until
 * reset. Any thread. The three are NULL-safe (a request that is not
 * cancellable, a client that is not abortable): no-op, and never fired. */
void kop_client_cancel_fire(struct kop_client_cancel *cc);
void kop_client_cancel_reset(struct kop_client_cancel *cc);
bool kop_client_cancel_fired(struct kop_client_cancel *cc);

/* Returns 0, -EINVAL (no server), -ENOMEM; *ret on success. */
int kop_client_new(const struct kop_client_options *opt, struct kop_client **ret);

/* NULL-safe. Releases every thread's curl handles. */
void kop_client_free(struct kop_client *c);

/*
 * Cancel every request of an abortable client: those in flight end with
 * -ECANCELED within ~200 ms (and their transfer is cut), later ones fail at
 * once (also those waiting in the token bucket, once their slot comes),
 * until kop_client_abort_reset(). No-op for other clients. Any thread.
 */
void kop_client_abort(struct kop_client *c);
void kop_client_abort_reset(struct kop_client *c);

/* The default namespace of the configuration (NULL if none). */
const char *kop_client_namespace(const struct kop_client *c);

/* The User-Agent the client sends. */
const char *kop_client_user_agent(const struct kop_client *c);

/*
 * "<program>/<version> (linux/<arch>) kubernetes/unknown", client-go's
 * format (k8s.io/client-go/rest DefaultKubernetesUserAgent; arch as Go names
 * it). The default of kop_client_options.user_agent is this with the
 * program's short name and "v0.0.0"; the operator passes its own.
 * Returns 0, -ENOSPC (cut) or -EINVAL (len 0).
 */
int kop_client_format_user_agent(char *buf, size_t len, const char *program, const char *version);

/*
 * "/api/v1/namespaces/ns/services/name/status" and friends. ns is ignored
 * for cluster-scoped resources; NULL ns for a namespaced resource means
 * "all namespaces"; name and subresource may be NULL.
 * Returns 0, -EINVAL (a part that is not a valid path segment, or a
 * subresource without a name) or -ENAMETOOLONG.
 */
int kop_client_path(const struct kop_resource *res, const char *ns, const char *name,
                    const char *subresource, char *buf, size_t len);

/* Map an HTTP status (and Status.reason) to a negative errno (0 for 2xx). */
int kop_client_errno(int http_code, const char *reason);

struct kop_request {
    const char *method;               /* "GET", "POST", "PUT", "PATCH", "DELETE" */
    const char *path;                 /* path and query, starting with '/' */
    const char *content_type;         /* of body; NULL: application/json */
    const json_t *body;               /* @ref borrow; NULL: none */
    struct kop_client_cancel *cancel; /* NULL: not cancellable */
    const char *accept;               /* Accept header value; NULL: application/json.
                                         CR or LF in it: -EINVAL */
};

/*
 * Generic request. On 2xx, *ret_obj (may be NULL) gets the decoded body,
 * @ref new (NULL for an empty body). Errors as above.
 */
int kop_client_request(struct kop_client *c, const struct kop_request *req,
                       struct kop_api_status *status, json_t **ret_obj);

struct kop_list_options {
    const char *label_selector;
    const char *field_selector;
    long limit;                 /* 0: no limit */
    const char *continue_token; /* NULL or "": first page */
    const char *resource_version;
    const char *accept; /* Accept header value; NULL: application/json (e.g.
                           "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,
                           application/json" for metadata only) */
    /* kop_client_list_stream: the largest item (or other member of the
     * list) held and decoded; a larger one ends the LIST with -EMSGSIZE.
     * 0: KOP_CLIENT_MAX_ITEM_BYTES. */
    size_t max_item_bytes;
    /* kop_client_list_stream: a member of each item never decoded, as a
     * NULL-terminated key path from the item (kop_jscan_decode_without;
     * {"metadata", "managedFields", NULL}); NULL: every member. */
    const char *const *drop;
};

/* The default largest LIST item, the same as the longest watch line
 * (kop/watch.h): far above any object the apiserver stores. */
#define KOP_CLIENT_MAX_ITEM_BYTES ((size_t)64 << 20)

/* Typed verbs. Every json_t in is @ref borrow, every *ret_obj @ref new. */
int kop_client_get(struct kop_client *c, const struct kop_resource *res, const char *ns,
                   const char *name, struct kop_api_status *status, json_t **ret_obj);
int kop_client_list(struct kop_client *c, const struct kop_resource *res, const char *ns,
                    const struct kop_list_options *opts, struct kop_api_status *status,
                    json_t **ret_list);

/* Receives one item of a streamed LIST (@ref borrow; private to the
 * caller, freed after the call). Return 0 or a negative errno to stop. */
typedef int (*kop_client_item_fn)(void *ud, json_t *item);

/*
 * A LIST whose response is streamed (kop/jstream.h): each item is
 * validated and decoded alone as it arrives and handed to item_fn, so a
 * page is never held whole, neither as bytes nor as a tree: the memory is
 * one item. *ret_meta (may be NULL) receives the list's metadata
 * (resourceVersion, continue; @ref new). 429/5xx with Retry-After are
 * retried as for other requests (no item was handed on then). Returns 0,
 * the mapped HTTP error (Status decoded into *status), -ECANCELED,
 * -ETIMEDOUT (no byte for a minute), -EBADMSG (not a valid list),
 * -EMSGSIZE (an item over opts->max_item_bytes), or item_fn's error. Items handed on before an
 * error stay handed on.
 */
int kop_client_list_stream(struct kop_client *c, const struct kop_resource *res, const char *ns,
                           const struct kop_list_options *opts, kop_client_item_fn item_fn,
                           void *ud, struct kop_client_cancel *cancel,
                           struct kop_api_status *status, json_t **ret_meta);

int kop_client_create(struct kop_client *c, const struct kop_resource *res, const char *ns,
                      const json_t *obj, struct kop_api_status *status, json_t **ret_obj);
int kop_client_update(struct kop_client *c, const struct kop_resource *res, const char *ns,
                      const char *name, const json_t *obj, struct kop_api_status *status,
                      json_t **ret_obj);
int kop_client_update_status(struct kop_client *c, const struct kop_resource *res, const char *ns,
                             const char *name, const json_t *obj, struct kop_api_status *status,
                             json_t **ret_obj);
/* JSON merge patch (application/merge-patch+json). */
int kop_client_patch(struct kop_client *c, const struct kop_resource *res, const char *ns,
                     const char *name, const json_t *patch, struct kop_api_status *status,
                     json_t **ret_obj);
int kop_client_patch_status(struct kop_client *c, const struct kop_resource *res, const char *ns,
                            const char *name, const json_t *patch, struct kop_api_status *status,
                            json_t **ret_obj);

struct kop_delete_options {
    const char *propagation_policy;            /* "Background", "Foreground", "Orphan" or NULL */
    const char *precondition_uid;              /* NULL: none */
    const char *precondition_resource_version; /* NULL: none */
};

/* ret_obj (may be NULL): the Status or object the server returned. */
int kop_client_delete(struct kop_client *c, const struct kop_resource *res, const char *ns,
                      const char *name, const struct kop_delete_options *opts,
                      struct kop_api_status *status, json_t **ret_obj);

/* Append "?k=v" / "&k=v" (value percent-encoded) to a path buffer.
 * Returns 0 or -ENAMETOOLONG. */
int kop_client_query_add(char *buf, size_t len, const char *key, const char *value);

/* Receives raw watch body bytes; return 0 or a negative errno to stop. */
typedef int (*kop_client_data_fn)(void *ud, const char *data, size_t len);

/*
 * Streaming GET (a watch): on a 200 answer the body is handed to on_data
 * as it arrives. Returns 0 when the server ended the stream, -ETIMEDOUT
 * when no byte arrived for idle_timeout_ms (0: no idle limit),
 * -ECANCELED, on_data's error, or the mapped HTTP error (the Status body
 * is decoded into *status). No retries.
 */
int kop_client_watch(struct kop_client *c, const char *path, kop_client_data_fn on_data, void *ud,
                     struct kop_client_cancel *cancel, int64_t idle_timeout_ms,
                     struct kop_api_status *status);

/* kop_client_watch with an Accept header value (NULL: application/json),
 * e.g. "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,
 * application/json" for a metadata-only watch. CR or LF in accept: -EINVAL. */
int kop_client_watch_accept(struct kop_client *c, const char *path, const char *accept,
                            kop_client_data_fn on_data, void *ud, struct kop_client_cancel *cancel,
                            int64_t idle_timeout_ms, struct kop_api_status *status);

/* kop_client_watch_accept that also ends the stream limit_ms after it
 * started (0: no limit), returning -ETIME then, however lively the stream
 * is: the client-side deadline client-go's watches get from their
 * timeoutSeconds, for a server or proxy that does not end the watch. */
int kop_client_watch_limit(struct kop_client *c, const char *path, const char *accept,
                           kop_client_data_fn on_data, void *ud, struct kop_client_cancel *cancel,
                           int64_t idle_timeout_ms, int64_t limit_ms,
                           struct kop_api_status *status);

#endif /* KOP_CLIENT_H */
