/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Watch-stream parser: turns the body of a Kubernetes watch response (one
 * JSON event per line, delivered in arbitrary pieces) into events.
 *
 * Lines may be split across reads and may be very long (the limit is set
 * per parser, default 64 MiB); CRLF line ends are accepted and blank lines
 * skipped. A line that is not a {"type": ..., "object": {...}} event with a
 * known type is an error (-EBADMSG) that the caller answers by
 * reconnecting; the parser never aborts on input.
 *
 * Thread-safety: a parser belongs to one thread.
 */
#ifndef KOP_WATCH_H
#define KOP_WATCH_H

#include <stddef.h>

#include <jansson.h>

enum kop_watch_type {
    KOP_WATCH_ADDED,
    KOP_WATCH_MODIFIED,
    KOP_WATCH_DELETED,
    KOP_WATCH_BOOKMARK,
    KOP_WATCH_ERROR,
};

struct kop_watch_event {
    enum kop_watch_type type;
    json_t *object; /* @ref borrow: valid during the callback only */
    /* metadata.resourceVersion of the object, NULL when absent. */
    const char *resource_version;
    /* ERROR events: the Status fields (code 0 / NULL when absent). */
    int code;
    const char *reason;
    const char *message;
    json_t *_root; /* the decoded line; owned by the parser */
};

/* Return 0 to go on; a negative errno stops kop_watch_parser_feed, which
 * returns it. */
typedef int (*kop_watch_event_fn)(void *ud, const struct kop_watch_event *ev);

struct kop_watch_parser;

/* max_line: longest accepted line in bytes (0: 64 MiB). NULL on ENOMEM. */
struct kop_watch_parser *kop_watch_parser_new(size_t max_line);

/* NULL-safe. */
void kop_watch_parser_free(struct kop_watch_parser *p);

/* The longest path kop_watch_parser_drop takes. */
#define KOP_WATCH_MAX_DROP 6

/*
 * Leave one member of every event's object undecoded: drop is a
 * NULL-terminated key path from the object ({"metadata", "managedFields",
 * NULL}), its strings kept alive by the caller as long as the parser; NULL
 * or empty: decode everything (the default). The member's bytes are still
 * validated. Returns 0, or -EINVAL for a path of more than
 * KOP_WATCH_MAX_DROP keys.
 */
int kop_watch_parser_drop(struct kop_watch_parser *p, const char *const *drop);

/* Forget buffered input (for reuse on a new connection). */
void kop_watch_parser_reset(struct kop_watch_parser *p);

/*
 * Feed the next piece of the body; cb runs once per complete event, in
 * order. Returns 0, -EBADMSG (a line that is not a valid event; the
 * parser is then reset), -EMSGSIZE (a line longer than max_line), -ENOMEM,
 * or the callback's negative return. After an error the stream should be
 * abandoned.
 */
int kop_watch_parser_feed(struct kop_watch_parser *p, const char *data, size_t len,
                          kop_watch_event_fn cb, void *ud);

/*
 * End of body: a final line without '\n' is decoded when it is complete
 * JSON. Returns 0, -EBADMSG for a truncated or invalid last line, or the
 * callback's return.
 */
int kop_watch_parser_finish(struct kop_watch_parser *p, kop_watch_event_fn cb, void *ud);

/* Bytes currently buffered (an incomplete line). */
size_t kop_watch_parser_pending(const struct kop_watch_parser *p);

/*
 * Decode one line (without its '\n'), every member included, with the
 * strictness of jansson's JSON_REJECT_DUPLICATES (a duplicate key is
 * -EBADMSG: the apiserver never sends one). On success *ret_ev holds the event
 * and owns ret_ev->_root: release it with kop_watch_event_clear().
 * Returns 0, -EBADMSG or -ENOMEM.
 */
int kop_watch_event_decode(const char *line, size_t len, struct kop_watch_event *ret_ev);

/* NULL-safe. */
void kop_watch_event_clear(struct kop_watch_event *ev);

/* "ADDED", ... ; "?" for an unknown value. */
const char *kop_watch_type_name(enum kop_watch_type t);

#endif /* KOP_WATCH_H */
