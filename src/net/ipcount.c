// SPDX-License-Identifier: Apache-2.0
/*
 * Connections per client address and the eviction rule of a full server,
 * shared by the TLS front and the plain HTTP servers. See kop/ipcount.h.
 */
#include "kop/ipcount.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

/* The address as a key: family and 16 bytes (an IPv4 address in the
 * first 4, the rest zero); a v4-mapped IPv6 address is its IPv4 one. */
static void addr_key(const struct sockaddr *sa, int *family, unsigned char key[16])
{
    memset(key, 0, 16);
    *family = AF_UNSPEC;
    if (sa && sa->sa_family == AF_INET) {
        *family = AF_INET;
        memcpy(key, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
    } else if (sa && sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) {
            *family = AF_INET;
            memcpy(key, &a->s6_addr[12], 4);
        } else {
            *family = AF_INET6;
            memcpy(key, a, 16);
        }
    }
}

static unsigned addr_hash(int family, const unsigned char *a)
{
    size_t n = family == AF_INET ? 4 : 16;
    unsigned h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ a[i]) * 16777619u;
    return h % KOP_IPCOUNT_BUCKETS;
}

void kop_ipcount_init(struct kop_ipcount *t, size_t entry_size)
{
    memset(t, 0, sizeof(*t));
    t->_entry_size = entry_size > sizeof(struct kop_ipcount_entry)
                         ? entry_size
                         : sizeof(struct kop_ipcount_entry);
}

void kop_ipcount_cleanup(struct kop_ipcount *t)
{
    for (size_t i = 0; i < KOP_IPCOUNT_BUCKETS; i++) {
        while (t->_buckets[i]) {
            struct kop_ipcount_entry *e = t->_buckets[i];
            t->_buckets[i] = e->_next;
            free(e);
        }
    }
}

struct kop_ipcount_entry *kop_ipcount_find(const struct kop_ipcount *t, const struct sockaddr *sa)
{
    int fam;
    unsigned char key[16];
    addr_key(sa, &fam, key);
    for (struct kop_ipcount_entry *e = t->_buckets[addr_hash(fam, key)]; e; e = e->_next) {
        if (e->_family == fam && memcmp(e->_addr, key, 16) == 0)
            return e;
    }
    return NULL;
}

int kop_ipcount_add(struct kop_ipcount *t, const struct sockaddr *sa,
                    struct kop_ipcount_entry **ret)
{
    struct kop_ipcount_entry *e = calloc(1, t->_entry_size);
    if (!e)
        return -ENOMEM;
    addr_key(sa, &e->_family, e->_addr);
    unsigned h = addr_hash(e->_family, e->_addr);
    e->_next = t->_buckets[h];
    t->_buckets[h] = e;
    *ret = e;
    return 0;
}

void kop_ipcount_remove(struct kop_ipcount *t, struct kop_ipcount_entry *e)
{
    if (!e)
        return;
    unsigned h = addr_hash(e->_family, e->_addr);
    for (struct kop_ipcount_entry **pp = &t->_buckets[h]; *pp; pp = &(*pp)->_next) {
        if (*pp == e) {
            *pp = e->_next;
            free(e);
            return;
        }
    }
}

void kop_ipcount_sweep(struct kop_ipcount *t, bool (*drop)(void *ctx, struct kop_ipcount_entry *e),
                       void *ctx)
{
    for (size_t i = 0; i < KOP_IPCOUNT_BUCKETS; i++) {
        for (struct kop_ipcount_entry **pp = &t->_buckets[i]; *pp;) {
            struct kop_ipcount_entry *e = *pp;
            if (drop(ctx, e)) {
                *pp = e->_next;
                free(e);
                continue;
            }
            pp = &e->_next;
        }
    }
}

/* Only asked at max_connections: one pass over the buckets and the
 * entries, at most max_connections of which hold a connection. */
struct kop_ipcount_entry *kop_ipcount_evict_from(const struct kop_ipcount *t,
                                                 const struct kop_ipcount_entry *mine)
{
    unsigned have = mine ? mine->count : 0;
    struct kop_ipcount_entry *top = NULL;
    for (size_t i = 0; i < KOP_IPCOUNT_BUCKETS; i++) {
        for (struct kop_ipcount_entry *e = t->_buckets[i]; e; e = e->_next) {
            if (!top || e->count > top->count)
                top = e;
        }
    }
    if (!top || top == mine || top->count < have + 2)
        return NULL;
    return top;
}
