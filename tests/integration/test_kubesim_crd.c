/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim's validation of CustomResourceDefinitions (tests/kubesim/
 * crdvalidation.c) against the apiextensions-apiserver's rules
 * (pkg/apis/apiextensions/validation/validation.go, v0.36.3): a CRD like
 * kop's own (webhook conversion through a Service) is accepted; each
 * family of rules is refused in one 422 whose causes carry the
 * apiserver's field paths (of the internal type: a single version's schema
 * is spec.validation, the webhook's config spec.conversion.
 * webhookClientConfig) and texts.
 */
#include "kubetest.h"
#include "testutil.h"

#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN "kubesim-crd-token"
#define CRDS "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
#define INVALID "CustomResourceDefinition.apiextensions.k8s.io \"%s\" is invalid: %s"

static struct kop_test_scratch scratch;
static struct kop_test_kubesim sim;

static struct kop_test_resp request(const char *method, const char *path, const char *ctype,
                                    const char *body)
{
    const struct kop_test_http_options o = {
        .ca = scratch.ca, .token = TOKEN, .ctype = ctype, .timeout_s = 30};
    return kop_test_api_resp(&o, sim.url, method, path, body);
}

static void start_sim(void)
{
    kop_test_scratch_init(&scratch);
    kop_test_scratch_kubesim(&scratch, &sim, TOKEN, NULL);
}

static void stop_sim(void)
{
    int st = kop_test_kubesim_stop(&sim, SIGTERM, 5000);
    ck_assert_msg(st == 0, "kubesim exit status %d", st);
    kop_test_scratch_free(&scratch);
}

/* A schema kop's own versions could have: @ref new */
static json_t *schema(void)
{
    return json_pack("{s:{s:s,s:{s:{s:s},s:{s:s},s:{s:s},s:{s:s,s:{s:{s:s}}},s:{s:s}}}}",
                     "openAPIV3Schema", "type", "object", "properties", "apiVersion", "type",
                     "string", "kind", "type", "string", "metadata", "type", "object", "spec",
                     "type", "object", "properties", "replicas", "type", "integer", "status",
                     "type", "object");
}

/* A valid CRD of plural.group with one version v1. @ref new */
static json_t *crd(const char *plural, const char *group, const char *kind)
{
    char name[256];
    snprintf(name, sizeof(name), "%s.%s", plural, group);
    return json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:s,s:{s:s,s:s},s:[{s:s,s:b,s:b,s:o}]}}",
                     "apiVersion", "apiextensions.k8s.io/v1", "kind", "CustomResourceDefinition",
                     "metadata", "name", name, "spec", "group", group, "scope", "Namespaced",
                     "names", "plural", plural, "kind", kind, "versions", "name", "v1", "served", 1,
                     "storage", 1, "schema", schema());
}

static json_t *spec_of(json_t *c)
{
    return json_object_get(c, "spec");
}

static json_t *version(json_t *c, size_t i)
{
    return json_array_get(json_object_get(spec_of(c), "versions"), i);
}

/* POSTs c (@ref steal) and asserts the answer's code; the body. malloc'd */
static char *post(json_t *c, long want)
{
    char *body = json_dumps(c, JSON_COMPACT);
    json_decref(c);
    struct kop_test_resp r = request("POST", CRDS, NULL, body);
    free(body);
    ck_assert_msg(r.code == want, "POST: got %ld want %ld: %s", r.code, want, r.body);
    char *out = strdup(r.body);
    kop_test_resp_free(&r);
    return out;
}

/* POSTs c (@ref steal): a 422 whose message is INVALID of name and causes. */
static void expect_invalid(json_t *c, const char *causes)
{
    char name[256];
    snprintf(name, sizeof(name), "%s",
             json_string_value(json_object_get(json_object_get(c, "metadata"), "name")));
    char *body = post(c, 422);
    json_t *st = json_loads(body, 0, NULL);
    ck_assert_ptr_nonnull(st);
    char want[16384];
    snprintf(want, sizeof(want), INVALID, name, causes);
    const char *got = json_string_value(json_object_get(st, "message"));
    ck_assert_msg(got && strcmp(got, want) == 0, "message\n  got  %s\n  want %s",
                  got ? got : "(none)", want);
    json_decref(st);
    free(body);
}

/* A JSONSchemaProps as Go's json.Marshal prints the internal type (no
 * json tags: every field by its Go name) with the given Type, Required,
 * AnyOf and Properties (already printed). malloc'd */
