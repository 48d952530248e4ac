/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CRD's value rules against the validating webhook's (docs/api.md
 * §4.5): manifests/base/crd.yaml is installed in kubesim, which enforces
 * its OpenAPI constraints and CEL rules as the apiserver does, with no
 * validating webhook registered (kop --webhook-only serves only the
 * conversion a valid v2 object needs on its way to v1 storage). Every
 * object is created with dryRun=All, and the same object is judged by
 * kop_admission_evaluate in process. For every admission vector
 * (tests/fuzz/corpus/admission_review) and a few thousand generated
 * objects, valid and invalid, in both versions, the two must agree on
 * allow or deny and name the same fields.
 *
 * Field names are compared as sets, after two documented differences
 * (api.md §4.5): duplicate port names are "spec.ports" for the CRD (a CEL
 * rule on the list) and "spec.ports[i].name" for the webhook; and the
 * CRD's duplicate-(port, protocol) error for an item whose port or
 * protocol is already invalid is the list map's, which the webhook does
 * not repeat. The rules only the webhook has (metadata.name as a DNS-1035
 * label, registries, the v2-extras annotation, name collisions) are left
 * out of the comparison. When an OpenAPI error of the kinds that block CEL
 * (Required, Too long, Too many, a wrong type: the apiserver's
 * hasBlockingErr) leaves the CEL rules unevaluated, the CRD's fields need
 * only be among the webhook's. For the CEL rules, the CRD's message must be the
 * webhook's words: the webhook's detail for that field ends with it.
 *
 * KOP_CRD_RULES_N sets the number of generated objects per version
 * (default 1500), KOP_CRD_RULES_SEED the seed (default: the time, printed).
 */
#include "kubetest.h"
#include "testutil.h"

#include <dirent.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kop/admission.h"

#define TOKEN "crd-rules-token"
#define NS "default"
#define MAX_FIELDS 64

static struct kop_test_scratch scratch;
static struct kop_test_kubesim sim;
static struct kop_test_proc kop;
static bool kop_started;

/* ---- setup --------------------------------------------------------------------------- */

static struct kop_test_resp api(const char *method, const char *path, const char *ctype,
                                const char *body)
{
    const struct kop_test_http_options o = {
        .handle = scratch.curl, .ca = scratch.ca, .token = TOKEN, .ctype = ctype, .timeout_s = 30};
    return kop_test_api_resp(&o, sim.url, method, path, body);
}

static void setup(void)
{
    kop_test_scratch_init(&scratch);
    char certs[700], ca_file[800];
    snprintf(certs, sizeof(certs), "%s/certs", scratch.dir);
    kop_test_gen_certs(certs);
    long port = kop_test_start_webhook_kop(&kop, &kop_started, certs, 10000);
    ck_assert_msg(port > 0, "kop --webhook-only did not start");
    char service[128];
    snprintf(service, sizeof(service), "kop-system/kop-webhook-service=127.0.0.1:%ld", port);
    char *args[] = {"--service", service, NULL};
    const struct kop_test_kubesim_options o = {.listen = "127.0.0.1:0",
                                               .ca = scratch.ca,
                                               .token = TOKEN,
                                               .args = args,
                                               .lenient_fields = true};
    kop_test_kubesim_start(&sim, &o);

    snprintf(ca_file, sizeof(ca_file), "%s/ca.crt", certs);
    char *ca_b64 = kop_test_file_base64(ca_file);
    char *crd = kop_test_manifest_with_ca("crd.yaml", ca_b64);
    struct kop_test_resp r = api("PATCH",
                                 "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                                 "myresources.mygroup.example.com?fieldManager=crd-rules",
                                 "application/apply-patch+yaml", crd);
    ck_assert_msg(r.code == 200 || r.code == 201, "applying crd.yaml: %ld %s", r.code, r.body);
    kop_test_resp_free(&r);
    free(crd);
    free(ca_b64);
}

static void teardown(void)
{
    kop_test_kubesim_stop(&sim, SIGTERM, 5000);
    if (kop_started)
        kop_test_stop(&kop, SIGTERM, 5000);
    kop_started = false;
    kop_test_scratch_free(&scratch);
}

/* ---- the two verdicts -------------------------------------------------------------------- */

struct fields {
    char *name[MAX_FIELDS];
    char *detail[MAX_FIELDS]; /* the message without the field */
    size_t n;
};

