/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for the informer against a small in-test API server (list with
 * paging, chunked watch with bookmarks, ERROR 410, dropped connections,
 * garbage lines): handlers see a consistent add/update/delete sequence,
 * relists synthesize the right events, and the store ends equal to the
 * server's state. (kubesim-based integration tests come later.)
 */
#include "kop/informer.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "kop/json.h"
#include "kop/kubeconfig.h"
#include "kop/metrics.h"
#include "kop/store.h"
#include "testutil.h"

/* ---- a tiny HTTP/1.1 server for the tests ------------------------------- */
/*
 * Plain sockets and one thread per connection, so a test controls every
 * byte: canned Status bodies, Retry-After, chunked watch streams, garbage
 * lines and dropped connections. Loopback, kernel-chosen port.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

struct fsrv_req {
    char method[16];
    char path[4096];
    char user_agent[256];
    char auth[1024];
    char content_type[128];
    char *body;
    size_t body_len;
};

struct fsrv;
/* Write the whole response on fd; return false to close the connection. */
typedef bool (*fsrv_handler_fn)(struct fsrv *s, const struct fsrv_req *req, int fd);

#define FSRV_MAX_CONN 64

struct fsrv {
    int lfd;
    int port;
    pthread_t thread;
    atomic_bool stop;
    fsrv_handler_fn handler;
    void *ud;
    pthread_mutex_t lock;
    int conn_fd[FSRV_MAX_CONN];
    pthread_t conn_thread[FSRV_MAX_CONN];
    int n_conn;
    atomic_int accepted;
};

struct fsrv_conn {
    struct fsrv *s;
    int fd;
};

static bool fsrv_write(int fd, const char *data, size_t len)
{
    while (len) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n <= 0)
            return false;
        data += n;
        len -= (size_t)n;
    }
    return true;
}

static bool fsrv_reply(int fd, int code, const char *extra_headers, const char *ctype,
                       const char *body)
{
    char head[1024];
    size_t blen = body ? strlen(body) : 0;
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s\r\n", code,
                     ctype ? ctype : "application/json", blen, extra_headers ? extra_headers : "");
    return fsrv_write(fd, head, (size_t)n) && fsrv_write(fd, body ? body : "", blen);
}

static bool fsrv_chunk(int fd, const char *data, size_t len)
{
    char head[32];
    int n = snprintf(head, sizeof(head), "%zx\r\n", len);
    return fsrv_write(fd, head, (size_t)n) && fsrv_write(fd, data, len) &&
           fsrv_write(fd, "\r\n", 2);
}

static void hdr_copy(const char *line, const char *name, char *out, size_t len)
{
    size_t nl = strlen(name);
    if (strncasecmp(line, name, nl) != 0 || line[nl] != ':')
        return;
    const char *v = line + nl + 1;
    while (*v == ' ')
        v++;
    snprintf(out, len, "%.*s", (int)strcspn(v, "\r\n"), v);
}

/* Read one request; false on EOF/error. */
static bool fsrv_read_req(int fd, char *buf, size_t cap, size_t *have, struct fsrv_req *req)
{
    memset(req, 0, sizeof(*req));
    char *end = NULL;
    for (;;) {
        buf[*have] = '\0';
        end = strstr(buf, "\r\n\r\n");
        if (end)
            break;
        if (*have + 1 >= cap)
            return false;
        ssize_t n = recv(fd, buf + *have, cap - *have - 1, 0);
        if (n <= 0)
            return false;
        *have += (size_t)n;
    }
    size_t hlen = (size_t)(end - buf) + 4;
    sscanf(buf, "%15s %4095s", req->method, req->path);
    size_t clen = 0;
    for (char *l = strstr(buf, "\r\n"); l && l < end; l = strstr(l + 2, "\r\n")) {
        char *line = l + 2;
        char cl[32] = "";
        hdr_copy(line, "User-Agent", req->user_agent, sizeof(req->user_agent));
        hdr_copy(line, "Authorization", req->auth, sizeof(req->auth));
        hdr_copy(line, "Content-Type", req->content_type, sizeof(req->content_type));
        hdr_copy(line, "Content-Length", cl, sizeof(cl));
        if (cl[0])
            clen = (size_t)strtoul(cl, NULL, 10);
    }
    req->body = calloc(1, clen + 1);
    size_t got = *have - hlen < clen ? *have - hlen : clen;
    memcpy(req->body, buf + hlen, got);
    while (got < clen) {
        ssize_t n = recv(fd, req->body + got, clen - got, 0);
        if (n <= 0) {
            free(req->body);
            req->body = NULL;
            return false;
        }
        got += (size_t)n;
    }
    req->body_len = clen;
    size_t used = hlen + (*have - hlen < clen ? *have - hlen : clen);
    memmove(buf, buf + used, *have - used);
    *have -= used;
    return true;
}

