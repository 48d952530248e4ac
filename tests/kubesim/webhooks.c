/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim as a webhook client, the way the kube-apiserver calls them.
 *
 * Conversion: a CRD with spec.conversion.strategy Webhook gets one
 * ConversionReview per read/list/watch batch/write that needs another
 * version (v1 preferred, else v1beta1, per conversionReviewVersions), and
 * the reply is checked as apiextensions-apiserver does: review
 * apiVersion/kind and uid (v1 only), result status, object count,
 * each object's apiVersion and kind, same name/namespace/uid, and
 * restoreObjectMeta (only labels and annotations may change; they must be
 * string maps with valid keys and values).
 *
 * Validating admission: ValidatingWebhookConfigurations are matched on
 * operation, group, version, resource (with subresource) and scope, with
 * matchPolicy Equivalent (the object is converted to a version the rule
 * lists), namespaceSelector on the namespace's labels and objectSelector.
 * Replies are checked (review type, uid, no patch), failurePolicy
 * Fail/Ignore applies to call errors, denials become the apiserver's
 * `admission webhook "NAME" denied the request: MESSAGE` Status.
 *
 * Mutating admission (before the validating webhooks, as the apiserver's
 * admission chain orders them): MutatingWebhookConfigurations sorted by
 * name, each webhook called in turn on the output of the previous one; a
 * JSONPatch reply (patchType JSONPatch, base64 patch) is applied to the
 * object in the webhook's version and converted back; reinvocationPolicy
 * IfNeeded webhooks are called once more when a later webhook changed the
 * object (k8s.io/apiserver/pkg/admission/plugin/webhook/mutating/
 * dispatcher.go).
 *
 * Transport: a clientConfig.service goes through whclient.c (a connection
 * pool per Service in front of its endpoints, the apiserver's retry rules,
 * traceparent); a clientConfig.url through libcurl, HTTPS, caBundle as
 * CURLOPT_CAINFO_BLOB. Both POST path?timeout=Ns, Content-Type
 * application/json, User-Agent kube-apiserver-admission.
 */
#include "kubesim.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kop/curltls.h"

static const char *jstr(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

struct body {
    char *data;
    size_t len;
};

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct body *b = userdata;
    size_t n = size * nmemb;
    if (b->len + n > 256u * 1024 * 1024)
        return 0;
    char *nd = realloc(b->data, b->len + n + 1);
    if (!nd)
        return 0;
    b->data = nd;
    memcpy(b->data + b->len, ptr, n);
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}

/* POST body to a webhook clientConfig. On success *ret_resp is the reply
 * body (malloc'd). On failure *ret_err reads like Go's client error
 * ("Post \"URL\": ..."). */
static int call_webhook(struct ks_server *ks, const json_t *cc, long timeout_s, const char *payload,
                        char **ret_resp, char **ret_err)
{
    const json_t *svc = json_object_get(cc, "service");
    const char *curl_url = json_string_value(json_object_get(cc, "url"));
    char *url = NULL;
    unsigned char *ca = NULL;
    size_t ca_len = 0;
    int rc = -EIO;
    CURL *h = NULL;
    struct curl_slist *hdrs = NULL;
    struct body resp = {0};

    if (curl_url) {
        url = ks_printf("%s%stimeout=%lds", curl_url, strchr(curl_url, '?') ? "&" : "?", timeout_s);
    } else if (json_is_object(svc)) {
        const char *path = jstr(svc, "path");
        char *path_q = ks_printf("%s%s?timeout=%lds", *path == '/' ? "" : "/", path, timeout_s);
        const struct ks_wh_call call = {
            .ns = jstr(svc, "namespace"),
            .name = jstr(svc, "name"),
            .port = json_is_integer(json_object_get(svc, "port"))
                        ? (long)json_integer_value(json_object_get(svc, "port"))
                        : 443,
            .path = path_q,
            .ca_bundle = json_string_value(json_object_get(cc, "caBundle")),
            .payload = payload,
            .timeout_ms = timeout_s * 1000L,
        };
        rc = ks_whclient_post(ks, &call, ret_resp, ret_err);
        free(path_q);
        return rc;
    } else {
        *ret_err = ks_strdup("webhook clientConfig has neither url nor service");
        goto out;
    }
    const char *bundle = json_string_value(json_object_get(cc, "caBundle"));
    if (bundle && *bundle) {
        ca = ks_base64_decode(bundle, &ca_len);
        if (!ca) {
            *ret_err = ks_printf("Post \"%s\": invalid caBundle", url);
            goto out;
        }
    }
    h = curl_easy_init();
    if (!h) {
        *ret_err = ks_strdup("curl_easy_init failed");
        goto out;
    }
    char errbuf[CURL_ERROR_SIZE] = "";
    hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    hdrs = curl_slist_append(hdrs, "Accept: application/json, */*");
    hdrs = curl_slist_append(hdrs, "Expect:");
    curl_easy_setopt(h, CURLOPT_URL, url);
    kop_curltls_setup(h); /* IP SANs with mbedTLS (kop/curltls.h) */
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "kube-apiserver-admission");
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, payload);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(payload));
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_s * 1000L);
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &resp);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    if (ca) {
        struct curl_blob blob = {.data = ca, .len = ca_len, .flags = CURL_BLOB_COPY};
        curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
    }
    CURLcode cc_rc = curl_easy_perform(h);
    if (cc_rc != CURLE_OK) {
        const char *why;
        char *owned = NULL;
        switch (cc_rc) {
        case CURLE_COULDNT_CONNECT:
            owned = ks_strdup("dial tcp: connect: connection refused");
            why = owned;
            break;
        case CURLE_OPERATION_TIMEDOUT:
            why = "context deadline exceeded";
            break;
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CACERT_BADFILE:
            why = "tls: failed to verify certificate: x509: certificate signed by unknown "
                  "authority";
            break;
        default:
            why = errbuf[0] ? errbuf : curl_easy_strerror(cc_rc);
            break;
        }
        *ret_err = ks_printf("Post \"%s\": %s", url, why);
        if (ks->verbose)
            fprintf(stderr, "kubesim: webhook %s: %s\n", url, errbuf);
        free(owned);
        goto out;
    }
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (status < 200 || status > 299) {
        char snippet[256];
        snprintf(snippet, sizeof(snippet), "%s", resp.data ? resp.data : "");
        *ret_err = ks_printf("an error on the server (\"%s\") has prevented the request from "
                             "succeeding",
                             snippet);
        goto out;
    }
    *ret_resp = resp.data ? resp.data : ks_strdup("");
    resp.data = NULL;
    rc = 0;
