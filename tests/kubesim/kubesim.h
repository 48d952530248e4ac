/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim: an in-memory Kubernetes API server for tests (docs/testing.md §2).
 *
 * This is the one internal header shared by kubesim's source files:
 * http.c (MHD server, routing, auth), store.c (objects, resourceVersion,
 * event history), watch.c (watch streams), resources.c (built-in types,
 * CRD registration, discovery), handlers.c (the verbs), patch.c (merge,
 * strategic merge and JSON patches), schema.c (structural defaults,
 * pruning, validation), webhooks.c (conversion and validating admission
 * calls), controllers.c (GC, namespaces, deployments, CRD status),
 * faults.c (fault injection and request statistics), services.c (where
 * webhook Service references go: endpoints, readiness, propagation),
 * whclient.c (the apiserver's webhook transport: pool, retries,
 * traceparent), partial.c (metadata-only answers:
 * PartialObjectMetadata), certs.c (CA, serving certificate, kubeconfig),
 * util.c (JSON output, Status bodies, selectors).
 *
 * DESIGN (threads and locking):
 *  - libmicrohttpd runs one thread per connection (a watch blocks its own
 *    thread), plus the controller thread.
 *  - One mutex, ks->lock, protects everything mutable: the object maps,
 *    the resource definitions list, the resourceVersion counter, the event
 *    history, faults, stats and the webhook service map. ks->changed is
 *    broadcast after each commit.
 *  - Stored objects are frozen json_t values: readers take a reference
 *    under the lock and use it after unlocking; writers replace them.
 *  - Resource definitions (struct ks_res) are immutable once published; a
 *    CRD update publishes a new one and parks the old one in a graveyard
 *    freed at exit, so a pointer taken under the lock stays valid.
 *  - No webhook call (curl) and no blocking I/O happens with the lock held.
 *  - The webhook client (whclient.c) has its own leaf lock for its pools
 *    and statistics: taken after ks->lock, never around it or across I/O.
 *
 * Thread-safety: functions documented "lock held" require ks->lock; all
 * others take it themselves or touch only their arguments.
 */
#ifndef KUBESIM_H
#define KUBESIM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define KS_MAX_VERSIONS 8

enum ks_event_type { KS_ADDED, KS_MODIFIED, KS_DELETED };

/* One served version of a resource. */
struct ks_version {
    char *name;
    bool served;
    bool storage;
    bool status;       /* status subresource */
    bool scale;        /* scale subresource */
    json_t *schema;    /* openAPIV3Schema or NULL, owned */
    json_t *columns;   /* CRD additionalPrinterColumns or NULL, owned */
    char *deprecation; /* warning text when deprecated, owned */
};

/* A resource definition (immutable once published). */
struct ks_res {
    char *group; /* "" for core */
    char *plural;
    char *singular;
    char *kind;
    char *list_kind;
    char *key;           /* "plural.group" or "plural": the object map key */
    json_t *short_names; /* array or NULL, owned */
    json_t *categories;  /* array or NULL, owned */
    bool namespaced;
    bool typed;      /* built-in: struct key order, typed lists */
    bool crd;        /* defined by a CustomResourceDefinition */
    bool generation; /* metadata.generation maintained */
    struct ks_version versions[KS_MAX_VERSIONS];
    size_t nversions;
    const char *storage;        /* name of the storage version */
    const char *bookmark_extra; /* typed bookmark fields as JSON object text */
    json_t *conversion;         /* CRD spec.conversion, NULL for None; owned */
    char *crd_name;
};

/* A recorded change, for watches. */
struct ks_event {
    uint64_t rv;
    enum ks_event_type type;
    const char *key; /* interned resource key (struct ks_res.key of some def) */
    json_t *obj;     /* object after the change (for DELETED: last state) */
    json_t *old;     /* object before the change, NULL for ADDED */
};

/* Fault rule filters: "*" matches anything; group "" is the core group. A
 * resource "plural" matches requests without a subresource, "plural/sub"
 * that subresource (as RBAC rules do). */
struct ks_fault_rule {
    char verb[24]; /* "" or "*" = any */
    char resource[128];
    char group[256];
    char ns[64];
    unsigned int code;
    double rate;
    int retry_after; /* seconds, for 429 */
};

