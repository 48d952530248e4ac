/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A growable byte buffer with a size cap, the one every module uses to
 * collect bytes of unknown length (a log line, a metrics page, a response
 * body, a watch line). Modelled on curl's dynbuf (lib/dynbuf.h): the owner
 * names the largest content it accepts, appends fail with -E2BIG past it,
 * and every size computation is checked for overflow.
 *
 * The content is always followed by a '\0' that is not counted in the
 * length, so a buffer holding text can be used as a C string. A buffer
 * that never had anything appended holds no memory; kop_dynbuf_ptr() then
 * returns "" (never NULL).
 *
 * Errors: -E2BIG (the content would pass the cap), -ENOMEM. A failed
 * append leaves the buffer as it was, and the first error since init or
 * reset stays readable through kop_dynbuf_error(), so a writer that
 * appends many pieces checks once at the end.
 *
 * Thread-safety: a buffer is owned by one thread at a time.
 */
#ifndef KOP_DYNBUF_H
#define KOP_DYNBUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* A cap for buffers whose only limit is memory. */
#define KOP_DYNBUF_NO_LIMIT (SIZE_MAX - 1)

/* Opaque members; use the functions. Zero-filled is not initialised: call
 * kop_dynbuf_init. */
struct kop_dynbuf {
    char *_data;
    size_t _len;
    size_t _cap; /* bytes allocated, the '\0' included */
    size_t _max; /* the largest content accepted */
    int _err;    /* first error since init or reset */
};

/* An empty buffer that accepts at most max bytes of content (at most
 * KOP_DYNBUF_NO_LIMIT). Allocates nothing. */
void kop_dynbuf_init(struct kop_dynbuf *b, size_t max);

/* Release the memory; the buffer is empty and usable again with the same
 * cap. NULL-safe. */
void kop_dynbuf_free(struct kop_dynbuf *b);

/* Empty the buffer (content "") and clear its error, keeping the
 * memory for the next appends. */
void kop_dynbuf_reset(struct kop_dynbuf *b);

/* Make room for n more bytes of content, so that appending them does not
 * reallocate. A buffer that holds no memory allocates exactly that (a
 * size known in advance, such as a Content-Length, costs no more); growth
 * after that doubles. Returns 0, -E2BIG, -ENOMEM. */
int kop_dynbuf_reserve(struct kop_dynbuf *b, size_t n);

/* Append n bytes (p may be NULL when n is 0). Returns 0, -E2BIG, -ENOMEM. */
int kop_dynbuf_add(struct kop_dynbuf *b, const void *p, size_t n);

/* Append a C string without its '\0'. Returns 0, -E2BIG, -ENOMEM. */
int kop_dynbuf_adds(struct kop_dynbuf *b, const char *s);

/* Append formatted text. Returns 0, -E2BIG, -ENOMEM, or -EINVAL when the
 * format fails (the buffer is then unchanged). */
int kop_dynbuf_printf(struct kop_dynbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int kop_dynbuf_vprintf(struct kop_dynbuf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* Hand the content over: *ret is malloc'd, '\0'-terminated (an empty
 * buffer gives a malloc'd ""), freed with free(); *ret_len (may be NULL)
 * its length. The buffer is left empty, holding no memory. Returns 0 or
 * -ENOMEM (the buffer is then unchanged). */
int kop_dynbuf_take(struct kop_dynbuf *b, char **ret, size_t *ret_len);

/* The content, '\0'-terminated; valid until the next append, take or
 * free. */
const char *kop_dynbuf_ptr(const struct kop_dynbuf *b);

/* Content length in bytes. */
size_t kop_dynbuf_len(const struct kop_dynbuf *b);

/* Bytes allocated (the '\0' included); 0 when the buffer holds no
 * memory. */
size_t kop_dynbuf_capacity(const struct kop_dynbuf *b);

/* The first error of an append, reserve or printf since init or reset,
 * 0 when none. */
int kop_dynbuf_error(const struct kop_dynbuf *b);

#endif /* KOP_DYNBUF_H */
