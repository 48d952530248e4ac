/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Certificate generator: an ECDSA P-256 CA and a serving certificate it
 * signs, written with mbedTLS 2.28's x509write API, plus the files of the
 * cert-manager Secret layout and a "can this pair still be used" check.
 *
 * mbedTLS 2.28 has no writer helpers for subjectAltName or
 * extendedKeyUsage, so both extensions are DER-encoded here with the
 * asn1write primitives (which write backwards from the end of a buffer).
 */
#include "kop/certgen.h"

#include <assert.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mbedtls/asn1write.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/ecp.h>
#include <mbedtls/entropy.h>
#include <mbedtls/oid.h>
#include <mbedtls/pk.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/psa_util.h>
#include <mbedtls/x509_crt.h>
#include <psa/crypto.h>

#include "kop/file.h"

#define CA_VALIDITY_DEFAULT_S (10LL * 365 * 24 * 3600)
#define LEAF_VALIDITY_DEFAULT_S (365LL * 24 * 3600)
#define BACKDATE_DEFAULT_S 3600LL
#define MAX_NAME_LEN 253 /* a DNS name */
#define MAX_CN_LEN 64    /* ub-common-name */
/* Largest file read: one byte short of 1 MiB, the bound kop has always applied. */
#define MAX_FILE_BYTES ((1 << 20) - 1)
#define KEY_PEM_MAX 1024

/* ---- names ------------------------------------------------------------------ */

static size_t count(const char *const *v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}

/* Append "TYPE=value" to an mbedTLS subject string, escaping ','. mbedTLS
 * accepts no other escape, so a backslash in a value is refused. */
static int dn_append(char *buf, size_t cap, const char *type, const char *value, size_t max_len)
{
    size_t len = strlen(buf);
    size_t vlen = strlen(value);
    if (vlen == 0 || vlen > max_len || strchr(value, '\\'))
        return -EINVAL;
    int n = snprintf(buf + len, cap - len, "%s%s=", len ? "," : "", type);
    if (n < 0 || (size_t)n >= cap - len)
        return -EINVAL;
    len += (size_t)n;
    for (const char *c = value; *c; c++) {
        if (len + 3 >= cap)
            return -EINVAL;
        if (*c == ',')
            buf[len++] = '\\';
        buf[len++] = *c;
    }
    buf[len] = '\0';
    return 0;
}

static int subject(char *buf, size_t cap, const char *cn, size_t cn_max, const char *org)
{
    buf[0] = '\0';
    int r = dn_append(buf, cap, "CN", cn, cn_max);
    if (r == 0 && org)
        r = dn_append(buf, cap, "O", org, MAX_CN_LEN);
    return r;
}

/* DER of SubjectAltName ::= SEQUENCE OF GeneralName, dNSName [2] IA5String
 * and iPAddress [7] OCTET STRING (4 or 16 bytes). */
