/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim watch streams: a chunked HTTP response whose body is produced by
 * libmicrohttpd's content-reader callback on the connection's own thread.
 * The callback blocks on ks->changed until an event, a bookmark, the
 * timeout, a dropped-watch fault or shutdown. One JSON event per line:
 * ADDED / MODIFIED / DELETED / BOOKMARK / ERROR, as the apiserver frames
 * them. Label/field selectors turn transitions into ADDED (enters) and
 * DELETED (leaves). A start resourceVersion older than the retained
 * history gets HTTP 200 and an ERROR event with a 410 Expired Status.
 * Event objects are Table rows or PartialObjectMetadata when the Accept
 * header asks for them (table.c, partial.c); ERROR Status objects never.
 */
#include "kubesim.h"

#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct watcher {
    struct ks_server *ks;
    char *group;
    char *plural;
    char *res_key;
    char *version;
    char *ns;
    struct ks_selector *labels;
    struct ks_selector *fields;
    uint64_t last_rv;
    uint64_t epoch;
    bool bookmarks;
    bool initial_end; /* sendInitialEvents: bookmark after the initial ADDEDs */
    long long deadline_ms;
    long long next_bookmark_ms;
    json_t *initial; /* objects still to send as ADDED */
    uint64_t initial_rv;
    char *buf;
    size_t len, off;
    bool finished;
    int fd;
    const char *table;   /* Table version asked for (static string) or NULL */
    const char *partial; /* PartialObjectMetadata version (static) or NULL */
    enum ks_include include;
    bool table_headers; /* columnDefinitions already sent */
};

static void watcher_free(void *cls)
{
    struct watcher *w = cls;
    if (!w)
        return;
    free(w->group);
    free(w->plural);
    free(w->res_key);
    free(w->version);
    free(w->ns);
    ks_selector_free(w->labels);
    ks_selector_free(w->fields);
    json_decref(w->initial);
    free(w->buf);
    free(w);
}

