/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plain-HTTP endpoints beside the webhook: /metrics (Prometheus text,
 * --metrics-bind-address) and the probes /healthz and /readyz
 * (--health-probe-bind-address), each on its own HTTP server.
 *
 * /healthz answers 200 "ok" while the process serves at all. /readyz runs
 * the registered readiness checks (like controller-runtime's AddReadyzCheck)
 * and answers 200 "ok" when all pass, 503 with the failing check names
 * otherwise; kop_probes_set_shutting_down() makes it fail at once, the
 * first step of a graceful shutdown. "?verbose" lists every check.
 *
 * Thread-safety: new/add_check/start/free single-threaded (before start);
 * set_shutting_down and the handlers from any thread.
 */
#ifndef KOP_PROBES_H
#define KOP_PROBES_H

#include <stdbool.h>
#include <stdint.h>

#include "kop/config.h"

/* A readiness check: true when ready. Called from HTTP worker threads. */
typedef bool kop_probes_check_fn(void *userdata);

struct kop_probes;

/* Returns 0 or -ENOMEM. */
int kop_probes_new(struct kop_probes **ret);

/* Register a named readiness check (name must outlive the probes). At most
 * 8. Returns 0 or -ENOSPC. */
int kop_probes_add_check(struct kop_probes *p, const char *name, kop_probes_check_fn *fn,
                         void *userdata);

/*
 * Start the metrics and probe servers that are enabled in cfg; logs
 * "serving metrics" / "serving health probes" with the bound port. Returns
 * 0 or a negative errno (-EADDRINUSE ...).
 */
int kop_probes_start(struct kop_probes *p, const struct kop_config *cfg);

uint16_t kop_probes_metrics_port(const struct kop_probes *p);
uint16_t kop_probes_health_port(const struct kop_probes *p);

void kop_probes_set_shutting_down(struct kop_probes *p);

/* Stop both servers (in-flight scrapes get timeout_ms) and free. NULL-safe. */
void kop_probes_free(struct kop_probes *p, int timeout_ms);

#endif /* KOP_PROBES_H */
