/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for the Event recorder: the pure dedup cache with a fake clock
 * (count 2, 3 within the window, a new Event after it, distinct keys, the
 * LRU bound, names), the Event and patch objects (shape and field order
 * as the apiserver serializes core/v1 Event), and the recorder against a
 * small HTTP server inside the test that records what it receives
 * (create, patch, 404 patch -> create, a full queue dropping, free
 * cancelling a hung write).
 */
#include "kop/events.h"

#include <assert.h>
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

#include "kop/client.h"
#include "kop/clock.h"
#include "kop/kubeconfig.h"
#include "kop/metrics.h"
#include "testutil.h"

#define MIN (60 * KOP_NSEC_PER_SEC)

static const struct kop_event_ref ref_a = {.api_version = "mygroup.example.com/v1",
                                           .kind = "MyResource",
                                           .namespace = "team-a",
                                           .name = "web",
                                           .uid = "6f1c0b7e-0000-4000-8000-000000000001",
                                           .resource_version = "42"};

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- the pure cache -------------------------------------------------------- */

static struct kop_event_cache *new_cache(size_t cap)
{
    struct kop_event_cache *c = NULL;
    ck_assert_int_eq(kop_event_cache_new(cap, 0, &c), 0);
    return c;
}

START_TEST(test_events_dedup_counts_within_window)
{
    struct kop_event_cache *c = new_cache(0);
    struct kop_event_decision d1, d2, d3;
    int64_t wall = INT64_C(1700000000) * KOP_NSEC_PER_SEC;
    ck_assert_int_eq(kop_event_cache_observe(c, &ref_a, KOP_EVENT_NORMAL, "Created",
                                             "created Deployment web", 0, wall, &d1),
                     0);
    ck_assert(!d1.patch);
    ck_assert_int_eq(d1.count, 1);
    /* client-go style name: <involved>.<16 hex of the wall clock in ns>. */
    char want[64];
    snprintf(want, sizeof(want), "web.%016llx", (unsigned long long)wall);
    ck_assert_str_eq(d1.name, want);

    ck_assert_int_eq(kop_event_cache_observe(c, &ref_a, KOP_EVENT_NORMAL, "Created",
                                             "created Deployment web", 3 * MIN, wall + 3 * MIN,
                                             &d2),
                     0);
    ck_assert(d2.patch);
    ck_assert_int_eq(d2.count, 2);
    ck_assert_str_eq(d2.name, d1.name);
    ck_assert_int_eq(d2.first_wall_ns, wall);
    ck_assert_int_eq(d2.last_wall_ns, wall + 3 * MIN);

    /* The window runs from the last time it was seen. */
    ck_assert_int_eq(kop_event_cache_observe(c, &ref_a, KOP_EVENT_NORMAL, "Created",
                                             "created Deployment web", 12 * MIN, wall + 12 * MIN,
                                             &d3),
                     0);
    ck_assert(d3.patch);
    ck_assert_int_eq(d3.count, 3);
    ck_assert_str_eq(d3.name, d1.name);
    ck_assert_uint_eq(kop_event_cache_len(c), 1);
    kop_event_cache_free(c);
}
END_TEST

START_TEST(test_events_new_event_after_window)
{
    struct kop_event_cache *c = new_cache(0);
    struct kop_event_decision d1, d2, d3;
    int64_t wall = INT64_C(1700000000) * KOP_NSEC_PER_SEC;
    ck_assert_int_eq(
        kop_event_cache_observe(c, &ref_a, KOP_EVENT_WARNING, "Failed", "boom", 0, wall, &d1), 0);
    ck_assert_int_eq(kop_event_cache_observe(c, &ref_a, KOP_EVENT_WARNING, "Failed", "boom",
                                             10 * MIN + 1, wall + 10 * MIN + 1, &d2),
                     0);
    ck_assert(!d2.patch);
    ck_assert_int_eq(d2.count, 1);
    ck_assert_str_ne(d2.name, d1.name);
    ck_assert_int_eq(d2.first_wall_ns, wall + 10 * MIN + 1);
    /* Exactly at the window edge still counts as a repeat. */
    ck_assert_int_eq(kop_event_cache_observe(c, &ref_a, KOP_EVENT_WARNING, "Failed", "boom",
                                             20 * MIN + 1, wall + 20 * MIN + 1, &d3),
                     0);
    ck_assert(d3.patch);
    ck_assert_int_eq(d3.count, 2);
    ck_assert_str_eq(d3.name, d2.name);
    kop_event_cache_free(c);
}
END_TEST

