/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/v1 Event recorder (see kop/events.h).
 *
 * Two halves. The cache is pure: a hash table plus an LRU list of recent
 * events keyed by (involvedObject apiVersion/kind/namespace/name/uid,
 * type, reason, message), each holding the server-side Event name, its
 * count, firstTimestamp and when it was last seen. The recorder decides
 * and builds the JSON under its lock (so two threads recording the same
 * event queue the create before the patch), appends a job to a bounded
 * FIFO, and one sender thread writes the jobs in order through the API
 * client. kop_events_free() fires the client's cancel so a slow write
 * does not hold up shutdown.
 */
#include "kop/events.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kop/client.h"
#include "kop/clock.h"
#include "kop/log.h"
#include "kop/thread.h"

#define LOGGER "events"
#define DEFAULT_CACHE 4096
#define DEFAULT_QUEUE 256
#define DEFAULT_WINDOW_NS (600 * KOP_NSEC_PER_SEC)
/* Room for ".%016x" in a 253-character name. */
#define NAME_PREFIX_MAX (253 - 17)

const char *kop_event_type_name(enum kop_event_type type)
{
    return type == KOP_EVENT_WARNING ? "Warning" : "Normal";
}

const char *kop_event_namespace(const struct kop_event_ref *ref)
{
    return ref && ref->namespace && ref->namespace[0] ? ref->namespace : "default";
}

/* Length of msg cut to KOP_EVENT_MESSAGE_MAX bytes without splitting a
 * UTF-8 sequence. */
static size_t message_len(const char *msg)
{
    size_t n = strnlen(msg, KOP_EVENT_MESSAGE_MAX + 1);
    if (n <= KOP_EVENT_MESSAGE_MAX)
        return n;
    n = KOP_EVENT_MESSAGE_MAX;
    while (n > 0 && ((unsigned char)msg[n] & 0xc0) == 0x80)
        n--;
    return n;
}

/* ---- the cache ------------------------------------------------------------ */

struct entry {
    struct entry *hnext;       /* hash chain */
    struct entry *prev, *next; /* LRU: head is the most recent */
    uint64_t hash;
    int64_t last_mono_ns;
    int64_t first_wall_ns;
    int count;
    char name[254];
    char key[];
};

struct kop_event_cache {
    struct entry **buckets;
    size_t nbuckets;
    size_t len, capacity;
    struct entry *head, *tail;
    int64_t window_ns;
    int64_t last_stamp; /* name suffixes strictly increase */
};

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = UINT64_C(14695981039346656037); /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= UINT64_C(1099511628211);
    }
    return h;
}

int kop_event_cache_new(size_t capacity, int64_t window_ns, struct kop_event_cache **ret)
{
    assert(ret);
    struct kop_event_cache *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->capacity = capacity ? capacity : DEFAULT_CACHE;
    c->window_ns = window_ns > 0 ? window_ns : DEFAULT_WINDOW_NS;
    /* Power of two, at least the capacity: chains stay short without
     * ever growing. */
    c->nbuckets = 16;
    while (c->nbuckets < c->capacity && c->nbuckets < ((size_t)1 << 30))
        c->nbuckets *= 2;
    c->buckets = calloc(c->nbuckets, sizeof(*c->buckets));
    if (!c->buckets) {
        free(c);
        return -ENOMEM;
    }
    c->last_stamp = INT64_MIN;
    *ret = c;
    return 0;
}

void kop_event_cache_free(struct kop_event_cache *c)
{
    if (!c)
        return;
    struct entry *e = c->head;
    while (e) {
        struct entry *next = e->next;
        free(e);
        e = next;
    }
    free(c->buckets);
    free(c);
}

size_t kop_event_cache_len(const struct kop_event_cache *c)
{
    assert(c);
    return c->len;
}

static void lru_unlink(struct kop_event_cache *c, struct entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        c->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        c->tail = e->prev;
    e->prev = e->next = NULL;
}

static void lru_push_front(struct kop_event_cache *c, struct entry *e)
{
    e->prev = NULL;
    e->next = c->head;
    if (c->head)
        c->head->prev = e;
    c->head = e;
    if (!c->tail)
        c->tail = e;
}

static void hash_unlink(struct kop_event_cache *c, struct entry *e)
{
    for (struct entry **p = &c->buckets[e->hash & (c->nbuckets - 1)]; *p; p = &(*p)->hnext) {
        if (*p == e) {
            *p = e->hnext;
            return;
        }
    }
}

