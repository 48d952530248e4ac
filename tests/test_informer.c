/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for the informer against a small in-test API server (list with
 * paging, chunked watch with bookmarks, ERROR 410, dropped connections,
 * garbage lines): handlers see a consistent add/update/delete sequence,
 * relists synthesize the right events, and the store ends equal to the
 * server's state. (kubesim-based integration tests come later.)
 * The transform hook (what the store and the handlers get, dropped
 * objects) and the metadata-only Accept headers of LIST and WATCH.
 */
#include "kop/informer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "kop/json.h"
#include "kop/kubeconfig.h"
#include "kop/metrics.h"
#include "kop/store.h"
#include "testutil.h"

#include "fakesrv.h"

/* ---- the simulated API server ------------------------------------------- */

static pthread_mutex_t sim_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sim_cond = PTHREAD_COND_INITIALIZER;
static json_t *sim_objs;    /* name -> object */
static json_t *sim_history; /* [{rv, type, object}] */
static long sim_rv;
static long sim_compacted;    /* watches from an rv below this get 410 */
static bool sim_silent;       /* changes are not recorded in the history */
static int sim_bookmark;      /* send a bookmark on open watches */
static int sim_garbage;       /* send a garbage line */
static int sim_drop;          /* drop open watches */
static int sim_expire;        /* send ERROR 410 on open watches */
static bool sim_http410;      /* answer a watch with HTTP 410 instead */
static int sim_list_fail;     /* LISTs answered with 500 */
static int sim_error_code;    /* open watches get an ERROR event with this code, then end */
static bool sim_trickle;      /* open watches get a blank line every 20 ms, never an end */
static bool sim_list_no_rv;   /* LISTs carry no resourceVersion */
static bool sim_watch_had_rv; /* the last watch asked for a resourceVersion */
static int sim_lists, sim_watches;

static void sim_reset(void)
{
    json_decref(sim_objs);
    json_decref(sim_history);
    sim_objs = json_object();
    sim_history = json_array();
    sim_rv = 100;
    sim_compacted = 0;
    sim_silent = false;
    sim_bookmark = sim_garbage = sim_drop = sim_expire = sim_list_fail = 0;
    sim_http410 = false;
    sim_trickle = false;
    sim_error_code = 0;
    sim_list_no_rv = sim_watch_had_rv = false;
    sim_lists = sim_watches = 0;
}

static void sim_record(const char *type, json_t *obj)
{
    if (!sim_silent)
        json_array_append_new(sim_history, json_pack("{s:I, s:s, s:O}", "rv", (json_int_t)sim_rv,
                                                     "type", type, "object", obj));
    pthread_cond_broadcast(&sim_cond);
}

static void sim_put(const char *name, int value)
{
    pthread_mutex_lock(&sim_lock);
    char rv[32];
    snprintf(rv, sizeof(rv), "%ld", ++sim_rv);
    json_t *o = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:[{}]}, s:{s:i}}", "kind", "ConfigMap",
                          "apiVersion", "v1", "metadata", "name", name, "namespace", "ns",
                          "resourceVersion", rv, "managedFields", "data", "v", value);
    bool existed = json_object_get(sim_objs, name) != NULL;
    json_object_set(sim_objs, name, o);
    sim_record(existed ? "MODIFIED" : "ADDED", o);
    json_decref(o);
    pthread_mutex_unlock(&sim_lock);
}

static void sim_del(const char *name)
{
    pthread_mutex_lock(&sim_lock);
    json_t *o = json_incref(json_object_get(sim_objs, name));
    if (o) {
        ++sim_rv;
        json_object_del(sim_objs, name);
        sim_record("DELETED", o);
        json_decref(o);
    }
    pthread_mutex_unlock(&sim_lock);
}

static void sim_knob(int *knob)
{
    pthread_mutex_lock(&sim_lock);
    (*knob)++;
    pthread_cond_broadcast(&sim_cond);
    pthread_mutex_unlock(&sim_lock);
}

static long query_long(const char *path, const char *key, long dflt)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "%s=", key);
    const char *p = strstr(path, pat);
    if (!p || (p[-1] != '?' && p[-1] != '&'))
        return dflt;
    return strtol(p + strlen(pat), NULL, 10);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool sim_list(int fd, const char *path)
{
    pthread_mutex_lock(&sim_lock);
    sim_lists++;
    if (sim_list_fail > 0) {
        pthread_mutex_unlock(&sim_lock);
        return fsrv_reply(fd, 500, NULL, NULL, "{\"kind\":\"Status\",\"code\":500}");
    }
    long limit = query_long(path, "limit", 0);
    long off = query_long(path, "continue", 0);
    size_t n = json_object_size(sim_objs);
    const char **names = calloc(n + 1, sizeof(*names));
    size_t i = 0;
    const char *k;
    json_t *v;
    json_object_foreach(sim_objs, k, v) names[i++] = k;
    qsort(names, n, sizeof(*names), cmp_str);
    json_t *items = json_array();
    size_t end = limit > 0 && (size_t)(off + limit) < n ? (size_t)(off + limit) : n;
    for (i = (size_t)off; i < end; i++) {
        /* Typed list items carry no kind/apiVersion. */
        json_t *c = json_deep_copy(json_object_get(sim_objs, names[i]));
        json_object_del(c, "kind");
        json_object_del(c, "apiVersion");
        json_array_append_new(items, c);
    }
    char rv[32], cont[32];
    snprintf(rv, sizeof(rv), "%ld", sim_rv);
    snprintf(cont, sizeof(cont), "%zu", end);
    json_t *list = json_pack("{s:s, s:s, s:{s:s, s:s}, s:o}", "kind", "ConfigMapList", "apiVersion",
                             "v1", "metadata", "resourceVersion", rv, "continue",
                             end < n ? cont : "", "items", items);
    if (sim_list_no_rv)
        json_object_del(json_object_get(list, "metadata"), "resourceVersion");
    free(names);
    pthread_mutex_unlock(&sim_lock);
    char *txt = json_dumps(list, JSON_COMPACT);
    bool ok = fsrv_reply(fd, 200, NULL, NULL, txt);
    free(txt);
    json_decref(list);
    return ok;
}