static int san_der(const char *const *dns, const char *const *ips, unsigned char **ret_der,
                   size_t *ret_len)
{
    size_t nd = count(dns), ni = count(ips);
    size_t cap = 8;
    unsigned char *buf = NULL;
    int rc = -EINVAL;

    for (size_t i = 0; i < nd; i++) {
        size_t l = strlen(dns[i]);
        if (l == 0 || l > MAX_NAME_LEN)
            return -EINVAL;
        cap += l + 4;
    }
    cap += ni * 20;
    buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    unsigned char *p = buf + cap;
    size_t total = 0;
    /* Written backwards: last name first, so the extension lists them in
     * the order given. IPs come after DNS names. */
    for (size_t i = ni; i-- > 0;) {
        unsigned char addr[16];
        size_t alen;
        if (inet_pton(AF_INET, ips[i], addr) == 1)
            alen = 4;
        else if (inet_pton(AF_INET6, ips[i], addr) == 1)
            alen = 16;
        else
            goto out;
        int n = mbedtls_asn1_write_raw_buffer(&p, buf, addr, alen);
        int h = n < 0 ? n : mbedtls_asn1_write_len(&p, buf, alen);
        int t = h < 0 ? h : mbedtls_asn1_write_tag(&p, buf, MBEDTLS_ASN1_CONTEXT_SPECIFIC | 7);
        if (t < 0)
            goto out;
        total += (size_t)n + (size_t)h + (size_t)t;
    }
    for (size_t i = nd; i-- > 0;) {
        size_t l = strlen(dns[i]);
        int n = mbedtls_asn1_write_raw_buffer(&p, buf, (const unsigned char *)dns[i], l);
        int h = n < 0 ? n : mbedtls_asn1_write_len(&p, buf, l);
        int t = h < 0 ? h : mbedtls_asn1_write_tag(&p, buf, MBEDTLS_ASN1_CONTEXT_SPECIFIC | 2);
        if (t < 0)
            goto out;
        total += (size_t)n + (size_t)h + (size_t)t;
    }
    int h = mbedtls_asn1_write_len(&p, buf, total);
    int t = h < 0
                ? h
                : mbedtls_asn1_write_tag(&p, buf, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE);
    if (t < 0)
        goto out;
    total += (size_t)h + (size_t)t;
    memmove(buf, p, total);
    *ret_der = buf;
    *ret_len = total;
    buf = NULL;
    rc = 0;
out:
    free(buf);
    return rc;
}

/* DER of ExtKeyUsageSyntax ::= SEQUENCE { id-kp-serverAuth }. */
static int eku_der(unsigned char *buf, size_t cap, size_t *ret_len)
{
    unsigned char *p = buf + cap;
    int n = mbedtls_asn1_write_oid(&p, buf, MBEDTLS_OID_SERVER_AUTH,
                                   MBEDTLS_OID_SIZE(MBEDTLS_OID_SERVER_AUTH));
    int h = n < 0 ? n : mbedtls_asn1_write_len(&p, buf, (size_t)n);
    int t = h < 0
                ? h
                : mbedtls_asn1_write_tag(&p, buf, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE);
    if (t < 0)
        return -EIO;
    size_t total = (size_t)n + (size_t)h + (size_t)t;
    memmove(buf, p, total);
    *ret_len = total;
    return 0;
}

/* ---- certificates ----------------------------------------------------------- */

static int format_time(int64_t t, char *buf, size_t len)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (!gmtime_r(&tt, &tm))
        return -EINVAL;
    if (strftime(buf, len, "%Y%m%d%H%M%S", &tm) != 14)
        return -EINVAL;
    return 0;
}

static int gen_key(mbedtls_ctr_drbg_context *drbg, mbedtls_pk_context *key)
{
    if (mbedtls_pk_setup(key, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY)) != 0)
        return -ENOMEM;
    if (mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(*key), mbedtls_ctr_drbg_random,
                            drbg) != 0)
        return -EIO;
    return 0;
}

struct cert_spec {
    mbedtls_pk_context *subject_key;
    mbedtls_pk_context *issuer_key;
    const char *subject;
    const char *issuer;
    bool ca;
    int64_t not_before, not_after;
    const unsigned char *san; /* leaf only */
    size_t san_len;
};

