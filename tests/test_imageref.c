/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of image references: the lossless split of conversion (fixed
 * cases and a join(split(s)) == s property over random strings) and the
 * strict checks and registry rules of admission.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kop/imageref.h"
#include "testutil.h"

#define SHA "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void split_is(const char *s, const char *name, const char *tag, const char *digest)
{
    struct kop_imageref r;
    kop_imageref_split(s, strlen(s), &r);
    ck_assert_msg(r.name_len == strlen(name) && memcmp(r.name, name, r.name_len) == 0,
                  "%s: name %.*s", s, (int)r.name_len, r.name);
    if (tag)
        ck_assert_msg(r.tag && r.tag_len == strlen(tag) && memcmp(r.tag, tag, r.tag_len) == 0,
                      "%s: tag", s);
    else
        ck_assert_msg(r.tag == NULL, "%s: unexpected tag", s);
    if (digest)
        ck_assert_msg(r.digest && r.digest_len == strlen(digest) &&
                          memcmp(r.digest, digest, r.digest_len) == 0,
                      "%s: digest", s);
    else
        ck_assert_msg(r.digest == NULL, "%s: unexpected digest", s);
}

START_TEST(test_imageref_split_cases)
{
    split_is("nginx", "nginx", NULL, NULL);
    split_is("nginx:1.14.2", "nginx", "1.14.2", NULL);
    split_is("registry.example.com:5000/team/app:v1", "registry.example.com:5000/team/app", "v1",
             NULL);
    split_is("localhost:5000/app", "localhost:5000/app", NULL, NULL);
    split_is("localhost:5000", "localhost", "5000", NULL);
    split_is("app@" SHA, "app", NULL, SHA);
    split_is("quay.io/app:1.0@" SHA, "quay.io/app", "1.0", SHA);
    split_is("Upper/Case:Tag", "Upper/Case", "Tag", NULL);
    /* not splittable: whole string is the name */
    split_is("nginx:", "nginx:", NULL, NULL);
    split_is("nginx:bad tag", "nginx:bad tag", NULL, NULL);
    split_is("app@sha256:short", "app@sha256:short", NULL, NULL);
    split_is(":tag", ":tag", NULL, NULL);
    split_is("@" SHA, "@" SHA, NULL, NULL);
    split_is("", "", NULL, NULL);
    split_is("a:b:c", "a:b", "c", NULL);
}
END_TEST

static void check_identity(const char *s, size_t len)
{
    struct kop_imageref r;
    char buf[256];
    kop_imageref_split(s, len, &r);
    size_t n = kop_imageref_join(r.name, r.name_len, r.tag, r.tag_len, r.digest, r.digest_len, buf,
                                 sizeof(buf));
    ck_assert_uint_eq(n, len);
    ck_assert_msg(memcmp(buf, s, len) == 0, "join(split(%.*s)) = %s", (int)len, s, buf);
    ck_assert_msg(
        kop_imageref_parts_roundtrip(r.name, r.name_len, r.tag, r.tag_len, r.digest, r.digest_len),
        "parts of %.*s do not round-trip", (int)len, s);
}

START_TEST(test_imageref_split_join_identity_random)
{
    static const char alphabet[] = "abcAZ09:/@._-  +";
    unsigned seed = 12345;
    char s[96];
    for (int i = 0; i < 20000; i++) {
        size_t len = (size_t)(rand_r(&seed) % 40);
        for (size_t k = 0; k < len; k++)
            s[k] = alphabet[rand_r(&seed) % (sizeof(alphabet) - 1)];
        if (rand_r(&seed) % 4 == 0 && len + 72 < sizeof(s)) {
            memcpy(s + len, "@" SHA, 72);
            len += 72;
        }
        check_identity(s, len);
    }
    check_identity("", 0);
}
END_TEST

START_TEST(test_imageref_parts_roundtrip_rejects_ambiguous)
{
    ck_assert(kop_imageref_parts_roundtrip("nginx", 5, "1.0", 3, NULL, 0));
    ck_assert(kop_imageref_parts_roundtrip("localhost:5000/app", 18, NULL, 0, NULL, 0));
    ck_assert(!kop_imageref_parts_roundtrip("nginx:1.0", 9, NULL, 0, NULL, 0));
    ck_assert(!kop_imageref_parts_roundtrip("a", 1, "b:c", 3, NULL, 0));
    ck_assert(!kop_imageref_parts_roundtrip("a", 1, "", 0, NULL, 0));
    ck_assert(!kop_imageref_parts_roundtrip("", 0, NULL, 0, SHA, strlen(SHA)));
    ck_assert(kop_imageref_parts_roundtrip("", 0, NULL, 0, NULL, 0));
    ck_assert(kop_imageref_parts_roundtrip("a", 1, NULL, 0, SHA, strlen(SHA)));
    ck_assert(!kop_imageref_parts_roundtrip("a", 1, NULL, 0, "sha256:x", 8));
}
END_TEST

