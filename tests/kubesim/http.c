/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim HTTP front: libmicrohttpd with its own (GnuTLS) TLS, one thread
 * per connection so a watch can block. Authenticates the bearer token
 * (401 Status otherwise), applies injected faults and latency, records
 * request statistics, routes discovery (/api, /apis, /apis/G, /apis/G/V,
 * aggregated discovery on request, /version), resource paths
 * (/api/v1/..., /apis/G/V/..., namespaced or not, subresources) and the
 * test endpoints /_kubesim/stats, /_kubesim/faults, /_kubesim/services and
 * /_kubesim/endpoints, /_kubesim/token (bearer token rotation) and
 * /_kubesim/storage. Unknown non-API paths get Go's text/plain "404 page
 * not found". With --tracing, each request gets a trace (ks_trace_begin)
 * that its webhook calls carry in traceparent.
 */
#include "kubesim.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define KS_BODY_MAX (64u * 1024 * 1024) /* what kubesim buffers at all */
#define KS_WRITE_MAX (3u * 1024 * 1024) /* the apiserver's MaxRequestBodyBytes */

struct conn_ctx {
    char *body;
    size_t len, cap;
    bool too_big;
    char received[40]; /* requestReceivedTimestamp (audit) */
};

static const char version_doc[] = "{\n"
                                  "  \"major\": \"1\",\n"
                                  "  \"minor\": \"32\",\n"
                                  "  \"gitVersion\": \"" KS_GIT_VERSION "\",\n"
                                  "  \"gitCommit\": \"32cc146f75aad04beaaa245a7157eb35063a9f99\",\n"
                                  "  \"gitTreeState\": \"clean\",\n"
                                  "  \"buildDate\": \"2025-03-11T19:52:21Z\",\n"
                                  "  \"goVersion\": \"go1.23.6\",\n"
                                  "  \"compiler\": \"gc\",\n"
                                  "  \"platform\": \"linux/amd64\"\n"
                                  "}";

static void reply_text(struct ks_reply *r, unsigned int code, const char *text)
{
    free(r->body);
    r->code = code;
    r->body = ks_strdup(text);
    r->len = strlen(text);
    r->content_type = "text/plain; charset=utf-8";
}

/* UTF-8 runes in s (JSON strings are valid UTF-8) */
static size_t runes(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* s cut to its first max runes, as a new JSON string */
static json_t *cut_runes(const char *s, size_t max)
{
    size_t b = 0, n = 0;
    while (s[b] && !(n == max && ((unsigned char)s[b] & 0xC0) != 0x80)) {
        n += ((unsigned char)s[b] & 0xC0) != 0x80;
        b++;
    }
    return json_stringn(s, b);
}

/*
 * The warnings a reply's headers carry, as the apiserver's recorder
 * (endpoints/filters/warning.go) keeps them: each text once, in order;
 * once they would pass 4096 runes in all, every warning so far and after
 * is cut to 256 runes, and none is added past 4096 again. @ref new
 */
static json_t *recorded_warnings(const json_t *texts)
{
    enum { TOTAL = 4 * 1024, ITEM = 256 };
    json_t *out = json_array(), *seen = json_object(), *ordered = json_array();
    size_t written = 0, i;
    bool truncating = false;
    json_t *w;
    json_array_foreach(texts, i, w)
    {
        const char *t = json_string_value(w);
        if (!t || !*t)
            continue;
        if (written >= TOTAL && truncating)
            break;
        if (json_object_get(seen, t))
            continue;
        json_object_set_new(seen, t, json_true());
        json_array_append(ordered, w);
        size_t len = runes(t);
        if (truncating && len > ITEM) {
            json_array_append_new(out, cut_runes(t, ITEM));
            written += ITEM;
            continue;
        }
        if (written + len <= TOTAL || truncating) {
            json_array_append(out, w);
            written += len;
            continue;
        }
        truncating = true;
        written = 0;
        json_array_clear(out);
        size_t j;
        json_t *o;
        json_array_foreach(ordered, j, o)
        {
            size_t ol = runes(json_string_value(o));
            json_array_append_new(out, cut_runes(json_string_value(o), ITEM));
            written += ol > ITEM ? ITEM : ol;
        }
    }
    json_decref(seen);
    json_decref(ordered);
    return out;
}

static enum MHD_Result send_reply(struct MHD_Connection *conn, struct ks_reply *r)
{
    struct MHD_Response *resp = r->stream;
    if (!resp) {
        resp = MHD_create_response_from_buffer(r->len, r->body ? r->body : (char *)"",
                                               r->body ? MHD_RESPMEM_MUST_FREE
                                                       : MHD_RESPMEM_PERSISTENT);
        r->body = NULL;
    }
    if (!resp)
        return MHD_NO;
    if (!*r->audit_id)
        ks_uuid(r->audit_id, sizeof(r->audit_id));
    MHD_add_response_header(resp, "Audit-Id", r->audit_id);
    MHD_add_response_header(resp, "Cache-Control", "no-cache, private");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            r->content_type ? r->content_type : "application/json");
    if (r->content_type && strncmp(r->content_type, "text/plain", 10) == 0)
        MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    if (r->retry_after > 0) {
        char ra[16];
        snprintf(ra, sizeof(ra), "%d", r->retry_after);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, ra);
    }
    json_t *warnings = recorded_warnings(r->warnings);
    size_t i;
    json_t *w;
    json_array_foreach(warnings, i, w)
    {
        /* apimachinery/pkg/util/net/http.go NewWarningHeader: the text is
         * quoted as Go's strconv.Quote does (\" and \\ escaped). */
        const char *t = json_string_value(w);
        size_t n = strlen(t);
        char *q = malloc(2 * n + 16);
        if (!q)
            abort();
        size_t o = (size_t)snprintf(q, 16, "299 - \"");
        for (size_t j = 0; j < n; j++) {
            if (t[j] == '"' || t[j] == '\\')
                q[o++] = '\\';
            q[o++] = t[j];
        }
        q[o++] = '"';
        q[o] = '\0';
        MHD_add_response_header(resp, "Warning", q);
        free(q);
    }
    json_decref(warnings);
    enum MHD_Result ret = MHD_queue_response(conn, r->code ? r->code : 500, resp);
    MHD_destroy_response(resp);
    r->stream = NULL;
    return ret;
}