out:
    curl_slist_free_all(hdrs);
    if (h)
        curl_easy_cleanup(h);
    free(resp.data);
    free(ca);
    free(url);
    return rc;
}

/* ---- conversion ------------------------------------------------------------ */

static const char *review_version(const json_t *versions, const char *group_prefix)
{
    size_t i;
    json_t *v;
    (void)group_prefix;
    json_array_foreach(versions, i, v)
    {
        const char *s = json_string_value(v);
        if (s && (strcmp(s, "v1") == 0 || strcmp(s, "v1beta1") == 0))
            return s;
    }
    return NULL;
}

static char *gvk_string(const char *api_version, const char *kind)
{
    char *g = NULL, *v = NULL;
    ks_split_api_version(api_version, &g, &v);
    char *s = ks_printf("%s/%s, Kind=%s", g, v, kind);
    free(g);
    free(v);
    return s;
}

static const char *go_type(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "map[string]interface {}";
    case JSON_ARRAY:
        return "[]interface {}";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "int64";
    case JSON_REAL:
        return "float64";
    case JSON_TRUE:
    case JSON_FALSE:
        return "bool";
    case JSON_NULL:
    default:
        return "<nil>";
    }
}

static bool qualified_name_ok(const char *k)
{
    const char *slash = strchr(k, '/');
    const char *name = slash ? slash + 1 : k;
    if (slash) {
        size_t plen = (size_t)(slash - k);
        if (plen == 0 || plen > 253 || strchr(name, '/'))
            return false;
        for (size_t i = 0; i < plen; i++)
            if (!(islower((unsigned char)k[i]) || isdigit((unsigned char)k[i]) || k[i] == '-' ||
                  k[i] == '.'))
                return false;
    }
    size_t n = strlen(name);
    if (n == 0 || n > 63 || !isalnum((unsigned char)name[0]) ||
        !isalnum((unsigned char)name[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(isalnum((unsigned char)name[i]) || strchr("-_.", name[i])))
            return false;
    return true;
}

static bool label_value_ok(const char *v)
{
    size_t n = strlen(v);
    if (n == 0)
        return true;
    if (n > 63 || !isalnum((unsigned char)v[0]) || !isalnum((unsigned char)v[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(isalnum((unsigned char)v[i]) || strchr("-_.", v[i])))
            return false;
    return true;
}

/* restoreObjectMeta: original metadata, labels/annotations from converted.
 * @ref new result, or NULL with *ret_err. */
static json_t *restore_meta(const json_t *original, const json_t *converted, char **ret_err)
{
    const json_t *cmd = json_object_get(converted, "metadata");
    if (!cmd) {
        *ret_err = ks_strdup("missing metadata in converted object");
        return NULL;
    }
    if (!json_is_object(cmd)) {
        *ret_err = ks_printf("invalid metadata of type %s in converted object", go_type(cmd));
        return NULL;
    }
    json_t *out = json_deep_copy(converted);
    json_t *md = json_deep_copy(json_object_get(original, "metadata"));
    if (!json_is_object(md)) {
        json_decref(md);
        md = json_object();
    }
    static const char *const fields[] = {"labels", "annotations"};
    for (size_t f = 0; f < 2; f++) {
        const json_t *resp = json_object_get(cmd, fields[f]);
        if (!resp || json_is_null(resp)) {
            json_object_del(md, fields[f]);
            continue;
        }
        if (!json_is_object(resp)) {
            *ret_err = ks_printf("invalid metadata.%s of type %s in converted object", fields[f],
                                 go_type(resp));
            goto fail;
        }
        const json_t *orig = json_object_get(md, fields[f]);
        bool changed = json_object_size(orig) != json_object_size(resp);
        const char *k;
        json_t *v;
        size_t total = 0;
        json_object_foreach((json_t *)resp, k, v)
        {
            if (!json_is_string(v)) {
                *ret_err = ks_printf("metadata.%s[%s] must be a string, but is %s in converted "
                                     "object",
                                     fields[f], k, go_type(v));
                goto fail;
            }
            if (!json_equal(json_object_get(orig, k), v))
                changed = true;
            total += strlen(k) + json_string_length(v);
        }
        if (changed) {
            json_object_foreach((json_t *)resp, k, v)
            {
                if (!qualified_name_ok(k)) {
                    *ret_err = ks_printf(
                        "metadata.%s: Invalid value: \"%s\": name part must consist of "
                        "alphanumeric characters, '-', '_' or '.', and must start and end with an "
                        "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
                        "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                        f == 0 ? "labels" : "annotation", k);
                    goto fail;
                }
                if (f == 0 && !label_value_ok(json_string_value(v))) {
                    *ret_err = ks_printf(
                        "metadata.labels: Invalid value: \"%s\": %s", json_string_value(v),
                        json_string_length(v) > 63
                            ? "must be no more than 63 characters"
                            : "a valid label must be an empty string or consist of alphanumeric "
                              "characters, '-', '_' or '.', and must start and end with an "
                              "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
                              "'12345', regex used for validation is "
                              "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')");
                    goto fail;
                }
            }
            if (f == 1 && total > 256u * 1024) {
                *ret_err = ks_strdup("metadata.annotation: Too long: must have at most 262144 "
                                     "bytes");
                goto fail;
            }
        }
        json_object_set(md, fields[f], (json_t *)resp);
    }
    json_object_set_new(out, "metadata", md);
    return out;
fail:
    json_decref(md);
    json_decref(out);
    return NULL;
}

int ks_convert(struct ks_server *ks, const struct ks_res *def, const json_t *objs, const char *to,
               json_t **ret_out, char **ret_err)
{
    char *to_av = ks_api_version(def->group, to);
    json_t *out = json_array();
    json_t *send = json_array();
    json_t *idx = json_array();
    size_t i;
    json_t *o;
    int rc = 0;
    char *err = NULL;
    char *resp_txt = NULL;
    json_t *resp = NULL;
    char *gvk = NULL;

    json_array_foreach(objs, i, o)
    {
        json_t *copy = json_deep_copy(o);
        const char *av = jstr(o, "apiVersion");
        if (strcmp(av, to_av) != 0) {
            if (!def->conversion) {
                json_object_set_new(copy, "apiVersion", json_string(to_av));
            } else {
                json_array_append(send, o);
                json_array_append_new(idx, json_integer((json_int_t)i));
            }
        }
        json_array_append_new(out, copy);
    }
    if (json_array_size(send) == 0)
        goto done;

    const json_t *first = json_array_get(send, 0);
    gvk = gvk_string(jstr(first, "apiVersion"), jstr(first, "kind"));
    const json_t *wh = json_object_get(def->conversion, "webhook");
    const json_t *cc = json_object_get(wh, "clientConfig");
    if (!cc) /* v1beta1-style CRDs kept it one level up */
        cc = json_object_get(def->conversion, "webhookClientConfig");
    const char *rv = review_version(json_object_get(wh, "conversionReviewVersions"), NULL);
    if (!rv && !json_object_get(wh, "conversionReviewVersions"))
        rv = "v1beta1";
    if (!rv) {
        err = ks_printf("conversion webhook for %s failed: webhook does not accept v1 or v1beta1 "
                        "ConversionReview",
                        gvk);
        goto fail;
    }
    char uid[40];
    ks_uuid(uid, sizeof(uid));
    char *review_av = ks_printf("apiextensions.k8s.io/%s", rv);
    json_t *req =
        json_pack("{s:s,s:s,s:{s:s,s:s,s:O}}", "kind", "ConversionReview", "apiVersion", review_av,
                  "request", "uid", uid, "desiredAPIVersion", to_av, "objects", send);
    char *payload = ks_dump(req, false, NULL);
    json_decref(req);
    char *call_err = NULL;
    int crc = call_webhook(ks, cc, 30, payload, &resp_txt, &call_err);
    free(payload);
    if (crc != 0) {
        err = ks_printf("conversion webhook for %s failed: %s", gvk, call_err);
        free(call_err);
        free(review_av);
        goto fail;
    }
    json_error_t jerr;
    resp = json_loads(resp_txt, 0, &jerr);
    if (!json_is_object(resp)) {
        err = ks_printf("conversion webhook for %s failed: %s", gvk, jerr.text);
        free(review_av);
        goto fail;
    }
    const json_t *response = json_object_get(resp, "response");
    if (strcmp(rv, "v1") == 0) {
        if (strcmp(jstr(resp, "apiVersion"), review_av) != 0 ||
            strcmp(jstr(resp, "kind"), "ConversionReview") != 0) {
            char *got = gvk_string(jstr(resp, "apiVersion"), jstr(resp, "kind"));
            err = ks_printf("conversion webhook for %s failed: expected webhook response of "
                            "apiextensions.k8s.io/v1, Kind=ConversionReview, got %s",
                            gvk, got);
            free(got);
            free(review_av);
            goto fail;
        }
    }
    free(review_av);
    if (!json_is_object(response)) {
        err = ks_printf("conversion webhook for %s failed: no response provided", gvk);
        goto fail;
    }
    if (strcmp(rv, "v1") == 0 && strcmp(jstr(response, "uid"), uid) != 0) {
        err = ks_printf("conversion webhook for %s failed: expected response.uid=\"%s\", got "
                        "\"%s\"",
                        gvk, uid, jstr(response, "uid"));
        goto fail;
    }
    const json_t *result = json_object_get(response, "result");
    if (strcmp(jstr(result, "status"), "Success") != 0) {
        if (*jstr(result, "message"))
            err = ks_printf("conversion webhook for %s failed: %s", gvk, jstr(result, "message"));
        else
            err = ks_printf("conversion webhook for %s failed: response.result.status was '%s', "
                            "not 'Success'",
                            gvk, jstr(result, "status"));
        goto fail;
    }
    const json_t *conv = json_object_get(response, "convertedObjects");
    if (json_array_size(conv) != json_array_size(send)) {
        err = ks_printf("conversion webhook for %s returned %zu objects, expected %zu", gvk,
                        json_array_size(conv), json_array_size(send));
        goto fail;
    }
    bool single = json_array_size(objs) == 1;
    json_array_foreach(conv, i, o)
    {
        const json_t *orig = json_array_get(send, i);
        size_t at = (size_t)json_integer_value(json_array_get(idx, i));
        char *where = single ? ks_strdup("invalid object at index 0")
                             : ks_printf("invalid converted object at index %zu", i + 1);
        if (!json_is_object(o)) {
            err = ks_printf("conversion webhook for %s returned %s: invalid object", gvk, where);
        } else if (strcmp(jstr(o, "apiVersion"), to_av) != 0) {
            char *g = NULL, *v = NULL;
            ks_split_api_version(jstr(o, "apiVersion"), &g, &v);
            err = ks_printf("conversion webhook for %s returned %s: invalid groupVersion "
                            "(expected %s, received %s%s%s)",
                            gvk, where, to_av, g, *g ? "/" : "", v);
            free(g);
            free(v);
        } else if (strcmp(jstr(o, "kind"), jstr(orig, "kind")) != 0) {
            err = ks_printf("conversion webhook for %s returned %s: invalid kind (expected %s, "
                            "received %s)",
                            gvk, where, jstr(orig, "kind"), jstr(o, "kind"));
        }
        free(where);
        if (err)
            goto fail;
        const json_t *om = json_object_get(orig, "metadata");
        const json_t *cm = json_object_get(o, "metadata");
        static const char *const same[] = {"name", "namespace", "uid"};
        static const char *const label[] = {"name", "namespace", "UID"};
        for (size_t s = 0; s < 3 && !err; s++)
            if (strcmp(jstr(om, same[s]), json_is_object(cm) ? jstr(cm, same[s]) : "") != 0)
                err = ks_printf("conversion webhook for %s returned invalid %s: must have the "
                                "same %s: %s != %s",
                                gvk, single ? "object" : "converted object at index", label[s],
                                jstr(om, same[s]), json_is_object(cm) ? jstr(cm, same[s]) : "");
        if (err)
            goto fail;
        char *merr = NULL;
        json_t *fixed = restore_meta(orig, o, &merr);
        if (!fixed) {
            err = single ? ks_printf("conversion webhook for %s returned invalid metadata: %s", gvk,
                                     merr)
                         : ks_printf("conversion webhook for %s returned invalid metadata in "
                                     "object at index %zu: %s",
                                     gvk, i + 1, merr);
            free(merr);
            goto fail;
        }
        json_array_set_new(out, at, fixed);
    }
    goto done;
fail:
    rc = -EIO;
    *ret_err = err;
    json_decref(out);
    out = NULL;
done:
    if (rc == 0)
        *ret_out = out;
    json_decref(send);
    json_decref(idx);
    json_decref(resp);
    free(resp_txt);
    free(to_av);
    free(gvk);
    return rc;
}

int ks_convert_one(struct ks_server *ks, const struct ks_res *def, const json_t *obj,
                   const char *to, json_t **ret_out, char **ret_err)
{
    json_t *arr = json_pack("[O]", obj);
    json_t *out = NULL;
    int rc = ks_convert(ks, def, arr, to, &out, ret_err);
    json_decref(arr);
    if (rc != 0)
        return rc;
    *ret_out = json_incref(json_array_get(out, 0));
    json_decref(out);
    return 0;
}

/* ---- validating admission ----------------------------------------------------- */

static bool list_has(const json_t *list, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        const char *x = json_string_value(v);
        if (x && (strcmp(x, s) == 0 || strcmp(x, "*") == 0))
            return true;
    }
    return false;
}

static bool resource_match(const json_t *list, const char *plural, const char *sub)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        const char *x = json_string_value(v);
        if (!x)
            continue;
        if (strcmp(x, "*/*") == 0)
            return true;
        const char *slash = strchr(x, '/');
        if (!*sub) {
            if (strcmp(x, "*") == 0 || strcmp(x, plural) == 0)
                return true;
            continue;
        }
        if (!slash)
            continue;
        bool res_ok =
            (size_t)(slash - x) == strlen(plural) && strncmp(x, plural, (size_t)(slash - x)) == 0;
        bool star = slash - x == 1 && x[0] == '*';
        if ((res_ok || star) && (strcmp(slash + 1, sub) == 0 || strcmp(slash + 1, "*") == 0))
            return true;
    }
    return false;
}

static bool rule_match(const json_t *rule, const struct ks_res *def, const char *version,
                       const char *op, const char *sub)
{
    if (!list_has(json_object_get(rule, "operations"), op))
        return false;
    if (!list_has(json_object_get(rule, "apiGroups"), def->group))
        return false;
    if (!list_has(json_object_get(rule, "apiVersions"), version))
        return false;
    if (!resource_match(json_object_get(rule, "resources"), def->plural, sub))
        return false;
    const char *scope = jstr(rule, "scope");
    if (*scope && strcmp(scope, "*") != 0 &&
        strcmp(scope, def->namespaced ? "Namespaced" : "Cluster") != 0)
        return false;
    return true;
}

static bool label_selector_match(const json_t *sel, const json_t *labels)
{
    if (!json_is_object(sel))
        return true;
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(sel, "matchLabels"), k, v)
    {
        if (!json_equal(json_object_get(labels, k), v))
            return false;
    }
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(sel, "matchExpressions"), i, e)
    {
        const json_t *have = json_object_get(labels, jstr(e, "key"));
        const char *op = jstr(e, "operator");
        bool in = false;
        size_t j;
        json_t *x;
        json_array_foreach(json_object_get(e, "values"), j, x)
        {
            if (have && json_equal(have, x))
                in = true;
        }
        if (strcmp(op, "In") == 0 && !in)
            return false;
        if (strcmp(op, "NotIn") == 0 && in)
            return false;
        if (strcmp(op, "Exists") == 0 && !have)
            return false;
        if (strcmp(op, "DoesNotExist") == 0 && have)
            return false;
    }
    return true;
}

