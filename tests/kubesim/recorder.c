/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Events kubesim's controllers write, as their recorders write them.
 *
 * The deployment and ReplicaSet controllers use client-go's tools/record
 * (core/v1 Events): source.component, firstTimestamp, lastTimestamp,
 * count, reportingComponent (= the component), reportingInstance ""; the
 * name <object>.<hex nanoseconds>; in the involved object's namespace
 * ("default" for a cluster-scoped one). The EventCorrelator's aggregation:
 * an Event with the same source, involved object, type, reason and message
 * as one written in the last 10 minutes is that one, count + 1 and a new
 * lastTimestamp (a PATCH there).
 *
 * The scheduler uses the events.k8s.io/v1 recorder (tools/events): read
 * through core/v1 such an Event has eventTime (microseconds), action,
 * reportingComponent "default-scheduler" and reportingInstance
 * "default-scheduler-<node>", an empty source and null timestamps; a
 * repeat within 6 minutes (the series' window) is series.count and
 * series.lastObservedTime on the first one.
 *
 * Every Event, whoever wrote it, goes --event-ttl (1h by default) after
 * its last write, as the apiserver's etcd lease on it expires: a watch
 * sees it DELETED. The correlator's index holds at most 100,000 keys
 * (then starts anew).
 */
#include "kubesim.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CORRELATE_SECS (10 * 60) /* record.defaultAggregateIntervalInSeconds */
#define SERIES_SECS (6 * 60)     /* events.k8s.io: the series' window */

static const char *meta_str(const json_t *obj, const char *k)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), k));
}

static time_t parse_rfc3339(const char *s)
{
    struct tm tm = {0};
    if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))
        return 0;
    return timegm(&tm);
}

void ks_record_event(struct ks_server *ks, const json_t *obj, const struct ks_event_src *src,
                     const char *type, const char *reason, const char *message)
{
    const struct ks_res *def = ks_res_by_key(ks, "events");
    if (!def || !obj || !ks->record_events)
        return;
    const char *name = ks_nz(meta_str(obj, "name"));
    const char *obj_ns = meta_str(obj, "namespace");
    const char *ns = obj_ns ? obj_ns : "default";
    const char *uid = ks_nz(meta_str(obj, "uid"));
    const json_t *ns_obj = ks_store_get(ks, "namespaces", ns);
    if (!ns_obj || meta_str(ns_obj, "deletionTimestamp"))
        return; /* the namespace lifecycle refuses it */
    time_t now_s = time(NULL);
    char now[32], micro[40];
    ks_now_rfc3339(now, sizeof(now));
    ks_now_rfc3339_micro(micro, sizeof(micro));
    /* the correlator's key */
    char *ck = ks_printf("%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s", ns, uid, src->component, type, reason,
                         message);
    if (!ks->event_index)
        ks->event_index = json_object();
    if (json_object_size(ks->event_index) > 100000) /* bounded: older ones start anew */
        json_object_clear(ks->event_index);
    const char *known = json_string_value(json_object_get(ks->event_index, ck));
    const json_t *prev = known ? ks_store_get(ks, def->key, known) : NULL;
    if (prev && src->series) {
        const json_t *series = json_object_get(prev, "series");
        const char *last = json_string_value(json_object_get(series, "lastObservedTime"));
        if (!last)
            last = json_string_value(json_object_get(prev, "eventTime"));
        if (now_s - parse_rfc3339(last) <= SERIES_SECS) {
            json_t *next = json_deep_copy(prev);
            json_int_t n = json_integer_value(json_object_get(series, "count"));
            json_object_set_new(
                next, "series",
                json_pack("{s:I,s:s}", "count", n ? n + 1 : 2, "lastObservedTime", micro));
            ks_typed_order(next);
            ks_store_put(ks, def, known, next);
            free(ck);
            return;
        }
    } else if (prev) {
        const char *last = json_string_value(json_object_get(prev, "lastTimestamp"));
        if (now_s - parse_rfc3339(last) <= CORRELATE_SECS) {
            json_t *next = json_deep_copy(prev);
            json_int_t n = json_integer_value(json_object_get(prev, "count"));
            json_object_set_new(next, "count", json_integer(n + 1));
            json_object_set_new(next, "lastTimestamp", json_string(now));
            ks_typed_order(next);
            ks_store_put(ks, def, known, next);
            free(ck);
            return;
        }
    }
    /* a new one: <name>.<UnixNano in hex>, unique */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long nano =
        (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
    char key[600], ev_name[400];
    for (;; nano++) {
        snprintf(ev_name, sizeof(ev_name), "%.300s.%llx", name, nano);
        ks_obj_key(key, sizeof(key), ns, ev_name);
        if (!ks_store_get(ks, def->key, key))
            break;
    }
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    const char *av = json_string_value(json_object_get(obj, "apiVersion"));
    json_t *involved = json_pack("{s:s}", "kind", ks_nz(kind));
    if (obj_ns)
        json_object_set_new(involved, "namespace", json_string(obj_ns));
    json_object_set_new(involved, "name", json_string(name));
    json_object_set_new(involved, "uid", json_string(uid));
    json_object_set_new(involved, "apiVersion", json_string(ks_nz(av)));
    json_object_set_new(involved, "resourceVersion",
                        json_string(ks_nz(meta_str(obj, "resourceVersion"))));
    char id[40];
    ks_uuid(id, sizeof(id));
    json_t *ev = json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:s},s:o,s:s,s:s,s:s}", "apiVersion", "v1",
                           "kind", "Event", "metadata", "name", ev_name, "namespace", ns, "uid", id,
                           "creationTimestamp", now, "involvedObject", involved, "reason", reason,
                           "message", message, "type", type);
    if (src->series) {
        /* tools/events: reportingController and instance, eventTime */
        json_object_set_new(ev, "source", json_object());
        json_object_set_new(ev, "firstTimestamp", json_null());
        json_object_set_new(ev, "lastTimestamp", json_null());
        json_object_set_new(ev, "eventTime", json_string(micro));
        json_object_set_new(ev, "action", json_string(ks_nz(src->action)));
        json_object_set_new(ev, "reportingComponent", json_string(src->component));
        json_object_set_new(ev, "reportingInstance", json_string(ks_nz(src->instance)));
    } else {
        json_t *source = json_pack("{s:s}", "component", src->component);
        if (src->host)
            json_object_set_new(source, "host", json_string(src->host));
        json_object_set_new(ev, "source", source);
        json_object_set_new(ev, "firstTimestamp", json_string(now));
        json_object_set_new(ev, "lastTimestamp", json_string(now));
        json_object_set_new(ev, "count", json_integer(1));
        json_object_set_new(ev, "eventTime", json_null());
        json_object_set_new(ev, "reportingComponent", json_string(src->component));
        json_object_set_new(ev, "reportingInstance", json_string(ks_nz(src->instance)));
    }
    ks_typed_order(ev);
    ks_store_put(ks, def, key, ev);
    json_object_set_new(ks->event_index, ck, json_string(key));
    free(ck);
}

