// SPDX-License-Identifier: Apache-2.0
/*
 * The keyed hash (see kop/hash.h).
 */
#include "kop/hash.h"

#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>
#include <time.h>

/*
 * SipHash-1-3 (Aumasson and Bernstein; the variant Rust's HashMap and
 * CPython use for strings): a keyed hash whose collisions cannot be found
 * without the key. Plain C, byte loads, so no alignment or endianness
 * assumptions.
 */
#define ROTL64(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = ROTL64(v1, 13);                                                                       \
        v1 ^= v0;                                                                                  \
        v0 = ROTL64(v0, 32);                                                                       \
        v2 += v3;                                                                                  \
        v3 = ROTL64(v3, 16);                                                                       \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = ROTL64(v3, 21);                                                                       \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = ROTL64(v1, 17);                                                                       \
        v1 ^= v2;                                                                                  \
        v2 = ROTL64(v2, 32);                                                                       \
    } while (0)

static uint64_t siphash13(const uint64_t key[2], const unsigned char *p, size_t len)
{
    uint64_t v0 = key[0] ^ UINT64_C(0x736f6d6570736575);
    uint64_t v1 = key[1] ^ UINT64_C(0x646f72616e646f6d);
    uint64_t v2 = key[0] ^ UINT64_C(0x6c7967656e657261);
    uint64_t v3 = key[1] ^ UINT64_C(0x7465646279746573);
    size_t whole = len - len % 8;
    uint64_t m;
    for (size_t i = 0; i < whole; i += 8) {
        m = 0;
        for (size_t j = 0; j < 8; j++)
            m |= (uint64_t)p[i + j] << (8 * j);
        v3 ^= m;
        SIPROUND;
        v0 ^= m;
    }
    m = (uint64_t)len << 56;
    for (size_t j = 0; j < len % 8; j++)
        m |= (uint64_t)p[whole + j] << (8 * j);
    v3 ^= m;
    SIPROUND;
    v0 ^= m;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t kop_hash_keyed(const uint64_t key[2], const void *p, size_t n)
{
    return siphash13(key, p, n);
}

void kop_hash_key_new(uint64_t key[2])
{
    if (getrandom(key, 2 * sizeof(key[0]), GRND_NONBLOCK) == (ssize_t)(2 * sizeof(key[0])))
        return;
    struct timespec ts = {0};
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    key[0] = (uint64_t)ts.tv_nsec * UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)ts.tv_sec;
    key[1] = (uint64_t)(uintptr_t)&ts ^ ROTL64(key[0], 29);
}

static uint64_t process_key[2];
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void process_key_init(void)
{
    kop_hash_key_new(process_key);
}

uint64_t kop_hash(const void *p, size_t n)
{
    pthread_once(&key_once, process_key_init);
    return siphash13(process_key, p, n);
}

uint64_t kop_hash_str(const char *s)
{
    return kop_hash(s, strlen(s));
}
