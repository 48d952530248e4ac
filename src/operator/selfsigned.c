/* SPDX-License-Identifier: Apache-2.0 */
/*
 * --self-signed-certs: keep a CA and serving certificate for kop's webhook
 * Service in --cert-dir (reused while good, regenerated otherwise) and
 * publish the CA as the caBundle of the CRD's conversion webhook and of
 * the ValidatingWebhookConfiguration, the job cert-manager's cainjector
 * does in the default install.
 */
#include "kop/selfsigned.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <mbedtls/base64.h>

#include "kop/certgen.h"
#include "kop/client.h"
#include "kop/json.h"
#include "kop/log.h"

#define LOGGER "selfsigned"
#define DEFAULT_SERVICE "kop-webhook-service"
#define DEFAULT_NAMESPACE "kop-system"
#define DEFAULT_CRD "myresources.mygroup.example.com"
#define DEFAULT_WEBHOOK "kop-validating-webhook"
#define RENEW_BEFORE_DEFAULT_S (30LL * 24 * 3600)
#define MAX_DNS_NAME 253
#define MAX_EXTRA_NAMES 32
#define CONFLICT_ATTEMPTS 5

static const struct kop_resource crd_res = {
    .group = "apiextensions.k8s.io",
    .version = "v1",
    .resource = "customresourcedefinitions",
    .namespaced = false,
};

static const struct kop_resource vwc_res = {
    .group = "admissionregistration.k8s.io",
    .version = "v1",
    .resource = "validatingwebhookconfigurations",
    .namespaced = false,
};

/* The service names plus the extras, NULL-terminated, in fixed storage. */
struct names {
    char svc[MAX_DNS_NAME + 1];
    char svc_local[MAX_DNS_NAME + 1];
    const char *list[2 + MAX_EXTRA_NAMES + 1];
};

static int service_names(const struct kop_selfsigned_options *opts, struct names *n)
{
    const char *svc = opts->service_name ? opts->service_name : DEFAULT_SERVICE;
    const char *ns = opts->service_namespace;
    if (!ns || !*ns) {
        /* Read once at start-up, before threads; getenv is fine here. */
        const char *env = getenv("POD_NAMESPACE"); /* NOLINT(concurrency-mt-unsafe) */
        ns = env && *env ? env : DEFAULT_NAMESPACE;
    }
    if (!*svc)
        return -EINVAL;
    int a = snprintf(n->svc, sizeof(n->svc), "%s.%s.svc", svc, ns);
    int b = snprintf(n->svc_local, sizeof(n->svc_local), "%s.%s.svc.cluster.local", svc, ns);
    if (a < 0 || (size_t)a >= sizeof(n->svc) || b < 0 || (size_t)b >= sizeof(n->svc_local))
        return -EINVAL;
    size_t i = 0;
    n->list[i++] = n->svc;
    n->list[i++] = n->svc_local;
    for (size_t k = 0; opts->extra_dns_names && opts->extra_dns_names[k]; k++) {
        if (k >= MAX_EXTRA_NAMES)
            return -EINVAL;
        n->list[i++] = opts->extra_dns_names[k];
    }
    n->list[i] = NULL;
    return 0;
}

static const char *reason(int err)
{
    switch (err) {
    case -ENOENT:
        return "missing";
    case -EBADMSG:
        return "invalid";
    case -EADDRNOTAVAIL:
        return "wrong names";
    case -EKEYEXPIRED:
        return "expiring";
    default:
        return "unreadable";
    }
}

static int check_dir(const struct kop_selfsigned_options *opts, const struct names *n)
{
    struct kop_certgen_pair pair = {0};
    int rc = kop_certgen_read_dir(opts->cert_dir, &pair);
    if (rc == 0) {
        const struct kop_certgen_check check = {
            .dns_names = n->list,
            .min_remaining_s =
                opts->renew_before_s > 0 ? opts->renew_before_s : RENEW_BEFORE_DEFAULT_S,
            .now_s = opts->now_s,
        };
        rc = kop_certgen_check_pair(&pair, &check);
    }
    kop_certgen_pair_cleanup(&pair);
    return rc;
}

int kop_selfsigned_check(const struct kop_selfsigned_options *opts)
{
    struct names n;
    assert(opts);
    if (!opts->cert_dir || !*opts->cert_dir)
        return -EINVAL;
    int rc = service_names(opts, &n);
    if (rc < 0)
        return rc;
    return check_dir(opts, &n);
}