START_TEST(test_events_distinct_keys_distinct_events)
{
    struct kop_event_cache *c = new_cache(0);
    struct kop_event_decision d[5];
    int64_t wall = INT64_C(1700000000) * KOP_NSEC_PER_SEC;
    struct kop_event_ref other_uid = ref_a;
    other_uid.uid = "6f1c0b7e-0000-4000-8000-000000000002";
    struct kop_event_ref other_rv = ref_a;
    other_rv.resource_version = "43";
    ck_assert_int_eq(
        kop_event_cache_observe(c, &ref_a, KOP_EVENT_NORMAL, "Updated", "msg one", 0, wall, &d[0]),
        0);
    /* Same wall clock: names still differ. */
    ck_assert_int_eq(
        kop_event_cache_observe(c, &ref_a, KOP_EVENT_NORMAL, "Updated", "msg two", 1, wall, &d[1]),
        0);
    ck_assert_int_eq(
        kop_event_cache_observe(c, &ref_a, KOP_EVENT_WARNING, "Updated", "msg one", 2, wall, &d[2]),
        0);
    ck_assert_int_eq(kop_event_cache_observe(c, &other_uid, KOP_EVENT_NORMAL, "Updated", "msg one",
                                             3, wall, &d[3]),
                     0);
    /* resourceVersion is not part of the key (as in client-go). */
    ck_assert_int_eq(kop_event_cache_observe(c, &other_rv, KOP_EVENT_NORMAL, "Updated", "msg one",
                                             4, wall, &d[4]),
                     0);
    for (int i = 0; i < 4; i++) {
        ck_assert(!d[i].patch);
        for (int j = 0; j < i; j++)
            ck_assert_str_ne(d[i].name, d[j].name);
    }
    ck_assert(d[4].patch);
    ck_assert_str_eq(d[4].name, d[0].name);
    ck_assert_uint_eq(kop_event_cache_len(c), 4);

    /* Field boundaries are part of the key: "ab"+"c" != "a"+"bc". */
    struct kop_event_ref x = {.name = "n", .kind = "ab", .namespace = "c"};
    struct kop_event_ref y = {.name = "n", .kind = "a", .namespace = "bc"};
    struct kop_event_decision dx, dy;
    ck_assert_int_eq(kop_event_cache_observe(c, &x, KOP_EVENT_NORMAL, "R", "m", 5, wall, &dx), 0);
    ck_assert_int_eq(kop_event_cache_observe(c, &y, KOP_EVENT_NORMAL, "R", "m", 6, wall, &dy), 0);
    ck_assert(!dy.patch);

    struct kop_event_ref noname = {.kind = "K"};
    ck_assert_int_eq(kop_event_cache_observe(c, &noname, KOP_EVENT_NORMAL, "R", "m", 7, wall, &dx),
                     -EINVAL);
    kop_event_cache_free(c);
}
END_TEST