static int make_cert(mbedtls_ctr_drbg_context *drbg, const struct cert_spec *s, char **ret_pem)
{
    mbedtls_x509write_cert crt;
    unsigned char sn[16];
    unsigned char eku[32];
    size_t eku_len = 0;
    char from[32], to[32];
    size_t cap = 4096 + 2 * s->san_len;
    char *pem = NULL;
    int rc = -EIO;

    mbedtls_x509write_crt_init(&crt);
    if (format_time(s->not_before, from, sizeof(from)) != 0 ||
        format_time(s->not_after, to, sizeof(to)) != 0) {
        rc = -EINVAL;
        goto out;
    }
    pem = malloc(cap);
    if (!pem) {
        rc = -ENOMEM;
        goto out;
    }
    /* A random positive serial: 16 bytes, top bit clear, never zero. */
    if (mbedtls_ctr_drbg_random(drbg, sn, sizeof(sn)) != 0)
        goto out;
    sn[0] = (unsigned char)((sn[0] & 0x7f) | 0x40);

    mbedtls_x509write_crt_set_version(&crt, MBEDTLS_X509_CRT_VERSION_3);
    mbedtls_x509write_crt_set_md_alg(&crt, MBEDTLS_MD_SHA256);
    mbedtls_x509write_crt_set_subject_key(&crt, s->subject_key);
    mbedtls_x509write_crt_set_issuer_key(&crt, s->issuer_key);
    if (mbedtls_x509write_crt_set_subject_name(&crt, s->subject) != 0 ||
        mbedtls_x509write_crt_set_issuer_name(&crt, s->issuer) != 0) {
        rc = -EINVAL;
        goto out;
    }
    if (mbedtls_x509write_crt_set_serial_raw(&crt, sn, sizeof(sn)) != 0 ||
        mbedtls_x509write_crt_set_validity(&crt, from, to) != 0)
        goto out;
    /* A CA that may sign leaves only (pathLen 0); a leaf that is no CA. */
    if (mbedtls_x509write_crt_set_basic_constraints(&crt, s->ca ? 1 : 0, s->ca ? 0 : -1) != 0 ||
        mbedtls_x509write_crt_set_subject_key_identifier(&crt) != 0 ||
        mbedtls_x509write_crt_set_authority_key_identifier(&crt) != 0)
        goto out;
    if (s->ca) {
        if (mbedtls_x509write_crt_set_key_usage(&crt, MBEDTLS_X509_KU_KEY_CERT_SIGN |
                                                          MBEDTLS_X509_KU_CRL_SIGN) != 0)
            goto out;
    } else {
        /* ECDSA keys sign; keyEncipherment is for RSA key transport. */
        if (mbedtls_x509write_crt_set_key_usage(&crt, MBEDTLS_X509_KU_DIGITAL_SIGNATURE) != 0)
            goto out;
        if (eku_der(eku, sizeof(eku), &eku_len) != 0 ||
            mbedtls_x509write_crt_set_extension(&crt, MBEDTLS_OID_EXTENDED_KEY_USAGE,
                                                MBEDTLS_OID_SIZE(MBEDTLS_OID_EXTENDED_KEY_USAGE), 0,
                                                eku, eku_len) != 0)
            goto out;
        if (mbedtls_x509write_crt_set_extension(&crt, MBEDTLS_OID_SUBJECT_ALT_NAME,
                                                MBEDTLS_OID_SIZE(MBEDTLS_OID_SUBJECT_ALT_NAME), 0,
                                                s->san, s->san_len) != 0)
            goto out;
    }
    if (mbedtls_x509write_crt_pem(&crt, (unsigned char *)pem, cap, mbedtls_ctr_drbg_random, drbg) !=
        0)
        goto out;
    *ret_pem = pem;
    pem = NULL;
    rc = 0;
out:
    free(pem);
    mbedtls_x509write_crt_free(&crt);
    return rc;
}

static int64_t now_or(int64_t now_s)
{
    return now_s > 0 ? now_s : (int64_t)time(NULL);
}

/* The CA's and the leaf's subject names (size bytes each). The leaf CN is
 * informational (clients match SANs); from a long DNS name keep the first
 * 64 bytes. Returns 0 or -EINVAL. */
static int subjects(const struct kop_certgen_options *opts, char *ca_subject, char *leaf_subject,
                    size_t size)
{
    char cn[MAX_CN_LEN + 1];
    const char *cn_src = opts->common_name;
    size_t cn_max = MAX_CN_LEN;
    if (!cn_src) {
        cn_src = count(opts->dns_names) ? opts->dns_names[0] : "localhost";
        cn_max = MAX_NAME_LEN;
    }
    snprintf(cn, sizeof(cn), "%s", cn_src);
    if (strlen(cn_src) > cn_max)
        return -EINVAL;
    int rc =
        subject(ca_subject, size, opts->ca_common_name ? opts->ca_common_name : "selfsigned-ca",
                MAX_CN_LEN, opts->organization);
    if (rc == 0)
        rc = subject(leaf_subject, size, cn, MAX_CN_LEN, opts->organization);
    return rc;
}

