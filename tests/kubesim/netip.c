/* SPDX-License-Identifier: Apache-2.0 */
/*
 * IP addresses as the 1.32 apiserver's validation reads them:
 * k8s.io/utils/net ParseIPSloppy, the fork of Go 1.16's net.ParseIP that
 * still takes IPv4 octets with leading zeros (as decimal) and IPv6 groups
 * with more than four digits when the extra ones are leading zeros, which
 * inet_pton refuses. Addresses come out in net.IP's 16-byte form (an IPv4
 * address as ::ffff:a.b.c.d). Used by the Service, Endpoints,
 * EndpointSlice and NetworkPolicy checks.
 */
#include "kubesim.h"

#include <string.h>

#define BIG 0xFFFFFF /* net's "bigger than we need" */

bool ks_dtoi(const char *s, size_t len, int *ret_n, size_t *ret_used)
{
    int n = 0;
    size_t i;
    for (i = 0; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        n = n * 10 + (s[i] - '0');
        if (n >= BIG) {
            *ret_used = i;
            return false;
        }
    }
    *ret_n = n;
    *ret_used = i;
    return i > 0;
}

/* xtoi: hexadecimal digits to an integer, as ks_dtoi */
static bool xtoi(const char *s, size_t len, int *ret_n, size_t *ret_used)
{
    int n = 0;
    size_t i;
    for (i = 0; i < len; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            break;
        n = n * 16 + d;
        if (n >= BIG) {
            *ret_used = i;
            return false;
        }
    }
    *ret_n = n;
    *ret_used = i;
    return i > 0;
}

static const unsigned char v4_in_v6[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

bool ks_ip_parse_v4(const char *s, size_t len, unsigned char ip[16])
{
    unsigned char p[4];
    for (int i = 0; i < 4; i++) {
        if (len == 0)
            return false;
        if (i > 0) {
            if (s[0] != '.')
                return false;
            s++;
            len--;
        }
        int n;
        size_t c;
        if (!ks_dtoi(s, len, &n, &c) || n > 0xFF)
            return false;
        s += c;
        len -= c;
        p[i] = (unsigned char)n;
    }
    if (len != 0)
        return false;
    memcpy(ip, v4_in_v6, 12);
    memcpy(ip + 12, p, 4);
    return true;
}

bool ks_ip_parse_v6(const char *s, size_t len, unsigned char ip[16])
{
    memset(ip, 0, 16);
    int ellipsis = -1; /* where the "::" is, in bytes */
    if (len >= 2 && s[0] == ':' && s[1] == ':') {
        ellipsis = 0;
        s += 2;
        len -= 2;
        if (len == 0)
            return true;
    }
    int i = 0;
    while (i < 16) {
        int n;
        size_t c;
        if (!xtoi(s, len, &n, &c) || n > 0xFFFF)
            return false;
        if (c < len && s[c] == '.') { /* a trailing IPv4 part */
            if ((ellipsis < 0 && i != 12) || i + 4 > 16)
                return false;
            unsigned char ip4[16];
            if (!ks_ip_parse_v4(s, len, ip4))
                return false;
            memcpy(ip + i, ip4 + 12, 4);
            len = 0;
            i += 4;
            break;
        }
        ip[i] = (unsigned char)(n >> 8);
        ip[i + 1] = (unsigned char)n;
        i += 2;
        s += c;
        len -= c;
        if (len == 0)
            break;
        if (s[0] != ':' || len == 1)
            return false;
        s++;
        len--;
        if (s[0] == ':') {
            if (ellipsis >= 0)
                return false;
            ellipsis = i;
            s++;
            len--;
            if (len == 0)
                break;
        }
    }
    if (len != 0)
        return false;
    if (i < 16) {
        if (ellipsis < 0)
            return false;
        int n = 16 - i;
        for (int j = i - 1; j >= ellipsis; j--)
            ip[j + n] = ip[j];
        for (int j = ellipsis + n - 1; j >= ellipsis; j--)
            ip[j] = 0;
    } else if (ellipsis >= 0) {
        return false; /* a "::" stands for one group at least */
    }
    return true;
}

bool ks_ip_parse(const char *s, unsigned char ip[16])
{
    if (!s)
        return false;
    size_t len = strlen(s);
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '.')
            return ks_ip_parse_v4(s, len, ip);
        if (s[i] == ':')
            return ks_ip_parse_v6(s, len, ip);
    }
    return false;
}

bool ks_ip_is_v4(const unsigned char ip[16])
{
    return memcmp(ip, v4_in_v6, 12) == 0;
}