static bool send_line(int fd, const char *line)
{
    char buf[8192];
    int n = snprintf(buf, sizeof(buf), "%s\n", line);
    return fsrv_chunk(fd, buf, (size_t)n);
}

static bool sim_watch(struct fsrv *s, int fd, const char *path)
{
    long from = query_long(path, "resourceVersion", 0);
    pthread_mutex_lock(&sim_lock);
    sim_watches++;
    sim_watch_had_rv = strstr(path, "resourceVersion=") != NULL;
    if (from < sim_compacted && sim_http410) {
        pthread_mutex_unlock(&sim_lock);
        return fsrv_reply(fd, 410, NULL, NULL,
                          "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":"
                          "\"Failure\",\"message\":\"too old resource version: 1 (2)\","
                          "\"reason\":\"Expired\",\"code\":410}");
    }
    const char *head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n";
    bool ok = fsrv_write(fd, head, strlen(head));
    if (ok && from < sim_compacted) {
        send_line(fd, "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\","
                      "\"metadata\":{},\"status\":\"Failure\",\"message\":\"The resourceVersion "
                      "for the provided watch is too old.\",\"reason\":\"Expired\",\"code\":410}}");
        fsrv_write(fd, "0\r\n\r\n", 5);
        pthread_mutex_unlock(&sim_lock);
        return true;
    }
    size_t sent = 0;
    int bookmark = sim_bookmark, garbage = sim_garbage, drop = sim_drop, expire = sim_expire;
    while (ok && !atomic_load(&s->stop)) {
        if (sim_drop != drop) {
            ok = false; /* close without the final chunk, before sending more */
            break;
        }
        /* Replay the history after "from", then follow it. */
        for (; ok && sent < json_array_size(sim_history); sent++) {
            json_t *e = json_array_get(sim_history, sent);
            if (json_integer_value(json_object_get(e, "rv")) <= from)
                continue;
            json_t *ev = json_pack("{s:O, s:O}", "type", json_object_get(e, "type"), "object",
                                   json_object_get(e, "object"));
            char *txt = json_dumps(ev, JSON_COMPACT);
            ok = send_line(fd, txt);
            free(txt);
            json_decref(ev);
        }
        if (sim_bookmark != bookmark) {
            bookmark = sim_bookmark;
            char line[256];
            snprintf(line, sizeof(line),
                     "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"ConfigMap\",\"apiVersion\":"
                     "\"v1\",\"metadata\":{\"resourceVersion\":\"%ld\"}}}",
                     sim_rv + 1000);
            ok = send_line(fd, line);
        }
        if (sim_trickle)
            ok = send_line(fd, "");
        if (sim_error_code) {
            char line[512];
            snprintf(line, sizeof(line),
                     "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":"
                     "\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"error %d\","
                     "\"reason\":\"%s\",\"code\":%d}}",
                     sim_error_code, sim_error_code == 500 ? "InternalError" : "Forbidden",
                     sim_error_code);
            sim_error_code = 0;
            send_line(fd, line);
            fsrv_write(fd, "0\r\n\r\n", 5);
            break;
        }
        if (sim_garbage != garbage) {
            garbage = sim_garbage;
            ok = send_line(fd, "this is not JSON");
        }
        if (sim_expire != expire) {
            send_line(fd, "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"message\":"
                          "\"too old resource version: 5 (9)\",\"reason\":\"Expired\","
                          "\"code\":410}}");
            fsrv_write(fd, "0\r\n\r\n", 5);
            break;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&sim_cond, &sim_lock, &ts);
    }
    pthread_mutex_unlock(&sim_lock);
    return false; /* a watch connection is never reused */
}

static bool sim_handler(struct fsrv *s, const struct fsrv_req *req, int fd)
{
    if (strncmp(req->path, "/api/v1/namespaces/ns/configmaps", 32) != 0)
        return fsrv_reply(fd, 404, NULL, "text/plain", "404 page not found\n");
    if (strstr(req->path, "watch=true"))
        return sim_watch(s, fd, req->path);
    return sim_list(fd, req->path);
}

/* ---- handler recorder ---------------------------------------------------- */

static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;
static json_t *rec_present;  /* name -> true while added */
static json_t *last_deleted; /* last object a delete handler got (transform tests) */
static int n_add, n_update, n_delete, n_violations;
static char last_event[256];

static const char *oname(json_t *o)
{
    const char *n = json_string_value(json_object_get(json_object_get(o, "metadata"), "name"));
    return n ? n : "?";
}

static void rec_add(void *ud, json_t *obj)
{
    (void)ud;
    pthread_mutex_lock(&rec_lock);
    if (json_object_get(rec_present, oname(obj)))
        n_violations++;
    /* Stored objects are stripped and typed. */
    if (json_object_get(json_object_get(obj, "metadata"), "managedFields") ||
        !json_object_get(obj, "kind"))
        n_violations++;
    json_object_set_new(rec_present, oname(obj), json_true());
    n_add++;
    snprintf(last_event, sizeof(last_event), "add %s", oname(obj));
    pthread_mutex_unlock(&rec_lock);
}

static void rec_update(void *ud, json_t *old_obj, json_t *new_obj)
{
    (void)ud;
    pthread_mutex_lock(&rec_lock);
    if (!json_object_get(rec_present, oname(new_obj)) || strcmp(oname(old_obj), oname(new_obj)))
        n_violations++;
    n_update++;
    snprintf(last_event, sizeof(last_event), "update %s", oname(new_obj));
    pthread_mutex_unlock(&rec_lock);
}

static void rec_delete(void *ud, json_t *obj)
{
    (void)ud;
    pthread_mutex_lock(&rec_lock);
    if (!json_object_get(rec_present, oname(obj)))
        n_violations++;
    json_object_del(rec_present, oname(obj));
    n_delete++;
    snprintf(last_event, sizeof(last_event), "delete %s", oname(obj));
    pthread_mutex_unlock(&rec_lock);
}