static char *go_schema(const char *type, const char *req, const char *any_of, const char *props)
{
    char *s = NULL;
    int n = asprintf(
        &s,
        "{\"ID\":\"\",\"Schema\":\"\",\"Ref\":null,\"Description\":\"\",\"Type\":\"%s\","
        "\"Nullable\":false,\"Format\":\"\",\"Title\":\"\",\"Default\":null,\"Maximum\":null,"
        "\"ExclusiveMaximum\":false,\"Minimum\":null,\"ExclusiveMinimum\":false,\"MaxLength\":"
        "null,\"MinLength\":null,\"Pattern\":\"\",\"MaxItems\":null,\"MinItems\":null,"
        "\"UniqueItems\":false,\"MultipleOf\":null,\"Enum\":null,\"MaxProperties\":null,"
        "\"MinProperties\":null,\"Required\":%s,\"Items\":null,\"AllOf\":null,\"OneOf\":null,"
        "\"AnyOf\":%s,\"Not\":null,\"Properties\":%s,\"AdditionalProperties\":null,"
        "\"PatternProperties\":null,\"Dependencies\":null,\"AdditionalItems\":null,"
        "\"Definitions\":null,\"ExternalDocs\":null,\"Example\":null,"
        "\"XPreserveUnknownFields\":null,\"XEmbeddedResource\":false,\"XIntOrString\":false,"
        "\"XListMapKeys\":null,\"XListType\":null,\"XMapType\":null,\"XValidations\":null}",
        type, req, any_of, props);
    ck_assert_int_gt(n, 0);
    return s;
}

/* ---- tests ------------------------------------------------------------------- */

START_TEST(test_crd_kop_like_accepted)
{
    json_t *c = crd("gadgets", "kop.example.com", "Gadget");
    json_t *v1 = version(c, 0);
    json_object_set_new(v1, "deprecated", json_true());
    json_object_set_new(v1, "deprecationWarning", json_string("kop.example.com/v1 is old"));
    json_object_set_new(v1, "subresources", json_pack("{s:{}}", "status"));
    json_object_set_new(v1, "additionalPrinterColumns",
                        json_pack("[{s:s,s:s,s:s}]", "name", "Replicas", "type", "integer",
                                  "jsonPath", ".spec.replicas"));
    json_t *v2 = json_deep_copy(v1);
    json_object_set_new(v2, "name", json_string("v2"));
    json_object_set_new(v2, "storage", json_false());
    json_object_del(v2, "deprecated");
    json_object_del(v2, "deprecationWarning");
    json_array_append_new(json_object_get(spec_of(c), "versions"), v2);
    json_object_set_new(spec_of(c), "conversion",
                        json_pack("{s:s,s:{s:[s,s],s:{s:{s:s,s:s,s:s}}}}", "strategy", "Webhook",
                                  "webhook", "conversionReviewVersions", "v1", "v1beta1",
                                  "clientConfig", "service", "namespace", "kop-system", "name",
                                  "kop-webhook-service", "path", "/convert"));
    char *body = post(c, 201);
    json_t *got = json_loads(body, 0, NULL);
    free(body);
    /* the v1 defaults: singular, listKind, the service's port */
    const json_t *names = json_object_get(json_object_get(got, "spec"), "names");
    ck_assert_str_eq(json_string_value(json_object_get(names, "singular")), "gadget");
    ck_assert_str_eq(json_string_value(json_object_get(names, "listKind")), "GadgetList");
    const json_t *svc = json_object_get(
        json_object_get(
            json_object_get(json_object_get(json_object_get(got, "spec"), "conversion"), "webhook"),
            "clientConfig"),
        "service");
    ck_assert_int_eq(json_integer_value(json_object_get(svc, "port")), 443);
    json_decref(got);
}
END_TEST

