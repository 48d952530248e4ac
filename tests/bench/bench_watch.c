/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Benchmark of a watch line's decode: what the informer's watch loop
 * spends per event. One MODIFIED event of the first Deployment of the
 * apiserver vector apiserver/deployment_list_kube_system_v1.36.json
 * (managedFields included, as the apiserver sends it), fed 1,000 times per
 * pass to:
 *   json_loadb  jansson's parser, what the watch parser used before;
 *   parser      kop_watch_parser as the informer sets it up (jscan
 *               validates the line, then it is decoded leaving
 *               metadata.managedFields out);
 *   parser-all  the same parser decoding every member.
 * Prints CPU time per event for each, per pass, and the medians.
 *
 * Usage: bench_watch [-n PASSES] [path/to/deployment_list.json]
 * Build and run with scripts/bench-watch.sh.
 */
#include "kop/watch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EVENTS 1000

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int count(void *ud, const struct kop_watch_event *ev)
{
    (void)ev;
    (*(long *)ud)++;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* us per event of feeding the stream to a parser (drop: NULL for all). */
static double parser_pass(const char *stream, size_t len, const char *const *drop)
{
    struct kop_watch_parser *p = kop_watch_parser_new(0);
    long n = 0;
    if (!p || (drop && kop_watch_parser_drop(p, drop) < 0))
        exit(1);
    double t0 = cpu_s();
    if (kop_watch_parser_feed(p, stream, len, count, &n) < 0 || n != EVENTS) {
        fprintf(stderr, "bench_watch: the parser refused the stream\n");
        exit(1);
    }
    double us = (cpu_s() - t0) / EVENTS * 1e6;
    kop_watch_parser_free(p);
    return us;
}

int main(int argc, char **argv)
{
    int passes = 10;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            passes = (int)strtol(argv[++i], NULL, 10);
        else
            path = argv[i];
    }
    char def[4096];
    if (!path) {
        const char *root = getenv("KOP_SOURCE_ROOT");
        snprintf(def, sizeof(def),
                 "%s/tests/data/vectors/apiserver/deployment_list_kube_system_v1.36.json",
                 root ? root : ".");
        path = def;
    }
    if (passes < 1 || passes > 1000) {
        fprintf(stderr, "usage: bench_watch [-n PASSES] [deployment_list.json]\n");
        return 2;
    }
    json_error_t err;
    json_t *list = json_load_file(path, 0, &err);
    json_t *item = json_array_get(json_object_get(list, "items"), 0);
    if (!item) {
        fprintf(stderr, "bench_watch: %s: no item (%s)\n", path, err.text);
        return 1;
    }
    json_t *ev = json_pack("{s:s, s:O}", "type", "MODIFIED", "object", item);
    char *line = json_dumps(ev, JSON_COMPACT);
    size_t n = strlen(line), len = (n + 1) * EVENTS;
    char *stream = malloc(len);
    if (!line || !stream)
        return 1;
    for (size_t i = 0; i < EVENTS; i++) {
        memcpy(stream + i * (n + 1), line, n);
        stream[i * (n + 1) + n] = '\n';
    }
    static const char *const drop[] = {"metadata", "managedFields", NULL};
    double *t[3];
    for (int k = 0; k < 3; k++)
        t[k] = calloc((size_t)passes, sizeof(double));
    printf("watch line: %zu bytes (MODIFIED, %s, managedFields included); %d passes of %d "
           "events\n",
           n, json_string_value(json_object_get(json_object_get(item, "metadata"), "name")), passes,
           EVENTS);
    for (int p = 0; p < passes; p++) {
        double t0 = cpu_s();
        for (int i = 0; i < EVENTS; i++) {
            json_t *r = json_loadb(line, n, 0, &err);
            if (!r)
                return 1;
            json_decref(r);
        }
        t[0][p] = (cpu_s() - t0) / EVENTS * 1e6;
        t[1][p] = parser_pass(stream, len, drop);
        t[2][p] = parser_pass(stream, len, NULL);
        printf("  pass %d: json_loadb %.2f us, parser %.2f us, parser-all %.2f us per event\n",
               p + 1, t[0][p], t[1][p], t[2][p]);
    }
    for (int k = 0; k < 3; k++)
        qsort(t[k], (size_t)passes, sizeof(double), cmp_double);
    double m[3] = {t[0][passes / 2], t[1][passes / 2], t[2][passes / 2]};
    printf("medians: json_loadb %.2f us, parser %.2f us (%.2fx), parser-all %.2f us (%.2fx) per "
           "event\n",
           m[0], m[1], m[1] / m[0], m[2], m[2] / m[0]);
    for (int k = 0; k < 3; k++)
        free(t[k]);
    free(stream);
    free(line);
    json_decref(ev);
    json_decref(list);
    return 0;
}
