/* SPDX-License-Identifier: Apache-2.0 */
/*
 * MyResource v1 <-> v2 conversion, in place (docs/api.md §2).
 *
 * The conversion is lossless both ways once the CRD's structural defaults
 * are applied, never fails because of spec content and never adds a field
 * its input did not imply. Only apiVersion, spec, status and
 * metadata.annotations change; unknown fields are carried over.
 *
 *   v1 spec.image (string)  <-> v2 spec.image {repository, tag, digest}
 *   v1 spec.port            <-> v2 spec.ports[0].port (name "http", TCP)
 *   v1 spec.serviceType     <-> v2 spec.service.type
 *   v1 status.replicas / readyReplicas <-> v2 status.replicas.desired / .ready
 *
 * What v1 cannot hold is kept, when converting to v1, in the annotation
 * mygroup.example.com/v2-extras (compact JSON, sorted keys; absent when
 * there is nothing to keep). Its members, each present only when needed:
 *
 *   "image"    the v2 spec.image, when the v1 string cannot give it back
 *              (restored only while spec.image still equals the string
 *              written; a v1 client that changed the image wins)
 *   "ports"    the v2 spec.ports without ports[0].port (the v1 spec.port
 *              holds it, so v1 clients may change it), when v1 cannot say
 *              it: not exactly one port, or a first port whose name is not
 *              "http", whose protocol is not TCP, or with other fields
 *   "service"  the v2 spec.service without "type" (spec.serviceType holds
 *              it), when it has other members or no type
 *   "paused"   spec.paused unless it is false or absent
 *   "status"   {"replicas": v2 status.replicas without desired/ready},
 *              when it is not a non-empty {desired, ready} object
 *   "emptyAnnotations"  true when the v2 object had "annotations": {}
 *
 * Values of the wrong JSON type (a string where a number belongs, ...) are
 * carried over as they are. Known limits (unreachable with the CRD's
 * structural schema, which prunes unknown fields): an unknown spec field
 * named after a field of the other version is not preserved, and a v2
 * object that itself carries a v2-extras annotation loses it.
 *
 * Objects are modified in place: never pass a shared (stored) json_t.
 *
 * Thread-safety: any thread, on objects it owns.
 */
#ifndef KOP_CONVERSION_H
#define KOP_CONVERSION_H

#include <jansson.h>

#include "kop/myresource.h"

/* Convert a MyResource v1 object to v2 in place. @ref borrow obj (it is
 * modified). Returns 0, -EINVAL when obj is not a JSON object, -ENOMEM. */
int kop_conversion_to_v2(json_t *obj);

/* Convert a MyResource v2 object to v1 in place. Same contract. */
int kop_conversion_to_v1(json_t *obj);

/*
 * Convert obj (MyResource v1 or v2, by its apiVersion) to "desired" in
 * place; an object already in the desired version is left unchanged.
 * Returns 0, -EINVAL (not an object, unknown apiVersion/kind or desired
 * UNKNOWN) or -ENOMEM.
 */
int kop_conversion_convert(json_t *obj, enum kop_myresource_version desired);

#endif /* KOP_CONVERSION_H */
