/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim certificates and kubeconfig: a fresh ECDSA P-256 CA and a
 * serving certificate for 127.0.0.1, ::1 and localhost (mbedTLS x509write),
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

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/ecp.h>
#include <mbedtls/entropy.h>
#include <mbedtls/oid.h>
#include <mbedtls/pk.h>
#include <mbedtls/x509_crt.h>

#define PEM_MAX 8192

static void validity(char *from, char *to, size_t len)
{
    time_t now = time(NULL);
    time_t a = now - 24 * 3600;
    time_t b = now + 10L * 365 * 24 * 3600;
    struct tm tm;
    gmtime_r(&a, &tm);
    strftime(from, len, "%Y%m%d%H%M%S", &tm);
    gmtime_r(&b, &tm);
    strftime(to, len, "%Y%m%d%H%M%S", &tm);
}

/* DER SubjectAltName: DNS:localhost, IP:127.0.0.1, IP:::1. */
static size_t san_der(unsigned char *buf, size_t cap)
{
    static const unsigned char body[] = {
        0x82, 9, 'l', 'o', 'c', 'a', 'l', 'h', 'o', 's', 't', 0x87, 4, 127, 0, 0, 1, 0x87,
        16,   0, 0,   0,   0,   0,   0,   0,   0,   0,   0,   0,    0, 0,   0, 0, 1,
    };
    if (cap < sizeof(body) + 2)
        return 0;
    buf[0] = 0x30;
    buf[1] = (unsigned char)sizeof(body);
    memcpy(buf + 2, body, sizeof(body));
    return sizeof(body) + 2;
}

static int make_cert(mbedtls_ctr_drbg_context *drbg, mbedtls_pk_context *subject_key,
                     mbedtls_pk_context *issuer_key, const char *subject, const char *issuer,
                     bool ca, int serial, char *pem, size_t pem_len)
{
    mbedtls_x509write_cert crt;
    mbedtls_mpi sn;
    char from[32], to[32];
    int rc;

    mbedtls_x509write_crt_init(&crt);
    mbedtls_mpi_init(&sn);
    validity(from, to, sizeof(from));
    mbedtls_x509write_crt_set_version(&crt, MBEDTLS_X509_CRT_VERSION_3);
    mbedtls_x509write_crt_set_md_alg(&crt, MBEDTLS_MD_SHA256);
    mbedtls_x509write_crt_set_subject_key(&crt, subject_key);
    mbedtls_x509write_crt_set_issuer_key(&crt, issuer_key);
    rc = mbedtls_x509write_crt_set_subject_name(&crt, subject);
    if (rc == 0)
        rc = mbedtls_x509write_crt_set_issuer_name(&crt, issuer);
    if (rc == 0)
        rc = mbedtls_mpi_lset(&sn, serial);
    if (rc == 0)
        rc = mbedtls_x509write_crt_set_serial(&crt, &sn);
    if (rc == 0)
        rc = mbedtls_x509write_crt_set_validity(&crt, from, to);
    if (rc == 0)
        rc = mbedtls_x509write_crt_set_basic_constraints(&crt, ca ? 1 : 0, -1);
    if (rc == 0)
        rc = mbedtls_x509write_crt_set_subject_key_identifier(&crt);
    if (rc == 0)
        rc = mbedtls_x509write_crt_set_authority_key_identifier(&crt);
    if (rc == 0)
        rc = mbedtls_x509write_crt_set_key_usage(
            &crt, ca ? (MBEDTLS_X509_KU_KEY_CERT_SIGN | MBEDTLS_X509_KU_CRL_SIGN |
                        MBEDTLS_X509_KU_DIGITAL_SIGNATURE)
                     : (MBEDTLS_X509_KU_DIGITAL_SIGNATURE | MBEDTLS_X509_KU_KEY_ENCIPHERMENT));
    if (rc == 0 && !ca) {
        unsigned char san[64];
        size_t n = san_der(san, sizeof(san));
        rc = mbedtls_x509write_crt_set_extension(&crt, MBEDTLS_OID_SUBJECT_ALT_NAME,
                                                 MBEDTLS_OID_SIZE(MBEDTLS_OID_SUBJECT_ALT_NAME), 0,
                                                 san, n);
    }
    if (rc == 0)
        rc = mbedtls_x509write_crt_pem(&crt, (unsigned char *)pem, pem_len, mbedtls_ctr_drbg_random,
                                       drbg);
    mbedtls_mpi_free(&sn);
    mbedtls_x509write_crt_free(&crt);
    return rc == 0 ? 0 : -EINVAL;
}

static int gen_key(mbedtls_ctr_drbg_context *drbg, mbedtls_pk_context *key)
{
    if (mbedtls_pk_setup(key, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY)) != 0)
        return -EINVAL;
    if (mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(*key), mbedtls_ctr_drbg_random,
                            drbg) != 0)
        return -EINVAL;
    return 0;
}

int ks_certs_generate(char **ret_ca_pem, char **ret_cert_pem, char **ret_key_pem)
{
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    mbedtls_pk_context ca_key, key;
    char *ca = calloc(1, PEM_MAX), *cert = calloc(1, PEM_MAX), *kp = calloc(1, PEM_MAX);
    int rc = -EINVAL;

    mbedtls_entropy_init(&entropy);
    mbedtls_ctr_drbg_init(&drbg);
    mbedtls_pk_init(&ca_key);
    mbedtls_pk_init(&key);
    if (!ca || !cert || !kp) {
        rc = -ENOMEM;
        goto out;
    }
    if (mbedtls_ctr_drbg_seed(&drbg, mbedtls_entropy_func, &entropy,
                              (const unsigned char *)"kubesim", 7) != 0)
        goto out;
    if (gen_key(&drbg, &ca_key) != 0 || gen_key(&drbg, &key) != 0)
        goto out;
    if (make_cert(&drbg, &ca_key, &ca_key, "CN=kubesim-ca,O=kubesim", "CN=kubesim-ca,O=kubesim",
                  true, 1, ca, PEM_MAX) != 0)
        goto out;
    if (make_cert(&drbg, &key, &ca_key, "CN=kubesim,O=kubesim", "CN=kubesim-ca,O=kubesim", false, 2,
                  cert, PEM_MAX) != 0)
        goto out;
    if (mbedtls_pk_write_key_pem(&key, (unsigned char *)kp, PEM_MAX) != 0)
        goto out;
    *ret_ca_pem = ca;
    *ret_cert_pem = cert;
    *ret_key_pem = kp;
    ca = cert = kp = NULL;
    rc = 0;
out:
    mbedtls_pk_free(&ca_key);
    mbedtls_pk_free(&key);
    mbedtls_ctr_drbg_free(&drbg);
    mbedtls_entropy_free(&entropy);
    free(ca);
    free(cert);
    free(kp);
    return rc;
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