struct match {
    json_t *hook;  /* @ref owned */
    char *version; /* version the webhook gets */
    char *uid;     /* configuration name/index */
    bool reinvoke; /* due for the reinvocation pass */
};

static void admit_error(int *ret_code, char **ret_body, const char *name, const char *reason)
{
    char *inner = ks_printf("failed calling webhook \"%s\": %s", name, reason);
    char *msg = ks_printf("Internal error occurred: %s", inner);
    json_t *details = json_pack("{s:[{s:s}]}", "causes", "message", inner);
    *ret_code = 500;
    *ret_body = ks_status_body(500, "Failure", "InternalError", msg, details, NULL);
    free(inner);
    free(msg);
}

/* The webhooks of every configuration in res_key that match the request, in
 * the apiserver's order: configurations sorted by name, webhooks in their
 * listed order (k8s.io/apiserver/pkg/admission/configuration/
 * mutating_webhook_manager.go sorts by name; validating ones run in
 * parallel, so their order only decides which denial is reported). */
static size_t collect_matches(struct ks_server *ks, const struct ks_admit_req *ar,
                              const char *res_key, struct match **ret)
{
    struct match *matches = NULL;
    size_t nmatches = 0;
    const json_t *labels_new = json_object_get(json_object_get(ar->obj, "metadata"), "labels");
    const json_t *labels_old = json_object_get(json_object_get(ar->old, "metadata"), "labels");

    pthread_mutex_lock(&ks->lock);
    json_t *ns_labels = NULL;
    if (ar->def->namespaced && *ar->ns)
        ns_labels = json_incref(json_object_get(
            json_object_get(ks_store_get(ks, "namespaces", ar->ns), "metadata"), "labels"));
    if (!ns_labels)
        ns_labels = json_pack("{s:s}", "kubernetes.io/metadata.name", ar->ns);
    json_t *map = ks_store_map(ks, res_key);
    size_t ncfg, c;
    const char **keys = ks_sorted_keys(map, &ncfg);
    json_t *cfg;
    for (c = 0; c < ncfg; c++) {
        cfg = json_object_get(map, keys[c]);
        size_t i;
        json_t *hook;
        json_array_foreach(json_object_get(cfg, "webhooks"), i, hook)
        {
            const json_t *rules = json_object_get(hook, "rules");
            const char *chosen = NULL;
            size_t r;
            json_t *rule;
            json_array_foreach(rules, r, rule)
            {
                if (rule_match(rule, ar->def, ar->version, ar->operation, ar->subresource))
                    chosen = ar->version;
            }
            if (!chosen && strcmp(jstr(hook, "matchPolicy"), "Exact") != 0) {
                for (size_t v = 0; v < ar->def->nversions && !chosen; v++) {
                    if (!ar->def->versions[v].served)
                        continue;
                    json_array_foreach(rules, r, rule)
                    {
                        if (!chosen && rule_match(rule, ar->def, ar->def->versions[v].name,
                                                  ar->operation, ar->subresource))
                            chosen = ar->def->versions[v].name;
                    }
                }
            }
            if (!chosen)
                continue;
            if (ar->def->namespaced &&
                !label_selector_match(json_object_get(hook, "namespaceSelector"), ns_labels))
                continue;
            if (strcmp(ar->def->key, "namespaces") == 0 &&
                !label_selector_match(json_object_get(hook, "namespaceSelector"),
                                      labels_new ? labels_new : labels_old))
                continue;
            const json_t *os = json_object_get(hook, "objectSelector");
            if (json_is_object(os) && !label_selector_match(os, labels_new) &&
                !label_selector_match(os, labels_old))
                continue;
            struct match *nm = realloc(matches, (nmatches + 1) * sizeof(*nm));
            if (!nm)
                abort();
            matches = nm;
            matches[nmatches].hook = json_incref(hook);
            matches[nmatches].version = ks_strdup(chosen);
            matches[nmatches].uid = ks_printf("%s/%zu", keys[c], i);
            matches[nmatches].reinvoke = false;
            nmatches++;
        }
    }
    free(keys);
    json_decref(ns_labels);
    pthread_mutex_unlock(&ks->lock);
    *ret = matches;
    return nmatches;
}

