/* SPDX-License-Identifier: Apache-2.0 */
/*
 * MyResource names and the typed view of a v2 object that the reconciler
 * works on (see kop/myresource.h).
 */
#include "kop/myresource.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "kop/imageref.h"

enum kop_myresource_version kop_myresource_version_parse(const char *api_version)
{
    if (!api_version)
        return KOP_MYRESOURCE_VERSION_UNKNOWN;
    if (strcmp(api_version, KOP_MYRESOURCE_V1) == 0)
        return KOP_MYRESOURCE_VERSION_V1;
    if (strcmp(api_version, KOP_MYRESOURCE_V2) == 0)
        return KOP_MYRESOURCE_VERSION_V2;
    return KOP_MYRESOURCE_VERSION_UNKNOWN;
}

enum kop_myresource_version kop_myresource_version_of(const json_t *obj)
{
    const json_t *kind = json_object_get(obj, "kind");
    if (!json_is_string(kind) || strcmp(json_string_value(kind), KOP_MYRESOURCE_KIND) != 0)
        return KOP_MYRESOURCE_VERSION_UNKNOWN;
    return kop_myresource_version_parse(json_string_value(json_object_get(obj, "apiVersion")));
}

const char *kop_myresource_api_version(enum kop_myresource_version v)
{
    switch (v) {
    case KOP_MYRESOURCE_VERSION_V1:
        return KOP_MYRESOURCE_V1;
    case KOP_MYRESOURCE_VERSION_V2:
        return KOP_MYRESOURCE_V2;
    default:
        return NULL;
    }
}

/* An integer in [lo, hi]; integral reals are accepted (JSON has one number
 * type). */
static int read_int(const json_t *v, long long lo, long long hi, int32_t *ret)
{
    long long x;
    if (json_is_integer(v)) {
        x = json_integer_value(v);
    } else if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d != floor(d) || d < (double)lo || d > (double)hi)
            return -EINVAL;
        x = (long long)d;
    } else {
        return -EINVAL;
    }
    if (x < lo || x > hi)
        return -EINVAL;
    *ret = (int32_t)x;
    return 0;
}

static int read_str(const json_t *v, const char *dflt, const char **ret)
{
    if (!v) {
        *ret = dflt;
        return 0;
    }
    if (!json_is_string(v))
        return -EINVAL;
    *ret = json_string_value(v);
    return 0;
}

int kop_myresource_spec_read(const json_t *obj, struct kop_myresource_spec *ret)
{
    struct kop_myresource_spec s = {
        .replicas = KOP_MYRESOURCE_DEFAULT_REPLICAS,
        .repository = KOP_MYRESOURCE_DEFAULT_REPOSITORY,
        .tag = KOP_MYRESOURCE_DEFAULT_TAG,
        .n_ports = 1,
        .ports = {{KOP_MYRESOURCE_DEFAULT_PORT_NAME, KOP_MYRESOURCE_DEFAULT_PORT,
                   KOP_MYRESOURCE_DEFAULT_PROTOCOL}},
        .service_type = KOP_MYRESOURCE_DEFAULT_SERVICE_TYPE,
    };
    if (!json_is_object(obj))
        return -EINVAL;
    const json_t *spec = json_object_get(obj, "spec");
    if (!spec)
        goto done;
    if (!json_is_object(spec))
        return -EINVAL;

    const json_t *v = json_object_get(spec, "replicas");
    if (v && read_int(v, 0, KOP_MYRESOURCE_MAX_REPLICAS, &s.replicas) < 0)
        return -EINVAL;

    v = json_object_get(spec, "image");
    if (v) {
        if (!json_is_object(v) || !json_is_string(json_object_get(v, "repository")))
            return -EINVAL;
        s.repository = json_string_value(json_object_get(v, "repository"));
        if (read_str(json_object_get(v, "tag"), NULL, &s.tag) < 0 ||
            read_str(json_object_get(v, "digest"), NULL, &s.digest) < 0)
            return -EINVAL;
    }

    v = json_object_get(spec, "ports");
    if (v) {
        size_t n = json_array_size(v);
        if (!json_is_array(v) || n == 0 || n > KOP_MYRESOURCE_MAX_PORTS)
            return -EINVAL;
        for (size_t i = 0; i < n; i++) {
            const json_t *p = json_array_get(v, i);
            struct kop_myresource_port *mp = &s.ports[i];
            if (!json_is_object(p) || read_str(json_object_get(p, "name"), NULL, &mp->name) < 0 ||
                !mp->name || read_int(json_object_get(p, "port"), 1, 65535, &mp->port) < 0 ||
                read_str(json_object_get(p, "protocol"), KOP_MYRESOURCE_DEFAULT_PROTOCOL,
                         &mp->protocol) < 0)
                return -EINVAL;
        }
        s.n_ports = n;
    }

    v = json_object_get(spec, "service");
    if (v) {
        if (!json_is_object(v) ||
            read_str(json_object_get(v, "type"), KOP_MYRESOURCE_DEFAULT_SERVICE_TYPE,
                     &s.service_type) < 0)
            return -EINVAL;
    }

    v = json_object_get(spec, "paused");
    if (v) {
        if (!json_is_boolean(v))
            return -EINVAL;
        s.paused = json_is_true(v);
    }
done:
    *ret = s;
    return 0;
}

size_t kop_myresource_spec_image(const struct kop_myresource_spec *spec, char *buf, size_t size)
{
    const char *r = spec->repository ? spec->repository : "";
    return kop_imageref_join(r, strlen(r), spec->tag, spec->tag ? strlen(spec->tag) : 0,
                             spec->digest, spec->digest ? strlen(spec->digest) : 0, buf, size);
}
