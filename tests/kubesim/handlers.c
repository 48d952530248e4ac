/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim verbs on resources: get, list (selectors, limit/continue),
 * create, update (PUT), patch (merge, strategic, JSON, apply), delete
 * (preconditions, propagationPolicy, finalizers), deletecollection, and
 * the status subresource, with the apiserver's Status bodies.
 *
 * A write runs in three steps so that no webhook is called with the lock
 * held: read the current object (lock), build and admit the new one
 * (conversion and validating webhooks, no lock), commit (lock) if the
 * object did not change meanwhile; otherwise retry (as the apiserver's
 * GuaranteedUpdate does) or answer 409 when the client gave a
 * resourceVersion.
 */
#include "kubesim.h"

#include <strings.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- replies ---------------------------------------------------------------- */

void ks_reply_status(struct ks_reply *r, int code, const char *reason, const char *message,
                     json_t *details)
{
    free(r->body);
    r->code = (unsigned int)code;
    r->body = ks_status_body(code, "Failure", reason, message, details, &r->len);
    r->content_type = "application/json";
}

void ks_reply_json(struct ks_reply *r, unsigned int code, const json_t *v, bool sort_keys)
{
    free(r->body);
    size_t len = 0;
    char *txt = ks_dump(v, sort_keys, &len);
    if (!txt)
        abort();
    char *out = realloc(txt, len + 2);
    if (!out)
        abort();
    out[len] = '\n';
    out[len + 1] = '\0';
    r->code = code;
    r->body = out;
    r->len = len + 1;
    r->content_type = "application/json";
}

char *ks_qualified(const struct ks_res *def)
{
    return def->group[0] ? ks_printf("%s.%s", def->plural, def->group) : ks_strdup(def->plural);
}

json_t *ks_details(const struct ks_res *def, const char *name)
{
    json_t *d = json_object();
    if (name)
        json_object_set_new(d, "name", json_string(name));
    if (def->group[0])
        json_object_set_new(d, "group", json_string(def->group));
    json_object_set_new(d, "kind", json_string(def->plural));
    return d;
}

static void reply_not_found(struct ks_reply *r, const struct ks_res *def, const char *name)
{
    char *q = ks_qualified(def);
    char *msg = ks_printf("%s \"%s\" not found", q, name);
    ks_reply_status(r, 404, "NotFound", msg, ks_details(def, name));
    free(msg);
    free(q);
}

static void reply_conflict(struct ks_reply *r, const struct ks_res *def, const char *name,
                           const char *why)
{
    char *q = ks_qualified(def);
    char *msg = ks_printf("Operation cannot be fulfilled on %s \"%s\": %s", q, name, why);
    ks_reply_status(r, 409, "Conflict", msg, ks_details(def, name));
    free(msg);
    free(q);
}

static void reply_bad_request(struct ks_reply *r, const char *msg)
{
    ks_reply_status(r, 400, "BadRequest", msg, NULL);
}

static void reply_internal(struct ks_reply *r, const char *msg)
{
    /* An error that is not a StatusError: code 500, no reason. */
    ks_reply_status(r, 500, NULL, msg, NULL);
}

/* The CEL helper failed (cel.c): apierrors.NewInternalError's 500, as the
 * apiserver answers a validation that could not run. */
static void reply_cel_outage(struct ks_reply *r, const char *err)
{
    char *msg = ks_printf("Internal error occurred: %s", err);
    ks_reply_status(r, 500, "InternalError", msg,
                    json_pack("{s:[{s:s}]}", "causes", "message", err));
    free(msg);
}

/* 422 with causes for an object of kind KIND in GROUP ("" for core) named
 * NAME, as apimachinery's errors.NewInvalid (@ref steal causes). */
void ks_reply_invalid_gk(struct ks_reply *r, const char *group, const char *kind, const char *name,
                         json_t *causes)
{
    char *qkind = group[0] ? ks_printf("%s.%s", kind, group) : ks_strdup(kind);
    /* The message is field.ErrorList.ToAggregate: an error repeated (the
     * same field and text) is listed once; the causes keep every one. */
    char *list = ks_strdup("");
    json_t *seen = json_object();
    size_t i;
    json_t *c;
    json_array_foreach(causes, i, c)
    {
        const char *field = json_string_value(json_object_get(c, "field"));
        const char *m = json_string_value(json_object_get(c, "message"));
        char *one = ks_printf("%s%s%s", field ? field : "", field ? ": " : "", m ? m : "");
        if (!json_object_get(seen, one)) {
            char *n = ks_printf("%s%s%s", list, json_object_size(seen) ? ", " : "", one);
            free(list);
            list = n;
            json_object_set_new(seen, one, json_true());
        }
        free(one);
    }
    size_t distinct = json_object_size(seen);
    json_decref(seen);
    char *msg = distinct > 1 ? ks_printf("%s \"%s\" is invalid: [%s]", qkind, name, list)
                             : ks_printf("%s \"%s\" is invalid: %s", qkind, name, list);
    json_t *details = json_object();
    if (name[0]) /* StatusDetails.Name is omitempty */
        json_object_set_new(details, "name", json_string(name));
    if (group[0])
        json_object_set_new(details, "group", json_string(group));
    if (kind[0])
        json_object_set_new(details, "kind", json_string(kind));
    json_object_set_new(details, "causes", causes);
    ks_reply_status(r, 422, "Invalid", msg, details);
    free(msg);
    free(list);
    free(qkind);
}

/* 422 with causes for an object of def's kind (@ref steal causes). */
static void reply_invalid(struct ks_reply *r, const struct ks_res *def, const char *name,
                          json_t *causes)
{
    ks_reply_invalid_gk(r, def->group, def->kind, name, causes);
}

static json_t *one_cause(const char *reason, const char *field, const char *message)
{
    return json_pack("[{s:s,s:s,s:s}]", "reason", reason, "message", message, "field", field);
}

/* ---- small helpers ---------------------------------------------------------- */

const char *ks_query(struct ks_api_req *q, const char *name)
{
    return MHD_lookup_connection_value(q->conn, MHD_GET_ARGUMENT_KIND, name);
}

bool ks_param_bool(const char *v)
{
    return v && strcasecmp(v, "false") != 0 && strcmp(v, "0") != 0;
}

bool ks_query_bool(struct ks_api_req *q, const char *name)
{
    return ks_param_bool(ks_query(q, name));
}

int ks_query_int(struct ks_api_req *q, const char *name, long long dflt, long long *ret,
                 char **ret_msg)
{
    const char *v = ks_query(q, name);
    if (!v || !*v) {
        /* the codec leaves the field alone for an empty value */
        *ret = dflt;
        return 0;
    }
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    bool range = errno == ERANGE;
    /* strconv.ParseInt takes an optional sign and decimal digits only */
    bool syntax = !end || *end || isspace((unsigned char)v[0]) || (v[0] == '+' && !v[1]);
    if (syntax || range) {
        *ret_msg = ks_printf("strconv.ParseInt: parsing \"%s\": %s", v,
                             syntax ? "invalid syntax" : "value out of range");
        return -EINVAL;
    }
    *ret = x;
    return 0;
}

static const char *str_or(const char *s, const char *dflt)
{
    return s ? s : dflt;
}

/* One cause of ValidateListOptions on FIELD: "Forbidden: DETAIL", or with
 * SUPPORTED the NotSupported of the value VALUE. */
static void lo_cause(json_t *causes, const char *field, const char *detail, const char *value,
                     const char *supported)
{
    char *m = supported
                  ? ks_printf("Unsupported value: \"%s\": supported values: %s", value, supported)
                  : ks_printf("Forbidden: %s", detail);
    json_array_append_new(causes,
                          json_pack("{s:s,s:s,s:s}", "reason",
                                    supported ? "FieldValueNotSupported" : "FieldValueForbidden",
                                    "message", m, "field", field));
    free(m);
}

int ks_list_options_check(struct ks_api_req *q, bool watch, struct ks_reply *r)
{
    static const char rvm[] = "resourceVersionMatch";
    const char *match = ks_query(q, rvm);
    const char *rv = ks_query(q, "resourceVersion");
    const char *cont = ks_query(q, "continue");
    bool initial = ks_query(q, "sendInitialEvents") != NULL;
    bool has_match = match && *match;
    bool has_cont = cont && *cont;
    json_t *causes = json_array();
    /* In validation.go's order, so that the message lists them alike. */
    if (watch) {
        if (initial && !(has_match && strcmp(match, "NotOlderThan") == 0))
            lo_cause(causes, rvm,
                     "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                     NULL, NULL);
        if (has_match && !initial)
            lo_cause(causes, rvm,
                     "resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
                     "provided",
                     NULL, NULL);
        if (has_match && strcmp(match, "NotOlderThan") != 0)
            lo_cause(causes, rvm, NULL, match, "\"NotOlderThan\"");
        if (has_match && has_cont)
            lo_cause(causes, rvm, "resourceVersionMatch is forbidden when continue is provided",
                     NULL, NULL);
    } else {
        if (has_match && !(rv && *rv))
            lo_cause(causes, rvm,
                     "resourceVersionMatch is forbidden unless resourceVersion is provided", NULL,
                     NULL);
        if (has_match && has_cont)
            lo_cause(causes, rvm, "resourceVersionMatch is forbidden when continue is provided",
                     NULL, NULL);
        if (has_match && strcmp(match, "Exact") != 0 && strcmp(match, "NotOlderThan") != 0)
            lo_cause(causes, rvm, NULL, match, "\"Exact\", \"NotOlderThan\", \"\"");
        if (has_match && strcmp(match, "Exact") == 0 && rv && strcmp(rv, "0") == 0)
            lo_cause(causes, rvm,
                     "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"", NULL,
                     NULL);
        if (initial)
            lo_cause(causes, "sendInitialEvents", "sendInitialEvents is forbidden for list", NULL,
                     NULL);
    }
    if (json_array_size(causes) == 0) {
        json_decref(causes);
        return 0;
    }
    ks_reply_invalid_gk(r, "meta.k8s.io", "ListOptions", "", causes);
    return -EINVAL;
}

static const char *meta_str(const json_t *obj, const char *k)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), k));
}

static json_t *meta(json_t *obj)
{
    json_t *md = json_object_get(obj, "metadata");
    if (!json_is_object(md)) {
        md = json_object();
        json_object_set_new(obj, "metadata", md);
    }
    return md;
}

static bool dry_run(struct ks_api_req *q, const json_t *opts)
{
    if (ks_query(q, "dryRun"))
        return true;
    return json_array_size(json_object_get(opts, "dryRun")) > 0;
}

void ks_present(const struct ks_res *def, const char *version, json_t *obj)
{
    char *av = ks_api_version(def->group, version);
    json_object_set_new(obj, "apiVersion", json_string(av));
    json_object_set_new(obj, "kind", json_string(def->kind));
    free(av);
    if (def->typed)
        ks_typed_order(obj);
    /* The apiserver defaults what it reads, in the version it serves. */
    const struct ks_version *v = def->crd ? ks_res_version(def, version) : NULL;
    if (v && v->schema)
        ks_schema_default(obj, v->schema);
}

/* Stored objects (array, @ref borrow) in "version", presented. @ref new */
static int in_version(struct ks_server *ks, const struct ks_res *def, const json_t *objs,
                      const char *version, json_t **ret, char **err)
{
    json_t *out = NULL;
    int rc = ks_convert(ks, def, objs, version, &out, err);
    if (rc != 0)
        return rc;
    size_t i;
    json_t *o;
    json_array_foreach(out, i, o)
    {
        ks_present(def, version, o);
    }
    *ret = out;
    return 0;
}

static int one_in_version(struct ks_server *ks, const struct ks_res *def, const json_t *obj,
                          const char *version, json_t **ret, char **err)
{
    json_t *arr = json_pack("[O]", obj);
    json_t *out = NULL;
    int rc = in_version(ks, def, arr, version, &out, err);
    json_decref(arr);
    if (rc != 0)
        return rc;
    *ret = json_incref(json_array_get(out, 0));
    json_decref(out);
    return 0;
}

bool ks_is_dns_label(const char *s, bool alpha_first)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!(islower((unsigned char)c) || isdigit((unsigned char)c) || c == '-'))
            return false;
    }
    if (s[0] == '-' || s[n - 1] == '-')
        return false;
    if (alpha_first && !islower((unsigned char)s[0]))
        return false;
    return true;
}

bool ks_is_dns_subdomain(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253)
        return false;
    char *copy = ks_strdup(s);
    bool ok = true;
    char *save = NULL;
    if (s[0] == '.' || s[n - 1] == '.' || strstr(s, ".."))
        ok = false;
    for (char *p = strtok_r(copy, ".", &save); ok && p; p = strtok_r(NULL, ".", &save))
        if (!ks_is_dns_label(p, false))
            ok = false;
    free(copy);
    return ok;
}

/* Everything but metadata and status (what bumps generation). */
static bool spec_changed(const json_t *a, const json_t *b)
{
    json_t *x = json_deep_copy(a);
    json_t *y = json_deep_copy(b);
    json_object_del(x, "metadata");
    json_object_del(y, "metadata");
    json_object_del(x, "status");
    json_object_del(y, "status");
    json_object_del(x, "apiVersion");
    json_object_del(y, "apiVersion");
    json_object_del(x, "kind");
    json_object_del(y, "kind");
    bool changed = !json_equal(x, y);
    json_decref(x);
    json_decref(y);
    return changed;
}

static void drop_times(json_t *obj)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(meta(obj), "managedFields"), i, e)
    {
        json_object_del(e, "time");
    }
}

/* Equal as stored, ignoring resourceVersion and when managers wrote. */
static bool same_object(const json_t *a, const json_t *b)
{
    json_t *x = json_deep_copy(a);
    json_t *y = json_deep_copy(b);
    json_object_del(meta(x), "resourceVersion");
    json_object_del(meta(y), "resourceVersion");
    drop_times(x);
    drop_times(y);
    bool same = json_equal(x, y);
    json_decref(x);
    json_decref(y);
    return same;
}

/* The stored object is in the resource's storage version of the moment
 * (an object keeps the version it was last written in: changing a CRD's
 * storage version rewrites nothing). */
static bool in_storage_version(const struct ks_res *def, const json_t *stored)
{
    if (!def->crd)
        return true;
    char *av = ks_api_version(def->group, def->storage);
    bool same =
        strcmp(str_or(json_string_value(json_object_get(stored, "apiVersion")), ""), av) == 0;
    free(av);
    return same;
}

/* ---- built-in defaults ---------------------------------------------------- */

static void set_default(json_t *obj, const char *k, json_t *v)
{
    if (!json_object_get(obj, k))
        json_object_set_new(obj, k, v);
    else
        json_decref(v);
}

/* SetDefaults_HTTPGetAction, and the GRPCAction service's +default="" */
static void default_handler(json_t *h)
{
    json_t *get = json_object_get(h, "httpGet");
    if (json_is_object(get)) {
        set_default(get, "path", json_string("/"));
        set_default(get, "scheme", json_string("HTTP"));
    }
    json_t *grpc = json_object_get(h, "grpc");
    if (json_is_object(grpc))
        set_default(grpc, "service", json_string(""));
}

/* SetDefaults_Probe (a zero counts as unset) */
static void default_probe(json_t *p)
{
    static const struct {
        const char *k;
        int v;
    } counts[] = {{"timeoutSeconds", 1},
                  {"periodSeconds", 10},
                  {"successThreshold", 1},
                  {"failureThreshold", 3}};
    if (!json_is_object(p))
        return;
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
        if (json_integer_value(json_object_get(p, counts[i].k)) == 0)
            json_object_set_new(p, counts[i].k, json_integer(counts[i].v));
    default_handler(p);
}

/* SetDefaults_ObjectFieldSelector */
static void default_field_ref(json_t *holder)
{
    json_t *fr = json_object_get(holder, "fieldRef");
    if (json_is_object(fr))
        set_default(fr, "apiVersion", json_string("v1"));
}

/* SetDefaults_Volume (no source: an emptyDir) and the sources' defaults:
 * the file modes 0644, a token's hour, a hostPath's unset type */
static void default_volumes(json_t *vols)
{
    static const char *const moded[] = {"secret", "configMap", "downwardAPI", "projected"};
    size_t i, j;
    json_t *v, *x;
    json_array_foreach(vols, i, v)
    {
        if (!json_is_object(v))
            continue;
        bool any = false;
        const char *k;
        json_t *src;
        json_object_foreach(v, k, src)
        {
            any = any || (strcmp(k, "name") != 0 && !json_is_null(src));
        }
        if (!any)
            json_object_set_new(v, "emptyDir", json_object());
        for (size_t m = 0; m < sizeof(moded) / sizeof(moded[0]); m++) {
            src = json_object_get(v, moded[m]);
            if (json_is_object(src))
                set_default(src, "defaultMode", json_integer(420));
        }
        json_array_foreach(json_object_get(json_object_get(v, "downwardAPI"), "items"), j, x)
        {
            default_field_ref(x);
        }
        src = json_object_get(v, "hostPath");
        if (json_is_object(src))
            set_default(src, "type", json_string(""));
        json_array_foreach(json_object_get(json_object_get(v, "projected"), "sources"), j, x)
        {
            json_t *tok = json_object_get(x, "serviceAccountToken");
            if (json_is_object(tok))
                set_default(tok, "expirationSeconds", json_integer(3600));
            size_t n;
            json_t *item;
            json_array_foreach(json_object_get(json_object_get(x, "downwardAPI"), "items"), n, item)
            {
                default_field_ref(item);
            }
        }
    }
}

static void default_containers(json_t *list)
{
    size_t i, j;
    json_t *c, *p;
    json_array_foreach(list, i, c)
    {
        set_default(c, "resources", json_object());
        set_default(c, "terminationMessagePath", json_string("/dev/termination-log"));
        set_default(c, "terminationMessagePolicy", json_string("File"));
        const char *image = json_string_value(json_object_get(c, "image"));
        const char *slash = image ? strrchr(image, '/') : NULL;
        const char *colon = image ? strrchr(slash ? slash : image, ':') : NULL;
        bool latest = image && !strchr(image, '@') && (!colon || strcmp(colon, ":latest") == 0);
        set_default(c, "imagePullPolicy", json_string(latest ? "Always" : "IfNotPresent"));
        json_array_foreach(json_object_get(c, "ports"), j, p)
        {
            set_default(p, "protocol", json_string("TCP"));
        }
        json_array_foreach(json_object_get(c, "env"), j, p)
        {
            default_field_ref(json_object_get(p, "valueFrom"));
        }
        default_probe(json_object_get(c, "livenessProbe"));
        default_probe(json_object_get(c, "readinessProbe"));
        default_probe(json_object_get(c, "startupProbe"));
        json_t *lc = json_object_get(c, "lifecycle");
        if (json_is_object(lc)) {
            default_handler(json_object_get(lc, "postStart"));
            default_handler(json_object_get(lc, "preStop"));
        }
    }
}

/* SetDefaults_PodSpec and its containers': a Pod's and a template's. */
static void default_pod_spec(json_t *spec)
{
    set_default(spec, "restartPolicy", json_string("Always"));
    set_default(spec, "terminationGracePeriodSeconds", json_integer(30));
    set_default(spec, "dnsPolicy", json_string("ClusterFirst"));
    set_default(spec, "securityContext", json_object());
    set_default(spec, "schedulerName", json_string("default-scheduler"));
    default_containers(json_object_get(spec, "containers"));
    default_containers(json_object_get(spec, "initContainers"));
    default_volumes(json_object_get(spec, "volumes"));
}

/* SetDefaults_Pod: with hostNetwork, a Pod's (not a template's) unset
 * hostPorts are the containerPorts */