static int parse(const char *s, const char **reason)
{
    struct kop_imageref r;
    return kop_imageref_parse(s, strlen(s), &r, reason);
}

START_TEST(test_imageref_parse_strict)
{
    const char *reason = NULL;
    ck_assert_int_eq(parse("nginx", &reason), 0);
    ck_assert_int_eq(parse("nginx:1.14.2", &reason), 0);
    ck_assert_int_eq(parse("registry.example.com:5000/team/app:v1", &reason), 0);
    ck_assert_int_eq(parse("localhost:5000/app", &reason), 0);
    ck_assert_int_eq(parse("localhost/app", &reason), 0);
    ck_assert_int_eq(parse("app@" SHA, &reason), 0);
    ck_assert_int_eq(parse("quay.io/a/b_c__d-e--f.g:1.0@" SHA, &reason), 0);
    ck_assert_int_eq(parse("[::1]:5000/app", &reason), 0);

    ck_assert_int_eq(parse("Nginx", &reason), -EINVAL);
    ck_assert_str_eq(reason, "repository name must be lowercase");
    ck_assert_int_eq(parse("library/Nginx:1", &reason), -EINVAL);
    ck_assert_str_eq(reason, "repository name must be lowercase");
    ck_assert_int_eq(parse("", &reason), -EINVAL);
    ck_assert_int_eq(parse("nginx:", &reason), -EINVAL);
    ck_assert_int_eq(parse("nginx:bad tag", &reason), -EINVAL);
    ck_assert_int_eq(parse("app@sha256:abc", &reason), -EINVAL);
    ck_assert_ptr_nonnull(strstr(reason, "sha256"));
    ck_assert_int_eq(
        parse("app@sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
              &reason),
        -EINVAL);
    ck_assert_int_eq(parse("a..b", &reason), -EINVAL);
    ck_assert_int_eq(parse("a/", &reason), -EINVAL);
    ck_assert_int_eq(parse("-a", &reason), -EINVAL);
    ck_assert_int_eq(parse("a___b", &reason), -EINVAL);
    ck_assert_int_eq(parse("-bad-.io/app", &reason), -EINVAL);
    ck_assert_int_eq(parse("reg.io:/app", &reason), -EINVAL);
    char longname[300];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    ck_assert_int_eq(parse(longname, &reason), -EINVAL);
    ck_assert_ptr_nonnull(strstr(reason, "255"));
    char tag[200] = "a:";
    memset(tag + 2, 't', 129);
    tag[131] = '\0';
    ck_assert_int_eq(parse(tag, &reason), -EINVAL);
}
END_TEST

START_TEST(test_imageref_registry_rules)
{
    char buf[64];
    ck_assert_int_eq(kop_imageref_registry("nginx", 5, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "docker.io");
    ck_assert_int_eq(kop_imageref_registry("library/nginx", 13, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "docker.io");
    ck_assert_int_eq(kop_imageref_registry("index.docker.io/library/nginx", 29, buf, sizeof(buf)),
                     0);
    ck_assert_str_eq(buf, "docker.io");
    ck_assert_int_eq(kop_imageref_registry("localhost:5000/app", 18, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "localhost:5000");
    ck_assert_int_eq(kop_imageref_registry("Quay.IO/app", 11, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "quay.io");
    ck_assert_int_eq(kop_imageref_registry("quay.io/app", 11, buf, 4), -ENOSPC);

    char *allowed[] = {"docker.io", "ghcr.io/"};
    ck_assert(kop_imageref_registry_allowed("nginx", 5, allowed, 2));
    ck_assert(kop_imageref_registry_allowed("index.docker.io/x", 17, allowed, 2));
    ck_assert(kop_imageref_registry_allowed("GHCR.io/x/y", 11, allowed, 2));
    ck_assert(!kop_imageref_registry_allowed("quay.io/x", 9, allowed, 2));
    ck_assert(!kop_imageref_registry_allowed("localhost/x", 11, allowed, 2));
    ck_assert(kop_imageref_registry_allowed("quay.io/x", 9, allowed, 0));
    char *idx[] = {"index.docker.io"};
    ck_assert(kop_imageref_registry_allowed("nginx", 5, idx, 1));
}
END_TEST

static Suite *imageref_suite(void)
{
    Suite *s = suite_create("imageref");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_imageref_split_cases);
    tcase_add_test(tc, test_imageref_split_join_identity_random);
    tcase_add_test(tc, test_imageref_parts_roundtrip_rejects_ambiguous);
    tcase_add_test(tc, test_imageref_parse_strict);
    tcase_add_test(tc, test_imageref_registry_rules);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(imageref_suite());
}