static void out_append(struct watcher *w, const char *s, size_t n)
{
    char *nb = realloc(w->buf, w->len + n + 1);
    if (!nb)
        abort();
    w->buf = nb;
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

static void emit(struct watcher *w, const struct ks_res *def, const char *type, const json_t *obj)
{
    if (w->partial) {
        /* A struct: field order, not sorted keys. */
        json_t *p = ks_partial_object(obj, w->partial);
        char *txt = ks_dump(p, false, NULL);
        json_decref(p);
        if (!txt)
            abort();
        char *line = ks_printf("{\"type\":\"%s\",\"object\":%s}\n", type, txt);
        out_append(w, line, strlen(line));
        free(line);
        free(txt);
        return;
    }
    char *txt = ks_dump(obj, !def->typed, NULL);
    if (!txt)
        abort();
    char *line = ks_printf("{\"type\":\"%s\",\"object\":%s}\n", type, txt);
    out_append(w, line, strlen(line));
    free(line);
    free(txt);
}

static void emit_error(struct watcher *w, int code, const char *reason, const char *msg)
{
    size_t n = 0;
    char *st = ks_status_body(code, "Failure", reason, msg, NULL, &n);
    st[n - 1] = '\0'; /* drop the newline inside the event */
    char *line = ks_printf("{\"type\":\"ERROR\",\"object\":%s}\n", st);
    out_append(w, line, strlen(line));
    free(line);
    free(st);
    w->finished = true;
}

static void emit_bookmark(struct watcher *w, const struct ks_res *def, uint64_t rv, bool end)
{
    char rvs[32];
    snprintf(rvs, sizeof(rvs), "%llu", (unsigned long long)rv);
    json_t *o = json_object();
    char *av = ks_api_version(def->group, w->version);
    json_object_set_new(o, "kind", json_string(def->kind));
    json_object_set_new(o, "apiVersion", json_string(av));
    free(av);
    json_t *md = json_pack("{s:s}", "resourceVersion", rvs);
    if (end)
        json_object_set_new(md, "annotations",
                            json_pack("{s:s}", "k8s.io/initial-events-end", "true"));
    json_object_set_new(o, "metadata", md);
    if (def->typed && def->bookmark_extra) {
        json_t *extra = json_loads(def->bookmark_extra, 0, NULL);
        json_object_update(o, extra);
        json_decref(extra);
    }
    emit(w, def, "BOOKMARK", o);
    json_decref(o);
}

/* Convert and write a batch of (type, object) pairs. */
static void emit_batch(struct watcher *w, const struct ks_res *def, json_t *types, json_t *objs)
{
    json_t *conv = NULL;
    char *err = NULL;
    if (ks_convert(w->ks, def, objs, w->version, &conv, &err) != 0) {
        emit_error(w, 500, "InternalError", err);
        free(err);
        return;
    }
    size_t i;
    json_t *o;
    json_array_foreach(conv, i, o)
    {
        ks_present(def, w->version, o);
        const char *type = json_string_value(json_array_get(types, i));
        if (w->table) {
            /* Each event carries a one-row Table; only the first has headers. */
            json_t *one = json_pack("[O]", o);
            json_t *md = json_pack("{s:s}", "resourceVersion",
                                   ks_nz(json_string_value(json_object_get(
                                       json_object_get(o, "metadata"), "resourceVersion"))));
            json_t *t =
                ks_table_build(def, w->version, one, md, w->table, w->include, !w->table_headers);
            w->table_headers = true;
            char *txt = ks_dump(t, false, NULL);
            if (!txt)
                abort();
            char *line = ks_printf("{\"type\":\"%s\",\"object\":%s}\n", type, txt);
            out_append(w, line, strlen(line));
            free(line);
            free(txt);
            json_decref(t);
            json_decref(md);
            json_decref(one);
            continue;
        }
        emit(w, def, type, o);
    }
    json_decref(conv);
}

static bool matches(const struct watcher *w, const json_t *obj)
{
    if (!obj)
        return false;
    if (w->ns) {
        const char *ns =
            json_string_value(json_object_get(json_object_get(obj, "metadata"), "namespace"));
        if (!ns || strcmp(ns, w->ns) != 0)
            return false;
    }
    return ks_selector_match(w->labels, obj) && ks_selector_match(w->fields, obj);
}

static bool client_gone(const struct watcher *w)
{
    if (w->fd < 0)
        return false;
    struct pollfd p = {.fd = w->fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) <= 0)
        return false;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

/* Produce more output; returns false when the stream must end with error. */
static bool produce(struct watcher *w)
{
    struct ks_server *ks = w->ks;
    if (json_array_size(w->initial)) {
        const struct ks_res *def;
        pthread_mutex_lock(&ks->lock);
        def = ks_res_find(ks, w->group, w->plural);
        pthread_mutex_unlock(&ks->lock);
        if (!def) {
            w->finished = true;
            return true;
        }
        json_t *types = json_array();
        json_t *objs = json_array();
        while (json_array_size(w->initial) && json_array_size(objs) < 200) {
            json_array_append(objs, json_array_get(w->initial, 0));
            json_array_append_new(types, json_string("ADDED"));
            json_array_remove(w->initial, 0);
        }
        emit_batch(w, def, types, objs);
        json_decref(types);
        json_decref(objs);
        if (json_array_size(w->initial) == 0 && w->initial_end && !w->finished)
            emit_bookmark(w, def, w->initial_rv, true);
        return true;
    }

    pthread_mutex_lock(&ks->lock);
    for (;;) {
        if (ks->stopping || ks->drop_epoch != w->epoch) {
            pthread_mutex_unlock(&ks->lock);
            return false;
        }
        const struct ks_res *def = ks_res_find(ks, w->group, w->plural);
        if (!def || !ks_res_version(def, w->version)) {
            w->finished = true;
            pthread_mutex_unlock(&ks->lock);
            return true;
        }
        if (w->last_rv < ks->hist_floor) {
            char *msg =
                ks_printf("too old resource version: %llu (%llu)", (unsigned long long)w->last_rv,
                          (unsigned long long)ks->hist_floor + 1);
            pthread_mutex_unlock(&ks->lock);
            emit_error(w, 410, "Expired", msg);
            free(msg);
            return true;
        }
        json_t *types = json_array();
        json_t *objs = json_array();
        size_t scanned = 0;
        for (uint64_t i = w->last_rv - ks->hist_floor; i < ks->hist_len && scanned < 1000;
             i++, scanned++) {
            const struct ks_event *e = &ks->hist[(ks->hist_head + i) % ks->history_cap];
            w->last_rv = e->rv;
            if (strcmp(e->key, w->res_key) != 0)
                continue;
            bool now_in = matches(w, e->obj);
            bool was_in = e->old && matches(w, e->old);
            const char *type = NULL;
            if (e->type == KS_DELETED)
                type = (now_in || was_in) ? "DELETED" : NULL;
            else if (now_in && was_in)
                type = "MODIFIED";
            else if (now_in)
                type = "ADDED";
            else if (was_in)
                type = "DELETED";
            if (!type)
                continue;
            json_array_append_new(types, json_string(type));
            json_array_append(objs, e->obj);
        }
        if (json_array_size(objs)) {
            pthread_mutex_unlock(&ks->lock);
            emit_batch(w, def, types, objs);
            json_decref(types);
            json_decref(objs);
            return true;
        }
        json_decref(types);
        json_decref(objs);
        if (scanned)
            continue;
        if (w->last_rv < ks->rv)
            w->last_rv = ks->rv;
        long long now = ks_mono_ms();
        if (w->deadline_ms && now >= w->deadline_ms) {
            w->finished = true;
            pthread_mutex_unlock(&ks->lock);
            return true;
        }
        if (w->bookmarks && now >= w->next_bookmark_ms) {
            w->next_bookmark_ms = now + ks->bookmark_ms;
            uint64_t rv = w->last_rv;
            pthread_mutex_unlock(&ks->lock);
            emit_bookmark(w, def, rv, false);
            return true;
        }
        if (client_gone(w)) {
            pthread_mutex_unlock(&ks->lock);
            return false;
        }
        long long wake = now + 500;
        if (w->deadline_ms && w->deadline_ms < wake)
            wake = w->deadline_ms;
        if (w->bookmarks && w->next_bookmark_ms < wake)
            wake = w->next_bookmark_ms;
        /* Condition waits use CLOCK_REALTIME here; convert the delay. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long long delay = wake - now;
        ts.tv_sec += delay / 1000;
        ts.tv_nsec += (delay % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&ks->changed, &ks->lock, &ts);
    }
}

static ssize_t watch_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct watcher *w = cls;
    (void)pos;
    for (;;) {
        if (w->off < w->len) {
            size_t n = w->len - w->off;
            if (n > max)
                n = max;
            memcpy(buf, w->buf + w->off, n);
            w->off += n;
            if (w->off == w->len) {
                w->off = 0;
                w->len = 0;
            }
            return (ssize_t)n;
        }
        if (w->finished)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (!produce(w))
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
}

void ks_watch_start(struct ks_api_req *q, const struct ks_res *def, struct ks_reply *r)
{
    struct ks_server *ks = q->ks;
    struct watcher *w = calloc(1, sizeof(*w));
    char *err = NULL;
    if (!w)
        abort();
    w->ks = ks;
    w->group = ks_strdup(def->group);
    w->plural = ks_strdup(def->plural);
    w->res_key = ks_strdup(def->key);
    w->version = ks_strdup(q->version);
    w->ns = q->ns ? ks_strdup(q->ns) : NULL;
    w->fd = -1;
    const char *accept = MHD_lookup_connection_value(q->conn, MHD_HEADER_KIND, "Accept");
    w->table = ks_table_accept(accept);
    if (!w->table) {
        const char *pv = NULL;
        enum ks_partial pk = ks_partial_accept(accept, &pv);
        if (pk == KS_PARTIAL_LIST) {
            /* Every event object is a single object, never a list. */
            char *msg = ks_partial_mismatch(def, pk);
            ks_reply_status(r, 406, "NotAcceptable", msg, NULL);
            free(msg);
            watcher_free(w);
            return;
        }
        if (pk == KS_PARTIAL_OBJECT)
            w->partial = pv;
    }
    w->include = ks_table_include(ks_query(q, "includeObject"));
    if (ks_selector_parse(ks_query(q, "labelSelector"), false, &w->labels, &err) != 0 ||
        ks_selector_parse(ks_query(q, "fieldSelector"), true, &w->fields, &err) != 0 ||
        ks_selector_bind_fields(def, w->fields, &err) != 0) {
        ks_reply_status(r, 400, "BadRequest", err, NULL);
        free(err);
        watcher_free(w);
        return;
    }
    if (ks_list_options_check(q, true, r) != 0) {
        watcher_free(w);
        return;
    }
    /* A watch on a single object: /.../name?watch=1 means metadata.name=name. */
    if (q->name) {
        char *sel = ks_printf("metadata.name=%s", q->name);
        struct ks_selector *s = NULL;
        if (ks_selector_parse(sel, true, &s, &err) == 0 && !ks_query(q, "fieldSelector")) {
            ks_selector_free(w->fields);
            w->fields = s;
        } else {
            ks_selector_free(s);
            free(err);
        }
        free(sel);
    }
    w->bookmarks = ks_query_bool(q, "allowWatchBookmarks");
    bool send_initial = ks_query_bool(q, "sendInitialEvents");
    const char *rvs = ks_query(q, "resourceVersion");
    long long tos = 0;
    char *bad = NULL;
    if (ks_query_int(q, "timeoutSeconds", 1800, &tos, &bad) < 0) {
        ks_reply_status(r, 400, "BadRequest", bad, NULL);
        free(bad);
        watcher_free(w);
        return;
    }
    long timeout = tos >= 0 ? (long)tos : 1800;
    long long now = ks_mono_ms();
    w->deadline_ms = timeout > 0 ? now + timeout * 1000 : 0;
    w->next_bookmark_ms = now + ks->bookmark_ms;

    pthread_mutex_lock(&ks->lock);
    w->epoch = ks->drop_epoch;
    bool initial = send_initial || !rvs || !*rvs || strcmp(rvs, "0") == 0;
    if (initial) {
        w->initial = json_array();
        const char *key;
        json_t *obj;
        json_object_foreach(ks_store_map(ks, def->key), key, obj)
        {
            if (matches(w, obj))
                json_array_append(w->initial, obj);
        }
        w->last_rv = ks->rv;
        w->initial_rv = ks->rv;
        w->initial_end = send_initial && w->bookmarks;
    } else {
        char *end = NULL;
        unsigned long long v = strtoull(rvs, &end, 10);
        if (!end || *end) {
            pthread_mutex_unlock(&ks->lock);
            char *msg = ks_printf("resourceVersion: Invalid value: \"%s\": must be a valid "
                                  "resourceVersion",
                                  rvs);
            ks_reply_status(r, 400, "BadRequest", msg, NULL);
            free(msg);
            watcher_free(w);
            return;
        }
        w->last_rv = v > ks->rv ? ks->rv : v;
    }
    pthread_mutex_unlock(&ks->lock);

    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(q->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci)
        w->fd = ci->connect_fd;
    r->stream =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32 * 1024, watch_read, w, watcher_free);
    if (!r->stream) {
        watcher_free(w);
        ks_reply_status(r, 500, "InternalError", "Internal error occurred: watch", NULL);
        return;
    }
    r->code = 200;
    r->content_type = "application/json";
}
