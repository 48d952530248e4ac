/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for the certificate generator: the CA verifies the leaf, the
 * extensions (SANs, key usages, basic constraints, serials, validity) are
 * what the header promises, files land with the right modes and no
 * temporaries, the usability check gives the right reason for each defect,
 * and a generated pair serves TLS through kop's front to a libcurl
 * (OpenSSL) client that verifies against the generated CA.
 */
#include <check.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <mbedtls/asn1.h>
#include <mbedtls/oid.h>
#include <mbedtls/pk.h>
#include <mbedtls/x509_crt.h>
#include <mbedtls/psa_util.h>
#include <psa/crypto.h>

#include "kop/certgen.h"
#include "kop/curltls.h"
#include "kop/http.h"
#include "kop/metrics.h"
#include "kop/tls.h"
#include "testutil.h"

#define SVC "kop-webhook-service.kop-system.svc"
#define SVC_LOCAL "kop-webhook-service.kop-system.svc.cluster.local"

static const char *const dns[] = {SVC, SVC_LOCAL, "localhost", NULL};
static const char *const ips[] = {"127.0.0.1", "::1", NULL};

static void generate(struct kop_certgen_pair *p, int64_t now_s, int64_t validity_s)
{
    const struct kop_certgen_options o = {
        .dns_names = dns, .ip_addresses = ips, .now_s = now_s, .validity_s = validity_s};
    ck_assert_int_eq(kop_certgen_generate(&o, p), 0);
    ck_assert_ptr_nonnull(p->ca_pem);
    ck_assert_ptr_nonnull(p->cert_pem);
    ck_assert_ptr_nonnull(p->key_pem);
}

static void parse(mbedtls_x509_crt *c, const char *pem)
{
    mbedtls_x509_crt_init(c);
    ck_assert_int_eq(mbedtls_x509_crt_parse(c, (const unsigned char *)pem, strlen(pem) + 1), 0);
}

static int64_t unix_time(const mbedtls_x509_time *t)
{
    struct tm tm = {.tm_year = t->year - 1900,
                    .tm_mon = t->mon - 1,
                    .tm_mday = t->day,
                    .tm_hour = t->hour,
                    .tm_min = t->min,
                    .tm_sec = t->sec};
    return (int64_t)timegm(&tm);
}

/* Walk the raw subjectAltName extension of c: count DNS names equal to
 * one of dns[] and IP entries of 4 and 16 bytes. */
static void count_sans(const mbedtls_x509_crt *c, int *ret_dns, int *ret_v4, int *ret_v6)
{
    int nd = 0, n4 = 0, n6 = 0;
    unsigned char *p = c->v3_ext.p, *end = c->v3_ext.p + c->v3_ext.len;
    size_t len;
    /* Extensions ::= [3] { SEQUENCE OF Extension }, v3_ext holds the inner SEQUENCE. */
    ck_assert_int_eq(
        mbedtls_asn1_get_tag(&p, end, &len, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE), 0);
    while (p < end) {
        unsigned char *ext_end;
        ck_assert_int_eq(
            mbedtls_asn1_get_tag(&p, end, &len, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE),
            0);
        ext_end = p + len;
        mbedtls_asn1_buf oid;
        ck_assert_int_eq(mbedtls_asn1_get_tag(&p, ext_end, &oid.len, MBEDTLS_ASN1_OID), 0);
        oid.p = p;
        p += oid.len;
        if (oid.len != MBEDTLS_OID_SIZE(MBEDTLS_OID_SUBJECT_ALT_NAME) ||
            memcmp(oid.p, MBEDTLS_OID_SUBJECT_ALT_NAME, oid.len) != 0) {
            p = ext_end;
            continue;
        }
        int crit = 0;
        (void)mbedtls_asn1_get_bool(&p, ext_end, &crit);
        ck_assert_int_eq(mbedtls_asn1_get_tag(&p, ext_end, &len, MBEDTLS_ASN1_OCTET_STRING), 0);
        ck_assert_int_eq(mbedtls_asn1_get_tag(&p, ext_end, &len,
                                              MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE),
                         0);
        while (p < ext_end) {
            unsigned char tag = *p++;
            ck_assert_int_eq(mbedtls_asn1_get_len(&p, ext_end, &len), 0);
            if (tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | 2)) {
                for (int i = 0; dns[i]; i++)
                    if (strlen(dns[i]) == len && memcmp(dns[i], p, len) == 0)
                        nd++;
            } else if (tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | 7)) {
                static const unsigned char lo4[] = {127, 0, 0, 1};
                static const unsigned char lo6[16] = {[15] = 1};
                if (len == 4 && memcmp(p, lo4, 4) == 0)
                    n4++;
                if (len == 16 && memcmp(p, lo6, 16) == 0)
                    n6++;
            }
            p += len;
        }
    }
    *ret_dns = nd;
    *ret_v4 = n4;
    *ret_v6 = n6;
}

