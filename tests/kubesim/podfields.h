/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The small helpers the pod spec validators share (podvalidation.c,
 * secctxvalidation.c, affinityvalidation.c): reading a member of the v1
 * object, building a field path, and the one-message field errors. Static
 * inline: each validator keeps its calls local and short.
 */
#ifndef KUBESIM_PODFIELDS_H
#define KUBESIM_PODFIELDS_H

#include "kubesim.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define FLD 512 /* room for a field path */

/* A string member, or NULL. */
static inline const char *str_at(const json_t *obj, const char *k)
{
    return json_string_value(json_object_get(obj, k));
}

/* A string member, or "" (Go's zero value). */
static inline const char *str_or_empty(const json_t *obj, const char *k)
{
    const char *s = str_at(obj, k);
    return s ? s : "";
}

/* A pointer member of the internal type: set (not absent, not null). */
static inline bool has(const json_t *obj, const char *k)
{
    const json_t *v = json_object_get(obj, k);
    return v && !json_is_null(v);
}

/* Whether v is one of the NULL-terminated list. */
static inline bool in_list(const char *v, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(v, *list) == 0)
            return true;
    return false;
}

/* buf = fmt...; returns buf (a field path of at most FLD bytes). */
__attribute__((format(printf, 2, 3))) static inline const char *fld(char *buf, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, FLD, fmt, ap);
    va_end(ap);
    return buf;
}

static inline void forbidden(json_t *causes, const char *field, const char *detail)
{
    ks_cause(causes, "FieldValueForbidden", field, "Forbidden: %s", detail);
}

/* field.Invalid of a string value with one message. */
static inline void invalid(json_t *causes, const char *field, const char *value, const char *msg)
{
    ks_invalid_str(causes, field, value, json_pack("[s]", msg));
}

#endif
