/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Prometheus metrics registry and text exposition (format 0.0.4).
 *
 * Values are doubles kept as their bit pattern in an atomic 64-bit word;
 * add is a compare-and-swap loop, so updates never take a lock. A
 * histogram keeps one atomic count per bucket (non-cumulative, plus one
 * for +Inf) and an atomic sum; the rendered _count is the total of the
 * bucket counts, so _count and the le="+Inf" bucket always agree.
 *
 * The registry lock protects the family array (kept sorted by name) and
 * each family's child list. Children are never freed before the registry,
 * so callers cache the pointers and update them without the lock.
 *
 * Numbers are written the way Go's strconv.FormatFloat(v, 'g', -1, 64)
 * writes them (what the Go client library exposes): shortest digits that
 * round-trip, exponent form when the decimal exponent is < -4 or >= 6
 * ("1e+06", "1.5e-05"), and +Inf, -Inf, NaN spelled out.
 */
#include "kop/metrics.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "kop/dynbuf.h"
#include "kop/file.h"

#define MAX_LABELS 16

struct kop_metric {
    struct kop_metric_family *family;
    struct kop_metric *next;
    uint64_t hash;
    char **label_values;
    _Atomic uint64_t value;    /* counter/gauge: double bits */
    _Atomic uint64_t sum;      /* histogram: double bits */
    _Atomic uint64_t *buckets; /* histogram: n_buckets + 1 (last is +Inf) */
};

struct kop_metric_family {
    struct kop_metrics *registry;
    enum kop_metric_type type;
    char *name;
    char *help;
    char **label_names;
    size_t n_labels;
    double *bounds;
    size_t n_bounds;
    struct kop_metric *children; /* creation order */
    struct kop_metric *last;
};

struct kop_metrics {
    pthread_mutex_t lock;
    bool process_metrics;
    struct kop_metric_family **families; /* sorted by name */
    size_t n_families;
    size_t cap_families;
};

static const double default_buckets[] = {.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10};

/* ---- atomic doubles ------------------------------------------------------ */

static uint64_t d2u(double d)
{
    uint64_t u;

    memcpy(&u, &d, sizeof(u));
    return u;
}

static double u2d(uint64_t u)
{
    double d;

    memcpy(&d, &u, sizeof(d));
    return d;
}

static void atomic_add_double(_Atomic uint64_t *p, double v)
{
    uint64_t old = atomic_load_explicit(p, memory_order_relaxed);

    while (!atomic_compare_exchange_weak_explicit(p, &old, d2u(u2d(old) + v), memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
}

/* ---- validation ------------------------------------------------------------ */

static bool valid_metric_name(const char *s)
{
    if (s == NULL || *s == '\0')
        return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
                  (p != s && c >= '0' && c <= '9');
        if (!ok)
            return false;
    }
    return true;
}

static bool valid_label_name(const char *s)
{
    if (s == NULL || *s == '\0' || strncmp(s, "__", 2) == 0)
        return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                  (p != s && c >= '0' && c <= '9');
        if (!ok)
            return false;
    }
    return true;
}

/* ---- registry ------------------------------------------------------------ */

static void child_free(struct kop_metric *c, size_t n_labels)
{
    if (c == NULL)
        return;
    if (c->label_values != NULL) {
        for (size_t i = 0; i < n_labels; i++)
            free(c->label_values[i]);
        free(c->label_values);
    }
    free(c->buckets);
    free(c);
}

static void family_free(struct kop_metric_family *f)
{
    struct kop_metric *c, *next;

    if (f == NULL)
        return;
    for (c = f->children; c != NULL; c = next) {
        next = c->next;
        child_free(c, f->n_labels);
    }
    if (f->label_names != NULL) {
        for (size_t i = 0; i < f->n_labels; i++)
            free(f->label_names[i]);
        free(f->label_names);
    }
    free(f->bounds);
    free(f->name);
    free(f->help);
    free(f);
}

struct kop_metrics *kop_metrics_new(bool process_metrics)
{
    struct kop_metrics *m = calloc(1, sizeof(*m));

    if (m == NULL)
        return NULL;
    if (pthread_mutex_init(&m->lock, NULL) != 0) {
        free(m);
        return NULL;
    }
    m->process_metrics = process_metrics;
    return m;
}

