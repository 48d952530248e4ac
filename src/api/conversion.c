/* SPDX-License-Identifier: Apache-2.0 */
/*
 * MyResource v1 <-> v2 conversion in place (see kop/conversion.h for the
 * mapping and the v2-extras annotation format).
 *
 * DESIGN: every v2 field that v1 cannot hold goes through the same pattern.
 * Going to v1, the v1 "projection" of the v2 value is written to the v1
 * field and, when converting that projection back would not give the v2
 * value, the v2 value (minus what the projection already holds) is kept in
 * the extras. Going to v2, the extras value is restored and the v1 field
 * is put back into it, so a v1 client's change of spec.port, spec.serviceType
 * or status.readyReplicas wins and still leaves the annotation unchanged.
 * The image is all-or-nothing: the extras image is restored only while the
 * v1 string still equals its projection.
 *
 * jansson references: json_object_set() takes its own reference, the
 * *_new variants steal (also on failure). Values moved between objects are
 * held with json_incref() while they are detached.
 */
#include "kop/conversion.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kop/imageref.h"
#include "kop/json.h"

static bool equal_opt(const json_t *a, const json_t *b)
{
    if (!a || !b)
        return !a && !b;
    return json_equal(a, b) != 0;
}

/* set key to a new reference (stolen), or delete key when v is NULL. */
static int set_or_del(json_t *obj, const char *key, json_t *v)
{
    if (!v) {
        json_object_del(obj, key);
        return 0;
    }
    return json_object_set_new(obj, key, v) == 0 ? 0 : -ENOMEM;
}

/* ---- image ---------------------------------------------------------- */

static const char *str_or(const json_t *v, const char *dflt, size_t *ret_len)
{
    if (json_is_string(v)) {
        *ret_len = json_string_length(v);
        return json_string_value(v);
    }
    *ret_len = dflt ? strlen(dflt) : 0;
    return dflt;
}

/* The v1 value for a v2 image value. @ref new (NULL for NULL or ENOMEM). */
static json_t *image_project(const json_t *img)
{
    if (!img)
        return NULL;
    if (!json_is_object(img))
        return json_incref((json_t *)img);
    size_t rl, tl, dl;
    const char *r = str_or(json_object_get(img, "repository"), "", &rl);
    const char *t = str_or(json_object_get(img, "tag"), NULL, &tl);
    const char *d = str_or(json_object_get(img, "digest"), NULL, &dl);
    size_t need = kop_imageref_join(r, rl, t, tl, d, dl, NULL, 0);
    char *buf = malloc(need + 1);
    if (!buf)
        return NULL;
    kop_imageref_join(r, rl, t, tl, d, dl, buf, need + 1);
    json_t *s = json_stringn(buf, need);
    free(buf);
    return s;
}