/* Split "/a/b/c" into at most max segments; returns count or -1. */
static int split_path(const char *url, char **segs, int max)
{
    int n = 0;
    const char *p = url;
    while (*p == '/')
        p++;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (n == max)
            return -1;
        segs[n] = strndup(p, len);
        if (!segs[n])
            abort();
        n++;
        p += len;
        while (*p == '/')
            p++;
    }
    return n;
}

/* /_kubesim/services: GET lists, POST adds or replaces, DELETE removes. */
static void services_endpoint(struct ks_server *ks, const char *method, const struct conn_ctx *ctx,
                              struct ks_reply *r)
{
    bool post = strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0;
    bool del = strcmp(method, "DELETE") == 0;
    if (!post && !del && strcmp(method, "GET") != 0) {
        ks_reply_status(r, 405, "MethodNotAllowed", "use GET, POST or DELETE", NULL);
        return;
    }
    json_t *doc = NULL;
    if (post || del) {
        doc = ctx->len ? json_loadb(ctx->body, ctx->len, 0, NULL) : NULL;
        if (!json_is_object(doc)) {
            json_decref(doc);
            ks_reply_status(r, 400, "BadRequest",
                            "body must be a JSON object {\"namespace\",\"name\",\"target\"}", NULL);
            return;
        }
    }
    const char *ns = json_string_value(json_object_get(doc, "namespace"));
    const char *name = json_string_value(json_object_get(doc, "name"));
    const char *target = json_string_value(json_object_get(doc, "target"));
    char *err = NULL;
    int rc = 0;
    pthread_mutex_lock(&ks->lock);
    if (post)
        rc = ks_services_set(ks, ns, name, target, &err);
    else if (del)
        rc = ks_services_remove(ks, ns, name);
    json_t *list = rc == 0 ? ks_services_describe(ks) : NULL;
    pthread_mutex_unlock(&ks->lock);
    if (rc == 0 && (post || del))
        ks_whclient_flush(ks, ns, name);
    if (rc == -ENOENT) {
        char *msg = ks_printf("no service mapping for %s/%s", ks_nz(ns), ks_nz(name));
        ks_reply_status(r, 404, "NotFound", msg, NULL);
        free(msg);
    } else if (rc != 0) {
        ks_reply_status(r, 400, "BadRequest", err ? err : "invalid service mapping", NULL);
    } else {
        ks_reply_json(r, 200, list, false);
    }
    free(err);
    json_decref(list);
    json_decref(doc);
}