static void fields_add(struct fields *f, const char *name, const char *detail)
{
    for (size_t i = 0; i < f->n; i++) {
        if (strcmp(f->name[i], name) == 0)
            return;
    }
    ck_assert_uint_lt(f->n, MAX_FIELDS);
    f->name[f->n] = strdup(name);
    f->detail[f->n] = strdup(detail ? detail : "");
    f->n++;
}

static bool fields_has(const struct fields *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++) {
        if (strcmp(f->name[i], name) == 0)
            return true;
    }
    return false;
}

static void fields_free(struct fields *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->name[i]);
        free(f->detail[i]);
    }
    f->n = 0;
}

/* "spec.ports[3].name" -> true, index 3 */
static bool port_item_field(const char *field, const char *member, size_t *ret_idx)
{
    unsigned idx;
    int end = 0;
    char rest[32] = "";
    if (sscanf(field, "spec.ports[%u]%n", &idx, &end) != 1 || end == 0)
        return false;
    snprintf(rest, sizeof(rest), "%s", field + end);
    *ret_idx = idx;
    return member ? strcmp(rest, member) == 0 : rest[0] == '\0';
}

/* The CRD's verdict: dryRun create in the object's own version. */
static bool crd_verdict(const json_t *obj, struct fields *f, char **ret_body)
{
    const char *av = json_string_value(json_object_get(obj, "apiVersion"));
    const char *version = av && strstr(av, "/v1") ? "v1" : "v2";
    char path[256];
    snprintf(path, sizeof(path),
             "/apis/mygroup.example.com/%s/namespaces/" NS
             "/myresources?dryRun=All&fieldValidation=Ignore",
             version);
    char *body = json_dumps(obj, JSON_COMPACT);
    struct kop_test_resp r = api("POST", path, "application/json", body);
    free(body);
    bool allowed = r.code == 201 || r.code == 200;
    ck_assert_msg(allowed || r.code == 422, "POST %s: %ld %s", path, r.code, r.body);
    if (!allowed) {
        json_t *st = json_loads(r.body, 0, NULL);
        ck_assert_msg(st, "422 not JSON: %s", r.body);
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(json_object_get(st, "details"), "causes"), i, c)
        {
            const char *field = json_string_value(json_object_get(c, "field"));
            const char *msg = json_string_value(json_object_get(c, "message"));
            const char *reason = json_string_value(json_object_get(c, "reason"));
            ck_assert_msg(field && msg, "a cause without field or message: %s", r.body);
            if (strcmp(field, "metadata.name") == 0)
                continue; /* the apiserver's own DNS-1123 rule, beside the webhook's */
            if (strstr(msg, "some validation rules were not checked")) {
                /* an OpenAPI error that blocks the CEL rules (hasBlockingErr) */
                fields_add(f, "#blocked", msg);
                continue;
            }
            if (strcmp(field, "spec.ports") == 0 && strstr(msg, "port names must be unique"))
                fields_add(f, "spec.ports#names", msg);
            else if (reason && strcmp(reason, "FieldValueDuplicate") == 0)
                fields_add(f, field, "#duplicate");
            else
                fields_add(f, field, msg);
        }
        json_decref(st);
    }
    *ret_body = r.body;
    r.body = NULL;
    kop_test_resp_free(&r);
    return allowed;
}

/* The fields a v1 object has; the webhook reports what a v1 object holds
 * only in its v2-extras annotation at v2 paths (api.md §4.3). */
static bool v1_field(const char *field)
{
    static const char *const v1[] = {"spec", "spec.replicas", "spec.image", "spec.port",
                                     "spec.serviceType"};
    for (size_t i = 0; i < sizeof(v1) / sizeof(v1[0]); i++) {
        if (strcmp(field, v1[i]) == 0)
            return true;
    }
    return strncmp(field, "spec.", 5) != 0;
}

