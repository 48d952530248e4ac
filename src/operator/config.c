/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Command-line flags and their KOP_* environment variables.
 *
 * One table describes every flag: its name, value type, where it lands in
 * struct kop_config, its default (as text, so --help prints exactly what
 * kop_config_defaults() applies) and its help line. Parsing goes in three
 * steps: a first pass over argv checks its shape (unknown flags, missing
 * values, positional arguments) and handles --help/--version; then the
 * environment is applied over the defaults; then the flags, which win.
 *
 * String defaults point at the literals in the table; kop_config_cleanup()
 * frees only strings that parsing allocated, so a config filled by
 * kop_config_defaults() alone needs no allocation and cannot fail.
 */
#include "kop/config.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <sys/stat.h>

#include <curl/curl.h>

#include "kop/http.h"
#include "kop/leader.h"
#include "kop/netaddr.h"
#include "kop/tls.h"
#include "kop_version.h"

/* A default owned by a lower layer, spelled as a flag value: DEFAULT_S(10)
 * is "10s", DEFAULT_INT(1024) "1024". */
#define SPELL_(x) #x
#define DEFAULT_INT(x) SPELL_(x)
#define DEFAULT_S(x) SPELL_(x) "s"

enum flag_type {
    FLAG_INT,      /* int in [min, max] */
    FLAG_DOUBLE,   /* double >= min */
    FLAG_STRING,   /* char *; "" allowed */
    FLAG_PATH,     /* char *; "" means unset (NULL) */
    FLAG_BYTES,    /* size_t > 0 (in [min, max] when max > 0), optional Ki/Mi/Gi */
    FLAG_DURATION, /* int64_t ms, Go syntax */
    FLAG_BIND,     /* struct kop_bind_address */
    FLAG_BOOL,     /* bool */
    FLAG_LIST,     /* comma-separated, into a char ** and the size_t after it (list_n) */
    FLAG_LEVEL,    /* enum kop_log_level */
    FLAG_FORMAT,   /* enum kop_log_format */
    FLAG_CLUSTER,  /* NAME=KUBECONFIG, repeatable (struct kop_cluster_flag) */
    FLAG_HELP,
    FLAG_VERSION,
};

struct flag {
    const char *name; /* without the leading "--" */
    enum flag_type type;
    size_t offset;
    const char *def; /* default as text; NULL for none */
    const char *arg; /* placeholder in --help */
    const char *help;
    long long min;
    long long max;
};

#define OFF(field) offsetof(struct kop_config, field)
#define MAX_FLAG_DURATION_MS (87600LL * 3600 * 1000)