START_TEST(test_crd_names_group_scope)
{
    json_t *c = crd("things", "nodot", "Thing");
    json_object_set_new(json_object_get(c, "metadata"), "name", json_string("other.nodot"));
    json_object_set_new(spec_of(c), "scope", json_string("Sideways"));
    json_t *names = json_object_get(spec_of(c), "names");
    json_object_set_new(names, "listKind", json_string("Thing"));
    json_object_set_new(names, "shortNames", json_pack("[s,s]", "th", "T_H"));
    json_object_set_new(names, "categories", json_pack("[s]", "all stuff"));
    expect_invalid(
        c,
        "[metadata.name: Invalid value: \"other.nodot\": must be spec.names.plural+\".\"+"
        "spec.group, spec.group: Invalid value: \"nodot\": should be a domain with at least one "
        "dot, spec.scope: Unsupported value: \"Sideways\": supported values: \"Cluster\", "
        "\"Namespaced\", spec.names.shortNames[1]: Invalid value: \"T_H\": a DNS-1035 label must "
        "consist of lower case alphanumeric characters or '-', start with an alphabetic "
        "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex "
        "used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?'), spec.names.listKind: Invalid "
        "value: \"Thing\": kind and listKind may not be the same, spec.names.categories[0]: "
        "Invalid value: \"all stuff\": a DNS-1035 label must consist of lower case alphanumeric "
        "characters or '-', start with an alphabetic character, and end with an alphanumeric "
        "character (e.g. 'my-name',  or 'abc-123', regex used for validation is "
        "'[a-z]([-a-z0-9]*[a-z0-9])?')]");

    /* Required: scope, kind (and so listKind); a kind of mixed case is fine */
    c = crd("bits", "kop.example.com", "");
    json_object_del(spec_of(c), "scope");
    json_object_del(json_object_get(spec_of(c), "names"), "kind");
    json_object_set_new(json_object_get(spec_of(c), "names"), "singular", json_string("Bit"));
    expect_invalid(
        c, "[spec.scope: Required value, spec.names.kind: Required value, spec.names.listKind: "
           "Required value, spec.names.singular: Invalid value: \"Bit\": a DNS-1035 label must "
           "consist of lower case alphanumeric characters or '-', start with an alphabetic "
           "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
           "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')]");

    c = crd("bobs", "kop.example.com", "Bob_X");
    expect_invalid(
        c, "[spec.names.singular: Invalid value: \"bob_x\": a DNS-1035 label must consist of "
           "lower case alphanumeric characters or '-', start with an alphabetic character, and "
           "end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
           "validation is '[a-z]([-a-z0-9]*[a-z0-9])?'), spec.names.kind: Invalid value: "
           "\"Bob_X\": may have mixed case, but should "
           "otherwise match: a DNS-1035 label must consist of lower case alphanumeric "
           "characters or '-', start with an alphabetic character, and end with an "
           "alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation "
           "is '[a-z]([-a-z0-9]*[a-z0-9])?'), spec.names.listKind: Invalid value: "
           "\"Bob_XList\": may have mixed case, but should otherwise match: a DNS-1035 label "
           "must consist of lower case alphanumeric characters or '-', start with an "
           "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
           "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')]");
}
END_TEST

START_TEST(test_crd_versions)
{
    /* two versions both named v1 (same schema: it moves to spec.validation) */
    json_t *c = crd("twins", "kop.example.com", "Twin");
    json_array_append_new(json_object_get(spec_of(c), "versions"), json_deep_copy(version(c, 0)));
    expect_invalid(c, "[spec.versions: Invalid value: "
                      "[{\"Name\":\"v1\",\"Served\":true,\"Storage\":true,\"Deprecated\":false,"
                      "\"DeprecationWarning\":null,\"Schema\":null,\"Subresources\":null,"
                      "\"AdditionalPrinterColumns\":null,\"SelectableFields\":null},{\"Name\":"
                      "\"v1\",\"Served\":true,\"Storage\":true,\"Deprecated\":false,"
                      "\"DeprecationWarning\":null,\"Schema\":null,\"Subresources\":null,"
                      "\"AdditionalPrinterColumns\":null,\"SelectableFields\":null}]: must "
                      "contain unique version names, spec.versions: Invalid value: "
                      "[{\"Name\":\"v1\",\"Served\":true,\"Storage\":true,\"Deprecated\":false,"
                      "\"DeprecationWarning\":null,\"Schema\":null,\"Subresources\":null,"
                      "\"AdditionalPrinterColumns\":null,\"SelectableFields\":null},{\"Name\":"
                      "\"v1\",\"Served\":true,\"Storage\":true,\"Deprecated\":false,"
                      "\"DeprecationWarning\":null,\"Schema\":null,\"Subresources\":null,"
                      "\"AdditionalPrinterColumns\":null,\"SelectableFields\":null}]: must have "
                      "exactly one version marked as storage version, status.storedVersions: "
                      "Invalid value: [\"v1\"]: must have the storage version v1]");

    /* a bad name (also spec.version, the first), no schema, a warning
     * on a version not deprecated, no storage version */
    c = crd("olds", "kop.example.com", "Old");
    json_t *v = version(c, 0);
    json_object_set_new(v, "name", json_string("V1"));
    json_object_set_new(v, "storage", json_false());
    json_object_del(v, "schema");
    json_object_set_new(v, "deprecationWarning", json_string("old"));
    expect_invalid(
        c, "[spec.versions[0].schema.openAPIV3Schema: Required value, spec.versions[0].name: "
           "Invalid value: \"V1\": a DNS-1035 label must consist of lower case alphanumeric "
           "characters or '-', start with an alphabetic character, and end with an alphanumeric "
           "character (e.g. 'my-name',  or 'abc-123', regex used for validation is "
           "'[a-z]([-a-z0-9]*[a-z0-9])?'), spec.versions[0].deprecationWarning: Invalid value: "
           "\"old\": can only be set for deprecated versions, spec.versions: Invalid value: "
           "[{\"Name\":\"V1\",\"Served\":true,\"Storage\":false,\"Deprecated\":false,"
           "\"DeprecationWarning\":\"old\",\"Schema\":null,\"Subresources\":null,"
           "\"AdditionalPrinterColumns\":null,\"SelectableFields\":null}]: must have exactly one "
           "version marked as storage version, spec.version: Invalid value: \"V1\": a DNS-1035 "
           "label must consist of lower case alphanumeric characters or '-', start with an "
           "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
           "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?'), "
           "status.storedVersions: Invalid value: null: must have at least one stored version]");
}
END_TEST