/* What the recording handlers saw. */
struct events {
    int add, update, del;
};

/* The handlers' counts so far; the test fails when they saw a contract
 * violation. */
static struct events seen_events(void)
{
    pthread_mutex_lock(&rec_lock);
    struct events ev = {n_add, n_update, n_delete};
    int violations = n_violations;
    pthread_mutex_unlock(&rec_lock);
    ck_assert_int_eq(violations, 0);
    return ev;
}

/* Poll until cond() holds (at most 5 s). */
static bool eventually(bool (*cond)(void *), void *arg)
{
    for (int i = 0; i < 500; i++) {
        if (cond(arg))
            return true;
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    return cond(arg);
}

/* ---- fixture ------------------------------------------------------------- */

static struct fsrv srv;
static struct kop_metrics *metrics;
static struct kop_client *client;
static struct kop_store *store;
static struct kop_informer *inf;

/* The suite's informer: ConfigMaps in "ns" from the fake server into the
 * store, short backoffs, the recording callbacks. */
static struct kop_informer_options configmap_options(void)
{
    return (struct kop_informer_options){
        .client = client,
        .store = store,
        .resource = {"", "v1", "configmaps", true},
        .kind = "ConfigMap",
        .namespace = "ns",
        .backoff_initial_ms = 20,
        .backoff_max_ms = 100,
        .idle_timeout_ms = 2000,
        .on_add = rec_add,
        .on_update = rec_update,
        .on_delete = rec_delete,
    };
}

static void setup(void)
{
    sim_reset();
    rec_present = json_object();
    n_add = n_update = n_delete = n_violations = 0;
    fsrv_start(&srv, sim_handler, NULL);
    metrics = kop_metrics_new(false);
    char *url = fsrv_url(&srv);
    struct kop_kubeconfig kc = {.server = url};
    struct kop_client_options co = {.config = &kc, .metrics = metrics};
    ck_assert_int_eq(kop_client_new(&co, &client), 0);
    free(url);
    ck_assert_int_eq(kop_store_new(metrics, "kop_store", &store), 0);
    struct kop_informer_options io = configmap_options();
    io.label_selector = "app.kubernetes.io/managed-by=kop";
    io.page_size = 3;
    ck_assert_int_eq(kop_informer_new(&io, &inf), 0);
}

static void teardown(void)
{
    kop_informer_free(inf);
    inf = NULL;
    fsrv_stop(&srv);
    kop_client_free(client);
    kop_store_free(store);
    kop_metrics_free(metrics);
    json_decref(rec_present);
    json_decref(last_deleted);
    last_deleted = NULL;
    json_decref(sim_objs);
    json_decref(sim_history);
    sim_objs = sim_history = NULL;
}

/* The store holds exactly the server's objects, at the same versions. */
/* At least as many events of each kind as *arg (a struct events). */
static bool events_reached(void *arg)
{
    const struct events *w = arg;
    pthread_mutex_lock(&rec_lock);
    bool ok = n_add >= w->add && n_update >= w->update && n_delete >= w->del;
    pthread_mutex_unlock(&rec_lock);
    return ok;
}

static bool store_matches(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&sim_lock);
    bool ok = kop_store_count(store) == json_object_size(sim_objs);
    const char *k;
    json_t *v;
    json_object_foreach(sim_objs, k, v)
    {
        json_t *s = kop_store_get(store, "ConfigMap", "ns", k);
        const char *a = kop_json_path_str(s, "metadata.resourceVersion");
        const char *b = kop_json_path_str(v, "metadata.resourceVersion");
        if (!a || !b || strcmp(a, b) != 0)
            ok = false;
        json_decref(s);
    }
    pthread_mutex_unlock(&sim_lock);
    return ok;
}

static void start_synced(int n_objects)
{
    char name[32];
    for (int i = 0; i < n_objects; i++) {
        snprintf(name, sizeof(name), "cm-%02d", i);
        sim_put(name, i);
    }
    ck_assert(!kop_informer_has_synced(inf));
    ck_assert_int_eq(kop_informer_start(inf), 0);
    ck_assert_int_eq(kop_informer_start(inf), -EALREADY);
    ck_assert_int_eq(kop_informer_wait_synced(inf, 5000), 0);
    ck_assert(kop_informer_has_synced(inf));
}

static bool watching(void *arg)
{
    int want = *(int *)arg;
    pthread_mutex_lock(&sim_lock);
    bool ok = sim_watches >= want;
    pthread_mutex_unlock(&sim_lock);
    return ok;
}

/* Wait until the fake server has seen n watch requests. */
static void wait_watching(int n)
{
    ck_assert(eventually(watching, &n));
}

/* The informer's counters now. */
static struct kop_informer_stats stats(void)
{
    struct kop_informer_stats st;
    kop_informer_stats(inf, &st);
    return st;
}

START_TEST(test_informer_list_watch_paging)
{
    start_synced(7);
    struct kop_informer_stats st = stats();
    ck_assert_uint_eq(st.pages, 3); /* 7 objects, limit 3 */
    ck_assert_uint_eq(st.lists, 1);
    ck_assert_str_eq(st.resource_version, "107");
    struct events ev = seen_events();
    ck_assert_int_eq(ev.add, 7);
    ck_assert(store_matches(NULL));
    /* List items got kind/apiVersion; managedFields were stripped. */
    json_t *o = kop_store_get(store, "ConfigMap", "ns", "cm-03");
    ck_assert_str_eq(kop_json_path_str(o, "kind"), "ConfigMap");
    ck_assert_str_eq(kop_json_path_str(o, "apiVersion"), "v1");
    ck_assert_ptr_null(kop_json_path(o, "metadata.managedFields"));
    json_decref(o);

    wait_watching(1);
    sim_put("cm-03", 33);
    sim_put("new", 1);
    sim_del("cm-00");
    ck_assert(eventually(store_matches, NULL));
    ev = seen_events();
    ck_assert_int_eq(ev.add, 8);
    ck_assert_int_eq(ev.update, 1);
    ck_assert_int_eq(ev.del, 1);
    o = kop_store_get(store, "ConfigMap", "ns", "cm-03");
    ck_assert_int_eq(json_integer_value(kop_json_path(o, "data.v")), 33);
    json_decref(o);
}
END_TEST

