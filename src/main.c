/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kop: flags -> start order -> signal wait -> shutdown order.
 *
 * Start order:
 *   1. flags (exit 2 on a bad one), logging;
 *   2. process-wide setup before any thread exists: signals blocked in
 *      every thread (main waits for them with sigwait), SIGPIPE ignored,
 *      curl_global_init, jansson's hash seed, the arena allocator hook,
 *      the metrics registry;
 *   3. metrics and health-probe servers (/readyz fails until ready);
 *   4. the webhook server (TLS front + HTTP), when not --controller-only.
 *
 * Shutdown order, on SIGTERM or SIGINT, each step bounded by what is left
 * of --shutdown-timeout (a second signal, or running out of time, exits at
 * once with status 1):
 *   1. /readyz fails, so the Service stops sending new webhook calls here;
 *   2. the webhook listener stops accepting; in-flight requests are
 *      answered, idle keep-alive connections closed;
 *   3. metrics and probe servers stop;
 *   4. process-wide state is released; exit 0.
 * (The reconciler, informers and leader election join between steps 2
 * and 3 when they run: informers stop, workers drain, the lease is
 * released.)
 */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kop/arena.h"
#include "kop/clock.h"
#include "kop/config.h"
#include "kop/log.h"
#include "kop/metrics.h"
#include "kop/probes.h"
#include "kop/webhook.h"
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

static int remaining_ms(void)
{
    int64_t left = (shutdown_deadline_ns - kop_clock_now_ns()) / KOP_NSEC_PER_MSEC;
    return left > 0 ? (int)left : 0;
}

static bool webhook_ready(void *ud)
{
    return kop_webhook_ready(ud);
}

int main(int argc, char **argv)
{
    struct kop_config cfg;
    struct kop_probes *probes = NULL;
    struct kop_webhook *webhook = NULL;
    int exit_code = 1;
    int r;

    kop_config_defaults(&cfg);
    r = kop_config_parse(&cfg, argc, argv, environ, stdout, stderr);
    if (r != KOP_CONFIG_OK) {
        kop_config_cleanup(&cfg);
        return r == KOP_CONFIG_EXIT ? 0 : 2;
    }
    if (!cfg.webhook_only) {
        fprintf(stderr, "kop: the reconciler is not part of this build yet; run with "
                        "--webhook-only\nRun 'kop --help' for usage.\n");
        kop_config_cleanup(&cfg);
        return 2;
    }
    if (cfg.self_signed_certs) {
        fprintf(stderr, "kop: --self-signed-certs is not part of this build yet; use "
                        "--cert-dir with scripts/gen-certs.sh or cert-manager\n");
        kop_config_cleanup(&cfg);
        return 2;
    }
    kop_log_setup(cfg.log_level, cfg.log_format, STDERR_FILENO);

    /* Process-wide setup, before any thread starts. */
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        kop_log(KOP_LOG_ERROR, "setup", "curl_global_init failed", NULL);
        goto out;
    }
    json_object_seed(0);
    kop_arena_json_install();
    if (!kop_metrics_global()) {
        kop_log(KOP_LOG_ERROR, "setup", "out of memory", NULL);
        goto out;
    }

    kop_log(KOP_LOG_INFO, "setup", "starting kop",
            json_pack("{s:s, s:b, s:b}", "version", KOP_VERSION, "webhook", !cfg.controller_only,
                      "reconciler", !cfg.webhook_only));

    r = kop_probes_new(&probes);
    if (r < 0)
        goto out;
    r = kop_probes_start(probes, &cfg);
    if (r < 0)
        goto out;

    if (!cfg.controller_only) {
        const struct kop_webhook_options wopts = {.cfg = &cfg};
        r = kop_webhook_start(&wopts, &webhook);
        if (r < 0) {
            char err[128];
            kop_log(KOP_LOG_ERROR, "setup", "cannot start the webhook server",
                    json_pack("{s:s, s:s, s:i}", "certDir", cfg.cert_dir ? cfg.cert_dir : "",
                              "error", strerror_r(-r, err, sizeof(err)), "errno", -r));
            goto out;
        }
        kop_probes_add_check(probes, "webhook", webhook_ready, webhook);
    }

    int sig = 0;
    while (sigwait(&stop_signals, &sig) != 0)
        ;
    shutdown_deadline_ns = kop_clock_now_ns() + cfg.shutdown_timeout_ms * KOP_NSEC_PER_MSEC;
    kop_log(
        KOP_LOG_INFO, "setup", "shutting down",
        json_pack("{s:i, s:I}", "signal", sig, "timeoutMs", (json_int_t)cfg.shutdown_timeout_ms));
    pthread_t watcher;
    if (pthread_create(&watcher, NULL, second_signal_main, NULL) == 0)
        pthread_detach(watcher);

    /* 1. readiness false */
    kop_probes_set_shutting_down(probes);
    /* 2. webhook: stop accepting, finish in-flight requests */
    if (webhook && kop_webhook_shutdown(webhook, remaining_ms()) < 0)
        kop_log(KOP_LOG_WARN, "setup", "in-flight webhook requests cut short", NULL);
    exit_code = 0;
out:
    /* 3. metrics and probe servers, 4. process-wide state */
    kop_webhook_free(webhook);
    kop_probes_free(probes, remaining_ms());
    if (exit_code == 0)
        kop_log(KOP_LOG_INFO, "setup", "stopped", NULL);
    kop_metrics_global_cleanup();
    curl_global_cleanup();
    kop_config_cleanup(&cfg);
    return exit_code;
}