START_TEST(test_crd_subresources_columns)
{
    json_t *c = crd("scales", "kop.example.com", "Scale");
    json_t *v = version(c, 0);
    json_object_set_new(v, "subresources",
                        json_pack("{s:{},s:{s:s,s:s,s:s}}", "status", "scale", "specReplicasPath",
                                  "spec.replicas", "statusReplicasPath", ".spec.replicas",
                                  "labelSelectorPath", ".metadata.labels"));
    json_object_set_new(v, "additionalPrinterColumns",
                        json_pack("[{s:s,s:s,s:s},{s:s,s:s,s:s,s:s}]", "name", "", "type", "float",
                                  "jsonPath", "spec.x", "name", "Age", "type", "date", "format",
                                  "time", "jsonPath", ".metadata.creationTimestamp"));
    expect_invalid(
        c, "[spec.subresources.scale.specReplicasPath: Invalid value: \"spec.replicas\": must be "
           "a simple json path starting with ., spec.subresources.scale.statusReplicasPath: "
           "Invalid value: \".spec.replicas\": should be a json path under .status, "
           "spec.subresources.scale.labelSelectorPath: Invalid value: \".metadata.labels\": "
           "should be a json path under either .spec or .status, "
           "spec.additionalPrinterColumns[0].name: Required value, "
           "spec.additionalPrinterColumns[0].type: Invalid value: \"float\": must be one of "
           "boolean,date,integer,number,string, spec.additionalPrinterColumns[0].JSONPath: "
           "Invalid value: \"spec.x\": must be a simple json path starting with ., "
           "spec.additionalPrinterColumns[1].format: Invalid value: \"time\": must be one of "
           "byte,date,date-time,double,float,int32,int64,password]");
}
END_TEST

START_TEST(test_crd_conversion)
{
    /* the brief's URL: http, user, query, fragment */
    json_t *c = crd("urls", "kop.example.com", "Url");
    json_object_set_new(spec_of(c), "conversion",
                        json_pack("{s:s,s:{s:[s,s,s],s:{s:s}}}", "strategy", "Webhook", "webhook",
                                  "conversionReviewVersions", "v3", "v3", "V_4", "clientConfig",
                                  "url", "http://user@x/?q=1#f"));
    expect_invalid(
        c, "[spec.conversion.webhookClientConfig.url: Invalid value: \"http\": 'https' is the "
           "only allowed URL scheme; desired format: https://host[/path], "
           "spec.conversion.webhookClientConfig.url: Invalid value: \"user\": user "
           "information is not permitted in the URL, spec.conversion.webhookClientConfig.url: "
           "Invalid value: \"f\": fragments are not permitted in the URL, "
           "spec.conversion.webhookClientConfig.url: Invalid value: \"q=1\": query parameters "
           "are not permitted in the URL, spec.conversion.conversionReviewVersions[1]: Invalid "
           "value: \"v3\": duplicate "
           "version, spec.conversion.conversionReviewVersions[2]: Invalid value: \"V_4\": a "
           "DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
           "an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
           "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?'), "
           "spec.conversion.conversionReviewVersions: Invalid value: [\"v3\",\"v3\",\"V_4\"]: "
           "must include at least one of v1, v1beta1]");

    c = crd("webs", "kop.example.com", "Web");
    json_object_set_new(spec_of(c), "conversion",
                        json_pack("{s:s,s:{s:{s:s,s:{s:s,s:s}}}}", "strategy", "Webhook", "webhook",
                                  "clientConfig", "url", "https://x/", "service", "namespace", "ns",
                                  "name", "svc"));
    expect_invalid(c, "[spec.conversion.webhookClientConfig: Required value: exactly one of url "
                      "or service is required, spec.conversion.conversionReviewVersions: "
                      "Required value]");

    c = crd("nones", "kop.example.com", "None");
    json_object_set_new(spec_of(c), "conversion",
                        json_pack("{s:s,s:{s:[s],s:{s:s}}}", "strategy", "Sometimes", "webhook",
                                  "conversionReviewVersions", "v1", "clientConfig", "url",
                                  "https://x/"));
    expect_invalid(c, "[spec.conversion.strategy: Unsupported value: \"Sometimes\": supported "
                      "values: \"None\", \"Webhook\", spec.conversion.webhookClientConfig: "
                      "Forbidden: should not be set when strategy is not set to Webhook, "
                      "spec.conversion.conversionReviewVersions: Forbidden: should not be set "
                      "when strategy is not set to Webhook]");

    c = crd("hooks", "kop.example.com", "Hook");
    json_object_set_new(spec_of(c), "conversion", json_pack("{s:s}", "strategy", "Webhook"));
    json_object_set_new(spec_of(c), "preserveUnknownFields", json_true());
    expect_invalid(c, "[spec.conversion.strategy: Invalid value: \"Webhook\": must be None if "
                      "spec.preserveUnknownFields is true, spec.conversion.webhookClientConfig: "
                      "Required value: required when strategy is set to Webhook, "
                      "spec.conversion.conversionReviewVersions: Required value, "
                      "spec.preserveUnknownFields: Invalid value: true: cannot set to true, set "
                      "x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema "
                      "instead]");
}
END_TEST

