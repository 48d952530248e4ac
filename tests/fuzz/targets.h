/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fuzz targets' logic, shared by the libFuzzer entry points
 * (tests/fuzz/fuzz_<target>.c) and the corpus replay suite
 * (tests/test_fuzz_corpus.c), so that every corpus file runs in the normal
 * test run through exactly the code libFuzzer drives.
 *
 * Each kop_fuzz_<target>() takes arbitrary bytes, calls one module's entry
 * points and checks the module's contract (status codes, error values,
 * round trips, a model of the store). A broken invariant goes to the fail
 * hook: by default it prints the message and aborts (libFuzzer then keeps
 * the input as a crash); the replay suite installs a hook that records the
 * message so the test can name the file. A target never stops early on a
 * failed check, so it leaks nothing when the hook returns.
 *
 * Thread-safety: owner thread only (the fail hook and the lazily opened
 * /dev/null streams are process-wide); kop_fuzz_init() is init-only.
 */
#ifndef KOP_FUZZ_TARGETS_H
#define KOP_FUZZ_TARGETS_H

#include <stddef.h>
#include <stdint.h>

typedef void kop_fuzz_fail_fn(const char *msg);

/* Install jansson's arena allocator hook (as main() does). Idempotent. */
void kop_fuzz_init(void);

/* Where broken invariants go; NULL restores the default (print, abort). */
void kop_fuzz_set_fail(kop_fuzz_fail_fn *fn);

/* Report a broken invariant through the hook (printf-style). */
void kop_fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void kop_fuzz_conversion_review(const uint8_t *data, size_t size);
void kop_fuzz_admission_review(const uint8_t *data, size_t size);
void kop_fuzz_conversion(const uint8_t *data, size_t size);
void kop_fuzz_imageref(const uint8_t *data, size_t size);
void kop_fuzz_watch(const uint8_t *data, size_t size);
void kop_fuzz_kubeconfig(const uint8_t *data, size_t size);
void kop_fuzz_store(const uint8_t *data, size_t size);
void kop_fuzz_config(const uint8_t *data, size_t size);
void kop_fuzz_jscan(const uint8_t *data, size_t size);

struct kop_fuzz_target {
    const char *name; /* also the corpus directory name */
    void (*run)(const uint8_t *data, size_t size);
    size_t max_len; /* -max_len for libFuzzer (scripts/fuzz.sh mirrors it) */
};

/* Every target, terminated by an entry whose name is NULL. */
extern const struct kop_fuzz_target kop_fuzz_targets[];

#endif /* KOP_FUZZ_TARGETS_H */