static const struct flag flags[] = {
    {"webhook-port", FLAG_INT, OFF(webhook_port), "9443", "int",
     "Port the webhook server listens on (0: the kernel picks one).", 0, 65535},
    {"webhook-host", FLAG_STRING, OFF(webhook_host), "", "string",
     "Address the webhook server binds (empty: every address).", 0, 0},
    {"cert-dir", FLAG_STRING, OFF(cert_dir), "/tmp/k8s-webhook-server/serving-certs", "dir",
     "Directory holding the serving certificate tls.crt and key tls.key.", 0, 0},
    {"client-ca-file", FLAG_PATH, OFF(client_ca_file), NULL, "file",
     "CA bundle; when set, webhook clients must present a certificate it signed (reloaded when "
     "the file changes).",
     0, 0},
    {"client-cert-allowed-names", FLAG_LIST, OFF(client_cert_names), NULL, "list",
     "Comma-separated names; with --client-ca-file a webhook client's certificate must carry one "
     "as its subject CN or a DNS subjectAltName (default: any the CA signed).",
     0, 0},
    {"conversion-max-body-bytes", FLAG_BYTES, OFF(convert_max_body), "64Mi", "bytes",
     "Largest /convert request body (suffix Ki, Mi or Gi allowed).", 0, 0},
    {"admission-max-body-bytes", FLAG_BYTES, OFF(admission_max_body), "7340032", "bytes",
     "Largest admission request body (suffix Ki, Mi or Gi allowed).", 0, 0},
    {"webhook-memory-budget-bytes", FLAG_BYTES, OFF(webhook_memory_budget), "80Mi", "bytes",
     "Memory that webhook requests in flight may hold at once; a request over it waits, then "
     "gets 503 (suffix Ki, Mi or Gi).",
     0, 0},
    {"max-header-bytes", FLAG_BYTES, OFF(max_header_bytes), "32Ki", "bytes",
     "Per-connection memory for the request line and headers (suffix Ki, Mi or Gi).", 1024,
     256 * 1024 * 1024},
    {"tls-handshake-timeout", FLAG_DURATION, OFF(tls_handshake_timeout_ms),
     DEFAULT_S(KOP_TLS_HANDSHAKE_TIMEOUT_S), "duration",
     "Time a client has to complete the TLS handshake.", 0, 0},
    {"idle-timeout", FLAG_DURATION, OFF(idle_timeout_ms), DEFAULT_S(KOP_HTTP_IDLE_TIMEOUT_S),
     "duration", "Keep-alive connections idle this long are closed.", 0, 0},
    {"max-connections", FLAG_INT, OFF(max_connections), DEFAULT_INT(KOP_TLS_MAX_CONNECTIONS), "int",
     "Most webhook connections open at once.", 1, 1000000},
    {"max-connections-per-ip", FLAG_INT, OFF(max_connections_per_ip), "256", "int",
     "Most webhook connections open at once from one client address.", 1, 1000000},
    {"request-header-timeout", FLAG_DURATION, OFF(request_header_timeout_ms),
     DEFAULT_S(KOP_HTTP_HEADER_TIMEOUT_S), "duration",
     "A request's line and headers must arrive within this, however the bytes trickle (webhook, "
     "metrics and probe servers).",
     1, 0},
    {"min-body-rate", FLAG_BYTES, OFF(min_body_rate), "16Ki", "bytes",
     "After a grace of --request-header-timeout, a request body must arrive at this many bytes per "
     "second on average (suffix Ki, Mi or Gi).",
     0, 0},
    {"max-handshakes-per-ip-per-second", FLAG_INT, OFF(max_handshakes_per_ip_per_second), "64",
     "int",
     "New TLS handshakes per second from one client address, after a burst of "
     "--max-connections-per-ip; over it a handshake waits.",
     1, 1000000},
    {"webhook-threads", FLAG_INT, OFF(webhook_threads), "2", "int",
     "Threads working on webhook request bodies over 256 KiB (smaller ones: the TLS loop).", 1,
     1024},
    {"metrics-bind-address", FLAG_BIND, OFF(metrics_bind), ":8080", "address",
     "Address of the /metrics endpoint (\"0\" turns it off).", 0, 0},
    {"health-probe-bind-address", FLAG_BIND, OFF(health_bind), ":8081", "address",
     "Address of the /healthz and /readyz endpoints (\"0\" turns it off).", 0, 0},
    {"leader-elect", FLAG_BOOL, OFF(leader_elect), "false", NULL,
     "Run the reconciler only in the replica holding the leader lease.", 0, 0},
    {"sharding", FLAG_BOOL, OFF(sharding), "false", NULL,
     "Every replica reconciles its share of the MyResources (membership Leases kop-shard-<POD_NAME "
     "or hostname>; the leader Lease elects the sharder).",
     0, 0},
    {"leader-election-id", FLAG_STRING, OFF(leader_election_id), "kop-leader", "string",
     "Name of the Lease used for leader election.", 0, 0},
    {"leader-election-namespace", FLAG_PATH, OFF(leader_election_namespace), NULL, "string",
     "Namespace of the Lease (default: the pod's namespace).", 0, 0},
    {"leader-election-lease-duration", FLAG_DURATION, OFF(leader_lease_duration_ms),
     DEFAULT_S(KOP_LEADER_LEASE_DURATION_S), "duration",
     "How long followers wait before taking over a lease that is not renewed.", 1, 0},
    {"leader-election-renew-deadline", FLAG_DURATION, OFF(leader_renew_deadline_ms),
     DEFAULT_S(KOP_LEADER_RENEW_DEADLINE_S), "duration",
     "The leader gives up reconciling when it could not renew for this long.", 1, 0},
    {"leader-election-retry-period", FLAG_DURATION, OFF(leader_retry_period_ms),
     DEFAULT_S(KOP_LEADER_RETRY_PERIOD_S), "duration",
     "How often electors try to acquire or renew the lease.", 1, 0},
    {"max-concurrent-reconciles", FLAG_INT, OFF(max_concurrent_reconciles), "2", "int",
     "Reconciler worker threads.", 1, 1024},
    {"kube-api-qps", FLAG_DOUBLE, OFF(kube_api_qps), "20", "float",
     "Sustained requests per second to the API server (0 turns the limiter off).", 0, 0},
    {"kube-api-burst", FLAG_INT, OFF(kube_api_burst), "30", "int",
     "Requests allowed in a burst above the QPS rate.", 0, INT_MAX},
    {"cluster", FLAG_CLUSTER, OFF(clusters), NULL, "name=kubeconfig",
     "A member cluster to reconcile besides the local one (repeatable; NAME a DNS label, not "
     "\"" KOP_CONFIG_LOCAL_CLUSTER "\"; the file is read as --kubeconfig is; the environment "
     "variable takes a comma-separated list).",
     0, 0},
    {"cluster-secrets", FLAG_BOOL, OFF(cluster_secrets), "false", NULL,
     "Also reconcile the member clusters named by Secrets in kop's namespace labelled "
     "kop.io/cluster=NAME, each holding an inline kubeconfig under the key \"kubeconfig\" "
     "(engaged, re-engaged and disengaged as the Secrets change; needs the RBAC of "
     "manifests/overlays/fleet).",
     0, 0},
    {"kubeconfig", FLAG_PATH, OFF(kubeconfig), NULL, "file",
     "Kubeconfig file (default: in-cluster service account).", 0, 0},
    {"namespace", FLAG_PATH, OFF(namespace), NULL, "string",
     "Watch only this namespace (default: all namespaces).", 0, 0},
    {"sync-period", FLAG_DURATION, OFF(sync_period_ms), "10h", "duration",
     "Every object is reconciled again at least this often.", 1, 0},
    {"storage-version", FLAG_STRING, OFF(storage_version), "v1", "version",
     "MyResource version the reconciler lists, watches and writes status in: v1 or v2, the "
     "CRD's storage version (so kop's own requests skip the conversion webhook).",
     0, 0},
    {"storage-migration", FLAG_BOOL, OFF(storage_migration), "false", NULL,
     "On the leader, move MyResources stored in older versions to the CRD's storage version, "
     "then drop those versions from status.storedVersions (needs the RBAC of "
     "manifests/overlays/storage-v2).",
     0, 0},
    {"allowed-registries", FLAG_LIST, OFF(allowed_registries), NULL, "list",
     "Comma-separated image registries admission accepts (default: any).", 0, 0},
    {"log-level", FLAG_LEVEL, OFF(log_level), "info", "level",
     "Minimum log level: debug, info, warn or error.", 0, 0},
    {"log-format", FLAG_FORMAT, OFF(log_format), "json", "format", "Log format: json or text.", 0,
     0},
    {"shutdown-delay", FLAG_DURATION, OFF(shutdown_delay_ms), "5s", "duration",
     "After SIGTERM, /readyz fails at once but webhooks are served as before for this long, "
     "while the endpoint removal reaches every client (0: drain at once).",
     0, 0},
    {"shutdown-timeout", FLAG_DURATION, OFF(shutdown_timeout_ms), "30s", "duration",
     "Time allowed for a graceful shutdown after --shutdown-delay.", 0, 0},
    {"webhook-only", FLAG_BOOL, OFF(webhook_only), "false", NULL,
     "Serve the webhooks only; do not run the reconciler.", 0, 0},
    {"controller-only", FLAG_BOOL, OFF(controller_only), "false", NULL,
     "Run the reconciler only; do not serve the webhooks.", 0, 0},
    {"self-signed-certs", FLAG_BOOL, OFF(self_signed_certs), "false", NULL,
     "Generate a self-signed serving certificate when cert-dir has none (development).", 0, 0},
    {"otlp-endpoint", FLAG_STRING, OFF(otlp_endpoint), "", "url",
     "OTLP/HTTP collector base URL (http://host:4318): trace spans are sent as JSON to "
     "<url>/v1/traces (empty: no export).",
     0, 0},
    {"otlp-service-name", FLAG_STRING, OFF(otlp_service_name), "kop", "string",
     "service.name resource attribute of the exported spans.", 0, 0},
    {"otlp-flush-interval", FLAG_DURATION, OFF(otlp_flush_interval_ms), "5s", "duration",
     "Longest time an ended span waits before it is exported.", 1, 0},
    {"help", FLAG_HELP, 0, NULL, NULL, "Print this help and exit.", 0, 0},
    {"version", FLAG_VERSION, 0, NULL, NULL, "Print the version and exit.", 0, 0},
};

