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
 *  - nothing else: the server certificate is checked by the backend. (With
 *    mbedTLS 2.28, libcurl's mbedTLS backend never matched an iPAddress
 *    SAN, so https://$KUBERNETES_SERVICE_HOST failed; mbedTLS 3.6 matches
 *    them itself, and tests/test_curltls.c checks it does.)
 *
 * Its own small library (curl only), like kop_file: the API
 * client and the OTLP exporter use it, and kubesim links it alone.
 *
 * Thread-safety: any thread; no state besides the handle's.
 */
#ifndef KOP_CURLTLS_H
#define KOP_CURLTLS_H

#include <curl/curl.h>

/* Set the handle up (after curl_easy_reset too; after CURLOPT_URL). A
 * later CURLOPT_SSLVERSION replaces the floor: kop's code never sets one
 * (tests do, to play an old client). Returns 0, or -EINVAL when libcurl
 * refuses the options. */
int kop_curltls_setup(CURL *e);

#endif /* KOP_CURLTLS_H */