START_TEST(test_events_lru_bound)
{
    struct kop_event_cache *c = new_cache(4);
    struct kop_event_decision d;
    int64_t wall = INT64_C(1700000000) * KOP_NSEC_PER_SEC;
    char msg[32];
    for (int i = 0; i < 4; i++) {
        snprintf(msg, sizeof(msg), "m%d", i);
        ck_assert_int_eq(
            kop_event_cache_observe(c, &ref_a, KOP_EVENT_NORMAL, "R", msg, i, wall + i, &d), 0);
    }
    /* Touch m0 so m1 becomes the least recently used. */
    ck_assert_int_eq(kop_event_cache_observe(c, &ref_a, KOP_EVENT_NORMAL, "R", "m0", 10, wall, &d),
                     0);
    ck_assert(d.patch);
    ck_assert_int_eq(kop_event_cache_observe(c, &ref_a, KOP_EVENT_NORMAL, "R", "m4", 11, wall, &d),
                     0);
    ck_assert_uint_eq(kop_event_cache_len(c), 4);
    /* m1 was evicted: seen again it is a new Event. m0 was kept. */
    ck_assert_int_eq(kop_event_cache_observe(c, &ref_a, KOP_EVENT_NORMAL, "R", "m1", 12, wall, &d),
                     0);
    ck_assert(!d.patch);
    ck_assert_int_eq(d.count, 1);
    ck_assert_int_eq(kop_event_cache_observe(c, &ref_a, KOP_EVENT_NORMAL, "R", "m0", 13, wall, &d),
                     0);
    ck_assert(d.patch);
    ck_assert_int_eq(d.count, 3);
    ck_assert_uint_eq(kop_event_cache_len(c), 4);

    /* Many distinct events never grow past the bound. */
    for (int i = 0; i < 1000; i++) {
        snprintf(msg, sizeof(msg), "x%d", i);
        ck_assert_int_eq(
            kop_event_cache_observe(c, &ref_a, KOP_EVENT_NORMAL, "R", msg, 20 + i, wall, &d), 0);
    }
    ck_assert_uint_eq(kop_event_cache_len(c), 4);
    kop_event_cache_free(c);
    kop_event_cache_free(NULL);
}
END_TEST

START_TEST(test_events_long_name_and_message)
{
    struct kop_event_cache *c = new_cache(0);
    struct kop_event_decision d;
    char name[254];
    memset(name, 'n', 253);
    name[253] = '\0';
    struct kop_event_ref r = {.kind = "Service", .namespace = "x", .name = name};
    /* 1023 ASCII bytes then a 2-byte character across the 1024 limit. */
    char msg[1100];
    memset(msg, 'a', 1023);
    memcpy(msg + 1023, "\xc3\xa9tail", 7);
    ck_assert_int_eq(kop_event_cache_observe(c, &r, KOP_EVENT_NORMAL, "R", msg, 0, 1, &d), 0);
    ck_assert_uint_eq(strlen(d.name), 253);
    json_t *ev = kop_event_build(&r, KOP_EVENT_NORMAL, "R", msg, &d, NULL, NULL);
    ck_assert_ptr_nonnull(ev);
    ck_assert_uint_eq(json_string_length(json_object_get(ev, "message")), 1023);
    json_decref(ev);
    /* A message differing only after the cut is the same event. */
    msg[1026] = 'Z';
    ck_assert_int_eq(kop_event_cache_observe(c, &r, KOP_EVENT_NORMAL, "R", msg, 1, 2, &d), 0);
    ck_assert(d.patch);
    kop_event_cache_free(c);
}
END_TEST

/* ---- the objects ------------------------------------------------------------- */