static void free_matches(struct match *matches, size_t n)
{
    for (size_t m = 0; m < n; m++) {
        json_decref(matches[m].hook);
        free(matches[m].version);
        free(matches[m].uid);
    }
    free(matches);
}

/* The AdmissionReview (admission.k8s.io/<rv>) for one webhook: obj and old
 * in the webhook's version (mt->version), either NULL. @ref new */
static json_t *build_review(const struct ks_admit_req *ar, const struct match *mt, const char *rv,
                            const char *uid, const json_t *obj, const json_t *old)
{
    json_t *req = json_object();
    json_object_set_new(req, "uid", json_string(uid));
    json_object_set_new(req, "kind",
                        json_pack("{s:s,s:s,s:s}", "group", ar->def->group, "version", mt->version,
                                  "kind", ar->def->kind));
    json_object_set_new(req, "resource",
                        json_pack("{s:s,s:s,s:s}", "group", ar->def->group, "version", mt->version,
                                  "resource", ar->def->plural));
    if (*ar->subresource)
        json_object_set_new(req, "subResource", json_string(ar->subresource));
    json_object_set_new(req, "requestKind",
                        json_pack("{s:s,s:s,s:s}", "group", ar->def->group, "version", ar->version,
                                  "kind", ar->def->kind));
    json_object_set_new(req, "requestResource",
                        json_pack("{s:s,s:s,s:s}", "group", ar->def->group, "version", ar->version,
                                  "resource", ar->def->plural));
    if (*ar->subresource)
        json_object_set_new(req, "requestSubResource", json_string(ar->subresource));
    if (ar->name && *ar->name) /* AdmissionRequest.name is omitempty */
        json_object_set_new(req, "name", json_string(ar->name));
    if (*ar->ns)
        json_object_set_new(req, "namespace", json_string(ar->ns));
    json_object_set_new(req, "operation", json_string(ar->operation));
    json_object_set_new(req, "userInfo", ks_user_info(ar->user));
    json_object_set_new(req, "object", obj ? json_incref((json_t *)obj) : json_null());
    json_object_set_new(req, "oldObject", old ? json_incref((json_t *)old) : json_null());
    json_object_set_new(req, "dryRun", json_boolean(ar->dry_run));
    const char *okind = strcmp(ar->operation, "CREATE") == 0   ? "CreateOptions"
                        : strcmp(ar->operation, "UPDATE") == 0 ? "UpdateOptions"
                                                               : "DeleteOptions";
    json_t *opts = json_pack("{s:s,s:s}", "kind", okind, "apiVersion", "meta.k8s.io/v1");
    if (ar->field_manager && strcmp(okind, "DeleteOptions") != 0)
        json_object_set_new(opts, "fieldManager", json_string(ar->field_manager));
    if (strcmp(okind, "DeleteOptions") == 0)
        json_object_set_new(opts, "propagationPolicy", json_string("Background"));
    json_object_set_new(req, "options", opts);
    char *review_av = ks_printf("admission.k8s.io/%s", rv);
    json_t *review = json_pack("{s:s,s:s,s:o}", "kind", "AdmissionReview", "apiVersion", review_av,
                               "request", req);
    free(review_av);
    return review;
}

