/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A bump arena for one request, and the hook that makes jansson allocate
 * from it.
 *
 * kop_arena_json_install() replaces jansson's allocator once, in main()
 * before any thread starts. From then on every jansson allocation checks a
 * thread-local "current arena": when one is bound (kop_arena_json_bind), the
 * allocation comes from it and json_decref()/free of it costs nothing;
 * otherwise it comes from malloc as usual. Each block carries a small
 * header saying where it came from, so a value allocated on the heap can be
 * freed while an arena is bound and vice versa.
 *
 * Rules: a json_t allocated while an arena is bound must not outlive the
 * arena (never put one in the store, never hand one to another thread).
 * Strings produced by jansson (json_dumps) follow the same rule: use
 * kop_json_dump() from kop/json.h, which returns malloc'd memory.
 *
 * Thread-safety: an arena is owned by one thread at a time.
 * kop_arena_json_install() is init-only; bind/unbind act on the calling
 * thread only.
 */
#ifndef KOP_ARENA_H
#define KOP_ARENA_H

#include <stddef.h>

struct kop_arena;

/* chunk_size: size of the first chunk (later chunks grow). NULL on ENOMEM. */
struct kop_arena *kop_arena_new(size_t chunk_size);

/* NULL-safe. The arena must not be bound on any thread. */
void kop_arena_free(struct kop_arena *a);

/* Forget every allocation but keep the first chunk for reuse. */
void kop_arena_reset(struct kop_arena *a);

/* 16-byte aligned memory, NULL on ENOMEM. */
void *kop_arena_alloc(struct kop_arena *a, size_t size);

/* Bytes handed out since the last reset (for metrics and tests). */
size_t kop_arena_used(const struct kop_arena *a);

/* Install the thread-aware allocator in jansson. Init-only. */
void kop_arena_json_install(void);

/* Make "a" the calling thread's jansson arena (NULL: back to malloc).
 * Returns the previously bound arena. */
struct kop_arena *kop_arena_json_bind(struct kop_arena *a);

#endif /* KOP_ARENA_H */