START_TEST(test_certgen_ca_verifies_leaf)
{
    struct kop_certgen_pair p = {0};
    generate(&p, 0, 0);
    mbedtls_x509_crt ca, leaf;
    parse(&ca, p.ca_pem);
    parse(&leaf, p.cert_pem);
    uint32_t flags = 0;
    for (int i = 0; dns[i]; i++) {
        int r = mbedtls_x509_crt_verify(&leaf, &ca, NULL, dns[i], &flags, NULL, NULL);
        ck_assert_msg(r == 0, "verify %s: flags 0x%x", dns[i], (unsigned)flags);
    }
    ck_assert_int_ne(
        mbedtls_x509_crt_verify(&leaf, &ca, NULL, "other.example.com", &flags, NULL, NULL), 0);
    ck_assert(flags & MBEDTLS_X509_BADCERT_CN_MISMATCH);
    /* A different CA does not verify it. */
    struct kop_certgen_pair q = {0};
    generate(&q, 0, 0);
    mbedtls_x509_crt other;
    parse(&other, q.ca_pem);
    ck_assert_int_ne(mbedtls_x509_crt_verify(&leaf, &other, NULL, NULL, &flags, NULL, NULL), 0);
    ck_assert(flags & MBEDTLS_X509_BADCERT_NOT_TRUSTED);
    mbedtls_x509_crt_free(&other);
    mbedtls_x509_crt_free(&ca);
    mbedtls_x509_crt_free(&leaf);
    kop_certgen_pair_cleanup(&q);
    kop_certgen_pair_cleanup(&p);
}
END_TEST

START_TEST(test_certgen_extensions)
{
    struct kop_certgen_pair p = {0};
    generate(&p, 0, 0);
    mbedtls_x509_crt ca, leaf;
    parse(&ca, p.ca_pem);
    parse(&leaf, p.cert_pem);
    /* CA: basicConstraints CA with pathLen 0 (mbedTLS stores pathLen + 1),
     * keyCertSign. The fields are mbedTLS 3.6's private ones: it has no
     * accessor for them. */
    ck_assert_int_eq(ca.MBEDTLS_PRIVATE(ca_istrue), 1);
    ck_assert_int_eq(ca.MBEDTLS_PRIVATE(max_pathlen), 1);
    ck_assert_int_eq(mbedtls_x509_crt_check_key_usage(&ca, MBEDTLS_X509_KU_KEY_CERT_SIGN), 0);
    ck_assert_int_eq(ca.version, 3);
    /* Leaf: no CA, digitalSignature, serverAuth, EC P-256, SHA-256. */
    ck_assert_int_eq(leaf.MBEDTLS_PRIVATE(ca_istrue), 0);
    ck_assert_int_eq(mbedtls_x509_crt_check_key_usage(&leaf, MBEDTLS_X509_KU_DIGITAL_SIGNATURE), 0);
    ck_assert_int_ne(mbedtls_x509_crt_check_key_usage(&leaf, MBEDTLS_X509_KU_KEY_CERT_SIGN), 0);
    ck_assert_int_eq(mbedtls_x509_crt_check_extended_key_usage(
                         &leaf, MBEDTLS_OID_SERVER_AUTH, MBEDTLS_OID_SIZE(MBEDTLS_OID_SERVER_AUTH)),
                     0);
    ck_assert_int_ne(mbedtls_x509_crt_check_extended_key_usage(
                         &leaf, MBEDTLS_OID_CLIENT_AUTH, MBEDTLS_OID_SIZE(MBEDTLS_OID_CLIENT_AUTH)),
                     0);
    ck_assert_int_eq(mbedtls_pk_get_type(&leaf.pk), MBEDTLS_PK_ECKEY);
    const mbedtls_ecp_keypair *ec = mbedtls_pk_ec(leaf.pk);
    ck_assert_ptr_nonnull(ec);
    if (ec)
        ck_assert_int_eq(mbedtls_ecp_keypair_get_group_id(ec), MBEDTLS_ECP_DP_SECP256R1);
    ck_assert_int_eq(leaf.MBEDTLS_PRIVATE(sig_md), MBEDTLS_MD_SHA256);
    /* SANs: every DNS name and both loopback IPs. */
    int nd, n4, n6;
    count_sans(&leaf, &nd, &n4, &n6);
    ck_assert_int_eq(nd, 3);
    ck_assert_int_eq(n4, 1);
    ck_assert_int_eq(n6, 1);
    /* CN defaults to the first DNS name; the issuer is the CA's subject. */
    char name[256];
    ck_assert_int_gt(mbedtls_x509_dn_gets(name, sizeof(name), &leaf.subject), 0);
    ck_assert_str_eq(name, "CN=" SVC);
    ck_assert_int_gt(mbedtls_x509_dn_gets(name, sizeof(name), &leaf.issuer), 0);
    ck_assert_str_eq(name, "CN=selfsigned-ca"); /* the default CA name */
    /* Serial: 16 bytes, positive (DER puts no leading zero). */
    ck_assert_uint_eq(leaf.serial.len, 16);
    ck_assert_uint_lt(leaf.serial.p[0], 0x80);
    ck_assert(ca.serial.len != leaf.serial.len ||
              memcmp(ca.serial.p, leaf.serial.p, ca.serial.len) != 0);
    /* The key matches the leaf and not the CA. */
    mbedtls_pk_context key;
    mbedtls_pk_init(&key);
    ck_assert_int_eq(psa_crypto_init(), PSA_SUCCESS);
    ck_assert_int_eq(mbedtls_pk_parse_key(&key, (const unsigned char *)p.key_pem,
                                          strlen(p.key_pem) + 1, NULL, 0, mbedtls_psa_get_random,
                                          MBEDTLS_PSA_RANDOM_STATE),
                     0);
    ck_assert_int_eq(
        mbedtls_pk_check_pair(&leaf.pk, &key, mbedtls_psa_get_random, MBEDTLS_PSA_RANDOM_STATE), 0);
    ck_assert_int_ne(
        mbedtls_pk_check_pair(&ca.pk, &key, mbedtls_psa_get_random, MBEDTLS_PSA_RANDOM_STATE), 0);
    mbedtls_pk_free(&key);
    mbedtls_x509_crt_free(&ca);
    mbedtls_x509_crt_free(&leaf);
    kop_certgen_pair_cleanup(&p);
}
END_TEST

