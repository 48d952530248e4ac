/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim's protobuf field table: the messages of the built-in kinds it
 * serves, generated from the upstream generated.proto files by
 * tests/kubesim/gen/gen-protobuf.py into pbtable.c (read-only data, no
 * locking). Only protobuf.c and pbtable.c include this header; the rest of
 * kubesim uses the ks_pb_* functions in kubesim.h.
 */
#ifndef KUBESIM_PROTOBUF_H
#define KUBESIM_PROTOBUF_H

#include <stddef.h>
#include <stdint.h>

/* Protobuf type of a field (of a map field: of its values; keys are
 * strings). */
enum ks_pb_type {
    KS_PB_STRING,
    KS_PB_BYTES, /* base64 in JSON */
    KS_PB_BOOL,
    KS_PB_INT32,
    KS_PB_INT64,
    KS_PB_UINT32,
    KS_PB_UINT64,
    KS_PB_DOUBLE,
    KS_PB_FLOAT,
    KS_PB_MESSAGE,
};

#define KS_PB_F_REPEATED 0x01u
#define KS_PB_F_MAP 0x02u
#define KS_PB_F_OMITEMPTY 0x04u /* Go json tag omitempty/omitzero */
#define KS_PB_F_POINTER 0x08u   /* Go pointer: a zero value is kept */
#define KS_PB_F_INLINE 0x10u    /* embedded struct, json:",inline": its members are the parent's */

struct ks_pb_field {
    uint32_t num;
    const char *name; /* JSON name */
    enum ks_pb_type type;
    unsigned int flags;
    int msg; /* index in ks_pb_msgs for KS_PB_MESSAGE, else -1 */
};

/* How a message maps to JSON. */
enum ks_pb_msg_kind {
    KS_PB_M_PLAIN,     /* an object of its fields */
    KS_PB_M_SLICE,     /* a Go slice type: the list of its only field */
    KS_PB_M_TIME,      /* metav1.Time: RFC 3339 seconds, zero is null */
    KS_PB_M_MICROTIME, /* metav1.MicroTime: RFC 3339 microseconds */
    KS_PB_M_DURATION,  /* metav1.Duration: Go's "1h2m3s" */
    KS_PB_M_RAWJSON,   /* RawExtension, FieldsV1: the JSON in field 1 */
    KS_PB_M_QUANTITY,  /* resource.Quantity: its string */
    KS_PB_M_INTSTR,    /* intstr.IntOrString: a number or a string */
};

struct ks_pb_msg {
    const char *name;
    enum ks_pb_msg_kind kind;
    const struct ks_pb_field *fields; /* in Go struct order; NULL if none */
    size_t nfields;
};

/* A kind that has a protobuf form: its group ("" core), version, and
 * message. */
struct ks_pb_kind {
    const char *group;
    const char *version;
    const char *kind;
    int msg;
};

extern const struct ks_pb_msg ks_pb_msgs[];
extern const size_t ks_pb_nmsgs;
extern const struct ks_pb_kind ks_pb_kinds[];
extern const size_t ks_pb_nkinds;

#endif /* KUBESIM_PROTOBUF_H */