START_TEST(test_crd_structural_schema)
{
    json_t *c = crd("shapes", "kop.example.com", "Shape");
    json_t *s = json_object_get(json_object_get(version(c, 0), "schema"), "openAPIV3Schema");
    json_object_set_new(s, "type", json_string("array"));
    json_t *props = json_object_get(s, "properties");
    json_object_set_new(
        json_object_get(props, "metadata"), "properties",
        json_pack("{s:{s:s},s:{s:s}}", "name", "type", "string", "labels", "type", "object"));
    json_object_set_new(props, "size", json_object());
    json_object_set_new(props, "any",
                        json_pack("{s:b}", "x-kubernetes-preserve-unknown-fields", 1));
    json_object_set_new(props, "port", json_pack("{s:b}", "x-kubernetes-int-or-string", 1));
    json_object_set_new(props, "tags", json_pack("{s:s,s:b}", "type", "array", "uniqueItems", 1));
    json_object_set_new(props, "weird", json_pack("{s:s}", "type", "text"));
    expect_invalid(
        c, "[spec.validation.openAPIV3Schema.items: Required value: must be specified, "
           "spec.validation.openAPIV3Schema.properties[metadata]: Forbidden: must not specify "
           "anything other than name and generateName, but metadata is implicitly specified, "
           "spec.validation.openAPIV3Schema.properties[size].type: Required value: must not be "
           "empty for specified object fields, spec.validation.openAPIV3Schema.properties[tags]"
           ".items: Required value: must be specified, spec.validation.openAPIV3Schema.type: "
           "Invalid value: \"array\": must be object at the root, "
           "spec.validation.openAPIV3Schema.properties[tags].uniqueItems: Forbidden: uniqueItems "
           "cannot be set to true since the runtime complexity becomes quadratic, "
           "spec.validation.openAPIV3Schema.properties[weird].type: Unsupported value: \"text\": "
           "supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", "
           "\"string\"]");

    /* the status subresource: only object at the root; nullable never */
    c = crd("roots", "kop.example.com", "Root");
    json_object_set_new(version(c, 0), "subresources", json_pack("{s:{}}", "status"));
    s = json_object_get(json_object_get(version(c, 0), "schema"), "openAPIV3Schema");
    json_object_set_new(s, "nullable", json_true());
    json_object_set_new(s, "type", json_string("string"));
    expect_invalid(c, "[spec.validation.openAPIV3Schema.type: Invalid value: \"string\": only "
                      "\"object\" is allowed as the type at the root of the schema if the status "
                      "subresource is enabled, spec.validation.openAPIV3Schema.nullable: "
                      "Forbidden: nullable cannot be true at the root, "
                      "spec.validation.openAPIV3Schema.type: Invalid value: \"string\": must be "
                      "object at the root]");

    /* value validations may not carry types; NewStructural's own error
     * only shows when nothing else is wrong */
    c = crd("nests", "kop.example.com", "Nest");
    s = json_object_get(json_object_get(version(c, 0), "schema"), "openAPIV3Schema");
    json_object_set_new(json_object_get(json_object_get(s, "properties"), "spec"), "anyOf",
                        json_pack("[{s:s,s:s}]", "type", "string", "description", "x"));
    expect_invalid(c, "[spec.validation.openAPIV3Schema.properties[spec].anyOf[0].description: "
                      "Forbidden: must be empty to be structural, "
                      "spec.validation.openAPIV3Schema.properties[spec].anyOf[0].type: "
                      "Forbidden: must be empty to be structural]");
    c = crd("drafts", "kop.example.com", "Draft");
    s = json_object_get(json_object_get(version(c, 0), "schema"), "openAPIV3Schema");
    json_object_set_new(s, "$schema", json_string("http://json-schema.org/draft-04/schema#"));
    expect_invalid(c, "spec.validation.openAPIV3Schema: Invalid value: \"\": OpenAPIV3Schema "
                      "'schema' is not supported");
    c = crd("refs", "kop.example.com", "Ref");
    s = json_object_get(json_object_get(version(c, 0), "schema"), "openAPIV3Schema");
    json_object_set_new(json_object_get(s, "properties"), "spec",
                        json_pack("{s:s}", "$ref", "#/definitions/x"));
    expect_invalid(c, "spec.validation.openAPIV3Schema.properties[spec].$ref: Forbidden: $ref "
                      "is not supported");

    /* with the status subresource, the root has few keywords; the value
     * is the whole internal schema */
    c = crd("anys", "kop.example.com", "Any");
    json_object_set_new(version(c, 0), "subresources", json_pack("{s:{}}", "status"));
    json_object_set_new(version(c, 0), "schema",
                        json_pack("{s:{s:s,s:[{s:[s]}],s:{s:{s:s}}}}", "openAPIV3Schema", "type",
                                  "object", "anyOf", "required", "spec", "properties", "spec",
                                  "type", "object"));
    char *any = go_schema("", "[\"spec\"]", "null", "null");
    char *spec = go_schema("object", "null", "null", "null");
    char *anys = NULL, *pmap = NULL, *want = NULL;
    ck_assert_int_gt(asprintf(&anys, "[%s]", any), 0);
    ck_assert_int_gt(asprintf(&pmap, "{\"spec\":%s}", spec), 0);
    char *root = go_schema("object", "null", anys, pmap);
    ck_assert_int_gt(
        asprintf(&want,
                 "spec.validation.openAPIV3Schema: Invalid value: %s: only [Description Type "
                 "Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength "
                 "MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items "
                 "Properties ExternalDocs Example XPreserveUnknownFields XValidations] fields are "
                 "allowed at the root of the schema if the status subresource is enabled",
                 root),
        0);
    expect_invalid(c, want);
    free(want);
    free(root);
    free(pmap);
    free(anys);
    free(spec);
    free(any);

    /* list types: map keys are unique item properties, required or
     * defaulted, never nullable; a set's object items are atomic. A key
     * given twice is checked twice: the message says it once (the
     * apiserver's ToAggregate drops repeated texts) */
    c = crd("lists", "kop.example.com", "List");
    s = json_object_get(json_object_get(version(c, 0), "schema"), "openAPIV3Schema");
    json_object_set_new(json_object_get(s, "properties"), "conds",
                        json_pack("{s:s,s:s,s:[s,s,s],s:{s:s,s:{s:{s:s,s:b}}}}", "type", "array",
                                  "x-kubernetes-list-type", "map", "x-kubernetes-list-map-keys",
                                  "name", "name", "missing", "items", "type", "object",
                                  "properties", "name", "type", "string", "nullable", 1));
    json_object_set_new(json_object_get(s, "properties"), "sets",
                        json_pack("{s:s,s:s,s:{s:s}}", "type", "array", "x-kubernetes-list-type",
                                  "set", "items", "type", "object"));
#define CONDS "spec.validation.openAPIV3Schema.properties[conds]"
#define KEYS_DEFAULT                                                                               \
    CONDS                                                                                          \
    ".items.properties[name].default: Required value: this property is in "                        \
    "x-kubernetes-list-map-keys, so it must have a default or be a required property, " CONDS      \
    ".items.properties[name].nullable: Forbidden: this property is in "                            \
    "x-kubernetes-list-map-keys, so it cannot be nullable"
    const char *lwant =
        "[" CONDS ".x-kubernetes-list-map-keys: Invalid value: [\"name\",\"name\",\"missing\"]: "
        "must not contain duplicate entries, " CONDS ".x-kubernetes-list-map-keys: Invalid value: "
        "[\"name\",\"name\",\"missing\"]: entries must all be names of item "
        "properties, " KEYS_DEFAULT ", spec.validation.openAPIV3Schema.properties[sets].items."
        "x-kubernetes-map-type: Invalid value: null: must be atomic as item of a list with "
        "x-kubernetes-list-type=set]";
    expect_invalid(c, lwant);
#undef KEYS_DEFAULT
#undef CONDS

    /* x-kubernetes-validations entries, before any CEL: rule, message,
     * messageExpression, reason, fieldPath (also resolved against the
     * schema: pathValid) */
    c = crd("rules", "kop.example.com", "Rule");
    s = json_object_get(json_object_get(version(c, 0), "schema"), "openAPIV3Schema");
    json_object_set_new(s, "x-kubernetes-validations",
                        json_pack("[{s:s},{s:s},{s:s,s:s,s:s,s:s},{s:s,s:s}]", "rule", "  ", "rule",
                                  "self.a\n== 1", "rule", "true", "message", "a\nb", "reason",
                                  "Nope", "fieldPath", " ", "rule", "true", "messageExpression",
                                  " "));
#define XV "spec.validation.openAPIV3Schema.x-kubernetes-validations"
    expect_invalid(c, "[" XV "[0].rule: Required value: rule is not specified, " XV
                      "[1].message: Required value: message must be specified if rule contains "
                      "line breaks, " XV "[2].message: Invalid value: \"a\\nb\": must not contain "
                      "line breaks, " XV "[2].reason: Unsupported value: \"Nope\": supported "
                      "values: \"FieldValueDuplicate\", \"FieldValueForbidden\", "
                      "\"FieldValueInvalid\", \"FieldValueRequired\", " XV
                      "[2].fieldPath: Invalid value: \" \": must be non-empty if specified, " XV
                      "[2].fieldPath: Invalid value: \" \": must be a valid path, " XV
                      "[3].messageExpression: Required value: messageExpression must be non-empty "
                      "if specified]");
#undef XV

    /* two versions with different schemas: the errors are per version */
    c = crd("pairs", "kop.example.com", "Pair");
    json_t *v2 = json_deep_copy(version(c, 0));
    json_object_set_new(v2, "name", json_string("v2"));
    json_object_set_new(v2, "storage", json_false());
    json_object_del(json_object_get(json_object_get(v2, "schema"), "openAPIV3Schema"), "type");
    json_array_append_new(json_object_get(spec_of(c), "versions"), v2);
    expect_invalid(c, "spec.versions[1].schema.openAPIV3Schema.type: Required value: must not "
                      "be empty at the root");
}
END_TEST

