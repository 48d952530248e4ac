/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The growable buffer of kop/dynbuf.h. The allocation starts at
 * FIRST_ALLOC bytes (or at the size of a first reserve) and doubles, never
 * past the cap plus one byte for the '\0', so a capped buffer never holds
 * more than its owner allowed. Every sum is checked before it is made.
 */
#include "kop/dynbuf.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIRST_ALLOC 256

void kop_dynbuf_init(struct kop_dynbuf *b, size_t max)
{
    b->_data = NULL;
    b->_len = 0;
    b->_cap = 0;
    b->_max = max > KOP_DYNBUF_NO_LIMIT ? KOP_DYNBUF_NO_LIMIT : max;
    b->_err = 0;
}

void kop_dynbuf_free(struct kop_dynbuf *b)
{
    if (b == NULL)
        return;
    free(b->_data);
    b->_data = NULL;
    b->_len = 0;
    b->_cap = 0;
    b->_err = 0;
}

void kop_dynbuf_reset(struct kop_dynbuf *b)
{
    if (b->_data != NULL)
        b->_data[0] = '\0';
    b->_len = 0;
    b->_err = 0;
}

static int fail(struct kop_dynbuf *b, int err)
{
    if (b->_err == 0)
        b->_err = err;
    return err;
}

/* Room for n more bytes and the '\0'. exact: a buffer that holds no
 * memory allocates just that; otherwise the allocation starts at
 * FIRST_ALLOC, and growth doubles. Never past the cap plus the '\0'. */
static int grow(struct kop_dynbuf *b, size_t n, bool exact)
{
    size_t need, cap;
    char *p;

    /* _len <= _max < SIZE_MAX, so the subtraction and the +1 are safe. */
    if (n > b->_max - b->_len)
        return fail(b, -E2BIG);
    need = b->_len + n + 1;
    if (need <= b->_cap)
        return 0;
    if (b->_cap == 0 && exact) {
        cap = need;
    } else {
        cap = b->_cap ? b->_cap : FIRST_ALLOC;
        while (cap < need)
            cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    }
    if (cap > b->_max + 1)
        cap = b->_max + 1;
    p = realloc(b->_data, cap);
    if (p == NULL)
        return fail(b, -ENOMEM);
    b->_data = p;
    b->_cap = cap;
    b->_data[b->_len] = '\0';
    return 0;
}

int kop_dynbuf_reserve(struct kop_dynbuf *b, size_t n)
{
    return grow(b, n, true);
}

int kop_dynbuf_add(struct kop_dynbuf *b, const void *p, size_t n)
{
    int r = grow(b, n, false);

    if (r < 0)
        return r;
    if (n > 0)
        memcpy(b->_data + b->_len, p, n);
    b->_len += n;
    b->_data[b->_len] = '\0';
    return 0;
}

int kop_dynbuf_adds(struct kop_dynbuf *b, const char *s)
{
    return kop_dynbuf_add(b, s, strlen(s));
}

int kop_dynbuf_vprintf(struct kop_dynbuf *b, const char *fmt, va_list ap)
{
    char small[256];
    va_list again;
    int n, r;

    /* Format once into a stack buffer; only a longer result is formatted a
     * second time, straight into the reserved room. */
    va_copy(again, ap);
    n = vsnprintf(small, sizeof(small), fmt, ap);
    if (n < 0) {
        r = fail(b, -EINVAL);
        goto out;
    }
    if ((size_t)n < sizeof(small)) {
        r = kop_dynbuf_add(b, small, (size_t)n);
        goto out;
    }
    r = grow(b, (size_t)n, false);
    if (r < 0)
        goto out;
    if (vsnprintf(b->_data + b->_len, (size_t)n + 1, fmt, again) != n) {
        b->_data[b->_len] = '\0';
        r = fail(b, -EINVAL);
        goto out;
    }
    b->_len += (size_t)n;
    r = 0;
out:
    va_end(again);
    return r;
}

int kop_dynbuf_printf(struct kop_dynbuf *b, const char *fmt, ...)
{
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = kop_dynbuf_vprintf(b, fmt, ap);
    va_end(ap);
    return r;
}

int kop_dynbuf_take(struct kop_dynbuf *b, char **ret, size_t *ret_len)
{
    char *p = b->_data;
    size_t len = b->_len;

    if (p == NULL) {
        p = malloc(1);
        if (p == NULL)
            return -ENOMEM;
        p[0] = '\0';
    }
    b->_data = NULL;
    b->_len = 0;
    b->_cap = 0;
    b->_err = 0;
    *ret = p;
    if (ret_len != NULL)
        *ret_len = len;
    return 0;
}

const char *kop_dynbuf_ptr(const struct kop_dynbuf *b)
{
    return b->_data ? b->_data : "";
}

size_t kop_dynbuf_len(const struct kop_dynbuf *b)
{
    return b->_len;
}

size_t kop_dynbuf_capacity(const struct kop_dynbuf *b)
{
    return b->_cap;
}

int kop_dynbuf_error(const struct kop_dynbuf *b)
{
    return b->_err;
}