/* The private key as PEM into *ret (malloc'd; wiped before it is freed).
 * Returns 0, -ENOMEM or -EIO. */
static int key_pem(mbedtls_pk_context *key, char **ret)
{
    unsigned char *buf = calloc(1, KEY_PEM_MAX);
    if (!buf)
        return -ENOMEM;
    if (mbedtls_pk_write_key_pem(key, buf, KEY_PEM_MAX) != 0) {
        mbedtls_platform_zeroize(buf, KEY_PEM_MAX);
        free(buf);
        return -EIO;
    }
    *ret = (char *)buf;
    return 0;
}

int kop_certgen_generate(const struct kop_certgen_options *opts, struct kop_certgen_pair *ret)
{
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    mbedtls_pk_context ca_key, key;
    unsigned char *san = NULL;
    size_t san_len = 0;
    char ca_subject[256], leaf_subject[256];
    struct kop_certgen_pair out = {0};
    int rc;

    assert(opts);
    assert(ret);
    mbedtls_entropy_init(&entropy);
    mbedtls_ctr_drbg_init(&drbg);
    mbedtls_pk_init(&ca_key);
    mbedtls_pk_init(&key);
    if ((count(opts->dns_names) == 0 && count(opts->ip_addresses) == 0) ||
        opts->ca_validity_s < 0 || opts->validity_s < 0) {
        rc = -EINVAL;
        goto out;
    }
    int64_t now = now_or(opts->now_s);
    int64_t backdate = opts->backdate_s == 0  ? BACKDATE_DEFAULT_S
                       : opts->backdate_s < 0 ? 0
                                              : opts->backdate_s;
    int64_t ca_valid = opts->ca_validity_s ? opts->ca_validity_s : CA_VALIDITY_DEFAULT_S;
    int64_t leaf_valid = opts->validity_s ? opts->validity_s : LEAF_VALIDITY_DEFAULT_S;
    if (leaf_valid > ca_valid)
        leaf_valid = ca_valid;

    rc = subjects(opts, ca_subject, leaf_subject, sizeof(leaf_subject));
    if (rc == 0)
        rc = san_der(opts->dns_names, opts->ip_addresses, &san, &san_len);
    if (rc < 0)
        goto out;

    rc = -EIO;
    if (mbedtls_ctr_drbg_seed(&drbg, mbedtls_entropy_func, &entropy,
                              (const unsigned char *)"certgen", 7) != 0)
        goto out;
    rc = gen_key(&drbg, &ca_key);
    if (rc == 0)
        rc = gen_key(&drbg, &key);
    if (rc < 0)
        goto out;

    const struct cert_spec ca = {.subject_key = &ca_key,
                                 .issuer_key = &ca_key,
                                 .subject = ca_subject,
                                 .issuer = ca_subject,
                                 .ca = true,
                                 .not_before = now - backdate,
                                 .not_after = now + ca_valid};
    const struct cert_spec leaf = {.subject_key = &key,
                                   .issuer_key = &ca_key,
                                   .subject = leaf_subject,
                                   .issuer = ca_subject,
                                   .ca = false,
                                   .not_before = now - backdate,
                                   .not_after = now + leaf_valid,
                                   .san = san,
                                   .san_len = san_len};
    rc = make_cert(&drbg, &ca, &out.ca_pem);
    if (rc == 0)
        rc = make_cert(&drbg, &leaf, &out.cert_pem);
    if (rc < 0)
        goto out;
    rc = key_pem(&key, &out.key_pem);
    if (rc < 0)
        goto out;
    *ret = out;
    memset(&out, 0, sizeof(out));
    rc = 0;
out:
    kop_certgen_pair_cleanup(&out);
    free(san);
    mbedtls_pk_free(&ca_key);
    mbedtls_pk_free(&key);
    mbedtls_ctr_drbg_free(&drbg);
    mbedtls_entropy_free(&entropy);
    return rc;
}

