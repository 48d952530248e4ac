/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MyResource API (group mygroup.example.com, versions v1 and v2):
 * names, and a typed read-only view of a v2 object for the reconciler.
 *
 * The view borrows strings from the JSON object it was read from, so it
 * lives no longer than that object. Defaults of the CRD's structural schema
 * (docs/api.md §1.4) are applied by the reader for absent fields, so a v2
 * object converted in-process (which the apiserver did not default) reads
 * the same as one served by the apiserver.
 *
 * Thread-safety: any thread; the object read must not be mutated meanwhile.
 */
#ifndef KOP_MYRESOURCE_H
#define KOP_MYRESOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define KOP_MYRESOURCE_GROUP "mygroup.example.com"
#define KOP_MYRESOURCE_KIND "MyResource"
#define KOP_MYRESOURCE_RESOURCE "myresources"
#define KOP_MYRESOURCE_V1 "mygroup.example.com/v1"
#define KOP_MYRESOURCE_V2 "mygroup.example.com/v2"
/* Where v2 data that v1 cannot hold is kept on a v1 object. */
#define KOP_MYRESOURCE_EXTRAS_ANNOTATION "mygroup.example.com/v2-extras"

#define KOP_MYRESOURCE_MAX_PORTS 16
#define KOP_MYRESOURCE_MAX_REPLICAS 1000

/* Defaults of the CRD's structural schema. */
#define KOP_MYRESOURCE_DEFAULT_REPLICAS 1
#define KOP_MYRESOURCE_DEFAULT_IMAGE "nginx:1.14.2"
#define KOP_MYRESOURCE_DEFAULT_REPOSITORY "nginx"
#define KOP_MYRESOURCE_DEFAULT_TAG "1.14.2"
#define KOP_MYRESOURCE_DEFAULT_PORT 80
#define KOP_MYRESOURCE_DEFAULT_PORT_NAME "http"
#define KOP_MYRESOURCE_DEFAULT_PROTOCOL "TCP"
#define KOP_MYRESOURCE_DEFAULT_SERVICE_TYPE "ClusterIP"

enum kop_myresource_version {
    KOP_MYRESOURCE_VERSION_UNKNOWN = 0,
    KOP_MYRESOURCE_VERSION_V1 = 1,
    KOP_MYRESOURCE_VERSION_V2 = 2,
};

/* "mygroup.example.com/v1" -> V1, ".../v2" -> V2, anything else (or NULL)
 * -> UNKNOWN. */
enum kop_myresource_version kop_myresource_version_parse(const char *api_version);

/* The version named by obj.apiVersion when obj.kind is MyResource, else
 * UNKNOWN. @ref borrow obj. */
enum kop_myresource_version kop_myresource_version_of(const json_t *obj);

/* "mygroup.example.com/v1" / "/v2", NULL for UNKNOWN. */
const char *kop_myresource_api_version(enum kop_myresource_version v);

struct kop_myresource_port {
    const char *name; /* borrowed */
    int32_t port;
    const char *protocol; /* borrowed; "TCP" when absent */
};

struct kop_myresource_spec {
    int32_t replicas;
    const char *repository; /* borrowed */
    const char *tag;        /* borrowed, NULL when absent */
    const char *digest;     /* borrowed, NULL when absent */
    size_t n_ports;
    struct kop_myresource_port ports[KOP_MYRESOURCE_MAX_PORTS];
    const char *service_type; /* borrowed */
    bool paused;
};

/*
 * Read the spec of a v2 object (@ref borrow; convert a v1 object with
 * kop_conversion_to_v2() first), applying the CRD defaults to absent
 * fields. Returns 0, or -EINVAL when a field has the wrong JSON type, is
 * out of range or there are no / too many ports (objects admitted by the
 * validating webhook never are). *ret written only on success.
 */
int kop_myresource_spec_read(const json_t *obj, struct kop_myresource_spec *ret);

/*
 * The image reference of a spec (repository[:tag][@digest]) into buf,
 * snprintf semantics: returns the full length.
 */
size_t kop_myresource_spec_image(const struct kop_myresource_spec *spec, char *buf, size_t size);

#endif /* KOP_MYRESOURCE_H */
