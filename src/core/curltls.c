/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TLS floor of kop's libcurl handles and the iPAddress SAN check for
 * libcurl's mbedTLS backend (see kop/curltls.h).
 */
#include "kop/curltls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mbedtls/asn1.h>
#include <mbedtls/ssl.h>
#include <mbedtls/version.h>
#include <mbedtls/x509_crt.h>

static pthread_once_t active_once = PTHREAD_ONCE_INIT;
static bool active;

static void find_active(void)
{
    const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
    char want[64];
    snprintf(want, sizeof(want), "mbedTLS/%s", MBEDTLS_VERSION_STRING);
    active = v && v->ssl_version && strcmp(v->ssl_version, want) == 0;
}

/* libcurl's TLS library does not change while the process runs: asked
 * once, not on every handle's setup. */
bool kop_curltls_active(void)
{
    pthread_once(&active_once, find_active);
    return active;
}

/* The address in the handle's URL: 4 or 16 bytes, 0 for a name. */
static size_t url_address(CURL *e, unsigned char addr[16])
{
    char *url = NULL;
    if (curl_easy_getinfo(e, CURLINFO_EFFECTIVE_URL, &url) != CURLE_OK || !url)
        return 0;
    CURLU *u = curl_url();
    char *host = NULL;
    size_t n = 0;
    if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK) {
        size_t len = strlen(host);
        if (len > 2 && host[0] == '[' && host[len - 1] == ']') {
            /* [::1], or [fe80::1%25eth0] with a zone (no SAN names that) */
            host[len - 1] = '\0';
            if (inet_pton(AF_INET6, host + 1, addr) == 1)
                n = 16;
        } else if (inet_pton(AF_INET, host, addr) == 1) {
            n = 4;
        }
    }
    curl_free(host);
    curl_url_cleanup(u);
    return n;
}

static int verify(void *ud, mbedtls_x509_crt *crt, int depth, uint32_t *flags)
{
    if (depth != 0 || !(*flags & MBEDTLS_X509_BADCERT_CN_MISMATCH))
        return 0;
    unsigned char addr[16];
    size_t n = url_address(ud, addr);
    if (n == 0)
        return 0;
    for (const mbedtls_x509_sequence *san = &crt->subject_alt_names; san; san = san->next) {
        const mbedtls_x509_buf *b = &san->buf;
        if (b->p && b->tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_X509_SAN_IP_ADDRESS) &&
            b->len == n && memcmp(b->p, addr, n) == 0) {
            *flags &= ~(uint32_t)MBEDTLS_X509_BADCERT_CN_MISMATCH;
            break;
        }
    }
    return 0;
}

static CURLcode ssl_ctx(CURL *e, void *ssl_ctx, void *ud)
{
    (void)ud;
    mbedtls_ssl_conf_verify(ssl_ctx, verify, e);
    return CURLE_OK;
}

int kop_curltls_setup(CURL *e)
{
    if (!e)
        return -EINVAL;
    /* client-go's floor (its transport's tls.Config has MinVersion TLS
     * 1.2); no ceiling, so TLS 1.3 is used where the backend has it. */
    if (curl_easy_setopt(e, CURLOPT_SSLVERSION,
                         (long)(CURL_SSLVERSION_TLSv1_2 | CURL_SSLVERSION_MAX_DEFAULT)) != CURLE_OK)
        return -EINVAL;
    if (!kop_curltls_active())
        return 0;
    if (curl_easy_setopt(e, CURLOPT_SSL_CTX_FUNCTION, ssl_ctx) != CURLE_OK)
        return -EINVAL;
    return 0;
}