#define N_FLAGS (sizeof(flags) / sizeof(flags[0]))

static void *field(struct kop_config *cfg, const struct flag *f)
{
    return (char *)cfg + f->offset;
}

/* ---- value parsers ---------------------------------------------------------- */

/* Each returns 0 or -EINVAL with a short reason in *why. */

static int parse_int(const char *s, long long min, long long max, long long *ret, const char **why)
{
    char *end;
    long long v;

    errno = 0;
    if (*s == '\0' || isspace((unsigned char)*s)) {
        *why = "not a number";
        return -EINVAL;
    }
    v = strtoll(s, &end, 10);
    if (*end != '\0') {
        *why = "not a number";
        return -EINVAL;
    }
    /* Go's flag packages parse integers with base 0: "010" is 8 there. */
    const char *digits = s + (*s == '-' || *s == '+');
    if (digits[0] == '0' && digits[1] != '\0') {
        *why = "a leading 0 is ambiguous (octal in Go flags); write the number without it";
        return -EINVAL;
    }
    if (errno == ERANGE || v < min || v > max) {
        *why = "out of range";
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

static int parse_bool(const char *s, bool *ret, const char **why)
{
    if (strcasecmp(s, "true") == 0 || strcmp(s, "1") == 0 || strcasecmp(s, "yes") == 0 ||
        strcasecmp(s, "t") == 0) {
        *ret = true;
        return 0;
    }
    if (strcasecmp(s, "false") == 0 || strcmp(s, "0") == 0 || strcasecmp(s, "no") == 0 ||
        strcasecmp(s, "f") == 0) {
        *ret = false;
        return 0;
    }
    *why = "not a boolean (use true or false)";
    return -EINVAL;
}

/* "1Ki", "256Mi" or the plain number, for messages. */
static void spell_bytes(long long v, char *buf, size_t len)
{
    static const char *const suffix[] = {"", "Ki", "Mi", "Gi"};
    size_t i = 0;

    while (i + 1 < sizeof(suffix) / sizeof(suffix[0]) && v >= 1024 && v % 1024 == 0) {
        v /= 1024;
        i++;
    }
    snprintf(buf, len, "%lld%s", v, suffix[i]);
}

static int parse_bytes(const char *s, size_t *ret, const char **why)
{
    unsigned long long v, mult = 1;
    char *end;

    if (!isdigit((unsigned char)*s)) {
        *why = "not a size (examples: 1048576, 512Ki, 64Mi, 1Gi)";
        return -EINVAL;
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno == ERANGE) {
        *why = "out of range";
        return -EINVAL;
    }
    if (strcmp(end, "Ki") == 0) {
        mult = 1024ULL;
    } else if (strcmp(end, "Mi") == 0) {
        mult = 1024ULL * 1024;
    } else if (strcmp(end, "Gi") == 0) {
        mult = 1024ULL * 1024 * 1024;
    } else if (*end != '\0') {
        *why = "not a size (examples: 1048576, 512Ki, 64Mi, 1Gi)";
        return -EINVAL;
    }
    if (v == 0) {
        *why = "must be greater than 0";
        return -EINVAL;
    }
    if (v > SIZE_MAX / mult) {
        *why = "out of range";
        return -EINVAL;
    }
    *ret = (size_t)(v * mult);
    return 0;
}

static int duration_ms(const char *s, int64_t *ret_ms, const char **why)
{
    static const struct {
        const char *unit;
        double ns;
    } units[] = {
        /* longest first where one is a prefix of another ("ms" before "m") */
        {"ns", 1},          {"us", 1e3}, {"\xc2\xb5s", 1e3}, /* U+00B5 micro sign */
        {"\xce\xbcs", 1e3},                                  /* U+03BC Greek mu */
        {"ms", 1e6},        {"s", 1e9},  {"m", 60e9},        {"h", 3600e9},
    };
    const char *p = s;
    double total_ns = 0;

    *why = "not a duration (examples: 300ms, 30s, 10m, 1h30m)";
    if (*p == '-') {
        *why = "must not be negative";
        return -EINVAL;
    }
    if (*p == '+')
        p++;
    if (strcmp(p, "0") == 0) {
        *ret_ms = 0;
        return 0;
    }
    if (*p == '\0')
        return -EINVAL;
    while (*p != '\0') {
        double num = 0, scale = 1;
        bool any = false;
        size_t best = 0, best_len = 0;

        while (isdigit((unsigned char)*p)) {
            num = num * 10 + (*p - '0');
            p++;
            any = true;
        }
        if (*p == '.') {
            p++;
            while (isdigit((unsigned char)*p)) {
                scale /= 10;
                num += (*p - '0') * scale;
                p++;
                any = true;
            }
        }
        if (!any)
            return -EINVAL;
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
            size_t n = strlen(units[i].unit);

            if (strncmp(p, units[i].unit, n) == 0 && n > best_len) {
                best = i;
                best_len = n;
            }
        }
        if (best_len == 0) {
            *why = "missing or unknown unit (use ns, us, ms, s, m or h)";
            return -EINVAL;
        }
        total_ns += num * units[best].ns;
        p += best_len;
        /* Go durations are int64 nanoseconds: at most 2562047h47m16.854775807s
         * (2^63 - 1 ns; a double cannot tell it from 2^63, the bound). */
        if (total_ns > 9223372036854775808.0) {
            *why = "out of range";
            return -EINVAL;
        }
    }
    *ret_ms = (int64_t)(total_ns / 1e6);
    return 0;
}

int kop_config_parse_duration(const char *s, int64_t *ret_ms)
{
    const char *why;
    int64_t ms;

    assert(s);
    assert(ret_ms);
    if (duration_ms(s, &ms, &why) != 0)
        return -EINVAL;
    *ret_ms = ms;
    return 0;
}

static int bind_address(const char *s, struct kop_bind_address *ret, const char **why)
{
    struct kop_bind_address b = {.enabled = true};

    if (strcmp(s, "0") == 0) {
        memset(ret, 0, sizeof(*ret));
        return 0;
    }
    if (kop_netaddr_split(s, b.host, sizeof(b.host), &b.port, why) != 0) {
        if (*why == kop_netaddr_not_an_address)
            *why = "not an address (examples: :8080, 127.0.0.1:8080, [::1]:8080, 0 to turn off)";
        return -EINVAL;
    }
    *ret = b;
    return 0;
}

int kop_config_parse_bind(const char *s, struct kop_bind_address *ret)
{
    struct kop_bind_address b;
    const char *why;

    assert(s);
    assert(ret);
    if (bind_address(s, &b, &why) != 0)
        return -EINVAL;
    *ret = b;
    return 0;
}

static void free_list(char **list)
{
    if (list == NULL)
        return;
    for (char **p = list; *p != NULL; p++)
        free(*p);
    free(list);
}

/* Comma-separated registries, spaces around items trimmed. "" is "any". */
/* A FLAG_LIST's item count: the size_t right after its list in struct
 * kop_config. */
_Static_assert(OFF(n_allowed_registries) == OFF(allowed_registries) + sizeof(char **),
               "the count follows the list");
_Static_assert(OFF(n_client_cert_names) == OFF(client_cert_names) + sizeof(char **),
               "the count follows the list");

static size_t *list_n(struct kop_config *cfg, const struct flag *f)
{
    return (size_t *)((char *)cfg + f->offset + sizeof(char **));
}

/* What one item of a list flag may hold: a registry is a host name with an
 * optional port; a certificate name any printable ASCII but the comma. */
static bool list_char_ok(const struct flag *f, unsigned char ch)
{
    if (f->offset == OFF(allowed_registries))
        return isalnum(ch) || ch == '.' || ch == '-' || ch == ':' || ch == '_' || ch == '[' ||
               ch == ']';
    return ch > ' ' && ch < 0x7f;
}

static int parse_list(const struct flag *f, const char *s, char ***ret, size_t *ret_n,
                      const char **why)
{
    char **list = NULL;
    size_t n = 0, cap = 1;
    const char *p = s;

    while (isspace((unsigned char)*p))
        p++;
    if (*p == '\0') {
        *ret = NULL;
        *ret_n = 0;
        return 0;
    }
    for (const char *q = s; *q; q++)
        cap += *q == ',';
    list = calloc(cap + 1, sizeof(char *));
    if (list == NULL) {
        *why = "out of memory";
        return -ENOMEM;
    }
    p = s;
    for (;;) {
        const char *end = strchr(p, ',');
        const char *stop = end ? end : p + strlen(p);
        const char *a = p, *b = stop;

        while (a < b && isspace((unsigned char)*a))
            a++;
        while (b > a && isspace((unsigned char)b[-1]))
            b--;
        if (a == b) {
            *why = "empty item in the list";
            goto fail;
        }
        for (const char *c = a; c < b; c++) {
            if (!list_char_ok(f, (unsigned char)*c)) {
                *why = f->offset == OFF(allowed_registries)
                           ? "a registry is a host name with an optional port (example: "
                             "docker.io,quay.io,registry.local:5000)"
                           : "a name is printable ASCII without blanks";
                goto fail;
            }
        }
        list[n] = strndup(a, (size_t)(b - a));
        if (list[n] == NULL) {
            *why = "out of memory";
            goto fail;
        }
        n++;
        if (end == NULL)
            break;
        p = end + 1;
    }
    *ret = list;
    *ret_n = n;
    return 0;
fail:
    free_list(list);
    return -EINVAL;
}

/* ---- applying values ------------------------------------------------------- */

static bool owned_string(const struct flag *f, const char *s)
{
    return s != NULL && s != f->def;
}

static int set_string(struct kop_config *cfg, const struct flag *f, const char *value,
                      const char **why)
{
    char **slot = field(cfg, f);
    char *copy = NULL;

    if (!(f->type == FLAG_PATH && value[0] == '\0')) {
        copy = strdup(value);
        if (copy == NULL) {
            *why = "out of memory";
            return -ENOMEM;
        }
    }
    if (owned_string(f, *slot))
        free(*slot);
    *slot = copy;
    return 0;
}

/* A DNS-1123 label (max 63) or, with dots allowed, subdomain (max 253):
 * lower-case alphanumerics and '-', each label starting and ending with an
 * alphanumeric. */
static bool dns_name(const char *s, bool subdomain)
{
    size_t n = strlen(s);
    size_t label = 0;

    if (n == 0 || n > (subdomain ? 253u : 63u))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');

        if (c == '.' && subdomain) {
            if (label == 0 || s[i - 1] == '-')
                return false;
            label = 0;
            continue;
        }
        if (!alnum && c != '-')
            return false;
        if (c == '-' && label == 0)
            return false;
        label++;
    }
    return s[n - 1] != '-' && s[n - 1] != '.';
}