void kop_certgen_pair_cleanup(struct kop_certgen_pair *pair)
{
    if (!pair)
        return;
    if (pair->key_pem) {
        mbedtls_platform_zeroize(pair->key_pem, strlen(pair->key_pem));
        free(pair->key_pem);
    }
    free(pair->ca_pem);
    free(pair->cert_pem);
    memset(pair, 0, sizeof(*pair));
}

/* ---- files ------------------------------------------------------------------ */

static int mkdir_p(const char *dir)
{
    char path[PATH_MAX];
    size_t len = strlen(dir);
    if (len == 0 || len >= sizeof(path))
        return -EINVAL;
    memcpy(path, dir, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (path[i] != '/' && path[i] != '\0')
            continue;
        char saved = path[i];
        path[i] = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return -errno;
        path[i] = saved;
    }
    struct stat st;
    if (stat(dir, &st) != 0)
        return -errno;
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

static int write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* dir/name through dir/.name.XXXXXX: written, chmod'ed, fsync'd, renamed. */
static int write_atomic(const char *dir, const char *name, const char *data, mode_t mode)
{
    char tmp[PATH_MAX], dst[PATH_MAX];
    int fd = -1;
    int rc;
    int n1 = snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, name);
    int n2 = snprintf(dst, sizeof(dst), "%s/%s", dir, name);
    if (n1 < 0 || (size_t)n1 >= sizeof(tmp) || n2 < 0 || (size_t)n2 >= sizeof(dst))
        return -ENAMETOOLONG;
    fd = mkstemp(tmp); /* created 0600: the key is never readable by others */
    if (fd < 0)
        return -errno;
    rc = fchmod(fd, mode) == 0 ? 0 : -errno;
    if (rc == 0)
        rc = write_all(fd, data, strlen(data));
    if (rc == 0 && fsync(fd) != 0)
        rc = -errno;
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, dst) != 0)
        rc = -errno;
    if (rc < 0)
        unlink(tmp);
    return rc;
}

int kop_certgen_write_dir(const char *dir, const struct kop_certgen_pair *pair)
{
    assert(dir);
    assert(pair);
    if (!pair->cert_pem || !pair->key_pem)
        return -EINVAL;
    int rc = mkdir_p(dir);
    if (rc == 0 && pair->ca_pem)
        rc = write_atomic(dir, "ca.crt", pair->ca_pem, 0644);
    if (rc == 0)
        rc = write_atomic(dir, "tls.key", pair->key_pem, 0600);
    if (rc == 0)
        rc = write_atomic(dir, "tls.crt", pair->cert_pem, 0644);
    if (rc == 0) {
        /* Make the renames durable too. */
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
    }
    return rc;
}

static int read_small(const char *dir, const char *name, char **ret)
{
    char path[PATH_MAX];
    int n = snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof(path))
        return -ENAMETOOLONG;
    return kop_file_read(path, MAX_FILE_BYTES, KOP_FILE_SECRET, ret, NULL);
}

int kop_certgen_read_dir(const char *dir, struct kop_certgen_pair *ret)
{
    struct kop_certgen_pair p = {0};
    assert(dir);
    assert(ret);
    int rc = read_small(dir, "tls.crt", &p.cert_pem);
    if (rc == 0)
        rc = read_small(dir, "tls.key", &p.key_pem);
    if (rc == 0)
        rc = read_small(dir, "ca.crt", &p.ca_pem);
    if (rc < 0) {
        kop_certgen_pair_cleanup(&p);
        return rc;
    }
    *ret = p;
    return 0;
}

/* ---- check ------------------------------------------------------------------ */

