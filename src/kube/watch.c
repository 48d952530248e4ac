/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Incremental line splitter and event decoder for watch bodies (see
 * kop/watch.h).
 *
 * Complete lines are decoded straight from the caller's buffer; only an
 * incomplete tail is copied into the parser's buffer, so a read holding
 * many small events costs no copying, and a 16 MiB event arriving in 16 KiB
 * pieces is appended piece by piece, scanning each new piece for '\n'
 * once (no quadratic rescans).
 */
#include "kop/watch.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kop/dynbuf.h"
#include "kop/jscan.h"

#define DEFAULT_MAX_LINE ((size_t)64 << 20)

struct kop_watch_parser {
    struct kop_dynbuf buf; /* an incomplete line, capped at max_line */
    size_t max_line;
    struct kop_jscan *scan; /* validates each line before it is decoded */
    /* "object", then the caller's path of the member left out, NULL;
     * drop[1] == NULL: nothing left out */
    const char *drop[KOP_WATCH_MAX_DROP + 2];
};

const char *kop_watch_type_name(enum kop_watch_type t)
{
    switch (t) {
    case KOP_WATCH_ADDED:
        return "ADDED";
    case KOP_WATCH_MODIFIED:
        return "MODIFIED";
    case KOP_WATCH_DELETED:
        return "DELETED";
    case KOP_WATCH_BOOKMARK:
        return "BOOKMARK";
    case KOP_WATCH_ERROR:
        return "ERROR";
    }
    return "?";
}

struct kop_watch_parser *kop_watch_parser_new(size_t max_line)
{
    struct kop_watch_parser *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->scan = kop_jscan_new();
    if (!p->scan) {
        free(p);
        return NULL;
    }
    p->max_line = max_line ? max_line : DEFAULT_MAX_LINE;
    kop_dynbuf_init(&p->buf, p->max_line);
    p->drop[0] = "object";
    return p;
}

int kop_watch_parser_drop(struct kop_watch_parser *p, const char *const *drop)
{
    size_t n = 0;
    assert(p);
    while (drop && drop[n])
        n++;
    if (n > KOP_WATCH_MAX_DROP)
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        p->drop[1 + i] = drop[i];
    p->drop[1 + n] = NULL;
    return 0;
}

void kop_watch_parser_free(struct kop_watch_parser *p)
{
    if (!p)
        return;
    kop_dynbuf_free(&p->buf);
    kop_jscan_free(p->scan);
    free(p);
}

void kop_watch_parser_reset(struct kop_watch_parser *p)
{
    assert(p);
    kop_dynbuf_reset(&p->buf);
    /* Do not keep a huge buffer around after one big event. */
    if (kop_dynbuf_capacity(&p->buf) > ((size_t)1 << 20))
        kop_dynbuf_free(&p->buf);
}

size_t kop_watch_parser_pending(const struct kop_watch_parser *p)
{
    assert(p);
    return kop_dynbuf_len(&p->buf);
}

void kop_watch_event_clear(struct kop_watch_event *ev)
{
    if (!ev)
        return;
    json_decref(ev->_root);
    memset(ev, 0, sizeof(*ev));
}

static bool parse_type(const char *s, enum kop_watch_type *t)
{
    static const struct {
        const char *name;
        enum kop_watch_type type;
    } types[] = {
        {"ADDED", KOP_WATCH_ADDED},     {"MODIFIED", KOP_WATCH_MODIFIED},
        {"DELETED", KOP_WATCH_DELETED}, {"BOOKMARK", KOP_WATCH_BOOKMARK},
        {"ERROR", KOP_WATCH_ERROR},
    };
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (strcmp(s, types[i].name) == 0) {
            *t = types[i].type;
            return true;
        }
    return false;
}

/*
 * Validate the line with scan (as strict as jansson with
 * JSON_REJECT_DUPLICATES), then decode it, leaving out the member drop
 * names (NULL: none): its bytes are never turned into a tree.
 */