static bool rv_is(void *arg)
{
    struct kop_informer_stats st = stats();
    return strcmp(st.resource_version, arg) == 0;
}

START_TEST(test_informer_bookmark_and_resume)
{
    start_synced(2);
    wait_watching(1);
    sim_knob(&sim_bookmark); /* bookmark rv = 102 + 1000 */
    ck_assert(eventually(rv_is, "1102"));
    /* Drop the watch: the informer resumes from the bookmark, without a
     * relist, and still gets what happened meanwhile. */
    sim_knob(&sim_drop);
    wait_watching(2);
    sim_put("late", 5); /* rv 103, but the history replays after 1102 only */
    sim_put("later", 6);
    struct kop_informer_stats st = stats();
    ck_assert_uint_eq(st.lists, 1);
    ck_assert_uint_ge(st.watches, 2);
    /* Events at or below the bookmark's version are not replayed to a
     * watch resumed from it, so the informer never saw them. */
    json_t *o = kop_store_get(store, "ConfigMap", "ns", "later");
    ck_assert_ptr_null(o);
}
END_TEST

START_TEST(test_informer_dropped_watch_resumes)
{
    start_synced(3);
    wait_watching(1);
    sim_knob(&sim_drop);
    sim_put("cm-01", 100); /* recorded in the history: replayed on resume */
    sim_del("cm-02");
    ck_assert(eventually(store_matches, NULL));
    struct events ev = seen_events();
    ck_assert_int_eq(ev.update, 1);
    ck_assert_int_eq(ev.del, 1);
    struct kop_informer_stats st = stats();
    ck_assert_uint_eq(st.lists, 1); /* resumed, not relisted */
    ck_assert_uint_ge(st.watches, 2);
}
END_TEST

START_TEST(test_informer_relist_on_410)
{
    start_synced(4);
    wait_watching(1);
    /* Changes the watch never delivers (as if compacted away) ... */
    pthread_mutex_lock(&sim_lock);
    sim_silent = true;
    pthread_mutex_unlock(&sim_lock);
    sim_put("cm-01", 11); /* changed */
    sim_del("cm-02");     /* vanished */
    sim_put("fresh", 1);  /* new */
    /* ... then the watch expires: the relist synthesizes the events. */
    sim_knob(&sim_expire);
    ck_assert(eventually(store_matches, NULL));
    /* the relist fills the store first, then hands out the events */
    const struct events want = {.add = 5, .update = 1, .del = 1};
    ck_assert(eventually(events_reached, (void *)&want));
    struct events ev = seen_events();
    ck_assert_int_eq(ev.add, 5);
    ck_assert_int_eq(ev.update, 1); /* cm-01 only: unchanged objects make no event */
    ck_assert_int_eq(ev.del, 1);
    struct kop_informer_stats st = stats();
    ck_assert_uint_eq(st.lists, 2);
}
END_TEST

START_TEST(test_informer_http_410_on_resume)
{
    start_synced(2);
    wait_watching(1);
    pthread_mutex_lock(&sim_lock);
    sim_compacted = 1000000;
    sim_http410 = true;
    sim_silent = true;
    pthread_mutex_unlock(&sim_lock);
    sim_del("cm-00");
    sim_knob(&sim_drop);
    ck_assert(eventually(store_matches, NULL));
    struct events ev = seen_events();
    ck_assert_int_eq(ev.del, 1);
    struct kop_informer_stats st = stats();
    ck_assert_uint_ge(st.lists, 2);
}
END_TEST

/* A watch that is "410 Gone" right after every LIST (a server whose
 * history is broken, or that compacts faster than a list takes) must not
 * turn into a LIST storm: the relists back off as client-go's reflector
 * does (its ListAndWatch runs under a backoff manager). */
static void persistent_410(bool http)
{
    pthread_mutex_lock(&sim_lock);
    sim_compacted = 1000000000;
    sim_http410 = http;
    pthread_mutex_unlock(&sim_lock);
    kop_informer_free(inf);
    struct kop_informer_options io = configmap_options();
    io.backoff_initial_ms = 400;
    io.backoff_max_ms = 400;
    ck_assert_int_eq(kop_informer_new(&io, &inf), 0);
    start_synced(2);
    struct timespec ts = {2, 0};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&sim_lock);
    int lists = sim_lists;
    pthread_mutex_unlock(&sim_lock);
    /* A backoff of 400 ms (+-20%): at most 7 in two seconds. */
    ck_assert_msg(lists >= 2 && lists <= 8, "%d LISTs in about two seconds", lists);
    ck_assert(store_matches(NULL));
    /* When the watch works again, the informer follows it. */
    pthread_mutex_lock(&sim_lock);
    sim_compacted = 0;
    pthread_mutex_unlock(&sim_lock);
    wait_watching(lists + 1);
    sim_put("after", 1);
    ck_assert(eventually(store_matches, NULL));
}

START_TEST(test_informer_persistent_410_event_backs_off)
{
    persistent_410(false);
}
END_TEST

START_TEST(test_informer_persistent_http_410_backs_off)
{
    persistent_410(true);
}
END_TEST

/* An ERROR event ends the watch. As in client-go's reflector, a 500
 * (InternalError) or 429 resumes the watch from its resourceVersion; any
 * other code (403 here) means the watch from that version cannot be
 * trusted: LIST again, so that changes the watch never delivered are not
 * lost. */
static void error_event(int code)
{
    start_synced(3);
    wait_watching(1);
    pthread_mutex_lock(&sim_lock);
    sim_silent = true; /* never delivered by a watch */
    pthread_mutex_unlock(&sim_lock);
    sim_put("cm-01", 11);
    sim_del("cm-02");
    pthread_mutex_lock(&sim_lock);
    sim_error_code = code;
    pthread_cond_broadcast(&sim_cond);
    pthread_mutex_unlock(&sim_lock);
    wait_watching(2);
}