START_TEST(test_events_build_shape)
{
    struct kop_event_decision d = {.patch = false,
                                   .count = 1,
                                   .name = "web.1791a2b3c4d5e6f7",
                                   .first_wall_ns = INT64_C(1567197785) * KOP_NSEC_PER_SEC,
                                   .last_wall_ns = INT64_C(1567197790) * KOP_NSEC_PER_SEC};
    json_t *ev = kop_event_build(&ref_a, KOP_EVENT_WARNING, "ReconcileError",
                                 "failed to create Service", &d, "kop", "kop-7d9f-abc");
    ck_assert_ptr_nonnull(ev);
    /* Field order as the apiserver writes core/v1 Event. */
    static const char *const order[] = {
        "kind",    "apiVersion", "metadata",           "involvedObject",   "reason",
        "message", "source",     "firstTimestamp",     "lastTimestamp",    "count",
        "type",    "eventTime",  "reportingComponent", "reportingInstance"};
    size_t i = 0;
    const char *key;
    json_t *v;
    json_object_foreach(ev, key, v)
    {
        ck_assert_uint_lt(i, sizeof(order) / sizeof(order[0]));
        ck_assert_str_eq(key, order[i]);
        i++;
    }
    ck_assert_uint_eq(i, sizeof(order) / sizeof(order[0]));
    ck_assert_str_eq(json_string_value(json_object_get(ev, "kind")), "Event");
    ck_assert_str_eq(json_string_value(json_object_get(ev, "apiVersion")), "v1");
    json_t *meta = json_object_get(ev, "metadata");
    ck_assert_str_eq(json_string_value(json_object_get(meta, "name")), "web.1791a2b3c4d5e6f7");
    ck_assert_str_eq(json_string_value(json_object_get(meta, "namespace")), "team-a");
    json_t *inv = json_object_get(ev, "involvedObject");
    static const char *const inv_order[] = {"kind", "namespace",  "name",
                                            "uid",  "apiVersion", "resourceVersion"};
    i = 0;
    json_object_foreach(inv, key, v)
    {
        ck_assert_str_eq(key, inv_order[i]);
        i++;
    }
    ck_assert_uint_eq(i, 6);
    ck_assert_str_eq(json_string_value(json_object_get(inv, "uid")), ref_a.uid);
    ck_assert_str_eq(json_string_value(json_object_get(ev, "firstTimestamp")),
                     "2019-08-30T20:43:05Z");
    ck_assert_str_eq(json_string_value(json_object_get(ev, "lastTimestamp")),
                     "2019-08-30T20:43:10Z");
    ck_assert_int_eq(json_integer_value(json_object_get(ev, "count")), 1);
    ck_assert_str_eq(json_string_value(json_object_get(ev, "type")), "Warning");
    ck_assert(json_is_null(json_object_get(ev, "eventTime")));
    json_t *src = json_object_get(ev, "source");
    ck_assert_str_eq(json_string_value(json_object_get(src, "component")), "kop");
    ck_assert_str_eq(json_string_value(json_object_get(src, "host")), "kop-7d9f-abc");
    ck_assert_str_eq(json_string_value(json_object_get(ev, "reportingComponent")), "kop");
    ck_assert_str_eq(json_string_value(json_object_get(ev, "reportingInstance")), "kop-7d9f-abc");
    json_decref(ev);

    /* Cluster-scoped object: Event in "default", no involvedObject.namespace. */
    struct kop_event_ref ns = {.api_version = "v1", .kind = "Namespace", .name = "team-a"};
    ev = kop_event_build(&ns, KOP_EVENT_NORMAL, "R", "m", &d, NULL, NULL);
    ck_assert_ptr_nonnull(ev);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(ev, "metadata"), "namespace")),
        "default");
    ck_assert_ptr_null(json_object_get(json_object_get(ev, "involvedObject"), "namespace"));
    ck_assert_ptr_null(json_object_get(json_object_get(ev, "source"), "host"));
    ck_assert_str_eq(json_string_value(json_object_get(ev, "reportingInstance")), "");
    ck_assert_str_eq(json_string_value(json_object_get(ev, "type")), "Normal");
    json_decref(ev);

    /* Not UTF-8: no object (the recorder drops it with a log line). */
    ck_assert_ptr_null(kop_event_build(&ref_a, KOP_EVENT_NORMAL, "R", "\xff\xfe", &d, NULL, NULL));

    json_t *p = kop_event_patch_body(&d, "again");
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(json_object_size(p), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(p, "count")), 1);
    ck_assert_str_eq(json_string_value(json_object_get(p, "lastTimestamp")),
                     "2019-08-30T20:43:10Z");
    ck_assert_str_eq(json_string_value(json_object_get(p, "message")), "again");
    json_decref(p);
}
END_TEST

/* ---- a recording HTTP server ---------------------------------------------- */
/*
 * One listener thread and a thread per connection; every request is kept
 * (method, path, content type, body) and answered by a few rules:
 * PATCH of an Event named "gone.*" -> 404 Status; a path with "/hang" in
 * its namespace blocks until released; everything else -> 201/200 with the
 * body echoed.
 */
#define SRV_MAX_REQ 64
#define SRV_MAX_CONN 16

struct seen_req {
    char method[16];
    char path[512];
    char ctype[96];
    char *body;
};

struct srv {
    int lfd, port;
    pthread_t thread;
    atomic_bool stop, release;
    pthread_mutex_t lock;
    struct seen_req req[SRV_MAX_REQ];
    int nreq;
    pthread_t conn[SRV_MAX_CONN];
    int conn_fd[SRV_MAX_CONN];
    int nconn;
};

static struct srv S;

static bool send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static bool answer(int fd, int code, const char *body)
{
    char head[256];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     code, strlen(body));
    return send_all(fd, head, (size_t)n) && send_all(fd, body, strlen(body));
}

