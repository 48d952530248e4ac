/* SPDX-License-Identifier: Apache-2.0 */
/*
 * /metrics, /healthz and /readyz on their own plain-HTTP servers. See
 * kop/probes.h.
 */
#include "kop/probes.h"

#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kop/http.h"
#include "kop/log.h"
#include "kop/metrics.h"

#define MAX_CHECKS 8

struct check {
    const char *name;
    kop_probes_check_fn *fn;
    void *userdata;
};

struct kop_probes {
    struct kop_http_server *metrics;
    struct kop_http_server *health;
    struct check checks[MAX_CHECKS];
    size_t n_checks;
    atomic_bool shutting_down;
};

int kop_probes_new(struct kop_probes **ret)
{
    assert(ret);
    struct kop_probes *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    atomic_init(&p->shutting_down, false);
    *ret = p;
    return 0;
}

int kop_probes_add_check(struct kop_probes *p, const char *name, kop_probes_check_fn *fn,
                         void *userdata)
{
    if (p->n_checks >= MAX_CHECKS)
        return -ENOSPC;
    p->checks[p->n_checks++] = (struct check){name, fn, userdata};
    return 0;
}

static void set_text(struct kop_http_response *resp, int status, const char *text)
{
    resp->status = status;
    resp->content_type = "text/plain; charset=utf-8";
    resp->body = strdup(text);
    resp->body_len = resp->body ? strlen(text) : 0;
}

static void on_metrics(void *ud, const struct kop_http_request *req, struct kop_http_response *resp)
{
    char *buf = NULL;
    size_t len = 0;
    if (kop_metrics_render(kop_metrics_global(), &buf, &len) < 0) {
        set_text(resp, 500, "out of memory rendering metrics\n");
        return;
    }
    resp->status = 200;
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
    resp->body = buf;
    resp->body_len = len;
}

static void on_healthz(void *ud, const struct kop_http_request *req, struct kop_http_response *resp)
{
    set_text(resp, 200, "ok");
}

/* controller-runtime's healthz format: "[+]name ok" / "[-]name failed". */
static void on_readyz(void *ud, const struct kop_http_request *req, struct kop_http_response *resp)
{
    struct kop_probes *p = ud;
    bool verbose = req->query && strstr(req->query, "verbose") != NULL;
    char text[2048];
    size_t off = 0;
    bool ok = true;
    for (size_t i = 0; i <= p->n_checks; i++) {
        const char *name;
        bool pass;
        if (i == p->n_checks) {
            name = "shutdown";
            pass = !atomic_load(&p->shutting_down);
        } else {
            name = p->checks[i].name;
            pass = p->checks[i].fn(p->checks[i].userdata);
        }
        ok = ok && pass;
        if ((verbose || !pass) && off < sizeof(text)) {
            int n = snprintf(text + off, sizeof(text) - off, "[%c]%s %s\n", pass ? '+' : '-', name,
                             pass ? "ok" : "failed");
            if (n > 0)
                off += (size_t)n;
        }
    }
    if (off >= sizeof(text))
        off = sizeof(text) - 1;
    text[off] = '\0';
    if (ok) {
        if (verbose && off + sizeof("readyz check passed\n") <= sizeof(text)) {
            memcpy(text + off, "readyz check passed\n", sizeof("readyz check passed\n"));
            set_text(resp, 200, text);
        } else {
            set_text(resp, 200, "ok");
        }
        return;
    }
    char full[2200];
    snprintf(full, sizeof(full), "%sreadyz check failed\n", text);
    set_text(resp, 503, full);
}

/*
 * The kubelet must get its answer within its probe timeout (1 s by default)
 * whatever else connects: one address holds at most PER_IP connections
 * (the kubelet and Prometheus each have their own), a client slow to send
 * its request loses its slot at --request-header-timeout, and an idle one
 * after IDLE_S, however it trickles bytes. At MAX_CONNS a newcomer takes
 * the slot of the longest-idle connection of the address holding the most
 * when that address holds at least two more than the newcomer's (the TLS
 * front's rule, kop/http.h), so addresses filling the server with idle
 * keep-alive connections (16 of them at PER_IP) cannot keep the kubelet
 * out for IDLE_S; a request on its way is never cut. Requests here have no
 * body.
 */
#define MAX_CONNS 256
#define PER_IP 16
#define IDLE_S 10

static int start_server(const struct kop_config *cfg, const struct kop_bind_address *bind,
                        const struct kop_http_route *routes, size_t n, const char *name,
                        const char *what, struct kop_http_server **ret)
{
    if (!bind->enabled)
        return 0;
    int64_t hdr = cfg->request_header_timeout_ms;
    const struct kop_http_server_options o = {
        .host = bind->host[0] ? bind->host : NULL,
        .port = (uint16_t)bind->port,
        .threads = 1,
        .timeout_s = IDLE_S,
        .max_connections = MAX_CONNS,
        .max_per_ip = PER_IP,
        .header_timeout_ms = hdr > 0 && hdr < 3600000 ? (unsigned)hdr : 0,
        .min_body_rate = cfg->min_body_rate,
        .name = name,
        .metric_prefix = "kop",
    };
    struct kop_http_server *srv = NULL;
    int r = kop_http_server_new(&o, routes, n, &srv);
    if (r == 0)
        r = kop_http_server_start(srv);
    if (r < 0) {
        kop_log(KOP_LOG_ERROR, "setup", "cannot start server",
                json_pack("{s:s, s:s, s:i, s:i}", "server", name, "host",
                          bind->host[0] ? bind->host : "*", "port", bind->port, "errno", -r));
        kop_http_server_free(srv);
        return r;
    }
    kop_log(KOP_LOG_INFO, "setup", what,
            json_pack("{s:s, s:i}", "host", bind->host[0] ? bind->host : "*", "port",
                      (int)kop_http_server_port(srv)));
    *ret = srv;
    return 0;
}

int kop_probes_start(struct kop_probes *p, const struct kop_config *cfg)
{
    const struct kop_http_route mroutes[] = {
        {.path = "/metrics", .methods = KOP_HTTP_GET, .fn = on_metrics, .userdata = p},
    };
    const struct kop_http_route hroutes[] = {
        {.path = "/healthz", .methods = KOP_HTTP_GET, .fn = on_healthz, .userdata = p},
        {.path = "/livez", .methods = KOP_HTTP_GET, .fn = on_healthz, .userdata = p},
        {.path = "/readyz", .methods = KOP_HTTP_GET, .fn = on_readyz, .userdata = p},
    };
    int r = start_server(cfg, &cfg->metrics_bind, mroutes, 1, "metrics", "serving metrics",
                         &p->metrics);
    if (r < 0)
        return r;
    return start_server(cfg, &cfg->health_bind, hroutes, 3, "health", "serving health probes",
                        &p->health);
}

uint16_t kop_probes_metrics_port(const struct kop_probes *p)
{
    assert(p);
    return p->metrics ? kop_http_server_port(p->metrics) : 0;
}

uint16_t kop_probes_health_port(const struct kop_probes *p)
{
    assert(p);
    return p->health ? kop_http_server_port(p->health) : 0;
}

void kop_probes_set_shutting_down(struct kop_probes *p)
{
    assert(p);
    atomic_store(&p->shutting_down, true);
}

void kop_probes_free(struct kop_probes *p, int timeout_ms)
{
    if (!p)
        return;
    if (p->metrics)
        kop_http_server_shutdown(p->metrics, timeout_ms);
    if (p->health)
        kop_http_server_shutdown(p->health, timeout_ms);
    kop_http_server_free(p->metrics);
    kop_http_server_free(p->health);
    free(p);
}
