/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Command-line flags (controller-runtime names, docs/operations.md §1).
 *
 * Every flag "--foo-bar" may also come from the environment variable
 * KOP_FOO_BAR; a flag given on the command line wins. Both "--flag value"
 * and "--flag=value" are accepted; booleans accept "--flag",
 * "--flag=true|false" (and 1/0, yes/no in the environment).
 *
 * A separate value that is itself one of kop's flags ("--kubeconfig
 * --controller-only") is a missing value, not the value. Integers are
 * decimal without a leading 0 (Go's flag packages would read "010" as
 * octal), floats decimal. --namespace and --leader-election-namespace
 * must be DNS labels, --leader-election-id a DNS subdomain (and not empty
 * with --leader-elect or --sharding). --client-ca-file and --kubeconfig,
 * when they exist, must be regular files (a FIFO would block start-up).
 *
 * Durations: Go syntax ("300ms", "30s", "10m", "10h", "1h30m"), at most
 * 87600h (ten years: modules add durations to the monotonic clock).
 * Bind addresses: ":8080", "127.0.0.1:8080", "[::1]:8080", or "0" (off).
 * Port 0 in a bind address or --webhook-port means "let the kernel pick".
 *
 * Thread-safety: init and cleanup single-threaded; a parsed config is
 * read-only afterwards and may be read from any thread.
 */
#ifndef KOP_CONFIG_H
#define KOP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kop/log.h"

struct kop_bind_address {
    bool enabled;   /* false for "0" */
    char host[256]; /* "" means every address */
    int port;       /* 0..65535, 0 = kernel picks */
};

struct kop_config {
    /* webhook server */
    int webhook_port;     /* --webhook-port, 9443 */
    char *webhook_host;   /* --webhook-host, "" = all addresses */
    char *cert_dir;       /* --cert-dir, "/tmp/k8s-webhook-server/serving-certs" */
    char *client_ca_file; /* --client-ca-file, NULL */
    /* --client-cert-allowed-names, NULL-terminated; NULL = any */
    char **client_cert_names;
    size_t n_client_cert_names;
    size_t convert_max_body; /* --conversion-max-body-bytes, 64 MiB */
    /* --admission-max-body-bytes, 7 MiB (7340032, as controller-runtime) */
    size_t admission_max_body;
    size_t webhook_memory_budget;         /* --webhook-memory-budget-bytes, 80 MiB */
    size_t max_header_bytes;              /* --max-header-bytes, 32 KiB */
    int64_t tls_handshake_timeout_ms;     /* --tls-handshake-timeout, KOP_TLS_HANDSHAKE_TIMEOUT_S */
    int64_t idle_timeout_ms;              /* --idle-timeout, KOP_HTTP_IDLE_TIMEOUT_S */
    int max_connections;                  /* --max-connections, KOP_TLS_MAX_CONNECTIONS */
    int max_connections_per_ip;           /* --max-connections-per-ip, 256 */
    int webhook_threads;                  /* --webhook-threads, 2 (MHD worker threads) */
    int64_t request_header_timeout_ms;    /* --request-header-timeout, KOP_HTTP_HEADER_TIMEOUT_S */
    size_t min_body_rate;                 /* --min-body-rate, 16 KiB/s */
    int max_handshakes_per_ip_per_second; /* --max-handshakes-per-ip-per-second, 64 */

    struct kop_bind_address metrics_bind; /* --metrics-bind-address, ":8080" */
    struct kop_bind_address health_bind;  /* --health-probe-bind-address, ":8081" */

    /* leader election */
    bool leader_elect;                /* --leader-elect, false */
    bool sharding;                    /* --sharding, false */
    char *leader_election_id;         /* --leader-election-id, "kop-leader" */
    char *leader_election_namespace;  /* --leader-election-namespace, NULL = pod namespace */
    int64_t leader_lease_duration_ms; /* --leader-election-lease-duration,
                                         KOP_LEADER_LEASE_DURATION_S */
    int64_t leader_renew_deadline_ms; /* --leader-election-renew-deadline,
                                         KOP_LEADER_RENEW_DEADLINE_S */
    int64_t leader_retry_period_ms; /* --leader-election-retry-period, KOP_LEADER_RETRY_PERIOD_S */