static const char *header_value(const char *head, const char *name, char *out, size_t len)
{
    out[0] = '\0';
    size_t nl = strlen(name);
    for (const char *l = strstr(head, "\r\n"); l; l = strstr(l + 2, "\r\n")) {
        if (strncasecmp(l + 2, name, nl) == 0 && l[2 + nl] == ':') {
            const char *v = l + 3 + nl;
            while (*v == ' ')
                v++;
            snprintf(out, len, "%.*s", (int)strcspn(v, "\r\n"), v);
            break;
        }
    }
    return out;
}

static void *conn_main(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[65536];
    size_t have = 0;
    while (!atomic_load(&S.stop)) {
        buf[have] = '\0';
        char *end = strstr(buf, "\r\n\r\n");
        if (!end) {
            if (have + 1 >= sizeof(buf))
                break;
            ssize_t n = recv(fd, buf + have, sizeof(buf) - have - 1, 0);
            if (n <= 0)
                break;
            have += (size_t)n;
            continue;
        }
        *end = '\0';
        char cl[32];
        size_t hlen = (size_t)(end - buf) + 4;
        size_t blen =
            (size_t)strtoul(header_value(buf, "Content-Length", cl, sizeof(cl)), NULL, 10);
        if (blen > sizeof(buf) - hlen - 1)
            break;
        while (have < hlen + blen) {
            ssize_t n = recv(fd, buf + have, sizeof(buf) - have - 1, 0);
            if (n <= 0)
                goto out;
            have += (size_t)n;
        }
        struct seen_req r;
        memset(&r, 0, sizeof(r));
        sscanf(buf, "%15s %511s", r.method, r.path);
        header_value(buf, "Content-Type", r.ctype, sizeof(r.ctype));
        r.body = strndup(buf + hlen, blen);
        pthread_mutex_lock(&S.lock);
        if (S.nreq < SRV_MAX_REQ)
            S.req[S.nreq++] = r;
        else
            free(r.body);
        pthread_mutex_unlock(&S.lock);

        bool ok;
        if (strstr(r.path, "/namespaces/hang/")) {
            for (int i = 0; i < 30000 && !atomic_load(&S.release) && !atomic_load(&S.stop); i++)
                sleep_ms(1);
        }
        if (strcmp(r.method, "PATCH") == 0 && strstr(r.path, "/events/gone."))
            ok = answer(fd, 404,
                        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":"
                        "\"Failure\",\"message\":\"events \\\"gone\\\" not found\",\"reason\":"
                        "\"NotFound\",\"details\":{\"name\":\"gone\",\"kind\":\"events\"},"
                        "\"code\":404}");
        else
            ok = answer(fd, strcmp(r.method, "POST") == 0 ? 201 : 200, "{\"kind\":\"Event\"}");
        memmove(buf, buf + hlen + blen, have - hlen - blen);
        have -= hlen + blen;
        if (!ok)
            break;
    }
out:
    shutdown(fd, SHUT_RDWR);
    return NULL;
}

static void *listen_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&S.stop)) {
        struct pollfd p = {.fd = S.lfd, .events = POLLIN};
        if (poll(&p, 1, 10) <= 0)
            continue;
        int fd = accept(S.lfd, NULL, NULL);
        if (fd < 0)
            continue;
        pthread_mutex_lock(&S.lock);
        if (S.nconn < SRV_MAX_CONN &&
            pthread_create(&S.conn[S.nconn], NULL, conn_main, (void *)(intptr_t)fd) == 0)
            S.conn_fd[S.nconn++] = fd;
        else
            close(fd);
        pthread_mutex_unlock(&S.lock);
    }
    return NULL;
}