START_TEST(test_informer_error_event_relists)
{
    error_event(403);
    ck_assert(eventually(store_matches, NULL));
    struct kop_informer_stats st = stats();
    ck_assert_uint_eq(st.lists, 2);
    ck_assert_uint_ge(st.errors, 1);
}
END_TEST

START_TEST(test_informer_error_event_500_resumes_watch)
{
    error_event(500);
    wait_watching(3);
    struct kop_informer_stats st = stats();
    ck_assert_uint_eq(st.lists, 1);
    ck_assert_uint_ge(st.errors, 1);
}
END_TEST

/* A LIST without a resourceVersion (a server that does not give one) is
 * followed by a watch without one, as client-go does with an empty
 * version, not by a watch from the version of an older LIST, which the
 * server may have compacted long ago. */
START_TEST(test_informer_list_without_rv_forgets_the_old_one)
{
    start_synced(2);
    wait_watching(1);
    pthread_mutex_lock(&sim_lock);
    ck_assert(sim_watch_had_rv);
    sim_list_no_rv = true;
    pthread_mutex_unlock(&sim_lock);
    sim_knob(&sim_expire); /* relist */
    wait_watching(2);
    pthread_mutex_lock(&sim_lock);
    bool had_rv = sim_watch_had_rv;
    pthread_mutex_unlock(&sim_lock);
    ck_assert(!had_rv);
    ck_assert_uint_eq(stats().lists, 2);
    sim_put("after", 1);
    ck_assert(eventually(store_matches, NULL));
}
END_TEST

/* A server that answers every page with the continue token it was just
 * given would keep the LIST paging for ever, as fast as it answers: that
 * is an error (backoff, LIST again), and the informer never syncs. */
static atomic_int same_token_lists;

static bool same_token_handler(struct fsrv *s, const struct fsrv_req *req, int fd)
{
    (void)s;
    (void)req;
    same_token_lists++;
    return fsrv_reply(fd, 200, NULL, "application/json",
                      "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{"
                      "\"resourceVersion\":\"5\",\"continue\":\"same-token\"},\"items\":[{"
                      "\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"resourceVersion\":"
                      "\"5\"}}]}");
}

START_TEST(test_informer_repeated_continue_token_is_an_error)
{
    same_token_lists = 0;
    struct fsrv ts;
    fsrv_start(&ts, same_token_handler, NULL);
    char *url = fsrv_url(&ts);
    struct kop_kubeconfig kc = {.server = url};
    struct kop_client_options co = {.config = &kc, .metrics = metrics};
    struct kop_client *tc = NULL;
    ck_assert_int_eq(kop_client_new(&co, &tc), 0);
    free(url);
    struct kop_informer_options io = configmap_options();
    io.client = tc;
    io.backoff_initial_ms = 400;
    io.backoff_max_ms = 400;
    struct kop_informer *ti = NULL;
    ck_assert_int_eq(kop_informer_new(&io, &ti), 0);
    ck_assert_int_eq(kop_informer_start(ti), 0);
    ck_assert_int_eq(kop_informer_wait_synced(ti, 1500), -ETIMEDOUT);
    struct kop_informer_stats st;
    kop_informer_stats(ti, &st);
    kop_informer_free(ti);
    fsrv_stop(&ts);
    kop_client_free(tc);
    int n = same_token_lists;
    /* Two pages per attempt (the second repeats the token), an attempt
     * every 400 ms (+-20%). */
    ck_assert_msg(n >= 2 && n <= 16, "%d LIST requests in 1.5 s", n);
    ck_assert_uint_ge(st.errors, 1);
}
END_TEST

/* A watch the server never ends, though alive (a blank line every 20 ms
 * beats the idle timeout), is ended by kop after its timeoutSeconds plus a
 * margin, as client-go's watch request times out, and a new one starts at
 * once, without an error or a relist. */
START_TEST(test_informer_endless_watch_is_cut_after_its_timeout)
{
    pthread_mutex_lock(&sim_lock);
    sim_trickle = true;
    pthread_mutex_unlock(&sim_lock);
    kop_informer_free(inf);
    struct kop_informer_options io = configmap_options();
    io.watch_timeout_min_s = 1;
    io.watch_timeout_max_s = 1;
    ck_assert_int_eq(kop_informer_new(&io, &inf), 0);
    start_synced(1);
    for (int i = 0; i < 3 && stats().watches < 3; i++) /* about 2 s per watch */
        wait_watching(stats().watches + 1);
    ck_assert_uint_ge(stats().watches, 3);
    struct kop_informer_stats st = stats();
    ck_assert_uint_eq(st.errors, 0);
    ck_assert_uint_eq(st.lists, 1);
    sim_put("after", 1);
    ck_assert(eventually(store_matches, NULL));
}
END_TEST

/* resourceVersions are opaque strings: a long one (an aggregated API
 * server's, say) is resumed from as it is, never cut. */
static char long_rv[201];
static char watched_rv[512];
static atomic_int long_rv_watches;

static bool long_rv_handler(struct fsrv *s, const struct fsrv_req *req, int fd)
{
    (void)s;
    char body[1024];
    if (!strstr(req->path, "watch=true")) {
        snprintf(body, sizeof(body),
                 "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{"
                 "\"resourceVersion\":\"%s\"},\"items\":[{\"metadata\":{\"name\":\"a\","
                 "\"namespace\":\"ns\",\"resourceVersion\":\"x1\"}}]}",
                 long_rv);
        return fsrv_reply(fd, 200, NULL, "application/json", body);
    }
    const char *p = strstr(req->path, "resourceVersion=");
    pthread_mutex_lock(&sim_lock);
    if (p)
        snprintf(watched_rv, sizeof(watched_rv), "%.*s", (int)strcspn(p + 16, "&"), p + 16);
    else
        watched_rv[0] = '\0';
    pthread_mutex_unlock(&sim_lock);
    long_rv_watches++;
    const char *head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n";
    fsrv_write(fd, head, strlen(head));
    struct timespec ts = {0, 50 * 1000000};
    nanosleep(&ts, NULL);
    fsrv_write(fd, "0\r\n\r\n", 5);
    return false;
}