static void default_host_ports(json_t *spec)
{
    static const char *const lists[] = {"containers", "initContainers"};
    if (!json_is_true(json_object_get(spec, "hostNetwork")))
        return;
    for (size_t l = 0; l < 2; l++) {
        size_t i, j;
        json_t *c, *p;
        json_array_foreach(json_object_get(spec, lists[l]), i, c)
        {
            json_array_foreach(json_object_get(c, "ports"), j, p)
            {
                if (json_integer_value(json_object_get(p, "hostPort")) == 0)
                    json_object_set(p, "hostPort", json_object_get(p, "containerPort"));
            }
        }
    }
}

static void default_deployment(json_t *obj)
{
    json_t *spec = ks_ensure_obj(obj, "spec");
    set_default(spec, "replicas", json_integer(1));
    set_default(spec, "strategy",
                json_pack("{s:s,s:{s:s,s:s}}", "type", "RollingUpdate", "rollingUpdate",
                          "maxUnavailable", "25%", "maxSurge", "25%"));
    json_t *strategy = json_object_get(spec, "strategy");
    if (json_is_object(strategy) &&
        strcmp(str_or(json_string_value(json_object_get(strategy, "type")), "RollingUpdate"),
               "RollingUpdate") == 0) {
        set_default(strategy, "type", json_string("RollingUpdate"));
        json_t *ru = ks_ensure_obj(strategy, "rollingUpdate");
        set_default(ru, "maxUnavailable", json_string("25%"));
        set_default(ru, "maxSurge", json_string("25%"));
    }
    set_default(spec, "revisionHistoryLimit", json_integer(10));
    set_default(spec, "progressDeadlineSeconds", json_integer(600));
    default_pod_spec(ks_ensure_obj(ks_ensure_obj(spec, "template"), "spec"));
}

/* SetDefaults_Pod: a container's requests default to its limits. */
static void default_requests(json_t *list)
{
    size_t i;
    json_t *c;
    json_array_foreach(list, i, c)
    {
        json_t *res = json_object_get(c, "resources");
        const json_t *lim = json_object_get(res, "limits");
        if (!json_is_object(lim) || json_object_size(lim) == 0)
            continue;
        json_t *req = ks_ensure_obj(res, "requests");
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)lim, k, v)
        {
            set_default(req, k, json_deep_copy(v));
        }
    }
}

static bool toleration_for(const json_t *tols, const char *key)
{
    size_t i;
    json_t *t;
    json_array_foreach(tols, i, t)
    {
        const char *k = json_string_value(json_object_get(t, "key"));
        const char *op = str_or(json_string_value(json_object_get(t, "operator")), "Equal");
        const char *eff = str_or(json_string_value(json_object_get(t, "effect")), "");
        /* MatchToleration for the NoExecute taint: an empty key with Exists
         * tolerates every taint */
        if ((k && *k ? strcmp(k, key) == 0 : strcmp(op, "Exists") == 0) &&
            (*eff == '\0' || strcmp(eff, "NoExecute") == 0))
            return true;
    }
    return false;
}

/* Mounts the token volume vol in each container of list without a mount at
 * the token's path; true if one needed it. */
static bool mount_token(json_t *list, const char *vol)
{
    bool needed = false;
    size_t i;
    json_t *c;
    json_array_foreach(list, i, c)
    {
        json_t *mounts = json_object_get(c, "volumeMounts");
        bool taken = false;
        size_t j;
        json_t *m;
        json_array_foreach(mounts, j, m)
        {
            if (strcmp(str_or(json_string_value(json_object_get(m, "mountPath")), ""),
                       "/var/run/secrets/kubernetes.io/serviceaccount") == 0)
                taken = true;
        }
        if (taken)
            continue;
        if (!json_is_array(mounts)) {
            mounts = json_array();
            json_object_set_new(c, "volumeMounts", mounts);
        }
        json_array_append_new(mounts,
                              json_pack("{s:s,s:b,s:s}", "name", vol, "readOnly", 1, "mountPath",
                                        "/var/run/secrets/kubernetes.io/serviceaccount"));
        needed = true;
    }
    return needed;
}

/* plugin/pkg/admission/serviceaccount mountServiceAccountToken: a volume
 * named kube-api-access-* is the token's (kept as it is); else one is
 * added, under a new name, when a container had to mount it. */
static void add_token_volume(json_t *spec)
{
    char vol[32] = "";
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(spec, "volumes"), i, v)
    {
        const char *n = str_or(json_string_value(json_object_get(v, "name")), "");
        if (strncmp(n, "kube-api-access-", 16) == 0) {
            snprintf(vol, sizeof(vol), "%s", n);
            break;
        }
    }
    bool have = *vol != '\0';
    if (!have) {
        char sfx[6];
        ks_random_suffix(sfx, sizeof(sfx));
        snprintf(vol, sizeof(vol), "kube-api-access-%s", sfx);
    }
    bool needed = mount_token(json_object_get(spec, "initContainers"), vol);
    needed = mount_token(json_object_get(spec, "containers"), vol) || needed;
    if (have || !needed)
        return;
    json_t *vols = json_object_get(spec, "volumes");
    if (!json_is_array(vols)) {
        vols = json_array();
        json_object_set_new(spec, "volumes", vols);
    }
    json_array_append_new(vols, json_pack("{s:s,s:{s:i,s:[{s:{s:i,s:s}},{s:{s:s,s:[{s:s,s:s}]}},"
                                          "{s:{s:[{s:s,s:{s:s,s:s}}]}}]}}",
                                          "name", vol, "projected", "defaultMode", 420, "sources",
                                          "serviceAccountToken", "expirationSeconds", 3607, "path",
                                          "token", "configMap", "name", "kube-root-ca.crt", "items",
                                          "key", "ca.crt", "path", "ca.crt", "downwardAPI", "items",
                                          "path", "namespace", "fieldRef", "apiVersion", "v1",
                                          "fieldPath", "metadata.namespace"));
}

/* pkg/apis/core/helper/qos.ComputePodQOS over cpu and memory: no request
 * nor limit anywhere -> BestEffort; every container limiting both with
 * requests equal to the limits -> Guaranteed; else Burstable. */
static const char *pod_qos(const json_t *spec)
{
    bool any = false, guaranteed = true;
    const char *lists[] = {"containers", "initContainers"};
    for (size_t l = 0; l < 2; l++) {
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(spec, lists[l]), i, c)
        {
            const json_t *res = json_object_get(c, "resources");
            const json_t *req = json_object_get(res, "requests");
            const json_t *lim = json_object_get(res, "limits");
            const char *names[] = {"cpu", "memory"};
            for (size_t n = 0; n < 2; n++) {
                const json_t *rq = json_object_get(req, names[n]);
                const json_t *lm = json_object_get(lim, names[n]);
                if (rq || lm)
                    any = true;
                if (!lm || !rq || !json_equal(rq, lm))
                    guaranteed = false;
            }
        }
    }
    return !any ? "BestEffort" : guaranteed ? "Guaranteed" : "Burstable";
}

/* The Pod's own defaults (SetDefaults_Pod: requests from limits,
 * enableServiceLinks) and those of the admission plugins a default
 * apiserver runs on a Pod's create (plugin/pkg/admission/serviceaccount:
 * the "default" ServiceAccount and its token volume "kube-api-access-XXXXX"
 * mounted in every container unless automountServiceAccountToken is false
 * on the Pod or its ServiceAccount; priority: 0 and PreemptLowerPriority
 * without a default PriorityClass; defaulttolerationseconds: 300 s for
 * not-ready and unreachable), and the status the Pod strategy's
 * PrepareForCreate gives it (Pending, its QoS class) and its merge of the
 * pod affinity terms' matchLabelKeys into their selectors. Whether the
 * ServiceAccount exists is not checked. */
/* plugin/pkg/admission/serviceaccount: a new Pod's ServiceAccount must
 * exist, else 403 (r: NULL, no answer). The apiserver waits up to about
 * 2 s for "default", which the ServiceAccounts controller makes with the
 * namespace; kubesim's makes it at once, so "default" is taken as there. */
bool ks_pod_service_account_ok(struct ks_server *ks, const json_t *pod, struct ks_reply *r)
{
    const json_t *md = json_object_get(pod, "metadata");
    const char *sa =
        json_string_value(json_object_get(json_object_get(pod, "spec"), "serviceAccountName"));
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    const char *name = str_or(json_string_value(json_object_get(md, "name")), "");
    if (!sa || !ns || strcmp(sa, "default") == 0)
        return true;
    char key[512];
    ks_obj_key(key, sizeof(key), ns, sa);
    if (ks_store_get(ks, "serviceaccounts", key))
        return true;
    if (r) {
        char *msg = ks_printf("pods \"%s\" is forbidden: error looking up service account %s/%s: "
                              "serviceaccount \"%s\" not found",
                              name, ns, sa, sa);
        ks_reply_status(r, 403, "Forbidden", msg,
                        json_pack("{s:s,s:s}", "name", name, "kind", "pods"));
        free(msg);
    }
    return false;
}

void ks_pod_defaults(struct ks_server *ks, json_t *pod)
{
    json_t *spec = ks_ensure_obj(pod, "spec");
    default_pod_spec(spec);
    default_host_ports(spec);
    default_requests(json_object_get(spec, "containers"));
    default_requests(json_object_get(spec, "initContainers"));
    set_default(spec, "enableServiceLinks", json_true());
    const char *sa = json_string_value(json_object_get(spec, "serviceAccountName"));
    if (!sa || !*sa)
        sa = json_string_value(json_object_get(spec, "serviceAccount"));
    if (!sa || !*sa)
        sa = "default";
    json_t *sa_name = json_string(sa); /* sa may point into spec */
    json_object_set(spec, "serviceAccountName", sa_name);
    json_object_set_new(spec, "serviceAccount", sa_name);
    sa = json_string_value(sa_name);
    char key[512];
    ks_obj_key(key, sizeof(key),
               str_or(json_string_value(json_object_get(meta(pod), "namespace")), ""), sa);
    const json_t *auto_pod = json_object_get(spec, "automountServiceAccountToken");
    const json_t *auto_sa =
        json_object_get(ks_store_get(ks, "serviceaccounts", key), "automountServiceAccountToken");
    bool automount = json_is_boolean(auto_pod) ? json_is_true(auto_pod) : !json_is_false(auto_sa);
    if (automount)
        add_token_volume(spec);
    set_default(spec, "priority", json_integer(0));
    set_default(spec, "preemptionPolicy", json_string("PreemptLowerPriority"));
    json_t *tols = json_object_get(spec, "tolerations");
    if (!json_is_array(tols)) {
        tols = json_array();
        json_object_set_new(spec, "tolerations", tols);
    }
    const char *taints[] = {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"};
    for (size_t i = 0; i < 2; i++)
        if (!toleration_for(tols, taints[i]))
            json_array_append_new(tols, json_pack("{s:s,s:s,s:s,s:I}", "key", taints[i], "operator",
                                                  "Exists", "effect", "NoExecute",
                                                  "tolerationSeconds", (json_int_t)300));
    json_object_set_new(pod, "status",
                        json_pack("{s:s,s:s}", "phase", "Pending", "qosClass", pod_qos(spec)));
    /* pkg/registry/core/pod/strategy.go applySchedulingGatedCondition
     * (podutil.UpdatePodCondition: the transition time is now) */
    if (json_array_size(json_object_get(spec, "schedulingGates"))) {
        char now[32];
        ks_now_rfc3339(now, sizeof(now));
        json_object_set_new(json_object_get(pod, "status"), "conditions",
                            json_pack("[{s:s,s:s,s:n,s:s,s:s,s:s}]", "type", "PodScheduled",
                                      "status", "False", "lastProbeTime", "lastTransitionTime", now,
                                      "reason", "SchedulingGated", "message",
                                      "Scheduling is blocked due to non-empty scheduling gates"));
    }
    ks_pod_affinity_merge_label_keys(pod); /* then mutatePodAffinity */
}

static const char *svc_type(const json_t *spec)
{
    return str_or(json_string_value(json_object_get(spec, "type")), "ClusterIP");
}

static bool svc_needs_node_ports(const json_t *spec)
{
    const char *t = svc_type(spec);
    return strcmp(t, "NodePort") == 0 || strcmp(t, "LoadBalancer") == 0;
}

/* spec[k] equals ospec[k] (both absent counts) */
static bool same_field(const json_t *spec, const json_t *ospec, const char *k)
{
    const json_t *a = json_object_get(spec, k), *b = json_object_get(ospec, k);
    return (!a && !b) || (a && b && json_equal(a, b));
}

/* No nodePort of spec that ospec did not have (sameNodePorts). */
static bool same_node_ports(const json_t *spec, const json_t *ospec)
{
    size_t i, j;
    json_t *p, *op;
    json_array_foreach(json_object_get(spec, "ports"), i, p)
    {
        json_int_t np = json_integer_value(json_object_get(p, "nodePort"));
        bool found = np == 0;
        json_array_foreach(json_object_get(ospec, "ports"), j, op)
        {
            if (json_integer_value(json_object_get(op, "nodePort")) == np)
                found = true;
        }
        if (!found)
            return false;
    }
    return true;
}

static const char *str_member(const json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(o, k));
    return v ? v : "";
}

/* normalizeClusterIPs (pkg/registry/core/service/storage/storage.go) for
 * an update: clusterIPs follows a clusterIP the writer changed or cleared
 * while sending the old clusterIPs back (validation then judges it), and
 * comes back when only clusterIP was sent, unchanged. */
static void normalize_cluster_ips(json_t *spec, const json_t *ospec)
{
    const json_t *oips = json_object_get(ospec, "clusterIPs");
    const char *cip = str_member(spec, "clusterIP"), *ocip = str_member(ospec, "clusterIP");
    if (json_array_size(oips) > 0 && json_array_size(json_object_get(spec, "clusterIPs")) == 0 &&
        strcmp(cip, ocip) == 0)
        json_object_set_new(spec, "clusterIPs", json_deep_copy(oips)); /* oips is stored */
    if (strcmp(cip, ocip) == 0)
        return;
    const json_t *ips = json_object_get(spec, "clusterIPs");
    bool same = json_array_size(ips) == json_array_size(oips);
    for (size_t i = 0; same && i < json_array_size(ips); i++)
        same = strcmp(str_or(json_string_value(json_array_get(ips, i)), ""),
                      str_or(json_string_value(json_array_get(oips, i)), "")) == 0;
    if (!same)
        return;
    if (*ocip && !*cip)
        json_object_del(spec, "clusterIPs");
    else if (*cip)
        json_object_set_new(spec, "clusterIPs", json_pack("[s]", cip));
}

/*
 * An update's values for a Service, in the registry's order: the storage's
 * BeginUpdate hook first (pkg/registry/core/service/storage/storage.go:
 * patchAllocatedValues keeps the allocated clusterIP(s) when both versions
 * need one and the update left them out or empty, normalizeClusterIPs, and
 * the allocator keeps the IP families), then the strategy's
 * PrepareForUpdate: dropTypeDependentFields wipes what the new type does
 * not use, when the writer did not change it (a switch from NodePort to
 * ClusterIP that sends the old nodePorts back drops them).
 */
static void service_update_fields(json_t *spec, const json_t *ospec)
{
    bool old_ip = strcmp(svc_type(ospec), "ExternalName") != 0;
    bool new_ip = strcmp(svc_type(spec), "ExternalName") != 0;
    if (old_ip && new_ip) {
        if (!*str_member(spec, "clusterIP") && json_object_get(ospec, "clusterIP"))
            json_object_set(spec, "clusterIP", json_object_get(ospec, "clusterIP"));
        /* copies: ospec is the stored object, spec may still change */
        if (json_array_size(json_object_get(spec, "clusterIPs")) == 0 &&
            json_array_size(json_object_get(ospec, "clusterIPs")) > 0)
            json_object_set_new(spec, "clusterIPs",
                                json_deep_copy(json_object_get(ospec, "clusterIPs")));
        static const char *const keep[] = {"ipFamilies", "ipFamilyPolicy", NULL};
        for (const char *const *k = keep; *k; k++)
            if (!json_object_get(spec, *k) && json_object_get(ospec, *k))
                json_object_set_new(spec, *k, json_deep_copy(json_object_get(ospec, *k)));
    }
    normalize_cluster_ips(spec, ospec);
    if (old_ip && !new_ip) {
        if (same_field(spec, ospec, "clusterIP") && same_field(spec, ospec, "clusterIPs")) {
            json_object_del(spec, "clusterIP");
            json_object_del(spec, "clusterIPs");
        }
        if (same_field(spec, ospec, "ipFamilies"))
            json_object_del(spec, "ipFamilies");
        if (same_field(spec, ospec, "ipFamilyPolicy"))
            json_object_del(spec, "ipFamilyPolicy");
    }
    if (svc_needs_node_ports(ospec) && !svc_needs_node_ports(spec) &&
        same_node_ports(spec, ospec)) {
        size_t i;
        json_t *p;
        json_array_foreach(json_object_get(spec, "ports"), i, p)
        {
            json_object_del(p, "nodePort");
        }
    }
    bool lb = strcmp(svc_type(spec), "LoadBalancer") == 0;
    const char *oetp = json_string_value(json_object_get(ospec, "externalTrafficPolicy"));
    bool old_hc = strcmp(svc_type(ospec), "LoadBalancer") == 0 && oetp && !strcmp(oetp, "Local");
    const char *etp = json_string_value(json_object_get(spec, "externalTrafficPolicy"));
    bool new_hc = lb && etp && strcmp(etp, "Local") == 0;
    if (old_hc && !new_hc && same_field(spec, ospec, "healthCheckNodePort"))
        json_object_del(spec, "healthCheckNodePort");
    if (!lb && same_field(spec, ospec, "allocateLoadBalancerNodePorts"))
        json_object_del(spec, "allocateLoadBalancerNodePorts");
    if (!lb && same_field(spec, ospec, "loadBalancerClass"))
        json_object_del(spec, "loadBalancerClass");
    if (!svc_needs_node_ports(spec) && same_field(spec, ospec, "externalTrafficPolicy"))
        json_object_del(spec, "externalTrafficPolicy");
}