/* One endpoint of a Service (services.c). */
struct ks_endpoint {
    char *addr; /* "HOST:PORT" */
    bool ready;
};

/* An endpoint set as published, and from when new connections see it. */
struct ks_epset {
    struct ks_endpoint *eps;
    size_t n;
    long long due_ms; /* monotonic */
};

struct ks_service_map {
    char *ns;
    char *name;
    struct ks_epset *sets; /* in due order; sets[0] is in use once due */
    size_t nsets;
};

struct ks_whclient;

struct ks_server {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    bool stopping;

    /* configuration (read-only after start) */
    char *token;
    char *url;
    char *ca_pem;
    long ready_delay_ms;
    long bookmark_ms;
    size_t history_cap;
    bool verbose;

    /* lock held */
    uint64_t rv;
    struct ks_res **defs;
    size_t ndefs, defs_cap;
    struct ks_res **graveyard;
    size_t ngrave, grave_cap;
    json_t *objects; /* res key -> { "ns/name" -> object } */
    struct ks_event *hist;
    size_t hist_head, hist_len;
    uint64_t hist_floor; /* every event with rv > hist_floor is in hist */
    uint64_t drop_epoch; /* bumped to end all open watches */
    uint32_t next_ip;
    uint32_t next_node_port;
    struct ks_service_map *services; /* --service and /_kubesim/services */
    size_t nservices;
    long propagation_ms; /* --endpoint-propagation-delay */
    uint64_t ep_rng;     /* endpoint choice */

    /* webhook client (whclient.c): its own lock; read-only flags */
    struct ks_whclient *whc;
    bool tracing;         /* --tracing: send traceparent */
    bool skip_idle_check; /* --webhook-skip-idle-check (test hook) */

    /* faults and stats, lock held */
    struct ks_fault_rule *faults;
    size_t nfaults;
    long latency_ms;
    uint64_t rng;
    json_t *stats_writes;   /* "resource.group" -> { verb -> count } */
    json_t *stats_requests; /* array of {verb, resource, ...} */
    uint64_t stats_total;

    /* controllers */
    pthread_t controller;
    bool gc_dirty;          /* run the garbage collector now */
    bool gc_lazy;           /* run it at gc_next_ms (owner references changed) */
    long long gc_next_ms;   /* monotonic */
    json_t *pending_deploy; /* key -> due time (ms, monotonic) */
};

/* s, or "" when NULL. */
static inline const char *ks_nz(const char *s)
{
    return s ? s : "";
}

/* ---- util.c ------------------------------------------------------------ */

/* Serialize like Go's encoding/json (compact, <>& escaped). sort_keys for
 * unstructured objects. Returns malloc'd text or NULL. @ref borrow v. */
char *ks_dump(const json_t *v, bool sort_keys, size_t *ret_len);
/* Current time as RFC 3339 seconds ("2024-01-02T03:04:05Z") into buf[32]. */
void ks_now_rfc3339(char *buf, size_t len);
/* Same with microseconds, for MicroTime fields. */
void ks_now_rfc3339_micro(char *buf, size_t len);
long long ks_mono_ms(void);
void ks_uuid(char *buf, size_t len);
char *ks_base64_encode(const unsigned char *data, size_t len);
/* Decode base64; malloc'd, NUL-terminated; NULL on bad input. */
unsigned char *ks_base64_decode(const char *s, size_t *ret_len);
/* strdup that aborts on ENOMEM (a test tool without memory is done). */
char *ks_strdup(const char *s);
char *ks_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Status bodies (Go field order, trailing newline). @ref steal details. */
char *ks_status_body(int code, const char *status, const char *reason, const char *message,
                     json_t *details, size_t *ret_len);

/* Label selectors and field selectors. */
struct ks_selector;
/* Parse; NULL string means "everything". On error returns -EINVAL and a
 * malloc'd message in *ret_err. */
int ks_selector_parse(const char *s, bool field, struct ks_selector **ret_sel, char **ret_err);
bool ks_selector_match(const struct ks_selector *sel, const json_t *obj);
void ks_selector_free(struct ks_selector *sel);

/* "group/version" or "version" for core. malloc'd. */
char *ks_api_version(const char *group, const char *version);
/* Split "group/version" (or "v1") into parts; malloc'd. */
void ks_split_api_version(const char *av, char **ret_group, char **ret_version);