static bool long_rv_watched(void *arg)
{
    (void)arg;
    return long_rv_watches > 0;
}

START_TEST(test_informer_long_opaque_resource_version)
{
    memset(long_rv, 'r', sizeof(long_rv) - 1);
    memcpy(long_rv, "opaque-", 7);
    long_rv[sizeof(long_rv) - 1] = '\0';
    long_rv_watches = 0;
    struct fsrv ls;
    fsrv_start(&ls, long_rv_handler, NULL);
    char *url = fsrv_url(&ls);
    struct kop_kubeconfig kc = {.server = url};
    struct kop_client_options co = {.config = &kc, .metrics = metrics};
    struct kop_client *lc = NULL;
    ck_assert_int_eq(kop_client_new(&co, &lc), 0);
    free(url);
    struct kop_informer_options io = configmap_options();
    io.client = lc;
    struct kop_informer *li = NULL;
    ck_assert_int_eq(kop_informer_new(&io, &li), 0);
    ck_assert_int_eq(kop_informer_start(li), 0);
    ck_assert_int_eq(kop_informer_wait_synced(li, 5000), 0);
    ck_assert(eventually(long_rv_watched, NULL));
    kop_informer_free(li);
    fsrv_stop(&ls);
    kop_client_free(lc);
    pthread_mutex_lock(&sim_lock);
    ck_assert_str_eq(watched_rv, long_rv);
    pthread_mutex_unlock(&sim_lock);
}
END_TEST

START_TEST(test_informer_garbage_reconnects)
{
    start_synced(1);
    wait_watching(1);
    sim_knob(&sim_garbage);
    wait_watching(2);
    sim_put("after", 1);
    ck_assert(eventually(store_matches, NULL));
    struct kop_informer_stats st = stats();
    ck_assert_uint_ge(st.errors, 1);
    ck_assert_uint_eq(st.lists, 1);
    struct events ev = seen_events();
    ck_assert_int_eq(ev.add, 2);
}
END_TEST

START_TEST(test_informer_not_synced_and_stop)
{
    sim_list_fail = 1;
    ck_assert_int_eq(kop_informer_start(inf), 0);
    ck_assert_int_eq(kop_informer_wait_synced(inf, 150), -ETIMEDOUT);
    ck_assert(!kop_informer_has_synced(inf));
    /* Lists recover: synced after a backoff. */
    pthread_mutex_lock(&sim_lock);
    sim_list_fail = 0;
    pthread_mutex_unlock(&sim_lock);
    ck_assert_int_eq(kop_informer_wait_synced(inf, 5000), 0);
    wait_watching(1);
    /* Stop while a watch is blocked (idle limit 2 s): returns promptly. */
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    kop_informer_stop(inf);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
    ck_assert_msg(ms < 1500, "stop took %.0f ms", ms);
    kop_informer_stop(inf); /* idempotent */
    ck_assert_int_eq(kop_informer_wait_synced(inf, 10), 0);
}
END_TEST

/* ---- transform ----------------------------------------------------------- */

static atomic_int n_transformed;
static atomic_int n_with_managed_fields; /* objects the transform got with managedFields */

/* Keep kind, apiVersion and metadata {name, namespace, resourceVersion},
 * add "t": true; drop objects whose name starts with "skip". */
static json_t *cut(void *ud, json_t *obj)
{
    (void)ud;
    json_t *out = NULL;
    const char *name = kop_json_path_str(obj, "metadata.name");
    n_transformed++; /* the informer thread only */
    if (kop_json_path(obj, "metadata.managedFields"))
        n_with_managed_fields++;
    if (name && strncmp(name, "skip", 4) != 0)
        out = json_pack("{s:O, s:O, s:{s:O, s:O, s:O}, s:b}", "kind", json_object_get(obj, "kind"),
                        "apiVersion", json_object_get(obj, "apiVersion"), "metadata", "name",
                        kop_json_path(obj, "metadata.name"), "namespace",
                        kop_json_path(obj, "metadata.namespace"), "resourceVersion",
                        kop_json_path(obj, "metadata.resourceVersion"), "t", 1);
    json_decref(obj); /* stolen */
    return out;
}

static void rec_delete_keep(void *ud, json_t *obj)
{
    rec_delete(ud, obj);
    pthread_mutex_lock(&rec_lock);
    json_decref(last_deleted);
    last_deleted = json_incref(obj);
    pthread_mutex_unlock(&rec_lock);
}

static void new_transform_informer(void)
{
    kop_informer_free(inf);
    struct kop_informer_options io = configmap_options();
    io.page_size = 2;
    io.on_delete = rec_delete_keep;
    io.transform = cut;
    ck_assert_int_eq(kop_informer_new(&io, &inf), 0);
}

static bool transformed_in_store(const char *name, json_int_t *ret_v)
{
    json_t *o = kop_store_get(store, "ConfigMap", "ns", name);
    bool ok = o && json_is_true(json_object_get(o, "t")) && !json_object_get(o, "data") &&
              strcmp(kop_json_path_str(o, "kind"), "ConfigMap") == 0;
    if (ret_v)
        *ret_v = o ? json_integer_value(kop_json_path(o, "data.v")) : -1;
    json_decref(o);
    return ok;
}

static bool has_new_one(void *arg)
{
    (void)arg;
    return transformed_in_store("new-one", NULL);
}

static bool deleted_seen(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&rec_lock);
    bool ok = last_deleted != NULL;
    pthread_mutex_unlock(&rec_lock);
    return ok;
}