static int64_t x509_time_unix(const mbedtls_x509_time *t)
{
    struct tm tm = {.tm_year = t->year - 1900,
                    .tm_mon = t->mon - 1,
                    .tm_mday = t->day,
                    .tm_hour = t->hour,
                    .tm_min = t->min,
                    .tm_sec = t->sec};
    return (int64_t)timegm(&tm);
}

static bool valid_for(const mbedtls_x509_crt *c, int64_t now, int64_t min_remaining)
{
    return x509_time_unix(&c->valid_from) <= now &&
           x509_time_unix(&c->valid_to) >= now + min_remaining;
}

static int parse_pem(mbedtls_x509_crt *chain, const char *pem)
{
    /* PEM input is parsed with its terminating NUL counted. */
    return mbedtls_x509_crt_parse(chain, (const unsigned char *)pem, strlen(pem) + 1) == 0
               ? 0
               : -EBADMSG;
}

int kop_certgen_check_pair(const struct kop_certgen_pair *pair,
                           const struct kop_certgen_check *check)
{
    mbedtls_x509_crt leaf, ca;
    mbedtls_pk_context key;
    uint32_t flags = 0;
    int rc;

    assert(pair);
    assert(check);
    if (!pair->ca_pem || !*pair->ca_pem || !pair->cert_pem || !*pair->cert_pem || !pair->key_pem ||
        !*pair->key_pem)
        return -ENOENT;
    mbedtls_x509_crt_init(&leaf);
    mbedtls_x509_crt_init(&ca);
    mbedtls_pk_init(&key);
    rc = parse_pem(&leaf, pair->cert_pem);
    if (rc == 0)
        rc = parse_pem(&ca, pair->ca_pem);
    if (rc < 0)
        goto out;
    rc = -EBADMSG;
    /* The RNG blinds RSA private-key operations; PSA's own needs no state
     * of ours (psa_crypto_init is idempotent). */
    if (psa_crypto_init() != PSA_SUCCESS) {
        rc = -EIO;
        goto out;
    }
    if (mbedtls_pk_parse_key(&key, (const unsigned char *)pair->key_pem, strlen(pair->key_pem) + 1,
                             NULL, 0, mbedtls_psa_get_random, MBEDTLS_PSA_RANDOM_STATE) != 0)
        goto out;
    if (mbedtls_pk_check_pair(&leaf.pk, &key, mbedtls_psa_get_random, MBEDTLS_PSA_RANDOM_STATE) !=
        0)
        goto out;
    /* Time is judged below against check->now_s, not the wall clock. */
    const uint32_t time_flags = MBEDTLS_X509_BADCERT_EXPIRED | MBEDTLS_X509_BADCERT_FUTURE;
    if (mbedtls_x509_crt_verify(&leaf, &ca, NULL, NULL, &flags, NULL, NULL) != 0 &&
        (flags & ~time_flags) != 0)
        goto out;
    for (size_t i = 0; check->dns_names && check->dns_names[i]; i++) {
        flags = 0;
        if (mbedtls_x509_crt_verify(&leaf, &ca, NULL, check->dns_names[i], &flags, NULL, NULL) !=
                0 &&
            (flags & MBEDTLS_X509_BADCERT_CN_MISMATCH)) {
            rc = -EADDRNOTAVAIL;
            goto out;
        }
    }
    int64_t now = now_or(check->now_s);
    int64_t min = check->min_remaining_s > 0 ? check->min_remaining_s : 0;
    rc = -EKEYEXPIRED;
    if (!valid_for(&leaf, now, min))
        goto out;
    /* The CA that issued the leaf must last as long. */
    for (const mbedtls_x509_crt *c = &ca; c && c->raw.p; c = c->next) {
        if (c->subject_raw.len == leaf.issuer_raw.len &&
            memcmp(c->subject_raw.p, leaf.issuer_raw.p, c->subject_raw.len) == 0 &&
            !valid_for(c, now, min))
            goto out;
    }
    rc = 0;
out:
    mbedtls_pk_free(&key);
    mbedtls_x509_crt_free(&ca);
    mbedtls_x509_crt_free(&leaf);
    return rc;
}