int kop_selfsigned_prepare(const struct kop_selfsigned_options *opts)
{
    struct names n;
    struct kop_certgen_pair pair = {0};
    assert(opts);
    if (!opts->cert_dir || !*opts->cert_dir)
        return -EINVAL;
    int rc = service_names(opts, &n);
    if (rc < 0)
        return rc;
    int why = check_dir(opts, &n);
    if (why == 0) {
        kop_log(KOP_LOG_INFO, LOGGER, "reusing the self-signed certificate",
                json_pack("{s:s, s:s}", "certDir", opts->cert_dir, "dnsName", n.svc));
        return 0;
    }
    const struct kop_certgen_options gen = {
        .ca_common_name = "kop-selfsigned-ca",
        .dns_names = n.list,
        .ip_addresses = opts->ip_addresses,
        .validity_s = opts->validity_s,
        .now_s = opts->now_s,
    };
    rc = kop_certgen_generate(&gen, &pair);
    if (rc == 0)
        rc = kop_certgen_write_dir(opts->cert_dir, &pair);
    kop_certgen_pair_cleanup(&pair);
    if (rc < 0)
        return rc;
    kop_log(KOP_LOG_INFO, LOGGER, "generated a self-signed CA and serving certificate",
            json_pack("{s:s, s:s, s:s}", "certDir", opts->cert_dir, "dnsName", n.svc, "reason",
                      reason(why)));
    return 0;
}

/* ---- caBundle injection ------------------------------------------------------- */

/* base64 of dir/ca.crt (malloc'd). */
static int ca_bundle(const char *dir, char **ret)
{
    struct kop_certgen_pair pair = {0};
    char *b64 = NULL;
    size_t olen = 0;
    int rc = kop_certgen_read_dir(dir, &pair);
    if (rc < 0)
        goto out;
    const unsigned char *ca = (const unsigned char *)pair.ca_pem;
    size_t len = strlen(pair.ca_pem);
    if (len == 0) {
        rc = -ENOENT;
        goto out;
    }
    (void)mbedtls_base64_encode(NULL, 0, &olen, ca, len);
    b64 = malloc(olen + 1);
    if (!b64) {
        rc = -ENOMEM;
        goto out;
    }
    if (mbedtls_base64_encode((unsigned char *)b64, olen + 1, &olen, ca, len) != 0) {
        rc = -EIO;
        goto out;
    }
    b64[olen] = '\0';
    *ret = b64;
    b64 = NULL;
out:
    free(b64);
    kop_certgen_pair_cleanup(&pair);
    return rc;
}

static void log_failure(const char *what, const char *name, int rc, const struct kop_api_status *st)
{
    kop_log_errno(
        KOP_LOG_ERROR, LOGGER, what, rc,
        json_pack("{s:s, s:i, s:s}", "name", name, "code", st->code, "message", st->message));
}

static int inject_crd(struct kop_client *client, const char *name, const char *bundle)
{
    struct kop_api_status st = {0};
    json_t *crd = NULL, *patch = NULL;
    int rc = kop_client_get(client, &crd_res, NULL, name, &st, &crd);
    if (rc < 0) {
        log_failure("cannot read the CRD", name, rc, &st);
        goto out;
    }
    const char *strategy = kop_json_path_str(crd, "spec.conversion.strategy");
    if (!strategy || strcmp(strategy, "Webhook") != 0) {
        /* The apiserver refuses webhook settings without the strategy. */
        kop_log(KOP_LOG_WARN, LOGGER, "the CRD has no conversion webhook; caBundle not set",
                json_pack("{s:s}", "name", name));
        goto out;
    }
    const char *have = kop_json_path_str(crd, "spec.conversion.webhook.clientConfig.caBundle");
    if (have && strcmp(have, bundle) == 0) {
        kop_log(KOP_LOG_INFO, LOGGER, "caBundle already set",
                json_pack("{s:s, s:s}", "kind", "CustomResourceDefinition", "name", name));
        goto out;
    }
    /* No list on the path, so a merge patch touches caBundle only. */
    patch = json_pack("{s:{s:{s:{s:{s:s}}}}}", "spec", "conversion", "webhook", "clientConfig",
                      "caBundle", bundle);
    if (!patch) {
        rc = -ENOMEM;
        goto out;
    }
    memset(&st, 0, sizeof(st));
    rc = kop_client_patch(client, &crd_res, NULL, name, patch, &st, NULL);
    if (rc < 0) {
        log_failure("cannot patch the CRD's caBundle", name, rc, &st);
        goto out;
    }
    kop_log(KOP_LOG_INFO, LOGGER, "caBundle set",
            json_pack("{s:s, s:s}", "kind", "CustomResourceDefinition", "name", name));
out:
    json_decref(patch);
    json_decref(crd);
    return rc;
}

