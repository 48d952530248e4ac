/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The floor under every TLS byte kop serves: how fast the mbedTLS kop links
 * seals TLS records with the AEAD suites kop offers, on one core.
 * scripts/bench-peers.sh builds and runs it to report how much of a
 * request's CPU is record crypto alone (nothing kop's code can remove).
 *
 * Usage: bench_crypto [RECORD_BYTES [TOTAL_MB]]   (16384, 256)
 * Prints "chacha20-poly1305 MB/s" and "aes-128-gcm MB/s" lines.
 */
#include <mbedtls/chachapoly.h>
#include <mbedtls/gcm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* CPU seconds of this process: comparable to the servers' CPU/request and
 * unaffected by whatever else shares the core. */
static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static long arg_long(const char *s, long lo, long hi)
{
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (!end || *end || v < lo || v > hi) {
        fprintf(stderr, "bench_crypto: '%s' is not in [%ld, %ld]\n", s, lo, hi);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    long rec = argc > 1 ? arg_long(argv[1], 16, 16384) : 16384;
    long total_mb = argc > 2 ? arg_long(argv[2], 1, 4096) : 256;
    size_t n = (size_t)(total_mb * 1000 * 1000 / rec);
    unsigned char *in = calloc(1, (size_t)rec), *out = calloc(1, (size_t)rec);
    unsigned char key[32], nonce[12], aad[13], tag[16];
    if (!in || !out)
        return 1;
    memset(key, 0x5a, sizeof key);
    memset(nonce, 0x0c, sizeof nonce);
    memset(aad, 0x17, sizeof aad);

    mbedtls_chachapoly_context cp;
    mbedtls_chachapoly_init(&cp);
    if (mbedtls_chachapoly_setkey(&cp, key) != 0)
        return 1;
    double t0 = cpu_s();
    for (size_t i = 0; i < n; i++) {
        nonce[11] = (unsigned char)i;
        if (mbedtls_chachapoly_encrypt_and_tag(&cp, (size_t)rec, nonce, aad, sizeof aad, in, out,
                                               tag) != 0)
            return 1;
    }
    double dt = cpu_s() - t0;
    printf("chacha20-poly1305 %.0f\n", (double)n * (double)rec / dt / 1e6);
    mbedtls_chachapoly_free(&cp);

    mbedtls_gcm_context g;
    mbedtls_gcm_init(&g);
    if (mbedtls_gcm_setkey(&g, MBEDTLS_CIPHER_ID_AES, key, 128) != 0)
        return 1;
    t0 = cpu_s();
    for (size_t i = 0; i < n; i++) {
        nonce[11] = (unsigned char)i;
        if (mbedtls_gcm_crypt_and_tag(&g, MBEDTLS_GCM_ENCRYPT, (size_t)rec, nonce, sizeof nonce,
                                      aad, sizeof aad, in, out, sizeof tag, tag) != 0)
            return 1;
    }
    dt = cpu_s() - t0;
    printf("aes-128-gcm %.0f\n", (double)n * (double)rec / dt / 1e6);
    mbedtls_gcm_free(&g);
    free(in);
    free(out);
    return 0;
}