/* "len:field|" for each field: unambiguous whatever the fields hold. */
static char *make_key(const struct kop_event_ref *ref, enum kop_event_type type, const char *reason,
                      const char *message, size_t mlen, size_t *ret_len)
{
    const char *f[] = {ref->api_version,          ref->kind, ref->namespace, ref->name, ref->uid,
                       kop_event_type_name(type), reason};
    size_t n = sizeof(f) / sizeof(f[0]);
    size_t total = mlen + 24;
    for (size_t i = 0; i < n; i++)
        total += (f[i] ? strlen(f[i]) : 0) + 24;
    char *k = malloc(total);
    if (!k)
        return NULL;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const char *s = f[i] ? f[i] : "";
        off += (size_t)snprintf(k + off, total - off, "%zu:%s|", strlen(s), s);
    }
    off += (size_t)snprintf(k + off, total - off, "%zu:%.*s", mlen, (int)mlen, message);
    *ret_len = off;
    return k;
}

static void new_name(struct kop_event_cache *c, const char *involved, int64_t wall_ns, char *out,
                     size_t len)
{
    int64_t stamp = wall_ns > c->last_stamp ? wall_ns : c->last_stamp + 1;
    c->last_stamp = stamp;
    snprintf(out, len, "%.*s.%016llx", NAME_PREFIX_MAX, involved, (unsigned long long)stamp);
}

int kop_event_cache_observe(struct kop_event_cache *c, const struct kop_event_ref *ref,
                            enum kop_event_type type, const char *reason, const char *message,
                            int64_t now_ns, int64_t wall_ns, struct kop_event_decision *ret)
{
    assert(c);
    assert(ref);
    assert(reason);
    assert(message);
    assert(ret);
    if (!ref->name || !ref->name[0])
        return -EINVAL;
    size_t mlen = message_len(message);
    size_t klen = 0;
    char *key = make_key(ref, type, reason, message, mlen, &klen);
    if (!key)
        return -ENOMEM;
    uint64_t h = hash_bytes(key, klen);
    struct entry *e = c->buckets[h & (c->nbuckets - 1)];
    while (e && !(e->hash == h && strcmp(e->key, key) == 0))
        e = e->hnext;

    struct kop_event_decision d = {.last_wall_ns = wall_ns};
    if (e) {
        lru_unlink(c, e);
        if (now_ns - e->last_mono_ns <= c->window_ns) {
            e->count = e->count < INT32_MAX ? e->count + 1 : e->count;
            d.patch = true;
        } else {
            /* Seen too long ago: a new Event, as if never seen. */
            e->count = 1;
            e->first_wall_ns = wall_ns;
            new_name(c, ref->name, wall_ns, e->name, sizeof(e->name));
        }
        e->last_mono_ns = now_ns;
        lru_push_front(c, e);
        free(key);
    } else {
        e = calloc(1, sizeof(*e) + klen + 1);
        if (!e) {
            free(key);
            return -ENOMEM;
        }
        memcpy(e->key, key, klen + 1);
        free(key);
        e->hash = h;
        e->count = 1;
        e->first_wall_ns = wall_ns;
        e->last_mono_ns = now_ns;
        new_name(c, ref->name, wall_ns, e->name, sizeof(e->name));
        e->hnext = c->buckets[h & (c->nbuckets - 1)];
        c->buckets[h & (c->nbuckets - 1)] = e;
        lru_push_front(c, e);
        c->len++;
        if (c->len > c->capacity) {
            struct entry *old = c->tail;
            lru_unlink(c, old);
            hash_unlink(c, old);
            free(old);
            c->len--;
        }
    }
    d.count = e->count;
    d.first_wall_ns = e->first_wall_ns;
    memcpy(d.name, e->name, sizeof(d.name));
    *ret = d;
    return 0;
}

/* ---- building the objects ------------------------------------------------ */

/* Set key to a string unless s is NULL or empty. False on failure. */
static bool set_opt_str(json_t *o, const char *key, const char *s)
{
    if (!s || !s[0])
        return true;
    return json_object_set_new(o, key, json_string(s)) == 0;
}

static json_t *timestamp(int64_t wall_ns)
{
    char buf[32];
    return json_string(kop_clock_rfc3339(wall_ns, buf, sizeof(buf)));
}