static void default_service(struct ks_server *ks, json_t *obj, const json_t *old)
{
    json_t *spec = ks_ensure_obj(obj, "spec");
    const json_t *ospec = json_object_get(old, "spec");
    set_default(spec, "type", json_string("ClusterIP"));
    const char *type = svc_type(spec);
    bool node_ports = svc_needs_node_ports(spec);
    bool needs_ip = strcmp(type, "ExternalName") != 0;
    if (old)
        service_update_fields(spec, ospec);
    set_default(spec, "sessionAffinity", json_string("None"));
    const char *aff = json_string_value(json_object_get(spec, "sessionAffinity"));
    if (aff && strcmp(aff, "None") == 0) {
        json_object_del(spec, "sessionAffinityConfig");
    } else if (aff && strcmp(aff, "ClientIP") == 0) {
        /* SetDefaults_Service: DefaultClientIPServiceAffinitySeconds */
        json_t *cfg = json_object_get(json_object_get(spec, "sessionAffinityConfig"), "clientIP");
        if (!json_object_get(cfg, "timeoutSeconds"))
            json_object_set_new(spec, "sessionAffinityConfig",
                                json_pack("{s:{s:i}}", "clientIP", "timeoutSeconds", 10800));
    }
    if (needs_ip)
        set_default(spec, "internalTrafficPolicy", json_string("Cluster"));
    if (node_ports) {
        set_default(spec, "externalTrafficPolicy", json_string("Cluster"));
        if (strcmp(type, "LoadBalancer") == 0)
            set_default(spec, "allocateLoadBalancerNodePorts", json_true());
    }
    size_t i, j;
    json_t *p, *op;
    json_array_foreach(json_object_get(spec, "ports"), i, p)
    {
        set_default(p, "protocol", json_string("TCP"));
        /* targetPort 0 or "" means the port */
        const json_t *tp = json_object_get(p, "targetPort");
        if ((json_is_integer(tp) && json_integer_value(tp) == 0) ||
            (json_is_string(tp) && !*json_string_value(tp)))
            json_object_del(p, "targetPort");
        if (json_object_get(p, "port"))
            set_default(p, "targetPort", json_deep_copy(json_object_get(p, "port")));
        if (!node_ports || json_object_get(p, "nodePort"))
            continue;
        json_array_foreach(json_object_get(ospec, "ports"), j, op)
        {
            if (json_equal(json_object_get(op, "port"), json_object_get(p, "port")) &&
                json_object_get(op, "nodePort"))
                json_object_set(p, "nodePort", json_object_get(op, "nodePort"));
        }
        if (!json_object_get(p, "nodePort")) {
            uint32_t np = 30000;
            pthread_mutex_lock(&ks->lock);
            for (int tries = 0; tries < 2768; tries++) { /* the next one not held */
                np = 30000 + (ks->next_node_port++ % 2768);
                char k[32];
                snprintf(k, sizeof(k), "node-port:%u", np);
                if (!json_object_get(ks->svc_alloc, k))
                    break;
            }
            pthread_mutex_unlock(&ks->lock);
            json_object_set_new(p, "nodePort", json_integer(np));
        }
    }
    json_t *status = ks_ensure_obj(obj, "status");
    set_default(status, "loadBalancer", json_object());
}

/* pkg/apis/rbac/v1/defaults.go: SetDefaults_RoleBinding and
 * _ClusterRoleBinding (roleRef.apiGroup), SetDefaults_Subject (a User's or
 * Group's apiGroup) */
static void default_binding(json_t *obj)
{
    static const char *const group = "rbac.authorization.k8s.io";
    json_t *ref = json_object_get(obj, "roleRef");
    if (json_is_object(ref) && !*str_member(ref, "apiGroup"))
        json_object_set_new(ref, "apiGroup", json_string(group));
    size_t i;
    json_t *sub;
    json_array_foreach(json_object_get(obj, "subjects"), i, sub)
    {
        const char *kind = str_member(sub, "kind");
        if (json_is_object(sub) && !*str_member(sub, "apiGroup") &&
            (strcmp(kind, "User") == 0 || strcmp(kind, "Group") == 0))
            json_object_set_new(sub, "apiGroup", json_string(group));
    }
}

static void builtin_defaults(struct ks_server *ks, const struct ks_res *def, json_t *obj,
                             const json_t *old)
{
    if (strcmp(def->key, "deployments.apps") == 0) {
        default_deployment(obj);
    } else if (strcmp(def->key, "services") == 0) {
        default_service(ks, obj, old);
    } else if (strcmp(def->key, "namespaces") == 0) {
        json_t *labels = ks_ensure_obj(meta(obj), "labels");
        const char *name = meta_str(obj, "name");
        json_object_set_new(labels, "kubernetes.io/metadata.name", json_string(str_or(name, "")));
        set_default(ks_ensure_obj(obj, "spec"), "finalizers", json_pack("[s]", "kubernetes"));
        set_default(ks_ensure_obj(obj, "status"), "phase", json_string("Active"));
    } else if (strcmp(def->key, "pods") == 0) {
        if (!old) {
            ks_pod_defaults(ks, obj);
        } else {
            /* an update is defaulted too (SetDefaults_PodSpec, SetDefaults_Pod;
             * the v1 conversion's serviceAccount mirror); what admission
             * added at create is not added again (ValidatePodUpdate
             * refuses a spec without it) */
            json_t *spec = ks_ensure_obj(obj, "spec");
            default_pod_spec(spec);
            default_host_ports(spec);
            default_requests(json_object_get(spec, "containers"));
            default_requests(json_object_get(spec, "initContainers"));
            set_default(spec, "enableServiceLinks", json_true());
            const json_t *san = json_object_get(spec, "serviceAccountName");
            const json_t *sa = json_object_get(spec, "serviceAccount");
            if (!json_string_length(san) && json_string_length(sa))
                json_object_set(spec, "serviceAccountName", (json_t *)sa);
            san = json_object_get(spec, "serviceAccountName");
            if (json_string_length(san))
                json_object_set(spec, "serviceAccount", (json_t *)san);
        }
    } else if (strcmp(def->key, "replicasets.apps") == 0) {
        set_default(ks_ensure_obj(obj, "spec"), "replicas", json_integer(1));
        default_pod_spec(
            ks_ensure_obj(ks_ensure_obj(ks_ensure_obj(obj, "spec"), "template"), "spec"));
    } else if (strcmp(def->key, "secrets") == 0) {
        set_default(obj, "type", json_string("Opaque"));
    } else if (strcmp(def->key, "networkpolicies.networking.k8s.io") == 0) {
        ks_netpol_defaults(obj);
    } else if (strcmp(def->key, "endpointslices.discovery.k8s.io") == 0) {
        ks_endpointslice_defaults(obj, old);
    } else if (strcmp(def->key, "endpoints") == 0) {
        ks_endpoints_defaults(obj);
    } else if (strcmp(def->key, "rolebindings.rbac.authorization.k8s.io") == 0 ||
               strcmp(def->key, "clusterrolebindings.rbac.authorization.k8s.io") == 0) {
        default_binding(obj);
    } else if (strcmp(def->key, "validatingwebhookconfigurations.admissionregistration.k8s.io") ==
               0) {
        ks_whconfig_defaults(obj, false);
    } else if (strcmp(def->key, "mutatingwebhookconfigurations.admissionregistration.k8s.io") ==
               0) {
        ks_whconfig_defaults(obj, true);
    } else if (strcmp(def->key, "customresourcedefinitions.apiextensions.k8s.io") == 0) {
        /* apiextensions/v1 defaults.go: SetDefaults_CustomResourceDefinitionSpec
         * and SetDefaults_ServiceReference */
        json_t *spec = ks_ensure_obj(obj, "spec");
        json_t *names = json_object_get(spec, "names");
        const char *kind = json_string_value(json_object_get(names, "kind"));
        if (json_is_object(names) && kind && *kind) {
            if (!json_string_length(json_object_get(names, "singular"))) {
                char *low = ks_strdup(kind);
                for (char *c = low; *c; c++)
                    if (*c >= 'A' && *c <= 'Z')
                        *c = (char)(*c - 'A' + 'a');
                json_object_set_new(names, "singular", json_string(low));
                free(low);
            }
            if (!json_string_length(json_object_get(names, "listKind"))) {
                char *lk = ks_printf("%sList", kind);
                json_object_set_new(names, "listKind", json_string(lk));
                free(lk);
            }
        }
        set_default(spec, "conversion", json_pack("{s:s}", "strategy", "None"));
        json_t *svc = json_object_get(
            json_object_get(json_object_get(json_object_get(spec, "conversion"), "webhook"),
                            "clientConfig"),
            "service");
        if (json_is_object(svc))
            set_default(svc, "port", json_integer(443));
    }
    /* the strategies' PrepareForCreate and PrepareForUpdate, before
     * validation: podutil.DropDisabledPodFields of a Pod,
     * DropDisabledTemplateFields of a Deployment's or ReplicaSet's template */
    json_t *spec = json_object_get(obj, "spec");
    if (strcmp(def->key, "deployments.apps") == 0 || strcmp(def->key, "replicasets.apps") == 0)
        ks_drop_disabled_pod_fields(json_object_get(json_object_get(spec, "template"), "spec"));
    else if (strcmp(def->key, "pods") == 0)
        ks_drop_disabled_pod_fields(spec);
}

static bool same_strings(const json_t *a, const json_t *b)
{
    if (json_array_size(a) != json_array_size(b))
        return false;
    for (size_t i = 0; i < json_array_size(a); i++)
        if (strcmp(str_or(json_string_value(json_array_get(a, i)), ""),
                   str_or(json_string_value(json_array_get(b, i)), "")) != 0)
            return false;
    return true;
}

static bool ip_is_v6(const char *ip)
{
    unsigned char buf[16];
    return ks_ip_parse(ip, buf) && !ks_ip_is_v4(buf);
}

/* field.Invalid(spec.ipFamilyPolicy, the policy, msg) */
static void bad_policy(json_t *causes, const char *policy, const char *msg)
{
    char *q = ks_go_quote(policy);
    ks_cause(causes, "FieldValueInvalid", "spec.ipFamilyPolicy", "Invalid value: %s: %s", q, msg);
    free(q);
}

/*
 * initIPFamilyFields (alloc.go) of a Service that gets IPs, on kubesim's
 * single-stack IPv4 cluster: an update that keeps a PreferDualStack
 * Service's policy, clusterIPs and families is left alone; otherwise the
 * policy is the old one, or RequireDualStack for a headless Service
 * without a selector, or SingleStack; ValidateServiceClusterIPsRelatedFields
 * runs as a loose pre-validation (its errors are the answer); a
 * SingleStack update that kept two clusterIPs or families keeps the first,
 * any other policy may not drop the second; families follow the clusterIPs
 * given (an IPv6 one: not configured on this cluster); a headless Service
 * without a selector gets the default family (and IPv6 beside it unless
 * SingleStack: the one exception to single stack); otherwise
 * RequireDualStack and IPv6 are refused and the family defaults to IPv4.
 * Refusals go to causes (each stage's own 422).
 */
static void init_ip_families(json_t *spec, const json_t *ospec, json_t *causes)
{
    const char *pol = json_string_value(json_object_get(spec, "ipFamilyPolicy"));
    const char *opol = json_string_value(json_object_get(ospec, "ipFamilyPolicy"));
    json_t *ips = json_object_get(spec, "clusterIPs");
    json_t *fams = json_object_get(spec, "ipFamilies");
    const json_t *oips = json_object_get(ospec, "clusterIPs");
    const json_t *ofams = json_object_get(ospec, "ipFamilies");
    if (ospec && pol && strcmp(svc_type(spec), svc_type(ospec)) == 0 &&
        strcmp(pol, "PreferDualStack") == 0 && (!opol || strcmp(opol, "PreferDualStack") == 0) &&
        same_strings(ips, oips) && same_strings(fams, ofams))
        return; /* isMatchingPreferDualStackClusterIPFields */
    bool selectorless = json_object_size(json_object_get(spec, "selector")) == 0;
    if (!pol) {
        const char *cip = json_string_value(json_object_get(spec, "clusterIP"));
        pol = opol                                              ? opol
              : cip && strcmp(cip, "None") == 0 && selectorless ? "RequireDualStack"
                                                                : "SingleStack";
        json_object_set_new(spec, "ipFamilyPolicy", json_string(pol));
    }
    ks_validate_cluster_ips(spec, causes);
    if (json_array_size(causes))
        return;
    bool single = strcmp(pol, "SingleStack") == 0;
    if (ospec && single) {
        if (same_strings(ips, oips) && json_array_size(ips) > 1)
            json_array_remove(ips, 1);
        if (same_strings(fams, ofams) && json_array_size(fams) > 1)
            json_array_remove(fams, 1);
    } else if (ospec) {
        if (json_array_size(oips) > json_array_size(ips) && json_array_size(oips) == 2)
            bad_policy(causes, pol, "must be 'SingleStack' to release the secondary cluster IP");
        if (json_array_size(ofams) > json_array_size(fams) && json_array_size(ofams) == 2)
            bad_policy(causes, pol, "must be 'SingleStack' to release the secondary IP family");
    }
    if (single && json_array_size(ips) == 2)
        bad_policy(causes, pol,
                   "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs "
                   "are specified");
    if (single && json_array_size(fams) == 2)
        bad_policy(causes, pol,
                   "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families "
                   "are specified");
    size_t i;
    json_t *v;
    json_array_foreach(ips, i, v)
    {
        const char *ip = json_string_value(v);
        if (!ip || strcmp(ip, "None") == 0)
            break;
        if (i < json_array_size(fams))
            continue;
        if (ip_is_v6(ip)) {
            char *path = ks_printf("spec.clusterIPs[%zu]", i);
            char *vals = ks_go_strings(ips, "[]string");
            ks_cause(causes, "FieldValueInvalid", path,
                     "Invalid value: %s: IPv6 is not configured on this cluster", vals);
            free(vals);
            free(path);
        } else {
            if (!fams) {
                fams = json_array();
                json_object_set_new(spec, "ipFamilies", fams);
            }
            json_array_append_new(fams, json_string("IPv4"));
        }
    }
    if (json_array_size(causes))
        return;
    if (!fams) {
        fams = json_pack("[s]", "IPv4");
        json_object_set_new(spec, "ipFamilies", fams);
    }
    const char *c = json_string_value(json_object_get(spec, "clusterIP"));
    if (c && strcmp(c, "None") == 0 && selectorless) {
        if (json_array_size(fams) < 2 && !single)
            json_array_append_new(
                fams, json_string(strcmp(str_or(json_string_value(json_array_get(fams, 0)), ""),
                                         "IPv4") == 0
                                      ? "IPv6"
                                      : "IPv4"));
        return;
    }
    if (strcmp(pol, "RequireDualStack") == 0)
        bad_policy(causes, pol, "this cluster is not configured for dual-stack services");
    json_array_foreach(fams, i, v)
    {
        const char *f = str_or(json_string_value(v), "");
        if (strcmp(f, "IPv4") == 0)
            continue;
        char *path = ks_printf("spec.ipFamilies[%zu]", i);
        char *q = ks_go_quote(f);
        ks_cause(causes, "FieldValueInvalid", path,
                 "Invalid value: %s: not configured on this cluster", q);
        free(q);
        free(path);
    }
}

/* allocClusterIPs: a Service without its clusterIP gets the next free one
 * of 10.96.0.0/12 (a headless one none); clusterIPs follows. */
static void alloc_cluster_ip(struct ks_server *ks, json_t *spec)
{
    const char *cip = json_string_value(json_object_get(spec, "clusterIP"));
    if (cip && *cip)
        return;
    char ip[32];
    pthread_mutex_lock(&ks->lock);
    for (int tries = 0; tries < 64000; tries++) { /* the next one not held */
        uint32_t n = ks->next_ip++;
        snprintf(ip, sizeof(ip), "10.96.%u.%u", (n / 250) % 256, n % 250 + 2);
        if (!json_object_get(ks->svc_alloc, ip))
            break;
    }
    pthread_mutex_unlock(&ks->lock);
    json_object_set_new(spec, "clusterIP", json_string(ip));
    json_object_set_new(spec, "clusterIPs", json_pack("[s]", ip));
}

/*
 * The Service allocators (pkg/registry/core/service/storage/alloc.go),
 * which run before validation (the storage's BeginCreate/BeginUpdate):
 * a clusterIP asked for must be in the service range (10.96.0.0/12, the
 * network and broadcast addresses excluded, as the bitmap allocator) and
 * not held by another Service; a NodePort or LoadBalancer Service's
 * nodePort must be in 30000-32767 and free. The first refusal is the
 * answer, a 422 with one cause. Fills r and returns -1; 0 when free.
 */
static int service_allocations(struct ks_server *ks, const struct ks_res *def, json_t *obj,
                               const json_t *old, const char *key, const char *name,
                               struct ks_reply *r)
{
    if (strcmp(def->key, "services") != 0)
        return 0;
    json_t *spec = json_object_get(obj, "spec");
    const char *type = svc_type(spec);
    json_t *causes = json_array();
    if (strcmp(type, "ExternalName") != 0) {
        /* normalizeClusterIPs of a create: clusterIP alone (an old
         * client) is clusterIPs too; clusterIPs alone stays for the
         * validation to refuse */
        const char *cip = json_string_value(json_object_get(spec, "clusterIP"));
        if (!old && cip && *cip && json_array_size(json_object_get(spec, "clusterIPs")) == 0)
            json_object_set_new(spec, "clusterIPs", json_pack("[s]", cip));
        init_ip_families(spec, json_object_get(old, "spec"), causes);
        if (json_array_size(causes) == 0)
            alloc_cluster_ip(ks, spec);
    }
    pthread_mutex_lock(&ks->lock);
    size_t i;
    json_t *v;
    if (json_array_size(causes) == 0 && strcmp(type, "ExternalName") != 0) {
        json_array_foreach(json_object_get(spec, "clusterIPs"), i, v)
        {
            const char *ip = json_string_value(v);
            struct in_addr a;
            if (!ip || !*ip || strcmp(ip, "None") == 0 || inet_pton(AF_INET, ip, &a) != 1)
                continue; /* validation answers for the rest */
            const char *owner = json_string_value(json_object_get(ks->svc_alloc, ip));
            uint32_t h = ntohl(a.s_addr), base = 0x0a600000u; /* 10.96.0.0/12 */
            char *why = NULL;
            if (h <= base || h >= base + (1u << 20) - 1)
                why = ks_printf("the provided IP (%s) is not in the valid range. The range of "
                                "valid IPs is 10.96.0.0/12",
                                ip);
            else if (owner && strcmp(owner, key) != 0)
                why = ks_strdup("provided IP is already allocated");
            if (why) {
                char *vals = ks_go_strings(json_object_get(spec, "clusterIPs"), "[]string");
                char *m =
                    ks_printf("Invalid value: %s: failed to allocate IP %s: %s", vals, ip, why);
                json_array_append_new(causes,
                                      json_pack("{s:s,s:s,s:s}", "reason", "FieldValueInvalid",
                                                "message", m, "field", "spec.clusterIPs"));
                free(m);
                free(vals);
                free(why);
                break;
            }
        }
    }
    if (json_array_size(causes) == 0 && svc_needs_node_ports(spec)) {
        json_array_foreach(json_object_get(spec, "ports"), i, v)
        {
            json_int_t np = json_integer_value(json_object_get(v, "nodePort"));
            if (np == 0)
                continue;
            char k[48];
            snprintf(k, sizeof(k), "node-port:%" JSON_INTEGER_FORMAT, np);
            const char *owner = json_string_value(json_object_get(ks->svc_alloc, k));
            const char *why = np < 30000 || np > 32767
                                  ? "provided port is not in the valid range. The range of "
                                    "valid ports is 30000-32767"
                              : owner && strcmp(owner, key) != 0 ? "provided port is already "
                                                                   "allocated"
                                                                 : NULL;
            if (why) {
                char *f = ks_printf("spec.ports[%zu].nodePort", i);
                char *m = ks_printf("Invalid value: %" JSON_INTEGER_FORMAT ": %s", np, why);
                json_array_append_new(causes,
                                      json_pack("{s:s,s:s,s:s}", "reason", "FieldValueInvalid",
                                                "message", m, "field", f));
                free(f);
                free(m);
                break;
            }
        }
    }
    pthread_mutex_unlock(&ks->lock);
    if (json_array_size(causes) == 0) {
        json_decref(causes);
        return 0;
    }
    reply_invalid(r, def, name, causes);
    return -1;
}

/* ---- namespace check ------------------------------------------------------- */

/* Lock held. 0, or fills r with the answer of the NamespaceLifecycle
 * admission plugin (k8s.io/apiserver pkg/admission/plugin/namespace/
 * lifecycle, Admit) to a create of def named name (as the request gave it:
 * "" for a generateName create) in ns: the namespace client's NotFound for
 * a namespace that does not exist, admission.NewForbidden with the
 * NamespaceTerminating cause for one being terminated. */