/* --webhook-host: an IPv4 address, an IPv6 address (brackets optional) or
 * a host name; garbage otherwise reached the listener as "cannot listen on
 * port 0 (errno 22)". */
static bool listen_host(const char *h)
{
    char buf[256], low[256];
    size_t n = strlen(h);
    unsigned char addr[16];

    if (n == 0)
        return true;
    if (n >= sizeof(buf))
        return false;
    if (h[0] == '[' && n > 2 && h[n - 1] == ']') {
        memcpy(buf, h + 1, n - 2);
        buf[n - 2] = '\0';
        return inet_pton(AF_INET6, buf, addr) == 1;
    }
    if (strchr(h, ':'))
        return inet_pton(AF_INET6, h, addr) == 1;
    if (strspn(h, "0123456789.") == n)
        return inet_pton(AF_INET, h, addr) == 1;
    for (size_t i = 0; i <= n; i++)
        low[i] = (char)tolower((unsigned char)h[i]);
    return dns_name(low, true);
}

/* Values that go into API paths, checked as the API server would. "" is
 * "unset" for the namespaces and is checked by the cross-flag rules for
 * the Lease name. */
static int check_name(const struct flag *f, const char *value, const char **why)
{
    if (value[0] == '\0')
        return 0;
    if ((f->offset == OFF(namespace) || f->offset == OFF(leader_election_namespace)) &&
        !dns_name(value, false)) {
        *why = "must be a DNS label (lower-case letters, digits and '-', at most 63, starting and "
               "ending with a letter or digit)";
        return -EINVAL;
    }
    if (f->offset == OFF(webhook_host) && !listen_host(value)) {
        *why = "not an IP address or host name";
        return -EINVAL;
    }
    if (f->offset == OFF(leader_election_id) && !dns_name(value, true)) {
        *why = "must be a DNS subdomain (lower-case letters, digits, '-' and '.', at most 253)";
        return -EINVAL;
    }
    return 0;
}