void kop_metrics_free(struct kop_metrics *m)
{
    if (m == NULL)
        return;
    for (size_t i = 0; i < m->n_families; i++)
        family_free(m->families[i]);
    free(m->families);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static pthread_mutex_t global_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(struct kop_metrics *) global_registry;

struct kop_metrics *kop_metrics_global(void)
{
    struct kop_metrics *m = atomic_load_explicit(&global_registry, memory_order_acquire);

    if (m != NULL)
        return m;
    /* A lock rather than pthread_once so that a registry freed by
     * kop_metrics_global_cleanup() can be created again (tests). */
    pthread_mutex_lock(&global_lock);
    m = atomic_load_explicit(&global_registry, memory_order_relaxed);
    if (m == NULL) {
        m = kop_metrics_new(true);
        atomic_store_explicit(&global_registry, m, memory_order_release);
    }
    pthread_mutex_unlock(&global_lock);
    return m;
}

void kop_metrics_global_cleanup(void)
{
    struct kop_metrics *m;

    pthread_mutex_lock(&global_lock);
    m = atomic_exchange_explicit(&global_registry, NULL, memory_order_acq_rel);
    pthread_mutex_unlock(&global_lock);
    kop_metrics_free(m);
}

void kop_metrics_exp_buckets(double start, double factor, size_t n, double *out)
{
    double v = start;

    assert(out);
    for (size_t i = 0; i < n; i++) {
        out[i] = v;
        v *= factor;
    }
}

static uint64_t hash_values(const char *const *values, size_t n)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */

    for (size_t i = 0; i < n; i++) {
        for (const unsigned char *p = (const unsigned char *)values[i]; *p; p++) {
            h ^= *p;
            h *= 1099511628211ULL;
        }
        h ^= 0xff; /* separator, so ("ab","c") != ("a","bc") */
        h *= 1099511628211ULL;
    }
    return h;
}

/* Called with the lock held. */
static struct kop_metric *child_create(struct kop_metric_family *f, const char *const *values,
                                       uint64_t hash)
{
    struct kop_metric *c = calloc(1, sizeof(*c));

    if (c == NULL)
        return NULL;
    c->family = f;
    c->hash = hash;
    if (f->n_labels > 0) {
        c->label_values = calloc(f->n_labels, sizeof(char *));
        if (c->label_values == NULL)
            goto fail;
        for (size_t i = 0; i < f->n_labels; i++) {
            c->label_values[i] = strdup(values[i]);
            if (c->label_values[i] == NULL)
                goto fail;
        }
    }
    if (f->type == KOP_METRIC_HISTOGRAM) {
        c->buckets = calloc(f->n_bounds + 1, sizeof(*c->buckets));
        if (c->buckets == NULL)
            goto fail;
        for (size_t i = 0; i <= f->n_bounds; i++)
            atomic_init(&c->buckets[i], 0);
    }
    atomic_init(&c->value, d2u(0.0));
    atomic_init(&c->sum, d2u(0.0));
    if (f->last != NULL)
        f->last->next = c;
    else
        f->children = c;
    f->last = c;
    return c;
fail:
    child_free(c, f->n_labels);
    return NULL;
}

static bool same_labels(const struct kop_metric_family *f, const char *const *label_names, size_t n)
{
    if (f->n_labels != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(f->label_names[i], label_names[i]) != 0)
            return false;
    }
    return true;
}

static struct kop_metric_family *family_new(enum kop_metric_type type, const char *name,
                                            const char *help, const char *const *label_names,
                                            size_t n_labels, const double *buckets,
                                            size_t n_buckets)
{
    struct kop_metric_family *f = calloc(1, sizeof(*f));

    if (f == NULL)
        return NULL;
    f->type = type;
    f->name = strdup(name);
    f->help = strdup(help ? help : "");
    if (f->name == NULL || f->help == NULL)
        goto fail;
    if (n_labels > 0) {
        f->label_names = calloc(n_labels, sizeof(char *));
        if (f->label_names == NULL)
            goto fail;
        f->n_labels = n_labels;
        for (size_t i = 0; i < n_labels; i++) {
            f->label_names[i] = strdup(label_names[i]);
            if (f->label_names[i] == NULL)
                goto fail;
        }
    }
    if (type == KOP_METRIC_HISTOGRAM && n_buckets > 0) {
        f->bounds = malloc(n_buckets * sizeof(double));
        if (f->bounds == NULL)
            goto fail;
        memcpy(f->bounds, buckets, n_buckets * sizeof(double));
        f->n_bounds = n_buckets;
    }
    return f;
fail:
    family_free(f);
    return NULL;
}