static int check_namespace(struct ks_server *ks, const struct ks_res *def, const char *ns,
                           const char *name, struct ks_reply *r)
{
    const json_t *nsobj = ks_store_get(ks, "namespaces", ns);
    if (!nsobj) {
        char *msg = ks_printf("namespaces \"%s\" not found", ns);
        ks_reply_status(r, 404, "NotFound", msg,
                        json_pack("{s:s,s:s}", "name", ns, "kind", "namespaces"));
        free(msg);
        return -ENOENT;
    }
    if (meta_str(nsobj, "deletionTimestamp")) {
        /* extractResourceName: the request's name, else "Unknown" */
        const char *n = name && *name ? name : "Unknown";
        char *q = ks_qualified(def);
        char *msg = ks_printf("%s \"%s\" is forbidden: unable to create new content in namespace "
                              "%s because it is being terminated",
                              q, n, ns);
        char *why = ks_printf("namespace %s is being terminated", ns);
        json_t *details = ks_details(def, n);
        json_object_set_new(details, "causes",
                            json_pack("[{s:s,s:s,s:s}]", "reason", "NamespaceTerminating",
                                      "message", why, "field", "metadata.namespace"));
        ks_reply_status(r, 403, "Forbidden", msg, details);
        free(why);
        free(msg);
        free(q);
        return -EPERM;
    }
    return 0;
}

/* ---- request body ------------------------------------------------------------ */

static bool is_apply(const struct ks_api_req *q);

enum patch_kind { PATCH_NONE, PATCH_MERGE, PATCH_STRATEGIC, PATCH_JSON, PATCH_APPLY };

static enum patch_kind patch_kind(const char *ct)
{
    if (!ct)
        return PATCH_NONE;
    if (strncmp(ct, "application/merge-patch+json", 28) == 0)
        return PATCH_MERGE;
    if (strncmp(ct, "application/strategic-merge-patch+json", 38) == 0)
        return PATCH_STRATEGIC;
    if (strncmp(ct, "application/json-patch+json", 27) == 0)
        return PATCH_JSON;
    if (strncmp(ct, "application/apply-patch+yaml", 28) == 0)
        return PATCH_APPLY;
    return PATCH_NONE;
}

static json_t *parse_body(struct ks_api_req *q, struct ks_reply *r)
{
    json_error_t jerr;
    if (!q->body || q->body_len == 0) {
        reply_bad_request(r, "the body of the request was empty");
        return NULL;
    }
    if (ks_pb_media_type(q->content_type)) {
        json_t *obj = NULL;
        char *err = NULL;
        int rc = ks_pb_decode(q->body, q->body_len, &obj, &err);
        if (rc == -ENOTSUP) /* a kind without a protobuf form (CRs, CRDs) */
            ks_reply_status(r, 415, "UnsupportedMediaType",
                            "the body of the request was in an unknown format - accepted media "
                            "types include: application/json, application/yaml",
                            NULL);
        else if (rc != 0)
            reply_bad_request(r, err);
        free(err);
        return obj;
    }
    /* A merge or JSON patch is decoded as any JSON value: its shape is
     * answered by patch_body_shape as the apiserver answers it. */
    enum patch_kind pk = patch_kind(q->content_type);
    size_t flags = pk == PATCH_MERGE || pk == PATCH_JSON ? JSON_DECODE_ANY : 0;
    /* A create's or update's object: members given twice are found by the
     * same pass; only a body that has some is scanned again for their
     * paths (body_duplicates). */
    bool object = strcmp(q->verb, "create") == 0 || strcmp(q->verb, "update") == 0;
    json_t *v =
        json_loadb(q->body, q->body_len, flags | (object ? JSON_REJECT_DUPLICATES : 0), &jerr);
    if (object && v)
        q->body_unique = true;
    else if (object && json_error_code(&jerr) == json_error_duplicate_key)
        v = json_loadb(q->body, q->body_len, flags, &jerr);
    if (!v && is_apply(q)) { /* apply-patch+yaml: YAML or JSON */
        char *err = NULL;
        v = ks_yaml_load(q->body, q->body_len, &err);
        if (!v) {
            char *msg = ks_printf("error decoding YAML: %s", err);
            reply_bad_request(r, msg);
            free(msg);
            free(err);
            return NULL;
        }
    }
    if (!v) {
        char *msg =
            ks_printf("the object provided is unrecognized (must be of type JSON): %s", jerr.text);
        reply_bad_request(r, msg);
        free(msg);
        return NULL;
    }
    return v;
}

/* Check apiVersion/kind of a body against the URL; fill them when absent. */
static int check_type(const struct ks_res *def, const char *version, json_t *obj,
                      struct ks_reply *r)
{
    if (!json_is_object(obj)) {
        reply_bad_request(r, "the object provided is unrecognized (must be a JSON object)");
        return -EINVAL;
    }
    char *av = ks_api_version(def->group, version);
    const char *got = json_string_value(json_object_get(obj, "apiVersion"));
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    int rc = 0;
    if (got && strcmp(got, av) != 0) {
        char *msg = ks_printf("the API version in the data (%s) does not match the expected API "
                              "version (%s)",
                              got, av);
        reply_bad_request(r, msg);
        free(msg);
        rc = -EINVAL;
    } else if (kind && strcmp(kind, def->kind) != 0) {
        char *msg = ks_printf("the kind in the data (%s) does not match the expected kind (%s)",
                              kind, def->kind);
        reply_bad_request(r, msg);
        free(msg);
        rc = -EINVAL;
    } else {
        json_object_set_new(obj, "apiVersion", json_string(av));
        json_object_set_new(obj, "kind", json_string(def->kind));
    }
    free(av);
    return rc;
}

/*
 * The request's fieldValidation (--strict-fields: always Strict). 0, or
 * the apiserver's answer in r: an unsupported value is a 422 as
 * apimachinery/pkg/apis/meta/v1/validation.ValidateFieldValidation makes it.
 */
static int field_validation(struct ks_api_req *q, enum ks_field_validation *mode,
                            struct ks_reply *r)
{
    const char *fv = ks_query(q, "fieldValidation");
    if (ks_field_validation_parse(fv, mode) != 0) {
        const char *opts = strcmp(q->verb, "create") == 0  ? "CreateOptions"
                           : strcmp(q->verb, "patch") == 0 ? "PatchOptions"
                                                           : "UpdateOptions";
        char *m = ks_printf("Unsupported value: \"%s\": supported values: \"\", \"Ignore\", "
                            "\"Strict\", \"Warn\"",
                            fv);
        ks_reply_invalid_gk(r, "meta.k8s.io", opts, "",
                            one_cause("FieldValueNotSupported", "fieldValidation", m));
        free(m);
        return -EINVAL;
    }
    if (q->ks->strict_fields)
        *mode = KS_FV_STRICT;
    if (!r->warnings)
        r->warnings = json_array();
    return 0;
}

/* The members a create's or update's JSON body gives twice (the strict
 * decoder's "duplicate field"); NULL for other bodies (a patch is not the
 * object, protobuf has no duplicates, an apply's YAML is not checked) and
 * for one parse_body found none in.
 * @ref new */
static json_t *body_duplicates(struct ks_api_req *q)
{
    if (q->body_unique || !q->body || !q->body_len || ks_pb_media_type(q->content_type) ||
        is_apply(q) || (strcmp(q->verb, "create") != 0 && strcmp(q->verb, "update") != 0))
        return NULL;
    return ks_json_duplicates(q->body, q->body_len);
}

/* Built-in kinds: the schema check of kschema.c. 0 or the apiserver's
 * answer in r. */
static int typed_check(struct ks_api_req *q, const struct ks_res *def, json_t *obj,
                       const char *name, struct ks_reply *r)
{
    enum ks_field_validation mode;
    if (field_validation(q, &mode, r) != 0)
        return -EINVAL;
    struct ks_kcheck c;
    json_t *dups = mode == KS_FV_IGNORE ? NULL : body_duplicates(q);
    int rc = ks_schema_check(def, q->version, obj, mode, dups, r->warnings, &c);
    json_decref(dups);
    if (rc == 0)
        return 0;
    if (c.code == 422) {
        reply_invalid(r, def, name, c.causes);
        c.causes = NULL;
    } else {
        reply_bad_request(r, c.message);
    }
    ks_kcheck_clear(&c);
    return -EINVAL;
}

/*
 * Custom resources: pruning of the fields the structural schema does not
 * know, as the apiserver's strict decoding sees them (Strict: 400
 * 'MyResource in version "v1" cannot be handled as a MyResource: strict
 * decoding error: unknown field "spec.foo"'; Warn: pruned with a Warning;
 * Ignore: pruned), then defaults and validation (422). 0 or r filled.
 */
static int cr_schema(struct ks_api_req *q, const struct ks_res *def, json_t *obj, const json_t *old,
                     const char *name, json_t *meta_causes, struct ks_reply *r)
{
    const struct ks_version *v = def->crd ? ks_res_version(def, q->version) : NULL;
    if (!v || !v->schema) {
        if (meta_causes) {
            reply_invalid(r, def, name, meta_causes);
            return -EINVAL;
        }
        return 0;
    }
    enum ks_field_validation mode;
    if (field_validation(q, &mode, r) != 0) {
        json_decref(meta_causes);
        return -EINVAL;
    }
    /* the decoder's duplicates (anywhere: it decodes into maps), then
     * what pruning drops */
    json_t *unknown = json_array();
    json_t *dups = mode == KS_FV_IGNORE ? NULL : body_duplicates(q);
    size_t di;
    json_t *d;
    json_array_foreach(dups, di, d)
    {
        json_array_append_new(unknown,
                              json_sprintf("duplicate field \"%s\"", json_string_value(d)));
    }
    json_decref(dups);
    ks_kschema_prune_metadata(obj, unknown);
    ks_schema_prune_report(obj, v->schema, unknown);
    if (json_array_size(unknown) && mode == KS_FV_STRICT) {
        char *list = ks_join(unknown, "", ", ", "");
        char *msg = ks_printf("%s in version \"%s\" cannot be handled as a %s: strict decoding "
                              "error: %s",
                              def->kind, q->version, def->kind, list);
        reply_bad_request(r, msg);
        free(msg);
        free(list);
        json_decref(unknown);
        json_decref(meta_causes);
        return -EINVAL;
    }
    if (!r->warnings)
        r->warnings = json_array();
    if (mode == KS_FV_WARN)
        json_array_extend(r->warnings, unknown);
    json_decref(unknown);
    ks_schema_default(obj, v->schema);
    /* the strategy's validation in the request's version (one strategy
     * per version), old converted to it; /status writes by the status
     * strategy (docs/kubesim.md §1) */
    bool status_only = old && q->sub && strcmp(q->sub, "status") == 0;
    json_t *causes = NULL;
    char *err = NULL;
    if (ks_cr_validate(v->schema, obj, old, status_only, meta_causes, r->warnings, &causes, &err) !=
        0) {
        reply_cel_outage(r, err);
        free(err);
        return -EIO;
    }
    if (json_array_size(causes)) {
        reply_invalid(r, def, name, causes);
        return -EINVAL;
    }
    json_decref(causes);
    return 0;
}

/* A CRD's causes with the InternalError of a CEL helper that failed while
 * compiling its rules: answered as a 500 (reply_cel_outage), causes
 * released; else false. */
static bool crd_cel_outage(json_t *causes, struct ks_reply *r)
{
    size_t i;
    json_t *c;
    json_array_foreach(causes, i, c)
    {
        const char *m = json_string_value(json_object_get(c, "message"));
        if (strcmp(str_or(json_string_value(json_object_get(c, "reason")), ""), "InternalError") ==
                0 &&
            m && strncmp(m, "Internal error: CEL helper", 26) == 0) {
            reply_cel_outage(r, m + strlen("Internal error: "));
            json_decref(causes);
            return true;
        }
    }
    return false;
}

/* Request object (version) -> storage version, defaulted. @ref new */
static int to_storage(struct ks_server *ks, const struct ks_res *def, const json_t *obj,
                      const char *version, json_t **ret, struct ks_reply *r)
{
    json_t *out = NULL;
    char *err = NULL;
    if (strcmp(version, def->storage) == 0) {
        out = json_deep_copy(obj);
    } else if (ks_convert_one(ks, def, obj, def->storage, &out, &err) != 0) {
        reply_internal(r, err);
        free(err);
        return -EIO;
    }
    if (def->crd) {
        const struct ks_version *sv = ks_res_version(def, def->storage);
        if (sv && sv->schema) {
            ks_schema_prune(out, sv->schema);
            ks_schema_default(out, sv->schema);
        }
    }
    if (def->typed) {
        ks_kschema_fill(def, out);
        ks_typed_order(out);
    }
    *ret = out;
    return 0;
}

static void respond_object(struct ks_server *ks, const struct ks_res *def, const json_t *stored,
                           const char *version, unsigned int code, struct ks_reply *r)
{
    json_t *out = NULL;
    char *err = NULL;
    if (one_in_version(ks, def, stored, version, &out, &err) != 0) {
        reply_internal(r, err);
        free(err);
        return;
    }
    ks_reply_json(r, code, out, !def->typed);
    json_decref(out);
}

/* The admission request of a write (obj and old may be NULL). */
static struct ks_admit_req admit_req(struct ks_api_req *q, const struct ks_res *def, const char *op,
                                     json_t *obj, const json_t *old, const char *name, bool dry)
{
    struct ks_admit_req ar = {
        .def = def,
        .version = q->version,
        .operation = op,
        .subresource = q->sub ? q->sub : "",
        .ns = q->ns ? q->ns : "",
        .name = name,
        .obj = obj,
        .old = old,
        .dry_run = dry,
        .field_manager = ks_query(q, "fieldManager"),
        .user = q->user,
    };
    return ar;
}

/* A webhook's denial (body: malloc'd, taken) as the answer. */
static int admit_denied(struct ks_reply *r, int code, char *body)
{
    free(r->body);
    r->code = (unsigned int)code;
    r->body = body;
    r->len = strlen(body);
    r->content_type = "application/json";
    return -EPERM;
}

/* Mutating admission: the mutating webhooks, their output pruned,
 * defaulted and validated again like a request body. obj (may be NULL) is
 * replaced in place. */
static int admit_mutate(struct ks_api_req *q, const struct ks_res *def, const char *op, json_t *obj,
                        const json_t *old, const char *name, bool dry, struct ks_reply *r)
{
    int code = 0;
    char *body = NULL;
    json_t *mutated = NULL;
    if (!r->warnings)
        r->warnings = json_array();
    /* The apiserver runs mutating admission before the registry's create
     * (apiserver pkg/registry/generic/registry/store.go, Store.create)
     * fills metadata.uid and creationTimestamp (FillObjectMetaSystemFields)
     * and names a generateName object, so mutating webhooks see none of
     * them at CREATE: a generated name is not in the object and the
     * request's name is the one sent (name: ""). */
    json_t *unsystem = NULL;
    struct ks_admit_req mar = admit_req(q, def, op, obj, old, name, dry);
    if (obj && strcmp(op, "CREATE") == 0) {
        unsystem = json_deep_copy(obj);
        json_t *umd = json_object_get(unsystem, "metadata");
        json_object_del(umd, "uid");
        json_object_del(umd, "creationTimestamp");
        if (!*name)
            json_object_del(umd, "name");
        mar.obj = unsystem;
    }
    int mrc = ks_admit_mutate(q->ks, &mar, r->warnings, &mutated, &code, &body);
    json_decref(unsystem);
    if (mrc != 0)
        return admit_denied(r, code, body);
    if (mutated && obj) {
        /* managedFieldsValidatingAdmissionController (apiserver pkg/
         * endpoints/handlers/fieldmanager/admission.go, Admit): entries a
         * webhook leaves that do not decode are put back as they were,
         * with a warning */
        json_t *mmd = json_object_get(mutated, "metadata");
        char *err = ks_ssa_decode_error(json_object_get(mmd, "managedFields"));
        if (err && json_is_object(mmd)) {
            json_t *before = json_object_get(meta(obj), "managedFields");
            if (before)
                json_object_set(mmd, "managedFields", before);
            else
                json_object_del(mmd, "managedFields");
            char *w = ks_printf(".metadata.managedFields was in an invalid state after admission; "
                                "this could be caused by an outdated mutating admission "
                                "controller; please fix your requests: %s",
                                err);
            json_array_append_new(r->warnings, json_string(w));
            free(w);
        }
        free(err);
        /* The caller holds pointers into obj's name and namespace strings:
         * keep those values (the apiserver does not let a webhook rename). */
        json_t *omd = json_object_get(obj, "metadata");
        static const char *const keep[] = {"name", "namespace", "uid", "creationTimestamp", NULL};
        for (const char *const *f = keep; json_is_object(mmd) && *f; f++) {
            if (json_object_get(omd, *f))
                json_object_set(mmd, *f, json_object_get(omd, *f));
        }
        json_object_update(obj, mutated);
        const char *k;
        void *tmp;
        json_t *v;
        json_object_foreach_safe(obj, tmp, k, v)
        {
            if (!json_object_get(mutated, k))
                json_object_del(obj, k);
        }
        json_decref(mutated);
        json_t *causes = ks_validate_object(def, obj, old, false);
        if (!causes)
            causes = ks_ssa_validate(obj);
        /* the registry's 422 names the object (a generated name too) */
        const char *obj_name = str_or(meta_str(obj, "name"), name);
        if (causes && !def->crd) {
            reply_invalid(r, def, obj_name, causes);
            return -EPERM;
        }
        if (cr_schema(q, def, obj, old, obj_name, causes, r) != 0)
            return -EPERM;
        if (def->typed)
            ks_typed_order(obj);
    }
    return 0;
}

/* Validating admission: the validating webhooks. */
static int admit_validate(struct ks_api_req *q, const struct ks_res *def, const char *op,
                          json_t *obj, const json_t *old, const char *name, bool dry,
                          struct ks_reply *r)
{
    int code = 0;
    char *body = NULL;
    if (!r->warnings)
        r->warnings = json_array();
    struct ks_admit_req ar = admit_req(q, def, op, obj, old, name, dry);
    if (ks_admit(q->ks, &ar, r->warnings, &code, &body) == 0)
        return 0;
    return admit_denied(r, code, body);
}

/* Admission as the apiserver chains it: mutating webhooks first, then the
 * validating ones. obj (may be NULL) is replaced in place. */
static int admit(struct ks_api_req *q, const struct ks_res *def, const char *op, json_t *obj,
                 const json_t *old, const char *name, bool dry, struct ks_reply *r)
{
    if (admit_mutate(q, def, op, obj, old, name, dry, r) != 0)
        return -EPERM;
    return admit_validate(q, def, op, obj, old, name, dry, r);
}

/* ---- CRD status ---------------------------------------------------------------- */

static bool str_in(const json_t *arr, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v)
    {
        if (strcmp(str_or(json_string_value(v), ""), s) == 0)
            return true;
    }
    return false;
}

/*
 * status.storedVersions of an updated CRD, as the apiserver keeps it: a
 * spec update first adds the new storage version (the CRD strategy's
 * PrepareForUpdate), then both spec and status updates are checked the way
 * ValidateCustomResourceDefinitionStoredVersions does
 * (staging/src/k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/
 * validation/validation.go, the messages of recent releases; values
 * printed as JSON): at least one entry, the storage version among
 * them, each one still in spec.versions. So a version leaves storedVersions
 * only through /status, and leaves spec.versions only after that. Returns
 * the causes (@ref new) or NULL.
 */