static void *fsrv_conn_main(void *arg)
{
    struct fsrv_conn *c = arg;
    size_t cap = 1 << 16, have = 0;
    char *buf = malloc(cap);
    struct fsrv_req req;
    while (!atomic_load(&c->s->stop) && fsrv_read_req(c->fd, buf, cap, &have, &req)) {
        bool keep = c->s->handler(c->s, &req, c->fd);
        free(req.body);
        if (!keep)
            break;
    }
    shutdown(c->fd, SHUT_RDWR);
    free(buf);
    free(c);
    return NULL;
}

static void *fsrv_main(void *arg)
{
    struct fsrv *s = arg;
    while (!atomic_load(&s->stop)) {
        struct pollfd p = {.fd = s->lfd, .events = POLLIN};
        if (poll(&p, 1, 20) <= 0)
            continue;
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        pthread_mutex_lock(&s->lock);
        if (s->n_conn >= FSRV_MAX_CONN) {
            pthread_mutex_unlock(&s->lock);
            close(fd);
            continue;
        }
        struct fsrv_conn *c = malloc(sizeof(*c));
        c->s = s;
        c->fd = fd;
        s->conn_fd[s->n_conn] = fd;
        pthread_create(&s->conn_thread[s->n_conn], NULL, fsrv_conn_main, c);
        s->n_conn++;
        atomic_fetch_add(&s->accepted, 1);
        pthread_mutex_unlock(&s->lock);
    }
    return NULL;
}

static void fsrv_start(struct fsrv *s, fsrv_handler_fn h, void *ud)
{
    memset(s, 0, sizeof(*s));
    s->handler = h;
    s->ud = ud;
    pthread_mutex_init(&s->lock, NULL);
    s->lfd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(s->lfd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(s->lfd, 64), 0);
    socklen_t al = sizeof(a);
    getsockname(s->lfd, (struct sockaddr *)&a, &al);
    s->port = ntohs(a.sin_port);
    ck_assert_int_eq(pthread_create(&s->thread, NULL, fsrv_main, s), 0);
}

static void fsrv_stop(struct fsrv *s)
{
    atomic_store(&s->stop, true);
    pthread_join(s->thread, NULL);
    pthread_mutex_lock(&s->lock);
    int n = s->n_conn;
    pthread_mutex_unlock(&s->lock);
    for (int i = 0; i < n; i++)
        shutdown(s->conn_fd[i], SHUT_RDWR);
    for (int i = 0; i < n; i++) {
        pthread_join(s->conn_thread[i], NULL);
        close(s->conn_fd[i]);
    }
    close(s->lfd);
    pthread_mutex_destroy(&s->lock);
}

static char *fsrv_url(const struct fsrv *s)
{
    char *u = malloc(64);
    snprintf(u, 64, "http://127.0.0.1:%d", s->port);
    return u;
}
/* ---- end of the tiny HTTP server ---------------------------------------- */

/* ---- the simulated API server ------------------------------------------- */

static pthread_mutex_t sim_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sim_cond = PTHREAD_COND_INITIALIZER;
static json_t *sim_objs;    /* name -> object */
static json_t *sim_history; /* [{rv, type, object}] */
static long sim_rv;
static long sim_compacted; /* watches from an rv below this get 410 */
static bool sim_silent;    /* changes are not recorded in the history */
static int sim_bookmark;   /* send a bookmark on open watches */
static int sim_garbage;    /* send a garbage line */
static int sim_drop;       /* drop open watches */
static int sim_expire;     /* send ERROR 410 on open watches */
static bool sim_http410;   /* answer a watch with HTTP 410 instead */
static int sim_list_fail;  /* LISTs answered with 500 */
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
static json_t *rec_present; /* name -> true while added */
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

static int counts(int *a, int *u, int *d)
{
    pthread_mutex_lock(&rec_lock);
    *a = n_add;
    *u = n_update;
    *d = n_delete;
    int v = n_violations;
    pthread_mutex_unlock(&rec_lock);
    return v;
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
    ck_assert_int_eq(kop_store_new(metrics, &store), 0);
    struct kop_informer_options io = {
        .client = client,
        .store = store,
        .resource = {"", "v1", "configmaps", true},
        .kind = "ConfigMap",
        .namespace = "ns",
        .label_selector = "app.kubernetes.io/managed-by=kop",
        .page_size = 3,
        .backoff_initial_ms = 20,
        .backoff_max_ms = 100,
        .idle_timeout_ms = 2000,
        .on_add = rec_add,
        .on_update = rec_update,
        .on_delete = rec_delete,
    };
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
    json_decref(sim_objs);
    json_decref(sim_history);
    sim_objs = sim_history = NULL;
}

/* The store holds exactly the server's objects, at the same versions. */
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

