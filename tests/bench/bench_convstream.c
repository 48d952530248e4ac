/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CPU cost of kop's own ConversionReview path, without TLS and HTTP: a
 * body read from a file is fed through kop_convstream in pieces of the
 * size the HTTP layer hands over, finished, and the reply dropped, again
 * and again. Prints the CPU time per review (best and median of the
 * rounds) and the throughput. What the webhook adds on top (records, the
 * loopback and socketpair hops, MHD) is measured by scripts/bench-peers.sh.
 *
 * Usage: bench_convstream [-c CHUNK] [-r ROUNDS] [-n REVIEWS] BODY.json
 *   CHUNK    bytes per feed (default 16384, what one TLS record carries)
 *   ROUNDS   timed rounds (default 7)
 *   REVIEWS  reviews per round (default: enough for ~0.2 s)
 * Run it under perf record or valgrind --tool=callgrind for a profile.
 */
#include "kop/convstream.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kop/arena.h"
#include "kop/review.h"

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int read_file(const char *path, char **ret, size_t *ret_len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    size_t cap = 1 << 20, len = 0;
    char *p = malloc(cap);
    int r = 0;
    for (;;) {
        if (!p) {
            r = -ENOMEM;
            break;
        }
        len += fread(p + len, 1, cap - len, f);
        if (len < cap)
            break;
        cap *= 2;
        char *q = realloc(p, cap);
        if (!q)
            free(p);
        p = q;
    }
    if (ferror(f))
        r = -EIO;
    if (fclose(f) != 0 && r == 0)
        r = -EIO;
    if (r < 0) {
        free(p);
        return r;
    }
    *ret = p;
    *ret_len = len;
    return 0;
}

/* One review; 0, or -1 when it was not a 200 Success. */
static int one(const char *body, size_t len, size_t chunk)
{
    struct kop_convstream *cs = NULL;
    struct kop_review_result res;
    if (kop_convstream_new("application/json", NULL, &cs) < 0 ||
        kop_convstream_expect(cs, len) < 0) {
        kop_convstream_free(cs);
        return -1;
    }
    for (size_t off = 0; off < len; off += chunk) {
        size_t n = len - off < chunk ? len - off : chunk;
        if (kop_convstream_feed(cs, body + off, n) < 0) {
            kop_convstream_free(cs);
            return -1;
        }
    }
    int r = kop_convstream_finish(cs, &res);
    kop_convstream_free(cs);
    if (r < 0)
        return -1;
    r = res.http_status == 200 && res.success ? 0 : -1;
    if (r < 0)
        fprintf(stderr, "bench_convstream: %d %s\n", res.http_status, res.message);
    kop_review_result_cleanup(&res);
    return r;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    size_t chunk = 16384;
    long rounds = 7, reviews = 0;
    int opt;
    while ((opt = getopt(argc, argv, "c:r:n:")) != -1) {
        char *end = NULL;
        long v = strtol(optarg, &end, 10);
        if (!end || *end || v < 1) {
            fprintf(stderr, "bench_convstream: -%c wants a positive number\n", opt);
            return 2;
        }
        if (opt == 'c')
            chunk = (size_t)v;
        else if (opt == 'r')
            rounds = v;
        else if (opt == 'n')
            reviews = v;
        else
            return 2;
    }
    if (optind != argc - 1 || rounds > 1000) {
        fprintf(stderr, "usage: bench_convstream [-c CHUNK] [-r ROUNDS<=1000] [-n REVIEWS] "
                        "BODY.json\n");
        return 2;
    }
    /* the allocators as kop's main() sets them: buffers over 256 KiB are
     * mmap'd, jansson allocates from the bound arena */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    kop_arena_json_install();
    char *body = NULL;
    size_t len = 0;
    int r = read_file(argv[optind], &body, &len);
    if (r < 0) {
        fprintf(stderr, "bench_convstream: cannot read %s (%d)\n", argv[optind], r);
        return 1;
    }
    double t0 = cpu_now();
    if (one(body, len, chunk) < 0) {
        free(body);
        return 1;
    }
    if (reviews == 0) {
        double once = cpu_now() - t0;
        reviews = once > 0 ? (long)(0.2 / once) : 1000;
        if (reviews < 1)
            reviews = 1;
    }
    double t[1000];
    for (long k = 0; k < rounds; k++) {
        double a = cpu_now();
        for (long i = 0; i < reviews; i++) {
            if (one(body, len, chunk) < 0) {
                free(body);
                return 1;
            }
        }
        t[k] = (cpu_now() - a) / (double)reviews;
    }
    qsort(t, (size_t)rounds, sizeof(t[0]), cmp_double);
    printf("%s: %zu bytes, chunk %zu, %ld rounds of %ld: best %.1f us, median %.1f us per review, "
           "%.0f MB/s\n",
           argv[optind], len, chunk, rounds, reviews, t[0] * 1e6, t[rounds / 2] * 1e6,
           (double)len / t[0] / 1e6);
    free(body);
    return 0;
}
