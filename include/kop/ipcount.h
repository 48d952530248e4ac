/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Connections counted per client address, and the rule that says which
 * address gives up a slot when a server is full. The TLS front (webhook
 * port) and the plain HTTP servers (metrics, probes) both keep one table
 * and apply the same rule: at max_connections, a newcomer may take the
 * slot of a connection of the address that holds the most, when that
 * address holds at least two more than the newcomer's (so it ends with no
 * fewer than the newcomer). A few addresses holding idle keep-alive
 * connections then cannot keep every other client out until their idle
 * timeout, and no address takes a slot from one that holds fewer. Which of
 * that address's connections goes is the server's choice (one that does no
 * work).
 *
 * An IPv4-mapped IPv6 address (a dual-stack listener) counts as the IPv4
 * address it carries.
 *
 * Thread-safety: one thread at a time (the caller's lock or loop).
 */
#ifndef KOP_IPCOUNT_H
#define KOP_IPCOUNT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#define KOP_IPCOUNT_BUCKETS 256

/* One address's entry. A caller that keeps more per address embeds it
 * first in its own struct and gives that struct's size to init. */
struct kop_ipcount_entry {
    struct kop_ipcount_entry *_next;
    int _family; /* AF_INET, AF_INET6, AF_UNSPEC for any other */
    unsigned char _addr[16];
    unsigned count; /* connections open from the address: the caller's to change */
};

struct kop_ipcount {
    size_t _entry_size;
    struct kop_ipcount_entry *_buckets[KOP_IPCOUNT_BUCKETS];
};

/* An empty table whose entries are entry_size bytes (at least
 * sizeof(struct kop_ipcount_entry); 0 = that). */
void kop_ipcount_init(struct kop_ipcount *t, size_t entry_size);

/* Free every entry. */
void kop_ipcount_cleanup(struct kop_ipcount *t);

/* The entry of sa's address, NULL when there is none. */
struct kop_ipcount_entry *kop_ipcount_find(const struct kop_ipcount *t, const struct sockaddr *sa);

/* A new entry for sa's address (there must be none yet), zeroed beyond the
 * key (count 0). Returns 0 or -ENOMEM. */
int kop_ipcount_add(struct kop_ipcount *t, const struct sockaddr *sa,
                    struct kop_ipcount_entry **ret);

/* Unlink and free e. */
void kop_ipcount_remove(struct kop_ipcount *t, struct kop_ipcount_entry *e);

/* Call drop on every entry; those it returns true for are freed. */
void kop_ipcount_sweep(struct kop_ipcount *t, bool (*drop)(void *ctx, struct kop_ipcount_entry *e),
                       void *ctx);

/*
 * The eviction rule: the address whose connection a newcomer of mine's
 * address (NULL: an address with none) may take at max_connections, the
 * newcomer not yet counted. That is the address holding the most, when it
 * is not mine and holds at least two more than mine; else NULL (the
 * newcomer is refused). Among addresses holding the same, any one.
 */
struct kop_ipcount_entry *kop_ipcount_evict_from(const struct kop_ipcount *t,
                                                 const struct kop_ipcount_entry *mine);

#endif /* KOP_IPCOUNT_H */