/* Set caBundle in every webhooks[*].clientConfig of obj (owned, unshared).
 * Returns how many entries changed, or -ENOMEM. */
static int set_bundles(json_t *obj, const char *bundle)
{
    json_t *hooks = json_object_get(obj, "webhooks");
    json_t *hook;
    size_t i;
    int changed = 0;
    json_array_foreach(hooks, i, hook)
    {
        if (!json_is_object(hook))
            continue;
        json_t *cc = kop_json_object_ensure(hook, "clientConfig");
        if (!cc)
            return -ENOMEM;
        const char *have = json_string_value(json_object_get(cc, "caBundle"));
        if (have && strcmp(have, bundle) == 0)
            continue;
        if (json_object_set_new(cc, "caBundle", json_string(bundle)) != 0)
            return -ENOMEM;
        changed++;
    }
    return changed;
}

static int inject_webhooks(struct kop_client *client, const char *name, const char *bundle)
{
    struct kop_api_status st = {0};
    json_t *obj = NULL;
    int rc = -EBUSY;

    /* GET + PUT with the resourceVersion read: a merge patch would replace
     * the whole webhooks list (and a strategic merge patch is not served
     * for this type everywhere). 409 means someone wrote in between. */
    for (int attempt = 0; attempt < CONFLICT_ATTEMPTS; attempt++) {
        json_decref(obj);
        obj = NULL;
        memset(&st, 0, sizeof(st));
        rc = kop_client_get(client, &vwc_res, NULL, name, &st, &obj);
        if (rc < 0) {
            log_failure("cannot read the ValidatingWebhookConfiguration", name, rc, &st);
            goto out;
        }
        int changed = set_bundles(obj, bundle);
        if (changed < 0) {
            rc = changed;
            goto out;
        }
        if (changed == 0) {
            kop_log(
                KOP_LOG_INFO, LOGGER, "caBundle already set",
                json_pack("{s:s, s:s}", "kind", "ValidatingWebhookConfiguration", "name", name));
            goto out;
        }
        memset(&st, 0, sizeof(st));
        rc = kop_client_update(client, &vwc_res, NULL, name, obj, &st, NULL);
        if (rc == 0) {
            kop_log(KOP_LOG_INFO, LOGGER, "caBundle set",
                    json_pack("{s:s, s:s, s:i}", "kind", "ValidatingWebhookConfiguration", "name",
                              name, "webhooks", changed));
            goto out;
        }
        if (rc != -EBUSY) {
            log_failure("cannot update the ValidatingWebhookConfiguration", name, rc, &st);
            goto out;
        }
        kop_log(KOP_LOG_DEBUG, LOGGER, "conflict updating caBundle, retrying",
                json_pack("{s:s, s:i}", "name", name, "attempt", attempt + 1));
    }
    log_failure("cannot update the ValidatingWebhookConfiguration", name, rc, &st);
out:
    json_decref(obj);
    return rc;
}

int kop_selfsigned_inject(struct kop_client *client, const struct kop_selfsigned_options *opts)
{
    char *bundle = NULL;
    assert(client);
    assert(opts);
    if (!opts->cert_dir || !*opts->cert_dir)
        return -EINVAL;
    int rc = ca_bundle(opts->cert_dir, &bundle);
    if (rc < 0) {
        kop_log_errno(KOP_LOG_ERROR, LOGGER, "cannot read the CA certificate", rc,
                      json_pack("{s:s}", "certDir", opts->cert_dir));
        return rc;
    }
    rc = inject_crd(client, opts->crd_name ? opts->crd_name : DEFAULT_CRD, bundle);
    int rc2 =
        inject_webhooks(client, opts->webhook_name ? opts->webhook_name : DEFAULT_WEBHOOK, bundle);
    free(bundle);
    return rc < 0 ? rc : rc2;
}