START_TEST(test_certgen_validity_and_serials)
{
    const int64_t now = 1700000000; /* 2023-11-14 */
    struct kop_certgen_pair p = {0}, q = {0};
    generate(&p, now, 7 * 86400);
    generate(&q, now, 0);
    mbedtls_x509_crt ca, leaf, leaf2;
    parse(&ca, p.ca_pem);
    parse(&leaf, p.cert_pem);
    parse(&leaf2, q.cert_pem);
    ck_assert_int_eq(unix_time(&leaf.valid_from), now - 3600);
    ck_assert_int_eq(unix_time(&leaf.valid_to), now + 7 * 86400);
    ck_assert_int_eq(unix_time(&leaf2.valid_to), now + 365 * 86400);
    ck_assert_int_eq(unix_time(&ca.valid_to), now + 10LL * 365 * 86400);
    ck_assert(leaf.serial.len != leaf2.serial.len ||
              memcmp(leaf.serial.p, leaf2.serial.p, leaf.serial.len) != 0);
    mbedtls_x509_crt_free(&ca);
    mbedtls_x509_crt_free(&leaf);
    mbedtls_x509_crt_free(&leaf2);
    kop_certgen_pair_cleanup(&p);
    kop_certgen_pair_cleanup(&q);

    /* The leaf never outlives its CA; notBefore without backdating. */
    const struct kop_certgen_options o = {.dns_names = dns,
                                          .ca_validity_s = 3600,
                                          .validity_s = 86400,
                                          .backdate_s = -1,
                                          .now_s = now};
    ck_assert_int_eq(kop_certgen_generate(&o, &p), 0);
    parse(&leaf, p.cert_pem);
    ck_assert_int_eq(unix_time(&leaf.valid_from), now);
    ck_assert_int_eq(unix_time(&leaf.valid_to), now + 3600);
    mbedtls_x509_crt_free(&leaf);
    kop_certgen_pair_cleanup(&p);
}
END_TEST

