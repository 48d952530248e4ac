/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim certificates and kubeconfig: a fresh ECDSA P-256 CA and a
 * serving certificate for 127.0.0.1, ::1 and localhost (kop's certgen),
 * and a kubeconfig file in the shape kubectl writes (server URL, the CA as
 * certificate-authority-data, a bearer token).
 */
#include "kubesim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "kop/certgen.h"

int ks_certs_generate(char **ret_ca_pem, char **ret_cert_pem, char **ret_key_pem)
{
    static const char *const dns[] = {"localhost", NULL};
    static const char *const ips[] = {"127.0.0.1", "::1", NULL};
    const struct kop_certgen_options opts = {
        .ca_common_name = "kubesim-ca",
        .common_name = "kubesim",
        .organization = "kubesim",
        .dns_names = dns,
        .ip_addresses = ips,
        .ca_validity_s = 10LL * 365 * 24 * 3600,
        .validity_s = 10LL * 365 * 24 * 3600,
        .backdate_s = 24 * 3600,
    };
    struct kop_certgen_pair pair = {0};
    int rc = kop_certgen_generate(&opts, &pair);
    if (rc < 0)
        return rc;
    *ret_ca_pem = pair.ca_pem;
    *ret_cert_pem = pair.cert_pem;
    *ret_key_pem = pair.key_pem;
    return 0;
}

int ks_write_kubeconfig(const char *path, const char *url, const char *ca_pem, const char *token)
{
    char *ca64 = ks_base64_encode((const unsigned char *)ca_pem, strlen(ca_pem));
    char *tmp = ks_printf("%s.tmp", path);
    int rc = 0;
    FILE *f = fopen(tmp, "w");
    if (!f || !ca64) {
        rc = -errno;
        goto out;
    }
    fchmod(fileno(f), 0600);
    fprintf(f,
            "apiVersion: v1\n"
            "clusters:\n"
            "- cluster:\n"
            "    certificate-authority-data: %s\n"
            "    server: %s\n"
            "  name: kubesim\n"
            "contexts:\n"
            "- context:\n"
            "    cluster: kubesim\n"
            "    namespace: default\n"
            "    user: kubesim-admin\n"
            "  name: kubesim\n"
            "current-context: kubesim\n"
            "kind: Config\n"
            "preferences: {}\n"
            "users:\n"
            "- name: kubesim-admin\n"
            "  user:\n"
            "    token: %s\n",
            ca64, url, token);
    if (fclose(f) != 0) {
        f = NULL;
        rc = -EIO;
        goto out;
    }
    f = NULL;
    if (rename(tmp, path) != 0)
        rc = -errno;
out:
    if (f)
        fclose(f);
    free(ca64);
    free(tmp);
    return rc;
}