START_TEST(test_informer_list_watch_paging)
{
    start_synced(7);
    struct kop_informer_stats st;
    kop_informer_stats(inf, &st);
    ck_assert_uint_eq(st.pages, 3); /* 7 objects, limit 3 */
    ck_assert_uint_eq(st.lists, 1);
    ck_assert_str_eq(st.resource_version, "107");
    int a, u, d;
    ck_assert_int_eq(counts(&a, &u, &d), 0);
    ck_assert_int_eq(a, 7);
    ck_assert(store_matches(NULL));
    /* List items got kind/apiVersion; managedFields were stripped. */
    json_t *o = kop_store_get(store, "ConfigMap", "ns", "cm-03");
    ck_assert_str_eq(kop_json_path_str(o, "kind"), "ConfigMap");
    ck_assert_str_eq(kop_json_path_str(o, "apiVersion"), "v1");
    ck_assert_ptr_null(kop_json_path(o, "metadata.managedFields"));
    json_decref(o);

    int one = 1;
    ck_assert(eventually(watching, &one));
    sim_put("cm-03", 33);
    sim_put("new", 1);
    sim_del("cm-00");
    ck_assert(eventually(store_matches, NULL));
    ck_assert_int_eq(counts(&a, &u, &d), 0);
    ck_assert_int_eq(a, 8);
    ck_assert_int_eq(u, 1);
    ck_assert_int_eq(d, 1);
    o = kop_store_get(store, "ConfigMap", "ns", "cm-03");
    ck_assert_int_eq(json_integer_value(kop_json_path(o, "data.v")), 33);
    json_decref(o);
}
END_TEST

static bool rv_is(void *arg)
{
    struct kop_informer_stats st;
    kop_informer_stats(inf, &st);
    return strcmp(st.resource_version, arg) == 0;
}

START_TEST(test_informer_bookmark_and_resume)
{
    start_synced(2);
    int one = 1;
    ck_assert(eventually(watching, &one));
    sim_knob(&sim_bookmark); /* bookmark rv = 102 + 1000 */
    ck_assert(eventually(rv_is, "1102"));
    /* Drop the watch: the informer resumes from the bookmark, without a
     * relist, and still gets what happened meanwhile. */
    sim_knob(&sim_drop);
    int two = 2;
    ck_assert(eventually(watching, &two));
    sim_put("late", 5); /* rv 103, but the history replays after 1102 only */
    sim_put("later", 6);
    struct kop_informer_stats st;
    kop_informer_stats(inf, &st);
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
    int one = 1;
    ck_assert(eventually(watching, &one));
    sim_knob(&sim_drop);
    sim_put("cm-01", 100); /* recorded in the history: replayed on resume */
    sim_del("cm-02");
    ck_assert(eventually(store_matches, NULL));
    int a, u, d;
    ck_assert_int_eq(counts(&a, &u, &d), 0);
    ck_assert_int_eq(u, 1);
    ck_assert_int_eq(d, 1);
    struct kop_informer_stats st;
    kop_informer_stats(inf, &st);
    ck_assert_uint_eq(st.lists, 1); /* resumed, not relisted */
    ck_assert_uint_ge(st.watches, 2);
}
END_TEST

START_TEST(test_informer_relist_on_410)
{
    start_synced(4);
    int one = 1;
    ck_assert(eventually(watching, &one));
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
    int a, u, d;
    ck_assert_int_eq(counts(&a, &u, &d), 0);
    ck_assert_int_eq(a, 5);
    ck_assert_int_eq(u, 1); /* cm-01 only: unchanged objects make no event */
    ck_assert_int_eq(d, 1);
    struct kop_informer_stats st;
    kop_informer_stats(inf, &st);
    ck_assert_uint_eq(st.lists, 2);
}
END_TEST

START_TEST(test_informer_http_410_on_resume)
{
    start_synced(2);
    int one = 1;
    ck_assert(eventually(watching, &one));
    pthread_mutex_lock(&sim_lock);
    sim_compacted = 1000000;
    sim_http410 = true;
    sim_silent = true;
    pthread_mutex_unlock(&sim_lock);
    sim_del("cm-00");
    sim_knob(&sim_drop);
    ck_assert(eventually(store_matches, NULL));
    int a, u, d;
    ck_assert_int_eq(counts(&a, &u, &d), 0);
    ck_assert_int_eq(d, 1);
    struct kop_informer_stats st;
    kop_informer_stats(inf, &st);
    ck_assert_uint_ge(st.lists, 2);
}
END_TEST

START_TEST(test_informer_garbage_reconnects)
{
    start_synced(1);
    int one = 1;
    ck_assert(eventually(watching, &one));
    sim_knob(&sim_garbage);
    int two = 2;
    ck_assert(eventually(watching, &two));
    sim_put("after", 1);
    ck_assert(eventually(store_matches, NULL));
    struct kop_informer_stats st;
    kop_informer_stats(inf, &st);
    ck_assert_uint_ge(st.errors, 1);
    ck_assert_uint_eq(st.lists, 1);
    int a, u, d;
    ck_assert_int_eq(counts(&a, &u, &d), 0);
    ck_assert_int_eq(a, 2);
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
    int one = 1;
    ck_assert(eventually(watching, &one));
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
    tcase_add_test(tc, test_informer_not_synced_and_stop);
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
