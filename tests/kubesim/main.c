/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim entry point: flags, the certificate and kubeconfig, the initial
 * namespaces, the HTTPS server and the controller thread; prints the URL
 * on stdout (one line) and runs until SIGTERM/SIGINT.
 *
 * Shutdown order: controllers stop (sets ks->stopping, which ends every
 * watch stream), then the HTTP daemon (joins the connection threads),
 * then the store is freed.
 */
#include "kubesim.h"

#include <curl/curl.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

static const char usage[] =
    "usage: kubesim [options]\n"
    "  --listen HOST:PORT            address (default 127.0.0.1:0)\n"
    "  --kubeconfig-out FILE         write a kubeconfig for the server\n"
    "  --ca-out FILE                 write the CA certificate (PEM)\n"
    "  --token TOKEN                 bearer token (default: random; POST /_kubesim/token\n"
    "                                {\"token\": \"NEW\"} replaces it at run time)\n"
    "  --service NS/NAME=HOST:PORT[,HOST:PORT...]\n"
    "                                a webhook Service's endpoints, all ready (repeatable;\n"
    "                                also /_kubesim/services and /_kubesim/endpoints)\n"
    "  --endpoint-propagation-delay DUR\n"
    "                                until new connections see an endpoint change posted\n"
    "                                to /_kubesim/endpoints (default 1s)\n"
    "  --webhook-idle-timeout DUR    close pooled webhook connections idle that long\n"
    "                                (default 90s)\n"
    "  --tracing                     send a W3C traceparent on webhook calls\n"
    "  --strict-fields               check every write of a built-in kind as with\n"
    "                                fieldValidation=Strict (tests of kop's own writes)\n"
    "  --no-controller-events        the controllers and the scheduler write no Events\n"
    "                                (benchmarks: a few writes less per object)\n"
    "  --webhook-skip-idle-check     test hook: reuse pooled webhook connections without\n"
    "                                first noticing that the server closed them\n"
    "  --deployment-ready-delay DUR  Deployment status delay (default 200ms)\n"
    "  --bookmark-interval DUR       watch bookmark period (default 1s)\n"
    "  --event-ttl DUR               an Event is deleted that long after its last write\n"
    "                                (default 1h, the apiserver's --event-ttl)\n"
    "  --node-lease-duration DUR     the kubelet's Node Lease duration, whole seconds\n"
    "                                (default 40s; renewed every quarter of it)\n"
    "  --history-size N              watch history length (default 10000)\n"
    "  --seed N                      fault RNG seed (default 1)\n"
    "  --fault VERB:CODE:RATE[:RETRY_AFTER][:resource=R][:group=G][:namespace=N]\n"
    "                                inject errors (repeatable; group= is core)\n"
    "  --latency DUR                 add latency to every request\n"
    "  --feature NAME                turn on a feature: StorageVersionMigrator (serves\n"
    "                                storagemigration.k8s.io/v1beta1 and runs migrations)\n"
    "  --token-auth-file FILE        more users: the apiserver's static token file (CSV\n"
    "                                token,user,uid[,\"group1,group2\"])\n"
    "  --audit-log-path FILE         write an audit.k8s.io/v1 Event line per request\n"
    "                                (\"-\": standard output)\n"
    "  --audit-level LEVEL           Metadata (default) or Request (adds the request body)\n"
    "  --authorization-mode MODE     RBAC (default: every request authorized by the\n"
    "                                stored RBAC and the bootstrap policy) or AlwaysAllow\n"
    "  --cel-helper DIR              the CEL helper's directory (celhelper.mjs and its npm\n"
    "                                packages; default $KUBESIM_CEL_HELPER, else the source\n"
    "                                tree's tests/kubesim/cel); node is taken from PATH\n"
    "  --cel-timeout DUR             how long a CEL helper answer may take (default 10s)\n"
    "  --verbose                     log requests to stderr\n";

/* "200ms", "1s", "2m", "1h" or plain milliseconds. -1 on error. */
static long parse_ms(const char *s)
{
    char *end = NULL;
    double v = strtod(s, &end);
    if (!end || end == s || v < 0)
        return -1;
    if (*end == '\0' || strcmp(end, "ms") == 0)
        return (long)v;
    if (strcmp(end, "s") == 0)
        return (long)(v * 1000);
    if (strcmp(end, "m") == 0)
        return (long)(v * 60000);
    if (strcmp(end, "h") == 0)
        return (long)(v * 3600000);
    return -1;
}

static void create_namespace(struct ks_server *ks, const char *name)
{
    const struct ks_res *def = ks_res_find(ks, "", "namespaces");
    char uid[40], now[32];
    ks_uuid(uid, sizeof(uid));
    ks_now_rfc3339(now, sizeof(now));
    json_t *obj = json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:{s:s}},s:{s:[s]},s:{s:s}}", "kind",
                            "Namespace", "apiVersion", "v1", "metadata", "name", name, "uid", uid,
                            "creationTimestamp", now, "labels", "kubernetes.io/metadata.name", name,
                            "spec", "finalizers", "kubernetes", "status", "phase", "Active");
    ks_typed_order(obj);
    ks_store_put(ks, def, name, obj);
}

