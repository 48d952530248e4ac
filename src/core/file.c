/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Whole-file readers of kop/file.h. kop_file_read sizes its first buffer
 * from fstat (so a regular file is read in one allocation) but never
 * trusts that size: /proc files report 0 and a file may grow while it is
 * read, so it reads until end of file, growing the buffer by doubling up
 * to the caller's bound, and reads one byte past the bound to tell "exactly
 * max bytes" from "more".
 */
#include "kop/file.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FIRST_ALLOC 4096

/*
 * Open path for reading if it is a regular file. O_NONBLOCK: opening a
 * FIFO for reading would otherwise wait for a writer for ever (a file
 * swapped for one after it was checked, or named by a hostile kubeconfig);
 * reads of a regular file do not care. A directory is -EISDIR, any other
 * kind (FIFO, socket, device) -EINVAL. Returns the descriptor or -errno.
 */
static int open_regular(const char *path, struct stat *st)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    int r = 0;
    if (fstat(fd, st) != 0)
        r = -errno;
    else if (S_ISDIR(st->st_mode))
        r = -EISDIR;
    else if (!S_ISREG(st->st_mode))
        r = -EINVAL;
    if (r < 0) {
        close(fd);
        return r;
    }
    return fd;
}

static void wipe(void *p, size_t n)
{
    /* explicit_bzero (glibc >= 2.25) is not removed as a dead store. */
    if (p != NULL)
        explicit_bzero(p, n);
}

/* Grow buf to cap bytes; for secrets by copy and wipe, not realloc, so no
 * copy of the content is left behind in freed memory. */
static char *grow(char *buf, size_t len, size_t cap, unsigned flags)
{
    char *nb;

    if (!(flags & KOP_FILE_SECRET))
        return realloc(buf, cap);
    nb = malloc(cap);
    if (nb == NULL)
        return NULL;
    memcpy(nb, buf, len);
    wipe(buf, len);
    free(buf);
    return nb;
}

int kop_file_read(const char *path, size_t max, unsigned flags, char **ret_buf, size_t *ret_len)
{
    char *buf = NULL;
    size_t len = 0, cap;
    struct stat st;
    int fd, r;

    assert(path);
    assert(ret_buf);
    if (max >= SIZE_MAX - 1)
        return -EINVAL;
    fd = open_regular(path, &st);
    if (fd < 0)
        return fd;
    /* Room for the content, one byte to detect "more than max", '\0'. */
    cap = FIRST_ALLOC;
    if (st.st_size > 0 && (unsigned long long)st.st_size < max)
        cap = (size_t)st.st_size + 2;
    if (cap > max + 2)
        cap = max + 2;
    buf = malloc(cap);
    if (buf == NULL) {
        r = -ENOMEM;
        goto out;
    }
    for (;;) {
        ssize_t n;

        if (cap - len < 2) {
            size_t ncap = cap > (max + 2) / 2 ? max + 2 : cap * 2;
            char *nb;

            if (cap == max + 2) {
                r = -EFBIG;
                goto out;
            }
            nb = grow(buf, len, ncap, flags);
            if (nb == NULL) {
                r = -ENOMEM;
                goto out;
            }
            buf = nb;
            cap = ncap;
        }
        n = read(fd, buf + len, cap - len - 1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            r = -errno;
            goto out;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len > max) {
            r = -EFBIG;
            goto out;
        }
    }
    buf[len] = '\0';
    *ret_buf = buf;
    if (ret_len != NULL)
        *ret_len = len;
    buf = NULL;
    r = 0;
out:
    if (buf != NULL && (flags & KOP_FILE_SECRET))
        wipe(buf, cap);
    free(buf);
    close(fd);
    return r;
}

int kop_file_read_into(const char *path, char *buf, size_t size, size_t *ret_len)
{
    size_t len = 0;
    struct stat st;
    int fd, r = 0;

    assert(path);
    assert(buf);
    if (size == 0)
        return -EINVAL;
    buf[0] = '\0';
    fd = open_regular(path, &st);
    if (fd < 0)
        return fd;
    while (len < size - 1) {
        ssize_t n = read(fd, buf + len, size - 1 - len);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            r = -errno;
            break;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    close(fd);
    if (r == 0 && ret_len != NULL)
        *ret_len = len;
    return r;
}