/* ---- store.c (lock held unless said otherwise) --------------------------- */

int ks_store_init(struct ks_server *ks);
void ks_store_cleanup(struct ks_server *ks);
/* Object map of a resource (created when missing). @ref borrow */
json_t *ks_store_map(struct ks_server *ks, const char *res_key);
/* Stored object or NULL. @ref borrow */
json_t *ks_store_get(struct ks_server *ks, const char *res_key, const char *obj_key);
/* Store obj (fresh, not shared) under a new resourceVersion, record the
 * event. @ref steal obj. Returns the new rv. */
uint64_t ks_store_put(struct ks_server *ks, const struct ks_res *def, const char *obj_key,
                      json_t *obj);
/* Remove, recording DELETED with a new rv. Returns the new rv or 0. */
uint64_t ks_store_remove(struct ks_server *ks, const struct ks_res *def, const char *obj_key);
/* The object map of res_key as it was at resourceVersion rv: a new map
 * holding references to the frozen objects, rebuilt from the current one by
 * undoing the recorded events newer than rv (memory stays bounded by the
 * history). NULL when rv is older than the retained history. @ref new */
json_t *ks_store_snapshot(struct ks_server *ks, const char *res_key, uint64_t rv);
/* Forget history up to now (watches from older versions get 410). */
void ks_store_compact(struct ks_server *ks);
/* "ns/name" or "name" into buf. */
void ks_obj_key(char *buf, size_t len, const char *ns, const char *name);

/* ---- resources.c ---------------------------------------------------------- */

int ks_resources_init(struct ks_server *ks);
/* Lock held. Current definition by group + plural (or kind when by_kind). */
const struct ks_res *ks_res_find(struct ks_server *ks, const char *group, const char *plural);
const struct ks_res *ks_res_find_kind(struct ks_server *ks, const char *group, const char *kind);
const struct ks_version *ks_res_version(const struct ks_res *def, const char *version);
/* Lock held. Publish/replace/remove the definitions of a CRD object. */
int ks_res_register_crd(struct ks_server *ks, const json_t *crd, char **ret_err);
void ks_res_unregister_crd(struct ks_server *ks, const char *crd_name);
void ks_res_free(struct ks_res *def);
/* Discovery documents (lock held). @ref new */
json_t *ks_discovery_api(struct ks_server *ks);
json_t *ks_discovery_apis(struct ks_server *ks);
json_t *ks_discovery_group(struct ks_server *ks, const char *group);
json_t *ks_discovery_resources(struct ks_server *ks, const char *group, const char *version);
json_t *ks_discovery_aggregated(struct ks_server *ks, bool core);
/* OpenAPI v3 root and group-version documents (lock held). @ref new */
json_t *ks_openapi_root(struct ks_server *ks);
json_t *ks_openapi_gv(struct ks_server *ks, const char *group, const char *version);
/* Normalize key order of a typed object (kind, apiVersion, metadata, spec,
 * ..., status) in place; obj must not be shared. */
void ks_typed_order(json_t *obj);

/* ---- patch.c --------------------------------------------------------------- */

/* RFC 7386 merge patch. @ref new result. */
json_t *ks_merge_patch(const json_t *target, const json_t *patch);
/* Strategic merge patch (kubectl's list-merge-by-key cases). @ref new */
json_t *ks_strategic_patch(const json_t *target, const json_t *patch, char **ret_err);
/* RFC 6902 JSON patch. @ref new, NULL with *ret_err on failure. */
json_t *ks_json_patch(const json_t *target, const json_t *patch, char **ret_err);

/* ---- schema.c -------------------------------------------------------------- */

/* Apply structural defaults and prune unknown fields, in place. */
void ks_schema_default(json_t *obj, const json_t *schema);
void ks_schema_prune(json_t *obj, const json_t *schema);
/* Validate; returns a causes array (@ref new, empty when valid). */
json_t *ks_schema_validate(const json_t *obj, const json_t *schema);

/* ---- webhooks.c (called WITHOUT the lock) ----------------------------------- */

/* Convert objects (array, @ref borrow) to apiVersion "to" with the CRD's
 * conversion webhook. *ret_out is a new array in the same order. On
 * failure returns -EIO and the apiserver's error message in *ret_err. */