/* /_kubesim/endpoints: POST replaces a Service's endpoint set, GET lists. */
static void endpoints_endpoint(struct ks_server *ks, const char *method, const struct conn_ctx *ctx,
                               struct ks_reply *r)
{
    bool post = strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0;
    if (!post && strcmp(method, "GET") != 0) {
        ks_reply_status(r, 405, "MethodNotAllowed", "use GET or POST", NULL);
        return;
    }
    json_t *doc = post && ctx->len ? json_loadb(ctx->body, ctx->len, 0, NULL) : NULL;
    char *err = NULL;
    int rc = 0;
    pthread_mutex_lock(&ks->lock);
    if (post)
        rc = json_is_object(doc) ? ks_services_set_endpoints(ks, doc, &err) : -EINVAL;
    json_t *list = rc == 0 ? ks_services_describe(ks) : NULL;
    pthread_mutex_unlock(&ks->lock);
    if (rc != 0)
        ks_reply_status(r, 400, "BadRequest",
                        err ? err
                            : "body must be {\"service\":\"namespace/name\",\"endpoints\":"
                              "[{\"address\":\"HOST:PORT\",\"ready\":true}]}",
                        NULL);
    else
        ks_reply_json(r, 200, list, false);
    free(err);
    json_decref(list);
    json_decref(doc);
}

static void kubesim_endpoint(struct ks_server *ks, struct MHD_Connection *conn, const char *method,
                             const char *what, const struct conn_ctx *ctx, struct ks_reply *r)
{
    if (strcmp(what, "stats") == 0) {
        pthread_mutex_lock(&ks->lock);
        if (strcmp(method, "DELETE") == 0) {
            ks_stats_reset(ks);
            ks_whclient_stats_reset(ks);
            pthread_mutex_unlock(&ks->lock);
            json_t *empty = json_object();
            ks_reply_json(r, 200, empty, false);
            json_decref(empty);
            return;
        }
        const char *ua = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "userAgent");
        json_t *doc = ks_stats_json(ks, ua);
        json_object_set_new(doc, "webhooks", ks_whclient_stats(ks));
        json_object_set_new(doc, "cel", ks_cel_stats());
        ks_reply_json(r, 200, doc, false);
        pthread_mutex_unlock(&ks->lock);
        json_decref(doc);
        return;
    }
    if (strcmp(what, "services") == 0) {
        services_endpoint(ks, method, ctx, r);
        return;
    }
    if (strcmp(what, "endpoints") == 0) {
        endpoints_endpoint(ks, method, ctx, r);
        return;
    }
    if (strcmp(what, "token") == 0 && strcmp(method, "POST") == 0) {
        /* Token rotation: {"token": "new"}; from now on the old token gets
         * 401 Unauthorized, as a revoked or expired one does. */
        json_t *doc = ctx->len ? json_loadb(ctx->body, ctx->len, 0, NULL) : NULL;
        const char *tok = json_string_value(json_object_get(doc, "token"));
        if (!tok || !*tok || tok[strcspn(tok, "\r\n ")]) {
            json_decref(doc);
            ks_reply_status(r, 400, "BadRequest", "body must be {\"token\": \"...\"}", NULL);
            return;
        }
        char *nt = ks_strdup(tok);
        json_decref(doc);
        pthread_mutex_lock(&ks->lock);
        char *old = ks->token;
        ks->token = nt;
        pthread_mutex_unlock(&ks->lock);
        free(old);
        json_t *ok = json_object();
        ks_reply_json(r, 200, ok, false);
        json_decref(ok);
        return;
    }
    if (strcmp(what, "storage") == 0) {
        /* ?resource=plural.group: the version each object is stored in */
        const char *res = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "resource");
        pthread_mutex_lock(&ks->lock);
        json_t *doc = res ? ks_storage_describe(ks, res) : NULL;
        pthread_mutex_unlock(&ks->lock);
        if (doc)
            ks_reply_json(r, 200, doc, false);
        else
            ks_reply_status(r, 404, "NotFound", "no such resource (?resource=plural.group)", NULL);
        json_decref(doc);
        return;
    }
    if (strcmp(what, "faults") == 0) {
        json_t *doc = NULL;
        char *err = NULL;
        if (strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
            doc = ctx->len ? json_loadb(ctx->body, ctx->len, 0, NULL) : NULL;
            pthread_mutex_lock(&ks->lock);
            int rc = ks_faults_apply(ks, doc, &err);
            pthread_mutex_unlock(&ks->lock);
            json_decref(doc);
            if (rc != 0) {
                ks_reply_status(r, 400, "BadRequest", err, NULL);
                free(err);
                return;
            }
        }
        pthread_mutex_lock(&ks->lock);
        doc = ks_faults_describe(ks);
        pthread_mutex_unlock(&ks->lock);
        ks_reply_json(r, 200, doc, false);
        json_decref(doc);
        return;
    }
    reply_text(r, 404, "404 page not found\n");
}