START_TEST(test_certgen_bad_options)
{
    struct kop_certgen_pair p = {0};
    static const char *const bad_ip[] = {"300.1.1.1", NULL};
    static const char *const empty[] = {"", NULL};
    static const char *const none[] = {NULL};
    struct kop_certgen_options o = {.dns_names = none};
    ck_assert_int_eq(kop_certgen_generate(&o, &p), -EINVAL);
    o.dns_names = empty;
    ck_assert_int_eq(kop_certgen_generate(&o, &p), -EINVAL);
    o.dns_names = dns;
    o.ip_addresses = bad_ip;
    ck_assert_int_eq(kop_certgen_generate(&o, &p), -EINVAL);
    o.ip_addresses = NULL;
    o.common_name = "back\\slash";
    ck_assert_int_eq(kop_certgen_generate(&o, &p), -EINVAL);
    o.common_name = NULL;
    o.validity_s = -1;
    ck_assert_int_eq(kop_certgen_generate(&o, &p), -EINVAL);
    ck_assert_ptr_null(p.cert_pem);
    /* Commas in names are escaped, not split into extra attributes. */
    o.validity_s = 0;
    o.organization = "Example, Inc.";
    o.ca_common_name = "ca=1";
    ck_assert_int_eq(kop_certgen_generate(&o, &p), 0);
    mbedtls_x509_crt ca;
    parse(&ca, p.ca_pem);
    char name[256];
    ck_assert_int_gt(mbedtls_x509_dn_gets(name, sizeof(name), &ca.subject), 0);
    ck_assert_str_eq(name, "CN=ca\\=1, O=Example\\, Inc.");
    mbedtls_x509_crt_free(&ca);
    kop_certgen_pair_cleanup(&p);
    kop_certgen_pair_cleanup(NULL);
    /* Only IPs is fine too. */
    struct kop_certgen_options ipo = {.ip_addresses = ips};
    ck_assert_int_eq(kop_certgen_generate(&ipo, &p), 0);
    kop_certgen_pair_cleanup(&p);
}
END_TEST

static mode_t mode_of(const char *dir, const char *name)
{
    char path[2048]; /* dir is at most 1023 bytes */
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    ck_assert_int_eq(stat(path, &st), 0);
    return st.st_mode & 07777;
}

