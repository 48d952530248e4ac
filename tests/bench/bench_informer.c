/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Benchmark of the informer's initial sync (docs/performance.md §3.4: store memory per
 * cached child object < 2 KiB). Starts kubesim, creates N Deployments
 * shaped like kop's children through kop_client (token bucket off, four
 * writer threads sharing one client), then starts an informer on them and
 * measures:
 *   - LIST+sync: informer start until kop_informer_has_synced (paged LIST
 *     of 500, every item put into the store);
 *   - a plain paged LIST of the same objects (the network + JSON share);
 *   - kop_store_bytes / count, and the process heap (mallinfo2) and RSS
 *     deltas around the sync, after malloc_trim, plus the peak RSS (the
 *     informer holds every decoded LIST page until the store is filled).
 *
 * Usage: bench_informer [-n N] [path/to/kubesim]
 * (default kubesim: $KOP_BUILD_ROOT/tests/kubesim/kubesim). Build and run
 * with scripts/bench-informer.sh.
 */
#include "kop/client.h"
#include "kop/informer.h"
#include "kop/kubeconfig.h"
#include "kop/log.h"
#include "kop/metrics.h"
#include "kop/store.h"

#include <curl/curl.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WRITERS 4
#define NS "bench"

static const struct kop_resource deploy_res = {"apps", "v1", "deployments", true};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (!f)
        return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static size_t heap_used(void)
{
    malloc_trim(0);
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static void die(const char *what, int r)
{
    fprintf(stderr, "bench_informer: %s: %d\n", what, r);
    exit(1);
}

struct writer {
    struct kop_client *c;
    long from, to;
};

static json_t *deployment(long i)
{
    char name[64];
    snprintf(name, sizeof(name), "myresource-%05ld", i);
    return json_pack("{s:s,s:s,s:{s:s,s:{s:s,s:s,s:s}},s:{s:i,s:{s:{s:s,s:s}},s:{s:{s:{s:s,s:s}},"
                     "s:{s:[{s:s,s:s,s:[{s:s,s:i,s:s}]}]}}}}",
                     "apiVersion", "apps/v1", "kind", "Deployment", "metadata", "name", name,
                     "labels", "app.kubernetes.io/name", "myresource", "app.kubernetes.io/instance",
                     name, "app.kubernetes.io/managed-by", "kop", "spec", "replicas", 3, "selector",
                     "matchLabels", "app.kubernetes.io/name", "myresource",
                     "app.kubernetes.io/instance", name, "template", "metadata", "labels",
                     "app.kubernetes.io/name", "myresource", "app.kubernetes.io/instance", name,
                     "spec", "containers", "name", "app", "image", "nginx:1.14.2", "ports", "name",
                     "http", "containerPort", 80, "protocol", "TCP");
}

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    for (long i = w->from; i < w->to; i++) {
        json_t *d = deployment(i);
        struct kop_api_status st;
        int r = kop_client_create(w->c, &deploy_res, NS, d, &st, NULL);
        json_decref(d);
        if (r < 0 && r != -EEXIST) {
            fprintf(stderr, "create %ld: %d %s\n", i, r, st.message);
            exit(1);
        }
    }
    return NULL;
}

