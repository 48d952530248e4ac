/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bump arena and the jansson allocator hook: the small jansson values of
 * one request (an AdmissionReview's tree) or of one converted object (the
 * streamed ConversionReview resets its arena after each) cost a pointer
 * bump, and their free costs nothing.
 *
 * DESIGN
 * - An arena is a list of chunks. Allocation bumps an offset in the
 *   current chunk; when it does not fit, a new chunk of twice the previous
 *   size (or the request, when bigger) is appended. Reset frees every chunk
 *   but the first: size the first chunk for a typical request so that a
 *   per-thread arena reused request after request does not call malloc.
 * - jansson hook: every block handed to jansson is preceded by a 16-byte
 *   header saying whether it came from malloc or from an arena. The free
 *   hook calls free() on heap blocks and ignores arena blocks, so values
 *   allocated on either side can be released while an arena is bound or
 *   not. The thread's current arena is a _Thread_local pointer: the fast
 *   path takes no lock.
 * - Invariant: an arena block is never passed to free(); a json_t from an
 *   arena is released (or forgotten) before the arena is reset or freed.
 */
#include "kop/arena.h"

#include <assert.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define ARENA_ALIGN 16
#define MIN_CHUNK 1024
#define MAX_GROW_CHUNK ((size_t)64 * 1024 * 1024)

struct chunk {
    struct chunk *next;
    size_t size; /* usable bytes in data */
    size_t used;
    size_t pad;
    alignas(ARENA_ALIGN) unsigned char data[];
};

struct kop_arena {
    struct chunk *first;
    struct chunk *cur;
    size_t used; /* bytes handed out since the last reset */
};

static size_t align_up(size_t n)
{
    return (n + (ARENA_ALIGN - 1)) & ~(size_t)(ARENA_ALIGN - 1);
}

static struct chunk *chunk_new(size_t size)
{
    struct chunk *c;
    size_t total;

    size = align_up(size);
    if (size > SIZE_MAX - sizeof(struct chunk))
        return NULL;
    total = align_up(sizeof(struct chunk) + size);
    c = aligned_alloc(ARENA_ALIGN, total);
    if (c == NULL)
        return NULL;
    c->next = NULL;
    c->size = size;
    c->used = 0;
    c->pad = 0;
    return c;
}

struct kop_arena *kop_arena_new(size_t chunk_size)
{
    struct kop_arena *a = calloc(1, sizeof(*a));

    if (a == NULL)
        return NULL;
    if (chunk_size < MIN_CHUNK)
        chunk_size = MIN_CHUNK;
    a->first = chunk_new(chunk_size);
    if (a->first == NULL) {
        free(a);
        return NULL;
    }
    a->cur = a->first;
    return a;
}

static void free_chunks(struct chunk *c)
{
    while (c != NULL) {
        struct chunk *next = c->next;

        free(c);
        c = next;
    }
}

void kop_arena_free(struct kop_arena *a)
{
    if (a == NULL)
        return;
    free_chunks(a->first);
    free(a);
}

void kop_arena_reset(struct kop_arena *a)
{
    assert(a);
    free_chunks(a->first->next);
    a->first->next = NULL;
    a->first->used = 0;
    a->cur = a->first;
    a->used = 0;
}

static void *alloc_slow(struct kop_arena *a, size_t size)
{
    size_t grow = a->cur->size < MAX_GROW_CHUNK / 2 ? a->cur->size * 2 : MAX_GROW_CHUNK;
    struct chunk *c = chunk_new(size > grow ? size : grow);

    if (c == NULL)
        return NULL;
    a->cur->next = c;
    a->cur = c;
    c->used = size;
    a->used += size;
    return c->data;
}

void *kop_arena_alloc(struct kop_arena *a, size_t size)
{
    struct chunk *c;
    void *p;

    assert(a);
    if (size > SIZE_MAX - ARENA_ALIGN)
        return NULL;
    size = align_up(size ? size : 1);
    c = a->cur;
    if (size > c->size - c->used)
        return alloc_slow(a, size);
    p = c->data + c->used;
    c->used += size;
    a->used += size;
    return p;
}

size_t kop_arena_used(const struct kop_arena *a)
{
    return a ? a->used : 0;
}

/* ---- jansson hook ------------------------------------------------------- */

#define TAG_HEAP UINT64_C(0x6b6f702d68656170)  /* "kop-heap" */
#define TAG_ARENA UINT64_C(0x6b6f702d6172656e) /* "kop-aren" */

struct block_header {
    uint64_t tag;
    uint64_t size;
};

_Static_assert(sizeof(struct block_header) == ARENA_ALIGN, "header keeps 16-byte alignment");

static _Thread_local struct kop_arena *tl_arena;

static void *json_alloc_hook(size_t size)
{
    struct kop_arena *a = tl_arena;
    struct block_header *h;

    if (size > SIZE_MAX - sizeof(*h) - ARENA_ALIGN)
        return NULL;
    if (a != NULL) {
        h = kop_arena_alloc(a, size + sizeof(*h));
        if (h == NULL)
            return NULL;
        h->tag = TAG_ARENA;
    } else {
        h = malloc(size + sizeof(*h));
        if (h == NULL)
            return NULL;
        h->tag = TAG_HEAP;
    }
    h->size = size;
    return h + 1;
}

static void json_free_hook(void *ptr)
{
    struct block_header *h;

    if (ptr == NULL)
        return;
    h = (struct block_header *)ptr - 1;
    if (h->tag == TAG_HEAP) {
        free(h);
    }
    /* TAG_ARENA: released with the arena. Anything else is a block jansson
     * got before the hook was installed, which kop never frees through it:
     * leaking it beats freeing a wrong pointer. */
}

void kop_arena_json_install(void)
{
    json_set_alloc_funcs(json_alloc_hook, json_free_hook);
}

struct kop_arena *kop_arena_json_bind(struct kop_arena *a)
{
    struct kop_arena *prev = tl_arena;

    tl_arena = a;
    return prev;
}