static const char *verb_for(const char *method, bool named, bool watch)
{
    if (strcmp(method, "GET") == 0)
        return watch ? "watch" : (named ? "get" : "list");
    if (strcmp(method, "POST") == 0)
        return named ? NULL : "create";
    if (strcmp(method, "PUT") == 0)
        return named ? "update" : NULL;
    if (strcmp(method, "PATCH") == 0)
        return named ? "patch" : NULL;
    if (strcmp(method, "DELETE") == 0)
        return named ? "delete" : "deletecollection";
    return NULL;
}

static void inject_fault(struct ks_server *ks, unsigned int code, int retry, struct ks_reply *r)
{
    if (code == 429) {
        reply_text(r, 429, "Too many requests, please try again later.\n");
        r->retry_after = retry > 0 ? retry : 1;
        return;
    }
    (void)ks;
    if (code == 503) {
        ks_reply_status(r, 503, "ServiceUnavailable", "injected fault: service unavailable",
                        retry > 0 ? json_pack("{s:i}", "retryAfterSeconds", retry) : NULL);
        r->retry_after = retry;
        return;
    }
    if (code == 500) {
        ks_reply_status(r, 500, "InternalError", "Internal error occurred: injected fault",
                        json_pack("{s:[{s:s}]}", "causes", "message", "injected fault"));
        return;
    }
    char *msg = ks_printf("injected fault %u", code);
    ks_reply_status(r, (int)code, NULL, msg, NULL);
    free(msg);
    r->retry_after = retry;
}

/* /openapi/v2's media type for an Accept header (kube-openapi
 * handler.go, clauses in order, q-values not weighed): 0 JSON, 1 protobuf
 * (com.github.proto-openapi.spec.v2.v1.0+protobuf or its deprecated
 * @v1.0 spelling), -1 none. */
static int openapi_v2_form(const char *accept)
{
    if (!accept || !*accept)
        return 0;
    const char *p = accept;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        size_t n = strcspn(p, ",;");
        while (n && p[n - 1] == ' ')
            n--;
        if ((n == 3 && strncmp(p, "*/*", 3) == 0) ||
            (n == 13 && strncmp(p, "application/*", 13) == 0) ||
            (n == 16 && strncmp(p, "application/json", 16) == 0))
            return 0;
        static const char pb1[] = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
        static const char pb2[] = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
        if ((n == sizeof(pb1) - 1 && strncmp(p, pb1, n) == 0) ||
            (n == sizeof(pb2) - 1 && strncmp(p, pb2, n) == 0))
            return 1;
        p += strcspn(p, ",");
    }
    return -1;
}

/*
 * /healthz, /livez and /readyz as the generic apiserver installs them
 * (apiserver/pkg/server/healthz InstallPathHandlerWithHealthyFunc,
 * handleRootHealth, adaptCheckToHandler): the root answers "ok", or with
 * ?verbose one "[+]NAME ok" line per check and "NAME check passed"; each
 * ?exclude=NAME is listed as "[+]NAME excluded: ok", and names that match
 * no check end in a "warn: some health checks cannot be excluded" line;
 * /readyz/CHECK answers "ok" for one check. The checks are a 1.32
 * kube-apiserver's (its post-start hooks in their order, from the output
 * of clusters of that time); kubesim's store and controllers are ready
 * before it listens, so every check passes.
 */