/* The webhook's verdict on the same object as a CREATE. */
static bool webhook_verdict(const json_t *obj, struct fields *f, char **ret_message)
{
    const char *av = json_string_value(json_object_get(obj, "apiVersion"));
    const char *version = av && strstr(av, "/v1") ? "v1" : "v2";
    json_t *req =
        json_pack("{s:s,s:{s:s,s:s,s:s},s:{s:s,s:s,s:s},s:s,s:s,s:O}", "uid", "u", "kind", "group",
                  "mygroup.example.com", "version", version, "kind", "MyResource", "resource",
                  "group", "mygroup.example.com", "version", version, "resource", "myresources",
                  "namespace", NS, "operation", "CREATE", "object", obj);
    ck_assert_ptr_nonnull(req);
    json_t *copy = json_deep_copy(req); /* evaluate converts the object in place */
    json_decref(req);
    struct kop_admission_verdict v;
    ck_assert_int_eq(kop_admission_evaluate(copy, NULL, &v), 0);
    json_decref(copy);
    ck_assert_msg(v.n_violations == v.n_listed, "more violations than listed: %s", v.message);
    for (size_t i = 0; i < v.n_listed; i++) {
        char *e = v.listed[i];
        char *sep = strstr(e, ": ");
        ck_assert_msg(sep, "violation without a field: %s", e);
        *sep = '\0';
        const char *field = e, *detail = sep + 2;
        size_t idx;
        if (strcmp(field, "metadata.name") == 0)
            continue; /* the webhook's own rule */
        if (strcmp(version, "v1") == 0 && !v1_field(field))
            continue; /* from the v2-extras annotation: the webhook's own */
        if (port_item_field(field, ".name", &idx) && strncmp(detail, "Duplicate value:", 16) == 0)
            fields_add(f, "spec.ports#names", detail);
        else if (port_item_field(field, NULL, &idx) && strncmp(detail, "Duplicate value:", 16) == 0)
            fields_add(f, field, "#duplicate");
        else
            fields_add(f, field, detail);
        *sep = ':';
    }
    bool allowed = v.allowed;
    *ret_message = v.message ? strdup(v.message) : NULL;
    kop_admission_verdict_cleanup(&v);
    return allowed;
}

/* CEL causes carry "Invalid value: \"<type>\": <the webhook's words>". */
static const char *cel_detail(const char *msg)
{
    if (strstr(msg, " in body "))
        return NULL; /* an OpenAPI error ("spec.port in body must be of type integer") */
    static const char *const types[] = {"Invalid value: \"string\": ",
                                        "Invalid value: \"array\": "};
    for (size_t i = 0; i < 2; i++) {
        if (strncmp(msg, types[i], strlen(types[i])) == 0)
            return msg + strlen(types[i]);
    }
    return NULL;
}

static bool ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

static unsigned long n_compared, n_denied, n_words;

/* Compare both verdicts on obj; "what" names the case in failures. */
static void compare(const json_t *obj, const char *what)
{
    struct fields crd = {0}, hook = {0};
    char *crd_body = NULL, *hook_msg = NULL;
    bool crd_ok = crd_verdict(obj, &crd, &crd_body);
    bool hook_ok = webhook_verdict(obj, &hook, &hook_msg);
    char *text = json_dumps(obj, JSON_COMPACT);

    /* A duplicate pair the list map reports for an item the webhook
     * already refuses for its port or protocol. */
    for (size_t i = 0; i < crd.n; i++) {
        size_t idx;
        char port[64], proto[64];
        if (strcmp(crd.detail[i], "#duplicate") != 0 || fields_has(&hook, crd.name[i]) ||
            !port_item_field(crd.name[i], NULL, &idx))
            continue;
        snprintf(port, sizeof(port), "spec.ports[%zu].port", idx);
        snprintf(proto, sizeof(proto), "spec.ports[%zu].protocol", idx);
        if (fields_has(&hook, port) || fields_has(&hook, proto))
            crd.detail[i][0] = '\0', crd.name[i][0] = '\0';
    }
    for (size_t i = 0; i < crd.n; i++) {
        if (crd.name[i][0] && strcmp(crd.name[i], "#blocked") != 0 &&
            !fields_has(&hook, crd.name[i]))
            ck_abort_msg("%s: the CRD refuses %s (%s), the webhook does not\n  object: %s\n  "
                         "webhook: %s",
                         what, crd.name[i], crd.detail[i], text, hook_msg ? hook_msg : "allowed");
    }
    /* CEL rules not evaluated: the CRD's fields are a subset, the verdict
     * the same */
    bool blocked = fields_has(&crd, "#blocked");
    for (size_t i = 0; i < hook.n && !blocked; i++) {
        if (!fields_has(&crd, hook.name[i]))
            ck_abort_msg("%s: the webhook refuses %s (%s), the CRD does not\n  object: %s\n  "
                         "CRD: %s",
                         what, hook.name[i], hook.detail[i], text, crd_ok ? "allowed" : crd_body);
    }
    /* the same words for the CEL rules */
    for (size_t i = 0; i < crd.n; i++) {
        const char *d = cel_detail(crd.detail[i]);
        if (!d || !crd.name[i][0] || strcmp(crd.name[i], "spec.ports#names") == 0)
            continue;
        for (size_t j = 0; j < hook.n; j++) {
            if (strcmp(hook.name[j], crd.name[i]) == 0) {
                ck_assert_msg(ends_with(hook.detail[j], d),
                              "%s: %s: the CRD says \"%s\", the webhook \"%s\"\n  object: %s", what,
                              crd.name[i], d, hook.detail[j], text);
                n_words++;
            }
        }
    }
    ck_assert_msg(crd_ok == (hook.n == 0), "%s: CRD %s, webhook fields %zu\n  object: %s\n  %s",
                  what, crd_ok ? "allows" : "denies", hook.n, text, crd_ok ? "" : crd_body);
    (void)hook_ok;
    n_compared++;
    n_denied += crd_ok ? 0 : 1;
    free(text);
    free(crd_body);
    free(hook_msg);
    fields_free(&crd);
    fields_free(&hook);
}

