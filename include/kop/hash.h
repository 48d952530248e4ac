/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A keyed hash for tables whose keys come from users (object names, JSON
 * keys, port names): SipHash-1-3 (Aumasson and Bernstein; the variant
 * Rust's HashMap and CPython use for strings). Its collisions cannot be
 * found without the key, so nobody can choose names that pile up in one
 * bucket. FNV and similar unkeyed hashes are not used for such tables.
 *
 * Thread-safety: any thread. The process key is drawn once, on first use.
 */
#ifndef KOP_HASH_H
#define KOP_HASH_H

#include <stddef.h>
#include <stdint.h>

/* p[0..n) under the process key (random, drawn once per process). */
uint64_t kop_hash(const void *p, size_t n);

/* A NUL-terminated string under the process key. */
uint64_t kop_hash_str(const char *s);

/* p[0..n) under key. */
uint64_t kop_hash_keyed(const uint64_t key[2], const void *p, size_t n);

/* A fresh random key (getrandom, never blocking; without kernel randomness
 * the clock and a stack address stand in). */
void kop_hash_key_new(uint64_t key[2]);

#endif /* KOP_HASH_H */
