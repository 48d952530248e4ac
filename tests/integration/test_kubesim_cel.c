/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim's x-kubernetes-validations (tests/kubesim/celvalidation.c, the
 * CEL helper of cel.c and tests/kubesim/cel) and the validation ratcheting
 * of custom resources against the apiextensions-apiserver's (1.33) rules:
 * a rule passing and failing, message, messageExpression, fieldPath and
 * reason; transition rules (oldSelf only on update, only where the old
 * value correlates: object members, list-type map items by key);
 * optionalOldSelf; every cause in one 422 in the apiserver's order; the
 * blocking schema errors; every write path (update, merge, JSON and
 * strategic patches, apply); ratcheting of an unchanged invalid value
 * (accepted) against a changed one (refused) for schema constraints and
 * CEL rules; a /status write of an object whose spec the CRD now refuses;
 * the CRD's rules compiled (refusals in the apiserver's words); the helper
 * killed, stopped and missing.
 */
#include "kubetest.h"
#include "testutil.h"

#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TOKEN "kubesim-cel-token"
#define CRDS "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
#define WIDGETS "/apis/cel.example.com/v1/namespaces/default/widgets"
#define GADGETS "/apis/cel.example.com/v1/namespaces/default/gadgets"
#define MERGE "application/merge-patch+json"

static struct kop_test_scratch scratch;
static struct kop_test_kubesim sim;

static struct kop_test_resp request(const char *method, const char *path, const char *ctype,
                                    const char *body)
{
    const struct kop_test_http_options o = {
        .ca = scratch.ca, .token = TOKEN, .ctype = ctype, .timeout_s = 30};
    return kop_test_api_resp(&o, sim.url, method, path, body);
}

/* The answer's code is want; its body (malloc'd). */
static char *expect_code(const char *method, const char *path, const char *ctype, const char *body,
                         long want)
{
    struct kop_test_resp r = request(method, path, ctype, body);
    ck_assert_msg(r.code == want, "%s %s: got %ld want %ld: %s", method, path, r.code, want,
                  r.body);
    char *out = strdup(r.body);
    kop_test_resp_free(&r);
    return out;
}

static void expect_ok(const char *method, const char *path, const char *ctype, const char *body,
                      long want)
{
    free(expect_code(method, path, ctype, body, want));
}

/* A 422 (or other code) whose Status message is message. */
static void expect_message(const char *method, const char *path, const char *ctype,
                           const char *body, long code, const char *message)
{
    char *b = expect_code(method, path, ctype, body, code);
    json_t *st = json_loads(b, 0, NULL);
    const char *got = json_string_value(json_object_get(st, "message"));
    ck_assert_msg(got && strcmp(got, message) == 0, "%s %s: message\n  got  %s\n  want %s", method,
                  path, got ? got : b, message);
    json_decref(st);
    free(b);
}

/* GET path (200): the object. @ref new */
static json_t *get_json(const char *path)
{
    char *b = expect_code("GET", path, NULL, NULL, 200);
    json_t *v = json_loads(b, 0, NULL);
    free(b);
    ck_assert_msg(v != NULL, "GET %s: not JSON", path);
    return v;
}