/* Why the webhook's answer is not a usable AdmissionReview response for
 * the request uid (malloc'd), or NULL when it is. */
static char *check_response(const json_t *resp, const char *rv, const char *uid, bool mutating)
{
    const json_t *response = json_object_get(resp, "response");
    const json_t *patch_b64 = json_object_get(response, "patch");
    bool has_patch = patch_b64 && !json_is_null(patch_b64);
    char *review_av = ks_printf("admission.k8s.io/%s", rv);
    char *reason = NULL;
    if (!json_is_object(resp)) {
        reason = ks_strdup("received invalid webhook response: couldn't get version/kind; "
                           "json parse error");
    } else if (strcmp(jstr(resp, "apiVersion"), review_av) != 0 ||
               strcmp(jstr(resp, "kind"), "AdmissionReview") != 0) {
        char *got = gvk_string(jstr(resp, "apiVersion"), jstr(resp, "kind"));
        reason = ks_printf("received invalid webhook response: expected webhook response of "
                           "admission.k8s.io/%s, Kind=AdmissionReview, got %s",
                           rv, got);
        free(got);
    } else if (!json_is_object(response)) {
        reason = ks_strdup("received invalid webhook response: webhook response was absent");
    } else if (strcmp(jstr(response, "uid"), uid) != 0) {
        reason = ks_printf("received invalid webhook response: expected response.uid=\"%s\", "
                           "got \"%s\"",
                           uid, jstr(response, "uid"));
    } else if (has_patch && !mutating) {
        reason = ks_strdup("received invalid webhook response: validating webhook may not "
                           "return a patch");
    } else if (has_patch && strcmp(rv, "v1") == 0 && !json_object_get(response, "patchType")) {
        /* k8s.io/apiserver/pkg/admission/plugin/webhook/request/admissionreview.go
         * VerifyAdmissionResponse: v1 needs patchType beside a patch. */
        reason = ks_strdup("received invalid webhook response: webhook returned response.patch "
                           "but not response.patchType");
    } else if (has_patch && json_object_get(response, "patchType") &&
               strcmp(jstr(response, "patchType"), "JSONPatch") != 0) {
        reason = ks_printf("received invalid webhook response: webhook returned invalid "
                           "response.patchType of \"%s\"",
                           jstr(response, "patchType"));
    }
    free(review_av);
    return reason;
}