static json_t *crd_stored_versions(json_t *crd, bool add_storage)
{
    json_t *status = json_object_get(crd, "status");
    if (!json_is_object(status)) {
        status = json_object();
        json_object_set_new(crd, "status", status);
    }
    json_t *stored = json_object_get(status, "storedVersions");
    if (!json_is_array(stored)) {
        stored = json_array();
        json_object_set_new(status, "storedVersions", stored);
    }
    const json_t *versions = json_object_get(json_object_get(crd, "spec"), "versions");
    const char *storage = NULL;
    size_t i;
    json_t *v;
    json_array_foreach(versions, i, v)
    {
        if (json_is_true(json_object_get(v, "storage")))
            storage = json_string_value(json_object_get(v, "name"));
    }
    if (add_storage && storage && !str_in(stored, storage))
        json_array_append_new(stored, json_string(storage));
    json_t *causes = json_array();
    if (json_array_size(stored) == 0)
        json_array_append_new(causes,
                              json_pack("{s:s,s:s,s:s}", "reason", "FieldValueInvalid", "message",
                                        "Invalid value: []: must have at least one stored "
                                        "version",
                                        "field", "status.storedVersions"));
    if (storage && json_array_size(stored) && !str_in(stored, storage)) {
        char *list = ks_dump(stored, false, NULL);
        char *m = ks_printf("Invalid value: %s: must have the storage version %s", list, storage);
        free(list);
        json_array_append_new(causes, json_pack("{s:s,s:s,s:s}", "reason", "FieldValueInvalid",
                                                "message", m, "field", "status.storedVersions"));
        free(m);
    }
    json_array_foreach(stored, i, v)
    {
        const char *name = str_or(json_string_value(v), "");
        bool found = false;
        size_t j;
        json_t *sv;
        json_array_foreach(versions, j, sv)
        {
            if (strcmp(str_or(json_string_value(json_object_get(sv, "name")), ""), name) == 0)
                found = true;
        }
        if (found)
            continue;
        char *f = ks_printf("status.storedVersions[%zu]", i);
        char *m =
            ks_printf("Invalid value: \"%s\": missing from spec.versions; %s was previously a "
                      "storage version, and must remain in spec.versions until a storage "
                      "migration ensures no data remains persisted in %s and removes %s from "
                      "status.storedVersions",
                      name, name, name, name);
        json_array_append_new(causes, json_pack("{s:s,s:s,s:s}", "reason", "FieldValueInvalid",
                                                "message", m, "field", f));
        free(f);
        free(m);
    }
    if (json_array_size(causes) == 0) {
        json_decref(causes);
        return NULL;
    }
    return causes;
}

static json_t *crd_initial_status(const json_t *crd)
{
    const char *storage = NULL;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(json_object_get(crd, "spec"), "versions"), i, v)
    {
        if (json_is_true(json_object_get(v, "storage")))
            storage = json_string_value(json_object_get(v, "name"));
    }
    return json_pack("{s:n,s:{s:s,s:s},s:[s]}", "conditions", "acceptedNames", "plural", "", "kind",
                     "", "storedVersions", storage ? storage : "v1");
}

/* Lock held: the CRD controller's "Established" update. */
static void crd_establish(struct ks_server *ks, const struct ks_res *crd_def, const char *name)
{
    const json_t *cur = ks_store_get(ks, crd_def->key, name);
    if (!cur)
        return;
    json_t *obj = json_deep_copy(cur);
    json_t *status = ks_ensure_obj(obj, "status");
    char now[32];
    ks_now_rfc3339(now, sizeof(now));
    json_object_set_new(status, "conditions",
                        json_pack("[{s:s,s:s,s:s,s:s,s:s},{s:s,s:s,s:s,s:s,s:s}]", "type",
                                  "NamesAccepted", "status", "True", "lastTransitionTime", now,
                                  "reason", "NoConflicts", "message", "no conflicts found", "type",
                                  "Established", "status", "True", "lastTransitionTime", now,
                                  "reason", "InitialNamesAccepted", "message",
                                  "the initial names have been accepted"));
    json_t *names = json_deep_copy(json_object_get(json_object_get(obj, "spec"), "names"));
    json_object_set_new(status, "acceptedNames", names ? names : json_object());
    json_t *stored = json_object_get(status, "storedVersions");
    if (!json_is_array(stored)) {
        stored = json_array();
        json_object_set_new(status, "storedVersions", stored);
    }
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(json_object_get(obj, "spec"), "versions"), i, v)
    {
        if (!json_is_true(json_object_get(v, "storage")))
            continue;
        bool have = false;
        size_t j;
        json_t *s;
        json_array_foreach(stored, j, s)
        {
            if (json_equal(s, json_object_get(v, "name")))
                have = true;
        }
        if (!have)
            json_array_append(stored, json_object_get(v, "name"));
    }
    if (json_equal(obj, cur)) {
        json_decref(obj);
        return;
    }
    ks_store_put(ks, crd_def, name, obj);
}

static bool is_crd(const struct ks_res *def)
{
    return strcmp(def->key, "customresourcedefinitions.apiextensions.k8s.io") == 0;
}

/* ---- get / list ------------------------------------------------------------------- */

/* The Table version the client asks for, or NULL. */
static const char *table_version(struct ks_api_req *q)
{
    return ks_table_accept(MHD_lookup_connection_value(q->conn, MHD_HEADER_KIND, "Accept"));
}

/* The metadata-only form the client asks for (partial.c), or NONE. */
static enum ks_partial partial_kind(struct ks_api_req *q, const char **ret_version)
{
    return ks_partial_accept(MHD_lookup_connection_value(q->conn, MHD_HEADER_KIND, "Accept"),
                             ret_version);
}

static void reply_not_acceptable(struct ks_reply *r, const struct ks_res *def, enum ks_partial want)
{
    char *msg = ks_partial_mismatch(def, want);
    ks_reply_status(r, 406, "NotAcceptable", msg, NULL);
    free(msg);
}

static void do_get(struct ks_api_req *q, const struct ks_res *def, const char *key,
                   struct ks_reply *r)
{
    struct ks_server *ks = q->ks;
    pthread_mutex_lock(&ks->lock);
    json_t *cur = json_incref(ks_store_get(ks, def->key, key));
    pthread_mutex_unlock(&ks->lock);
    if (!cur) {
        reply_not_found(r, def, q->name);
        return;
    }
    const char *tv = table_version(q);
    const char *pv = NULL;
    enum ks_partial pk = tv ? KS_PARTIAL_NONE : partial_kind(q, &pv);
    if (pk == KS_PARTIAL_LIST) {
        reply_not_acceptable(r, def, pk);
        json_decref(cur);
        return;
    }
    if (pk == KS_PARTIAL_OBJECT) {
        json_t *out = NULL;
        char *err = NULL;
        if (one_in_version(ks, def, cur, q->version, &out, &err) != 0) {
            reply_internal(r, err);
            free(err);
        } else {
            json_t *p = ks_partial_object(out, pv);
            ks_reply_json(r, 200, p, false);
            json_decref(p);
            json_decref(out);
        }
        json_decref(cur);
        return;
    }
    if (!tv) {
        respond_object(ks, def, cur, q->version, 200, r);
        json_decref(cur);
        return;
    }
    json_t *objs = NULL;
    char *err = NULL;
    json_t *one = json_pack("[O]", cur);
    if (in_version(ks, def, one, q->version, &objs, &err) != 0) {
        reply_internal(r, err);
        free(err);
    } else {
        json_t *md =
            json_pack("{s:s}", "resourceVersion", str_or(meta_str(cur, "resourceVersion"), ""));
        json_t *table = ks_table_build(def, q->version, objs, md, tv,
                                       ks_table_include(ks_query(q, "includeObject")), true);
        ks_reply_json(r, 200, table, false);
        json_decref(table);
        json_decref(md);
        json_decref(objs);
    }
    json_decref(one);
    json_decref(cur);
}

struct list_opts {
    struct ks_selector *labels;
    struct ks_selector *fields;
    bool filtered; /* a label or field selector was given */
    long limit;
    char *start;       /* continue after this key */
    bool cont;         /* a continue token was given */
    long long cont_rv; /* its resourceVersion; -1: the latest (inconsistent) */
};

/* Idempotent: an error path may free before its caller does. */
static void list_opts_free(struct list_opts *o)
{
    ks_selector_free(o->labels);
    ks_selector_free(o->fields);
    free(o->start);
    o->labels = o->fields = NULL;
    o->start = NULL;
}

static int parse_list_opts(struct ks_api_req *q, const struct ks_res *def, struct list_opts *o,
                           struct ks_reply *r)
{
    char *err = NULL;
    memset(o, 0, sizeof(*o));
    const char *ls = ks_query(q, "labelSelector");
    const char *fs = ks_query(q, "fieldSelector");
    o->filtered = (ls && *ls) || (fs && *fs);
    if (ks_selector_parse(ls, false, &o->labels, &err) != 0 ||
        ks_selector_parse(fs, true, &o->fields, &err) != 0 ||
        ks_selector_bind_fields(def, o->fields, &err) != 0) {
        reply_bad_request(r, err);
        free(err);
        return -EINVAL;
    }
    long long lim = 0;
    char *bad = NULL;
    if (ks_query_int(q, "limit", 0, &lim, &bad) < 0) {
        reply_bad_request(r, bad);
        free(bad);
        return -EINVAL;
    }
    o->limit = lim > 0 ? (long)lim : 0;
    /* After decoding the parameters, as ListResource does. */
    if (ks_list_options_check(q, false, r) != 0)
        return -EINVAL;
    const char *cont = ks_query(q, "continue");
    if (cont && *cont) {
        size_t n = 0;
        unsigned char *raw = ks_base64_decode(cont, &n);
        json_t *tok = raw ? json_loadb((const char *)raw, n, 0, NULL) : NULL;
        free(raw);
        const char *start = json_string_value(json_object_get(tok, "start"));
        json_t *trv = json_object_get(tok, "rv");
        if (!start || !json_is_integer(trv) || json_integer_value(trv) < -1 ||
            json_integer_value(trv) == 0) {
            json_decref(tok);
            reply_bad_request(r, "continue key is not valid: illegal base64 data");
            return -EINVAL;
        }
        o->start = ks_strdup(start);
        o->cont = true;
        o->cont_rv = (long long)json_integer_value(trv);
        json_decref(tok);
        const char *rvq = ks_query(q, "resourceVersion");
        if (rvq && *rvq && strcmp(rvq, "0") != 0) {
            reply_bad_request(r, "specifying resource version is not allowed when using continue");
            list_opts_free(o);
            return -EINVAL;
        }
    }
    return 0;
}

static char *continue_token(long long rv, const char *start)
{
    json_t *tok =
        json_pack("{s:s,s:I,s:s}", "v", "meta.k8s.io/v1", "rv", (json_int_t)rv, "start", start);
    char *raw = ks_dump(tok, false, NULL);
    char *token = ks_base64_encode((const unsigned char *)raw, strlen(raw));
    free(raw);
    json_decref(tok);
    return token;
}

/* Lock held. Which state a list reads: the current one, the snapshot a
 * continue token names, or resourceVersionMatch=Exact. The map (@ref new)
 * and its resourceVersion, or -1 with the answer in r. */
static int list_source(struct ks_api_req *q, const struct ks_res *def, const struct list_opts *o,
                       json_t **ret_map, uint64_t *ret_rv, struct ks_reply *r)
{
    struct ks_server *ks = q->ks;
    uint64_t at = ks->rv;
    bool snapshot = false;
    const char *rvq = ks_query(q, "resourceVersion");
    const char *match = ks_query(q, "resourceVersionMatch");
    if (o->cont && o->cont_rv > 0) {
        /* Every page is served at the resourceVersion of the first. */
        if ((uint64_t)o->cont_rv > ks->rv) {
            reply_bad_request(r, "continue key is not valid: illegal base64 data");
            return -1;
        }
        if ((uint64_t)o->cont_rv < ks->hist_floor) {
            /* As the apiserver does after an etcd compaction: 410 with a
             * token that continues from the latest state. */
            char *tok = continue_token(-1, o->start);
            json_t *st = json_pack(
                "{s:s,s:s,s:{s:s},s:s,s:s,s:s,s:i}", "kind", "Status", "apiVersion", "v1",
                "metadata", "continue", tok, "status", "Failure", "message",
                "The provided continue parameter is too old to display a consistent list "
                "result. You can start a new list without the continue parameter, or use the "
                "continue token in this response to retrieve the remainder of the results. "
                "Continuing with the provided token results in an inconsistent list - objects "
                "that were created, modified, or deleted between the time the first chunk was "
                "returned and now may show up in the list.",
                "reason", "Expired", "code", 410);
            free(tok);
            ks_reply_json(r, 410, st, false);
            json_decref(st);
            return -1;
        }
        at = (uint64_t)o->cont_rv;
        snapshot = true;
    } else if (!o->cont && match && strcmp(match, "Exact") == 0 && rvq && *rvq) {
        char *end = NULL;
        unsigned long long v = strtoull(rvq, &end, 10);
        if (!end || *end || rvq[0] == '-') {
            char *msg = ks_printf("resourceVersion: Invalid value: \"%s\": must be a valid "
                                  "resourceVersion",
                                  rvq);
            reply_bad_request(r, msg);
            free(msg);
            return -1;
        }
        if (v > ks->rv) {
            char *msg = ks_printf("Too large resource version: %llu, current: %llu", v,
                                  (unsigned long long)ks->rv);
            ks_reply_status(r, 504, "Timeout", msg,
                            json_pack("{s:[{s:s,s:s}],s:i}", "causes", "reason",
                                      "ResourceVersionTooLarge", "message",
                                      "Too large resource version", "retryAfterSeconds", 1));
            free(msg);
            return -1;
        }
        if (v < ks->hist_floor) {
            ks_reply_status(r, 410, "Expired",
                            "The resourceVersion for the provided list is too old.", NULL);
            return -1;
        }
        at = v;
        snapshot = true;
    }
    *ret_map =
        snapshot ? ks_store_snapshot(ks, def->key, at) : json_incref(ks_store_map(ks, def->key));
    *ret_rv = at;
    return 0;
}

static void do_list(struct ks_api_req *q, const struct ks_res *def, struct ks_reply *r)
{
    struct ks_server *ks = q->ks;
    struct list_opts o;
    if (parse_list_opts(q, def, &o, r) != 0) {
        list_opts_free(&o); /* what was parsed before the bad parameter */
        return;
    }
    json_t *items = json_array();
    json_t *map = NULL;
    uint64_t rv = 0;
    char *next = NULL;
    long remaining = 0;

    pthread_mutex_lock(&ks->lock);
    if (list_source(q, def, &o, &map, &rv, r) != 0) {
        pthread_mutex_unlock(&ks->lock);
        json_decref(items);
        list_opts_free(&o);
        return;
    }
    size_t k;
    const char **keys = ks_sorted_keys(map, &k);
    json_t *obj;
    size_t prefix = q->ns ? strlen(q->ns) : 0;
    for (size_t i = 0; i < k; i++) {
        if (q->ns && (strncmp(keys[i], q->ns, prefix) != 0 || keys[i][prefix] != '/'))
            continue;
        if (o.start && strcmp(keys[i], o.start) <= 0)
            continue;
        obj = json_object_get(map, keys[i]);
        if (o.limit > 0 && (long)json_array_size(items) >= o.limit) {
            /* The apiserver counts the keys left in the range, matching
             * or not (and reports nothing when a selector filters). */
            remaining++;
            if (!next && ks_selector_match(o.labels, obj) && ks_selector_match(o.fields, obj))
                next = ks_strdup("");
            continue;
        }
        if (!ks_selector_match(o.labels, obj) || !ks_selector_match(o.fields, obj))
            continue;
        json_array_append(items, obj);
    }
    if (next) {
        /* continue after the last returned key */
        const json_t *last = json_array_get(items, json_array_size(items) - 1);
        char lk[512];
        ks_obj_key(lk, sizeof(lk), meta_str(last, "namespace"), str_or(meta_str(last, "name"), ""));
        free(next);
        next = ks_strdup(lk);
    }
    free(keys);
    pthread_mutex_unlock(&ks->lock);
    json_decref(map);

    json_t *conv = NULL;
    char *err = NULL;
    if (in_version(ks, def, items, q->version, &conv, &err) != 0) {
        reply_internal(r, err);
        free(err);
        json_decref(items);
        free(next);
        list_opts_free(&o);
        return;
    }
    json_decref(items);
    char rvs[32];
    snprintf(rvs, sizeof(rvs), "%llu", (unsigned long long)rv);
    /* An inconsistent continuation stays inconsistent (rv -1). */
    char *token = next ? continue_token(o.cont && o.cont_rv < 0 ? -1 : (long long)rv, next) : NULL;
    if (o.filtered)
        remaining = 0;
    const char *tv = table_version(q);
    const char *pv = NULL;
    enum ks_partial pk = tv ? KS_PARTIAL_NONE : partial_kind(q, &pv);
    if (pk != KS_PARTIAL_NONE) {
        if (pk == KS_PARTIAL_OBJECT) {
            reply_not_acceptable(r, def, pk);
        } else {
            json_t *pl = ks_partial_list(conv, pv, rvs, token, remaining);
            ks_reply_json(r, 200, pl, false);
            json_decref(pl);
        }
        json_decref(conv);
        free(token);
        free(next);
        list_opts_free(&o);
        return;
    }
    if (tv) {
        json_t *tmd = json_pack("{s:s}", "resourceVersion", rvs);
        if (token)
            json_object_set_new(tmd, "continue", json_string(token));
        if (token && remaining)
            json_object_set_new(tmd, "remainingItemCount", json_integer(remaining));
        json_t *table = ks_table_build(def, q->version, conv, tmd, tv,
                                       ks_table_include(ks_query(q, "includeObject")), true);
        ks_reply_json(r, 200, table, false);
        json_decref(table);
        json_decref(tmd);
        json_decref(conv);
        free(token);
        free(next);
        list_opts_free(&o);
        return;
    }
    json_t *list = json_object();
    json_t *md = json_object();
    if (def->typed) {
        size_t i;
        json_t *it;
        json_array_foreach(conv, i, it)
        {
            json_object_del(it, "kind");
            json_object_del(it, "apiVersion");
        }
        json_object_set_new(md, "resourceVersion", json_string(rvs));
        if (token)
            json_object_set_new(md, "continue", json_string(token));
        if (token && remaining)
            json_object_set_new(md, "remainingItemCount", json_integer(remaining));
        json_object_set_new(list, "kind", json_string(def->list_kind));
        char *av = ks_api_version(def->group, q->version);
        json_object_set_new(list, "apiVersion", json_string(av));
        free(av);
        json_object_set_new(list, "metadata", md);
        json_object_set_new(list, "items", conv);
    } else {
        json_object_set_new(md, "continue", json_string(token ? token : ""));
        if (token && remaining)
            json_object_set_new(md, "remainingItemCount", json_integer(remaining));
        json_object_set_new(md, "resourceVersion", json_string(rvs));
        char *av = ks_api_version(def->group, q->version);
        json_object_set_new(list, "apiVersion", json_string(av));
        free(av);
        json_object_set_new(list, "items", conv);
        json_object_set_new(list, "kind", json_string(def->list_kind));
        json_object_set_new(list, "metadata", md);
    }
    ks_reply_json(r, 200, list, !def->typed);
    json_decref(list);
    free(token);
    free(next);
    list_opts_free(&o);
}

/* ---- create ---------------------------------------------------------------------- */

/* ---- field managers (apply.c) ------------------------------------------------------ */

struct ssa {
    struct ks_ssa_ctx c;
    char *manager;
    char *api_version;
};