/* A FLAG_DOUBLE value: decimal, finite, at least f->min. */
static int apply_double(struct kop_config *cfg, const struct flag *f, const char *value,
                        const char **why)
{
    char *end;
    double d;

    /* Decimal only: strtod would also take hexadecimal ("0x10"),
     * which Go's ParseFloat refuses without a 'p' exponent. */
    if (value[strspn(value, "0123456789.eE+-")] != '\0') {
        *why = "not a number";
        return -EINVAL;
    }
    errno = 0;
    d = strtod(value, &end);
    if (*value == '\0' || isspace((unsigned char)*value) || *end != '\0' || !isfinite(d)) {
        *why = "not a number";
        return -EINVAL;
    }
    if (d < (double)f->min) {
        *why = "must be 0 or more";
        return -EINVAL;
    }
    *(double *)field(cfg, f) = d;
    return 0;
}

/* A FLAG_DURATION value, in Go's syntax, within the flag's bounds. */
static int apply_duration(struct kop_config *cfg, const struct flag *f, const char *value,
                          const char **why)
{
    int r;
    int64_t ms;

    r = duration_ms(value, &ms, why);
    if (r != 0)
        return r;
    if (f->min > 0 && ms < f->min) {
        *why = "must be at least 1ms";
        return -EINVAL;
    }
    /* Modules add a duration (or two) to the monotonic clock in int64
     * nanoseconds; Go's largest duration would overflow that after a
     * few hours of uptime. Ten years is "never" for a process. */
    if (ms > MAX_FLAG_DURATION_MS) {
        *why = "must be at most 87600h (10 years)";
        return -EINVAL;
    }
    *(int64_t *)field(cfg, f) = ms;
    return 0;
}

static void free_clusters(struct kop_config *cfg)
{
    for (size_t i = 0; i < cfg->n_clusters; i++) {
        free(cfg->clusters[i].name);
        free(cfg->clusters[i].kubeconfig);
    }
    free(cfg->clusters);
    cfg->clusters = NULL;
    cfg->n_clusters = 0;
}

/* One NAME=KUBECONFIG (len bytes of s) appended to cfg->clusters: NAME a
 * DNS label, unique, not the local cluster's name; the path not empty. */
static int add_cluster(struct kop_config *cfg, const char *s, size_t len, const char **why)
{
    const char *eq = memchr(s, '=', len);
    char name[64];
    if (!eq || eq == s || (size_t)(eq - s) >= sizeof(name) || eq + 1 == s + len) {
        *why = "must be NAME=KUBECONFIG (a DNS label, then the kubeconfig file)";
        return -EINVAL;
    }
    memcpy(name, s, (size_t)(eq - s));
    name[eq - s] = '\0';
    if (!dns_name(name, false)) {
        *why = "the cluster name must be a DNS label (lower-case letters, digits and '-', at most "
               "63, starting and ending with a letter or digit)";
        return -EINVAL;
    }
    if (strcmp(name, KOP_CONFIG_LOCAL_CLUSTER) == 0) {
        *why = "the cluster name \"" KOP_CONFIG_LOCAL_CLUSTER "\" is the local cluster's";
        return -EINVAL;
    }
    for (size_t i = 0; i < cfg->n_clusters; i++) {
        if (strcmp(cfg->clusters[i].name, name) == 0) {
            *why = "the cluster name is given twice";
            return -EINVAL;
        }
    }
    struct kop_cluster_flag *c =
        realloc(cfg->clusters, (cfg->n_clusters + 1) * sizeof(*cfg->clusters));
    if (!c) {
        *why = "out of memory";
        return -ENOMEM;
    }
    cfg->clusters = c;
    c[cfg->n_clusters].name = strdup(name);
    c[cfg->n_clusters].kubeconfig = strndup(eq + 1, (size_t)(s + len - eq - 1));
    if (!c[cfg->n_clusters].name || !c[cfg->n_clusters].kubeconfig) {
        free(c[cfg->n_clusters].name);
        free(c[cfg->n_clusters].kubeconfig);
        *why = "out of memory";
        return -ENOMEM;
    }
    cfg->n_clusters++;
    return 0;
}

/* KOP_CLUSTER: a comma-separated list of NAME=KUBECONFIG, replaced by the
 * first --cluster flag. */
static int apply_cluster_env(struct kop_config *cfg, const char *value, const char **why)
{
    free_clusters(cfg);
    for (const char *p = value;;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        int r = add_cluster(cfg, p, n, why);
        if (r != 0)
            return r;
        if (!end)
            break;
        p = end + 1;
    }
    cfg->_clusters_from_env = true;
    return 0;
}

static int apply(struct kop_config *cfg, const struct flag *f, const char *value, const char **why)
{
    long long i;
    int r;

    switch (f->type) {
    case FLAG_INT:
        r = parse_int(value, f->min, f->max, &i, why);
        if (r == 0)
            *(int *)field(cfg, f) = (int)i;
        return r;
    case FLAG_DOUBLE:
        return apply_double(cfg, f, value, why);
    case FLAG_STRING:
    case FLAG_PATH:
        r = check_name(f, value, why);
        if (r != 0)
            return r;
        return set_string(cfg, f, value, why);
    case FLAG_BYTES: {
        size_t b;

        r = parse_bytes(value, &b, why);
        if (r != 0)
            return r;
        if (f->max > 0 && (b < (size_t)f->min || b > (size_t)f->max)) {
            *why = "out of range";
            return -EINVAL;
        }
        *(size_t *)field(cfg, f) = b;
        return 0;
    }
    case FLAG_DURATION:
        return apply_duration(cfg, f, value, why);
    case FLAG_BIND:
        return bind_address(value, field(cfg, f), why);
    case FLAG_BOOL:
        return parse_bool(value, field(cfg, f), why);
    case FLAG_LIST: {
        char **list;
        size_t n;

        r = parse_list(f, value, &list, &n, why);
        if (r != 0)
            return r;
        free_list(*(char ***)field(cfg, f));
        *(char ***)field(cfg, f) = list;
        *list_n(cfg, f) = n;
        return 0;
    }
    case FLAG_CLUSTER:
        if (cfg->_clusters_from_env) {
            /* the first flag replaces what the environment said */
            free_clusters(cfg);
            cfg->_clusters_from_env = false;
        }
        return add_cluster(cfg, value, strlen(value), why);
    case FLAG_LEVEL:
        r = kop_log_level_parse(value, field(cfg, f));
        if (r != 0)
            *why = "must be debug, info, warn or error";
        return r;
    case FLAG_FORMAT:
        r = kop_log_format_parse(value, field(cfg, f));
        if (r != 0)
            *why = "must be json or text";
        return r;
    case FLAG_HELP:
    case FLAG_VERSION:
        break;
    }
    return 0;
}

