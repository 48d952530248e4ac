/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Informer (see kop/informer.h).
 *
 * DESIGN
 * Threads: one per informer, running run(). Other threads only touch the
 * "state" members under inf->lock (stopping, synced, stats) and fire the
 * client cancel, which aborts a LIST page or a WATCH in flight.
 *
 * States of run():
 *   LIST   -> paged LIST, each page streamed (kop_client_list_stream):
 *             every item is decoded alone, transformed and stored as it
 *             arrives, so neither a page's bytes nor its tree are ever
 *             held (a page of 500 Services with 256 KiB annotations
 *             would be 128 MB of body and more as a tree); after the last
 *             page, entries the LIST did not show are deleted, the list
 *             resourceVersion is remembered, synced is set, go to WATCH.
 *             Failure: back off, LIST again (a partly applied list is
 *             completed by the next one).
 *   WATCH  -> stream events from rv. Clean end (server timeout, or
 *             kop's own limit a little after timeoutSeconds): WATCH again
 *             at once. 410/Expired: LIST (after a backoff when the watch
 *             expired at once, with no event: no LIST storm). ERROR event
 *             other than 410, 429 and 500: back off, LIST (client-go's
 *             reflector relists too). Anything else (transport error,
 *             idle timeout, garbage line, ERROR 429 or 500): back off,
 *             WATCH again from rv.
 * Every object passes ensure_type then the optional transform (prepare())
 * before it is stored or handed to a handler; metadata_only only changes
 * the Accept header of LIST and WATCH.
 * Invariants: the store is updated before a handler runs; handlers run
 * only on this thread; rv only moves forward with events and bookmarks
 * (never past an event that was not applied).
 */
#include "kop/informer.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kop/clock.h"
#include "kop/log.h"
#include "kop/store.h"
#include "kop/thread.h"
#include "kop/watch.h"

#define LOGGER "informer"

struct kop_informer {
    struct kop_client *client;
    struct kop_store *store;
    struct kop_resource res;
    char *group, *version, *resource;
    char *kind, *api_version, *ns, *label_selector, *field_selector, *name;
    long page_size;
    int64_t backoff_initial_ms, backoff_max_ms, backoff_reset_ms, idle_timeout_ms;
    int watch_min_s, watch_max_s;
    kop_informer_add_fn on_add;
    kop_informer_update_fn on_update;
    kop_informer_delete_fn on_delete;
    kop_informer_transform_fn transform;
    void *ud;
    bool metadata_only;

    struct kop_client_cancel *cancel;
    struct kop_watch_parser *parser;
    uint64_t rng;
    /* The resourceVersion to resume from: an opaque string of any length
     * (never cut; the stats keep a shortened copy for display), informer
     * thread only; NULL or "" when there is none. One buffer, grown when a
     * longer one comes: no allocation per watch event. */
    char *rv;
    size_t rv_cap;

    pthread_t thread;
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* CLOCK_MONOTONIC: synced, stopping */
    bool stopping;
    bool synced;
    struct kop_informer_stats stats;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t rnd(struct kop_informer *inf)
{
    /* xorshift64*: jitter only, no security meaning. */
    uint64_t x = inf->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    inf->rng = x;
    return x * UINT64_C(2685821657736338717);
}

static char *dup_opt(const char *s, bool *oom)
{
    if (!s || !*s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *oom = true;
    return d;
}

void kop_informer_free(struct kop_informer *inf)
{
    if (!inf)
        return;
    kop_informer_stop(inf);
    kop_client_cancel_free(inf->cancel);
    kop_watch_parser_free(inf->parser);
    free(inf->rv);
    free(inf->group);
    free(inf->version);
    free(inf->resource);
    free(inf->kind);
    free(inf->api_version);
    free(inf->ns);
    free(inf->label_selector);
    free(inf->field_selector);
    free(inf->name);
    pthread_cond_destroy(&inf->cond);
    pthread_mutex_destroy(&inf->lock);
    free(inf);
}

/*
 * metadata.managedFields is never decoded, in LIST items or watch events:
 * the store drops it anyway (kop_store_strip), it is often the larger part
 * of an object, and anyone who may write an object chooses its size and
 * shape: as a jansson tree, field paths cost many times their text
 * (docs/performance.md §4).
 */
static const char *const drop_managed_fields[] = {"metadata", "managedFields", NULL};

int kop_informer_new(const struct kop_informer_options *o, struct kop_informer **ret)
{
    assert(o);
    assert(o->client);
    assert(o->store);
    assert(o->kind);
    assert(o->resource.version);
    assert(o->resource.resource);
    assert(ret);
    if (!*o->kind)
        return -EINVAL;
    struct kop_informer *inf = calloc(1, sizeof(*inf));
    if (!inf)
        return -ENOMEM;
    if (kop_clock_cond_init(&inf->cond) != 0) {
        free(inf);
        return -ENOMEM;
    }
    pthread_mutex_init(&inf->lock, NULL);

    bool oom = false;
    inf->client = o->client;
    inf->store = o->store;
    inf->group = dup_opt(o->resource.group, &oom);
    inf->version = dup_opt(o->resource.version, &oom);
    inf->resource = dup_opt(o->resource.resource, &oom);
    inf->res = (struct kop_resource){.group = inf->group,
                                     .version = inf->version,
                                     .resource = inf->resource,
                                     .namespaced = o->resource.namespaced};
    inf->kind = dup_opt(o->kind, &oom);
    inf->ns = o->resource.namespaced ? dup_opt(o->namespace, &oom) : NULL;
    inf->label_selector = dup_opt(o->label_selector, &oom);
    inf->field_selector = dup_opt(o->field_selector, &oom);
    inf->name = dup_opt(o->name ? o->name : o->resource.resource, &oom);
    size_t n = (inf->group ? strlen(inf->group) : 0) + strlen(o->resource.version) + 2;
    inf->api_version = malloc(n);
    if (inf->api_version) {
        if (inf->group)
            snprintf(inf->api_version, n, "%s/%s", inf->group, o->resource.version);
        else
            snprintf(inf->api_version, n, "%s", o->resource.version);
    }
    inf->page_size = o->page_size > 0 ? o->page_size : 500;
    inf->backoff_initial_ms = o->backoff_initial_ms > 0 ? o->backoff_initial_ms : 800;
    inf->backoff_max_ms = o->backoff_max_ms > 0 ? o->backoff_max_ms : 30000;
    inf->backoff_reset_ms = o->backoff_reset_ms > 0 ? o->backoff_reset_ms : 120000;
    inf->idle_timeout_ms = o->idle_timeout_ms > 0 ? o->idle_timeout_ms : 300000;
    inf->watch_min_s = o->watch_timeout_min_s > 0 ? o->watch_timeout_min_s : 300;
    inf->watch_max_s = o->watch_timeout_max_s > 0 ? o->watch_timeout_max_s : 600;
    if (inf->watch_max_s < inf->watch_min_s)
        inf->watch_max_s = inf->watch_min_s;
    inf->on_add = o->on_add;
    inf->on_update = o->on_update;
    inf->on_delete = o->on_delete;
    inf->transform = o->transform;
    inf->ud = o->ud;
    inf->metadata_only = o->metadata_only;
    inf->cancel = kop_client_cancel_new();
    inf->parser = kop_watch_parser_new(0);
    if (inf->parser)
        kop_watch_parser_drop(inf->parser, drop_managed_fields);
    inf->rng = (uint64_t)now_ns() ^ (uint64_t)(uintptr_t)inf ^ UINT64_C(0x9e3779b97f4a7c15);
    if (!inf->rng)
        inf->rng = 1;
    if (oom || !inf->api_version || !inf->cancel || !inf->parser) {
        kop_informer_free(inf);
        return -ENOMEM;
    }
    *ret = inf;
    return 0;
}

static bool stopping(struct kop_informer *inf)
{
    pthread_mutex_lock(&inf->lock);
    bool s = inf->stopping;
    pthread_mutex_unlock(&inf->lock);
    return s;
}

static void stat_add(struct kop_informer *inf, unsigned long *field)
{
    pthread_mutex_lock(&inf->lock);
    (*field)++;
    pthread_mutex_unlock(&inf->lock);
}

/* Show the resume resourceVersion (shortened) in the stats. */
static void publish_rv(struct kop_informer *inf)
{
    pthread_mutex_lock(&inf->lock);
    snprintf(inf->stats.resource_version, sizeof(inf->stats.resource_version), "%s",
             inf->rv ? inf->rv : "");
    pthread_mutex_unlock(&inf->lock);
}

/* Remember rv (opaque: copied whole). -ENOMEM keeps the old one. */
static int set_rv(struct kop_informer *inf, const char *rv)
{
    if (!rv || !*rv)
        return 0;
    if (inf->rv && strcmp(inf->rv, rv) == 0)
        return 0;
    size_t n = strlen(rv) + 1;
    if (n > inf->rv_cap) {
        char *d = realloc(inf->rv, n);
        if (!d)
            return -ENOMEM;
        inf->rv = d;
        inf->rv_cap = n;
    }
    memcpy(inf->rv, rv, n);
    publish_rv(inf);
    return 0;
}

/* Sleep ms unless stopped. Returns false when stopping. */
static bool nap(struct kop_informer *inf, int64_t ms)
{
    int64_t end = now_ns() + ms * 1000000;
    struct timespec ts = {.tv_sec = end / 1000000000, .tv_nsec = end % 1000000000};
    pthread_mutex_lock(&inf->lock);
    while (!inf->stopping && now_ns() < end)
        pthread_cond_timedwait(&inf->cond, &inf->lock, &ts);
    bool ok = !inf->stopping;
    pthread_mutex_unlock(&inf->lock);
    return ok;
}

/* Add kind/apiVersion to list items of built-in types (they carry none),
 * so stored objects look the same whether they came from a LIST or a
 * watch event. obj is private to this thread. */
static void ensure_type(struct kop_informer *inf, json_t *obj)
{
    if (!json_object_get(obj, "kind"))
        json_object_set_new(obj, "kind", json_string(inf->kind));
    if (!json_object_get(obj, "apiVersion"))
        json_object_set_new(obj, "apiVersion", json_string(inf->api_version));
}

static const char *meta_str(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

/* The object to store for obj (@ref borrow, private to this thread):
 * kind/apiVersion filled in, then the transform. @ref new, or NULL when
 * the transform dropped it. */
static json_t *prepare(struct kop_informer *inf, json_t *obj)
{
    ensure_type(inf, obj);
    if (!inf->transform)
        return json_incref(obj);
    json_t *t = inf->transform(inf->ud, json_incref(obj));
    if (!t) {
        stat_add(inf, &inf->stats.dropped);
        kop_logf(KOP_LOG_DEBUG, LOGGER, "%s: transform dropped an object", inf->name);
    }
    return t;
}

/* Store obj (@ref borrow, private) and call add/update. */
static void apply_upsert(struct kop_informer *inf, json_t *obj)
{
    json_t *old = NULL, *cur = NULL;
    json_t *t = prepare(inf, obj);
    if (!t)
        return;
    int r = kop_store_put(inf->store, inf->kind, t, &old, &cur);
    if (r < 0) {
        kop_logf(KOP_LOG_WARN, LOGGER, "%s: cannot store object: %d", inf->name, r);
        return;
    }
    if (old) {
        if (inf->on_update)
            inf->on_update(inf->ud, old, cur);
    } else if (inf->on_add) {
        inf->on_add(inf->ud, cur);
    }
    json_decref(old);
    json_decref(cur);
}

static void apply_delete(struct kop_informer *inf, const char *ns, const char *name,
                         json_t *final_state)
{
    json_t *old = NULL;
    if (kop_store_delete(inf->store, inf->kind, ns, name, &old) < 0)
        return; /* never seen or already gone: no event */
    if (inf->on_delete) {
        json_t *t = final_state ? prepare(inf, final_state) : NULL;
        json_t *last = t ? kop_store_strip(t) : NULL;
        json_decref(t);
        inf->on_delete(inf->ud, last ? last : old);
        json_decref(last);
    }
    json_decref(old);
}

/* ---- LIST ---------------------------------------------------------------- */

/* One item of a LIST page, as it arrives (kop_client_list_stream: a page
 * is never held whole): store it when it changed, remember its key. */
struct list_ctx {
    struct kop_informer *inf;
    json_t *seen; /* keys the LIST showed */
};

static int apply_item(void *ud, json_t *item)
{
    struct list_ctx *lc = ud;
    struct kop_informer *inf = lc->inf;
    if (!json_is_object(item))
        return 0;
    const char *name = meta_str(item, "name");
    const char *ns = meta_str(item, "namespace");
    char key[1024];
    if (!name || kop_store_key(inf->kind, ns, name, key, sizeof(key)) < 0)
        return 0;
    if (json_object_set_new(lc->seen, key, json_true()) < 0)
        return -ENOMEM;
    /* Compare resourceVersions without decoding the stored object. */
    char orv[128];
    const char *nrv = meta_str(item, "resourceVersion");
    bool same = nrv && nrv[0] &&
                kop_store_resource_version_key(inf->store, key, orv, sizeof(orv)) == 0 &&
                strcmp(orv, nrv) == 0;
    if (!same)
        apply_upsert(inf, item);
    return 0;
}

/* After the last page: delete what the LIST did not show. */
static void remove_unseen(struct kop_informer *inf, json_t *seen)
{
    json_t *gone = kop_store_keys(inf->store, inf->kind, inf->ns);
    const char *key;
    json_t *v;
    json_object_foreach(gone, key, v)
    {
        if (json_object_get(seen, key))
            continue;
        json_t *old = kop_store_get_key(inf->store, key);
        if (old) {
            char *ns = NULL, *name = NULL;
            const char *ons = meta_str(old, "namespace");
            const char *oname = meta_str(old, "name");
            ns = ons ? strdup(ons) : NULL;
            name = oname ? strdup(oname) : NULL;
            json_decref(old);
            if (name)
                apply_delete(inf, ns, name, NULL);
            free(ns);
            free(name);
        }
    }
    json_decref(gone);
}

static int do_list(struct kop_informer *inf)
{
    int r = 0;
    json_t *seen = json_object(); /* keys the LIST showed */
    char *cont = NULL;
    char *list_rv = NULL;
    int restarts = 0;
    if (!seen)
        return -ENOMEM;
    for (;;) {
        struct kop_list_options lo = {.label_selector = inf->label_selector,
                                      .field_selector = inf->field_selector,
                                      .limit = inf->page_size,
                                      .continue_token = cont,
                                      .accept =
                                          inf->metadata_only ? KOP_INFORMER_ACCEPT_META_LIST : NULL,
                                      .drop = drop_managed_fields};
        json_t *page = NULL; /* the list's metadata only */
        struct kop_api_status st;
        struct list_ctx lc = {.inf = inf, .seen = seen};
        r = kop_client_list_stream(inf->client, &inf->res, inf->ns, &lo, apply_item, &lc,
                                   inf->cancel, &st, &page);
        if (r == -ESTALE && cont && restarts++ < 3) {
            /* The continue token expired: start the list over. */
            free(cont);
            cont = NULL;
            json_object_clear(seen);
            continue;
        }
        if (r < 0) {
            kop_logf(stopping(inf) ? KOP_LOG_DEBUG : KOP_LOG_WARN, LOGGER,
                     "%s: list failed: %d (HTTP %d %s: %s)", inf->name, r, st.code, st.reason,
                     st.message);
            goto out;
        }
        stat_add(inf, &inf->stats.pages);
        const char *prv = json_string_value(json_object_get(page, "resourceVersion"));
        if (prv && *prv) {
            free(list_rv);
            list_rv = strdup(prv);
            if (!list_rv) {
                json_decref(page);
                r = -ENOMEM;
                goto out;
            }
        }
        const char *next = json_string_value(json_object_get(page, "continue"));
        if (next && *next && cont && strcmp(next, cont) == 0) {
            /* The same token back would page for ever, as fast as the
             * server answers: an error (backoff, LIST again). */
            kop_logf(KOP_LOG_WARN, LOGGER,
                     "%s: list failed: the server answered a page with the continue token it "
                     "was given",
                     inf->name);
            json_decref(page);
            r = -EPROTO;
            goto out;
        }
        free(cont);
        cont = (next && *next) ? strdup(next) : NULL;
        bool more = next && *next;
        json_decref(page);
        if (more && !cont) {
            r = -ENOMEM;
            goto out;
        }
        if (!more)
            break;
        if (stopping(inf)) {
            r = -ECANCELED;
            goto out;
        }
    }
    remove_unseen(inf, seen);
    if (list_rv) {
        r = set_rv(inf, list_rv);
        if (r < 0)
            goto out;
    } else {
        /* No version given: watch without one (as client-go does with
         * ""), never from an older LIST's, long compacted maybe. */
        if (inf->rv)
            inf->rv[0] = '\0';
        publish_rv(inf);
    }
    pthread_mutex_lock(&inf->lock);
    inf->stats.lists++;
    if (!inf->synced) {
        inf->synced = true;
        pthread_cond_broadcast(&inf->cond);
    }
    pthread_mutex_unlock(&inf->lock);
out:
    free(cont);
    free(list_rv);
    json_decref(seen);
    return r;
}

/* ---- WATCH --------------------------------------------------------------- */

struct watch_ctx {
    struct kop_informer *inf;
    unsigned long events; /* applied: ERROR events do not count */
    bool relist;          /* an ERROR event that calls for a new LIST */
};

static int on_event(void *ud, const struct kop_watch_event *ev)
{
    struct watch_ctx *w = ud;
    struct kop_informer *inf = w->inf;
    if (ev->type != KOP_WATCH_ERROR)
        w->events++;
    switch (ev->type) {
    case KOP_WATCH_ADDED:
    case KOP_WATCH_MODIFIED:
        if (!meta_str(ev->object, "name"))
            return -EBADMSG;
        /* The event's object is private to this thread (just decoded). */
        apply_upsert(inf, ev->object);
        break;
    case KOP_WATCH_DELETED: {
        const char *name = meta_str(ev->object, "name");
        if (!name)
            return -EBADMSG;
        apply_delete(inf, meta_str(ev->object, "namespace"), name, ev->object);
        break;
    }
    case KOP_WATCH_BOOKMARK:
        break;
    case KOP_WATCH_ERROR:
        kop_logf(KOP_LOG_INFO, LOGGER, "%s: watch error event: %d %s: %s", inf->name, ev->code,
                 ev->reason ? ev->reason : "", ev->message ? ev->message : "");
        if (ev->code == 410 || (ev->reason && strcmp(ev->reason, "Expired") == 0) ||
            (ev->reason && strcmp(ev->reason, "Gone") == 0) ||
            (ev->message && strstr(ev->message, "too old resource version")))
            return -ESTALE;
        /* As client-go's reflector: a 429 or an internal error resumes the
         * watch from rv (after a backoff); any other error means the watch
         * from rv is not to be trusted, so LIST again (after a backoff). */
        if (ev->code == 429)
            return -EAGAIN;
        if (ev->code != 500)
            w->relist = true;
        return -EPROTO;
    }
    /* Not moving rv past an applied event would replay it; that is
     * harmless, an ENOMEM here is not worth ending the watch for. */
    (void)set_rv(inf, ev->resource_version);
    return 0;
}

static int on_data(void *ud, const char *data, size_t len)
{
    struct watch_ctx *w = ud;
    return kop_watch_parser_feed(w->inf->parser, data, len, on_event, w);
}

static int do_watch(struct kop_informer *inf, unsigned long *ret_events, bool *ret_relist)
{
    char path[8192];
    int r = kop_client_path(&inf->res, inf->ns, NULL, NULL, path, sizeof(path));
    if (r < 0)
        return r;
    int span = inf->watch_max_s - inf->watch_min_s + 1;
    int tmo_s = inf->watch_min_s + (int)(rnd(inf) % (uint64_t)span);
    char tmo[32];
    snprintf(tmo, sizeof(tmo), "%d", tmo_s);
    /* The server ends the watch after timeoutSeconds; kop ends it itself a
     * little later (10% + 1 s), so that a server or proxy that keeps a
     * lively stream open forever cannot pin the informer to it. */
    int64_t limit_ms = (int64_t)tmo_s * 1100 + 1000;
    r = kop_client_query_add(path, sizeof(path), "watch", "true");
    if (r == 0 && inf->rv && inf->rv[0])
        r = kop_client_query_add(path, sizeof(path), "resourceVersion", inf->rv);
    if (r == 0)
        r = kop_client_query_add(path, sizeof(path), "allowWatchBookmarks", "true");
    if (r == 0)
        r = kop_client_query_add(path, sizeof(path), "timeoutSeconds", tmo);
    if (r == 0 && inf->label_selector)
        r = kop_client_query_add(path, sizeof(path), "labelSelector", inf->label_selector);
    if (r == 0 && inf->field_selector)
        r = kop_client_query_add(path, sizeof(path), "fieldSelector", inf->field_selector);
    if (r < 0)
        return r;
    stat_add(inf, &inf->stats.watches);
    kop_watch_parser_reset(inf->parser);
    struct watch_ctx w = {.inf = inf};
    struct kop_api_status st;
    r = kop_client_watch_limit(inf->client, path,
                               inf->metadata_only ? KOP_INFORMER_ACCEPT_META_WATCH : NULL, on_data,
                               &w, inf->cancel, inf->idle_timeout_ms, limit_ms, &st);
    if (r == -ETIME) {
        /* Past its time: a clean end, as when the server closes it. An
         * unfinished line is dropped; the next watch resumes from rv. */
        kop_logf(KOP_LOG_INFO, LOGGER, "%s: the server kept the watch open past %ss; restarting it",
                 inf->name, tmo);
        r = 0;
    } else if (r == 0) {
        r = kop_watch_parser_finish(inf->parser, on_event, &w);
    }
    *ret_events = w.events;
    *ret_relist = w.relist;
    if (r < 0 && r != -ECANCELED)
        kop_logf(r == -ESTALE ? KOP_LOG_INFO : KOP_LOG_WARN, LOGGER,
                 "%s: watch ended: %d (HTTP %d %s: %s)", inf->name, r, st.code, st.reason,
                 st.message);
    return r;
}

/* ---- thread -------------------------------------------------------------- */

static int64_t jittered(struct kop_informer *inf, int64_t ms)
{
    /* +-20% */
    int64_t j = ms / 5;
    if (j <= 0)
        return ms;
    return ms - j + (int64_t)(rnd(inf) % (uint64_t)(2 * j + 1));
}

static void *run(void *arg)
{
    struct kop_informer *inf = arg;
    bool need_list = true;
    int64_t backoff = inf->backoff_initial_ms;
    while (!stopping(inf)) {
        if (need_list) {
            int r = do_list(inf);
            if (r == 0) {
                need_list = false;
            } else {
                if (stopping(inf))
                    break;
                stat_add(inf, &inf->stats.errors);
                nap(inf, jittered(inf, backoff));
                backoff = backoff * 2 > inf->backoff_max_ms ? inf->backoff_max_ms : backoff * 2;
                continue;
            }
        }
        int64_t start = now_ns();
        unsigned long events = 0;
        bool relist = false;
        int r = do_watch(inf, &events, &relist);
        if (stopping(inf))
            break;
        int64_t lasted_ms = (now_ns() - start) / 1000000;
        if (lasted_ms >= inf->backoff_reset_ms)
            backoff = inf->backoff_initial_ms;
        if (r == -ESTALE) {
            need_list = true;
            /* Expired right away again (no progress since the LIST that
             * gave this rv): relisting at once would be a LIST storm. Back
             * off as client-go's reflector does between ListAndWatch runs. */
            if (events == 0 && lasted_ms < 1000) {
                stat_add(inf, &inf->stats.errors);
                nap(inf, jittered(inf, backoff));
                backoff = backoff * 2 > inf->backoff_max_ms ? inf->backoff_max_ms : backoff * 2;
            }
            continue;
        }
        /* A clean end after a useful watch (server timeout): resume now. */
        if (r == 0 && (events > 0 || lasted_ms >= 1000))
            continue;
        if (relist)
            need_list = true;
        stat_add(inf, &inf->stats.errors);
        nap(inf, jittered(inf, backoff));
        backoff = backoff * 2 > inf->backoff_max_ms ? inf->backoff_max_ms : backoff * 2;
    }
    return NULL;
}

int kop_informer_start(struct kop_informer *inf)
{
    assert(inf);
    if (inf->started)
        return -EALREADY;
    int r = kop_thread_start(&inf->thread, run, inf, "inf-%s", inf->name ? inf->name : "");
    if (r < 0)
        return r;
    inf->started = true;
    kop_logf(KOP_LOG_DEBUG, LOGGER, "%s: started", inf->name);
    return 0;
}

void kop_informer_stop(struct kop_informer *inf)
{
    if (!inf)
        return;
    pthread_mutex_lock(&inf->lock);
    inf->stopping = true;
    pthread_cond_broadcast(&inf->cond);
    pthread_mutex_unlock(&inf->lock);
    kop_client_cancel_fire(inf->cancel);
    if (inf->started) {
        pthread_join(inf->thread, NULL);
        inf->started = false;
    }
}

bool kop_informer_has_synced(struct kop_informer *inf)
{
    assert(inf);
    pthread_mutex_lock(&inf->lock);
    bool s = inf->synced;
    pthread_mutex_unlock(&inf->lock);
    return s;
}

int kop_informer_wait_synced(struct kop_informer *inf, int64_t timeout_ms)
{
    assert(inf);
    int64_t end = now_ns() + timeout_ms * 1000000;
    struct timespec ts = {.tv_sec = end / 1000000000, .tv_nsec = end % 1000000000};
    int r = 0;
    pthread_mutex_lock(&inf->lock);
    while (!inf->synced && !inf->stopping) {
        if (now_ns() >= end) {
            r = -ETIMEDOUT;
            break;
        }
        pthread_cond_timedwait(&inf->cond, &inf->lock, &ts);
    }
    if (r == 0 && !inf->synced)
        r = -ECANCELED;
    pthread_mutex_unlock(&inf->lock);
    return r;
}

void kop_informer_stats(struct kop_informer *inf, struct kop_informer_stats *ret)
{
    assert(inf);
    assert(ret);
    pthread_mutex_lock(&inf->lock);
    *ret = inf->stats;
    pthread_mutex_unlock(&inf->lock);
}