static void ssa_begin(struct ks_api_req *q, const struct ks_res *def, struct ssa *s)
{
    const struct ks_version *ver = ks_res_version(def, q->version);
    const char *fm = ks_query(q, "fieldManager");
    s->manager = fm && *fm ? ks_strdup(fm)
                           : ks_ssa_default_manager(MHD_lookup_connection_value(
                                 q->conn, MHD_HEADER_KIND, "User-Agent"));
    s->api_version = ks_api_version(def->group, q->version);
    s->c.manager = s->manager;
    s->c.subresource = q->sub;
    s->c.api_version = s->api_version;
    s->c.force = ks_query_bool(q, "force");
    s->c.has_status = ver && ver->status;
}

static void ssa_end(struct ssa *s)
{
    free(s->manager);
    free(s->api_version);
}

/* The JSON of the kind's zero value: what a create changes from. @ref new */
static json_t *zero_object(const struct ks_res *def)
{
    json_t *z = json_pack("{s:{s:n}}", "metadata", "creationTimestamp");
    json_t *extra = def->bookmark_extra ? json_loads(def->bookmark_extra, 0, NULL) : NULL;
    if (json_is_object(extra))
        json_object_update(z, extra);
    json_decref(extra);
    return z;
}

static bool is_apply(const struct ks_api_req *q)
{
    return q->content_type && strncmp(q->content_type, "application/apply-patch+yaml", 28) == 0;
}

/*
 * ObjectMeta as the apiserver's decoder leaves it: every member of
 * metav1.ObjectMeta is omitempty, so an empty labels or annotations map,
 * an empty finalizers or ownerReferences list and an empty generateName do
 * not survive the round trip through the Go struct (built-in kinds) or the
 * custom resource decoder's metadata coercion (apiextensions-apiserver's
 * objectmeta.Coerce: GetObjectMeta, then SetObjectMeta). A client-side
 * apply or `kubectl diff` that sends `"annotations": {}` sees none back.
 * An empty managedFields list is left to a built-in kind's field manager,
 * which reads it as "reset them" (fieldmanager.go isResetManagedFields);
 * a custom resource's goes with the coercion, so its live entries stay.
 */
static void coerce_object_meta(json_t *obj, bool crd)
{
    json_t *md = json_object_get(obj, "metadata");
    if (!json_is_object(md))
        return;
    static const char *const maps[] = {"labels", "annotations"};
    static const char *const lists[] = {"finalizers", "ownerReferences"};
    for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++) {
        json_t *v = json_object_get(md, maps[i]);
        if (json_is_object(v) && json_object_size(v) == 0)
            json_object_del(md, maps[i]);
    }
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        json_t *v = json_object_get(md, lists[i]);
        if (json_is_array(v) && json_array_size(v) == 0)
            json_object_del(md, lists[i]);
    }
    const char *gn = json_string_value(json_object_get(md, "generateName"));
    if (gn && !*gn)
        json_object_del(md, "generateName");
    json_t *mf = json_object_get(md, "managedFields");
    if (crd && json_is_array(mf) && json_array_size(mf) == 0)
        json_object_del(md, "managedFields");
}

/* A Service's managedFields after its create: the allocated clusterIP(s),
 * ipFamilies, ipFamilyPolicy and nodePorts belong to no manager unless the
 * client asked for them (asked: its spec before defaults). */
static void unown_allocated(json_t *obj, const json_t *asked)
{
    static const char *const allocated[] = {"clusterIP", "clusterIPs", "ipFamilies",
                                            "ipFamilyPolicy"};
    /* the ports asked for with a nodePort, by "PORT/PROTOCOL" (one pass:
     * a Service of 20,000 ports took minutes when each element looked
     * through the request's ports) */
    json_t *asked_np = json_object();
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(asked, "ports"), i, e)
    {
        if (!json_object_get(e, "nodePort"))
            continue;
        const char *proto = json_string_value(json_object_get(e, "protocol"));
        char *k = ks_printf("%" JSON_INTEGER_FORMAT "/%s",
                            json_integer_value(json_object_get(e, "port")), proto ? proto : "TCP");
        json_object_set_new(asked_np, k, json_true());
        free(k);
    }
    json_array_foreach(json_object_get(meta(obj), "managedFields"), i, e)
    {
        json_t *spec = json_object_get(json_object_get(e, "fieldsV1"), "f:spec");
        for (size_t k = 0; k < sizeof(allocated) / sizeof(allocated[0]); k++) {
            if (json_object_get(asked, allocated[k]))
                continue;
            char *f = ks_printf("f:%s", allocated[k]);
            json_object_del(spec, f);
            free(f);
        }
        /* each port element k:{"port":P,"protocol":X}: its f:nodePort */
        const char *ek;
        json_t *node;
        json_object_foreach(json_object_get(spec, "f:ports"), ek, node)
        {
            json_t *key = strncmp(ek, "k:", 2) == 0 ? json_loads(ek + 2, 0, NULL) : NULL;
            char *k = ks_printf("%" JSON_INTEGER_FORMAT "/%s",
                                json_integer_value(json_object_get(key, "port")),
                                ks_nz(json_string_value(json_object_get(key, "protocol"))));
            if (!key || !json_object_get(asked_np, k))
                json_object_del(node, "f:nodePort");
            free(k);
            json_decref(key);
        }
    }
    json_decref(asked_np);
}

static void do_create(struct ks_api_req *q, const struct ks_res *def, json_t *obj, bool dry,
                      struct ks_reply *r)
{
    struct ks_server *ks = q->ks;
    json_t *md = meta(obj);
    const char *name = json_string_value(json_object_get(md, "name"));
    const char *gen = json_string_value(json_object_get(md, "generateName"));
    char *owned_name = NULL;
    json_t *stored = NULL;
    json_t *asked_spec = NULL;
    /* the name NamespaceLifecycle and mutating admission see: the one sent
     * (create.go takes it from the object; the registry's Store.create
     * generates one later, before validating admission). kubesim names the
     * object here, for its own checks, and hides the name from mutating
     * webhooks (admit_mutate). */
    char *sent_name = ks_strdup(name ? name : "");

    if ((!name || !*name) && gen && *gen) {
        char sfx[6];
        ks_random_suffix(sfx, sizeof(sfx));
        owned_name = ks_printf("%s%s", gen, sfx);
        json_object_set_new(md, "name", json_string(owned_name));
        name = owned_name;
    }
    if (!name)
        name = "";
    const char *body_ns = json_string_value(json_object_get(md, "namespace"));
    if (def->namespaced) {
        if (body_ns && *body_ns && strcmp(body_ns, q->ns) != 0) {
            reply_bad_request(r, "the namespace of the provided object does not match the "
                                 "namespace sent on the request");
            goto out;
        }
        json_object_set_new(md, "namespace", json_string(q->ns));
    } else {
        json_object_del(md, "namespace");
    }
    char uid[40], now[32];
    ks_uuid(uid, sizeof(uid));
    ks_now_rfc3339(now, sizeof(now));
    json_object_set_new(md, "uid", json_string(uid));
    json_object_set_new(md, "creationTimestamp", json_string(now));
    json_object_del(md, "resourceVersion");
    json_object_del(md, "deletionTimestamp");
    json_object_del(md, "deletionGracePeriodSeconds");
    json_object_del(md, "selfLink");
    if (def->generation)
        json_object_set_new(md, "generation", json_integer(1));
    const struct ks_version *ver = ks_res_version(def, q->version);
    if (ver && ver->status)
        json_object_del(obj, "status");
    coerce_object_meta(obj, def->crd);
    if (typed_check(q, def, obj, name, r) != 0)
        goto out;
    /* admission's first plugin, NamespaceLifecycle: after the body is
     * decoded, before mutating webhooks and before the registry names and
     * validates the object (checked again below, with the write) */
    if (def->namespaced) {
        pthread_mutex_lock(&ks->lock);
        int nrc = check_namespace(ks, def, q->ns, sent_name, r);
        pthread_mutex_unlock(&ks->lock);
        if (nrc != 0)
            goto out;
    }
    if (!*name) {
        reply_invalid(r, def, "",
                      one_cause("FieldValueRequired", "metadata.name",
                                "Required value: name or generateName is required"));
        goto out;
    }
    if (is_crd(def))
        json_object_set_new(obj, "status", crd_initial_status(obj));
    /* a Service's spec as the client sent it: what the allocators add is
     * not the creating manager's (create.go updates managedFields before
     * the storage's BeginCreate allocates) */
    if (strcmp(def->key, "services") == 0)
        asked_spec = json_deep_copy(json_object_get(obj, "spec"));
    builtin_defaults(ks, def, obj, NULL);
    if (strcmp(def->key, "pods") == 0 && !ks_pod_service_account_ok(ks, obj, r))
        goto out;
    char key[512];
    ks_obj_key(key, sizeof(key), def->namespaced ? q->ns : NULL, name);
    if (service_allocations(ks, def, obj, NULL, key, name, r) != 0)
        goto out;
    /* the RBAC storage's escalation check comes before the strategy's
     * validation (policybased Storage.Create wraps the standard store) */
    if (ks_authz_escalation_check(q, def, obj, NULL, name, r) != 0)
        goto out;
    json_t *causes = ks_validate_object(def, obj, NULL, true);
    if (causes && is_crd(def) && crd_cel_outage(causes, r))
        goto out;
    if (causes && !def->crd) {
        reply_invalid(r, def, name, causes);
        goto out;
    }
    /* a custom resource's metadata causes go into its one 422 */
    if (cr_schema(q, def, obj, NULL, name, causes, r) != 0)
        goto out;
    if (!is_apply(q)) {
        struct ssa s;
        json_t *zero = zero_object(def);
        ssa_begin(q, def, &s);
        /* the field manager keeps the entries the body carries when they
         * decode (ks_ssa_update) */
        ks_ssa_update(zero, obj, &s.c);
        ssa_end(&s);
        json_decref(zero);
        if (asked_spec)
            unown_allocated(obj, asked_spec);
    }
    /* what the field manager wrote, validated with the object's metadata
     * (rest.BeforeCreate's ValidateObjectMetaAccessor) */
    causes = ks_ssa_validate(obj);
    if (causes) {
        reply_invalid(r, def, name, causes);
        goto out;
    }
    if (def->typed)
        ks_typed_order(obj);
    /* create.go: mutating admission with the name as sent, before the
     * registry names the object; validating admission from the registry's
     * create (rest.AdmissionToValidateObjectFunc) with the generated name */
    if (admit_mutate(q, def, "CREATE", obj, NULL, sent_name, dry, r) != 0 ||
        admit_validate(q, def, "CREATE", obj, NULL, name, dry, r) != 0)
        goto out;
    if (to_storage(ks, def, obj, q->version, &stored, r) != 0)
        goto out;

    pthread_mutex_lock(&ks->lock);
    if (def->namespaced && check_namespace(ks, def, q->ns, sent_name, r) != 0) {
        pthread_mutex_unlock(&ks->lock);
        goto out;
    }
    const struct ks_res *cur_def = ks_res_find(ks, def->group, def->plural);
    if (cur_def != def && (!cur_def || !ks_res_version(cur_def, q->version))) {
        pthread_mutex_unlock(&ks->lock);
        ks_reply_status(r, 404, "NotFound", "the server could not find the requested resource",
                        json_object());
        goto out;
    }
    if (ks_store_get(ks, def->key, key)) {
        pthread_mutex_unlock(&ks->lock);
        char *qn = ks_qualified(def);
        char *msg = ks_printf("%s \"%s\" already exists", qn, name);
        ks_reply_status(r, 409, "AlreadyExists", msg, ks_details(def, name));
        free(msg);
        free(qn);
        goto out;
    }
    if (is_crd(def)) {
        char *err = NULL;
        if (ks_res_register_crd(ks, stored, &err) != 0) {
            pthread_mutex_unlock(&ks->lock);
            reply_invalid(r, def, name, one_cause("FieldValueInvalid", "spec", err));
            free(err);
            goto out;
        }
        if (dry)
            ks_res_unregister_crd(ks, name);
    }
    if (!dry) {
        json_incref(stored);
        ks_store_put(ks, def, key, stored);
        if (is_crd(def))
            crd_establish(ks, def, key);
    } else {
        /* Not stored: no resourceVersion (the registry's dry run copies
         * the object it was given, DryRunnableStorage.Create) */
        json_object_del(meta(stored), "resourceVersion");
    }
    pthread_mutex_unlock(&ks->lock);
    respond_object(ks, def, stored, q->version, 201, r);
out:
    json_decref(stored);
    json_decref(asked_spec);
    free(owned_name);
    free(sent_name);
}

/* ---- update / patch ----------------------------------------------------------- */

/* PUT: the body names the object of the URL; its resourceVersion, if any,
 * in *ret_rv (CRs require one). 0 or the apiserver's answer in r. */
static int check_put_body(struct ks_api_req *q, const struct ks_res *def, json_t *body,
                          const char **ret_rv, struct ks_reply *r)
{
    if (check_type(def, q->version, body, r) != 0)
        return -EINVAL;
    const char *bname = meta_str(body, "name");
    if (!bname || strcmp(bname, q->name) != 0) {
        char *msg = ks_printf("the name of the object (%s) does not match the name on the URL "
                              "(%s)",
                              str_or(bname, ""), q->name);
        reply_bad_request(r, msg);
        free(msg);
        return -EINVAL;
    }
    const char *bns = meta_str(body, "namespace");
    if (def->namespaced && bns && *bns && strcmp(bns, q->ns) != 0) {
        reply_bad_request(r, "the namespace of the provided object does not match the "
                             "namespace sent on the request");
        return -EINVAL;
    }
    const char *body_rv = meta_str(body, "resourceVersion");
    if (body_rv && !*body_rv)
        body_rv = NULL;
    if (!body_rv && def->crd) {
        reply_invalid(r, def, q->name,
                      one_cause("FieldValueInvalid", "metadata.resourceVersion",
                                "Invalid value: 0x0: must be specified for an update"));
        return -EINVAL;
    }
    *ret_rv = body_rv;
    return 0;
}

/* Does an apply configuration set metadata.managedFields? The field
 * manager refuses one that does (apimachinery pkg/util/managedfields/
 * internal/structuredmerge.go, structuredMergeManager.Apply: 400
 * "metadata.managedFields must be nil"); Unstructured.GetManagedFields
 * reads a list (an empty one too) whose items are all objects, anything
 * else as none. */
static bool apply_sets_managed_fields(const json_t *cfg)
{
    const json_t *mf = json_object_get(json_object_get(cfg, "metadata"), "managedFields");
    if (!json_is_array(mf))
        return false;
    size_t i;
    json_t *e;
    json_array_foreach(mf, i, e)
    {
        if (!json_is_object(e))
            return false;
    }
    return true;
}

/* The object the request makes of cur_v (in the request version): the PUT
 * body or the patched object. NULL with the apiserver's answer in r.
 * @ref new */
static json_t *next_object(const json_t *cur_v, json_t *body, enum patch_kind pk,
                           const struct ks_ssa_ctx *ssa, struct ks_reply *r)
{
    json_t *next = NULL;
    char *err = NULL;
    switch (pk) {
    case PATCH_NONE:
        next = json_deep_copy(body);
        break;
    case PATCH_MERGE:
        next = ks_merge_patch(cur_v, body);
        break;
    case PATCH_APPLY: {
        json_t *causes = NULL;
        if (!json_is_object(body)) {
            err = ks_strdup("the apply configuration must be an object");
            break;
        }
        if (apply_sets_managed_fields(body)) {
            err = ks_strdup("metadata.managedFields must be nil");
            break;
        }
        if (ks_ssa_apply(cur_v, body, ssa, &next, &err, &causes) == -EBUSY) {
            ks_reply_status(r, 409, "Conflict", err, json_pack("{s:o}", "causes", causes));
            free(err);
            return NULL;
        }
        break;
    }
    case PATCH_STRATEGIC:
        next = ks_strategic_patch(cur_v, body, &err);
        break;
    case PATCH_JSON:
        next = ks_json_patch(cur_v, body, &err);
        break;
    }
    if (!next)
        ks_reply_status(r, pk == PATCH_JSON ? 422 : 400,
                        pk == PATCH_JSON ? "Invalid" : "BadRequest", err ? err : "bad patch", NULL);
    free(err);
    return next;
}

/* The status subresource's rules: through /status only status changes;
 * elsewhere status keeps its current value. Returns the (possibly new)
 * object. @ref steal next, new */
static json_t *status_rules(json_t *next, const json_t *cur_v, bool status_sub, bool has_status)
{
    if (status_sub) {
        json_t *merged = json_deep_copy(cur_v);
        json_t *st = json_object_get(next, "status");
        if (st)
            json_object_set(merged, "status", st);
        else
            json_object_del(merged, "status");
        json_decref(next);
        return merged;
    }
    if (has_status) {
        json_t *st = json_object_get(cur_v, "status");
        if (st)
            json_object_set(next, "status", st);
        else
            json_object_del(next, "status");
    }
    return next;
}

/* Metadata the client cannot change keeps its current value. */
static void keep_system_metadata(json_t *next, const json_t *cur_v)
{
    json_t *nmd = meta(next);
    json_t *cmd = json_object_get(cur_v, "metadata");
    static const char *const fixed[] = {"name",
                                        "namespace",
                                        "uid",
                                        "creationTimestamp",
                                        "deletionTimestamp",
                                        "deletionGracePeriodSeconds",
                                        "generation",
                                        "resourceVersion",
                                        NULL};
    for (const char *const *f = fixed; *f; f++) {
        json_t *v = json_object_get(cmd, *f);
        if (v)
            json_object_set(nmd, *f, v);
        else
            json_object_del(nmd, *f);
    }
    json_object_del(nmd, "selfLink");
}

static void reply_modified(struct ks_reply *r, const struct ks_res *def, const char *name)
{
    reply_conflict(r, def, name,
                   "the object has been modified; please apply your changes to the latest "
                   "version and try again");
}

/* Stores the updated object if the stored one is still at cur_rv. 0 when
 * done (r filled), -EAGAIN when another write came first and the request
 * had no resourceVersion of its own (try again). */
static int commit_update(struct ks_api_req *q, const struct ks_res *def, const char *key,
                         json_t *stored, const char *cur_rv, const char *body_rv, bool dry,
                         struct ks_reply *r)
{
    struct ks_server *ks = q->ks;
    pthread_mutex_lock(&ks->lock);
    const json_t *now_obj = ks_store_get(ks, def->key, key);
    if (!now_obj || strcmp(str_or(meta_str(now_obj, "resourceVersion"), ""), cur_rv) != 0) {
        pthread_mutex_unlock(&ks->lock);
        if (!body_rv)
            return -EAGAIN;
        reply_modified(r, def, q->name);
        return 0;
    }
    if (is_crd(def) && !dry) {
        char *cerr = NULL;
        if (ks_res_register_crd(ks, stored, &cerr) != 0) {
            pthread_mutex_unlock(&ks->lock);
            reply_invalid(r, def, q->name, one_cause("FieldValueInvalid", "spec", cerr));
            free(cerr);
            return 0;
        }
    }
    bool deleting =
        meta_str(stored, "deletionTimestamp") &&
        json_array_size(json_object_get(json_object_get(stored, "metadata"), "finalizers")) == 0;
    if (deleting && strcmp(def->key, "namespaces") == 0 &&
        json_array_size(json_object_get(json_object_get(stored, "spec"), "finalizers"))) {
        /* ShouldDeleteNamespaceDuringUpdate: not before the namespace
         * controller has finalized it (its next pass does both) */
        deleting = false;
        ks->gc_dirty = true;
        pthread_cond_broadcast(&ks->changed);
    }
    if (!dry) {
        json_incref(stored);
        ks_store_put(ks, def, key, stored);
        if (deleting)
            ks_remove_object(ks, def, key);
        else if (is_crd(def))
            crd_establish(ks, def, key);
    }
    pthread_mutex_unlock(&ks->lock);
    respond_object(ks, def, stored, q->version, 200, r);
    return 0;
}