int ks_convert(struct ks_server *ks, const struct ks_res *def, const json_t *objs, const char *to,
               json_t **ret_out, char **ret_err);
/* Convert one object; @ref new result. */
int ks_convert_one(struct ks_server *ks, const struct ks_res *def, const json_t *obj,
                   const char *to, json_t **ret_out, char **ret_err);

struct ks_admit_req {
    const struct ks_res *def;
    const char *version; /* version of obj/old */
    const char *operation;
    const char *subresource;
    const char *ns;
    const char *name;
    const json_t *obj; /* @ref borrow */
    const json_t *old; /* @ref borrow, may be NULL */
    bool dry_run;
    const char *field_manager;
};

/* Run the matching validating webhooks. 0 = allowed; otherwise -EPERM
 * with a Status body in *ret_body (malloc'd) and its code. Warnings are
 * appended to warnings (array). */
int ks_admit(struct ks_server *ks, const struct ks_admit_req *ar, json_t *warnings, int *ret_code,
             char **ret_body);
/* Run the matching mutating webhooks (in configuration-name order, with
 * one reinvocation pass for IfNeeded ones). 0 = allowed, *ret_obj the
 * mutated object in ar->version (@ref new) or NULL when none changed it;
 * otherwise -EPERM with a Status as ks_admit. */
int ks_admit_mutate(struct ks_server *ks, const struct ks_admit_req *ar, json_t *warnings,
                    json_t **ret_obj, int *ret_code, char **ret_body);

/* ---- table.c ----------------------------------------------------------------- */

enum ks_include { KS_INCLUDE_METADATA, KS_INCLUDE_OBJECT, KS_INCLUDE_NONE };

/* The meta.k8s.io Table version an Accept header asks for ("v1" or
 * "v1beta1"), or NULL when it does not ask for a Table. */
const char *ks_table_accept(const char *accept);
/* includeObject query parameter (NULL: Metadata, the default). */
enum ks_include ks_table_include(const char *query);
/* Age text as the apiserver prints it ("45s", "3m20s", "2d"). malloc'd */
char *ks_human_duration(long long secs);
/* A Table of objects (array of presented objects in "version", @ref
 * borrow); list_md (@ref borrow, copied) becomes its metadata. Without
 * headers, columnDefinitions is null (later watch events). @ref new.
 * Lock not needed; def must stay valid (see the graveyard). */
json_t *ks_table_build(const struct ks_res *def, const char *version, const json_t *objs,
                       const json_t *list_md, const char *table_version, enum ks_include inc,
                       bool headers);

/* ---- controllers.c ----------------------------------------------------------- */

int ks_controllers_start(struct ks_server *ks);
void ks_controllers_stop(struct ks_server *ks);
/* Lock held: a deployment changed (schedule its status). */
void ks_controllers_deployment_changed(struct ks_server *ks, const char *obj_key);

/* ---- faults.c ------------------------------------------------------------------ */

/* A request, as faults and stats see it. */
struct ks_req_info {
    const char *verb;
    const char *group; /* "" for core */
    const char *resource;
    const char *ns;          /* NULL when cluster-scoped */
    const char *name;        /* NULL for collections */
    const char *subresource; /* NULL for the main resource */
    const char *user_agent;  /* NULL when the client sent none */
};

/* Lock held. Decide a fault for a request: 0 = none, else the HTTP code. */
unsigned int ks_faults_pick(struct ks_server *ks, const struct ks_req_info *ri,
                            int *ret_retry_after);
/* Parse a --fault VERB:CODE:RATE[:RETRY][:resource=R][:group=G][:namespace=N]
 * flag. */
int ks_faults_add_flag(struct ks_server *ks, const char *spec);
/* Apply a JSON fault document (POST /_kubesim/faults). Lock held. */
int ks_faults_apply(struct ks_server *ks, const json_t *doc, char **ret_err);
json_t *ks_faults_describe(struct ks_server *ks);
/* Lock held. Record a request. */
void ks_stats_record(struct ks_server *ks, const struct ks_req_info *ri);
/* Lock held. The statistics; with ua_prefix, only the requests whose
 * User-Agent starts with it (counts and writes too). @ref new */
