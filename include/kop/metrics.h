/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A Prometheus metrics registry: counters, gauges and histograms, with or
 * without labels, rendered in the text exposition format 0.0.4.
 *
 * A family (name, help, label names) is registered once; a child is the
 * time series for one set of label values. Children are created on first
 * use and never freed before the registry, so callers may cache the
 * pointer. Updates are lock-free (atomics); creating a child and rendering
 * take the registry lock.
 *
 * Families with no labels have exactly one child: use kop_metric_child(f)
 * with no label values.
 *
 * process_* metrics (cpu seconds, resident/virtual memory, open fds, max
 * fds, start time) are rendered by kop_metrics_render() when the registry
 * was created with process metrics enabled.
 *
 * Thread-safety: any thread, after kop_metrics_new().
 */
#ifndef KOP_METRICS_H
#define KOP_METRICS_H

#include <stdbool.h>
#include <stddef.h>

enum kop_metric_type {
    KOP_METRIC_COUNTER,
    KOP_METRIC_GAUGE,
    KOP_METRIC_HISTOGRAM,
};

struct kop_metrics;
struct kop_metric_family;
struct kop_metric;

/* NULL on ENOMEM. */
struct kop_metrics *kop_metrics_new(bool process_metrics);
void kop_metrics_free(struct kop_metrics *m);

/*
 * The process-wide registry (created on first call with process metrics;
 * freed by kop_metrics_global_cleanup() at exit). Modules register their
 * families here unless a test passes its own registry.
 */
struct kop_metrics *kop_metrics_global(void);
void kop_metrics_global_cleanup(void);

/*
 * Register a family. label_names: NULL-terminated array (NULL for none).
 * buckets/n_buckets: upper bounds for histograms in increasing order, NULL
 * for the Prometheus defaults (.005 .. 10). Registering the same name twice
 * returns the existing family when the type matches, NULL otherwise.
 * Returns NULL on ENOMEM or bad arguments.
 */
struct kop_metric_family *kop_metrics_register(struct kop_metrics *m, enum kop_metric_type type,
                                               const char *name, const char *help,
                                               const char *const *label_names,
                                               const double *buckets, size_t n_buckets);

/* Exponential bucket bounds like prometheus.ExponentialBuckets. Writes n
 * values into out. */
void kop_metrics_exp_buckets(double start, double factor, size_t n, double *out);

/*
 * The child for the given label values (as many as the family has label
 * names, in order; pass none for an unlabelled family). Label values are
 * escaped when rendered. NULL on ENOMEM or a NULL value. The count cannot
 * be checked through varargs: fewer values than labels is undefined
 * behaviour; where the count is not fixed in the code, use
 * kop_metric_childv, which checks it.
 */
struct kop_metric *kop_metric_child(struct kop_metric_family *f, ...);

/* Same with the label values in an array of n_values (must equal the
 * family's label count; no value may be NULL). NULL on ENOMEM or misuse. */
struct kop_metric *kop_metric_childv(struct kop_metric_family *f, const char *const *values,
                                     size_t n_values);

/* Remove child c from its family (it is no longer rendered) and free it,
 * as a Prometheus collector's DeleteLabelValues: for the series of
 * something that is gone (a disengaged cluster). The caller guarantees that
 * nobody holds c any more; a later kop_metric_child with the same values
 * makes a new one starting from 0. NULL is fine. */
void kop_metric_remove(struct kop_metric *c);

/* Remove every series of family whose label is value (as
 * kop_metric_remove, under the same guarantee for each of them). Nothing
 * when the family or label is not there. */
void kop_metrics_remove_series(struct kop_metrics *m, const char *family, const char *label,
                               const char *value);

/* Updates. All accept NULL (a no-op), so a failed registration never
 * crashes a caller. */
void kop_counter_add(struct kop_metric *c, double v);
void kop_counter_inc(struct kop_metric *c);
void kop_gauge_set(struct kop_metric *g, double v);
void kop_gauge_add(struct kop_metric *g, double v);
void kop_histogram_observe(struct kop_metric *h, double v);

/* Current value of a counter or gauge, or the sum of a histogram's
 * observations (0 for NULL); for tests. */
double kop_metric_value(const struct kop_metric *c);
/* Observation count of a histogram (0 for NULL). */
unsigned long long kop_histogram_count(const struct kop_metric *h);

/*
 * Render every family (sorted by name, children in creation order) plus
 * process metrics. *ret_buf is malloc'd, NUL-terminated. Returns 0 or
 * -ENOMEM.
 */
int kop_metrics_render(struct kop_metrics *m, char **ret_buf, size_t *ret_len);

/* Format v as the exposition format writes sample values (Go's
 * strconv.FormatFloat(v, 'g', -1, 64): "3", "0.25", "1e+06", "+Inf",
 * "NaN"). Returns what snprintf returns. */
int kop_metrics_format_double(double v, char *buf, size_t len);

#endif /* KOP_METRICS_H */
