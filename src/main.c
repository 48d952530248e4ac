/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kop: flags -> logging -> process setup -> manager -> signal wait ->
 * shutdown -> exit status.
 *
 * The start order and the shutdown order are the manager's, written once in
 * the comment block at the top of src/operator/manager.c. main adds what is
 * process-wide: flags (exit 2 on a bad one, every cross-flag rule included),
 * logging, the setup before any thread exists (process_setup), and the
 * watcher that ends the process at once, with status 1, on a second signal
 * or when --shutdown-delay plus --shutdown-timeout run out. Exit status: 0 after a clean
 * shutdown, 1 when start-up failed or the shutdown ran out of time, 2 for
 * bad flags.
 */
#include <curl/curl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "kop/arena.h"
#include "kop/clock.h"
#include "kop/config.h"
#include "kop/log.h"
#include "kop/manager.h"
#include "kop/metrics.h"
#include "kop/thread.h"
#include "kop/tls.h"
#include "kop_version.h"

extern char **environ;

static sigset_t stop_signals;
static int64_t shutdown_deadline_ns;

/* After the first signal: a second one, or the shutdown deadline passing,
 * ends the process at once. */
static void *second_signal_main(void *arg)
{
    (void)arg;
    for (;;) {
        int64_t left_ns = shutdown_deadline_ns - kop_clock_now_ns();
        if (left_ns <= 0) {
            kop_log(KOP_LOG_ERROR, "setup", "shutdown timed out, exiting now", NULL);
            _exit(1);
        }
        struct timespec ts = {.tv_sec = left_ns / KOP_NSEC_PER_SEC,
                              .tv_nsec = left_ns % KOP_NSEC_PER_SEC};
        int sig = sigtimedwait(&stop_signals, NULL, &ts);
        if (sig > 0) {
            kop_log(KOP_LOG_WARN, "setup", "second signal, exiting now",
                    json_pack("{s:i}", "signal", sig));
            _exit(1);
        }
    }
    return NULL;
}

/*
 * Raise the descriptor limit to its hard limit, and lower --max-connections
 * when even that cannot hold them: a TLS connection uses three descriptors
 * (the socket and both ends of the socketpair to the HTTP server), and kop
 * keeps FD_RESERVE for everything else (listeners, API connections, files).
 * A soft limit of 1024, common in containers, would otherwise fit ~330
 * connections whatever the flag says.
 */
#define FD_RESERVE 128

static void fit_descriptor_limit(struct kop_config *cfg)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        struct rlimit want = {.rlim_cur = rl.rlim_max, .rlim_max = rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &want) == 0)
            rl.rlim_cur = rl.rlim_max;
    }
    if (cfg->controller_only || rl.rlim_cur == RLIM_INFINITY)
        return;
    rlim_t fit = rl.rlim_cur > FD_RESERVE ? (rl.rlim_cur - FD_RESERVE) / 3 : 1;
    if ((rlim_t)cfg->max_connections <= fit)
        return;
    kop_log(KOP_LOG_WARN, "setup", "--max-connections lowered to fit the descriptor limit",
            json_pack("{s:i, s:I, s:I}", "requested", cfg->max_connections, "allowed",
                      (json_int_t)fit, "limit", (json_int_t)rl.rlim_cur));
    cfg->max_connections = (int)fit;
    if (cfg->max_connections_per_ip > cfg->max_connections)
        cfg->max_connections_per_ip = cfg->max_connections;
}

/*
 * Process-wide setup, before any thread starts (docs/architecture.md §3.3).
 * Returns 0, or -1 after logging why (exit 1).
 */
static int process_setup(struct kop_config *cfg)
{
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* Large buffers (a review's reply, one big object) come from mmap and
     * go back to the kernel when freed. glibc's default threshold moves up
     * after the first such free, and later ones would stay on the heap:
     * RSS would keep the high-water mark of the largest review. */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    if (kop_tls_global_init() < 0) {
        kop_log(KOP_LOG_ERROR, "setup", "mbedTLS's crypto (psa_crypto_init) failed", NULL);
        return -1;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        kop_log(KOP_LOG_ERROR, "setup", "curl_global_init failed", NULL);
        return -1;
    }
    json_object_seed(0);
    kop_arena_json_install();
    fit_descriptor_limit(cfg);
    if (!kop_metrics_global()) {
        kop_log(KOP_LOG_ERROR, "setup", "out of memory", NULL);
        return -1;
    }
    return 0;
}

/* What process_setup set up, released last. */
static void process_cleanup(void)
{
    kop_metrics_global_cleanup();
    curl_global_cleanup();
}

int main(int argc, char **argv)
{
    struct kop_config cfg;
    struct kop_manager *m = NULL;
    int exit_code = 1;

    kop_config_defaults(&cfg);
    int r = kop_config_parse(&cfg, argc, argv, environ, stdout, stderr);
    if (r != KOP_CONFIG_OK) {
        kop_config_cleanup(&cfg);
        return r == KOP_CONFIG_EXIT ? 0 : 2;
    }
    kop_log_setup(cfg.log_level, cfg.log_format, STDERR_FILENO);
    if (process_setup(&cfg) < 0)
        goto out;

    kop_log(KOP_LOG_INFO, "setup", "starting kop",
            json_pack("{s:s, s:b, s:b}", "version", KOP_VERSION, "webhook", !cfg.controller_only,
                      "reconciler", !cfg.webhook_only));
    if (kop_manager_new(&cfg, &m) < 0 || kop_manager_start(m) < 0)
        goto out;

    int sig = 0;
    while (sigwait(&stop_signals, &sig) != 0)
        ;
    kop_manager_unready(m);
    /* The delay (the webhook serves on while its endpoint is removed) comes
     * before the timeout; terminationGracePeriodSeconds covers both. */
    int64_t delay_ms = kop_config_shutdown_delay_ms(&cfg);
    shutdown_deadline_ns = kop_config_shutdown_deadline_ns(&cfg, kop_clock_now_ns());
    kop_log(KOP_LOG_INFO, "setup", "shutting down",
            json_pack("{s:i, s:I, s:I}", "signal", sig, "delayMs", (json_int_t)delay_ms,
                      "timeoutMs", (json_int_t)cfg.shutdown_timeout_ms));
    pthread_t watcher;
    if (kop_thread_start(&watcher, second_signal_main, NULL, "signals") == 0)
        pthread_detach(watcher);

    /* The manager's deadline is the watcher's. */
    int64_t left_ms = (shutdown_deadline_ns - kop_clock_now_ns()) / KOP_NSEC_PER_MSEC;
    exit_code = kop_manager_shutdown(m, left_ms > 0 ? left_ms : 0) < 0 ? 1 : 0;
out:
    kop_manager_free(m);
    if (exit_code == 0)
        kop_log(KOP_LOG_INFO, "setup", "stopped", NULL);
    process_cleanup();
    kop_config_cleanup(&cfg);
    return exit_code;
}