/* The v2 value for a v1 image value. @ref new. */
static json_t *image_from_v1(json_t *v)
{
    if (!json_is_string(v))
        return json_incref(v);
    struct kop_imageref r;
    kop_imageref_split(json_string_value(v), json_string_length(v), &r);
    json_t *o = json_object();
    if (!o)
        return NULL;
    if (json_object_set_new(o, "repository", json_stringn(r.name, r.name_len)) < 0 ||
        (r.tag && json_object_set_new(o, "tag", json_stringn(r.tag, r.tag_len)) < 0) ||
        (r.digest && json_object_set_new(o, "digest", json_stringn(r.digest, r.digest_len)) < 0)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* image_from_v1(image_project(img)) == img ? */
static bool image_representable(const json_t *img)
{
    if (json_is_string(img))
        return false;
    if (!json_is_object(img))
        return true;
    const json_t *r = json_object_get(img, "repository");
    const json_t *t = json_object_get(img, "tag");
    const json_t *d = json_object_get(img, "digest");
    size_t n = (r != NULL) + (t != NULL) + (d != NULL);
    if (!json_is_string(r) || (t && !json_is_string(t)) || (d && !json_is_string(d)) ||
        json_object_size(img) != n)
        return false;
    return kop_imageref_parts_roundtrip(
        json_string_value(r), json_string_length(r), t ? json_string_value(t) : NULL,
        t ? json_string_length(t) : 0, d ? json_string_value(d) : NULL,
        d ? json_string_length(d) : 0);
}

/* ---- ports, service, status ----------------------------------------- */

static bool str_is(const json_t *v, const char *s)
{
    return json_is_string(v) && strcmp(json_string_value(v), s) == 0 &&
           json_string_length(v) == strlen(s);
}

/* [{name: "http", port: X, protocol: absent|"TCP"}] */
static bool ports_representable(const json_t *ports)
{
    if (!json_is_array(ports) || json_array_size(ports) != 1)
        return false;
    const json_t *p = json_array_get(ports, 0);
    if (!json_is_object(p) || !json_object_get(p, "port") ||
        !str_is(json_object_get(p, "name"), KOP_MYRESOURCE_DEFAULT_PORT_NAME))
        return false;
    const json_t *proto = json_object_get(p, "protocol");
    if (proto && !str_is(proto, KOP_MYRESOURCE_DEFAULT_PROTOCOL))
        return false;
    return json_object_size(p) == (proto ? 3u : 2u);
}

/* {key: v} (v's reference added), or NULL. Not json_pack: its format
 * parsing cost more than the object on every converted object. */
static json_t *object_of(const char *key, json_t *v)
{
    json_t *o = json_object();
    if (o && json_object_set(o, key, v) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *standard_ports(json_t *port)
{
    json_t *p = json_object();
    if (!p ||
        json_object_set_new(p, "name", json_string_nocheck(KOP_MYRESOURCE_DEFAULT_PORT_NAME)) < 0 ||
        json_object_set(p, "port", port) < 0 ||
        json_object_set_new(p, "protocol", json_string_nocheck(KOP_MYRESOURCE_DEFAULT_PROTOCOL)) <
            0) {
        json_decref(p);
        return NULL;
    }
    json_t *a = json_array();
    if (!a || json_array_append_new(a, p) < 0) {
        json_decref(a);
        return NULL;
    }
    return a;
}

static bool service_representable(const json_t *svc)
{
    return json_is_object(svc) && json_object_size(svc) == 1 && json_object_get(svc, "type");
}

static bool status_replicas_representable(const json_t *r)
{
    if (!json_is_object(r) || json_object_size(r) == 0)
        return false;
    size_t n = (json_object_get(r, "desired") != NULL) + (json_object_get(r, "ready") != NULL);
    return n == json_object_size(r);
}

/* ---- v2 -> v1 --------------------------------------------------------- */

static int spec_to_v1(json_t *spec, json_t *extras)
{
    int rc = 0;
    json_t *img = json_object_get(spec, "image");
    if (img) {
        if (!image_representable(img) && json_object_set(extras, "image", img) < 0)
            return -ENOMEM;
        json_t *p = image_project(img);
        if (!p || json_object_set_new(spec, "image", p) < 0)
            return -ENOMEM;
    }

    json_t *ports = json_incref(json_object_get(spec, "ports"));
    if (ports) {
        json_t *port = NULL;
        json_object_del(spec, "ports");
        if (ports_representable(ports)) {
            port = json_incref(json_object_get(json_array_get(ports, 0), "port"));
        } else {
            json_t *first = json_array_get(ports, 0);
            if (json_is_object(first)) {
                port = json_incref(json_object_get(first, "port"));
                json_object_del(first, "port");
            }
            if (json_object_set(extras, "ports", ports) < 0)
                rc = -ENOMEM;
        }
        json_decref(ports);
        if (port && set_or_del(spec, "port", port) < 0)
            rc = -ENOMEM;
        if (rc < 0)
            return rc;
    }

    json_t *svc = json_incref(json_object_get(spec, "service"));
    if (svc) {
        json_t *type = NULL;
        json_object_del(spec, "service");
        if (service_representable(svc)) {
            type = json_incref(json_object_get(svc, "type"));
        } else {
            if (json_is_object(svc)) {
                type = json_incref(json_object_get(svc, "type"));
                json_object_del(svc, "type");
            }
            if (json_object_set(extras, "service", svc) < 0)
                rc = -ENOMEM;
        }
        json_decref(svc);
        if (type && set_or_del(spec, "serviceType", type) < 0)
            rc = -ENOMEM;
        if (rc < 0)
            return rc;
    }

    json_t *paused = json_object_get(spec, "paused");
    if (paused) {
        if (!json_is_false(paused) && json_object_set(extras, "paused", paused) < 0)
            return -ENOMEM;
        json_object_del(spec, "paused");
    }
    return 0;
}

static int status_to_v1(json_t *status, json_t *extras)
{
    int rc = 0;
    json_t *rep = json_incref(json_object_get(status, "replicas"));
    if (!rep)
        return 0;
    json_t *desired = NULL, *ready = NULL;
    json_object_del(status, "replicas");
    if (json_is_object(rep)) {
        desired = json_incref(json_object_get(rep, "desired"));
        ready = json_incref(json_object_get(rep, "ready"));
    }
    if (!status_replicas_representable(rep)) {
        if (json_is_object(rep)) {
            json_object_del(rep, "desired");
            json_object_del(rep, "ready");
        }
        json_t *st = object_of("replicas", rep);
        if (!st || json_object_set_new(extras, "status", st) < 0)
            rc = -ENOMEM;
    }
    json_decref(rep);
    if (desired && set_or_del(status, "replicas", desired) < 0)
        rc = -ENOMEM;
    else if (!desired)
        json_object_del(status, "replicas");
    if (ready && set_or_del(status, "readyReplicas", ready) < 0)
        rc = -ENOMEM;
    return rc;
}

/* A v2-extras value kop would have written fits in the annotations' 256 KiB
 * (the apiserver's limit): a longer one is not ours to interpret, and
 * decoding it could cost many times its size (a two-byte "0," becomes a
 * jansson value of tens of bytes; docs/performance.md §4). */
#define EXTRAS_MAX (256u * 1024u)

static bool is_extras_object(const json_t *v)
{
    if (!json_is_string(v) || json_string_length(v) > EXTRAS_MAX)
        return false;
    json_t *e = json_loadb(json_string_value(v), json_string_length(v), 0, NULL);
    bool ok = json_is_object(e);
    json_decref(e);
    return ok;
}

static int store_extras(json_t *obj, json_t *extras)
{
    json_t *meta = json_object_get(obj, "metadata");
    if (json_object_size(extras) == 0) {
        /* Nothing to keep: drop a stale extras annotation a v2 object
         * may carry, so it is not restored later. */
        json_t *ann = json_object_get(meta, "annotations");
        if (is_extras_object(json_object_get(ann, KOP_MYRESOURCE_EXTRAS_ANNOTATION)))
            json_object_del(ann, KOP_MYRESOURCE_EXTRAS_ANNOTATION);
        return 0;
    }
    if (!meta) {
        meta = json_object();
        if (!meta || json_object_set_new(obj, "metadata", meta) < 0)
            return -ENOMEM;
    }
    if (!json_is_object(meta))
        return 0; /* cannot hold an annotation: nothing we can keep */
    json_t *ann = json_object_get(meta, "annotations");
    if (!ann || json_is_null(ann)) {
        /* null is no annotations to the apiserver (ObjectMeta drops it);
         * the extras were lost with it */
        ann = json_object();
        if (!ann || json_object_set_new(meta, "annotations", ann) < 0)
            return -ENOMEM;
    } else if (!json_is_object(ann)) {
        return 0;
    } else if (json_object_size(ann) == 0) {
        if (json_object_set_new(extras, "emptyAnnotations", json_true()) < 0)
            return -ENOMEM;
    }
    char *buf = NULL;
    size_t len = 0;
    int rc = kop_json_dump(extras, JSON_COMPACT | JSON_SORT_KEYS, &buf, &len);
    if (rc < 0)
        return rc;
    json_t *s = json_stringn(buf, len);
    free(buf);
    if (!s || json_object_set_new(ann, KOP_MYRESOURCE_EXTRAS_ANNOTATION, s) < 0)
        return -ENOMEM;
    return 0;
}

int kop_conversion_to_v1(json_t *obj)
{
    if (!json_is_object(obj))
        return -EINVAL;
    int rc = 0;
    json_t *extras = json_object();
    if (!extras)
        return -ENOMEM;
    if (json_object_set_new(obj, "apiVersion", json_string(KOP_MYRESOURCE_V1)) < 0) {
        rc = -ENOMEM;
        goto out;
    }
    json_t *spec = json_object_get(obj, "spec");
    if (json_is_object(spec)) {
        rc = spec_to_v1(spec, extras);
        if (rc < 0)
            goto out;
    }
    json_t *status = json_object_get(obj, "status");
    if (json_is_object(status)) {
        rc = status_to_v1(status, extras);
        if (rc < 0)
            goto out;
    }
    rc = store_extras(obj, extras);
out:
    json_decref(extras);
    return rc;
}

/* ---- v1 -> v2 --------------------------------------------------------- */

static int spec_to_v2(json_t *spec, json_t *extras)
{
    int rc = 0;
    json_t *ex;

    json_t *img = json_object_get(spec, "image");
    ex = json_object_get(extras, "image");
    bool restored = false;
    if (ex) {
        json_t *p = image_project(ex);
        if (equal_opt(p, img)) {
            restored = true;
            if (json_object_set(spec, "image", ex) < 0)
                rc = -ENOMEM;
        }
        json_decref(p);
    }
    if (!restored && json_is_string(img)) {
        json_t *o = image_from_v1(img);
        if (!o || json_object_set_new(spec, "image", o) < 0)
            rc = -ENOMEM;
    }
    if (rc < 0)
        return rc;

    json_t *port = json_incref(json_object_get(spec, "port"));
    json_t *ports = NULL;
    ex = json_object_get(extras, "ports");
    json_t *first = json_array_get(ex, 0);
    if (json_is_object(first)) {
        if (port)
            rc = json_object_set(first, "port", port) < 0 ? -ENOMEM : 0;
        else
            json_object_del(first, "port");
        ports = json_incref(ex);
    } else if (ex && !port) {
        ports = json_incref(ex);
    } else if (port) {
        ports = standard_ports(port);
        if (!ports)
            rc = -ENOMEM;
    }
    json_decref(port);
    json_object_del(spec, "port");
    if (ports && json_object_set_new(spec, "ports", ports) < 0)
        rc = -ENOMEM;
    if (rc < 0)
        return rc;

    json_t *type = json_incref(json_object_get(spec, "serviceType"));
    json_t *svc = NULL;
    ex = json_object_get(extras, "service");
    if (json_is_object(ex)) {
        if (type)
            rc = json_object_set(ex, "type", type) < 0 ? -ENOMEM : 0;
        else
            json_object_del(ex, "type");
        svc = json_incref(ex);
    } else if (ex && !type) {
        svc = json_incref(ex);
    } else if (type) {
        svc = object_of("type", type);
        if (!svc)
            rc = -ENOMEM;
    }
    json_decref(type);
    json_object_del(spec, "serviceType");
    if (svc && json_object_set_new(spec, "service", svc) < 0)
        rc = -ENOMEM;
    if (rc < 0)
        return rc;

    ex = json_object_get(extras, "paused");
    if (ex && json_object_set(spec, "paused", ex) < 0)
        return -ENOMEM;
    return 0;
}

static int status_to_v2(json_t *status, json_t *extras)
{
    int rc = 0;
    json_t *desired = json_incref(json_object_get(status, "replicas"));
    json_t *ready = json_incref(json_object_get(status, "readyReplicas"));
    json_t *ex = json_object_get(json_object_get(extras, "status"), "replicas");
    json_t *rep = NULL;
    if (json_is_object(ex)) {
        if (desired && json_object_set(ex, "desired", desired) < 0)
            rc = -ENOMEM;
        else if (!desired)
            json_object_del(ex, "desired");
        if (ready && json_object_set(ex, "ready", ready) < 0)
            rc = -ENOMEM;
        else if (!ready)
            json_object_del(ex, "ready");
        rep = json_incref(ex);
    } else if (ex && !desired && !ready) {
        rep = json_incref(ex);
    } else if (desired || ready) {
        rep = json_object();
        if (!rep || (desired && json_object_set(rep, "desired", desired) < 0) ||
            (ready && json_object_set(rep, "ready", ready) < 0))
            rc = -ENOMEM;
    }
    json_decref(desired);
    json_decref(ready);
    json_object_del(status, "readyReplicas");
    if (rc < 0) {
        json_decref(rep);
        return rc;
    }
    return set_or_del(status, "replicas", rep);
}

/* The parsed extras annotation (@ref new) or NULL. */
static json_t *load_extras(json_t *obj)
{
    json_t *v = json_object_get(json_object_get(json_object_get(obj, "metadata"), "annotations"),
                                KOP_MYRESOURCE_EXTRAS_ANNOTATION);
    if (!json_is_string(v) || json_string_length(v) > EXTRAS_MAX)
        return NULL; /* not ours to interpret: carried over as it is */
    json_t *e = json_loadb(json_string_value(v), json_string_length(v), 0, NULL);
    if (!json_is_object(e)) {
        json_decref(e);
        return NULL; /* not ours to interpret: carried over as it is */
    }
    return e;
}

int kop_conversion_to_v2(json_t *obj)
{
    if (!json_is_object(obj))
        return -EINVAL;
    int rc = 0;
    json_t *extras = load_extras(obj);
    if (json_object_set_new(obj, "apiVersion", json_string(KOP_MYRESOURCE_V2)) < 0) {
        rc = -ENOMEM;
        goto out;
    }
    json_t *spec = json_object_get(obj, "spec");
    if (json_is_object(spec)) {
        rc = spec_to_v2(spec, extras);
        if (rc < 0)
            goto out;
    }
    json_t *status = json_object_get(obj, "status");
    if (json_is_object(status)) {
        rc = status_to_v2(status, extras);
        if (rc < 0)
            goto out;
    }
    if (extras) {
        json_t *meta = json_object_get(obj, "metadata");
        json_t *ann = json_object_get(meta, "annotations");
        json_object_del(ann, KOP_MYRESOURCE_EXTRAS_ANNOTATION);
        if (json_object_size(ann) == 0 &&
            !json_is_true(json_object_get(extras, "emptyAnnotations")))
            json_object_del(meta, "annotations");
    }
out:
    json_decref(extras);
    return rc;
}

int kop_conversion_convert(json_t *obj, enum kop_myresource_version desired)
{
    enum kop_myresource_version have = kop_myresource_version_of(obj);
    if (have == KOP_MYRESOURCE_VERSION_UNKNOWN || desired == KOP_MYRESOURCE_VERSION_UNKNOWN)
        return -EINVAL;
    if (have == desired)
        return 0;
    return desired == KOP_MYRESOURCE_VERSION_V2 ? kop_conversion_to_v2(obj)
                                                : kop_conversion_to_v1(obj);
}
