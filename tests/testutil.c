/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the Check suites (see testutil.h).
 */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int kop_test_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

char *kop_test_data_path(const char *name)
{
    const char *dir = getenv("KOP_TEST_DATA");
    ck_assert_msg(dir != NULL, "KOP_TEST_DATA is not set (run through meson test)");
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    ck_assert_ptr_nonnull(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

char *kop_test_read_file(const char *path, size_t *ret_len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (len + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + len, 1, cap - len - 1, f);
        if (r == 0)
            break;
        len += r;
    }
    fclose(f);
    if (!buf)
        return NULL;
    buf[len] = '\0';
    if (ret_len)
        *ret_len = len;
    return buf;
}

const char *kop_test_bin(const char *name)
{
    static char path[4096];
    if (strcmp(name, "kop") == 0) {
        const char *b = getenv("KOP_BIN");
        if (b)
            return b;
    }
    const char *root = getenv("KOP_BUILD_ROOT");
    if (!root)
        root = ".";
    if (strcmp(name, "kubesim") == 0)
        snprintf(path, sizeof(path), "%s/tests/kubesim/kubesim", root);
    else
        snprintf(path, sizeof(path), "%s/%s", root, name);
    return path;
}

char *kop_test_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    if (!base)
        base = "/tmp";
    size_t n = strlen(base) + 32;
    char *p = malloc(n);
    ck_assert_ptr_nonnull(p);
    snprintf(p, n, "%s/koptest.XXXXXX", base);
    ck_assert_ptr_nonnull(mkdtemp(p));
    return p;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void kop_test_rmdir(const char *path)
{
    if (path)
        nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void *reader_main(void *arg)
{
    struct kop_test_proc *p = arg;
    char buf[4096];
    for (;;) {
        ssize_t r = read(p->fd, buf, sizeof(buf));
        if (r < 0 && errno == EINTR)
            continue;
        pthread_mutex_lock(&p->lock);
        if (r <= 0) {
            p->eof = true;
            pthread_cond_broadcast(&p->cond);
            pthread_mutex_unlock(&p->lock);
            break;
        }
        if (p->echo)
            (void)!write(2, buf, (size_t)r);
        if (p->len + (size_t)r + 1 > p->cap) {
            size_t nc = p->cap ? p->cap : 8192;
            while (nc < p->len + (size_t)r + 1)
                nc *= 2;
            char *nb = realloc(p->out, nc);
            if (nb) {
                p->out = nb;
                p->cap = nc;
            }
        }
        if (p->len + (size_t)r + 1 <= p->cap) {
            memcpy(p->out + p->len, buf, (size_t)r);
            p->len += (size_t)r;
            p->out[p->len] = '\0';
        }
        pthread_cond_broadcast(&p->cond);
        pthread_mutex_unlock(&p->lock);
    }
    return NULL;
}

/* environ plus KOP_SHUTDOWN_DELAY=0 when it has none (see testutil.h);
 * built before fork: the child of a threaded process must not allocate. */
static char **child_env(void)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 2, sizeof(*env));
    if (!env)
        return NULL;
    memcpy(env, environ, n * sizeof(*env));
    if (!getenv("KOP_SHUTDOWN_DELAY"))
        env[n] = (char *)"KOP_SHUTDOWN_DELAY=0";
    return env;
}

int kop_test_spawn(struct kop_test_proc *p, char *const argv[])
{
    int fds[2];
    memset(p, 0, sizeof(*p));
    char **envp = child_env();
    if (!envp)
        return -ENOMEM;
    if (pipe2(fds, O_CLOEXEC) < 0) {
        free(envp);
        return -errno;
    }
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        free(envp);
        return -e;
    }
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        execve(argv[0], argv, envp);
        _exit(127);
    }
    close(fds[1]);
    free(envp);
    p->pid = pid;
    p->fd = fds[0];
    p->echo = getenv("KOP_TEST_ECHO") != NULL;
    pthread_mutex_init(&p->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cond, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&p->reader, NULL, reader_main, p) != 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        close(p->fd);
        return -EAGAIN;
    }
    return 0;
}

long kop_test_wait_for(struct kop_test_proc *p, size_t from, const char *needle, int timeout_ms,
                       char **ret_line)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    long ret = -ETIMEDOUT;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        if (p->out && from < p->len) {
            char *hit = strstr(p->out + from, needle);
            if (hit) {
                char *start = hit;
                while (start > p->out && start[-1] != '\n')
                    start--;
                char *end = strchr(hit, '\n');
                if (!end)
                    end = p->out + p->len;
                if (ret_line)
                    *ret_line = strndup(start, (size_t)(end - start));
                ret = (long)(end - p->out) + (*end == '\n' ? 1 : 0);
                break;
            }
        }
        if (p->eof) {
            ret = -EPIPE;
            break;
        }
        if (pthread_cond_timedwait(&p->cond, &p->lock, &dl) == ETIMEDOUT) {
            ret = -ETIMEDOUT;
            break;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return ret;
}

char *kop_test_output(struct kop_test_proc *p)
{
    pthread_mutex_lock(&p->lock);
    char *s = strndup(p->out ? p->out : "", p->len);
    pthread_mutex_unlock(&p->lock);
    return s;
}

int kop_test_stop(struct kop_test_proc *p, int sig, int timeout_ms)
{
    int status = 0;
    if (p->pid <= 0)
        return -ECHILD;
    kill(p->pid, sig);
    int waited = 0;
    for (;;) {
        pid_t r = waitpid(p->pid, &status, WNOHANG);
        if (r == p->pid)
            break;
        if (r < 0) {
            status = -errno;
            break;
        }
        if (waited >= timeout_ms) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &status, 0);
            status = -ETIMEDOUT;
            break;
        }
        usleep(10000);
        waited += 10;
    }
    p->pid = 0;
    pthread_join(p->reader, NULL);
    close(p->fd);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    free(p->out);
    p->out = NULL;
    return status;
}

long kop_test_json_int(const char *line, const char *key)
{
    char pat[128];
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    const char *hit = strstr(line, pat);
    if (!hit)
        return -1;
    return strtol(hit + strlen(pat), NULL, 10);
}

int kop_test_thread_nice(pid_t pid, const char *name)
{
    char dir[64];
    if (pid)
        snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
    else
        snprintf(dir, sizeof(dir), "/proc/self/task");
    DIR *d = opendir(dir);
    if (!d)
        return INT_MIN;
    int nice = INT_MIN;
    struct dirent *e;
    while ((e = readdir(d)) && nice == INT_MIN) {
        if (e->d_name[0] == '.')
            continue;
        char path[400], comm[64] = "", stat[1024] = "";
        snprintf(path, sizeof(path), "%s/%s/comm", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue; /* the thread ended */
        if (!fgets(comm, sizeof(comm), f))
            comm[0] = '\0';
        fclose(f);
        comm[strcspn(comm, "\n")] = '\0';
        if (strcmp(comm, name) != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s/stat", dir, e->d_name);
        f = fopen(path, "r");
        if (!f)
            continue;
        bool ok = fgets(stat, sizeof(stat), f) != NULL;
        fclose(f);
        /* after "pid (comm)": state is field 3, nice field 19 */
        const char *p = ok ? strrchr(stat, ')') : NULL;
        if (!p)
            continue;
        p++;
        for (int field = 3; field <= 19; field++) {
            while (*p == ' ')
                p++;
            if (field == 19)
                nice = (int)strtol(p, NULL, 10);
            while (*p && *p != ' ')
                p++;
        }
    }
    closedir(d);
    return nice;
}