START_TEST(test_informer_transform_stores_and_hands_out_its_result)
{
    n_transformed = 0;
    n_with_managed_fields = 0;
    new_transform_informer();
    sim_put("skip-me", 1);
    start_synced(3);
    /* Every list item went through the transform (kind filled in first). */
    ck_assert_int_eq(kop_store_count(store), 3);
    ck_assert(transformed_in_store("cm-00", NULL));
    ck_assert(transformed_in_store("cm-02", NULL));
    ck_assert(!kop_store_exists(store, "ConfigMap", "ns", "skip-me"));
    struct kop_informer_stats st = stats();
    ck_assert_uint_eq(st.dropped, 1);
    struct events ev = seen_events(); /* handlers got typed objects */
    ck_assert_int_eq(ev.add, 3);

    /* Watch events too, and the final state of a deleted object. */
    wait_watching(1);
    sim_put("new-one", 7);
    sim_put("skip-too", 8);
    ck_assert(eventually(has_new_one, NULL));
    sim_del("cm-01");
    ck_assert(eventually(deleted_seen, NULL));
    pthread_mutex_lock(&rec_lock);
    ck_assert(json_is_true(json_object_get(last_deleted, "t")));
    ck_assert_ptr_null(json_object_get(last_deleted, "data"));
    ck_assert_str_eq(kop_json_path_str(last_deleted, "metadata.name"), "cm-01");
    json_decref(last_deleted);
    last_deleted = NULL;
    pthread_mutex_unlock(&rec_lock);
    ck_assert(!kop_store_exists(store, "ConfigMap", "ns", "cm-01"));
    ck_assert(!kop_store_exists(store, "ConfigMap", "ns", "skip-too"));
    /* managedFields (every object here has them) were never decoded, in
     * LIST items or in watch events: the transform never saw them */
    ck_assert_int_gt(n_transformed, 5);
    ck_assert_int_eq(n_with_managed_fields, 0);
    kop_informer_stop(inf);
    st = stats();
    ck_assert_uint_eq(st.dropped, 2);
    ck_assert_int_ge(n_transformed, 7); /* 4 listed, 2 added, 1 deleted */
    ev = seen_events();
    ck_assert_int_eq(ev.add, 4);
    ck_assert_int_eq(ev.del, 1);
}
END_TEST

START_TEST(test_informer_transform_relist_keeps_unchanged)
{
    n_transformed = 0;
    new_transform_informer();
    start_synced(2);
    wait_watching(1);
    int before = n_transformed;
    ck_assert_int_eq(before, 2);
    /* A relist: unchanged objects (same resourceVersion, which the
     * transform kept) are neither transformed again nor re-stored. */
    pthread_mutex_lock(&sim_lock);
    sim_silent = true;
    pthread_mutex_unlock(&sim_lock);
    sim_put("cm-01", 5);
    sim_knob(&sim_expire);
    ck_assert(eventually(store_matches, NULL));
    kop_informer_stop(inf);
    ck_assert_int_eq(n_transformed, before + 1);
    struct events ev = seen_events();
    ck_assert_int_eq(ev.update, 1);
}
END_TEST

/* ---- metadata only: the Accept headers ------------------------------------ */

/* fakesrv does not keep request headers other than a few, so this test
 * runs its own minimal server: one connection at a time (the informer is
 * one thread), GET only, keep-alive; it records the Accept header of the
 * first LIST and the first WATCH and answers as an apiserver serving
 * PartialObjectMetadata does. */
struct msrv {
    int lfd, port;
    pthread_t thread;
    atomic_bool stop;
    pthread_mutex_t lock;
    char list_accept[512], watch_accept[512];
    int lists, watches;
};

static const char meta_list[] =
    "{\"kind\":\"PartialObjectMetadataList\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{"
    "\"resourceVersion\":\"50\"},\"items\":[{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":"
    "\"meta.k8s.io/v1\",\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"uid\":\"u-a\","
    "\"resourceVersion\":\"41\",\"labels\":{\"x\":\"y\"}}}]}";
static const char meta_event[] =
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":"
    "\"meta.k8s.io/v1\",\"metadata\":{\"name\":\"b\",\"namespace\":\"ns\",\"uid\":\"u-b\","
    "\"resourceVersion\":\"51\"}}}\n";

static void msrv_header(const char *head, const char *name, char *out, size_t len)
{
    for (const char *l = strstr(head, "\r\n"); l; l = strstr(l + 2, "\r\n")) {
        const char *line = l + 2;
        size_t nl = strlen(name);
        if (strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1;
            while (*v == ' ')
                v++;
            snprintf(out, len, "%.*s", (int)strcspn(v, "\r\n"), v);
            return;
        }
    }
}

static void msrv_conn(struct msrv *m, int fd)
{
    char buf[8192];
    size_t have = 0;
    while (!atomic_load(&m->stop)) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 20) <= 0)
            continue;
        ssize_t n = recv(fd, buf + have, sizeof(buf) - have - 1, 0);
        if (n <= 0)
            return;
        have += (size_t)n;
        buf[have] = '\0';
        char *end = strstr(buf, "\r\n\r\n");
        if (!end)
            continue;
        char accept[512] = "";
        msrv_header(buf, "Accept", accept, sizeof(accept));
        bool watch = strstr(buf, "watch=true") != NULL && strstr(buf, "watch=true") < end;
        pthread_mutex_lock(&m->lock);
        if (watch && m->watches++ == 0)
            snprintf(m->watch_accept, sizeof(m->watch_accept), "%s", accept);
        if (!watch && m->lists++ == 0)
            snprintf(m->list_accept, sizeof(m->list_accept), "%s", accept);
        pthread_mutex_unlock(&m->lock);
        size_t used = (size_t)(end - buf) + 4;
        memmove(buf, buf + used, have - used);
        have -= used;
        if (!watch) {
            if (!fsrv_reply(fd, 200, NULL, NULL, meta_list))
                return;
            continue;
        }
        const char *head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n";
        if (!fsrv_write(fd, head, strlen(head)) ||
            !fsrv_chunk(fd, meta_event, sizeof(meta_event) - 1))
            return;
        /* Hold the watch open until the client goes away or we stop. */
        while (!atomic_load(&m->stop)) {
            struct pollfd q = {.fd = fd, .events = POLLIN};
            if (poll(&q, 1, 20) > 0 && recv(fd, buf, sizeof(buf), 0) <= 0)
                return;
        }
        return;
    }
}

