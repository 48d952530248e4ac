/* SPDX-License-Identifier: Apache-2.0 */
/*
 * --self-signed-certs: the install without cert-manager. kop keeps its own
 * CA and serving certificate in --cert-dir and tells the API server to
 * trust that CA by writing it (base64 PEM) into the caBundle of
 *   - the CRD myresources.mygroup.example.com,
 *     spec.conversion.webhook.clientConfig.caBundle (a JSON merge patch:
 *     no list on the way), and
 *   - the ValidatingWebhookConfiguration kop-validating-webhook,
 *     webhooks[*].clientConfig.caBundle (GET, edit every entry, PUT with
 *     the resourceVersion read, again on 409 Conflict: a merge patch would
 *     replace the webhooks list wholesale).
 * Objects that already carry the CA are not written (a restart with a
 * reused pair costs no write).
 *
 * The serving certificate names the webhook Service:
 *   <service>.<namespace>.svc and <service>.<namespace>.svc.cluster.local,
 * service "kop-webhook-service", namespace $POD_NAMESPACE or "kop-system"
 * unless given. A pair already in the directory is reused when it is
 * complete (tls.crt, tls.key, ca.crt), the key matches, ca.crt verifies
 * tls.crt, the names are covered and neither certificate expires within
 * renew_before_s (30 days); otherwise a new CA and pair replace it.
 *
 * Logs (logger "selfsigned"): reuse or generation and why, each caBundle
 * written. RBAC needed for inject: get, update and patch on
 * customresourcedefinitions (apiextensions.k8s.io) and
 * validatingwebhookconfigurations (admissionregistration.k8s.io), both
 * limited by resourceNames.
 *
 * Thread-safety: prepare and inject may run on any thread but not at the
 * same time on the same directory; they keep no state between calls.
 */
#ifndef KOP_SELFSIGNED_H
#define KOP_SELFSIGNED_H

#include <stdint.h>

struct kop_client;

struct kop_selfsigned_options {
    const char *cert_dir;               /* required: tls.crt, tls.key, ca.crt live here */
    const char *service_name;           /* NULL: "kop-webhook-service" */
    const char *service_namespace;      /* NULL: $POD_NAMESPACE, else "kop-system" */
    const char *const *extra_dns_names; /* NULL-terminated, added to the SANs; may be NULL */
    const char *const *ip_addresses;    /* NULL-terminated IP SANs; may be NULL */
    int64_t renew_before_s;             /* 0: 30 days */
    int64_t validity_s;                 /* serving certificate; 0: 1 year (CA: 10 years) */
    int64_t now_s;                      /* Unix seconds; 0: the current time (tests) */
    /* Objects inject patches; NULL: the defaults above. */
    const char *crd_name;     /* "myresources.mygroup.example.com" */
    const char *webhook_name; /* "kop-validating-webhook" */
};

/*
 * Check the pair in opts->cert_dir without changing anything. Returns 0
 * (usable as is) or why not, as kop_certgen_check_pair() does: -ENOENT
 * (a file is missing), -EBADMSG, -EADDRNOTAVAIL (a service name is not
 * covered), -EKEYEXPIRED (expires within renew_before_s); or -EINVAL,
 * -ENOMEM, the errno of a read.
 */
int kop_selfsigned_check(const struct kop_selfsigned_options *opts);

/*
 * Make sure opts->cert_dir holds a usable pair: keep the one there when
 * kop_selfsigned_check() accepts it, else generate a new CA and serving
 * certificate and write them (kop_certgen_write_dir). Call before the
 * webhook server loads the directory. Returns 0, -EINVAL (no cert_dir, a
 * name too long), or the error of generating or writing.
 */
int kop_selfsigned_prepare(const struct kop_selfsigned_options *opts);

/*
 * Write the CA of opts->cert_dir (ca.crt, as prepared) into the caBundle
 * fields named above. Both objects are attempted; a CRD whose conversion
 * strategy is not Webhook is left alone (logged). Conflicts are retried
 * (5 attempts). Returns 0, or the first error: the read of ca.crt,
 * -ENOENT (an object does not exist), -EBUSY (still conflicting), or what
 * the client returned (-EPERM when RBAC forbids it, ...).
 */
int kop_selfsigned_inject(struct kop_client *client, const struct kop_selfsigned_options *opts);

#endif /* KOP_SELFSIGNED_H */
