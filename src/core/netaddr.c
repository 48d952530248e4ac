/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Address splitting and resolution of kop/netaddr.h. The split follows
 * Go's net.SplitHostPort as controller-runtime's --metrics-bind-address
 * and --health-probe-bind-address use it (":8080", "[::1]:8080"), with the
 * port checked here rather than at listen time.
 */
#include "kop/netaddr.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const kop_netaddr_not_an_address =
    "not an address (examples: :8080, 127.0.0.1:8080, [::1]:8080)";

static int port_number(const char *s, int *ret)
{
    char *end;
    long v;

    /* Digits only: no sign, no blanks, no base prefix. */
    if (!isdigit((unsigned char)s[0]))
        return -EINVAL;
    errno = 0;
    v = strtol(s, &end, 10);
    if (*end != '\0' || errno == ERANGE || v > 65535)
        return -EINVAL;
    *ret = (int)v;
    return 0;
}

int kop_netaddr_split(const char *s, char *ret_host, size_t host_size, int *ret_port,
                      const char **ret_why)
{
    const char *why = kop_netaddr_not_an_address;
    const char *colon, *host = s;
    size_t host_len;
    int port, r = -EINVAL;

    if (s == NULL || ret_host == NULL || host_size == 0 || ret_port == NULL)
        goto out;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');

        if (close == NULL || close[1] != ':')
            goto out;
        host = s + 1;
        host_len = (size_t)(close - host);
        colon = close + 1;
        if (host_len == 0)
            goto out;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL)
            goto out;
        host_len = (size_t)(colon - s);
        if (memchr(s, ':', host_len) != NULL) {
            why = "an IPv6 address needs brackets, as in [::1]:8080";
            goto out;
        }
    }
    if (host_len >= host_size) {
        why = "host name too long";
        goto out;
    }
    for (size_t i = 0; i < host_len; i++) {
        unsigned char c = (unsigned char)host[i];

        if (c <= ' ' || c == '/' || c == '[' || c == ']' || c >= 0x7f)
            goto out;
    }
    if (!isdigit((unsigned char)colon[1])) {
        why = "missing port number";
        goto out;
    }
    if (port_number(colon + 1, &port) != 0) {
        why = "port must be a number from 0 to 65535";
        goto out;
    }
    memcpy(ret_host, host, host_len);
    ret_host[host_len] = '\0';
    *ret_port = port;
    r = 0;
out:
    if (r < 0 && ret_why != NULL)
        *ret_why = why;
    return r;
}

int kop_netaddr_resolve(const char *host, uint16_t port, unsigned flags,
                        struct sockaddr_storage *ret, socklen_t *ret_len)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL, *pick;
    char h[KOP_NETADDR_HOST_MAX], pstr[8];
    size_t hl;

    assert(host);
    assert(ret);
    assert(ret_len);
    hl = strlen(host);
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        host++; /* "[::1]" as written in bind addresses */
        hl -= 2;
    }
    if (hl == 0 || hl >= sizeof(h))
        return -EINVAL;
    memcpy(h, host, hl);
    h[hl] = '\0';
    if (flags & KOP_NETADDR_PASSIVE)
        hints.ai_flags = AI_PASSIVE;
    snprintf(pstr, sizeof(pstr), "%u", (unsigned)port);
    if (getaddrinfo(h, pstr, &hints, &res) != 0 || res == NULL)
        return -EINVAL;
    pick = res;
    for (struct addrinfo *a = res; a != NULL; a = a->ai_next) {
        if (a->ai_family == AF_INET) {
            pick = a;
            break;
        }
    }
    memset(ret, 0, sizeof(*ret));
    memcpy(ret, pick->ai_addr, pick->ai_addrlen);
    *ret_len = pick->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}