static pid_t start_kubesim(const char *bin, const char *dir, char *url, size_t url_len)
{
    char kc[4096];
    snprintf(kc, sizeof(kc), "%s/kubeconfig", dir);
    int fds[2];
    if (pipe(fds) < 0)
        die("pipe", -errno);
    pid_t pid = fork();
    if (pid < 0)
        die("fork", -errno);
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execl(bin, bin, "--listen", "127.0.0.1:0", "--kubeconfig-out", kc,
              "--deployment-ready-delay", "10ms", "--history-size", "1000", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    FILE *f = fdopen(fds[0], "r");
    if (!f || !fgets(url, (int)url_len, f))
        die("kubesim did not print its URL", -EIO);
    url[strcspn(url, "\r\n")] = '\0';
    /* Keep the pipe open (kubesim may log to stdout); never read again. */
    return pid;
}

int main(int argc, char **argv)
{
    long n = 10000;
    const char *bin = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            char *end = NULL;
            n = strtol(argv[++i], &end, 10);
            if (!end || *end || n <= 0)
                die("bad -n", -EINVAL);
        } else {
            bin = argv[i];
        }
    }
    char defbin[4096];
    if (!bin) {
        const char *root = getenv("KOP_BUILD_ROOT");
        snprintf(defbin, sizeof(defbin), "%s/tests/kubesim/kubesim", root ? root : "build");
        bin = defbin;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    kop_log_setup(KOP_LOG_ERROR, KOP_LOG_FORMAT_TEXT, 2);

    const char *tmp = getenv("TMPDIR");
    char dir[2048];
    snprintf(dir, sizeof(dir), "%s/bench-informer-XXXXXX", tmp && *tmp ? tmp : P_tmpdir);
    if (!mkdtemp(dir))
        die("mkdtemp", -errno);
    char url[256];
    pid_t sim = start_kubesim(bin, dir, url, sizeof(url));
    char kcpath[4096];
    snprintf(kcpath, sizeof(kcpath), "%s/kubeconfig", dir);
    struct kop_kubeconfig kc;
    int r = kop_kubeconfig_load_file(kcpath, NULL, &kc);
    if (r < 0)
        die("kubeconfig", r);
    struct kop_metrics *m = kop_metrics_new(false);
    struct kop_client_options co = {.config = &kc, .metrics = m}; /* no token bucket */
    struct kop_client *c = NULL;
    r = kop_client_new(&co, &c);
    if (r < 0)
        die("client", r);
    kop_kubeconfig_cleanup(&kc);
    json_t *ns = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace", "metadata",
                           "name", NS);
    static const struct kop_resource ns_res = {NULL, "v1", "namespaces", false};
    r = kop_client_create(c, &ns_res, NULL, ns, NULL, NULL);
    json_decref(ns);
    if (r < 0)
        die("namespace", r);

    double t0 = now_s();
    struct writer w[WRITERS];
    pthread_t th[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (struct writer){.c = c, .from = n * i / WRITERS, .to = n * (i + 1) / WRITERS};
        pthread_create(&th[i], NULL, writer_main, &w[i]);
    }
    for (int i = 0; i < WRITERS; i++)
        pthread_join(th[i], NULL);
    double t_create = now_s() - t0;
    /* Let kubesim's Deployment controller write the statuses. */
    struct timespec settle = {.tv_sec = 1, .tv_nsec = 0};
    nanosleep(&settle, NULL);

    /* A plain paged LIST for reference. */
    t0 = now_s();
    char *cont = NULL;
    long listed = 0;
    do {
        struct kop_list_options lo = {.limit = 500, .continue_token = cont};
        json_t *page = NULL;
        r = kop_client_list(c, &deploy_res, NS, &lo, NULL, &page);
        if (r < 0)
            die("list", r);
        listed += (long)json_array_size(json_object_get(page, "items"));
        const char *next =
            json_string_value(json_object_get(json_object_get(page, "metadata"), "continue"));
        free(cont);
        cont = next && *next ? strdup(next) : NULL;
        json_decref(page);
    } while (cont);
    double t_list = now_s() - t0;

    size_t heap0 = heap_used();
    long rss0 = rss_kib();
    struct kop_store *store = NULL;
    r = kop_store_new(m, "kop_store", &store);
    if (r < 0)
        die("store", r);
    struct kop_informer_options io = {.client = c,
                                      .store = store,
                                      .resource = deploy_res,
                                      .kind = "Deployment",
                                      .namespace = NS,
                                      .label_selector = "app.kubernetes.io/managed-by=kop"};
    struct kop_informer *inf = NULL;
    r = kop_informer_new(&io, &inf);
    if (r < 0)
        die("informer", r);
    t0 = now_s();
    r = kop_informer_start(inf);
    if (r == 0)
        r = kop_informer_wait_synced(inf, 600000);
    double t_sync = now_s() - t0;
    if (r < 0)
        die("sync", r);
    /* has_synced turns true just before the LIST's decoded pages are
     * released; measure once the informer has moved on to its watch. */
    for (;;) {
        struct kop_informer_stats ist;
        kop_informer_stats(inf, &ist);
        if (ist.watches > 0)
            break;
        struct timespec ms = {.tv_sec = 0, .tv_nsec = 1000000};
        nanosleep(&ms, NULL);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    size_t count = kop_store_count(store);
    size_t bytes = kop_store_bytes(store);
    size_t heap1 = heap_used();
    long rss1 = rss_kib();

    printf("objects created:        %ld (%d threads, limiter off) in %.2f s (%.0f/s)\n", n, WRITERS,
           t_create, (double)n / t_create);
    printf("plain paged LIST:       %ld items in %.3f s (pages of 500)\n", listed, t_list);
    printf("informer LIST+sync:     %zu objects in %.3f s (%.1f us/object)\n", count, t_sync,
           t_sync * 1e6 / (double)(count ? count : 1));
    printf("kop_store_bytes/object: %.0f B (%zu B total)\n", (double)bytes / (double)count, bytes);
    printf("heap delta/object:      %.0f B (mallinfo2 after malloc_trim; store + informer)\n",
           ((double)heap1 - (double)heap0) / (double)count);
    printf("RSS delta:              %ld KiB (%.0f B/object)\n", rss1 - rss0,
           (double)(rss1 - rss0) * 1024.0 / (double)count);
    printf("RSS before sync:        %ld KiB; after: %ld KiB; peak (ru_maxrss): %ld KiB\n", rss0,
           rss1, ru.ru_maxrss);

    kop_informer_free(inf);
    kop_store_free(store);
    kop_client_free(c);
    kop_metrics_free(m);
    kill(sim, SIGTERM);
    waitpid(sim, NULL, 0);
    unlink(kcpath);
    rmdir(dir);
    curl_global_cleanup();
    return count == (size_t)n ? 0 : 1;
}