START_TEST(test_crd_api_approval)
{
    const char *need = "protected groups must have approval annotation "
                       "\"api-approved.kubernetes.io\"";
    const char *pr = "see https://github.com/kubernetes/enhancements/pull/1111";
    char want[1024];
    json_t *c = crd("widgets", "tools.k8s.io", "Widget");
    snprintf(want, sizeof(want),
             "metadata.annotations[api-approved.kubernetes.io]: Required value: %s, %s", need, pr);
    expect_invalid(c, want);

    c = crd("widgets", "tools.k8s.io", "Widget");
    json_object_set_new(json_object_get(c, "metadata"), "annotations",
                        json_pack("{s:s}", "api-approved.kubernetes.io", "maybe"));
    snprintf(want, sizeof(want),
             "metadata.annotations[api-approved.kubernetes.io]: Invalid value: \"maybe\": %s "
             "with either a URL or a reason starting with \"unapproved\", %s",
             need, pr);
    expect_invalid(c, want);

    c = crd("widgets", "tools.k8s.io", "Widget");
    json_object_set_new(json_object_get(c, "metadata"), "annotations",
                        json_pack("{s:s}", "api-approved.kubernetes.io", "unapproved, testing"));
    free(post(c, 201));
    c = crd("gizmos", "x.kubernetes.io", "Gizmo");
    json_object_set_new(json_object_get(c, "metadata"), "annotations",
                        json_pack("{s:s}", "api-approved.kubernetes.io",
                                  "https://github.com/kubernetes/kubernetes/pull/1"));
    free(post(c, 201));
}
END_TEST

