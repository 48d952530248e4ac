/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading small files whole: kubeconfig files, certificate and key files,
 * service account files, /proc files. One reader, so that every caller
 * gets the same bound, the same EINTR handling and O_CLOEXEC (kop spawns
 * credential plugins; a descriptor opened meanwhile must not leak into
 * them).
 *
 * Only regular files are read: the open never waits (a FIFO, even one
 * swapped in after a caller's check, would block it for a writer).
 *
 * Errors are negative errno values: those of open(2) and read(2) as they
 * come (-ENOENT, -EACCES, ...), -EISDIR for a directory, -EINVAL for any
 * other file that is not regular (FIFO, socket, device) and for bad
 * arguments, -EFBIG past the caller's bound, -ENOMEM.
 *
 * Thread-safety: any thread.
 */
#ifndef KOP_FILE_H
#define KOP_FILE_H

#include <stddef.h>

/* The content is secret (a private key, a token): every copy the reader
 * frees, on success or failure, is wiped first. */
#define KOP_FILE_SECRET 0x1u

/*
 * Read the whole file at path into malloc'd memory, '\0'-terminated (the
 * '\0' is not counted in *ret_len; ret_len may be NULL). A file of more
 * than max bytes is refused with -EFBIG. flags: 0 or KOP_FILE_SECRET (the
 * caller then wipes *ret_buf itself when done). Returns 0 or a negative
 * errno (see above); *ret_buf is written only on success.
 */
int kop_file_read(const char *path, size_t max, unsigned flags, char **ret_buf, size_t *ret_len);

/*
 * Read the start of the file at path into buf: at most size - 1 bytes,
 * then a '\0'; the rest of a longer file is ignored (for /proc files and
 * other readers that want a prefix). *ret_len (may be NULL) gets the bytes
 * read. size must be at least 1. Returns 0 or a negative errno; buf holds
 * a '\0'-terminated (possibly empty) string also on failure.
 */
int kop_file_read_into(const char *path, char *buf, size_t size, size_t *ret_len);

#endif /* KOP_FILE_H */