void ks_events_stored(struct ks_server *ks, const char *key, bool removed)
{
    if (removed) {
        json_object_del(ks->event_due, key);
        return;
    }
    long long due = ks_mono_ms() + ks->event_ttl_ms;
    if (!ks->event_due)
        ks->event_due = json_object();
    json_object_set_new(ks->event_due, key, json_integer(due));
    if (ks->event_queue_head > 0 && ks->event_queue_head * 2 >= ks->event_queue_len) {
        /* compact: the expired front goes */
        memmove(ks->event_queue, ks->event_queue + ks->event_queue_head,
                (ks->event_queue_len - ks->event_queue_head) * sizeof(ks->event_queue[0]));
        ks->event_queue_len -= ks->event_queue_head;
        ks->event_queue_head = 0;
    }
    if (ks->event_queue_len == ks->event_queue_cap) {
        size_t cap = ks->event_queue_cap ? ks->event_queue_cap * 2 : 256;
        struct ks_event_due *q = realloc(ks->event_queue, cap * sizeof(*q));
        if (!q)
            abort();
        ks->event_queue = q;
        ks->event_queue_cap = cap;
    }
    ks->event_queue[ks->event_queue_len++] = (struct ks_event_due){ks_strdup(key), due};
}

long long ks_events_expire(struct ks_server *ks, long long now_ms)
{
    const struct ks_res *def = ks_res_by_key(ks, "events");
    while (ks->event_queue_head < ks->event_queue_len) {
        struct ks_event_due *e = &ks->event_queue[ks->event_queue_head];
        if (e->due > now_ms)
            return e->due;
        ks->event_queue_head++;
        /* only the Event's last write counts: an earlier one is stale */
        const json_t *due = json_object_get(ks->event_due, e->key);
        if (def && due && json_integer_value(due) == e->due)
            ks_store_remove(ks, def, e->key);
        free(e->key);
    }
    ks->event_queue_head = ks->event_queue_len = 0;
    return LLONG_MAX;
}