START_TEST(test_crd_update)
{
    json_t *c = crd("movers", "kop.example.com", "Mover");
    free(post(c, 201));
    const char *path = CRDS "/movers.kop.example.com";
    struct kop_test_resp r =
        request("PATCH", path, "application/merge-patch+json",
                "{\"spec\":{\"group\":\"other.example.com\",\"scope\":\"Cluster\",\"names\":{"
                "\"kind\":\"Shaker\"},\"conversion\":{\"strategy\":\"Webhook\"}}}");
    ck_assert_msg(r.code == 422, "%ld %s", r.code, r.body);
    json_t *st = json_loads(r.body, 0, NULL);
    const char *want =
        "CustomResourceDefinition.apiextensions.k8s.io \"movers.kop.example.com\" is invalid: "
        "[spec.conversion.webhookClientConfig: Required value: required when strategy is set to "
        "Webhook, spec.conversion.conversionReviewVersions: Required value, spec.scope: Invalid "
        "value: \"Cluster\": field is immutable, spec.names.kind: Invalid value: \"Shaker\": "
        "field is immutable, spec.group: Invalid value: \"other.example.com\": field is "
        "immutable]";
    ck_assert_msg(strcmp(json_string_value(json_object_get(st, "message")), want) == 0,
                  "got  %s\nwant %s", json_string_value(json_object_get(st, "message")), want);
    json_decref(st);
    kop_test_resp_free(&r);

    /* a caBundle that is no PEM: refused once the CRD is established
     * (allowInvalidCABundle), accepted at create */
    const char *hook = "{\"spec\":{\"conversion\":{\"strategy\":\"Webhook\",\"webhook\":{"
                       "\"conversionReviewVersions\":[\"v1\"],\"clientConfig\":{\"caBundle\":"
                       "\"bm90IHBlbQ==\",\"service\":{\"namespace\":\"ns\",\"name\":\"svc\"}}}}}}";
    r = request("PATCH", path, "application/merge-patch+json", hook);
    ck_assert_msg(r.code == 422, "%ld %s", r.code, r.body);
    ck_assert_msg(strstr(r.body, "is invalid: spec.conversion.webhookClientConfig.caBundle: "
                                 "Invalid value: \\\"bm90IHBlbQ==\\\": unable to load root "
                                 "certificates: unable to parse bytes as PEM block\""),
                  "%s", r.body);
    kop_test_resp_free(&r);
    /* a BEGIN line without its END is no PEM block either (what
     * tests/scripts/test_helm.sh used as a placeholder CA) */
    const char *begin_only =
        "{\"spec\":{\"conversion\":{\"strategy\":\"Webhook\",\"webhook\":{"
        "\"conversionReviewVersions\":[\"v1\"],\"clientConfig\":{"
        "\"caBundle\":\"LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==\",\"service\":{"
        "\"namespace\":\"ns\",\"name\":\"svc\"}}}}}}";
    r = request("PATCH", path, "application/merge-patch+json", begin_only);
    ck_assert_msg(r.code == 422 && strstr(r.body, "unable to parse bytes as PEM block"), "%ld %s",
                  r.code, r.body);
    kop_test_resp_free(&r);
    /* kubesim's own CA (a certificate): accepted */
    FILE *f = fopen(scratch.ca, "rb");
    ck_assert_ptr_nonnull(f);
    unsigned char pem[8192];
    size_t n = fread(pem, 1, sizeof(pem), f);
    fclose(f);
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char enc[12000];
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)pem[i] << 16 | (i + 1 < n ? (unsigned)pem[i + 1] << 8 : 0) |
                     (i + 2 < n ? pem[i + 2] : 0);
        enc[o++] = b64[v >> 18 & 63];
        enc[o++] = b64[v >> 12 & 63];
        enc[o++] = i + 1 < n ? b64[v >> 6 & 63] : '=';
        enc[o++] = i + 2 < n ? b64[v & 63] : '=';
    }
    enc[o] = '\0';
    char good[16384];
    snprintf(good, sizeof(good),
             "{\"spec\":{\"conversion\":{\"strategy\":\"Webhook\",\"webhook\":{"
             "\"conversionReviewVersions\":[\"v1\"],\"clientConfig\":{\"caBundle\":\"%s\","
             "\"service\":{\"namespace\":\"ns\",\"name\":\"svc\"}}}}}}",
             enc);
    r = request("PATCH", path, "application/merge-patch+json", good);
    ck_assert_msg(r.code == 200, "%ld %s", r.code, r.body);
    kop_test_resp_free(&r);
    r = request("PATCH", path, "application/merge-patch+json",
                "{\"spec\":{\"conversion\":{\"strategy\":\"None\",\"webhook\":null}}}");
    ck_assert_msg(r.code == 200, "%ld %s", r.code, r.body);
    kop_test_resp_free(&r);
    c = crd("cabundles", "kop.example.com", "CaBundle");
    json_object_set_new(spec_of(c), "conversion",
                        json_pack("{s:s,s:{s:[s],s:{s:s,s:{s:s,s:s}}}}", "strategy", "Webhook",
                                  "webhook", "conversionReviewVersions", "v1", "clientConfig",
                                  "caBundle", "bm90IHBlbQ==", "service", "namespace", "ns", "name",
                                  "svc"));
    free(post(c, 201));

    /* a valid change goes through */
    r = request("PATCH", path, "application/merge-patch+json",
                "{\"spec\":{\"names\":{\"shortNames\":[\"mv\"]}}}");
    ck_assert_msg(r.code == 200, "%ld %s", r.code, r.body);
    kop_test_resp_free(&r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("kubesim_crd");
    TCase *tc = tcase_create("crd");
    tcase_set_timeout(tc, 120);
    tcase_add_unchecked_fixture(tc, start_sim, stop_sim);
    tcase_add_test(tc, test_crd_kop_like_accepted);
    tcase_add_test(tc, test_crd_names_group_scope);
    tcase_add_test(tc, test_crd_versions);
    tcase_add_test(tc, test_crd_subresources_columns);
    tcase_add_test(tc, test_crd_conversion);
    tcase_add_test(tc, test_crd_structural_schema);
    tcase_add_test(tc, test_crd_api_approval);
    tcase_add_test(tc, test_crd_update);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(suite());
}