json_t *kop_event_build(const struct kop_event_ref *ref, enum kop_event_type type,
                        const char *reason, const char *message, const struct kop_event_decision *d,
                        const char *component, const char *instance)
{
    assert(ref);
    assert(reason);
    assert(message);
    assert(d);
    if (!component)
        component = program_invocation_short_name;
    if (!instance)
        instance = "";
    json_t *ev = json_object();
    json_t *meta = json_object();
    json_t *inv = json_object();
    json_t *src = json_object();
    bool ok = ev && meta && inv && src;
    if (!ok)
        goto out;
    ok &= json_object_set_new(meta, "name", json_string(d->name)) == 0;
    ok &= json_object_set_new(meta, "namespace", json_string(kop_event_namespace(ref))) == 0;
    ok &= set_opt_str(inv, "kind", ref->kind);
    ok &= set_opt_str(inv, "namespace", ref->namespace);
    ok &= set_opt_str(inv, "name", ref->name);
    ok &= set_opt_str(inv, "uid", ref->uid);
    ok &= set_opt_str(inv, "apiVersion", ref->api_version);
    ok &= set_opt_str(inv, "resourceVersion", ref->resource_version);
    ok &= json_object_set_new(src, "component", json_string(component)) == 0;
    ok &= set_opt_str(src, "host", instance);

    ok &= json_object_set_new(ev, "kind", json_string("Event")) == 0;
    ok &= json_object_set_new(ev, "apiVersion", json_string("v1")) == 0;
    ok &= json_object_set_new(ev, "metadata", meta) == 0;
    meta = NULL;
    ok &= json_object_set_new(ev, "involvedObject", inv) == 0;
    inv = NULL;
    ok &= json_object_set_new(ev, "reason", json_string(reason)) == 0;
    ok &= json_object_set_new(ev, "message", json_stringn(message, message_len(message))) == 0;
    ok &= json_object_set_new(ev, "source", src) == 0;
    src = NULL;
    ok &= json_object_set_new(ev, "firstTimestamp", timestamp(d->first_wall_ns)) == 0;
    ok &= json_object_set_new(ev, "lastTimestamp", timestamp(d->last_wall_ns)) == 0;
    ok &= json_object_set_new(ev, "count", json_integer(d->count)) == 0;
    ok &= json_object_set_new(ev, "type", json_string(kop_event_type_name(type))) == 0;
    ok &= json_object_set_new(ev, "eventTime", json_null()) == 0;
    ok &= json_object_set_new(ev, "reportingComponent", json_string(component)) == 0;
    ok &= json_object_set_new(ev, "reportingInstance", json_string(instance)) == 0;
out:
    json_decref(meta);
    json_decref(inv);
    json_decref(src);
    if (!ok) {
        json_decref(ev);
        return NULL;
    }
    return ev;
}

json_t *kop_event_patch_body(const struct kop_event_decision *d, const char *message)
{
    assert(d);
    assert(message);
    json_t *p = json_object();
    if (!p)
        return NULL;
    bool ok = json_object_set_new(p, "count", json_integer(d->count)) == 0;
    ok &= json_object_set_new(p, "lastTimestamp", timestamp(d->last_wall_ns)) == 0;
    ok &= json_object_set_new(p, "message", json_stringn(message, message_len(message))) == 0;
    if (!ok) {
        json_decref(p);
        return NULL;
    }
    return p;
}

/* ---- the recorder --------------------------------------------------------- */

struct job {
    struct job *next;
    json_t *event; /* the whole Event: created, or the fallback of a patch */
    json_t *patch; /* NULL: create */
    char ns[254];
    char name[254];
    char reason[128];
};

struct kop_events {
    struct kop_client *client;
    struct kop_client_cancel *cancel;
    char *component, *instance;
    size_t queue_max;

    pthread_mutex_t lock;
    pthread_cond_t cond;      /* job queued, stopping */
    pthread_cond_t idle_cond; /* queue empty and nothing in flight */
    struct kop_event_cache *cache;
    struct job *head, *tail;
    size_t queued;
    bool inflight, stopping;
    struct kop_events_stats stats;
    pthread_t thread;
};

static const struct kop_resource events_res = {
    .group = "", .version = "v1", .resource = "events", .namespaced = true};

static void free_job(struct job *j)
{
    if (!j)
        return;
    json_decref(j->event);
    json_decref(j->patch);
    free(j);
}