struct kop_metric_family *kop_metrics_register(struct kop_metrics *m, enum kop_metric_type type,
                                               const char *name, const char *help,
                                               const char *const *label_names,
                                               const double *buckets, size_t n_buckets)
{
    struct kop_metric_family *f = NULL;
    size_t n_labels = 0, pos;

    if (m == NULL || !valid_metric_name(name))
        return NULL;
    if (type != KOP_METRIC_COUNTER && type != KOP_METRIC_GAUGE && type != KOP_METRIC_HISTOGRAM)
        return NULL;
    while (label_names != NULL && label_names[n_labels] != NULL) {
        if (!valid_label_name(label_names[n_labels]) || n_labels >= MAX_LABELS)
            return NULL;
        if (type == KOP_METRIC_HISTOGRAM && strcmp(label_names[n_labels], "le") == 0)
            return NULL;
        for (size_t j = 0; j < n_labels; j++) {
            if (strcmp(label_names[j], label_names[n_labels]) == 0)
                return NULL;
        }
        n_labels++;
    }
    if (type == KOP_METRIC_HISTOGRAM) {
        if (buckets == NULL) {
            buckets = default_buckets;
            n_buckets = sizeof(default_buckets) / sizeof(default_buckets[0]);
        }
        /* A trailing +Inf is implicit, as in the Go client. */
        if (n_buckets > 0 && isinf(buckets[n_buckets - 1]) && buckets[n_buckets - 1] > 0)
            n_buckets--;
        for (size_t i = 0; i < n_buckets; i++) {
            if (isnan(buckets[i]) || (i > 0 && !(buckets[i] > buckets[i - 1])))
                return NULL;
        }
    }

    pthread_mutex_lock(&m->lock);
    /* Binary search for the name (families are sorted). */
    {
        size_t lo = 0, hi = m->n_families;

        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            int c = strcmp(m->families[mid]->name, name);

            if (c == 0) {
                struct kop_metric_family *old = m->families[mid];

                if (old->type == type && same_labels(old, label_names, n_labels))
                    f = old;
                goto out;
            }
            if (c < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        pos = lo;
    }
    if (m->n_families == m->cap_families) {
        size_t cap = m->cap_families ? m->cap_families * 2 : 32;
        struct kop_metric_family **p = realloc(m->families, cap * sizeof(*p));

        if (p == NULL)
            goto out;
        m->families = p;
        m->cap_families = cap;
    }
    f = family_new(type, name, help, label_names, n_labels, buckets, n_buckets);
    if (f == NULL)
        goto out;
    f->registry = m;
    /* An unlabelled family has its one child from the start, so it renders
     * as 0 before the first update (as a plain Go Counter does). */
    if (n_labels == 0 && child_create(f, NULL, hash_values(NULL, 0)) == NULL) {
        family_free(f);
        f = NULL;
        goto out;
    }
    memmove(m->families + pos + 1, m->families + pos, (m->n_families - pos) * sizeof(*m->families));
    m->families[pos] = f;
    m->n_families++;
out:
    pthread_mutex_unlock(&m->lock);
    return f;
}

struct kop_metric *kop_metric_childv(struct kop_metric_family *f, const char *const *values,
                                     size_t n_values)
{
    struct kop_metric *c;
    uint64_t h;

    if (f == NULL || n_values != f->n_labels)
        return NULL;
    for (size_t i = 0; i < n_values; i++) {
        if (values[i] == NULL)
            return NULL;
    }
    h = hash_values(values, n_values);
    pthread_mutex_lock(&f->registry->lock);
    for (c = f->children; c != NULL; c = c->next) {
        bool same = c->hash == h;

        for (size_t i = 0; same && i < n_values; i++)
            same = strcmp(c->label_values[i], values[i]) == 0;
        if (same)
            goto out;
    }
    c = child_create(f, values, h);
out:
    pthread_mutex_unlock(&f->registry->lock);
    return c;
}

void kop_metric_remove(struct kop_metric *c)
{
    if (c == NULL)
        return;
    struct kop_metric_family *f = c->family;
    pthread_mutex_lock(&f->registry->lock);
    struct kop_metric *prev = NULL;
    for (struct kop_metric *m = f->children; m != NULL; prev = m, m = m->next) {
        if (m != c)
            continue;
        if (prev != NULL)
            prev->next = m->next;
        else
            f->children = m->next;
        if (f->last == m)
            f->last = prev;
        break;
    }
    pthread_mutex_unlock(&f->registry->lock);
    child_free(c, f->n_labels);
}

void kop_metrics_remove_series(struct kop_metrics *m, const char *family, const char *label,
                               const char *value)
{
    if (m == NULL || family == NULL || label == NULL || value == NULL)
        return;
    pthread_mutex_lock(&m->lock);
    struct kop_metric_family *f = NULL;
    for (size_t i = 0; i < m->n_families && !f; i++)
        if (strcmp(m->families[i]->name, family) == 0)
            f = m->families[i];
    size_t li = 0;
    while (f && li < f->n_labels && strcmp(f->label_names[li], label) != 0)
        li++;
    if (f && li < f->n_labels) {
        struct kop_metric **pp = &f->children, *prev = NULL;
        while (*pp) {
            struct kop_metric *c = *pp;
            if (strcmp(c->label_values[li], value) != 0) {
                prev = c;
                pp = &c->next;
                continue;
            }
            *pp = c->next;
            if (f->last == c)
                f->last = prev;
            child_free(c, f->n_labels);
        }
    }
    pthread_mutex_unlock(&m->lock);
}

struct kop_metric *kop_metric_child(struct kop_metric_family *f, ...)
{
    const char *values[MAX_LABELS];
    va_list ap;

    if (f == NULL)
        return NULL;
    va_start(ap, f);
    for (size_t i = 0; i < f->n_labels; i++)
        values[i] = va_arg(ap, const char *);
    va_end(ap);
    return kop_metric_childv(f, values, f->n_labels);
}

/* ---- updates --------------------------------------------------------------- */

static bool is_type(const struct kop_metric *c, enum kop_metric_type t)
{
    return c != NULL && c->family->type == t;
}

void kop_counter_add(struct kop_metric *c, double v)
{
    /* Counters only go up; a negative add is a caller bug and ignored. */
    if (!is_type(c, KOP_METRIC_COUNTER) || !(v >= 0))
        return;
    atomic_add_double(&c->value, v);
}

void kop_counter_inc(struct kop_metric *c)
{
    kop_counter_add(c, 1.0);
}

void kop_gauge_set(struct kop_metric *g, double v)
{
    if (!is_type(g, KOP_METRIC_GAUGE))
        return;
    atomic_store_explicit(&g->value, d2u(v), memory_order_relaxed);
}

void kop_gauge_add(struct kop_metric *g, double v)
{
    if (!is_type(g, KOP_METRIC_GAUGE))
        return;
    atomic_add_double(&g->value, v);
}

void kop_histogram_observe(struct kop_metric *h, double v)
{
    const struct kop_metric_family *f;
    size_t lo = 0, hi;

    if (!is_type(h, KOP_METRIC_HISTOGRAM))
        return;
    f = h->family;
    /* First bucket whose upper bound is >= v (NaN lands in +Inf). */
    hi = f->n_bounds;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (v <= f->bounds[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    atomic_fetch_add_explicit(&h->buckets[lo], 1, memory_order_relaxed);
    atomic_add_double(&h->sum, v);
}

double kop_metric_value(const struct kop_metric *c)
{
    if (c == NULL)
        return 0;
    if (c->family->type == KOP_METRIC_HISTOGRAM)
        return u2d(atomic_load_explicit((_Atomic uint64_t *)&c->sum, memory_order_relaxed));
    return u2d(atomic_load_explicit((_Atomic uint64_t *)&c->value, memory_order_relaxed));
}

unsigned long long kop_histogram_count(const struct kop_metric *h)
{
    unsigned long long n = 0;

    if (!is_type(h, KOP_METRIC_HISTOGRAM))
        return 0;
    for (size_t i = 0; i <= h->family->n_bounds; i++)
        n += atomic_load_explicit(&h->buckets[i], memory_order_relaxed);
    return n;
}

/* ---- rendering ------------------------------------------------------------- */

/* The page is built in a kop_dynbuf: its first error is kept, so the
 * writers below ignore their results and render checks once. */
static void out_add(struct kop_dynbuf *o, const char *s, size_t n)
{
    (void)kop_dynbuf_add(o, s, n);
}

static void out_adds(struct kop_dynbuf *o, const char *s)
{
    out_add(o, s, strlen(s));
}

/*
 * Go's strconv.FormatFloat(v, 'g', -1, 64): the shortest digits that
 * round-trip; exponent form ("1e+06", "1.5e-05") when the decimal exponent
 * is < -4 or >= 6 (Go fixes the precision at 6 for that decision in
 * shortest mode), plain decimals otherwise.
 */
int kop_metrics_format_double(double v, char *buf, size_t len)
{
    char tmp[40], digs[20];
    size_t nd = 0, pos = 0;
    int exp, dp;
    char *e;

    if (isnan(v))
        return snprintf(buf, len, "NaN");
    if (isinf(v))
        return snprintf(buf, len, v > 0 ? "+Inf" : "-Inf");
    if (v == 0)
        return snprintf(buf, len, signbit(v) ? "-0" : "0");
    for (int p = 1; p <= 17; p++) {
        snprintf(tmp, sizeof(tmp), "%.*e", p - 1, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    /* tmp is "[-]d[.ddd]e[+-]xx" */
    e = strchr(tmp, 'e');
    if (e == NULL)
        return snprintf(buf, len, "%.17g", v);
    exp = (int)strtol(e + 1, NULL, 10);
    for (char *p = tmp; p < e; p++) {
        if (*p >= '0' && *p <= '9' && nd < sizeof(digs) - 1)
            digs[nd++] = *p;
    }
    while (nd > 1 && digs[nd - 1] == '0')
        nd--;
    digs[nd] = '\0';

    {
        char res[64];

        if (v < 0)
            res[pos++] = '-';
        if (exp < -4 || exp >= 6) {
            res[pos++] = digs[0];
            if (nd > 1) {
                res[pos++] = '.';
                memcpy(res + pos, digs + 1, nd - 1);
                pos += nd - 1;
            }
            snprintf(res + pos, sizeof(res) - pos, "e%c%02d", exp < 0 ? '-' : '+',
                     exp < 0 ? -exp : exp);
            return snprintf(buf, len, "%s", res);
        }
        dp = exp + 1; /* digits before the decimal point */
        if (dp <= 0) {
            res[pos++] = '0';
            res[pos++] = '.';
            for (int i = 0; i < -dp; i++)
                res[pos++] = '0';
            memcpy(res + pos, digs, nd);
            pos += nd;
        } else if ((size_t)dp >= nd) {
            memcpy(res + pos, digs, nd);
            pos += nd;
            for (size_t i = nd; i < (size_t)dp; i++)
                res[pos++] = '0';
        } else {
            memcpy(res + pos, digs, (size_t)dp);
            pos += (size_t)dp;
            res[pos++] = '.';
            memcpy(res + pos, digs + dp, nd - (size_t)dp);
            pos += nd - (size_t)dp;
        }
        res[pos] = '\0';
        return snprintf(buf, len, "%s", res);
    }
}

static void out_double(struct kop_dynbuf *o, double v)
{
    char buf[64];

    kop_metrics_format_double(v, buf, sizeof(buf));
    out_adds(o, buf);
}

static void out_u64(struct kop_dynbuf *o, unsigned long long v)
{
    char buf[32];

    /* Go renders counts through the same float formatting. */
    kop_metrics_format_double((double)v, buf, sizeof(buf));
    out_adds(o, buf);
}

/* HELP text: backslash and newline escaped. */
static void out_help(struct kop_dynbuf *o, const char *s)
{
    for (const char *p = s; *p; p++) {
        if (*p == '\\')
            out_add(o, "\\\\", 2);
        else if (*p == '\n')
            out_add(o, "\\n", 2);
        else
            out_add(o, p, 1);
    }
}

/* Label values: backslash, double quote and newline escaped. */
static void out_label_value(struct kop_dynbuf *o, const char *s)
{
    for (const char *p = s; *p; p++) {
        if (*p == '\\')
            out_add(o, "\\\\", 2);
        else if (*p == '"')
            out_add(o, "\\\"", 2);
        else if (*p == '\n')
            out_add(o, "\\n", 2);
        else
            out_add(o, p, 1);
    }
}

static void out_header(struct kop_dynbuf *o, const char *name, const char *help, const char *type)
{
    out_adds(o, "# HELP ");
    out_adds(o, name);
    out_add(o, " ", 1);
    out_help(o, help);
    out_adds(o, "\n# TYPE ");
    out_adds(o, name);
    out_add(o, " ", 1);
    out_adds(o, type);
    out_add(o, "\n", 1);
}

/* "{a="x",b="y"" (le appended when given) then "}" when anything was written. */
static void out_labels(struct kop_dynbuf *o, const struct kop_metric *c, const char *le)
{
    const struct kop_metric_family *f = c->family;

    if (f->n_labels == 0 && le == NULL)
        return;
    out_add(o, "{", 1);
    for (size_t i = 0; i < f->n_labels; i++) {
        if (i > 0)
            out_add(o, ",", 1);
        out_adds(o, f->label_names[i]);
        out_adds(o, "=\"");
        out_label_value(o, c->label_values[i]);
        out_add(o, "\"", 1);
    }
    if (le != NULL) {
        if (f->n_labels > 0)
            out_add(o, ",", 1);
        out_adds(o, "le=\"");
        out_adds(o, le);
        out_add(o, "\"", 1);
    }
    out_add(o, "}", 1);
}

static void render_family(struct kop_dynbuf *o, const struct kop_metric_family *f)
{
    static const char *const type_names[] = {"counter", "gauge", "histogram"};

    if (f->children == NULL)
        return; /* a labelled family without children is not exposed */
    out_header(o, f->name, f->help, type_names[f->type]);
    for (const struct kop_metric *c = f->children; c != NULL; c = c->next) {
        if (f->type != KOP_METRIC_HISTOGRAM) {
            out_adds(o, f->name);
            out_labels(o, c, NULL);
            out_add(o, " ", 1);
            out_double(o, kop_metric_value(c));
            out_add(o, "\n", 1);
            continue;
        }
        {
            unsigned long long cum = 0;
            char le[64];

            for (size_t i = 0; i <= f->n_bounds; i++) {
                cum += atomic_load_explicit(&c->buckets[i], memory_order_relaxed);
                if (i < f->n_bounds)
                    kop_metrics_format_double(f->bounds[i], le, sizeof(le));
                else
                    snprintf(le, sizeof(le), "+Inf");
                out_adds(o, f->name);
                out_adds(o, "_bucket");
                out_labels(o, c, le);
                out_add(o, " ", 1);
                out_u64(o, cum);
                out_add(o, "\n", 1);
            }
            out_adds(o, f->name);
            out_adds(o, "_sum");
            out_labels(o, c, NULL);
            out_add(o, " ", 1);
            out_double(o, kop_metric_value(c));
            out_add(o, "\n", 1);
            out_adds(o, f->name);
            out_adds(o, "_count");
            out_labels(o, c, NULL);
            out_add(o, " ", 1);
            out_u64(o, cum);
            out_add(o, "\n", 1);
        }
    }
}

/* ---- process metrics --------------------------------------------------------- */

struct proc_metric {
    const char *name;
    const char *help;
    const char *type;
    double value;
    bool ok;
};

enum {
    PROC_CPU,
    PROC_MAX_FDS,
    PROC_OPEN_FDS,
    PROC_RSS,
    PROC_START,
    PROC_VSIZE,
    PROC_N,
};

static double boot_time(void)
{
    char buf[8192];
    const char *p;

    if (kop_file_read_into("/proc/stat", buf, sizeof(buf), NULL) != 0)
        return -1;
    p = strstr(buf, "\nbtime ");
    if (p == NULL)
        return -1;
    return strtod(p + 7, NULL);
}

static void process_collect(struct proc_metric *pm)
{
    static const struct proc_metric init[PROC_N] = {
        [PROC_CPU] = {"process_cpu_seconds_total",
                      "Total user and system CPU time spent in seconds.", "counter", 0, false},
        [PROC_MAX_FDS] = {"process_max_fds", "Maximum number of open file descriptors.", "gauge", 0,
                          false},
        [PROC_OPEN_FDS] = {"process_open_fds", "Number of open file descriptors.", "gauge", 0,
                           false},
        [PROC_RSS] = {"process_resident_memory_bytes", "Resident memory size in bytes.", "gauge", 0,
                      false},
        [PROC_START] = {"process_start_time_seconds",
                        "Start time of the process since unix epoch in seconds.", "gauge", 0,
                        false},
        [PROC_VSIZE] = {"process_virtual_memory_bytes", "Virtual memory size in bytes.", "gauge", 0,
                        false},
    };
    char buf[1024];
    struct rlimit rl;
    DIR *d;

    memcpy(pm, init, sizeof(init));
    if (kop_file_read_into("/proc/self/stat", buf, sizeof(buf), NULL) == 0) {
        /* Fields after the command name, which is in parentheses and may
         * itself contain spaces and parentheses: start after the last ')'.
         * f[] is indexed by the 1-based field numbers of proc(5). */
        char *p = strrchr(buf, ')');
        unsigned long long f[25] = {0};
        int field = 0;

        if (p != NULL && p[1] == ' ' && p[2] != '\0') {
            p += 3; /* skip ") " and the one-character state (field 3) */
            for (field = 3; field < 24; field++) {
                char *end;

                f[field + 1] = strtoull(p, &end, 10);
                if (end == p)
                    break;
                p = end;
            }
        }
        if (field >= 24) {
            long tck = sysconf(_SC_CLK_TCK);
            long page = sysconf(_SC_PAGESIZE);
            double bt = boot_time();

            if (tck > 0) {
                pm[PROC_CPU].value = (double)(f[14] + f[15]) / (double)tck;
                pm[PROC_CPU].ok = true;
                if (bt >= 0) {
                    pm[PROC_START].value = bt + (double)f[22] / (double)tck;
                    pm[PROC_START].ok = true;
                }
            }
            pm[PROC_VSIZE].value = (double)f[23];
            pm[PROC_VSIZE].ok = true;
            if (page > 0) {
                pm[PROC_RSS].value = (double)f[24] * (double)page;
                pm[PROC_RSS].ok = true;
            }
        }
    }
    d = opendir("/proc/self/fd");
    if (d != NULL) {
        struct dirent *de;
        double n = 0;

        while ((de = readdir(d)) != NULL) {
            if (de->d_name[0] != '.')
                n++;
        }
        closedir(d);
        /* Do not count the descriptor used to read the directory. */
        pm[PROC_OPEN_FDS].value = n > 0 ? n - 1 : 0;
        pm[PROC_OPEN_FDS].ok = true;
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        pm[PROC_MAX_FDS].value = (double)rl.rlim_cur;
        pm[PROC_MAX_FDS].ok = true;
    }
}

int kop_metrics_render(struct kop_metrics *m, char **ret_buf, size_t *ret_len)
{
    struct proc_metric pm[PROC_N];
    struct kop_dynbuf o;
    size_t fi = 0, pi = 0, n_proc = 0;

    assert(m);
    assert(ret_buf);
    if (m->process_metrics) {
        process_collect(pm);
        n_proc = PROC_N;
    }
    kop_dynbuf_init(&o, KOP_DYNBUF_NO_LIMIT);
    (void)kop_dynbuf_reserve(&o, 4095);
    pthread_mutex_lock(&m->lock);
    /* Merge the sorted families with the (sorted) process metrics. */
    while (fi < m->n_families || pi < n_proc) {
        int cmp = pi >= n_proc          ? 1
                  : fi >= m->n_families ? -1
                                        : strcmp(pm[pi].name, m->families[fi]->name);

        if (cmp == 0) {
            pi++; /* a registered family of the same name wins */
        } else if (cmp < 0) {
            if (pm[pi].ok) {
                out_header(&o, pm[pi].name, pm[pi].help, pm[pi].type);
                out_adds(&o, pm[pi].name);
                out_add(&o, " ", 1);
                out_double(&o, pm[pi].value);
                out_add(&o, "\n", 1);
            }
            pi++;
        } else {
            render_family(&o, m->families[fi]);
            fi++;
        }
    }
    pthread_mutex_unlock(&m->lock);
    if (kop_dynbuf_error(&o) != 0 || kop_dynbuf_take(&o, ret_buf, ret_len) != 0) {
        kop_dynbuf_free(&o);
        return -ENOMEM;
    }
    return 0;
}