/* One attempt of an update on the current object: 0 when answered (r
 * filled), -EAGAIN to try again on a newer object. */
/* The storage's failed precondition (Preconditions.Check, an invalid-object
 * StorageError on the etcd key of obj_key) as the registry answers it: a
 * 409 on the resource. why: "Precondition failed: ...". */
static void reply_storage_precondition(struct ks_reply *r, const struct ks_res *def,
                                       const char *obj_key, const char *name, const char *why)
{
    char *ekey = ks_etcd_key(def, obj_key);
    char *msg = ks_printf("StorageError: invalid object, Code: 4, Key: %s, ResourceVersion: 0, "
                          "AdditionalErrorMsg: %s",
                          ekey, why);
    reply_conflict(r, def, name, msg);
    free(msg);
    free(ekey);
}

/* A uid in the object is a precondition: an object deleted and recreated
 * under the same name is not the one the client read. The storage layer's
 * Preconditions.Check (staging/src/k8s.io/apiserver/pkg/storage/
 * interfaces.go) fails with an invalid-object StorageError, which the
 * registry turns into a 409 (storage/errors InterpretUpdateError). Replies
 * and returns true when it fails. */
static bool uid_precondition_failed(const struct ks_res *def, const char *key, json_t *next,
                                    const json_t *cur_v, const char *name, struct ks_reply *r)
{
    const char *nuid = json_string_value(json_object_get(meta(next), "uid"));
    const char *cuid =
        str_or(json_string_value(json_object_get(json_object_get(cur_v, "metadata"), "uid")), "");
    if (!nuid || !*nuid || strcmp(nuid, cuid) == 0)
        return false;
    char *why = ks_printf("Precondition failed: UID in precondition: %s, UID in object meta: %s",
                          nuid, cuid);
    reply_storage_precondition(r, def, key, name, why);
    free(why);
    return true;
}

static int update_once(struct ks_api_req *q, const struct ks_res *def, const char *key,
                       json_t *body, enum patch_kind pk, bool dry, const char *body_rv,
                       const struct ks_ssa_ctx *ssa, struct ks_reply *r)
{
    struct ks_server *ks = q->ks;
    bool status_sub = q->sub && strcmp(q->sub, "status") == 0;
    const struct ks_version *ver = ks_res_version(def, q->version);
    bool has_status = ver && ver->status;
    json_t *cur = NULL, *cur_v = NULL, *next = NULL, *stored = NULL, *sv_causes = NULL;
    char *err = NULL;
    int rc = 0;

    pthread_mutex_lock(&ks->lock);
    cur = json_incref(ks_store_get(ks, def->key, key));
    pthread_mutex_unlock(&ks->lock);
    if (!cur) {
        if (pk == PATCH_APPLY && !status_sub) {
            json_t *cfg = json_deep_copy(body);
            if (apply_sets_managed_fields(cfg))
                reply_bad_request(r, "metadata.managedFields must be nil");
            else if (check_type(def, q->version, cfg, r) == 0) {
                json_object_set_new(meta(cfg), "name", json_string(q->name));
                json_t *zero = zero_object(def), *obj = NULL, *causes = NULL;
                char *msg = NULL;
                ks_ssa_apply(zero, cfg, ssa, &obj, &msg, &causes); /* no one to conflict with */
                if (obj)
                    do_create(q, def, obj, dry, r);
                json_decref(obj);
                json_decref(causes);
                free(msg);
                json_decref(zero);
            }
            json_decref(cfg);
            return 0;
        }
        reply_not_found(r, def, q->name);
        return 0;
    }
    const char *cur_rv = meta_str(cur, "resourceVersion");
    if (one_in_version(ks, def, cur, q->version, &cur_v, &err) != 0) {
        reply_internal(r, err);
        free(err);
        goto out;
    }

    /* Build the new object in the request version. */
    next = next_object(cur_v, body, pk, ssa, r);
    if (!next)
        goto out;
    if (pk != PATCH_NONE) {
        const char *prv = meta_str(next, "resourceVersion");
        if (prv && *prv && strcmp(prv, cur_rv) != 0)
            body_rv = "patch";
        if (check_type(def, q->version, next, r) != 0)
            goto out;
    }
    coerce_object_meta(next, def->crd);
    if (typed_check(q, def, next, q->name, r) != 0)
        goto out;
    if (body_rv && strcmp(str_or(meta_str(next, "resourceVersion"), ""), cur_rv) != 0) {
        reply_modified(r, def, q->name);
        goto out;
    }
    next = status_rules(next, cur_v, status_sub, has_status);
    if (uid_precondition_failed(def, key, next, cur_v, q->name, r))
        goto out;
    keep_system_metadata(next, cur_v);
    if (is_crd(def)) {
        json_t *st = json_object_get(cur_v, "status");
        /* A copy: storedVersions may grow below, cur_v stays as read. */
        if (st && !status_sub)
            json_object_set_new(next, "status", json_deep_copy(st));
        sv_causes = crd_stored_versions(next, !status_sub);
    }
    builtin_defaults(ks, def, next, cur_v);
    if (service_allocations(ks, def, next, cur_v, key, q->name, r) != 0)
        goto out;
    if (ks_authz_escalation_check(q, def, next, cur_v, q->name, r) != 0)
        goto out;
    json_t *causes = ks_validate_object(def, next, cur_v, false);
    if (sv_causes) {
        /* ValidateCustomResourceDefinitionUpdate: the spec's causes, then
         * status.storedVersions' */
        if (!causes)
            causes = json_array();
        json_array_extend(causes, sv_causes);
    }
    if (causes && is_crd(def) && crd_cel_outage(causes, r))
        goto out;
    if (causes && !def->crd) {
        reply_invalid(r, def, q->name, causes);
        goto out;
    }
    if (cr_schema(q, def, next, cur_v, q->name, causes, r) != 0)
        goto out;
    if (def->generation && spec_changed(cur_v, next))
        json_object_set_new(meta(next), "generation",
                            json_integer(json_integer_value(json_object_get(
                                             json_object_get(cur_v, "metadata"), "generation")) +
                                         1));
    if (pk != PATCH_APPLY)
        ks_ssa_update(cur_v, next, ssa);
    /* ValidateObjectMetaUpdate's managedFields part */
    causes = ks_ssa_validate(next);
    if (causes) {
        reply_invalid(r, def, q->name, causes);
        goto out;
    }
    if (def->typed)
        ks_typed_order(next);
    if (same_object(next, cur_v) && in_storage_version(def, cur)) {
        /* A no-op write does not bump the resourceVersion: etcd3's
         * GuaranteedUpdate compares the encoded bytes, which are in the
         * storage version. An object still stored in an older version
         * differs there, so the same no-op rewrites it in the current
         * one (what storage version migration relies on). */
        ks_reply_json(r, 200, cur_v, !def->typed);
        goto out;
    }
    if (admit_mutate(q, def, "UPDATE", next, cur_v, q->name, dry, r) != 0)
        goto out;
    if (admit_validate(q, def, "UPDATE", next, cur_v, q->name, dry, r) != 0)
        goto out;
    if (to_storage(ks, def, next, q->version, &stored, r) != 0)
        goto out;
    rc = commit_update(q, def, key, stored, cur_rv, body_rv, dry, r);
out:
    json_decref(sv_causes);
    json_decref(cur);
    json_decref(cur_v);
    json_decref(next);
    json_decref(stored);
    return rc;
}

/* At most this many operations in a JSON patch (the apiserver's
 * maxJSONPatchOperations). */
#define KS_MAX_JSON_PATCH_OPS 10000

/*
 * The shape of a merge or JSON patch, checked before it is applied as the
 * apiserver does (apiserver/pkg/endpoints/handlers/patch.go,
 * jsonPatcher.applyJSPatch). Under fieldValidation Warn (the default) and
 * Strict the patch is first decoded into its Go type: a merge patch into
 * map[string]interface{}, a JSON patch into []jsonPatchOp (op, path, from:
 * strings), each failure a 400 "error decoding patch: json: cannot
 * unmarshal ...". Then json-patch decodes it itself: a JSON patch that is
 * not an array of objects is a 400 (with Ignore, the only check), one of
 * more than 10,000 operations a 413. A merge patch that is not an object
 * is json-patch's ErrBadJSONPatch (400 "Invalid JSON Patch"), except an
 * array, which MergePatch takes as the whole new document and which then
 * fails to decode as an object (422 on the field "patch"). A null JSON
 * patch decodes to no operations (the object is unchanged).
 * 0 when the patch may be applied, else -EINVAL with the answer in r.
 */
static int patch_body_shape(struct ks_api_req *q, enum patch_kind pk, const json_t *body,
                            struct ks_reply *r)
{
    if (pk != PATCH_MERGE && pk != PATCH_JSON)
        return 0;
    if (pk == PATCH_MERGE && json_is_object(body))
        return 0;
    enum ks_field_validation mode;
    if (field_validation(q, &mode, r) != 0)
        return -EINVAL;
    bool typed = mode != KS_FV_IGNORE;
    char *msg = NULL;
    if (pk == PATCH_MERGE) {
        if (typed && !json_is_null(body)) {
            msg = ks_printf("error decoding patch: json: cannot unmarshal %s into Go value of type "
                            "map[string]interface {}",
                            ks_json_go_type(body));
        } else if (json_is_array(body)) {
            char *doc = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
            char *m = ks_printf("Invalid value: \"%s\": json: cannot unmarshal array into Go "
                                "value of type map[string]interface {}",
                                doc ? doc : "");
            ks_reply_invalid_gk(r, "", "", "", one_cause("FieldValueInvalid", "patch", m));
            free(m);
            free(doc);
            return -EINVAL;
        } else {
            msg = ks_strdup("Invalid JSON Patch");
        }
        reply_bad_request(r, msg);
        free(msg);
        return -EINVAL;
    }
    if (json_is_null(body))
        return 0;
    if (!json_is_array(body)) {
        msg = typed ? ks_printf("error decoding patch: json: cannot unmarshal %s into Go value of "
                                "type []handlers.jsonPatchOp",
                                ks_json_go_type(body))
                    : ks_printf("json: cannot unmarshal %s into Go value of type jsonpatch.Patch",
                                ks_json_go_type(body));
    }
    size_t i;
    json_t *op;
    json_array_foreach(body, i, op)
    {
        if (msg)
            break;
        if (!json_is_object(op) && !json_is_null(op)) {
            msg = typed ? ks_printf("error decoding patch: json: cannot unmarshal %s into Go value "
                                    "of type handlers.jsonPatchOp",
                                    ks_json_go_type(op))
                        : ks_printf("json: cannot unmarshal %s into Go value of type "
                                    "jsonpatch.Operation",
                                    ks_json_go_type(op));
            break;
        }
        static const char *const str_fields[] = {"op", "path", "from"};
        for (size_t f = 0; typed && f < sizeof(str_fields) / sizeof(str_fields[0]); f++) {
            json_t *v = json_object_get(op, str_fields[f]);
            if (v && !json_is_string(v) && !json_is_null(v)) {
                msg = ks_printf("error decoding patch: json: cannot unmarshal %s into Go struct "
                                "field jsonPatchOp.%s of type string",
                                ks_json_go_type(v), str_fields[f]);
                break;
            }
        }
    }
    if (msg) {
        reply_bad_request(r, msg);
        free(msg);
        return -EINVAL;
    }
    if (json_array_size(body) > KS_MAX_JSON_PATCH_OPS) {
        msg = ks_printf("The allowed maximum operations in a JSON patch is %d, got %zu",
                        KS_MAX_JSON_PATCH_OPS, json_array_size(body));
        ks_reply_status(r, 413, "RequestEntityTooLarge", msg, NULL);
        free(msg);
        return -EINVAL;
    }
    return 0;
}

static void do_update(struct ks_api_req *q, const struct ks_res *def, const char *key, json_t *body,
                      enum patch_kind pk, bool dry, struct ks_reply *r)
{
    const char *body_rv = NULL;

    if (pk == PATCH_APPLY && !ks_query(q, "fieldManager")) {
        ks_reply_status(r, 422, "Invalid",
                        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: "
                        "is required for apply patch",
                        json_pack("{s:s,s:s,s:[{s:s,s:s,s:s}]}", "group", "meta.k8s.io", "kind",
                                  "PatchOptions", "causes", "reason", "FieldValueRequired",
                                  "message", "Required value: is required for apply patch", "field",
                                  "fieldManager"));
        return;
    }
    if (pk == PATCH_NONE) {
        if (check_put_body(q, def, body, &body_rv, r) != 0)
            return;
    } else if (patch_body_shape(q, pk, body, r) != 0) {
        return;
    } else if (pk == PATCH_STRATEGIC && !def->typed) {
        ks_reply_status(r, 415, "UnsupportedMediaType",
                        "the body of the request was in an unknown format - accepted media types "
                        "include: application/json-patch+json, application/merge-patch+json, "
                        "application/apply-patch+yaml",
                        NULL);
        return;
    }
    struct ssa ssa;
    ssa_begin(q, def, &ssa);
    /* each try goes through the storage's conflict retries */
    for (int attempts = 0; attempts < 8; attempts++) {
        if (update_once(q, def, key, body, pk, dry, body_rv, &ssa.c, r) != -EAGAIN) {
            ssa_end(&ssa);
            return;
        }
    }
    ssa_end(&ssa);
    reply_modified(r, def, q->name);
}

/* ---- delete --------------------------------------------------------------------- */

void ks_remove_object(struct ks_server *ks, const struct ks_res *def, const char *key)
{
    if (is_crd(def)) {
        const json_t *crd = ks_store_get(ks, def->key, key);
        const char *group =
            json_string_value(json_object_get(json_object_get(crd, "spec"), "group"));
        const char *plural = json_string_value(
            json_object_get(json_object_get(json_object_get(crd, "spec"), "names"), "plural"));
        const struct ks_res *cr = group && plural ? ks_res_find(ks, group, plural) : NULL;
        if (cr && cr->crd) {
            json_t *map = json_incref(ks_store_map(ks, cr->key));
            const char *k;
            json_t *o;
            void *tmp;
            json_object_foreach_safe(map, tmp, k, o)
            {
                ks_store_remove(ks, cr, k);
            }
            json_decref(map);
        }
        ks_res_unregister_crd(ks, key);
    }
    ks_store_remove(ks, def, key);
}

/* rest.BeforeDelete (k8s.io/apiserver pkg/registry/rest/delete.go) checks
 * a delete's preconditions on the object the registry read, before
 * admission and before the storage checks them again: a Conflict on the
 * object's kind (GroupResource{Group, Resource: Kind}). Replies and
 * returns true when one fails. */
static bool before_delete_preconditions(const struct ks_res *def, const json_t *cur,
                                        const char *name, const char *pre_uid, const char *pre_rv,
                                        struct ks_reply *r)
{
    const char *uid = str_or(meta_str(cur, "uid"), "");
    const char *rv = str_or(meta_str(cur, "resourceVersion"), "");
    char *why = NULL;
    if (pre_uid && strcmp(pre_uid, uid) != 0)
        why = ks_printf("the UID in the precondition (%s) does not match the UID in record (%s). "
                        "The object might have been deleted and then recreated",
                        pre_uid, uid);
    else if (pre_rv && strcmp(pre_rv, rv) != 0)
        why = ks_printf("the ResourceVersion in the precondition (%s) does not match the "
                        "ResourceVersion in record (%s). The object might have been modified",
                        pre_rv, rv);
    if (!why)
        return false;
    char *qr = def->group[0] ? ks_printf("%s.%s", def->kind, def->group) : ks_strdup(def->kind);
    char *msg = ks_printf("Operation cannot be fulfilled on %s \"%s\": %s", qr, name, why);
    json_t *details = ks_details(def, name);
    json_object_set_new(details, "kind", json_string(def->kind)); /* the Kind, not the plural */
    ks_reply_status(r, 409, "Conflict", msg, details);
    free(msg);
    free(qr);
    free(why);
    return true;
}

static void do_delete(struct ks_api_req *q, const struct ks_res *def, const char *key,
                      struct ks_reply *r)
{
    struct ks_server *ks = q->ks;
    json_t *opts = NULL;
    if (q->body && q->body_len) {
        char *err = NULL;
        if (ks_pb_media_type(q->content_type))
            ks_pb_decode(q->body, q->body_len, &opts, &err); /* typed clients' DeleteOptions */
        else
            opts = json_loadb(q->body, q->body_len, 0, NULL);
        free(err);
        if (!json_is_object(opts)) {
            json_decref(opts);
            reply_bad_request(r, "the body of the request was in an unknown format");
            return;
        }
    }
    bool dry = dry_run(q, opts);
    const char *policy = json_string_value(json_object_get(opts, "propagationPolicy"));
    if (!policy)
        policy = ks_query(q, "propagationPolicy");
    if (json_is_true(json_object_get(opts, "orphanDependents")))
        policy = "Orphan";
    const json_t *pre = json_object_get(opts, "preconditions");
    const char *pre_uid = json_string_value(json_object_get(pre, "uid"));
    const char *pre_rv = json_string_value(json_object_get(pre, "resourceVersion"));

    json_t *cur = NULL;
    pthread_mutex_lock(&ks->lock);
    cur = json_incref(ks_store_get(ks, def->key, key));
    pthread_mutex_unlock(&ks->lock);
    if (!cur) {
        reply_not_found(r, def, q->name);
        json_decref(opts);
        return;
    }
    json_t *cur_v = NULL;
    if (before_delete_preconditions(def, cur, q->name, pre_uid, pre_rv, r))
        goto out;
    /* Validating webhooks registered for DELETE see the old object. */
    char *err = NULL;
    if (one_in_version(ks, def, cur, q->version, &cur_v, &err) != 0) {
        reply_internal(r, err);
        free(err);
        goto out;
    }
    if (admit(q, def, "DELETE", NULL, cur_v, q->name, dry, r) != 0)
        goto out;