static int write_job(struct kop_events *ev, struct job *j, bool *ret_created)
{
    char path[1024];
    struct kop_api_status st;
    memset(&st, 0, sizeof(st));
    int r;
    if (j->patch) {
        r = kop_client_path(&events_res, j->ns, j->name, NULL, path, sizeof(path));
        if (r < 0)
            goto out;
        struct kop_request req = {.method = "PATCH",
                                  .path = path,
                                  .content_type = "application/merge-patch+json",
                                  .body = j->patch,
                                  .cancel = ev->cancel};
        memset(&st, 0, sizeof(st));
        r = kop_client_request(ev->client, &req, &st, NULL);
        /* The Event may have expired on the server (1 h TTL): create it
         * again under the same name, as client-go does. */
        if (r != -ENOENT) {
            *ret_created = false;
            goto out;
        }
    }
    r = kop_client_path(&events_res, j->ns, NULL, NULL, path, sizeof(path));
    if (r < 0)
        goto out;
    struct kop_request req = {
        .method = "POST", .path = path, .body = j->event, .cancel = ev->cancel};
    memset(&st, 0, sizeof(st));
    r = kop_client_request(ev->client, &req, &st, NULL);
    *ret_created = true;
out:
    if (r < 0 && r != -ECANCELED)
        kop_log_errno(KOP_LOG_WARN, LOGGER, "Server rejected event (will not retry!)", r,
                      json_pack("{s:s, s:s, s:s, s:i, s:s}", "event", j->name, "namespace", j->ns,
                                "reason", j->reason, "code", st.code, "message", st.message));
    return r;
}

static void *sender_main(void *arg)
{
    struct kop_events *ev = arg;
    pthread_mutex_lock(&ev->lock);
    for (;;) {
        while (!ev->stopping && !ev->head)
            pthread_cond_wait(&ev->cond, &ev->lock);
        if (ev->stopping)
            break;
        struct job *j = ev->head;
        ev->head = j->next;
        if (!ev->head)
            ev->tail = NULL;
        ev->queued--;
        ev->inflight = true;
        pthread_mutex_unlock(&ev->lock);

        bool created = false;
        int r = write_job(ev, j, &created);
        free_job(j);

        pthread_mutex_lock(&ev->lock);
        ev->inflight = false;
        if (r < 0)
            ev->stats.failed++;
        else if (created)
            ev->stats.created++;
        else
            ev->stats.patched++;
        if (!ev->head)
            pthread_cond_broadcast(&ev->idle_cond);
    }
    pthread_mutex_unlock(&ev->lock);
    return NULL;
}

int kop_events_new(const struct kop_events_options *opt, struct kop_events **ret)
{
    assert(opt);
    assert(opt->client);
    assert(ret);
    struct kop_events *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return -ENOMEM;
    int r = -ENOMEM;
    ev->client = opt->client;
    ev->queue_max = opt->queue_size ? opt->queue_size : DEFAULT_QUEUE;
    ev->component = strdup(opt->component ? opt->component : program_invocation_short_name);
    if (opt->instance) {
        ev->instance = strdup(opt->instance);
    } else {
        char host[256] = "";
        if (gethostname(host, sizeof(host)) != 0)
            host[0] = '\0';
        host[sizeof(host) - 1] = '\0';
        ev->instance = strdup(host);
    }
    ev->cancel = kop_client_cancel_new();
    if (!ev->component || !ev->instance || !ev->cancel)
        goto out;
    r = kop_event_cache_new(opt->cache_size, opt->window_ns, &ev->cache);
    if (r < 0)
        goto out;
    pthread_mutex_init(&ev->lock, NULL);
    kop_clock_cond_init(&ev->cond);
    kop_clock_cond_init(&ev->idle_cond);
    r = kop_thread_start(&ev->thread, sender_main, ev, "event-sender");
    if (r < 0) {
        pthread_cond_destroy(&ev->cond);
        pthread_cond_destroy(&ev->idle_cond);
        pthread_mutex_destroy(&ev->lock);
        goto out;
    }
    *ret = ev;
    return 0;
out:
    kop_event_cache_free(ev->cache);
    kop_client_cancel_free(ev->cancel);
    free(ev->component);
    free(ev->instance);
    free(ev);
    return r;
}

