/* SPDX-License-Identifier: Apache-2.0 */
/*
 * /openapi/v2 in protobuf: the Swagger 2.0 document (ks_openapi_v2) as the
 * gnostic openapi_v2.Document message (github.com/google/gnostic-models,
 * openapiv2/OpenAPIv2.proto), the form kubectl asks for
 * (application/com.github.proto-openapi.spec.v2@v1.0+protobuf) when it
 * validates on the client: a List's items, or a kind whose /openapi/v3
 * document has no PATCH operation.
 *
 * Encoded: swagger, info (title, version), paths (empty, as in the JSON
 * document), definitions. A schema carries $ref, format, title, description, default,
 * required, enum, additionalProperties (schema or boolean), type, items,
 * allOf, properties and its x-* members as vendor extensions (NamedAny with
 * the value as YAML text: JSON is YAML). The other JSON Schema members
 * kubectl's validator does not read are left out.
 */
#include "kubesim.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct pbw {
    unsigned char *p;
    size_t len, cap;
};

static void put(struct pbw *w, const void *b, size_t n)
{
    if (w->cap - w->len < n) {
        size_t cap = w->cap ? w->cap * 2 : 256;
        while (cap - w->len < n)
            cap *= 2;
        unsigned char *np = realloc(w->p, cap);
        if (!np)
            abort();
        w->p = np;
        w->cap = cap;
    }
    memcpy(w->p + w->len, b, n);
    w->len += n;
}

static void varint(struct pbw *w, uint64_t v)
{
    unsigned char b[10];
    size_t n = 0;
    do {
        b[n] = (unsigned char)(v & 0x7f);
        v >>= 7;
        if (v)
            b[n] |= 0x80;
        n++;
    } while (v);
    put(w, b, n);
}

static void bytes_field(struct pbw *w, unsigned num, const void *b, size_t n)
{
    varint(w, ((uint64_t)num << 3) | 2);
    varint(w, n);
    put(w, b, n);
}

static void str_field(struct pbw *w, unsigned num, const char *s)
{
    if (s)
        bytes_field(w, num, s, strlen(s));
}

static void msg_field(struct pbw *w, unsigned num, struct pbw *m)
{
    bytes_field(w, num, m->p ? m->p : (const unsigned char *)"", m->len);
    free(m->p);
    memset(m, 0, sizeof(*m));
}

/* Any{yaml}: a JSON value is YAML text. */
static void any_field(struct pbw *w, unsigned num, const json_t *v)
{
    char *text = ks_dump(v, false, NULL);
    if (!text)
        abort();
    struct pbw a = {0};
    str_field(&a, 2, text);
    free(text);
    msg_field(w, num, &a);
}

static void schema(struct pbw *w, const json_t *s);

static void schema_field(struct pbw *w, unsigned num, const json_t *s)
{
    struct pbw m = {0};
    schema(&m, s);
    msg_field(w, num, &m);
}

/* NamedSchema{name, value} for each member of an object of schemas. */
static void named_schemas(struct pbw *w, unsigned num, const json_t *obj)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v)
    {
        struct pbw ns = {0};
        str_field(&ns, 1, k);
        schema_field(&ns, 2, v);
        msg_field(w, num, &ns);
    }
}

static void schema(struct pbw *w, const json_t *s)
{
    if (!json_is_object(s))
        return;
    str_field(w, 1, json_string_value(json_object_get(s, "$ref")));
    str_field(w, 2, json_string_value(json_object_get(s, "format")));
    str_field(w, 3, json_string_value(json_object_get(s, "title")));
    str_field(w, 4, json_string_value(json_object_get(s, "description")));
    const json_t *dflt = json_object_get(s, "default");
    if (dflt)
        any_field(w, 5, dflt);
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(s, "required"), i, v) str_field(w, 19, json_string_value(v));
    json_array_foreach(json_object_get(s, "enum"), i, v) any_field(w, 20, v);
    const json_t *ap = json_object_get(s, "additionalProperties");
    if (json_is_object(ap) || json_is_boolean(ap)) {
        struct pbw a = {0};
        if (json_is_object(ap)) {
            schema_field(&a, 1, ap);
        } else {
            varint(&a, (2u << 3) | 0);
            varint(&a, json_is_true(ap));
        }
        msg_field(w, 21, &a);
    }
    const json_t *type = json_object_get(s, "type");
    if (json_is_string(type)) {
        struct pbw t = {0};
        str_field(&t, 1, json_string_value(type));
        msg_field(w, 22, &t);
    }
    const json_t *items = json_object_get(s, "items");
    if (json_is_object(items)) {
        struct pbw it = {0};
        schema_field(&it, 1, items);
        msg_field(w, 23, &it);
    }
    json_array_foreach(json_object_get(s, "allOf"), i, v) schema_field(w, 24, v);
    const json_t *props = json_object_get(s, "properties");
    if (json_is_object(props)) {
        struct pbw p = {0};
        named_schemas(&p, 1, props);
        msg_field(w, 25, &p);
    }
    const char *k;
    json_object_foreach((json_t *)s, k, v)
    {
        if (strncmp(k, "x-", 2) != 0)
            continue;
        struct pbw na = {0};
        str_field(&na, 1, k);
        any_field(&na, 2, v);
        msg_field(w, 31, &na);
    }
}

int ks_openapi_v2_pb(const json_t *doc, unsigned char **ret_buf, size_t *ret_len)
{
    struct pbw w = {0};
    str_field(&w, 1, json_string_value(json_object_get(doc, "swagger")));
    const json_t *info = json_object_get(doc, "info");
    struct pbw m = {0};
    str_field(&m, 1, json_string_value(json_object_get(info, "title")));
    str_field(&m, 2, json_string_value(json_object_get(info, "version")));
    msg_field(&w, 2, &m);
    /* Paths: empty, as kubesim's Swagger document has none (kubectl reads
     * the PATCH operations of /openapi/v3) */
    msg_field(&w, 8, &m);
    named_schemas(&m, 1, json_object_get(doc, "definitions"));
    msg_field(&w, 9, &m);
    *ret_buf = w.p ? w.p : malloc(1);
    if (!*ret_buf)
        abort();
    *ret_len = w.len;
    return 0;
}
