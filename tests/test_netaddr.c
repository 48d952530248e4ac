/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for kop/netaddr.h: host:port splitting as the bind flags take it
 * (":port", "[v6]:port", port 0 and 65535, the refusals and their
 * reasons), and resolution with the IPv4 preference.
 */
#include "kop/netaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "testutil.h"

START_TEST(test_netaddr_split)
{
    char host[KOP_NETADDR_HOST_MAX];
    int port = -1;
    const char *why = NULL;

    ck_assert_int_eq(kop_netaddr_split(":8080", host, sizeof(host), &port, &why), 0);
    ck_assert_str_eq(host, "");
    ck_assert_int_eq(port, 8080);
    ck_assert_int_eq(kop_netaddr_split("localhost:0", host, sizeof(host), &port, NULL), 0);
    ck_assert_str_eq(host, "localhost");
    ck_assert_int_eq(port, 0);
    ck_assert_int_eq(kop_netaddr_split("[::1]:65535", host, sizeof(host), &port, NULL), 0);
    ck_assert_str_eq(host, "::1");
    ck_assert_int_eq(port, 65535);
    ck_assert_int_eq(kop_netaddr_split("10.0.0.1:443", host, sizeof(host), &port, NULL), 0);
    ck_assert_str_eq(host, "10.0.0.1");

    static const char *const bad[] = {
        "8080",
        "::1:80",
        "[::1]80",
        "[]:80",
        "[::1:80",
        "a b:80",
        "h:",
        "h:x",
        "h:-1",
        "h:+1",
        "h:65536",
        "h:1 ",
        "h:99999999999999999999",
        "a/b:1",
        "",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why = NULL;
        port = 7;
        ck_assert_msg(kop_netaddr_split(bad[i], host, sizeof(host), &port, &why) == -EINVAL,
                      "accepted %s", bad[i]);
        ck_assert_ptr_nonnull(why);
        ck_assert_int_eq(port, 7);
    }
    kop_netaddr_split("8080", host, sizeof(host), &port, &why);
    ck_assert_ptr_eq(why, kop_netaddr_not_an_address);
    kop_netaddr_split("::1:80", host, sizeof(host), &port, &why);
    ck_assert_ptr_nonnull(strstr(why, "brackets"));
    kop_netaddr_split("h:70000", host, sizeof(host), &port, &why);
    ck_assert_ptr_nonnull(strstr(why, "65535"));
    kop_netaddr_split("h:", host, sizeof(host), &port, &why);
    ck_assert_str_eq(why, "missing port number");
    /* The host must fit the caller's buffer. */
    char small[4];
    ck_assert_int_eq(kop_netaddr_split("abcd:1", small, sizeof(small), &port, &why), -EINVAL);
    ck_assert_str_eq(why, "host name too long");
    ck_assert_int_eq(kop_netaddr_split("abc:1", small, sizeof(small), &port, &why), 0);
}
END_TEST

START_TEST(test_netaddr_resolve)
{
    struct sockaddr_storage ss;
    socklen_t len = 0;
    char txt[INET6_ADDRSTRLEN];

    ck_assert_int_eq(kop_netaddr_resolve("127.0.0.1", 8443, KOP_NETADDR_PASSIVE, &ss, &len), 0);
    ck_assert_int_eq(ss.ss_family, AF_INET);
    ck_assert_uint_eq(len, sizeof(struct sockaddr_in));
    ck_assert_uint_eq(ntohs(((struct sockaddr_in *)(void *)&ss)->sin_port), 8443);

    ck_assert_int_eq(kop_netaddr_resolve("[::1]", 0, KOP_NETADDR_PASSIVE, &ss, &len), 0);
    ck_assert_int_eq(ss.ss_family, AF_INET6);
    ck_assert_uint_eq(len, sizeof(struct sockaddr_in6));
    inet_ntop(AF_INET6, &((struct sockaddr_in6 *)(void *)&ss)->sin6_addr, txt, sizeof(txt));
    ck_assert_str_eq(txt, "::1");
    ck_assert_int_eq(kop_netaddr_resolve("::1", 1, 0, &ss, &len), 0);
    ck_assert_int_eq(ss.ss_family, AF_INET6);

    /* "localhost" may resolve to ::1 and 127.0.0.1 in either order: the
     * IPv4 address wins. */
    ck_assert_int_eq(kop_netaddr_resolve("localhost", 80, 0, &ss, &len), 0);
    ck_assert_int_eq(ss.ss_family, AF_INET);
    inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)&ss)->sin_addr, txt, sizeof(txt));
    ck_assert_str_eq(txt, "127.0.0.1");

    ck_assert_int_eq(kop_netaddr_resolve("", 80, 0, &ss, &len), -EINVAL);
    ck_assert_int_eq(kop_netaddr_resolve("[]", 80, 0, &ss, &len), -EINVAL);
    ck_assert_int_eq(kop_netaddr_resolve("no such host.invalid", 80, 0, &ss, &len), -EINVAL);
    char longname[300];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    ck_assert_int_eq(kop_netaddr_resolve(longname, 80, 0, &ss, &len), -EINVAL);
}
END_TEST

static Suite *netaddr_suite(void)
{
    Suite *s = suite_create("netaddr");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_netaddr_split);
    tcase_add_test(tc, test_netaddr_resolve);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(netaddr_suite());
}