void kop_config_defaults(struct kop_config *cfg)
{
    assert(cfg);
    memset(cfg, 0, sizeof(*cfg));
    for (size_t i = 0; i < N_FLAGS; i++) {
        const struct flag *f = &flags[i];
        const char *why;

        if (f->type == FLAG_STRING || f->type == FLAG_PATH) {
            /* Points at the table's literal; never freed (see owned_string). */
            *(const char **)field(cfg, f) = f->def;
        } else if (f->def != NULL && f->type != FLAG_LIST) {
            /* Every other default parses without allocating. */
            (void)apply(cfg, f, f->def, &why);
        }
    }
}

void kop_config_cleanup(struct kop_config *cfg)
{
    if (cfg == NULL)
        return;
    for (size_t i = 0; i < N_FLAGS; i++) {
        const struct flag *f = &flags[i];

        if (f->type == FLAG_STRING || f->type == FLAG_PATH) {
            char **slot = field(cfg, f);

            if (owned_string(f, *slot))
                free(*slot);
            *slot = NULL;
        } else if (f->type == FLAG_LIST) {
            free_list(*(char ***)field(cfg, f));
            *(char ***)field(cfg, f) = NULL;
            *list_n(cfg, f) = 0;
        }
    }
    free_clusters(cfg);
}

/* ---- help -------------------------------------------------------------------- */

/* kop's version, then the libraries that carry its traffic: the webhook
 * port's TLS and the API client's. */
static void print_version(FILE *out)
{
    const curl_version_info_data *cv = curl_version_info(CURLVERSION_NOW);
    fprintf(out, "kop %s\n", KOP_VERSION);
    fprintf(out, "tls: %s (TLS 1.3, TLS 1.2)\n", kop_tls_library());
    fprintf(out, "api client: libcurl %s (%s)\n", cv->version,
            cv->ssl_version ? cv->ssl_version : "no TLS");
}

static void env_name(const struct flag *f, char *buf, size_t len)
{
    size_t j = 0;

    j = (size_t)snprintf(buf, len, "KOP_");
    for (const char *p = f->name; *p && j + 1 < len; p++)
        buf[j++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
    buf[j] = '\0';
}

static void print_help(FILE *out)
{
    fprintf(out, "Usage: kop [flags]\n\n"
                 "kop serves the conversion and validating admission webhooks for\n"
                 "myresources.mygroup.example.com and reconciles MyResources into a\n"
                 "Deployment and a Service.\n\n"
                 "Every flag can also be set with the environment variable shown; a flag\n"
                 "given on the command line wins. Durations look like 300ms, 30s, 10m, 1h30m.\n\n"
                 "Flags:\n");
    for (size_t i = 0; i < N_FLAGS; i++) {
        const struct flag *f = &flags[i];
        char env[96];

        if (f->type == FLAG_HELP) {
            fprintf(out, "  -h, --help\n        %s\n", f->help);
            continue;
        }
        if (f->type == FLAG_VERSION) {
            fprintf(out, "  --version\n        %s\n", f->help);
            continue;
        }
        env_name(f, env, sizeof(env));
        fprintf(out, "  --%s%s%s\n        %s\n        (default ", f->name, f->arg ? " " : "",
                f->arg ? f->arg : "", f->help);
        if (f->def == NULL)
            fprintf(out, "none");
        else if (f->def[0] == '\0')
            fprintf(out, "\"\"");
        else if (f->type == FLAG_STRING || f->type == FLAG_BIND)
            fprintf(out, "\"%s\"", f->def);
        else
            fprintf(out, "%s", f->def);
        fprintf(out, "; env %s)\n", env);
    }
}

/* ---- parsing ----------------------------------------------------------------- */

static const struct flag *find_flag(const char *name, size_t len)
{
    for (size_t i = 0; i < N_FLAGS; i++) {
        if (strlen(flags[i].name) == len && strncmp(flags[i].name, name, len) == 0)
            return &flags[i];
    }
    return NULL;
}

/*
 * s for an error message, so that it stays one line whatever s holds: '"',
 * '\\' and control bytes escaped as in Go's %q, and at most about 200
 * bytes ("..." after). Returns buf.
 */
static const char *quoted(const char *s, char *buf, size_t len)
{
    size_t o = 0;

    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char tmp[8];
        size_t n;

        if (*p == '"' || *p == '\\')
            n = (size_t)snprintf(tmp, sizeof(tmp), "\\%c", *p);
        else if (*p == '\n')
            n = (size_t)snprintf(tmp, sizeof(tmp), "\\n");
        else if (*p == '\t')
            n = (size_t)snprintf(tmp, sizeof(tmp), "\\t");
        else if (*p == '\r')
            n = (size_t)snprintf(tmp, sizeof(tmp), "\\r");
        else if (*p < 0x20 || *p == 0x7f)
            n = (size_t)snprintf(tmp, sizeof(tmp), "\\x%02x", *p);
        else
            n = (size_t)snprintf(tmp, sizeof(tmp), "%c", *p);
        if (o + n + 4 > len || o > 200) {
            snprintf(buf + o, len - o, "...");
            return buf;
        }
        memcpy(buf + o, tmp, n);
        o += n;
    }
    buf[o] = '\0';
    return buf;
}

static void usage_hint(FILE *err)
{
    fprintf(err, "Run 'kop --help' for usage.\n");
}

/* source: "flag --name" or the environment variable's name. */
static void print_invalid(FILE *err, const char *source, const struct flag *f, const char *value,
                          const char *why)
{
    char q[256];

    value = quoted(value, q, sizeof(q));
    if (f->type == FLAG_INT && strcmp(why, "out of range") == 0) {
        if (f->max == INT_MAX)
            fprintf(err, "kop: invalid value \"%s\" for %s: must be %lld or more\n", value, source,
                    f->min);
        else
            fprintf(err, "kop: invalid value \"%s\" for %s: must be from %lld to %lld\n", value,
                    source, f->min, f->max);
    } else if (f->type == FLAG_BYTES && strcmp(why, "out of range") == 0 && f->max > 0) {
        char lo[32], hi[32];

        spell_bytes(f->min, lo, sizeof(lo));
        spell_bytes(f->max, hi, sizeof(hi));
        fprintf(err, "kop: invalid value \"%s\" for %s: must be from %s to %s\n", value, source, lo,
                hi);
    } else {
        fprintf(err, "kop: invalid value \"%s\" for %s: %s\n", value, source, why);
    }
    usage_hint(err);
}