/* The Status of a denial (response.allowed false) by webhook name. */
static void denied(const json_t *response, const char *name, int *ret_code, char **ret_body)
{
    const json_t *st = json_object_get(response, "status");
    const char *msg = jstr(st, "message");
    const char *rsn = jstr(st, "reason");
    char *full = *msg   ? ks_printf("admission webhook \"%s\" denied the request: %s", name, msg)
                 : *rsn ? ks_printf("admission webhook \"%s\" denied the request: %s", name, rsn)
                        : ks_printf("admission webhook \"%s\" denied the request without "
                                    "explanation",
                                    name);
    int code = json_is_integer(json_object_get(st, "code"))
                   ? (int)json_integer_value(json_object_get(st, "code"))
                   : 400;
    if (code < 400)
        code = 400;
    json_t *details = json_deep_copy(json_object_get(st, "details"));
    *ret_code = code;
    *ret_body = ks_status_body(code, "Failure", rsn, full, details, NULL);
    free(full);
}

/*
 * A mutating webhook's patch, as dispatcher.go callAttrMutatingHook does:
 * decode it, apply it to obj (the object in the webhook's version), turn the
 * result back into ar->version. 0 with *ret_patched (NULL for an empty
 * patch); -EINVAL with *ret_reason when the patch does not decode (a call
 * error: failurePolicy applies); -EPERM with a 500 Status when it does not
 * apply or there is no object (DELETE).
 */
