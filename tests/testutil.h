/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared helpers for the Check suites: running a suite, locating test data
 * and binaries, and starting kop/kubesim as child processes whose output
 * is captured so a test can wait for a log line.
 *
 * Thread-safety: a kop_test_proc belongs to one test; its reader thread is
 * internal.
 */
#ifndef KOP_TESTUTIL_H
#define KOP_TESTUTIL_H

#include <check.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Run one suite (fork mode as CK_FORK says) and return an exit code. */
int kop_test_run(Suite *s);

/* $KOP_TEST_DATA/name (malloc'd). Aborts the test if unset. */
char *kop_test_data_path(const char *name);

/* Read a whole file (malloc'd, NUL-terminated). NULL on error. */
char *kop_test_read_file(const char *path, size_t *ret_len);

/* Path of a built program: "kop" -> $KOP_BIN, "kubesim" ->
 * $KOP_BUILD_ROOT/tests/kubesim/kubesim. Static storage. */
const char *kop_test_bin(const char *name);

/* A fresh temporary directory (malloc'd path); removed by kop_test_rmdir. */
char *kop_test_tmpdir(void);
void kop_test_rmdir(const char *path);

struct kop_test_proc {
    pid_t pid;
    int fd; /* read end of the child's stdout+stderr */
    pthread_t reader;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    char *out; /* everything the child printed so far */
    size_t len, cap;
    bool eof;
    bool echo; /* copy child output to our stderr ($KOP_TEST_ECHO) */
};

/* Start argv[0] with argv; stdout and stderr captured. 0 or -errno.
 * The child gets KOP_SHUTDOWN_DELAY=0 unless the environment sets it: a
 * kop under test drains at once on SIGTERM (a test that exercises the
 * delay passes --shutdown-delay, which wins over the variable). */
int kop_test_spawn(struct kop_test_proc *p, char *const argv[]);

/*
 * Wait until the output (from byte "from" on) contains "needle"; returns
 * the offset just after the line holding it, or -ETIMEDOUT / -EPIPE (the
 * child exited first). When ret_line is not NULL the whole line is copied
 * there (malloc'd).
 */
long kop_test_wait_for(struct kop_test_proc *p, size_t from, const char *needle, int timeout_ms,
                       char **ret_line);

/* Copy of the output so far (malloc'd). */
char *kop_test_output(struct kop_test_proc *p);

/* Send sig, wait up to timeout_ms for exit (SIGKILL after), reap, join the
 * reader. Returns the exit status as waitpid encodes it, or -errno. */
int kop_test_stop(struct kop_test_proc *p, int sig, int timeout_ms);

/* Integer value of "key":N in a JSON log line, -1 if absent. */
long kop_test_json_int(const char *line, const char *key);

/* The niceness of the thread named NAME of process PID (0: this one), or
 * INT_MIN when it has no thread of that name. */
int kop_test_thread_nice(pid_t pid, const char *name);

#endif /* KOP_TESTUTIL_H */