static int run(int argc, char **argv)
{
    struct ks_server ks_storage;
    struct ks_server *ks = &ks_storage;
    const char *listen = "127.0.0.1:0";
    const char *kubeconfig = NULL;
    const char *ca_out = NULL;
    char *cert = NULL, *key = NULL;
    void *daemon = NULL;
    int rc = 1;
    bool controllers = false;
    long idle_ms = 90000; /* net/http DefaultTransport IdleConnTimeout */
    const char *token_file = NULL, *audit_path = NULL, *audit_level = NULL;
    const char *cel_dir = NULL;
    long cel_timeout_ms = 10000;
    bool cel = false;

    memset(ks, 0, sizeof(*ks));
    pthread_mutex_init(&ks->lock, NULL);
    pthread_mutex_init(&ks->audit_lock, NULL);
    ks_users_init(ks);
    pthread_cond_init(&ks->changed, NULL);
    ks->ready_delay_ms = 200;
    ks->node_lease_ms = 40000;
    ks->event_ttl_ms = 60L * 60 * 1000;
    ks->record_events = true;
    ks->bookmark_ms = 1000;
    ks->history_cap = 10000;
    ks->rng = 1;
    ks->propagation_ms = 1000;
    ks->next_ip = 1;
    ks->stats_writes = json_object();
    ks->stats_requests = json_array();

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = true;
        int bad = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            rc = 0;
            goto out;
        } else if (strcmp(a, "--verbose") == 0) {
            ks->verbose = true;
            takes = false;
        } else if (strcmp(a, "--tracing") == 0) {
            ks->tracing = true;
            takes = false;
        } else if (strcmp(a, "--strict-fields") == 0) {
            ks->strict_fields = true;
            takes = false;
        } else if (strcmp(a, "--webhook-skip-idle-check") == 0) {
            ks->skip_idle_check = true;
            takes = false;
        } else if (strcmp(a, "--no-controller-events") == 0) {
            ks->record_events = false;
            takes = false;
        } else if (!v) {
            bad = 1;
        } else if (strcmp(a, "--listen") == 0) {
            listen = v;
        } else if (strcmp(a, "--kubeconfig-out") == 0) {
            kubeconfig = v;
        } else if (strcmp(a, "--ca-out") == 0) {
            ca_out = v;
        } else if (strcmp(a, "--token-auth-file") == 0) {
            token_file = v;
        } else if (strcmp(a, "--audit-log-path") == 0) {
            audit_path = v;
        } else if (strcmp(a, "--cel-helper") == 0) {
            cel_dir = v;
        } else if (strcmp(a, "--cel-timeout") == 0) {
            cel_timeout_ms = parse_ms(v);
            bad = cel_timeout_ms <= 0;
        } else if (strcmp(a, "--audit-level") == 0) {
            audit_level = v;
        } else if (strcmp(a, "--authorization-mode") == 0) {
            bad = strcmp(v, "RBAC") != 0 && strcmp(v, "AlwaysAllow") != 0;
            ks->always_allow = strcmp(v, "AlwaysAllow") == 0;
        } else if (strcmp(a, "--token") == 0) {
            free(ks->token);
            ks->token = ks_strdup(v);
        } else if (strcmp(a, "--service") == 0) {
            bad = ks_services_add_flag(ks, v) != 0;
        } else if (strcmp(a, "--webhook-idle-timeout") == 0) {
            idle_ms = parse_ms(v);
            bad = idle_ms <= 0;
        } else if (strcmp(a, "--endpoint-propagation-delay") == 0) {
            ks->propagation_ms = parse_ms(v);
            bad = ks->propagation_ms < 0;
        } else if (strcmp(a, "--deployment-ready-delay") == 0) {
            ks->ready_delay_ms = parse_ms(v);
            bad = ks->ready_delay_ms < 0;
        } else if (strcmp(a, "--event-ttl") == 0) {
            ks->event_ttl_ms = parse_ms(v);
            bad = ks->event_ttl_ms <= 0;
        } else if (strcmp(a, "--node-lease-duration") == 0) {
            ks->node_lease_ms = parse_ms(v);
            bad = ks->node_lease_ms < 1000 || ks->node_lease_ms % 1000 != 0;
        } else if (strcmp(a, "--bookmark-interval") == 0) {
            ks->bookmark_ms = parse_ms(v);
            bad = ks->bookmark_ms <= 0;
        } else if (strcmp(a, "--latency") == 0) {
            ks->latency_ms = parse_ms(v);
            bad = ks->latency_ms < 0;
        } else if (strcmp(a, "--history-size") == 0) {
            char *end = NULL;
            long n = strtol(v, &end, 10);
            bad = !end || *end || n < 16;
            ks->history_cap = (size_t)n;
        } else if (strcmp(a, "--seed") == 0) {
            char *end = NULL;
            ks->rng = strtoull(v, &end, 10);
            bad = !end || *end;
        } else if (strcmp(a, "--fault") == 0) {
            bad = ks_faults_add_flag(ks, v) != 0;
        } else if (strcmp(a, "--feature") == 0) {
            /* Feature gates, by the apiserver's names. */
            if (strcmp(v, "StorageVersionMigrator") == 0)
                ks->feature_svm = true;
            else
                bad = 1;
        } else {
            fprintf(stderr, "kubesim: unknown flag %s\n%s", a, usage);
            rc = 2;
            goto out;
        }
        if (bad) {
            fprintf(stderr, "kubesim: bad or missing value for %s\n", a);
            rc = 2;
            goto out;
        }
        if (takes)
            i++;
    }
    ks->ep_rng = ks->rng ^ 0x5851f42d4c957f2dull;
    if (audit_level && !audit_path) {
        fprintf(stderr, "kubesim: --audit-level needs --audit-log-path\n");
        rc = 2;
        goto out;
    }
    char *err = NULL;
    if ((token_file && ks_users_load(ks, token_file, &err) != 0) ||
        (audit_path &&
         ks_audit_open(ks, audit_path, audit_level ? audit_level : "Metadata", &err) != 0)) {
        fprintf(stderr, "kubesim: %s\n", err);
        free(err);
        rc = 2;
        goto out;
    }
    ks_cel_init(cel_dir, cel_timeout_ms);
    cel = true;
    if (ks_whclient_new(ks, idle_ms) != 0) {
        fprintf(stderr, "kubesim: out of memory\n");
        goto out;
    }
    if (!ks->token) {
        unsigned char raw[16];
        if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
            fprintf(stderr, "kubesim: getrandom failed\n");
            goto out;
        }
        ks->token = calloc(1, 33);
        if (!ks->token)
            goto out;
        for (size_t i = 0; i < sizeof(raw); i++)
            snprintf(ks->token + 2 * i, 3, "%02x", raw[i]);
    }

    /* Signals go to sigwait below, never to a worker thread. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);

    if (ks_store_init(ks) != 0 || ks_resources_init(ks) != 0) {
        fprintf(stderr, "kubesim: out of memory\n");
        goto out;
    }
    pthread_mutex_lock(&ks->lock);
    create_namespace(ks, "default");
    create_namespace(ks, "kube-node-lease");
    create_namespace(ks, "kube-public");
    create_namespace(ks, "kube-system");
    ks_authz_bootstrap(ks);
    ks_nodes_start(ks);
    pthread_mutex_unlock(&ks->lock);

    if (ks_certs_generate(&ks->ca_pem, &cert, &key) != 0) {
        fprintf(stderr, "kubesim: cannot generate certificates\n");
        goto out;
    }
    pthread_mutex_lock(&ks->lock);
    ks_controllers_namespaced(ks);
    ks->ns_dirty = false;
    pthread_mutex_unlock(&ks->lock);
    if (ks_controllers_start(ks) != 0) {
        fprintf(stderr, "kubesim: cannot start controllers\n");
        goto out;
    }
    controllers = true;
    if (ks_migration_start(ks) != 0) {
        fprintf(stderr, "kubesim: cannot start the storage version migrator\n");
        goto out;
    }
    if (ks_http_start(ks, listen, cert, key, &daemon) != 0) {
        fprintf(stderr, "kubesim: cannot listen on %s\n", listen);
        goto out;
    }
    pthread_mutex_lock(&ks->lock); /* the port is known: default/kubernetes */
    ks_controllers_namespaced(ks);
    pthread_mutex_unlock(&ks->lock);
    if (kubeconfig && ks_write_kubeconfig(kubeconfig, ks->url, ks->ca_pem, ks->token) != 0) {
        fprintf(stderr, "kubesim: cannot write %s\n", kubeconfig);
        goto out;
    }
    if (ca_out) {
        FILE *f = fopen(ca_out, "w");
        if (!f || fputs(ks->ca_pem, f) < 0 || fclose(f) != 0) {
            fprintf(stderr, "kubesim: cannot write %s\n", ca_out);
            goto out;
        }
    }
    printf("%s\n", ks->url);
    fflush(stdout);

    int sig = 0;
    sigwait(&set, &sig);
    rc = 0;
out:
    if (controllers)
        ks_controllers_stop(ks);
    ks_migration_stop(ks);
    ks_http_stop(daemon);
    ks_whclient_free(ks);
    if (cel)
        ks_cel_free();
    pthread_mutex_lock(&ks->lock);
    ks_store_cleanup(ks);
    for (size_t i = 0; i < ks->ndefs; i++)
        ks_res_free(ks->defs[i]);
    for (size_t i = 0; i < ks->ngrave; i++)
        ks_res_free(ks->graveyard[i]);
    pthread_mutex_unlock(&ks->lock);
    free(ks->defs);
    free(ks->graveyard);
    ks_services_free(ks);
    free(ks->faults);
    json_decref(ks->stats_writes);
    json_decref(ks->stats_requests);
    free(ks->token);
    ks_users_free(ks);
    free(ks->url);
    free(ks->ca_pem);
    free(cert);
    free(key);
    curl_global_cleanup();
    return rc;
}

int main(int argc, char **argv)
{
    return run(argc, argv);
}