/* Whether arg is one of kop's flags as next_flag would read it ("--name",
 * "-name", "--name=value", "-h"): a value argument that is one means the
 * value was forgotten. Negative numbers name no flag. */
static bool names_flag(const char *arg)
{
    const char *name, *eq;
    size_t len;

    if (arg[0] != '-' || arg[1] == '\0' || strcmp(arg, "--") == 0)
        return false;
    if (strcmp(arg, "-h") == 0)
        return true;
    name = arg + (arg[1] == '-' ? 2 : 1);
    eq = strchr(name, '=');
    len = eq ? (size_t)(eq - name) : strlen(name);
    return len > 0 && find_flag(name, len) != NULL;
}

/*
 * Split argv[*i] into flag and value. Returns 1 for a flag (value may be
 * NULL for a bool without "="), 0 at the end, -EINVAL after printing an
 * error. Advances *i past a separate value argument.
 */
static int next_flag(int argc, char **argv, int *i, const struct flag **ret_flag,
                     const char **ret_value, FILE *err)
{
    const char *arg, *name, *eq;
    const struct flag *f;
    size_t len;

    if (*i >= argc)
        return 0;
    arg = argv[*i];
    if (arg == NULL)
        return 0;
    if (strcmp(arg, "--") == 0) {
        if (*i + 1 < argc) {
            char q[256];

            fprintf(err, "kop: unexpected argument: \"%s\"\n", quoted(argv[*i + 1], q, sizeof(q)));
            usage_hint(err);
            return -EINVAL;
        }
        *i = argc;
        return 0;
    }
    if (arg[0] != '-' || arg[1] == '\0') {
        char q[256];

        fprintf(err, "kop: unexpected argument: \"%s\"\n", quoted(arg, q, sizeof(q)));
        usage_hint(err);
        return -EINVAL;
    }
    /* "--flag" and, as Go's flag package allows, "-flag". */
    name = arg + (arg[1] == '-' ? 2 : 1);
    eq = strchr(name, '=');
    len = eq ? (size_t)(eq - name) : strlen(name);
    if (len == 1 && name == arg + 1 && name[0] == 'h' && eq == NULL)
        f = find_flag("help", 4);
    else
        f = find_flag(name, len);
    if (f == NULL || len == 0) {
        char q[256], *bad = strndup(arg, (size_t)(name - arg) + len);

        fprintf(err, "kop: unknown flag: %s\n", bad ? quoted(bad, q, sizeof(q)) : "?");
        free(bad);
        usage_hint(err);
        return -EINVAL;
    }
    (*i)++;
    if (eq != NULL) {
        if (f->type == FLAG_HELP || f->type == FLAG_VERSION) {
            fprintf(err, "kop: flag --%s takes no value\n", f->name);
            usage_hint(err);
            return -EINVAL;
        }
        *ret_value = eq + 1;
    } else if (f->type == FLAG_BOOL || f->type == FLAG_HELP || f->type == FLAG_VERSION) {
        *ret_value = NULL;
    } else if (*i < argc && argv[*i] != NULL && names_flag(argv[*i])) {
        char q[256];

        fprintf(err, "kop: flag needs an argument: --%s (got the flag \"%s\")\n", f->name,
                quoted(argv[*i], q, sizeof(q)));
        usage_hint(err);
        return -EINVAL;
    } else if (*i < argc && argv[*i] != NULL) {
        *ret_value = argv[*i];
        (*i)++;
    } else {
        fprintf(err, "kop: flag needs an argument: --%s\n", f->name);
        usage_hint(err);
        return -EINVAL;
    }
    *ret_flag = f;
    return 1;
}

static int apply_env(struct kop_config *cfg, char **envp, FILE *err)
{
    if (envp == NULL)
        return 0;
    for (size_t i = 0; i < N_FLAGS; i++) {
        const struct flag *f = &flags[i];
        char env[96];
        size_t n;

        if (f->type == FLAG_HELP || f->type == FLAG_VERSION)
            continue;
        env_name(f, env, sizeof(env));
        n = strlen(env);
        /* The last definition wins, as getenv would not promise; scan all. */
        for (char **e = envp; *e != NULL; e++) {
            const char *value, *why = "";

            if (strncmp(*e, env, n) != 0 || (*e)[n] != '=')
                continue;
            value = *e + n + 1;
            if (value[0] == '\0')
                continue; /* an empty variable counts as unset */
            if ((f->type == FLAG_CLUSTER ? apply_cluster_env(cfg, value, &why)
                                         : apply(cfg, f, value, &why)) != 0) {
                print_invalid(err, env, f, value, why);
                return -EINVAL;
            }
        }
    }
    return 0;
}

/*
 * A file flag that names something other than a file: a FIFO would block
 * the open(2) at start-up for ever (SIGTERM is blocked then), a directory
 * would fail much later. A path that does not exist (yet) is left to the
 * module that reads it, which names it in its error.
 */
static int check_file(FILE *err, const char *flag, const char *path)
{
    struct stat st;

    if (path == NULL || stat(path, &st) != 0 || S_ISREG(st.st_mode))
        return 0;
    char q[256];

    fprintf(err, "kop: --%s \"%s\": %s\n", flag, quoted(path, q, sizeof(q)),
            S_ISDIR(st.st_mode) ? "a directory, not a file" : "not a regular file");
    usage_hint(err);
    return -EINVAL;
}

/* Whether two listeners would take the same address: same fixed port, and
 * the same host or one of them on every address. */
static bool same_listener(const char *host_a, int port_a, const char *host_b, int port_b)
{
    return port_a != 0 && port_a == port_b &&
           (host_a[0] == '\0' || host_b[0] == '\0' || strcasecmp(host_a, host_b) == 0);
}

/* Two of kop's servers on one port: the second failed at start-up with
 * "address already in use", as if another process held it. */
static int port_clash(FILE *err, const struct kop_config *cfg)
{
    struct {
        const char *flag;
        bool on;
        const char *host;
        int port;
    } l[] = {
        {"--webhook-port", !cfg->controller_only, cfg->webhook_host, cfg->webhook_port},
        {"--metrics-bind-address", cfg->metrics_bind.enabled, cfg->metrics_bind.host,
         cfg->metrics_bind.port},
        {"--health-probe-bind-address", cfg->health_bind.enabled, cfg->health_bind.host,
         cfg->health_bind.port},
    };

    for (size_t i = 0; i < 3; i++) {
        for (size_t j = i + 1; j < 3; j++) {
            if (!l[i].on || !l[j].on || !same_listener(l[i].host, l[i].port, l[j].host, l[j].port))
                continue;
            fprintf(err, "kop: %s and %s both use port %d\n", l[i].flag, l[j].flag, l[i].port);
            usage_hint(err);
            return -EINVAL;
        }
    }
    return 0;
}

