/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Listen and dial addresses: splitting "host:port" as written on a
 * command line, and resolving a host to the one socket address a server
 * binds (or a client dials). One rule everywhere: of the addresses a name
 * resolves to, the first IPv4 one, else the first one; "localhost" then
 * means 127.0.0.1 on every host, whatever the resolver's order.
 *
 * Thread-safety: any thread (getaddrinfo is thread-safe).
 */
#ifndef KOP_NETADDR_H
#define KOP_NETADDR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Longest host name accepted, '\0' included. */
#define KOP_NETADDR_HOST_MAX 256

/* The reason kop_netaddr_split gives for a string that is no address at
 * all; a caller may compare with it to give its own examples. */
extern const char *const kop_netaddr_not_an_address;

/*
 * Split "host:port", "[v6addr]:port" or ":port" (every address). The port
 * is 0..65535 (0: the kernel picks); an IPv6 address needs its brackets.
 * ret_host (host_size bytes) gets the host without brackets, "" for every
 * address. Returns 0 or -EINVAL; *ret_why (may be NULL) then says why in
 * words for the user (a static string). ret_host and ret_port are written
 * only on success.
 */
int kop_netaddr_split(const char *s, char *ret_host, size_t host_size, int *ret_port,
                      const char **ret_why);

/* kop_netaddr_resolve flags: the address is to be bound (AI_PASSIVE). */
#define KOP_NETADDR_PASSIVE 0x1u

/*
 * Resolve a host name or address literal ("[::1]" with brackets too) and
 * port to one stream socket address, preferring IPv4 (see above). host
 * must be non-empty: binding every address is the caller's choice of
 * socket. Returns 0, or -EINVAL (empty, too long, or not resolvable).
 */
int kop_netaddr_resolve(const char *host, uint16_t port, unsigned flags,
                        struct sockaddr_storage *ret, socklen_t *ret_len);

#endif /* KOP_NETADDR_H */