static int entries(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

START_TEST(test_certgen_write_dir)
{
    char *tmp = kop_test_tmpdir();
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s/a/b/certs", tmp);
    struct kop_certgen_pair p = {0}, q = {0}, r = {0};
    generate(&p, 0, 0);
    ck_assert_int_eq(kop_certgen_write_dir(dir, &p), 0);
    ck_assert_uint_eq(mode_of(dir, "tls.key"), 0600);
    ck_assert_uint_eq(mode_of(dir, "tls.crt"), 0644);
    ck_assert_uint_eq(mode_of(dir, "ca.crt"), 0644);
    ck_assert_int_eq(entries(dir), 3); /* no temporaries left */
    ck_assert_int_eq(kop_certgen_read_dir(dir, &r), 0);
    ck_assert_str_eq(r.cert_pem, p.cert_pem);
    ck_assert_str_eq(r.key_pem, p.key_pem);
    ck_assert_str_eq(r.ca_pem, p.ca_pem);
    kop_certgen_pair_cleanup(&r);
    /* Replacing keeps the modes and the file count. */
    generate(&q, 0, 0);
    ck_assert_int_eq(kop_certgen_write_dir(dir, &q), 0);
    ck_assert_int_eq(entries(dir), 3);
    ck_assert_uint_eq(mode_of(dir, "tls.key"), 0600);
    ck_assert_int_eq(kop_certgen_read_dir(dir, &r), 0);
    ck_assert_str_eq(r.cert_pem, q.cert_pem);
    kop_certgen_pair_cleanup(&r);
    /* Errors. */
    char missing[1024];
    snprintf(missing, sizeof(missing), "%s/none", tmp);
    ck_assert_int_eq(kop_certgen_read_dir(missing, &r), -ENOENT);
    /* The bound: a file of 1 MiB - 1 bytes is read, one of 1 MiB refused. */
    char ca[1100];
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    for (size_t size = (1u << 20) - 1; size <= (1u << 20); size++) {
        FILE *f = fopen(ca, "wb");
        ck_assert_ptr_nonnull(f);
        for (size_t i = 0; i < size; i++)
            ck_assert_int_eq(fputc('x', f), 'x');
        ck_assert_int_eq(fclose(f), 0);
        int rc = kop_certgen_read_dir(dir, &r);
        if (size < (1u << 20)) {
            ck_assert_int_eq(rc, 0);
            ck_assert_uint_eq(strlen(r.ca_pem), size);
            kop_certgen_pair_cleanup(&r);
        } else {
            ck_assert_int_eq(rc, -EFBIG);
        }
    }
    char file[1100];
    snprintf(file, sizeof(file), "%s/tls.crt", dir);
    ck_assert_int_eq(kop_certgen_write_dir(file, &q), -ENOTDIR);
    kop_certgen_pair_cleanup(&p);
    kop_certgen_pair_cleanup(&q);
    kop_test_rmdir(tmp);
    free(tmp);
}
END_TEST

START_TEST(test_certgen_check_pair)
{
    const int64_t now = (int64_t)time(NULL);
    struct kop_certgen_pair p = {0}, q = {0};
    generate(&p, 0, 0);
    generate(&q, 0, 0);
    static const char *const want[] = {SVC, SVC_LOCAL, NULL};
    static const char *const other[] = {SVC, "kop-webhook-service.other.svc", NULL};
    struct kop_certgen_check c = {.dns_names = want, .min_remaining_s = 30 * 86400};
    ck_assert_int_eq(kop_certgen_check_pair(&p, &c), 0);
    /* A name that is not covered. */
    c.dns_names = other;
    ck_assert_int_eq(kop_certgen_check_pair(&p, &c), -EADDRNOTAVAIL);
    c.dns_names = want;
    /* Expiring within the window, expired, not yet valid. */
    c.now_s = now + 340 * 86400;
    ck_assert_int_eq(kop_certgen_check_pair(&p, &c), -EKEYEXPIRED);
    c.now_s = now + 400 * 86400;
    ck_assert_int_eq(kop_certgen_check_pair(&p, &c), -EKEYEXPIRED);
    c.now_s = now - 86400;
    ck_assert_int_eq(kop_certgen_check_pair(&p, &c), -EKEYEXPIRED);
    c.now_s = 0;
    /* Mixed pairs: another key, another CA. */
    struct kop_certgen_pair mix = {
        .ca_pem = p.ca_pem, .cert_pem = p.cert_pem, .key_pem = q.key_pem};
    ck_assert_int_eq(kop_certgen_check_pair(&mix, &c), -EBADMSG);
    mix.key_pem = p.key_pem;
    mix.ca_pem = q.ca_pem;
    ck_assert_int_eq(kop_certgen_check_pair(&mix, &c), -EBADMSG);
    /* Missing and garbage parts. */
    mix.ca_pem = NULL;
    ck_assert_int_eq(kop_certgen_check_pair(&mix, &c), -ENOENT);
    mix.ca_pem = p.ca_pem;
    mix.key_pem = "";
    ck_assert_int_eq(kop_certgen_check_pair(&mix, &c), -ENOENT);
    mix.key_pem = "-----BEGIN EC PRIVATE KEY-----\nnope\n-----END EC PRIVATE KEY-----\n";
    ck_assert_int_eq(kop_certgen_check_pair(&mix, &c), -EBADMSG);
    mix.key_pem = p.key_pem;
    mix.cert_pem = "not a certificate";
    ck_assert_int_eq(kop_certgen_check_pair(&mix, &c), -EBADMSG);
    /* The CA as the leaf: the key does not match. */
    mix.cert_pem = p.ca_pem;
    ck_assert_int_eq(kop_certgen_check_pair(&mix, &c), -EBADMSG);
    kop_certgen_pair_cleanup(&p);
    kop_certgen_pair_cleanup(&q);

    /* A wildcard SAN covers one label. */
    static const char *const wild[] = {"*.kop-system.svc", NULL};
    const struct kop_certgen_options o = {.dns_names = wild};
    ck_assert_int_eq(kop_certgen_generate(&o, &p), 0);
    static const char *const one[] = {SVC, NULL};
    c.dns_names = one;
    ck_assert_int_eq(kop_certgen_check_pair(&p, &c), 0);
    c.dns_names = want;
    ck_assert_int_eq(kop_certgen_check_pair(&p, &c), -EADDRNOTAVAIL);
    kop_certgen_pair_cleanup(&p);
}
END_TEST

/* ---- a generated pair behind kop's TLS front -------------------------------------- */

static void hello(void *userdata, const struct kop_http_request *req,
                  struct kop_http_response *resp)
{
    (void)userdata;
    (void)req;
    resp->body = strdup("hello");
    resp->body_len = resp->body ? 5 : 0;
    resp->content_type = "text/plain";
}

static const struct kop_http_route routes[] = {
    {.path = "/hello", .methods = KOP_HTTP_GET, .fn = hello},
};

static size_t sink(char *ptr, size_t size, size_t n, void *ud)
{
    char *out = ud;
    size_t have = strlen(out);
    size_t add = size * n;
    if (have + add < 64) {
        memcpy(out + have, ptr, add);
        out[have + add] = '\0';
    }
    return size * n;
}

/* GET /hello via url, verifying against ca_pem; resolve maps a name to
 * 127.0.0.1 ("" for none). */
static CURLcode fetch(const char *url, const char *resolve, const char *ca_pem, char *out)
{
    CURL *h = curl_easy_init();
    ck_assert_ptr_nonnull(h);
    struct curl_slist *res = resolve[0] ? curl_slist_append(NULL, resolve) : NULL;
    struct curl_blob blob = {.data = (void *)ca_pem, .len = strlen(ca_pem), .flags = 0};
    out[0] = '\0';
    curl_easy_setopt(h, CURLOPT_URL, url);
    kop_curltls_setup(h); /* IP SANs with mbedTLS (kop/curltls.h) */
    curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
    curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
    curl_easy_setopt(h, CURLOPT_RESOLVE, res);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(res);
    curl_easy_cleanup(h);
    return rc;
}

START_TEST(test_certgen_serves_tls)
{
    char *dir = kop_test_tmpdir();
    struct kop_certgen_pair p = {0}, other = {0};
    generate(&p, 0, 0);
    generate(&other, 0, 0);
    ck_assert_int_eq(kop_certgen_write_dir(dir, &p), 0);

    struct kop_metrics *m = kop_metrics_new(false);
    struct kop_http_server *http = NULL;
    struct kop_tls *tls = NULL;
    const struct kop_http_server_options ho = {.no_listen = true, .name = "webhook", .metrics = m};
    ck_assert_int_eq(kop_http_server_new(&ho, routes, 1, &http), 0);
    ck_assert_int_eq(kop_http_server_start(http), 0);
    const struct kop_tls_options to = {
        .host = "127.0.0.1", .cert_dir = dir, .http = http, .metrics = m};
    ck_assert_int_eq(kop_tls_new(&to, &tls), 0);
    ck_assert_int_eq(kop_tls_start(tls), 0);
    unsigned port = kop_tls_port(tls);

    char url[256], resolve[256], out[64];
    /* By IP SAN. */
    snprintf(url, sizeof(url), "https://127.0.0.1:%u/hello", port);
    ck_assert_int_eq(fetch(url, "", p.ca_pem, out), CURLE_OK);
    ck_assert_str_eq(out, "hello");
    /* By the service name, as the apiserver connects. */
    snprintf(url, sizeof(url), "https://" SVC ":%u/hello", port);
    snprintf(resolve, sizeof(resolve), SVC ":%u:127.0.0.1", port);
    ck_assert_int_eq(fetch(url, resolve, p.ca_pem, out), CURLE_OK);
    ck_assert_str_eq(out, "hello");
    /* A name the certificate does not carry, and another CA: refused. */
    snprintf(url, sizeof(url), "https://wrong.example.com:%u/hello", port);
    snprintf(resolve, sizeof(resolve), "wrong.example.com:%u:127.0.0.1", port);
    ck_assert_int_eq(fetch(url, resolve, p.ca_pem, out), CURLE_PEER_FAILED_VERIFICATION);
    snprintf(url, sizeof(url), "https://127.0.0.1:%u/hello", port);
    ck_assert_int_eq(fetch(url, "", other.ca_pem, out), CURLE_PEER_FAILED_VERIFICATION);

    ck_assert_int_eq(kop_tls_shutdown(tls, 2000), 0);
    kop_tls_free(tls);
    kop_http_server_free(http);
    kop_metrics_free(m);
    kop_certgen_pair_cleanup(&p);
    kop_certgen_pair_cleanup(&other);
    kop_test_rmdir(dir);
    free(dir);
}
END_TEST

static Suite *certgen_suite(void)
{
    Suite *s = suite_create("certgen");
    TCase *tc = tcase_create("certgen");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_certgen_ca_verifies_leaf);
    tcase_add_test(tc, test_certgen_extensions);
    tcase_add_test(tc, test_certgen_validity_and_serials);
    tcase_add_test(tc, test_certgen_bad_options);
    tcase_add_test(tc, test_certgen_write_dir);
    tcase_add_test(tc, test_certgen_check_pair);
    tcase_add_test(tc, test_certgen_serves_tls);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = kop_test_run(certgen_suite());
    curl_global_cleanup();
    return rc;
}