/* POST a CRD and wait until its resource is served. */
static void create_crd(const char *body, const char *resource_path)
{
    expect_ok("POST", CRDS, NULL, body, 201);
    for (int i = 0; i < 100; i++) {
        struct kop_test_resp r = request("GET", resource_path, NULL, NULL);
        long code = r.code;
        kop_test_resp_free(&r);
        if (code == 200)
            return;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ck_abort_msg("%s is not served", resource_path);
}

/*
 * Widgets: spec carries a rule with message and fieldPath, and one with a
 * reason; replicas a transition rule and a messageExpression; name an
 * empty messageExpression; mode is immutable; size an optionalOldSelf
 * rule; items a list-type map whose items carry a transition rule; level
 * a minimum (a schema error that does not block CEL), label a maxLength
 * (one that does).
 */
static const char widget_crd[] =
    "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
    "\"metadata\":{\"name\":\"widgets.cel.example.com\"},\"spec\":{\"group\":\"cel.example.com\","
    "\"scope\":\"Namespaced\",\"names\":{\"plural\":\"widgets\",\"kind\":\"Widget\"},"
    "\"versions\":[{\"name\":\"v1\",\"served\":true,\"storage\":true,\"subresources\":{\"status\":"
    "{}},\"schema\":{\"openAPIV3Schema\":{\"type\":\"object\",\"properties\":{"
    "\"spec\":{\"type\":\"object\",\"x-kubernetes-validations\":["
    "{\"rule\":\"self.min <= self.max\",\"message\":\"min must not exceed max\","
    "\"fieldPath\":\".min\"},"
    "{\"rule\":\"has(self.mode)\",\"message\":\"mode is required\",\"reason\":"
    "\"FieldValueRequired\",\"fieldPath\":\".mode\"}],"
    "\"properties\":{\"min\":{\"type\":\"integer\"},\"max\":{\"type\":\"integer\"},"
    "\"replicas\":{\"type\":\"integer\",\"x-kubernetes-validations\":["
    "{\"rule\":\"self >= oldSelf\",\"message\":\"replicas may not decrease\"},"
    "{\"rule\":\"self % 2 == 1\",\"messageExpression\":\"'replicas must be odd, not ' + "
    "string(self)\",\"reason\":\"FieldValueForbidden\"}]},"
    "\"name\":{\"type\":\"string\",\"x-kubernetes-validations\":[{\"rule\":\"self != 'bad'\","
    "\"messageExpression\":\"''\"}]},"
    "\"mode\":{\"type\":\"string\",\"x-kubernetes-validations\":[{\"rule\":\"self == oldSelf\","
    "\"message\":\"mode is immutable\"}]},"
    "\"size\":{\"type\":\"string\",\"x-kubernetes-validations\":[{\"rule\":"
    "\"oldSelf.hasValue() || self == 'small'\",\"optionalOldSelf\":true,"
    "\"message\":\"a new size must start small\"}]},"
    "\"level\":{\"type\":\"integer\",\"minimum\":0},"
    "\"label\":{\"type\":\"string\",\"maxLength\":5},"
    "\"ratio\":{\"type\":\"number\",\"x-kubernetes-validations\":[{\"rule\":\"self < 1.0\"}]},"
    "\"items\":{\"type\":\"array\",\"x-kubernetes-list-type\":\"map\","
    "\"x-kubernetes-list-map-keys\":[\"name\"],\"items\":{\"type\":\"object\",\"required\":"
    "[\"name\"],\"properties\":{\"name\":{\"type\":\"string\"},\"weight\":{\"type\":\"integer\"}},"
    "\"x-kubernetes-validations\":[{\"rule\":\"self.weight >= oldSelf.weight\",\"message\":"
    "\"weight may not decrease\"}]}}}},"
    "\"status\":{\"type\":\"object\",\"properties\":{\"phase\":{\"type\":\"string\"}}}}}}}]}}";

/* A widget named name with the spec members given (JSON text). malloc'd */
static char *widget(const char *name, const char *spec)
{
    char *out = NULL;
    if (asprintf(&out,
                 "{\"apiVersion\":\"cel.example.com/v1\",\"kind\":\"Widget\",\"metadata\":"
                 "{\"name\":\"%s\"},\"spec\":{%s}}",
                 name, spec) < 0)
        abort();
    return out;
}

static void post_widget(const char *name, const char *spec, long code, const char *message)
{
    char *w = widget(name, spec);
    if (message)
        expect_message("POST", WIDGETS, NULL, w, code, message);
    else
        expect_ok("POST", WIDGETS, NULL, w, code);
    free(w);
}

static void patch_widget(const char *name, const char *ctype, const char *patch, long code,
                         const char *message)
{
    char path[256];
    snprintf(path, sizeof(path), WIDGETS "/%s%s", name,
             strcmp(ctype, "application/apply-patch+yaml") == 0 ? "?fieldManager=t&force=true"
                                                                : "");
    if (message)
        expect_message("PATCH", path, ctype, patch, code, message);
    else
        expect_ok("PATCH", path, ctype, patch, code);
}

#define INVALID(name, causes) "Widget.cel.example.com \"" name "\" is invalid: " causes

static void start_sim(void)
{
    kop_test_scratch_init(&scratch);
    static char *const args[] = {"--cel-timeout", "2s", NULL};
    kop_test_scratch_kubesim(&scratch, &sim, TOKEN, args);
    create_crd(widget_crd, WIDGETS);
}

static void stop_sim(void)
{
    int st = kop_test_kubesim_stop(&sim, SIGTERM, 5000);
    ck_assert_msg(st == 0, "kubesim exit status %d", st);
    kop_test_scratch_free(&scratch);
}

/* ---- tests ------------------------------------------------------------------------ */

START_TEST(test_cel_rules)
{
    /* passing rules */
    post_widget("ok1", "\"min\":1,\"max\":2,\"mode\":\"a\",\"replicas\":3", 201, NULL);
    /* message, at fieldPath, with the node's type as the value */
    post_widget("bad1", "\"min\":3,\"max\":2,\"mode\":\"a\"", 422,
                INVALID("bad1", "spec.min: Invalid value: \"object\": min must not exceed max"));
    /* reason FieldValueRequired */
    post_widget("bad2", "\"min\":1,\"max\":2", 422,
                INVALID("bad2", "spec.mode: Required value: mode is required"));
    /* messageExpression with reason FieldValueForbidden */
    post_widget("bad3", "\"min\":1,\"max\":2,\"mode\":\"a\",\"replicas\":4", 422,
                INVALID("bad3", "spec.replicas: Forbidden: replicas must be odd, not 4"));
    /* a messageExpression that gives "": the rule's default message */
    post_widget(
        "bad4", "\"min\":1,\"max\":2,\"mode\":\"a\",\"name\":\"bad\"", 422,
        INVALID("bad4", "spec.name: Invalid value: \"string\": failed rule: self != 'bad'"));
    /* a runtime error: spec.max absent */
    post_widget("bad5", "\"min\":1,\"mode\":\"a\"", 422,
                INVALID("bad5",
                        "spec: Invalid value: \"object\": no such key: max evaluating rule: "
                        "min must not exceed max"));
    /* number: a double in CEL even when the JSON says 0 */
    post_widget("ok2", "\"min\":1,\"max\":2,\"mode\":\"a\",\"ratio\":0", 201, NULL);
    post_widget("bad6", "\"min\":1,\"max\":2,\"mode\":\"a\",\"ratio\":1", 422,
                INVALID("bad6", "spec.ratio: Invalid value: \"number\": failed rule: self < 1.0"));
}
END_TEST

START_TEST(test_cel_one_422)
{
    /* the schema's error first, then the rules: spec's own, then its
     * members in the object's order */
    post_widget("all1", "\"min\":3,\"max\":2,\"level\":-1,\"replicas\":2,\"name\":\"bad\"", 422,
                INVALID("all1", "[spec.level: Invalid value: -1: spec.level in body should be "
                                "greater than or equal to 0, spec.min: Invalid value: \"object\": "
                                "min must not exceed max, spec.mode: Required value: mode is "
                                "required, spec.replicas: Forbidden: replicas must be odd, not 2, "
                                "spec.name: Invalid value: \"string\": failed rule: self != "
                                "'bad']"));
    /* a blocking schema error (TooLong): no rule is run */
    post_widget("all2", "\"min\":3,\"max\":2,\"label\":\"toolong\"", 422,
                INVALID("all2", "[spec.label: Too long: may not be more than 5 bytes, <nil>: "
                                "Invalid value: \"null\": some validation rules were not checked "
                                "because the object was invalid; correct the existing errors to "
                                "complete validation]"));
    /* metadata's errors go into the same 422, first */
    post_widget("Bad_Name", "\"min\":3,\"max\":2,\"mode\":\"a\"", 422,
                INVALID("Bad_Name",
                        "[metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 "
                        "subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                        "and must start and end with an alphanumeric character (e.g. "
                        "'example.com', regex used for validation is "
                        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), "
                        "spec.min: Invalid value: \"object\": min must not exceed max]"));
}
END_TEST

START_TEST(test_cel_transition_rules)
{
    /* no old value on create: the transition rules are not run */
    post_widget("t1",
                "\"min\":1,\"max\":2,\"mode\":\"a\",\"replicas\":5,\"items\":[{\"name\":\"a\","
                "\"weight\":5}]",
                201, NULL);
    patch_widget("t1", MERGE, "{\"spec\":{\"replicas\":3}}", 422,
                 INVALID("t1", "spec.replicas: Invalid value: \"integer\": replicas may not "
                               "decrease"));
    patch_widget("t1", MERGE, "{\"spec\":{\"mode\":\"b\"}}", 422,
                 INVALID("t1", "spec.mode: Invalid value: \"string\": mode is immutable"));
    patch_widget("t1", MERGE, "{\"spec\":{\"replicas\":7}}", 200, NULL);
    /* list-type map items correlate by key, wherever they move */
    patch_widget("t1", MERGE,
                 "{\"spec\":{\"items\":[{\"name\":\"b\",\"weight\":1},{\"name\":\"a\","
                 "\"weight\":4}]}}",
                 422,
                 INVALID("t1", "spec.items[1]: Invalid value: \"object\": weight may not "
                               "decrease"));
    /* a new key has no old value: b's weight 1 is not compared */
    patch_widget("t1", MERGE,
                 "{\"spec\":{\"items\":[{\"name\":\"b\",\"weight\":1},{\"name\":\"a\","
                 "\"weight\":6}]}}",
                 200, NULL);
    /* an absent old member: no oldSelf (mode was never set on t2) */
    post_widget("t2", "\"min\":1,\"max\":2,\"mode\":\"a\"", 201, NULL);
    patch_widget("t2", MERGE, "{\"spec\":{\"replicas\":1}}", 200, NULL);
}
END_TEST

START_TEST(test_cel_optional_old_self)
{
    /* evaluated on create too, with oldSelf optional.none() */
    post_widget("o1", "\"min\":1,\"max\":2,\"mode\":\"a\",\"size\":\"big\"", 422,
                INVALID("o1", "spec.size: Invalid value: \"string\": a new size must start "
                              "small"));
    post_widget("o1", "\"min\":1,\"max\":2,\"mode\":\"a\",\"size\":\"small\"", 201, NULL);
    patch_widget("o1", MERGE, "{\"spec\":{\"size\":\"big\"}}", 200, NULL);
}
END_TEST

START_TEST(test_cel_write_paths)
{
    post_widget("w1", "\"min\":1,\"max\":2,\"mode\":\"a\",\"replicas\":5", 201, NULL);
    const char *want = INVALID("w1", "spec.replicas: Invalid value: \"integer\": replicas may not "
                                     "decrease");
    /* update */
    json_t *cur = get_json(WIDGETS "/w1");
    json_object_set_new(json_object_get(cur, "spec"), "replicas", json_integer(1));
    char *body = json_dumps(cur, JSON_COMPACT);
    expect_message("PUT", WIDGETS "/w1", NULL, body, 422, want);
    free(body);
    json_decref(cur);
    /* every patch kind and apply */
    patch_widget("w1", "application/json-patch+json",
                 "[{\"op\":\"replace\",\"path\":\"/spec/replicas\",\"value\":1}]", 422, want);
    /* (custom resources take no strategic merge patch: 415) */
    patch_widget("w1", "application/strategic-merge-patch+json", "{\"spec\":{\"replicas\":1}}", 415,
                 NULL);
    patch_widget("w1", "application/apply-patch+yaml",
                 "{\"apiVersion\":\"cel.example.com/v1\",\"kind\":\"Widget\",\"metadata\":"
                 "{\"name\":\"w1\"},\"spec\":{\"min\":1,\"max\":2,\"mode\":\"a\",\"replicas\":1}}",
                 422, want);
    patch_widget("w1", "application/json-patch+json",
                 "[{\"op\":\"replace\",\"path\":\"/spec/replicas\",\"value\":9}]", 200, NULL);
}
END_TEST

/*
 * Gadgets: created lax, then the CRD is tightened (a maximum on level, a
 * rule on code, a set list that must not repeat) while an object breaks
 * the new rules.
 */
static const char gadget_crd_fmt[] =
    "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
    "\"metadata\":{\"name\":\"gadgets.cel.example.com\"%s},\"spec\":{\"group\":\"cel.example.com\","
    "\"scope\":\"Namespaced\",\"names\":{\"plural\":\"gadgets\",\"kind\":\"Gadget\"},"
    "\"versions\":[{\"name\":\"v1\",\"served\":true,\"storage\":true,\"subresources\":{\"status\":"
    "{}},\"schema\":{\"openAPIV3Schema\":{\"type\":\"object\",\"properties\":{"
    "\"spec\":{\"type\":\"object\",\"properties\":{\"note\":{\"type\":\"string\"},"
    "\"level\":{\"type\":\"integer\"%s},\"code\":{\"type\":\"string\"%s}}},"
    "\"status\":{\"type\":\"object\",\"properties\":{\"phase\":{\"type\":\"string\","
    "\"maxLength\":8}}}}}}}]}}";

static char *gadget_crd(const char *rv, bool strict)
{
    char *md = NULL, *out = NULL;
    if (asprintf(&md, rv ? ",\"resourceVersion\":\"%s\"" : "%s", rv ? rv : "") < 0 ||
        asprintf(&out, gadget_crd_fmt, md, strict ? ",\"maximum\":10" : "",
                 strict ? ",\"x-kubernetes-validations\":[{\"rule\":\"self.startsWith('ok')\","
                          "\"message\":\"code must start with ok\"}]"
                        : "") < 0)
        abort();
    free(md);
    return out;
}

START_TEST(test_cel_ratcheting)
{
    char *c = gadget_crd(NULL, false);
    create_crd(c, GADGETS);
    free(c);
    expect_ok("POST", GADGETS, NULL,
              "{\"apiVersion\":\"cel.example.com/v1\",\"kind\":\"Gadget\",\"metadata\":{\"name\":"
              "\"g1\"},\"spec\":{\"note\":\"a\",\"level\":50,\"code\":\"x\"}}",
              201);
    /* tighten the CRD */
    json_t *crd = get_json(CRDS "/gadgets.cel.example.com");
    const char *rv =
        json_string_value(json_object_get(json_object_get(crd, "metadata"), "resourceVersion"));
    c = gadget_crd(rv, true);
    expect_ok("PUT", CRDS "/gadgets.cel.example.com", NULL, c, 200);
    free(c);
    json_decref(crd);

    /* a new object is refused by both */
    expect_message("POST", GADGETS, NULL,
                   "{\"apiVersion\":\"cel.example.com/v1\",\"kind\":\"Gadget\",\"metadata\":"
                   "{\"name\":\"g2\"},\"spec\":{\"level\":50,\"code\":\"x\"}}",
                   422,
                   "Gadget.cel.example.com \"g2\" is invalid: [spec.level: Invalid value: 50: "
                   "spec.level in body should be less than or equal to 10, spec.code: Invalid "
                   "value: \"string\": code must start with ok]");
    /* g1 changes elsewhere: both invalid values are unchanged, so ratcheted;
     * the CEL error comes back as a warning */
    struct kop_test_resp r = request("PATCH", GADGETS "/g1", MERGE, "{\"spec\":{\"note\":\"b\"}}");
    ck_assert_msg(r.code == 200, "%ld %s", r.code, r.body);
    ck_assert_msg(strstr(r.headers, "spec.code: Invalid value: \\\"string\\\": code must start "
                                    "with ok"),
                  "no ratcheting warning: %s", r.headers);
    kop_test_resp_free(&r);
    /* changed to another invalid value: refused, each by its own check */
    expect_message("PATCH", GADGETS "/g1", MERGE, "{\"spec\":{\"level\":60}}", 422,
                   "Gadget.cel.example.com \"g1\" is invalid: spec.level: Invalid value: 60: "
                   "spec.level in body should be less than or equal to 10");
    expect_message("PATCH", GADGETS "/g1", MERGE, "{\"spec\":{\"code\":\"y\"}}", 422,
                   "Gadget.cel.example.com \"g1\" is invalid: spec.code: Invalid value: "
                   "\"string\": code must start with ok");
    /* fixed: accepted */
    expect_ok("PATCH", GADGETS "/g1", MERGE, "{\"spec\":{\"level\":5,\"code\":\"ok\"}}", 200);
}
END_TEST

START_TEST(test_cel_status_with_old_invalid_spec)
{
    /* gadgets from test_cel_ratcheting: g3 made while the CRD was lax is
     * not possible now, so make the CRD lax again, store, tighten */
    json_t *crd = get_json(CRDS "/gadgets.cel.example.com");
    const char *rv =
        json_string_value(json_object_get(json_object_get(crd, "metadata"), "resourceVersion"));
    char *c = gadget_crd(rv, false);
    expect_ok("PUT", CRDS "/gadgets.cel.example.com", NULL, c, 200);
    free(c);
    json_decref(crd);
    expect_ok("POST", GADGETS, NULL,
              "{\"apiVersion\":\"cel.example.com/v1\",\"kind\":\"Gadget\",\"metadata\":{\"name\":"
              "\"g3\"},\"spec\":{\"level\":50,\"code\":\"x\"}}",
              201);
    crd = get_json(CRDS "/gadgets.cel.example.com");
    rv = json_string_value(json_object_get(json_object_get(crd, "metadata"), "resourceVersion"));
    c = gadget_crd(rv, true);
    expect_ok("PUT", CRDS "/gadgets.cel.example.com", NULL, c, 200);
    free(c);
    json_decref(crd);

    /* the status strategy: the spec (unchanged) is not refused */
    expect_ok("PATCH", GADGETS "/g3/status", MERGE, "{\"status\":{\"phase\":\"Ready\"}}", 200);
    /* the status is validated */
    expect_message("PATCH", GADGETS "/g3/status", MERGE,
                   "{\"status\":{\"phase\":\"TooLongPhase\"}}", 422,
                   "Gadget.cel.example.com \"g3\" is invalid: [status.phase: Too long: may not be "
                   "more than 8 bytes, <nil>: Invalid value: \"null\": some validation rules were "
                   "not checked because the object was invalid; correct the existing errors to "
                   "complete validation]");
    /* a spec write is still refused */
    expect_message("PATCH", GADGETS "/g3", MERGE, "{\"spec\":{\"level\":40}}", 422,
                   "Gadget.cel.example.com \"g3\" is invalid: spec.level: Invalid value: 40: "
                   "spec.level in body should be less than or equal to 10");
}
END_TEST

/* A one-version CRD "NAME.cel.example.com" whose spec has the
 * properties and rules given (JSON text). malloc'd */
static char *rules_crd(const char *plural, const char *spec)
{
    char *out = NULL;
    if (asprintf(&out,
                 "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":"
                 "\"CustomResourceDefinition\",\"metadata\":{\"name\":\"%s.cel.example.com\"},"
                 "\"spec\":{\"group\":\"cel.example.com\",\"scope\":\"Namespaced\",\"names\":"
                 "{\"plural\":\"%s\",\"kind\":\"K%s\"},\"versions\":[{\"name\":\"v1\",\"served\":"
                 "true,\"storage\":true,\"schema\":{\"openAPIV3Schema\":{\"type\":\"object\","
                 "\"properties\":{\"spec\":{\"type\":\"object\",%s}}}}}]}}",
                 plural, plural, plural, spec) < 0)
        abort();
    return out;
}

#define SPEC "spec.validation.openAPIV3Schema.properties[spec]"

START_TEST(test_cel_crd_compilation)
{
    char *c = rules_crd(
        "compiles",
        "\"properties\":{\"a\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":"
        "{\"type\":\"string\",\"x-kubernetes-validations\":[{\"rule\":\"self == oldSelf\"}]}}},"
        "\"x-kubernetes-validations\":[{\"rule\":\"self.a >\"},{\"rule\":\"self.b == 1\"},"
        "{\"rule\":\"self.a + 1\"},{\"rule\":\"true\",\"messageExpression\":\"self.a\"},"
        "{\"rule\":\"nope(self)\"},{\"rule\":\"self.a > 0\",\"optionalOldSelf\":true}"
        "]");
    expect_message(
        "POST", CRDS, NULL, c, 422,
        "CustomResourceDefinition.apiextensions.k8s.io \"compiles.cel.example.com\" is invalid: "
        "[" SPEC ".properties[tags].items.x-kubernetes-validations[0].rule: Invalid value: "
        "\"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema "
        "within " SPEC ".properties[tags], " SPEC ".x-kubernetes-validations[0].rule: Invalid "
        "value: {\"Rule\":\"self.a \\u003e\",\"Message\":\"\",\"MessageExpression\":\"\","
        "\"Reason\":null,\"FieldPath\":\"\",\"OptionalOldSelf\":null}: compilation failed: "
        "ERROR: <input>:1:8: Syntax error: found > but expecting end of input\n | self.a "
        ">\n | .......^, " SPEC ".x-kubernetes-validations[1].rule: Invalid value: "
        "{\"Rule\":\"self.b == 1\",\"Message\":\"\",\"MessageExpression\":\"\",\"Reason\":null,"
        "\"FieldPath\":\"\",\"OptionalOldSelf\":null}: compilation failed: ERROR: <input>:1:5: "
        "undefined field 'b'\n | self.b == 1\n | ....^, " SPEC
        ".x-kubernetes-validations[2].rule: Invalid value: {\"Rule\":\"self.a + 1\",\"Message\":"
        "\"\",\"MessageExpression\":\"\",\"Reason\":null,\"FieldPath\":\"\",\"OptionalOldSelf\":"
        "null}: cel expression must evaluate to a bool, " SPEC
        ".x-kubernetes-validations[3].messageExpression: Invalid value: {\"Rule\":\"true\","
        "\"Message\":\"\",\"MessageExpression\":\"self.a\",\"Reason\":null,\"FieldPath\":\"\","
        "\"OptionalOldSelf\":null}: messageExpression must evaluate to a string, " SPEC
        ".x-kubernetes-validations[4].rule: Invalid value: {\"Rule\":\"nope(self)\",\"Message\":"
        "\"\",\"MessageExpression\":\"\",\"Reason\":null,\"FieldPath\":\"\",\"OptionalOldSelf\":"
        "null}: compilation failed: ERROR: <input>:1:1: undeclared reference to 'nope' (in "
        "container '')\n | nope(self)\n | ^, " SPEC ".x-kubernetes-validations[5].optionalOldSelf: "
        "Invalid value: true: may not be set if oldSelf is not used in rule]");
    free(c);
    /* a schema error (an invalid fieldPath) keeps the rules of its subtree
     * from being compiled, not those of another */
    c = rules_crd("paths",
                  "\"properties\":{\"a\":{\"type\":\"integer\",\"x-kubernetes-validations\":"
                  "[{\"rule\":\"self >\",\"fieldPath\":\".c\"}]},\"b\":{\"type\":\"integer\","
                  "\"x-kubernetes-validations\":[{\"rule\":\"self >\"}]}}");
    expect_message("POST", CRDS, NULL, c, 422,
                   "CustomResourceDefinition.apiextensions.k8s.io \"paths.cel.example.com\" is "
                   "invalid: [" SPEC ".properties[a].x-kubernetes-validations[0].fieldPath: "
                   "Invalid value: \".c\": must be a valid path, " SPEC
                   ".properties[b].x-kubernetes-validations[0].rule: Invalid value: {\"Rule\":"
                   "\"self \\u003e\",\"Message\":\"\",\"MessageExpression\":\"\",\"Reason\":null,"
                   "\"FieldPath\":\"\",\"OptionalOldSelf\":null}: compilation failed: ERROR: "
                   "<input>:1:6: Syntax error: found > but expecting end of input\n | self "
                   ">\n | .....^]");
    free(c);
    /* what compiles is accepted */
    c = rules_crd("fine", "\"properties\":{\"a\":{\"type\":\"integer\"},\"m\":{\"type\":\"object\","
                          "\"additionalProperties\":{\"type\":\"string\"}}},"
                          "\"x-kubernetes-validations\":[{\"rule\":\"self.a > 0 && "
                          "self.m.all(k, self.m[k].size() < 3)\"},"
                          "{\"rule\":\"true\",\"fieldPath\":\".m['x.y']\"}]");
    expect_ok("POST", CRDS, NULL, c, 201);
    free(c);
}
END_TEST

/* The helper's pid from /_kubesim/stats. */
static long helper_pid(void)
{
    char *b = expect_code("GET", "/_kubesim/stats", NULL, NULL, 200);
    json_t *st = json_loads(b, 0, NULL);
    free(b);
    long pid = (long)json_integer_value(json_object_get(json_object_get(st, "cel"), "pid"));
    json_decref(st);
    return pid;
}

/* Until the process is a zombie (its pipes closed) or gone. */
static void wait_dead(long pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    for (int i = 0; i < 500; i++) {
        FILE *f = fopen(path, "r");
        if (!f)
            return;
        char buf[512] = "";
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        const char *close_paren = strrchr(buf, ')');
        if (close_paren && close_paren[1] == ' ' && close_paren[2] == 'Z')
            return;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ck_abort_msg("pid %ld still running", pid);
}

START_TEST(test_cel_helper_outage)
{
    post_widget("h1", "\"min\":1,\"max\":2,\"mode\":\"a\"", 201, NULL);
    long pid = helper_pid();
    ck_assert_msg(pid > 0, "no helper running");
    /* killed: the request that meets it gets a 500, the next one a new helper */
    ck_assert_int_eq(kill((pid_t)pid, SIGKILL), 0);
    wait_dead(pid);
    char *b = expect_code("POST", WIDGETS, NULL,
                          "{\"apiVersion\":\"cel.example.com/v1\",\"kind\":\"Widget\",\"metadata\":"
                          "{\"name\":\"h2\"},\"spec\":{\"min\":1,\"max\":2,\"mode\":\"a\"}}",
                          500);
    ck_assert_msg(strstr(b, "\"reason\":\"InternalError\"") &&
                      strstr(b, "Internal error occurred: CEL helper: "),
                  "%s", b);
    free(b);
    post_widget("h2", "\"min\":1,\"max\":2,\"mode\":\"a\"", 201, NULL);
    long pid2 = helper_pid();
    ck_assert_msg(pid2 > 0 && pid2 != pid, "pid %ld then %ld", pid, pid2);
    /* stopped: the wait is bounded (--cel-timeout 2s), then a new helper */
    ck_assert_int_eq(kill((pid_t)pid2, SIGSTOP), 0);
    b = expect_code("POST", WIDGETS, NULL,
                    "{\"apiVersion\":\"cel.example.com/v1\",\"kind\":\"Widget\",\"metadata\":"
                    "{\"name\":\"h3\"},\"spec\":{\"min\":1,\"max\":2,\"mode\":\"a\"}}",
                    500);
    ck_assert_msg(strstr(b, "no answer within 2000 ms"), "%s", b);
    free(b);
    post_widget("h3", "\"min\":1,\"max\":2,\"mode\":\"a\"", 201, NULL);
    /* a CRD during an outage: a 500 too */
    long pid3 = helper_pid();
    ck_assert_int_eq(kill((pid_t)pid3, SIGKILL), 0);
    wait_dead(pid3);
    char *crd = rules_crd("outage", "\"x-kubernetes-validations\":[{\"rule\":\"true\"}]");
    expect_ok("POST", CRDS, NULL, crd, 500);
    expect_ok("POST", CRDS, NULL, crd, 201);
    free(crd);
}
END_TEST

START_TEST(test_cel_unavailable)
{
    struct kop_test_scratch s2;
    struct kop_test_kubesim k2;
    kop_test_scratch_init(&s2);
    static char *const args[] = {"--cel-helper", "/nonexistent-cel-helper", NULL};
    kop_test_scratch_kubesim(&s2, &k2, TOKEN, args);
    ck_assert_msg(kop_test_logged(&k2.proc, "CEL: unavailable: no helper "
                                            "/nonexistent-cel-helper/celhelper.mjs; CRDs with "
                                            "x-kubernetes-validations are refused"),
                  "no unavailable line");
    const struct kop_test_http_options o = {.ca = s2.ca, .token = TOKEN, .timeout_s = 30};
    char *c = rules_crd("refused", "\"x-kubernetes-validations\":[{\"rule\":\"true\"}]");
    struct kop_test_resp r = kop_test_api_resp(&o, k2.url, "POST", CRDS, c);
    free(c);
    ck_assert_msg(r.code == 422 &&
                      strstr(r.body, SPEC ".x-kubernetes-validations: Forbidden: "
                                          "kubesim cannot run x-kubernetes-validations "
                                          "rules (CEL: unavailable: no helper "),
                  "%ld %s", r.code, r.body);
    kop_test_resp_free(&r);
    /* a CRD without rules is fine */
    c = rules_crd("plain", "\"properties\":{\"a\":{\"type\":\"integer\"}}");
    r = kop_test_api_resp(&o, k2.url, "POST", CRDS, c);
    free(c);
    ck_assert_msg(r.code == 201, "%ld %s", r.code, r.body);
    kop_test_resp_free(&r);
    ck_assert_int_eq(kop_test_kubesim_stop(&k2, SIGTERM, 5000), 0);
    kop_test_scratch_free(&s2);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("kubesim_cel");
    TCase *tc = tcase_create("cel");
    tcase_set_timeout(tc, 120);
    tcase_add_unchecked_fixture(tc, start_sim, stop_sim);
    tcase_add_test(tc, test_cel_rules);
    tcase_add_test(tc, test_cel_one_422);
    tcase_add_test(tc, test_cel_transition_rules);
    tcase_add_test(tc, test_cel_optional_old_self);
    tcase_add_test(tc, test_cel_write_paths);
    tcase_add_test(tc, test_cel_ratcheting);
    tcase_add_test(tc, test_cel_status_with_old_invalid_spec);
    tcase_add_test(tc, test_cel_crd_compilation);
    tcase_add_test(tc, test_cel_helper_outage);
    tcase_add_test(tc, test_cel_unavailable);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(suite());
}