static void *msrv_main(void *arg)
{
    struct msrv *m = arg;
    while (!atomic_load(&m->stop)) {
        struct pollfd p = {.fd = m->lfd, .events = POLLIN};
        if (poll(&p, 1, 20) <= 0)
            continue;
        int fd = accept(m->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        msrv_conn(m, fd);
        close(fd);
    }
    return NULL;
}

static bool meta_watched(void *arg)
{
    struct msrv *m = arg;
    pthread_mutex_lock(&m->lock);
    bool ok = m->watches > 0;
    pthread_mutex_unlock(&m->lock);
    return ok && kop_store_exists(store, "Thing", "ns", "b");
}

START_TEST(test_informer_metadata_only_accept_headers)
{
    struct msrv m;
    memset(&m, 0, sizeof(m));
    pthread_mutex_init(&m.lock, NULL);
    m.lfd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(m.lfd, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(m.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(m.lfd, 8), 0);
    socklen_t sl = sizeof(sa);
    ck_assert_int_eq(getsockname(m.lfd, (struct sockaddr *)&sa, &sl), 0);
    m.port = ntohs(sa.sin_port);
    ck_assert_int_eq(pthread_create(&m.thread, NULL, msrv_main, &m), 0);

    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", m.port);
    struct kop_kubeconfig kc = {.server = url};
    struct kop_client_options co = {.config = &kc, .metrics = metrics};
    struct kop_client *mc = NULL;
    ck_assert_int_eq(kop_client_new(&co, &mc), 0);
    struct kop_informer *mi = NULL;
    struct kop_informer_options io = {
        .client = mc,
        .store = store,
        .resource = {"example.com", "v1", "things", true},
        .kind = "Thing",
        .namespace = "ns",
        .backoff_initial_ms = 20,
        .idle_timeout_ms = 2000,
        .metadata_only = true,
    };
    ck_assert_int_eq(kop_informer_new(&io, &mi), 0);
    ck_assert_int_eq(kop_informer_start(mi), 0);
    ck_assert_int_eq(kop_informer_wait_synced(mi, 5000), 0);
    ck_assert(eventually(meta_watched, &m));
    kop_informer_free(mi);

    pthread_mutex_lock(&m.lock);
    ck_assert_str_eq(m.list_accept, KOP_INFORMER_ACCEPT_META_LIST);
    ck_assert_str_eq(m.watch_accept, KOP_INFORMER_ACCEPT_META_WATCH);
    ck_assert_str_eq(m.list_accept, "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;"
                                    "v=v1,application/json");
    ck_assert_str_eq(
        m.watch_accept,
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json");
    pthread_mutex_unlock(&m.lock);
    /* Without a transform the objects are stored as the server sent them. */
    json_t *a = kop_store_get(store, "Thing", "ns", "a");
    ck_assert_str_eq(kop_json_path_str(a, "kind"), "PartialObjectMetadata");
    ck_assert_str_eq(kop_json_path_str(a, "metadata.uid"), "u-a");
    json_decref(a);

    atomic_store(&m.stop, true);
    pthread_join(m.thread, NULL);
    close(m.lfd);
    pthread_mutex_destroy(&m.lock);
    kop_client_free(mc);
}
END_TEST

static int no_data(void *ud, const char *data, size_t len)
{
    (void)ud;
    (void)data;
    (void)len;
    return 0;
}

START_TEST(test_informer_plain_accept_unchanged)
{
    /* Without metadata_only the client asks for plain JSON (the fake
     * server answers list and watch as before). */
    start_synced(1);
    struct kop_informer_stats st = stats();
    ck_assert_uint_eq(st.dropped, 0);
    ck_assert(store_matches(NULL));
    /* A header value with a line break is refused before anything is sent. */
    struct kop_api_status as;
    ck_assert_int_eq(
        kop_client_watch_accept(client, "/x", "a\r\nX-Evil: 1", no_data, NULL, NULL, 0, &as),
        -EINVAL);
    const struct kop_request rq = {.method = "GET", .path = "/x", .accept = "a\nb"};
    ck_assert_int_eq(kop_client_request(client, &rq, &as, NULL), -EINVAL);
    ck_assert_int_eq(as.attempts, 0);
}
END_TEST

static Suite *informer_suite(void)
{
    Suite *s = suite_create("informer");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_informer_list_watch_paging);
    tcase_add_test(tc, test_informer_bookmark_and_resume);
    tcase_add_test(tc, test_informer_dropped_watch_resumes);
    tcase_add_test(tc, test_informer_relist_on_410);
    tcase_add_test(tc, test_informer_http_410_on_resume);
    tcase_add_test(tc, test_informer_garbage_reconnects);
    tcase_add_test(tc, test_informer_persistent_410_event_backs_off);
    tcase_add_test(tc, test_informer_persistent_http_410_backs_off);
    tcase_add_test(tc, test_informer_long_opaque_resource_version);
    tcase_add_test(tc, test_informer_endless_watch_is_cut_after_its_timeout);
    tcase_add_test(tc, test_informer_error_event_relists);
    tcase_add_test(tc, test_informer_error_event_500_resumes_watch);
    tcase_add_test(tc, test_informer_list_without_rv_forgets_the_old_one);
    tcase_add_test(tc, test_informer_repeated_continue_token_is_an_error);
    tcase_add_test(tc, test_informer_not_synced_and_stop);
    tcase_add_test(tc, test_informer_transform_stores_and_hands_out_its_result);
    tcase_add_test(tc, test_informer_transform_relist_keeps_unchanged);
    tcase_add_test(tc, test_informer_metadata_only_accept_headers);
    tcase_add_test(tc, test_informer_plain_accept_unchanged);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int r = kop_test_run(informer_suite());
    curl_global_cleanup();
    return r;
}
