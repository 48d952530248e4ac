/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every libcurl handle kop makes that may speak HTTPS sets, in one
 * place (the API client, the OTLP exporter, kubesim's webhook calls, the
 * tests' helpers):
 *
 *  - TLS 1.2 at least, no maximum (CURLOPT_SSLVERSION
 *    CURL_SSLVERSION_TLSv1_2 | CURL_SSLVERSION_MAX_DEFAULT), as client-go
 *    asks of the API server; a server that offers only TLS 1.1 or older is
 *    refused in the handshake (CURLE_SSL_CONNECT_ERROR), whatever the TLS
 *    backend and its own configuration would allow;
 *  - libcurl's server certificate check where its mbedTLS backend falls
 *    short of the OpenSSL and GnuTLS ones: a server reached by IP address.
 *
 * mbedTLS 2.28 matches the host name libcurl gives it
 * (mbedtls_ssl_set_hostname, an IP literal too) against every
 * subjectAltName's raw bytes as if each were a dNSName, so a certificate
 * that names the address as an iPAddress SAN never matches and the request
 * fails with "BADCERT_CN_MISMATCH" (mbedTLS issue 5082; mbedTLS 3.x checks
 * iPAddress SANs itself). That is the common case in a Pod: the API server
 * is https://$KUBERNETES_SERVICE_HOST, the Service IP, named in its
 * certificate as an iPAddress SAN; and loopback servers in tests.
 *
 * kop_curltls_setup() installs, on an easy handle, a verify callback on
 * libcurl's mbedTLS configuration (CURLOPT_SSL_CTX_FUNCTION) that clears
 * that one flag on the leaf certificate when one of its iPAddress SANs
 * (4 or 16 bytes) equals the address in the handle's URL; the chain, the
 * validity dates and every other check stay mbedTLS's. With a name in the
 * URL, or another TLS backend, the check changes nothing. It is installed
 * only when libcurl reports the mbedTLS version this file was compiled
 * against (the configuration structure is that version's), otherwise it is
 * left out. With an HTTPS proxy libcurl 7.88 calls the same callback for the
 * proxy's certificate: the address compared is still the URL's.
 *
 * Its own small library (curl and mbedTLS only), like kop_file: the API
 * client and the OTLP exporter use it, and kubesim links it alone.
 *
 * Thread-safety: any thread; no state besides the handle's.
 */
#ifndef KOP_CURLTLS_H
#define KOP_CURLTLS_H

#include <stdbool.h>

#include <curl/curl.h>

/* Set the handle up (after curl_easy_reset too; after CURLOPT_URL). A
 * later CURLOPT_SSLVERSION replaces the floor: kop's code never sets one
 * (tests do, to play an old client). Returns 0, or -EINVAL when libcurl
 * refuses the options. */
int kop_curltls_setup(CURL *e);

/* Whether kop_curltls_setup installs the check here (libcurl's TLS is
 * the compiled-against mbedTLS). */
bool kop_curltls_active(void);

#endif /* KOP_CURLTLS_H */