static int apply_patch(struct ks_server *ks, const struct ks_admit_req *ar, const json_t *obj,
                       const json_t *response, const char *name, json_t **ret_patched,
                       char **ret_reason, int *ret_code, char **ret_body)
{
    size_t plen = 0;
    unsigned char *raw = ks_base64_decode(jstr(response, "patch"), &plen);
    json_t *ops = raw ? json_loadb((const char *)raw, plen, 0, NULL) : NULL;
    free(raw);
    if (!json_is_array(ops)) {
        json_decref(ops);
        *ret_reason = ks_strdup("received undecodable patch in webhook response: not a JSON "
                                "Patch array");
        return -EINVAL;
    }
    int rc = 0;
    if (json_array_size(ops) > 0) {
        char *perr = NULL;
        json_t *patched = obj ? ks_json_patch(obj, ops, &perr) : NULL;
        json_t *back = NULL;
        if (patched && ks_convert_one(ks, ar->def, patched, ar->version, &back, &perr) != 0)
            back = NULL;
        if (!back) {
            char *m = obj ? ks_printf("Internal error occurred: %s", perr ? perr : "patch")
                          : ks_printf("Internal error occurred: admission webhook \"%s\" "
                                      "attempted to modify the object, which is not "
                                      "supported for this operation",
                                      name);
            *ret_code = 500;
            *ret_body = ks_status_body(500, "Failure", "InternalError", m, NULL, NULL);
            free(m);
            rc = -EPERM;
        } else {
            *ret_patched = back;
        }
        free(perr);
        json_decref(patched);
    }
    json_decref(ops);
    return rc;
}

/* Call one admission webhook on obj (ar->version, may be NULL) and check the
 * reply. 0: allowed (for a mutating hook *ret_patched is the patched object
 * in ar->version, or NULL when it sent no patch); -EPERM: denied or failed
 * closed, Status in *ret_code and *ret_body. */