    pthread_mutex_lock(&ks->lock);
    json_decref(cur);
    cur = json_incref(ks_store_get(ks, def->key, key));
    if (!cur) {
        pthread_mutex_unlock(&ks->lock);
        reply_not_found(r, def, q->name);
        goto out;
    }
    const char *uid = str_or(meta_str(cur, "uid"), "");
    const char *rv = str_or(meta_str(cur, "resourceVersion"), "");
    /* the object changed since: the storage's own check (Preconditions.
     * Check, an invalid-object StorageError the registry makes a 409) */
    if ((pre_uid && strcmp(pre_uid, uid) != 0) || (pre_rv && strcmp(pre_rv, rv) != 0)) {
        pthread_mutex_unlock(&ks->lock);
        char *why = pre_uid && strcmp(pre_uid, uid) != 0
                        ? ks_printf("Precondition failed: UID in precondition: %s, UID in object "
                                    "meta: %s",
                                    pre_uid, uid)
                        : ks_printf("Precondition failed: ResourceVersion in precondition: %s, "
                                    "ResourceVersion in object meta: %s",
                                    pre_rv, rv);
        reply_storage_precondition(r, def, key, q->name, why);
        free(why);
        goto out;
    }
    /* a Pod on a Node: graceful deletion (rest.BeforeDelete with the Pod
     * strategy's CheckGracefulDelete); its kubelet ends it (nodes.c) */
    if (strcmp(def->key, "pods") == 0 && (!policy || strcmp(policy, "Background") == 0) &&
        !json_array_size(json_object_get(meta(cur), "finalizers"))) {
        json_t *asked = json_incref(json_object_get(opts, "gracePeriodSeconds"));
        const char *gq = ks_query(q, "gracePeriodSeconds");
        if (!asked && gq)
            asked = json_integer(strtoll(gq, NULL, 10));
        const json_t *have = json_object_get(meta(cur), "deletionGracePeriodSeconds");
        json_t *next = NULL;
        bool remove = false;
        if (meta_str(cur, "deletionTimestamp")) {
            /* under way: only a shorter grace period moves it; none left
             * (0) deletes it now */
            if (!json_integer_value(have))
                remove = true;
            else if (json_is_integer(asked) && json_integer_value(asked) < json_integer_value(have))
                remove = json_integer_value(asked) <= 0;
            if (!remove && json_is_integer(asked) &&
                json_integer_value(asked) < json_integer_value(have)) {
                next = json_deep_copy(cur);
                ks_pod_mark_terminating(next, json_integer_value(asked));
            }
        } else {
            json_int_t period = ks_pod_grace(cur, asked);
            if (period > 0) {
                next = json_deep_copy(cur);
                ks_pod_mark_terminating(next, period);
            } else {
                remove = true;
            }
        }
        json_decref(asked);
        if (remove) {
            /* the last state: marked with grace 0 (ReturnDeletedObject) */
            json_t *last = json_deep_copy(cur);
            if (!meta_str(cur, "deletionTimestamp"))
                ks_pod_mark_terminating(last, 0);
            else
                json_object_set_new(meta(last), "deletionGracePeriodSeconds", json_integer(0));
            if (!dry)
                ks_remove_object(ks, def, key);
            pthread_mutex_unlock(&ks->lock);
            respond_object(ks, def, last, q->version, 200, r);
            json_decref(last);
            goto out;
        }
        if (next && !dry) {
            ks_typed_order(next);
            ks_store_put(ks, def, key, json_incref(next));
        }
        pthread_mutex_unlock(&ks->lock);
        respond_object(ks, def, next ? next : cur, q->version, 200, r);
        json_decref(next);
        goto out;
    }
    json_t *next = json_deep_copy(cur);
    json_t *nmd = meta(next);
    json_t *fin = json_object_get(nmd, "finalizers");
    if (!json_is_array(fin)) {
        fin = json_array();
        json_object_set_new(nmd, "finalizers", fin);
    }
    bool is_ns = strcmp(def->key, "namespaces") == 0;
    const char *extra = NULL;
    if (policy && strcmp(policy, "Foreground") == 0)
        extra = "foregroundDeletion";
    else if (policy && strcmp(policy, "Orphan") == 0)
        extra = "orphan";
    if (extra && !meta_str(cur, "deletionTimestamp")) {
        bool have = false;
        size_t i;
        json_t *f;
        json_array_foreach(fin, i, f)
        {
            if (strcmp(str_or(json_string_value(f), ""), extra) == 0)
                have = true;
        }
        if (!have)
            json_array_append_new(fin, json_string(extra));
    }
    bool pending = json_array_size(fin) > 0 || is_ns;
    if (json_array_size(fin) == 0)
        json_object_del(nmd, "finalizers");
    if (pending) {
        if (!json_object_get(nmd, "deletionTimestamp")) {
            char now[32];
            ks_now_rfc3339(now, sizeof(now));
            json_object_set_new(nmd, "deletionTimestamp", json_string(now));
            json_object_set_new(nmd, "deletionGracePeriodSeconds", json_integer(0));
            if (json_is_integer(json_object_get(nmd, "generation")))
                json_object_set_new(
                    nmd, "generation",
                    json_integer(json_integer_value(json_object_get(nmd, "generation")) + 1));
            if (is_ns)
                json_object_set_new(ks_ensure_obj(next, "status"), "phase",
                                    json_string("Terminating"));
            if (def->typed)
                ks_typed_order(next);
            if (!dry) {
                json_incref(next);
                ks_store_put(ks, def, key, next);
                ks->gc_dirty = true;
                pthread_cond_broadcast(&ks->changed);
            }
        }
        pthread_mutex_unlock(&ks->lock);
        respond_object(ks, def, next, q->version, 200, r);
        json_decref(next);
        goto out;
    }
    json_decref(next);
    if (!dry)
        ks_remove_object(ks, def, key);
    pthread_mutex_unlock(&ks->lock);
    /* the registries with ReturnDeletedObject answer with the object */
    if (def->return_deleted) {
        respond_object(ks, def, cur, q->version, 200, r);
        goto out;
    }
    json_t *details = ks_details(def, q->name);
    json_object_set_new(details, "uid", json_string(uid));
    free(r->body);
    r->code = 200;
    r->body = ks_status_body(0, "Success", NULL, NULL, details, &r->len);
    r->content_type = "application/json";
out:
    json_decref(cur);
    json_decref(cur_v);
    json_decref(opts);
}

static void do_delete_collection(struct ks_api_req *q, const struct ks_res *def, struct ks_reply *r)
{
    struct ks_server *ks = q->ks;
    struct list_opts o;
    if (parse_list_opts(q, def, &o, r) != 0) {
        list_opts_free(&o); /* what was parsed before the bad parameter */
        return;
    }
    json_t *names = json_array();
    pthread_mutex_lock(&ks->lock);
    const char *key;
    json_t *obj;
    json_object_foreach(ks_store_map(ks, def->key), key, obj)
    {
        if (q->ns && strcmp(str_or(meta_str(obj, "namespace"), ""), q->ns) != 0)
            continue;
        if (ks_selector_match(o.labels, obj) && ks_selector_match(o.fields, obj))
            json_array_append_new(names, json_string(str_or(meta_str(obj, "name"), "")));
    }
    pthread_mutex_unlock(&ks->lock);
    list_opts_free(&o);
    json_t *items = json_array();
    size_t i;
    json_t *n;
    json_array_foreach(names, i, n)
    {
        struct ks_reply one = {0};
        char k[512];
        ks_obj_key(k, sizeof(k), q->ns, json_string_value(n));
        char *saved = q->name;
        q->name = (char *)json_string_value(n);
        do_delete(q, def, k, &one);
        q->name = saved;
        free(one.body);
        json_decref(one.warnings);
    }
    json_decref(names);
    json_t *list = json_pack("{s:s,s:s,s:{},s:o}", "kind", def->list_kind, "apiVersion",
                             def->group[0] ? def->group : "v1", "metadata", "items", items);
    char *av = ks_api_version(def->group, q->version);
    json_object_set_new(list, "apiVersion", json_string(av));
    free(av);
    ks_reply_json(r, 200, list, !def->typed);
    json_decref(list);
}

/* kubesim reads JSON, and protobuf for the built-in kinds (protobuf.c;
 * parse_body answers 415 for other kinds as the apiserver does): a create
 * or update in another media type (YAML, CBOR) gets the 415 the apiserver
 * gives for a media type it has no serializer for. */
static bool json_body(struct ks_api_req *q, struct ks_reply *r)
{
    const char *ct = q->content_type;
    size_t n = strlen("application/json");
    if (!ct || !*ct || (strncmp(ct, "application/json", n) == 0 && (ct[n] == '\0' || ct[n] == ';')))
        return true;
    if (ks_pb_media_type(ct))
        return true;
    ks_reply_status(r, 415, "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types "
                    "include: application/json",
                    NULL);
    return false;
}

/* ---- deployments/scale ------------------------------------------------------------ */

/* The autoscaling/v1 Scale of a stored Deployment. @ref new */
static json_t *scale_of(const json_t *dep)
{
    const json_t *md = json_object_get(dep, "metadata");
    json_t *smd = json_object();
    static const char *const keep[] = {
        "name", "namespace", "uid", "resourceVersion", "creationTimestamp", NULL};
    for (const char *const *k = keep; *k; k++)
        if (json_object_get(md, *k))
            json_object_set(smd, *k, json_object_get(md, *k));
    const json_t *spec = json_object_get(dep, "spec");
    json_int_t want = json_integer_value(json_object_get(spec, "replicas"));
    json_t *sspec = json_object();
    if (want) /* replicas is omitempty in Scale */
        json_object_set_new(sspec, "replicas", json_integer(want));
    /* The selector as text: matchLabels k=v (sorted), matchExpressions. */
    const json_t *sel = json_object_get(spec, "selector");
    const json_t *ml = json_object_get(sel, "matchLabels");
    size_t k;
    const char **keys = ks_sorted_keys(ml, &k);
    json_t *v;
    char *text = ks_strdup("");
    for (size_t i = 0; i < k; i++) {
        char *nt = ks_printf("%s%s%s=%s", text, *text ? "," : "", keys[i],
                             str_or(json_string_value(json_object_get(ml, keys[i])), ""));
        free(text);
        text = nt;
    }
    free(keys);
    size_t i;
    json_array_foreach(json_object_get(sel, "matchExpressions"), i, v)
    {
        const char *op = str_or(json_string_value(json_object_get(v, "operator")), "");
        const char *ek = str_or(json_string_value(json_object_get(v, "key")), "");
        char *vals = ks_strdup("");
        size_t j;
        json_t *x;
        json_array_foreach(json_object_get(v, "values"), j, x)
        {
            char *nv = ks_printf("%s%s%s", vals, j ? "," : "", str_or(json_string_value(x), ""));
            free(vals);
            vals = nv;
        }
        char *term = strcmp(op, "Exists") == 0         ? ks_strdup(ek)
                     : strcmp(op, "DoesNotExist") == 0 ? ks_printf("!%s", ek)
                     : strcmp(op, "NotIn") == 0        ? ks_printf("%s notin (%s)", ek, vals)
                                                       : ks_printf("%s in (%s)", ek, vals);
        char *nt = ks_printf("%s%s%s", text, *text ? "," : "", term);
        free(term);
        free(vals);
        free(text);
        text = nt;
    }
    json_t *status =
        json_pack("{s:I,s:s}", "replicas",
                  json_integer_value(json_object_get(json_object_get(dep, "status"), "replicas")),
                  "selector", text);
    free(text);
    return json_pack("{s:s,s:s,s:o,s:o,s:o}", "kind", "Scale", "apiVersion", "autoscaling/v1",
                     "metadata", smd, "spec", sspec, "status", status);
}

static void do_scale(struct ks_api_req *q, const struct ks_res *def, const char *key,
                     struct ks_reply *r)
{
    struct ks_server *ks = q->ks;
    bool get = strcmp(q->verb, "get") == 0;
    enum patch_kind pk = PATCH_NONE;
    json_t *body = NULL;
    if (!get) {
        if (strcmp(q->verb, "patch") == 0) {
            pk = patch_kind(q->content_type);
            if (pk == PATCH_NONE || pk == PATCH_APPLY) {
                ks_reply_status(r, 415, "UnsupportedMediaType",
                                "the body of the request was in an unknown format - accepted "
                                "media types include: application/json-patch+json, "
                                "application/merge-patch+json, "
                                "application/strategic-merge-patch+json",
                                NULL);
                return;
            }
        } else if (strcmp(q->verb, "update") != 0) {
            char *msg = ks_printf("%s is not supported on resources of kind \"Scale\"", q->method);
            ks_reply_status(r, 405, "MethodNotAllowed", msg, NULL);
            free(msg);
            return;
        } else if (!json_body(q, r)) {
            return;
        }
        body = parse_body(q, r);
        if (!body)
            return;
        if (patch_body_shape(q, pk, body, r) != 0) {
            json_decref(body);
            return;
        }
    }
    for (int attempt = 0; attempt < 8; attempt++) {
        pthread_mutex_lock(&ks->lock);
        json_t *cur = json_incref(ks_store_get(ks, def->key, key));
        pthread_mutex_unlock(&ks->lock);
        if (!cur) {
            reply_not_found(r, def, q->name);
            break;
        }
        json_t *scale = scale_of(cur);
        json_t *next = NULL;
        char *err = NULL;
        bool retry = false;
        if (get) {
            ks_reply_json(r, 200, scale, false);
            goto next_attempt;
        }
        switch (pk) {
        case PATCH_NONE:
            next = json_deep_copy(body);
            break;
        case PATCH_MERGE:
        case PATCH_APPLY:
            next = ks_merge_patch(scale, body);
            break;
        case PATCH_STRATEGIC:
            next = ks_strategic_patch(scale, body, &err);
            break;
        case PATCH_JSON:
            next = ks_json_patch(scale, body, &err);
            break;
        }
        if (!json_is_object(next)) {
            ks_reply_status(r, pk == PATCH_JSON ? 422 : 400,
                            pk == PATCH_JSON ? "Invalid" : "BadRequest",
                            err ? err : "the object provided is unrecognized", NULL);
            free(err);
            goto next_attempt;
        }
        const char *av = json_string_value(json_object_get(next, "apiVersion"));
        const char *kind = json_string_value(json_object_get(next, "kind"));
        if ((av && strcmp(av, "autoscaling/v1") != 0) || (kind && strcmp(kind, "Scale") != 0)) {
            char *msg = ks_printf("the API version in the data (%s) does not match the expected "
                                  "API version (autoscaling/v1)",
                                  str_or(av, ""));
            reply_bad_request(r, msg);
            free(msg);
            goto next_attempt;
        }
        const json_t *want = json_object_get(json_object_get(next, "spec"), "replicas");
        json_int_t replicas = want ? json_integer_value(want) : 0;
        if ((want && !json_is_integer(want)) || replicas < 0 || replicas > INT32_MAX) {
            char *m = ks_printf("Invalid value: %lld: must be greater than or equal to 0",
                                (long long)replicas);
            json_t *causes = one_cause("FieldValueInvalid", "spec.replicas", m);
            free(m);
            char *msg = ks_printf("Scale.autoscaling \"%s\" is invalid: spec.replicas: "
                                  "Invalid value: %lld: must be greater than or equal to 0",
                                  q->name, (long long)replicas);
            json_t *details = json_pack("{s:s,s:s,s:s,s:o}", "name", q->name, "group",
                                        "autoscaling", "kind", "Scale", "causes", causes);
            ks_reply_status(r, 422, "Invalid", msg, details);
            free(msg);
            goto next_attempt;
        }
        const char *want_rv = meta_str(next, "resourceVersion");
        const char *cur_rv = str_or(meta_str(cur, "resourceVersion"), "");
        if (want_rv && *want_rv && strcmp(want_rv, cur_rv) != 0) {
            reply_conflict(r, def, q->name,
                           "the object has been modified; please apply your changes to the "
                           "latest version and try again");
            goto next_attempt;
        }
        json_t *dep = json_deep_copy(cur);
        json_t *spec = ks_ensure_obj(dep, "spec");
        if (json_integer_value(json_object_get(spec, "replicas")) != replicas) {
            json_object_set_new(spec, "replicas", json_integer(replicas));
            json_t *md = meta(dep);
            json_object_set_new(
                md, "generation",
                json_integer(json_integer_value(json_object_get(md, "generation")) + 1));
            struct ssa s; /* an Update of subresource "scale" */
            ssa_begin(q, def, &s);
            ks_ssa_update(cur, dep, &s.c);
            ssa_end(&s);
            ks_typed_order(dep);
        }
        bool dry = dry_run(q, NULL);
        pthread_mutex_lock(&ks->lock);
        const json_t *now = ks_store_get(ks, def->key, key);
        if (!now || strcmp(str_or(meta_str(now, "resourceVersion"), ""), cur_rv) != 0) {
            pthread_mutex_unlock(&ks->lock);
            json_decref(dep);
            retry = true;
            goto next_attempt;
        }
        if (!dry && !json_equal(dep, cur)) {
            json_incref(dep);
            ks_store_put(ks, def, key, dep);
        }
        pthread_mutex_unlock(&ks->lock);
        json_t *out = scale_of(dep);
        ks_reply_json(r, 200, out, false);
        json_decref(out);
        json_decref(dep);
    next_attempt:
        json_decref(cur);
        json_decref(scale);
        json_decref(next);
        if (!retry)
            break;
        if (attempt == 7)
            reply_conflict(r, def, q->name,
                           "the object has been modified; please apply your changes to the "
                           "latest version and try again");
    }
    json_decref(body);
}

/* ---- dispatch ------------------------------------------------------------------- */

void ks_handle_api(struct ks_api_req *q, struct ks_reply *r)
{
    struct ks_server *ks = q->ks;
    pthread_mutex_lock(&ks->lock);
    const struct ks_res *def = ks_res_find(ks, q->group, q->plural);
    const struct ks_version *ver = def ? ks_res_version(def, q->version) : NULL;
    pthread_mutex_unlock(&ks->lock);

    bool scale = q->sub && strcmp(q->sub, "scale") == 0 &&
                 strcmp(def ? def->key : "", "deployments.apps") == 0;
    if (!def || !ver || !ver->served || (q->ns && !def->namespaced) ||
        (q->sub && !scale && !(strcmp(q->sub, "status") == 0 && ver->status))) {
        ks_reply_status(r, 404, "NotFound", "the server could not find the requested resource",
                        json_object());
        return;
    }
    if (def->create_only && (strcmp(q->verb, "create") != 0 || q->name || q->sub)) {
        /* a review: POST to the collection, nothing else is routed
         * (go-restful's 405 through apierrors.NewGenericServerResponse) */
        ks_reply_status(r, 405, "MethodNotAllowed",
                        "the server does not allow this method on the requested resource",
                        json_pack("{s:[{s:s,s:s}]}", "causes", "reason", "UnexpectedServerResponse",
                                  "message", "405: Method Not Allowed"));
        return;
    }
    char key[512] = "";
    if (q->name)
        ks_obj_key(key, sizeof(key), def->namespaced ? q->ns : NULL, q->name);
    if (ver->deprecation) {
        if (!r->warnings)
            r->warnings = json_array();
        json_array_append_new(r->warnings, json_string(ver->deprecation));
    }

    if (scale) {
        do_scale(q, def, key, r);
    } else if (strcmp(q->verb, "get") == 0) {
        do_get(q, def, key, r);
    } else if (strcmp(q->verb, "list") == 0) {
        do_list(q, def, r);
    } else if (strcmp(q->verb, "watch") == 0) {
        ks_watch_start(q, def, r);
    } else if (strcmp(q->verb, "create") == 0) {
        if (def->namespaced && !q->ns) {
            ks_reply_status(r, 404, "NotFound", "the server could not find the requested resource",
                            json_object());
            return;
        }
        if (!json_body(q, r))
            return;
        json_t *obj = parse_body(q, r);
        if (!obj)
            return;
        if (check_type(def, q->version, obj, r) == 0) {
            if (def->create_only) /* a review: nothing stored (authz.c) */
                ks_review_create(q, def, obj, r);
            else
                do_create(q, def, obj, dry_run(q, NULL), r);
        }
        json_decref(obj);
    } else if (strcmp(q->verb, "update") == 0 || strcmp(q->verb, "patch") == 0) {
        enum patch_kind pk = PATCH_NONE;
        if (strcmp(q->verb, "patch") == 0) {
            pk = patch_kind(q->content_type);
            if (pk == PATCH_NONE) {
                ks_reply_status(r, 415, "UnsupportedMediaType",
                                "the body of the request was in an unknown format - accepted "
                                "media types include: application/json-patch+json, "
                                "application/merge-patch+json, application/apply-patch+yaml",
                                NULL);
                return;
            }
        } else if (!json_body(q, r)) {
            return;
        }
        json_t *body = parse_body(q, r);
        if (!body)
            return;
        do_update(q, def, key, body, pk, dry_run(q, NULL), r);
        json_decref(body);
    } else if (strcmp(q->verb, "delete") == 0) {
        do_delete(q, def, key, r);
    } else if (strcmp(q->verb, "deletecollection") == 0) {
        do_delete_collection(q, def, r);
    } else {
        char *msg =
            ks_printf("%s is not supported on resources of kind \"%s\"", q->method, def->kind);
        ks_reply_status(r, 405, "MethodNotAllowed", msg, NULL);
        free(msg);
    }
}
