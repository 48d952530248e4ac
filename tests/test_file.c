/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for kop/file.h: whole files up to the bound and -EFBIG one byte
 * past it (also for files whose size stat does not tell, /proc), errno
 * values as they come, secret reads, and prefix reads into a caller's
 * buffer.
 */
#include "kop/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static char *write_tmp(const char *dir, const char *name, const char *data, size_t n)
{
    size_t len = strlen(dir) + strlen(name) + 2;
    char *path = malloc(len);
    FILE *f;

    ck_assert_ptr_nonnull(path);
    snprintf(path, len, "%s/%s", dir, name);
    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
    return path;
}

START_TEST(test_file_read_bound_is_exact)
{
    char *dir = kop_test_tmpdir();
    char data[10000];
    char *buf = NULL;
    size_t len = 0;

    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (char)('a' + i % 26);
    char *path = write_tmp(dir, "f", data, sizeof(data));
    for (unsigned flags = 0; flags <= KOP_FILE_SECRET; flags += KOP_FILE_SECRET) {
        ck_assert_int_eq(kop_file_read(path, sizeof(data), flags, &buf, &len), 0);
        ck_assert_uint_eq(len, sizeof(data));
        ck_assert_int_eq(memcmp(buf, data, sizeof(data)), 0);
        ck_assert_int_eq(buf[len], '\0');
        free(buf);
        buf = NULL;
        ck_assert_int_eq(kop_file_read(path, sizeof(data) - 1, flags, &buf, &len), -EFBIG);
        ck_assert_ptr_null(buf);
    }
    ck_assert_int_eq(kop_file_read(path, 100000, 0, &buf, NULL), 0);
    ck_assert_uint_eq(strlen(buf), sizeof(data));
    free(buf);
    free(path);

    /* Empty file. */
    path = write_tmp(dir, "empty", "", 0);
    ck_assert_int_eq(kop_file_read(path, 0, 0, &buf, &len), 0);
    ck_assert_uint_eq(len, 0);
    ck_assert_str_eq(buf, "");
    free(buf);
    free(path);
    kop_test_rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(test_file_read_proc_without_size)
{
    char *buf = NULL;
    size_t len = 0;

    /* stat says 0 bytes; the content is read all the same. */
    ck_assert_int_eq(kop_file_read("/proc/self/status", 1 << 20, 0, &buf, &len), 0);
    ck_assert_uint_gt(len, 0);
    ck_assert_ptr_nonnull(strstr(buf, "Name:"));
    free(buf);
    buf = NULL;
    ck_assert_int_eq(kop_file_read("/proc/self/status", 10, 0, &buf, &len), -EFBIG);
    ck_assert_ptr_null(buf);
}
END_TEST

START_TEST(test_file_read_errors)
{
    char *dir = kop_test_tmpdir();
    char *buf = NULL;

    ck_assert_int_eq(kop_file_read("/nonexistent/kop-file", 100, 0, &buf, NULL), -ENOENT);
    ck_assert_int_eq(kop_file_read(dir, 100, 0, &buf, NULL), -EISDIR);
    /* A FIFO (no writer) is refused at once; opening it blocked before. */
    char fifo[1024];
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(kop_file_read(fifo, 100, 0, &buf, NULL), -EINVAL);
    char small[8];
    ck_assert_int_eq(kop_file_read_into(fifo, small, sizeof(small), NULL), -EINVAL);
    ck_assert_int_eq(kop_file_read_into("/dev/null", small, sizeof(small), NULL), -EINVAL);
    ck_assert_int_eq(unlink(fifo), 0);
    ck_assert_ptr_null(buf);
    kop_test_rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(test_file_read_into_truncates)
{
    char *dir = kop_test_tmpdir();
    char *path = write_tmp(dir, "t", "0123456789", 10);
    char small[5], big[64];
    size_t n = 0;

    ck_assert_int_eq(kop_file_read_into(path, small, sizeof(small), &n), 0);
    ck_assert_str_eq(small, "0123");
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(kop_file_read_into(path, big, sizeof(big), &n), 0);
    ck_assert_str_eq(big, "0123456789");
    ck_assert_uint_eq(n, 10);
    memset(big, 'x', sizeof(big));
    ck_assert_int_eq(kop_file_read_into("/nonexistent/kop-file", big, sizeof(big), NULL), -ENOENT);
    ck_assert_str_eq(big, "");
    ck_assert_int_eq(kop_file_read_into(path, big, 0, NULL), -EINVAL);
    free(path);
    kop_test_rmdir(dir);
    free(dir);
}
END_TEST

static Suite *file_suite(void)
{
    Suite *s = suite_create("file");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_file_read_bound_is_exact);
    tcase_add_test(tc, test_file_read_proc_without_size);
    tcase_add_test(tc, test_file_read_errors);
    tcase_add_test(tc, test_file_read_into_truncates);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(file_suite());
}