/* ---- generated objects -------------------------------------------------------------------- */

static unsigned long long rng;

static unsigned rnd(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

static const char *pick(const char *const *set, size_t n)
{
    return set[rnd((unsigned)n)];
}

#define PICK(set) pick(set, sizeof(set) / sizeof(set[0]))

static const char *const repositories[] = {
    "nginx",
    "library/nginx",
    "registry.example.com/team/app",
    "registry.example.com:5000/team/app",
    "localhost/app",
    "localhost:5000/a/b",
    "[::1]:5000/app",
    "Registry.Example.com/app",
    "a.b/c_d/e__f/g-h/i--j",
    "ghcr.io/org/repo.name",
    "UPPER/Case",
    "nginx/UPPER",
    "bad..name",
    "host_x.com/app",
    "a.b/",
    "-a",
    "a-",
    "a___b",
    "a/b/",
    "/a",
    "a//b",
    "localhost",
    "[abc]/x",
    "[::1]/x",
    "a:b",
    "x.y:port/app",
    "a@b",
};

static const char *const tags[] = {"1.25", "latest", "Latest", "v1.0-rc_1", "_x", "-x",
                                   ".x",   "a:b",    "a/b",    "",          "x y"};

static const char *const names[] = {"http",
                                    "web",
                                    "dns",
                                    "metrics",
                                    "h2c",
                                    "-x",
                                    "x-",
                                    "a--b",
                                    "UP",
                                    "123",
                                    "h_t",
                                    "",
                                    "a.b",
                                    "grpc",
                                    "web",
                                    "http",
                                    "too-long-name-x",
                                    "ok-1",
                                    "x"};

static const char *const protocols[] = {"TCP", "UDP", "SCTP", "TCP", "HTTP", "tcp"};
static const char *const service_types[] = {"ClusterIP", "NodePort", "LoadBalancer",
                                            "ClusterIP", "External", "clusterip"};

static const long long replica_values[] = {0, 1, 3, 1000, -1, 1001, 5000};
static const long long port_values[] = {80, 443, 53, 8080, 65535, 1, 0, 65536, -5};

#define DIGEST "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define UPPER_DIGEST "SHA256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
static const char *const digests[] = {DIGEST, "sha256:0123", "md5:0123456789abcdef0123456789abcdef",
                                      UPPER_DIGEST};

static long long pick_ll(const long long *set, size_t n, long long lo, long long hi)
{
    /* mostly a valid value in range, sometimes one of the set */
    if (rnd(4) != 0)
        return lo + (long long)rnd((unsigned)(hi - lo + 1));
    return set[rnd((unsigned)n)];
}

static json_t *meta(unsigned long i)
{
    char name[64];
    snprintf(name, sizeof(name), "gen-%lu", i);
    return json_pack("{s:s,s:s}", "name", name, "namespace", NS);
}

static json_t *gen_v2(unsigned long i)
{
    json_t *spec = json_object();
    json_object_set_new(spec, "replicas", json_integer(pick_ll(replica_values, 7, 0, 1000)));
    if (rnd(5) != 0) {
        json_t *img = json_object();
        if (rnd(10) != 0)
            json_object_set_new(img, "repository", json_string(PICK(repositories)));
        if (rnd(2))
            json_object_set_new(img, "tag", json_string(PICK(tags)));
        if (rnd(4) == 0)
            json_object_set_new(img, "digest", json_string(PICK(digests)));
        json_object_set_new(spec, "image", img);
    }
    if (rnd(6) != 0) {
        unsigned n = rnd(12) == 0 ? 17 + rnd(3) : rnd(20) == 0 ? 0 : 1 + rnd(4);
        json_t *ports = json_array();
        for (unsigned k = 0; k < n; k++) {
            json_t *p = json_object();
            if (n > 16) { /* too many: valid items, so the webhook lists every violation */
                char nm[16];
                snprintf(nm, sizeof(nm), "p%u", k);
                json_array_append_new(ports, json_pack("{s:s,s:I,s:s}", "name", nm, "port",
                                                       (json_int_t)(1000 + k), "protocol", "TCP"));
                json_decref(p);
                continue;
            }
            if (rnd(15) != 0)
                json_object_set_new(p, "name", json_string(PICK(names)));
            if (rnd(15) != 0)
                json_object_set_new(p, "port", json_integer(pick_ll(port_values, 9, 1, 65535)));
            json_object_set_new(p, "protocol", json_string(PICK(protocols)));
            json_array_append_new(ports, p);
        }
        json_object_set_new(spec, "ports", ports);
    }
    if (rnd(2))
        json_object_set_new(spec, "service", json_pack("{s:s}", "type", PICK(service_types)));
    if (rnd(2))
        json_object_set_new(spec, "paused", json_boolean(rnd(2)));
    return json_pack("{s:s,s:s,s:o,s:o}", "apiVersion", "mygroup.example.com/v2", "kind",
                     "MyResource", "metadata", meta(i), "spec", spec);
}

static json_t *gen_v1(unsigned long i)
{
    json_t *spec = json_object();
    json_object_set_new(spec, "replicas", json_integer(pick_ll(replica_values, 7, 0, 1000)));
    if (rnd(6) != 0) {
        char image[600];
        int o = snprintf(image, sizeof(image), "%s", PICK(repositories));
        if (rnd(2))
            o += snprintf(image + o, sizeof(image) - (size_t)o, ":%s", PICK(tags));
        if (rnd(4) == 0)
            snprintf(image + o, sizeof(image) - (size_t)o, "@%s", PICK(digests));
        if (rnd(50) == 0) {
            memset(image, 'a', 300); /* a name over 255 characters */
            image[300] = '\0';
        }
        json_object_set_new(spec, "image", json_string(image));
    }
    json_object_set_new(spec, "port", json_integer(pick_ll(port_values, 9, 1, 65535)));
    if (rnd(2))
        json_object_set_new(spec, "serviceType", json_string(PICK(service_types)));
    return json_pack("{s:s,s:s,s:o,s:o}", "apiVersion", "mygroup.example.com/v1", "kind",
                     "MyResource", "metadata", meta(i), "spec", spec);
}

static unsigned long count_from_env(void)
{
    const char *s = getenv("KOP_CRD_RULES_N");
    unsigned long n = s ? strtoul(s, NULL, 10) : 1500;
    return n ? n : 1500;
}

/* ---- tests ------------------------------------------------------------------------------ */

START_TEST(test_crd_rules_generated_objects_agree)
{
    const char *s = getenv("KOP_CRD_RULES_SEED");
    unsigned long long seed = s ? strtoull(s, NULL, 10) : (unsigned long long)time(NULL);
    rng = seed ? seed : 1;
    fprintf(stderr, "crd_rules: seed %llu (KOP_CRD_RULES_SEED reproduces it)\n", seed);
    unsigned long n = count_from_env();
    n_compared = n_denied = n_words = 0;
    for (unsigned long i = 0; i < n; i++) {
        char what[64];
        json_t *o = gen_v2(i);
        snprintf(what, sizeof(what), "v2 object %lu (seed %llu)", i, seed);
        compare(o, what);
        json_decref(o);
        o = gen_v1(i);
        snprintf(what, sizeof(what), "v1 object %lu (seed %llu)", i, seed);
        compare(o, what);
        json_decref(o);
    }
    fprintf(stderr, "crd_rules: %lu objects, %lu denied, %lu CEL messages compared\n", n_compared,
            n_denied, n_words);
    /* the generator reaches both verdicts and the CEL rules */
    ck_assert_uint_gt(n_denied, n_compared / 10);
    ck_assert_uint_lt(n_denied, n_compared);
    ck_assert_uint_gt(n_words, n_compared / 20);
}
END_TEST

/* The object of every admission vector of MyResource, as a CREATE. */
START_TEST(test_crd_rules_admission_vectors_agree)
{
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s/tests/fuzz/corpus/admission_review", getenv("KOP_SOURCE_ROOT"));
    DIR *d = opendir(dir);
    ck_assert_msg(d, "cannot open %s", dir);
    unsigned compared = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[1400];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        json_t *review = json_load_file(path, 0, NULL);
        json_t *obj = json_object_get(json_object_get(review, "request"), "object");
        const char *av = json_string_value(json_object_get(obj, "apiVersion"));
        if (!av || strncmp(av, "mygroup.example.com/", 20) != 0 ||
            json_object_get(json_object_get(obj, "metadata"), "deletionTimestamp")) {
            json_decref(review);
            continue;
        }
        /* a create carries no server-set metadata */
        json_t *md = json_object_get(obj, "metadata");
        json_t *keep = json_object();
        static const char *const kept[] = {"name", "labels", "annotations"};
        for (size_t k = 0; k < 3; k++) {
            if (json_object_get(md, kept[k]))
                json_object_set(keep, kept[k], json_object_get(md, kept[k]));
        }
        json_object_set_new(keep, "namespace", json_string(NS));
        if (!json_object_get(keep, "name"))
            json_object_set_new(keep, "name", json_string("vector"));
        json_object_set_new(obj, "metadata", keep);
        compare(obj, e->d_name);
        compared++;
        json_decref(review);
    }
    closedir(d);
    ck_assert_uint_ge(compared, 5);
}
END_TEST