static int decode_event(struct kop_jscan *scan, const char *const *drop, const char *line,
                        size_t len, struct kop_watch_event *ret_ev)
{
    int r = kop_jscan_value(scan, line, len, 0, 0);
    if (r < 0)
        return r == -ENOMEM ? r : -EBADMSG;
    json_t *root =
        drop && drop[1] ? kop_jscan_decode_without(line, len, drop) : kop_jscan_decode(line, len);
    if (!root)
        return -ENOMEM;
    struct kop_watch_event ev = {0};
    const char *type = json_string_value(json_object_get(root, "type"));
    json_t *obj = json_object_get(root, "object");
    if (!type || !json_is_object(obj) || !parse_type(type, &ev.type)) {
        json_decref(root);
        return -EBADMSG;
    }
    ev.object = obj;
    ev._root = root;
    ev.resource_version =
        json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    if (ev.type == KOP_WATCH_ERROR) {
        json_t *code = json_object_get(obj, "code");
        if (json_is_integer(code) && json_integer_value(code) > 0 &&
            json_integer_value(code) < 1000)
            ev.code = (int)json_integer_value(code);
        ev.reason = json_string_value(json_object_get(obj, "reason"));
        ev.message = json_string_value(json_object_get(obj, "message"));
    }
    *ret_ev = ev;
    return 0;
}

int kop_watch_event_decode(const char *line, size_t len, struct kop_watch_event *ret_ev)
{
    struct kop_jscan *scan = kop_jscan_new();
    if (!scan)
        return -ENOMEM;
    int r = decode_event(scan, NULL, line, len, ret_ev);
    kop_jscan_free(scan);
    return r;
}

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return false;
    return true;
}

/* One complete line without its '\n'. */
static int handle_line(struct kop_watch_parser *p, const char *line, size_t n,
                       kop_watch_event_fn cb, void *ud)
{
    if (n > 0 && line[n - 1] == '\r')
        n--;
    if (blank(line, n))
        return 0;
    struct kop_watch_event ev;
    int r = decode_event(p->scan, p->drop, line, n, &ev);
    if (r < 0)
        return r;
    r = cb ? cb(ud, &ev) : 0;
    kop_watch_event_clear(&ev);
    return r;
}

static int append(struct kop_watch_parser *p, const char *data, size_t n)
{
    int r = kop_dynbuf_add(&p->buf, data, n);
    return r == -E2BIG ? -EMSGSIZE : r;
}

/* Decode the buffered line, then empty the buffer (keeping its memory).
 * The handlers cannot reach the parser, so emptying it after the decode
 * rather than before changes nothing they see. */
static int handle_buffered(struct kop_watch_parser *p, kop_watch_event_fn cb, void *ud)
{
    int r = handle_line(p, kop_dynbuf_ptr(&p->buf), kop_dynbuf_len(&p->buf), cb, ud);
    kop_dynbuf_reset(&p->buf);
    return r;
}

int kop_watch_parser_feed(struct kop_watch_parser *p, const char *data, size_t len,
                          kop_watch_event_fn cb, void *ud)
{
    assert(p);
    assert(data || !len);
    int r = 0;
    const char *end = data + len;
    while (data < end) {
        const char *nl = memchr(data, '\n', (size_t)(end - data));
        if (!nl) {
            r = append(p, data, (size_t)(end - data));
            goto out;
        }
        size_t n = (size_t)(nl - data);
        if (kop_dynbuf_len(&p->buf)) {
            /* Finish the buffered line with this piece. */
            r = append(p, data, n);
            if (r < 0)
                goto out;
            r = handle_buffered(p, cb, ud);
        } else if (n > p->max_line) {
            r = -EMSGSIZE;
        } else {
            r = handle_line(p, data, n, cb, ud);
        }
        if (r < 0)
            goto out;
        data = nl + 1;
    }
out:
    if (r < 0)
        kop_watch_parser_reset(p);
    return r;
}

int kop_watch_parser_finish(struct kop_watch_parser *p, kop_watch_event_fn cb, void *ud)
{
    assert(p);
    if (!kop_dynbuf_len(&p->buf))
        return 0;
    int r = handle_buffered(p, cb, ud);
    kop_watch_parser_reset(p);
    return r;
}