json_t *ks_stats_json(struct ks_server *ks, const char *ua_prefix);
void ks_stats_reset(struct ks_server *ks);
double ks_rand01(struct ks_server *ks);

/* ---- services.c ---------------------------------------------------------------- */

/* Where webhook clientConfig.service references go: NAMESPACE/NAME -> a
 * set of HOST:PORT endpoints, each ready or not. Lock held (or before any
 * thread starts) unless said otherwise. */

/* One ready endpoint, at once (/_kubesim/services). -EINVAL with a message
 * in *ret_err for a bad namespace, name or target. */
int ks_services_set(struct ks_server *ks, const char *ns, const char *name, const char *target,
                    char **ret_err);
/* Replace the endpoint set from a /_kubesim/endpoints document (@ref
 * borrow); new connections see it after ks->propagation_ms. -EINVAL with
 * a message in *ret_err. */
int ks_services_set_endpoints(struct ks_server *ks, const json_t *doc, char **ret_err);
/* Remove; -ENOENT when there is no such Service. */
int ks_services_remove(struct ks_server *ks, const char *ns, const char *name);
/* Parse a --service NS/NAME=HOST:PORT[,HOST:PORT...] flag (before threads
 * start): all ready, in effect at once. */
int ks_services_add_flag(struct ks_server *ks, const char *spec);
/* {"services":[{"namespace","name","target","endpoints","active"}]}
 * @ref new */
json_t *ks_services_describe(struct ks_server *ks);
/* Takes the lock: where a new connection to the Service goes, a random
 * ready endpoint of the set in effect (malloc'd into *ret_addr). -ENOENT
 * when there is no such Service, -EHOSTUNREACH when it has no ready
 * endpoint. */
int ks_services_pick(struct ks_server *ks, const char *ns, const char *name, char **ret_addr);
/* At exit. */
void ks_services_free(struct ks_server *ks);

/* ---- whclient.c: the apiserver's webhook transport ------------------------------ */

/* One webhook POST to a Service. */
struct ks_wh_call {
    const char *ns; /* Service */
    const char *name;
    long port;             /* Service port */
    const char *path;      /* path and query, "/validate?timeout=10s" */
    const char *ca_bundle; /* clientConfig.caBundle (base64 PEM) or NULL */
    const char *payload;
    long timeout_ms; /* the whole call, retries included */
};

/* Thread-safety: all functions may be called from any thread. */
/* Start the client (and its idle reaper thread); idle_ms is the idle
 * connection timeout. */
int ks_whclient_new(struct ks_server *ks, long idle_ms);
/* At exit, after the HTTP server stopped: closes pooled connections. */
void ks_whclient_free(struct ks_server *ks);
/* POST c->payload the way the apiserver's webhook client does (connection
 * pool per Service, Go's transport retry rule, client-go's Retry-After
 * retries; README "kubesim: webhook Services with endpoints"). 0 with the
 * 2xx body in *ret_body (malloc'd); otherwise -EIO and the client error
 * text in *ret_err ("Post \"URL\": ..."). */
int ks_whclient_post(struct ks_server *ks, const struct ks_wh_call *c, char **ret_body,
                     char **ret_err);
/* Close the Service's idle pooled connections (/_kubesim/services
 * re-points a Service at once; connections in use finish first). */
void ks_whclient_flush(struct ks_server *ks, const char *ns, const char *name);
/* The webhook statistics for /_kubesim/stats. @ref new */
json_t *ks_whclient_stats(struct ks_server *ks);
void ks_whclient_stats_reset(struct ks_server *ks);
/* The trace of the API request this thread serves (--tracing): the trace
 * id of a valid incoming traceparent header (may be NULL), else a fresh
 * one. ks_trace_end forgets it; calls outside a request get a fresh trace
 * each. */
void ks_trace_begin(struct ks_server *ks, const char *incoming);
void ks_trace_end(void);

/* ---- partial.c --------------------------------------------------------------------- */

/* What an Accept header asks for: a PartialObjectMetadata (object), a
 * PartialObjectMetadataList (list), or neither (plain JSON). */
enum ks_partial { KS_PARTIAL_NONE, KS_PARTIAL_OBJECT, KS_PARTIAL_LIST };