/* The acceptance objects of the issue, with the exact words. */
START_TEST(test_crd_rules_refuses_with_one_message)
{
    const char *v2 =
        "{\"apiVersion\":\"mygroup.example.com/v2\",\"kind\":\"MyResource\",\"metadata\":{"
        "\"name\":\"bad\"},\"spec\":{\"replicas\":5000,\"image\":{\"repository\":\"UPPER/Case\","
        "\"tag\":\"tag\"},\"ports\":[{\"name\":\"web\",\"port\":0},{\"name\":\"web\",\"port\":81,"
        "\"protocol\":\"HTTP\"}]}}";
    struct kop_test_resp r =
        api("POST", "/apis/mygroup.example.com/v2/namespaces/" NS "/myresources",
            "application/json", v2);
    ck_assert_msg(r.code == 422, "%ld %s", r.code, r.body);
    json_t *st = json_loads(r.body, 0, NULL);
    const char *message = json_string_value(json_object_get(st, "message"));
    ck_assert_msg(message, "no message: %s", r.body);
    static const char *const want[] = {
        "spec.replicas: Invalid value: 5000: spec.replicas in body should be less than or equal "
        "to 1000",
        "spec.image.repository: Invalid value: \"string\": repository name must be lowercase",
        "spec.ports[0].port: Invalid value: 0: spec.ports[0].port in body should be greater than "
        "or equal to 1",
        "spec.ports[1].protocol: Invalid value: \"string\": supported values: \"SCTP\", "
        "\"TCP\", \"UDP\"",
        "spec.ports: Invalid value: \"array\": port names must be unique",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        ck_assert_msg(strstr(message, want[i]), "missing <%s> in %s", want[i], message);
    json_decref(st);
    kop_test_resp_free(&r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("crd_rules");
    TCase *tc = tcase_create("crd_rules");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 500);
    tcase_add_test(tc, test_crd_rules_refuses_with_one_message);
    tcase_add_test(tc, test_crd_rules_admission_vectors_agree);
    tcase_add_test(tc, test_crd_rules_generated_objects_agree);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(suite());
}
