/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim YAML bodies: server-side apply sends application/apply-patch+yaml,
 * which the apiserver reads with sigs.k8s.io/yaml (YAML to JSON through
 * go-yaml v2): plain scalars resolve as YAML 1.1 does (null, ~ and the empty
 * scalar are null; true/false/yes/no/on/off in their three spellings are
 * booleans; decimal, 0x and 0o integers; decimal floats), quoted scalars
 * are strings, mapping keys are strings. One document only; anchors and
 * aliases are expanded by libyaml's document loader.
 *
 * Thread-safety: touches only its arguments.
 */
#include "kubesim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

static bool word_in(const char *s, const char *const *words)
{
    for (; *words; words++)
        if (strcmp(s, *words) == 0)
            return true;
    return false;
}

static json_t *scalar(const yaml_node_t *n)
{
    const char *s = (const char *)n->data.scalar.value;
    size_t len = n->data.scalar.length;
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return json_stringn(s, len);
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
    static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES",
                                      "on",   "On",   "ON",   "y",   "Y",   NULL};
    static const char *const no[] = {"false", "False", "FALSE", "no", "No", "NO",
                                     "off",   "Off",   "OFF",   "n",  "N",  NULL};
    if (word_in(s, nulls))
        return json_null();
    if (word_in(s, yes))
        return json_true();
    if (word_in(s, no))
        return json_false();
    char *end = NULL;
    errno = 0;
    const char *digits = s + (*s == '-' || *s == '+');
    if (*digits >= '0' && *digits <= '9') {
        long long v;
        if (strncmp(digits, "0o", 2) == 0)
            v = strtoll(digits + 2, &end, 8);
        else
            v = strtoll(s, &end, 0);
        if (*s == '-' && strncmp(digits, "0o", 2) == 0)
            v = -v;
        if (end && *end == '\0' && errno == 0)
            return json_integer(v);
        errno = 0;
        double d = strtod(s, &end);
        if (end && *end == '\0' && errno == 0)
            return json_real(d);
    }
    return json_stringn(s, len);
}

static json_t *convert(yaml_document_t *doc, yaml_node_t *n, int depth, char **err)
{
    if (!n || depth > 100) {
        *err = ks_strdup("yaml: document too deep or broken");
        return NULL;
    }
    switch (n->type) {
    case YAML_SCALAR_NODE: {
        json_t *v = scalar(n);
        if (!v)
            *err = ks_strdup("yaml: invalid UTF-8 in a scalar");
        return v;
    }
    case YAML_SEQUENCE_NODE: {
        json_t *a = json_array();
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
             it++) {
            json_t *v = convert(doc, yaml_document_get_node(doc, *it), depth + 1, err);
            if (!v) {
                json_decref(a);
                return NULL;
            }
            json_array_append_new(a, v);
        }
        return a;
    }
    case YAML_MAPPING_NODE: {
        json_t *o = json_object();
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top;
             p++) {
            yaml_node_t *k = yaml_document_get_node(doc, p->key);
            if (!k || k->type != YAML_SCALAR_NODE) {
                *err = ks_strdup("yaml: a mapping key is not a scalar");
                json_decref(o);
                return NULL;
            }
            json_t *v = convert(doc, yaml_document_get_node(doc, p->value), depth + 1, err);
            if (!v) {
                json_decref(o);
                return NULL;
            }
            char *key = strndup((const char *)k->data.scalar.value, k->data.scalar.length);
            if (!key)
                abort();
            json_object_set_new(o, key, v);
            free(key);
        }
        return o;
    }
    default:
        *err = ks_strdup("yaml: empty document");
        return NULL;
    }
}

json_t *ks_yaml_load(const char *buf, size_t len, char **ret_err)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    *ret_err = NULL;
    if (!yaml_parser_initialize(&parser))
        abort();
    yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
    if (!yaml_parser_load(&parser, &doc)) {
        *ret_err = ks_printf("yaml: line %lu: %s", (unsigned long)parser.problem_mark.line + 1,
                             parser.problem ? parser.problem : "parse error");
        yaml_parser_delete(&parser);
        return NULL;
    }
    json_t *out = NULL;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root)
        out = convert(&doc, root, 0, ret_err);
    else
        *ret_err = ks_strdup("yaml: empty document");
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return out;
}