static const char *const health_hooks[] = {
    "poststarthook/start-apiserver-admission-initializer",
    "poststarthook/generic-apiserver-start-informers",
    "poststarthook/priority-and-fairness-config-consumer",
    "poststarthook/priority-and-fairness-filter",
    "poststarthook/storage-object-count-tracker-hook",
    "poststarthook/start-apiextensions-informers",
    "poststarthook/start-apiextensions-controllers",
    "poststarthook/crd-informer-synced",
    "poststarthook/start-service-ip-repair-controllers",
    "poststarthook/rbac/bootstrap-roles",
    "poststarthook/scheduling/bootstrap-system-priority-classes",
    "poststarthook/priority-and-fairness-config-producer",
    "poststarthook/start-system-namespaces-controller",
    "poststarthook/bootstrap-controller",
    "poststarthook/start-cluster-authentication-info-controller",
    "poststarthook/start-kube-apiserver-identity-lease-controller",
    "poststarthook/start-kube-apiserver-identity-lease-garbage-collector",
    "poststarthook/start-legacy-token-tracking-controller",
    "poststarthook/aggregator-reload-proxy-client-cert",
    "poststarthook/start-kube-aggregator-informers",
    "poststarthook/apiservice-status-local-available-controller",
    "poststarthook/apiservice-status-remote-available-controller",
    "poststarthook/apiservice-registration-controller",
    "poststarthook/apiservice-discovery-controller",
    "poststarthook/kube-apiserver-autoregistration",
    "autoregister-completion",
    "poststarthook/apiservice-openapi-controller",
    "poststarthook/apiservice-openapiv3-controller",
};

/* The checks of one endpoint, in order, into out (room for 40). */
static size_t health_checks(bool readyz, const char **out)
{
    size_t n = 0;
    out[n++] = "ping";
    out[n++] = "log";
    out[n++] = "etcd";
    if (readyz) {
        out[n++] = "etcd-readiness";
        out[n++] = "informer-sync";
    }
    for (size_t i = 0; i < sizeof(health_hooks) / sizeof(health_hooks[0]); i++)
        out[n++] = health_hooks[i];
    if (readyz)
        out[n++] = "shutdown";
    return n;
}

struct health_query {
    bool verbose;
    json_t *exclude; /* name -> true */
};

static enum MHD_Result health_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
    (void)kind;
    struct health_query *q = cls;
    if (strcmp(key, "verbose") == 0)
        q->verbose = true;
    else if (strcmp(key, "exclude") == 0)
        json_object_set_new(q->exclude, value ? value : "", json_true());
    return MHD_YES;
}

/* segs[0] is healthz, livez or readyz; false: not a health path */
static bool health_endpoint(struct MHD_Connection *conn, char **segs, int n, struct ks_reply *r)
{
    const char *checks[40];
    size_t nchecks = health_checks(strcmp(segs[0], "readyz") == 0, checks);
    if (n > 1) {
        /* /readyz/poststarthook/rbac/bootstrap-roles: one check */
        json_t *parts = json_array();
        for (int i = 1; i < n; i++)
            json_array_append_new(parts, json_string(segs[i]));
        char *name = ks_join(parts, "", "/", "");
        json_decref(parts);
        bool found = false;
        for (size_t i = 0; i < nchecks && !found; i++)
            found = strcmp(checks[i], name) == 0;
        free(name);
        if (found)
            reply_text(r, 200, "ok");
        return found;
    }
    struct health_query q = {.exclude = json_object()};
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, health_arg, &q);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        abort();
    for (size_t i = 0; i < nchecks; i++) {
        bool excluded = json_object_get(q.exclude, checks[i]) != NULL;
        if (excluded)
            json_object_del(q.exclude, checks[i]);
        fprintf(out, "[+]%s %sok\n", checks[i], excluded ? "excluded: " : "");
    }
    if (json_object_size(q.exclude)) {
        /* formatQuoted(sets.String.List()...): sorted, each %q, joined by "," */
        size_t nk;
        const char **keys = ks_sorted_keys(q.exclude, &nk);
        json_t *names = json_array();
        for (size_t i = 0; i < nk; i++)
            json_array_append_new(names, json_string(keys[i]));
        free(keys);
        char *list = ks_go_join(names, "", ",", "");
        fprintf(out, "warn: some health checks cannot be excluded: no matches for %s\n", list);
        free(list);
        json_decref(names);
    }
    json_decref(q.exclude);
    if (q.verbose)
        fprintf(out, "%s check passed\n", segs[0]);
    fclose(out);
    reply_text(r, 200, q.verbose ? text : "ok");
    free(text);
    return true;
}