    /* reconciler and client */
    int max_concurrent_reconciles; /* --max-concurrent-reconciles, 2 */
    double kube_api_qps;           /* --kube-api-qps, 20 (0 disables the limiter) */
    int kube_api_burst;            /* --kube-api-burst, 30 */
    char *kubeconfig;              /* --kubeconfig, NULL */
    char *namespace;               /* --namespace, NULL = all namespaces */
    int64_t sync_period_ms;        /* --sync-period, 10h */
    char *storage_version;         /* --storage-version, "v1" (or "v2") */
    bool storage_migration;        /* --storage-migration, false */
    /* --cluster NAME=KUBECONFIG, repeatable: the member clusters reconciled
     * besides the local one (docs/operations.md §12); NULL when none. */
    struct kop_cluster_flag *clusters;
    size_t n_clusters;
    bool _clusters_from_env; /* private: the list came from KOP_CLUSTER */
    bool cluster_secrets;    /* --cluster-secrets, false: members from labelled Secrets */

    /* admission */
    char **allowed_registries; /* --allowed-registries, NULL-terminated; NULL = any */
    size_t n_allowed_registries;

    /* process */
    enum kop_log_level log_level;   /* --log-level, info */
    enum kop_log_format log_format; /* --log-format, json */
    int64_t shutdown_delay_ms;      /* --shutdown-delay, 5s: serve on after SIGTERM */
    int64_t shutdown_timeout_ms;    /* --shutdown-timeout, 30s, after the delay */
    bool webhook_only;              /* --webhook-only */
    bool controller_only;           /* --controller-only */
    bool self_signed_certs;         /* --self-signed-certs */

    /* tracing */
    char *otlp_endpoint;            /* --otlp-endpoint, "" = no export */
    char *otlp_service_name;        /* --otlp-service-name, "kop" */
    int64_t otlp_flush_interval_ms; /* --otlp-flush-interval, 5s */
};

/* The name of the cluster kop runs in (its Lease, its readiness): the
 * cluster label of its metrics and log lines; no member may take it. */
#define KOP_CONFIG_LOCAL_CLUSTER "local" /* = KOP_CONTROLLER_LOCAL_CLUSTER */

/* One --cluster NAME=KUBECONFIG. */
struct kop_cluster_flag {
    char *name;       /* a DNS-1123 label, unique, not KOP_CONFIG_LOCAL_CLUSTER */
    char *kubeconfig; /* the file, read as --kubeconfig is */
};

enum kop_config_result {
    KOP_CONFIG_OK = 0,   /* run */
    KOP_CONFIG_EXIT = 1, /* --help or --version was printed: exit 0 */
};

/* Fill *cfg with every default. */
void kop_config_defaults(struct kop_config *cfg);

/*
 * Parse argv (argv[0] is the program name) over the defaults and the
 * KOP_* environment (envp, NULL-terminated, may be NULL for none).
 * --help/--version print to "out" (NULL: stdout). Errors print one clear
 * line to "err" (NULL: stderr: "kop: invalid value \"x\" for
 * --webhook-port: ...", "kop: unknown flag --foo") plus a hint to use
 * --help.
 *
 * Returns KOP_CONFIG_OK, KOP_CONFIG_EXIT, or -EINVAL (the caller exits 2).
 * On error *cfg is left valid (freeable) but unspecified.
 */
int kop_config_parse(struct kop_config *cfg, int argc, char **argv, char **envp, FILE *out,
                     FILE *err);

/* Release what parse allocated. NULL-safe. */
void kop_config_cleanup(struct kop_config *cfg);

/*
 * The --shutdown-delay that applies: 0 with --controller-only, which
 * serves no webhook whose endpoint removal must be waited for.
 */
int64_t kop_config_shutdown_delay_ms(const struct kop_config *cfg);

/*
 * When a shutdown that starts at now_ns (CLOCK_MONOTONIC) must be over:
 * now + --shutdown-delay (not with --controller-only, which serves no
 * webhook) + --shutdown-timeout, saturating at INT64_MAX instead of
 * overflowing for the largest durations.
 */
int64_t kop_config_shutdown_deadline_ns(const struct kop_config *cfg, int64_t now_ns);

/* Helpers, exported for tests and other modules. Return 0 or -EINVAL. */
int kop_config_parse_duration(const char *s, int64_t *ret_ms);
int kop_config_parse_bind(const char *s, struct kop_bind_address *ret);

#endif /* KOP_CONFIG_H */