/* Walk the Accept entries in order: the first one kubesim can serve wins
 * (a JSON PartialObjectMetadata[List] of meta.k8s.io v1 or v1beta1, or
 * plain JSON); protobuf and unknown entries are skipped. *ret_version is
 * "v1" or "v1beta1" (static) for a partial answer. */
enum ks_partial ks_partial_accept(const char *accept, const char **ret_version);
/* The PartialObjectMetadata of a presented object: kind, apiVersion
 * meta.k8s.io/VERSION and the whole metadata in ObjectMeta field order
 * (label and annotation keys sorted). @ref new */
json_t *ks_partial_object(const json_t *obj, const char *version);
/* A PartialObjectMetadataList of presented objects (@ref borrow; items is
 * null when empty, as Go encodes the nil slice), list metadata from rv,
 * continue token (NULL or "": none) and remaining count (0: none). @ref new */
json_t *ks_partial_list(const json_t *objs, const char *version, const char *rv, const char *cont,
                        long remaining);
/* The 406 message when the kind asked for does not fit the request
 * ("you requested PartialObjectMetadata, but the requested object is a
 * list (*v1.ConfigMapList)"). malloc'd */
char *ks_partial_mismatch(const struct ks_res *def, enum ks_partial want);

/* ---- certs.c ------------------------------------------------------------------- */

/* Make a CA and a serving certificate for 127.0.0.1/localhost (PEM). */
int ks_certs_generate(char **ret_ca_pem, char **ret_cert_pem, char **ret_key_pem);
int ks_write_kubeconfig(const char *path, const char *url, const char *ca_pem, const char *token);

/* ---- http.c -------------------------------------------------------------------- */

int ks_http_start(struct ks_server *ks, const char *listen, const char *cert_pem,
                  const char *key_pem, void **ret_daemon);
void ks_http_stop(void *daemon);

/* ---- handlers.c / watch.c -------------------------------------------------------- */

struct MHD_Connection;
struct MHD_Response;

/* What a handler answers. */
struct ks_reply {
    unsigned int code;
    char *body; /* malloc'd */
    size_t len;
    const char *content_type;
    int retry_after;             /* > 0: Retry-After header */
    json_t *warnings;            /* array of strings or NULL */
    struct MHD_Response *stream; /* watch: body produced by a callback */
};

/* A parsed API request. */
struct ks_api_req {
    struct ks_server *ks;
    struct MHD_Connection *conn;
    const char *method;
    const char *verb; /* get list watch create update patch delete deletecollection */
    char *group;
    char *version;
    char *plural;
    char *ns;
    char *name;
    char *sub;
    const char *body;
    size_t body_len;
    const char *content_type;
};

void ks_reply_status(struct ks_reply *r, int code, const char *reason, const char *message,
                     json_t *details);
void ks_reply_json(struct ks_reply *r, unsigned int code, const json_t *v, bool sort_keys);
void ks_handle_api(struct ks_api_req *q, struct ks_reply *r);
void ks_watch_start(struct ks_api_req *q, const struct ks_res *def, struct ks_reply *r);
/* Query parameter or NULL. */
const char *ks_query(struct ks_api_req *q, const char *name);
/* A boolean query parameter as the apiserver reads it (apimachinery's
 * runtime.Convert_Slice_string_To_bool): absent, "false" or "0" (any case)
 * are false; anything else, the empty string included, is true. */
bool ks_param_bool(const char *v);
bool ks_query_bool(struct ks_api_req *q, const char *name);
/* An integer query parameter (strconv.ParseInt): 0 with *ret set (absent
 * or empty: dflt), or -EINVAL with *ret_msg the apiserver's 400 message
 * (malloc'd). */
int ks_query_int(struct ks_api_req *q, const char *name, long long dflt, long long *ret,
                 char **ret_msg);
/* Output form of a stored object for version "version": kind/apiVersion
 * set, typed order. obj must be fresh (not shared). */
void ks_present(const struct ks_res *def, const char *version, json_t *obj);
/* Qualified resource name for messages ("deployments.apps"). malloc'd. */
char *ks_qualified(const struct ks_res *def);
/* Lock held: remove an object now (a CRD takes its resources along). */
void ks_remove_object(struct ks_server *ks, const struct ks_res *def, const char *key);
/* Details object for a Status. @ref new */
json_t *ks_details(const struct ks_res *def, const char *name);

#endif /* KUBESIM_H */