static void route(struct ks_server *ks, struct MHD_Connection *conn, const char *method,
                  const char *url, struct conn_ctx *ctx, struct ks_reply *r)
{
    char *segs[12] = {0};
    int n = split_path(url, segs, 12);
    struct ks_api_req q = {0};
    const char *accept = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept");
    bool aggregated = accept && strstr(accept, "as=APIGroupDiscoveryList");
    json_t *doc = NULL;
    int rest = 0;
    const struct ks_user *user = NULL;
    struct ks_user *acting = NULL; /* Impersonate-User: who the request acts as */

    if (n < 0) {
        reply_text(r, 404, "404 page not found\n");
        goto out;
    }
    if (n >= 1 &&
        (strcmp(segs[0], "healthz") == 0 || strcmp(segs[0], "livez") == 0 ||
         strcmp(segs[0], "readyz") == 0) &&
        health_endpoint(conn, segs, n, r))
        goto out;
    if (n == 1 && strcmp(segs[0], "version") == 0) {
        reply_text(r, 200, version_doc);
        r->content_type = "application/json";
        goto out;
    }
    user = ks_authenticate(ks, MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization"));
    if (!user) {
        ks_reply_status(r, 401, "Unauthorized", "Unauthorized", NULL);
        goto out;
    }
    if (n == 2 && strcmp(segs[0], "_kubesim") == 0) {
        kubesim_endpoint(ks, conn, method, segs[1], ctx, r);
        user = NULL; /* kubesim's own endpoints are not audited */
        goto out;
    }
    if (ks_impersonate(ks, conn, user, url, &acting, r) < 0)
        goto out;
    /* RequestInfo: /api/V/... and /apis/G/V/... are resource requests
     * (authorized once parsed, below); the rest by path */
    if (!(n >= 3 && (strcmp(segs[0], "api") == 0 || (strcmp(segs[0], "apis") == 0 && n >= 4))) &&
        ks_authorize_path(ks, acting ? acting : user, method, url, r) < 0)
        goto out;
    if (n == 2 && strcmp(segs[0], "openapi") == 0 && strcmp(segs[1], "v2") == 0) {
        /* kube-openapi's handler: the first Accept clause that names JSON
         * or gnostic's protobuf (kubectl's client-side validation) wins;
         * none: 406 without a body */
        int form = openapi_v2_form(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept"));
        if (form < 0) {
            reply_text(r, 406, "");
            goto out;
        }
        bool pb = form == 1;
        pthread_mutex_lock(&ks->lock);
        doc = ks_openapi_v2(ks);
        pthread_mutex_unlock(&ks->lock);
        if (pb) {
            unsigned char *buf = NULL;
            size_t len = 0;
            ks_openapi_v2_pb(doc, &buf, &len);
            free(r->body);
            r->body = (char *)buf;
            r->len = len;
            r->code = 200;
            r->content_type = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
        } else {
            ks_reply_json(r, 200, doc, false);
        }
        goto out;
    }
    if (n >= 2 && strcmp(segs[0], "openapi") == 0 && strcmp(segs[1], "v3") == 0) {
        pthread_mutex_lock(&ks->lock);
        if (n == 2)
            doc = ks_openapi_root(ks);
        else if (n == 4 && strcmp(segs[2], "api") == 0)
            doc = ks_openapi_gv(ks, "", segs[3]);
        else if (n == 5 && strcmp(segs[2], "apis") == 0)
            doc = ks_openapi_gv(ks, segs[3], segs[4]);
        pthread_mutex_unlock(&ks->lock);
        if (doc)
            ks_reply_json(r, 200, doc, false);
        else
            reply_text(r, 404, "404 page not found\n");
        goto out;
    }
    if (n >= 1 && strcmp(segs[0], "api") == 0) {
        if (n == 1) {
            pthread_mutex_lock(&ks->lock);
            doc = aggregated ? ks_discovery_aggregated(ks, true) : ks_discovery_api(ks);
            pthread_mutex_unlock(&ks->lock);
            ks_reply_json(r, 200, doc, false);
            if (aggregated)
                r->content_type = "application/json;g=apidiscovery.k8s.io;v=v2;"
                                  "as=APIGroupDiscoveryList";
            goto out;
        }
        if (strcmp(segs[1], "v1") != 0) {
            reply_text(r, 404, "404 page not found\n");
            goto out;
        }
        q.group = ks_strdup("");
        q.version = ks_strdup("v1");
        rest = 2;
    } else if (n >= 1 && strcmp(segs[0], "apis") == 0) {
        if (n == 1) {
            pthread_mutex_lock(&ks->lock);
            doc = aggregated ? ks_discovery_aggregated(ks, false) : ks_discovery_apis(ks);
            pthread_mutex_unlock(&ks->lock);
            ks_reply_json(r, 200, doc, false);
            if (aggregated)
                r->content_type = "application/json;g=apidiscovery.k8s.io;v=v2;"
                                  "as=APIGroupDiscoveryList";
            goto out;
        }
        if (n == 2) {
            pthread_mutex_lock(&ks->lock);
            doc = ks_discovery_group(ks, segs[1]);
            pthread_mutex_unlock(&ks->lock);
            if (doc)
                ks_reply_json(r, 200, doc, false);
            else
                reply_text(r, 404, "404 page not found\n");
            goto out;
        }
        q.group = ks_strdup(segs[1]);
        q.version = ks_strdup(segs[2]);
        rest = 3;
    } else {
        reply_text(r, 404, "404 page not found\n");
        goto out;
    }
    if (n == rest) {
        pthread_mutex_lock(&ks->lock);
        doc = ks_discovery_resources(ks, q.group, q.version);
        pthread_mutex_unlock(&ks->lock);
        if (doc)
            ks_reply_json(r, 200, doc, false);
        else
            reply_text(r, 404, "404 page not found\n");
        goto out;
    }
    int left = n - rest;
    char **s = segs + rest;
    if (left >= 3 && strcmp(s[0], "namespaces") == 0 &&
        !(left == 3 && (strcmp(s[2], "status") == 0 || strcmp(s[2], "finalize") == 0))) {
        q.ns = ks_strdup(s[1]);
        s += 2;
        left -= 2;
    }
    if (left > 3) {
        ks_reply_status(r, 404, "NotFound", "the server could not find the requested resource",
                        json_object());
        goto out;
    }
    q.plural = ks_strdup(s[0]);
    if (left >= 2)
        q.name = ks_strdup(s[1]);
    if (left == 3)
        q.sub = ks_strdup(s[2]);
    /* watch=true, True, 1, t, ... as the apiserver's request info reads it */
    bool watch = ks_param_bool(MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "watch"));
    q.verb = verb_for(method, q.name != NULL, watch);
    if (!q.verb) {
        char *msg = ks_printf("%s is not supported on resources of kind \"%s\"", method, q.plural);
        ks_reply_status(r, 405, "MethodNotAllowed", msg, NULL);
        free(msg);
        goto out;
    }
    q.ks = ks;
    q.user = acting ? acting : user;
    q.conn = conn;
    q.method = method;
    q.body = ctx->body;
    q.body_len = ctx->len;
    q.content_type = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");

    if (ks_authorize_api(&q, r) < 0)
        goto out;
    int retry = 0;
    struct ks_req_info ri = {
        .verb = q.verb,
        .group = q.group,
        .resource = q.plural,
        .ns = q.ns,
        .name = q.name,
        .subresource = q.sub,
        .user_agent = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "User-Agent"),
        .traceparent = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "traceparent"),
    };
    pthread_mutex_lock(&ks->lock);
    ks_stats_record(ks, &ri);
    unsigned int fault = ks_faults_pick(ks, &ri, &retry);
    pthread_mutex_unlock(&ks->lock);
    if (fault) {
        inject_fault(ks, fault, retry, r);
        goto out;
    }
    ks_handle_api(&q, r);
    if (ks_pb_accept_only(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept")))
        ks_pb_reply(r);
out:
    if (user && ks->audit) {
        if (!*r->audit_id)
            ks_uuid(r->audit_id, sizeof(r->audit_id));
        struct ks_audit_rec rec = {
            .conn = conn,
            .method = method,
            .url = url,
            .user = user,
            .impersonated = acting,
            .q = q.plural ? &q : NULL,
            .audit_id = r->audit_id,
            .received = ctx->received,
            .watch = q.verb && strcmp(q.verb, "watch") == 0 && r->code == 200,
            .code = r->code ? r->code : 500,
            .status_body = r->body,
            .status_len = r->len,
        };
        ks_audit_log(ks, &rec);
    }
    if (acting) {
        ks_user_free(acting);
        free(acting);
    }
    json_decref(doc);
    free(q.group);
    free(q.version);
    free(q.plural);
    free(q.ns);
    free(q.name);
    free(q.sub);
    for (int i = 0; i < 12; i++)
        free(segs[i]);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    struct ks_server *ks = cls;
    struct conn_ctx *ctx = *con_cls;
    (void)version;
    if (!ctx) {
        ctx = calloc(1, sizeof(*ctx));
        if (!ctx)
            return MHD_NO;
        ks_now_rfc3339_micro(ctx->received, sizeof(ctx->received));
        *con_cls = ctx;
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        if (ctx->len + n > KS_BODY_MAX) {
            ctx->too_big = true;
        } else {
            if (ctx->len + n + 1 > ctx->cap) {
                size_t cap = ctx->cap ? ctx->cap : 4096;
                while (cap < ctx->len + n + 1)
                    cap *= 2;
                char *nb = realloc(ctx->body, cap);
                if (!nb)
                    return MHD_NO;
                ctx->body = nb;
                ctx->cap = cap;
            }
            memcpy(ctx->body + ctx->len, upload_data, n);
            ctx->len += n;
            ctx->body[ctx->len] = '\0';
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    struct ks_reply r = {0};
    long latency;
    pthread_mutex_lock(&ks->lock);
    latency = ks->latency_ms;
    pthread_mutex_unlock(&ks->lock);
    if (latency > 0 && strncmp(url, "/_kubesim", 9) != 0) {
        struct timespec ts = {.tv_sec = latency / 1000, .tv_nsec = (latency % 1000) * 1000000};
        nanosleep(&ts, NULL);
    }
    if (ctx->too_big)
        ks_reply_status(&r, 413, "RequestEntityTooLarge",
                        "Request entity too large: limit is 67108864", NULL);
    else if (ctx->len > KS_WRITE_MAX &&
             (strncmp(url, "/api/", 5) == 0 || strncmp(url, "/apis/", 6) == 0))
        /* the handlers' limitedReadBody: --max-resource-write-bytes,
         * 3 MiB by default, for every body of a resource request */
        ks_reply_status(&r, 413, "RequestEntityTooLarge",
                        "Request entity too large: limit is 3145728", NULL);
    else {
        ks_trace_begin(ks, MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "traceparent"));
        route(ks, conn, method, url, ctx, &r);
        ks_trace_end();
    }
    if (ks->verbose)
        fprintf(stderr, "kubesim: %s %s -> %u\n", method, url, r.code);
    enum MHD_Result ret = send_reply(conn, &r);
    free(r.body);
    json_decref(r.warnings);
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct conn_ctx *ctx = *con_cls;
    (void)cls;
    (void)conn;
    (void)toe;
    if (ctx) {
        free(ctx->body);
        free(ctx);
    }
    *con_cls = NULL;
}

int ks_http_start(struct ks_server *ks, const char *listen, const char *cert_pem,
                  const char *key_pem, void **ret_daemon)
{
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    char host[64];
    const char *colon = strrchr(listen, ':');
    if (!colon || (size_t)(colon - listen) >= sizeof(host))
        return -EINVAL;
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = '\0';
    char *end = NULL;
    long port = strtol(colon + 1, &end, 10);
    if (!end || *end || port < 0 || port > 65535)
        return -EINVAL;
    if (inet_pton(AF_INET, *host ? host : "127.0.0.1", &sa.sin_addr) != 1)
        return -EINVAL;
    sa.sin_port = htons((uint16_t)port);
    unsigned int flags =
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_TLS | MHD_USE_ITC;
    if (ks->verbose)
        flags |= MHD_USE_ERROR_LOG;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, ks, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_HTTPS_MEM_KEY, key_pem, MHD_OPTION_HTTPS_MEM_CERT, cert_pem,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, ks, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned int)0, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(256 * 1024), MHD_OPTION_END);
    if (!d)
        return -EADDRINUSE;
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    char *url = ks_printf("https://%s:%u", *host ? host : "127.0.0.1",
                          di ? (unsigned int)di->port : (unsigned int)port);
    pthread_mutex_lock(&ks->lock); /* the controllers thread reads it */
    free(ks->url);
    ks->url = url;
    pthread_mutex_unlock(&ks->lock);
    *ret_daemon = d;
    return 0;
}

void ks_http_stop(void *daemon)
{
    if (daemon)
        MHD_stop_daemon(daemon);
}