static void srv_start(void)
{
    memset(&S, 0, sizeof(S));
    pthread_mutex_init(&S.lock, NULL);
    S.lfd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(S.lfd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(S.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(S.lfd, 16), 0);
    socklen_t al = sizeof(a);
    ck_assert_int_eq(getsockname(S.lfd, (struct sockaddr *)&a, &al), 0);
    S.port = ntohs(a.sin_port);
    ck_assert_int_eq(pthread_create(&S.thread, NULL, listen_main, NULL), 0);
}

static void srv_stop(void)
{
    atomic_store(&S.stop, true);
    pthread_join(S.thread, NULL);
    for (int i = 0; i < S.nconn; i++)
        shutdown(S.conn_fd[i], SHUT_RDWR);
    for (int i = 0; i < S.nconn; i++) {
        pthread_join(S.conn[i], NULL);
        close(S.conn_fd[i]);
    }
    close(S.lfd);
    for (int i = 0; i < S.nreq; i++)
        free(S.req[i].body);
    pthread_mutex_destroy(&S.lock);
}

static int srv_nreq(void)
{
    pthread_mutex_lock(&S.lock);
    int n = S.nreq;
    pthread_mutex_unlock(&S.lock);
    return n;
}

static struct kop_metrics *M;
static struct kop_client *C;

static void setup(void)
{
    srv_start();
    M = kop_metrics_new(false);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", S.port);
    struct kop_kubeconfig kc = {.server = url};
    struct kop_client_options o = {
        .config = &kc, .metrics = M, .max_retries = -1, .timeout_ms = 10000};
    ck_assert_int_eq(kop_client_new(&o, &C), 0);
}

static void teardown(void)
{
    kop_client_free(C);
    C = NULL;
    srv_stop();
    kop_metrics_free(M);
}

static struct kop_events *new_recorder(size_t queue_size)
{
    struct kop_events_options o = {
        .client = C, .component = "kop", .instance = "kop-0", .queue_size = queue_size};
    struct kop_events *ev = NULL;
    ck_assert_int_eq(kop_events_new(&o, &ev), 0);
    return ev;
}

START_TEST(test_events_recorder_create_patch_fallback)
{
    struct kop_events *ev = new_recorder(0);
    struct kop_event_ref gone = ref_a;
    gone.name = "gone";
    kop_events_record(ev, &ref_a, KOP_EVENT_NORMAL, "Created", "created Service web");
    kop_events_recordf(ev, &ref_a, KOP_EVENT_NORMAL, "Created", "created %s %s", "Service", "web");
    kop_events_record(ev, &gone, KOP_EVENT_WARNING, "Failed", "x");
    kop_events_record(ev, &gone, KOP_EVENT_WARNING, "Failed", "x");
    ck_assert_int_eq(kop_events_flush(ev, 10000), 0);

    struct kop_events_stats st;
    kop_events_get_stats(ev, &st);
    ck_assert_uint_eq(st.created, 3);
    ck_assert_uint_eq(st.patched, 1);
    ck_assert_uint_eq(st.failed, 0);
    ck_assert_uint_eq(st.dropped, 0);

    pthread_mutex_lock(&S.lock);
    ck_assert_int_eq(S.nreq, 5);
    /* 1: create */
    ck_assert_str_eq(S.req[0].method, "POST");
    ck_assert_str_eq(S.req[0].path, "/api/v1/namespaces/team-a/events");
    json_t *b0 = json_loads(S.req[0].body, 0, NULL);
    ck_assert_ptr_nonnull(b0);
    const char *name = json_string_value(json_object_get(json_object_get(b0, "metadata"), "name"));
    ck_assert_ptr_nonnull(name);
    ck_assert_int_eq(strncmp(name, "web.", 4), 0);
    ck_assert_uint_eq(strlen(name), 4 + 16);
    ck_assert_int_eq(json_integer_value(json_object_get(b0, "count")), 1);
    ck_assert_str_eq(json_string_value(json_object_get(b0, "reportingInstance")), "kop-0");
    /* 2: the repeat is a merge patch of that Event with count 2 */
    ck_assert_str_eq(S.req[1].method, "PATCH");
    char want[256];
    snprintf(want, sizeof(want), "/api/v1/namespaces/team-a/events/%s", name);
    ck_assert_str_eq(S.req[1].path, want);
    ck_assert_str_eq(S.req[1].ctype, "application/merge-patch+json");
    json_t *b1 = json_loads(S.req[1].body, 0, NULL);
    ck_assert_ptr_nonnull(b1);
    ck_assert_int_eq(json_integer_value(json_object_get(b1, "count")), 2);
    ck_assert_str_eq(json_string_value(json_object_get(b1, "message")), "created Service web");
    ck_assert_ptr_nonnull(json_object_get(b1, "lastTimestamp"));
    /* 3..5: create, patch -> 404, create again with the same name and count 2 */
    ck_assert_str_eq(S.req[2].method, "POST");
    ck_assert_str_eq(S.req[3].method, "PATCH");
    ck_assert_str_eq(S.req[4].method, "POST");
    json_t *b2 = json_loads(S.req[2].body, 0, NULL);
    json_t *b4 = json_loads(S.req[4].body, 0, NULL);
    ck_assert_ptr_nonnull(b2);
    ck_assert_ptr_nonnull(b4);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(b4, "metadata"), "name")),
                     json_string_value(json_object_get(json_object_get(b2, "metadata"), "name")));
    ck_assert_int_eq(json_integer_value(json_object_get(b4, "count")), 2);
    ck_assert_str_eq(json_string_value(json_object_get(b4, "type")), "Warning");
    pthread_mutex_unlock(&S.lock);
    json_decref(b0);
    json_decref(b1);
    json_decref(b2);
    json_decref(b4);
    kop_events_free(ev);
}
END_TEST