static int call_hook(struct ks_server *ks, const struct ks_admit_req *ar, const struct match *mt,
                     bool mutating, const json_t *cur, json_t *warnings, json_t **ret_patched,
                     int *ret_code, char **ret_body)
{
    const json_t *hook = mt->hook;
    const char *name = jstr(hook, "name");
    bool ignore = strcmp(jstr(hook, "failurePolicy"), "Ignore") == 0;
    long timeout = json_is_integer(json_object_get(hook, "timeoutSeconds"))
                       ? (long)json_integer_value(json_object_get(hook, "timeoutSeconds"))
                       : 10;
    const char *rv = review_version(json_object_get(hook, "admissionReviewVersions"), NULL);
    char *reason = NULL;
    json_t *obj = NULL, *old = NULL;
    char *resp_txt = NULL;
    json_t *resp = NULL;
    char *cerr = NULL;
    int rc = 0;

    if (!rv) {
        reason = ks_strdup("webhook does not accept v1 or v1beta1 AdmissionReview");
        goto failed;
    }
    if (cur && ks_convert_one(ks, ar->def, cur, mt->version, &obj, &cerr) != 0) {
        reason = cerr;
        goto failed;
    }
    if (ar->old && ks_convert_one(ks, ar->def, ar->old, mt->version, &old, &cerr) != 0) {
        reason = cerr;
        goto failed;
    }
    char uid[40];
    ks_uuid(uid, sizeof(uid));
    json_t *review = build_review(ar, mt, rv, uid, obj, old);
    char *payload = ks_dump(review, false, NULL);
    json_decref(review);
    int crc =
        call_webhook(ks, json_object_get(hook, "clientConfig"), timeout, payload, &resp_txt, &cerr);
    free(payload);
    if (crc != 0) {
        reason = ks_printf("failed to call webhook: %s", cerr);
        free(cerr);
        goto failed;
    }
    resp = json_loads(resp_txt, 0, NULL);
    reason = check_response(resp, rv, uid, mutating);
    if (reason)
        goto failed;
    const json_t *response = json_object_get(resp, "response");
    size_t wi;
    json_t *wv;
    json_array_foreach(json_object_get(response, "warnings"), wi, wv)
    {
        if (json_is_string(wv))
            json_array_append(warnings, wv);
    }
    if (!json_is_true(json_object_get(response, "allowed"))) {
        denied(response, name, ret_code, ret_body);
        rc = -EPERM;
        goto out;
    }
    const json_t *patch_b64 = json_object_get(response, "patch");
    if (patch_b64 && !json_is_null(patch_b64)) {
        rc = apply_patch(ks, ar, obj, response, name, ret_patched, &reason, ret_code, ret_body);
        if (rc == -EINVAL) {
            rc = 0;
            goto failed;
        }
    }
    goto out;
failed:
    if (!ignore) {
        admit_error(ret_code, ret_body, name, reason);
        rc = -EPERM;
    } else if (ks->verbose) {
        fprintf(stderr, "kubesim: ignoring webhook %s: %s\n", name, reason);
    }
out:
    free(reason);
    free(resp_txt);
    json_decref(resp);
    json_decref(obj);
    json_decref(old);
    return rc;
}

int ks_admit(struct ks_server *ks, const struct ks_admit_req *ar, json_t *warnings, int *ret_code,
             char **ret_body)
{
    struct match *matches = NULL;
    size_t n = collect_matches(
        ks, ar, "validatingwebhookconfigurations.admissionregistration.k8s.io", &matches);
    int rc = 0;
    for (size_t m = 0; m < n && rc == 0; m++) {
        json_t *unused = NULL;
        rc = call_hook(ks, ar, &matches[m], false, ar->obj, warnings, &unused, ret_code, ret_body);
    }
    free_matches(matches, n);
    return rc;
}

/* One pass over the mutating webhooks (dispatcher.go Dispatch). In the first
 * pass every matching hook is called; a hook that changed the object makes
 * every IfNeeded hook called before it due for the second pass; an IfNeeded
 * hook joins that list after its own call (its own change does not
 * reinvoke it). */
static int mutate_pass(struct ks_server *ks, const struct ks_admit_req *ar, struct match *mt,
                       size_t n, bool reinvoke, json_t **io_obj, json_t *warnings,
                       bool *ret_changed, int *ret_code, char **ret_body)
{
    bool *invoked = calloc(n ? n : 1, sizeof(*invoked));
    if (!invoked)
        abort();
    for (size_t m = 0; m < n; m++) {
        if (reinvoke && !mt[m].reinvoke)
            continue;
        json_t *patched = NULL;
        int rc = call_hook(ks, ar, &mt[m], true, *io_obj, warnings, &patched, ret_code, ret_body);
        if (rc != 0) {
            free(invoked);
            return rc;
        }
        if (patched && !json_equal(patched, *io_obj)) {
            json_decref(*io_obj);
            *io_obj = patched;
            patched = NULL;
            *ret_changed = true;
            for (size_t p = 0; p < n; p++) {
                if (invoked[p])
                    mt[p].reinvoke = true;
                invoked[p] = false;
            }
        }
        json_decref(patched);
        if (strcmp(jstr(mt[m].hook, "reinvocationPolicy"), "IfNeeded") == 0)
            invoked[m] = true;
    }
    free(invoked);
    return 0;
}

int ks_admit_mutate(struct ks_server *ks, const struct ks_admit_req *ar, json_t *warnings,
                    json_t **ret_obj, int *ret_code, char **ret_body)
{
    struct match *matches = NULL;
    size_t n = collect_matches(ks, ar, "mutatingwebhookconfigurations.admissionregistration.k8s.io",
                               &matches);
    json_t *cur = ar->obj ? json_deep_copy(ar->obj) : NULL;
    bool changed = false;
    int rc = mutate_pass(ks, ar, matches, n, false, &cur, warnings, &changed, ret_code, ret_body);
    if (rc == 0 && changed)
        rc = mutate_pass(ks, ar, matches, n, true, &cur, warnings, &changed, ret_code, ret_body);
    free_matches(matches, n);
    if (rc != 0 || !changed) {
        json_decref(cur);
        cur = NULL;
    }
    *ret_obj = cur;
    return rc;
}