int64_t kop_config_shutdown_delay_ms(const struct kop_config *cfg)
{
    return cfg->controller_only ? 0 : cfg->shutdown_delay_ms;
}

int64_t kop_config_shutdown_deadline_ns(const struct kop_config *cfg, int64_t now_ns)
{
    /* Each duration is at most Go's 2562047h (< INT64_MAX ns); their sum
     * and now are added without overflow, saturating at INT64_MAX. */
    int64_t total_ms = kop_config_shutdown_delay_ms(cfg) + cfg->shutdown_timeout_ms;

    if (total_ms > (INT64_MAX - (now_ns > 0 ? now_ns : 0)) / 1000000)
        return INT64_MAX;
    return now_ns + total_ms * 1000000;
}

/* Pass 1: the shape of the command line, --help and --version.
 * Returns 0, KOP_CONFIG_EXIT or -EINVAL. */
static int first_pass(int argc, char **argv, FILE *out, FILE *err)
{
    const struct flag *f;
    const char *value;
    int r;

    for (int i = 1;;) {
        r = next_flag(argc, argv, &i, &f, &value, err);
        if (r < 0)
            return r;
        if (r == 0)
            return 0;
        if (f->type == FLAG_HELP) {
            print_help(out);
            return KOP_CONFIG_EXIT;
        }
        if (f->type == FLAG_VERSION) {
            print_version(out);
            return KOP_CONFIG_EXIT;
        }
    }
}

/* Pass 2: the flags, over the environment. Returns 0 or -EINVAL. */
static int apply_flags(struct kop_config *cfg, int argc, char **argv, FILE *err)
{
    const struct flag *f;
    const char *value;
    int r;

    for (int i = 1;;) {
        const char *why = "";
        char source[96];

        r = next_flag(argc, argv, &i, &f, &value, err);
        if (r < 0)
            return r;
        if (r == 0)
            return 0;
        if (apply(cfg, f, value ? value : "true", &why) != 0) {
            snprintf(source, sizeof(source), "flag --%s", f->name);
            print_invalid(err, source, f, value ? value : "", why);
            return -EINVAL;
        }
    }
}

/* --cluster: the members are reconciled by the reconciler, one leader for
 * all; sharding across clusters is not built. */
static int check_clusters(const struct kop_config *cfg, FILE *err)
{
    if (cfg->n_clusters == 0 && !cfg->cluster_secrets)
        return 0;
    const char *flag = cfg->n_clusters ? "--cluster" : "--cluster-secrets";
    if (cfg->webhook_only) {
        fprintf(err, "kop: %s needs the reconciler; it does not go with --webhook-only\n", flag);
        usage_hint(err);
        return -EINVAL;
    }
    if (cfg->sharding) {
        fprintf(err,
                "kop: %s does not go with --sharding (sharding is for the local cluster only)\n",
                flag);
        usage_hint(err);
        return -EINVAL;
    }
    for (size_t i = 0; i < cfg->n_clusters; i++)
        if (check_file(err, "cluster", cfg->clusters[i].kubeconfig) != 0)
            return -EINVAL;
    return 0;
}

/* The cross-flag rules: every one lives here, so the tests and the fuzzer
 * see what the binary enforces. Returns 0 or -EINVAL. */
static int check_cross_flags(const struct kop_config *cfg, FILE *err)
{
    if (cfg->webhook_only && cfg->controller_only) {
        fprintf(err, "kop: --webhook-only and --controller-only cannot be used together\n");
        usage_hint(err);
        return -EINVAL;
    }
    if (strcmp(cfg->storage_version, "v1") != 0 && strcmp(cfg->storage_version, "v2") != 0) {
        char q[256];

        fprintf(err, "kop: invalid value \"%s\" for flag --storage-version: must be v1 or v2\n",
                quoted(cfg->storage_version, q, sizeof(q)));
        usage_hint(err);
        return -EINVAL;
    }
    if (cfg->self_signed_certs && cfg->controller_only) {
        fprintf(err, "kop: --self-signed-certs needs the webhook server; it does not go with "
                     "--controller-only\n");
        usage_hint(err);
        return -EINVAL;
    }
    if (cfg->otlp_endpoint[0] && strncmp(cfg->otlp_endpoint, "http://", 7) != 0 &&
        strncmp(cfg->otlp_endpoint, "https://", 8) != 0) {
        fprintf(err, "kop: --otlp-endpoint must be an http:// or https:// URL\n");
        usage_hint(err);
        return -EINVAL;
    }
    if (port_clash(err, cfg) != 0)
        return -EINVAL;
    if ((cfg->leader_elect || cfg->sharding) && cfg->leader_election_id[0] == '\0') {
        fprintf(err, "kop: --leader-election-id must not be empty with --leader-elect or "
                     "--sharding\n");
        usage_hint(err);
        return -EINVAL;
    }
    if (cfg->client_cert_names && !cfg->client_ca_file) {
        fprintf(err, "kop: --client-cert-allowed-names needs --client-ca-file\n");
        usage_hint(err);
        return -EINVAL;
    }
    if (check_file(err, "client-ca-file", cfg->client_ca_file) != 0 ||
        check_file(err, "kubeconfig", cfg->kubeconfig) != 0)
        return -EINVAL;
    if (check_clusters(cfg, err) != 0)
        return -EINVAL;
    if (cfg->otlp_endpoint[0] && !cfg->otlp_service_name[0]) {
        fprintf(err, "kop: --otlp-service-name must not be empty\n");
        usage_hint(err);
        return -EINVAL;
    }
    return 0;
}

int kop_config_parse(struct kop_config *cfg, int argc, char **argv, char **envp, FILE *out,
                     FILE *err)
{
    assert(cfg);
    if (out == NULL)
        out = stdout;
    if (err == NULL)
        err = stderr;
    kop_config_defaults(cfg);
    int r = first_pass(argc, argv, out, err);
    if (r != 0)
        return r;
    if (apply_env(cfg, envp, err) != 0)
        return -EINVAL;
    r = apply_flags(cfg, argc, argv, err);
    if (r == 0)
        r = check_cross_flags(cfg, err);
    return r < 0 ? r : KOP_CONFIG_OK;
}