START_TEST(test_events_recorder_queue_full_and_cancel)
{
    struct kop_events *ev = new_recorder(1);
    struct kop_event_ref hang = ref_a;
    hang.namespace = "hang";
    kop_events_record(ev, &hang, KOP_EVENT_NORMAL, "R", "first");
    /* Wait until the sender is stuck in the write. */
    for (int i = 0; i < 30000 && srv_nreq() < 1; i++)
        sleep_ms(1);
    ck_assert_int_eq(srv_nreq(), 1);
    kop_events_record(ev, &hang, KOP_EVENT_NORMAL, "R", "second"); /* queued */
    kop_events_record(ev, &hang, KOP_EVENT_NORMAL, "R", "third");  /* dropped */
    struct kop_events_stats st;
    kop_events_get_stats(ev, &st);
    ck_assert_uint_eq(st.dropped, 1);
    ck_assert_int_eq(kop_events_flush(ev, 20), -ETIMEDOUT);

    atomic_store(&S.release, true);
    ck_assert_int_eq(kop_events_flush(ev, 10000), 0);
    kop_events_get_stats(ev, &st);
    ck_assert_uint_eq(st.created, 2);
    ck_assert_int_eq(srv_nreq(), 2);

    /* free() does not wait for a hung write: the client call is cancelled. */
    atomic_store(&S.release, false);
    kop_events_record(ev, &hang, KOP_EVENT_NORMAL, "R", "fourth");
    for (int i = 0; i < 30000 && srv_nreq() < 3; i++)
        sleep_ms(1);
    ck_assert_int_eq(srv_nreq(), 3);
    /* The server holds the write for 30 s or more: well past this bound. */
    int64_t t0 = kop_clock_now_ns();
    kop_events_free(ev);
    ck_assert_int_lt(kop_clock_now_ns() - t0, 15 * KOP_NSEC_PER_SEC);
    atomic_store(&S.release, true);
    kop_events_record(NULL, &hang, KOP_EVENT_NORMAL, "R", "no-op");
}
END_TEST

static Suite *events_suite(void)
{
    Suite *s = suite_create("events");
    TCase *core = tcase_create("core");
    tcase_add_test(core, test_events_dedup_counts_within_window);
    tcase_add_test(core, test_events_new_event_after_window);
    tcase_add_test(core, test_events_distinct_keys_distinct_events);
    tcase_add_test(core, test_events_lru_bound);
    tcase_add_test(core, test_events_long_name_and_message);
    tcase_add_test(core, test_events_build_shape);
    suite_add_tcase(s, core);
    TCase *rec = tcase_create("recorder");
    tcase_set_timeout(rec, 60);
    tcase_add_checked_fixture(rec, setup, teardown);
    tcase_add_test(rec, test_events_recorder_create_patch_fallback);
    tcase_add_test(rec, test_events_recorder_queue_full_and_cancel);
    suite_add_tcase(s, rec);
    return s;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int r = kop_test_run(events_suite());
    curl_global_cleanup();
    kop_metrics_global_cleanup();
    return r;
}