void kop_events_free(struct kop_events *ev)
{
    if (!ev)
        return;
    pthread_mutex_lock(&ev->lock);
    ev->stopping = true;
    pthread_cond_broadcast(&ev->cond);
    pthread_mutex_unlock(&ev->lock);
    kop_client_cancel_fire(ev->cancel);
    pthread_join(ev->thread, NULL);
    size_t dropped = 0;
    while (ev->head) {
        struct job *j = ev->head;
        ev->head = j->next;
        free_job(j);
        dropped++;
    }
    if (dropped)
        kop_logf(KOP_LOG_WARN, LOGGER, "%zu events not written at shutdown", dropped);
    kop_event_cache_free(ev->cache);
    kop_client_cancel_free(ev->cancel);
    pthread_cond_destroy(&ev->cond);
    pthread_cond_destroy(&ev->idle_cond);
    pthread_mutex_destroy(&ev->lock);
    free(ev->component);
    free(ev->instance);
    free(ev);
}

void kop_events_record(struct kop_events *ev, const struct kop_event_ref *ref,
                       enum kop_event_type type, const char *reason, const char *message)
{
    if (!ev)
        return;
    assert(ref);
    assert(reason);
    assert(message);
    if (!ref->name)
        return;
    struct kop_event_decision d;
    struct job *j = NULL;
    const char *why = NULL;
    pthread_mutex_lock(&ev->lock);
    if (ev->stopping)
        goto out;
    if (ev->queued >= ev->queue_max) {
        /* Checked before the cache so a dropped event does not count. */
        ev->stats.dropped++;
        why = "event queue full";
        goto out;
    }
    int r = kop_event_cache_observe(ev->cache, ref, type, reason, message, kop_clock_now_ns(),
                                    kop_clock_wall_ns(), &d);
    if (r < 0) {
        why = "cannot record event";
        goto out;
    }
    j = calloc(1, sizeof(*j));
    if (!j) {
        why = "out of memory";
        goto out;
    }
    j->event = kop_event_build(ref, type, reason, message, &d, ev->component, ev->instance);
    if (d.patch)
        j->patch = kop_event_patch_body(&d, message);
    if (!j->event || (d.patch && !j->patch)) {
        /* Most likely a message that is not UTF-8. */
        why = "cannot build event";
        free_job(j);
        j = NULL;
        goto out;
    }
    memcpy(j->name, d.name, sizeof(j->name));
    snprintf(j->ns, sizeof(j->ns), "%s", kop_event_namespace(ref));
    snprintf(j->reason, sizeof(j->reason), "%s", reason);
    if (ev->tail)
        ev->tail->next = j;
    else
        ev->head = j;
    ev->tail = j;
    ev->queued++;
    pthread_cond_signal(&ev->cond);
out:
    pthread_mutex_unlock(&ev->lock);
    if (why)
        kop_log(KOP_LOG_WARN, LOGGER, "Event dropped",
                json_pack("{s:s, s:s, s:s?, s:s?, s:s}", "why", why, "reason", reason, "kind",
                          ref->kind, "namespace", ref->namespace, "name", ref->name));
}

void kop_events_recordf(struct kop_events *ev, const struct kop_event_ref *ref,
                        enum kop_event_type type, const char *reason, const char *fmt, ...)
{
    if (!ev)
        return;
    assert(fmt);
    /* Larger than the message limit so that the cut lands on a UTF-8
     * boundary (vsnprintf would cut anywhere). */
    char msg[4 * KOP_EVENT_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    kop_events_record(ev, ref, type, reason, msg);
}

int kop_events_flush(struct kop_events *ev, int64_t timeout_ms)
{
    assert(ev);
    int r = 0;
    pthread_mutex_lock(&ev->lock);
    struct timespec deadline = {0};
    if (timeout_ms >= 0)
        deadline = kop_clock_deadline_ms(timeout_ms);
    while (!ev->stopping && (ev->head || ev->inflight)) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&ev->idle_cond, &ev->lock);
        } else if (pthread_cond_timedwait(&ev->idle_cond, &ev->lock, &deadline) == ETIMEDOUT) {
            if (ev->head || ev->inflight)
                r = -ETIMEDOUT;
            break;
        }
    }
    pthread_mutex_unlock(&ev->lock);
    return r;
}

void kop_events_get_stats(struct kop_events *ev, struct kop_events_stats *ret)
{
    assert(ev);
    assert(ret);
    pthread_mutex_lock(&ev->lock);
    *ret = ev->stats;
    pthread_mutex_unlock(&ev->lock);
}
