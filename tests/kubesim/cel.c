/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim's CEL helper process: tests/kubesim/cel/celhelper.mjs, run by
 * node, evaluates x-kubernetes-validations with the npm package
 * @bufbuild/cel. kubesim starts it on the first request that needs it and
 * exchanges one JSON line each way per request (the protocol is in the
 * helper's header). docs/kubesim.md §1 and §6.
 *
 * DESIGN. One helper for the process (file-static state, as there is one
 * server). Its mutex is a leaf lock held for one whole exchange, so the
 * requests of the connection threads go through the pipe one at a time;
 * it is never taken with ks->lock held. Every wait is bounded by the
 * timeout (poll on the pipe with a monotonic deadline): an answer that is
 * late, malformed or cut off (the helper died) fails that request with
 * -EIO, the helper is killed and reaped, and the next request starts a
 * new one. The helper gets no descriptor of kubesim's but its pipes
 * (closefrom in the child), so it holds no connection of kubesim's open.
 *
 * Thread-safety: ks_cel_init and ks_cel_free single-threaded (start and
 * exit), the rest any thread.
 */
#include "kubesim.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#ifndef KS_CEL_HELPER_DIR
#define KS_CEL_HELPER_DIR "tests/kubesim/cel"
#endif

/* An answer line longer than this is a broken helper. */
#define KS_CEL_MAX_LINE (64u << 20)

static struct {
    pthread_mutex_t lock;
    char *dir;       /* the helper's directory */
    char *node;      /* node's path */
    char *script;    /* DIR/celhelper.mjs */
    char *why;       /* unavailable: why; NULL when available */
    long timeout_ms; /* one exchange */
    /* lock held */
    pid_t pid; /* 0: not running */
    int to_fd, from_fd;
    char *buf; /* read past the last answer */
    size_t len, cap;
    json_int_t next_id;
    uint64_t starts, failures, requests;
} cel = {.lock = PTHREAD_MUTEX_INITIALIZER, .to_fd = -1, .from_fd = -1};

static bool is_file(const char *path, bool exec)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && (!exec || access(path, X_OK) == 0);
}

/* node's path on PATH (malloc'd), or NULL. */
static char *find_node(void)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        return NULL;
    const char *p = path;
    while (*p) {
        const char *end = strchr(p, ':');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char *cand = ks_printf("%.*s/node", (int)n, n ? p : ".");
        if (is_file(cand, true))
            return cand;
        free(cand);
        if (!end)
            break;
        p = end + 1;
    }
    return NULL;
}

void ks_cel_init(const char *dir, long timeout_ms)
{
    const char *env = getenv("KUBESIM_CEL_HELPER");
    cel.dir = ks_strdup(dir ? dir : env && *env ? env : KS_CEL_HELPER_DIR);
    cel.timeout_ms = timeout_ms > 0 ? timeout_ms : 10000;
    cel.script = ks_printf("%s/celhelper.mjs", cel.dir);
    char *pkg = ks_printf("%s/node_modules/@bufbuild/cel/package.json", cel.dir);
    cel.node = find_node();
    if (!cel.node)
        cel.why = ks_strdup("node is not on PATH");
    else if (!is_file(cel.script, false))
        cel.why = ks_printf("no helper %s", cel.script);
    else if (!is_file(pkg, false))
        cel.why = ks_printf("the npm package @bufbuild/cel is not installed in %s (run npm ci "
                            "there)",
                            cel.dir);
    free(pkg);
    if (cel.why)
        fprintf(stderr,
                "kubesim: CEL: unavailable: %s; CRDs with x-kubernetes-validations are "
                "refused\n",
                cel.why);
}

const char *ks_cel_unavailable(void)
{
    return cel.why;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Lock held. Kill, reap and forget the helper. */
static void stop_helper(void)
{
    if (cel.to_fd >= 0)
        close(cel.to_fd);
    if (cel.from_fd >= 0)
        close(cel.from_fd);
    cel.to_fd = cel.from_fd = -1;
    if (cel.pid > 0) {
        kill(cel.pid, SIGKILL);
        while (waitpid(cel.pid, NULL, 0) < 0 && errno == EINTR) {
        }
    }
    cel.pid = 0;
    cel.len = 0;
}

/* Lock held. Write all of data by the deadline. */
static int write_all(const char *data, size_t n, long long deadline, long timeout_ms,
                     char **ret_err)
{
    size_t off = 0;
    while (off < n) {
        long long left = deadline - now_ms();
        if (left <= 0) {
            *ret_err = ks_printf("CEL helper: no room in its pipe after %ld ms", timeout_ms);
            return -EIO;
        }
        struct pollfd pfd = {.fd = cel.to_fd, .events = POLLOUT};
        int pr = poll(&pfd, 1, (int)left);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue;
        ssize_t w = write(cel.to_fd, data + off, n - off);
        if (w < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (w <= 0) {
            *ret_err = ks_printf("CEL helper: writing its request: %s",
                                 errno == EPIPE ? "it exited" : "write failed");
            return -EIO;
        }
        off += (size_t)w;
    }
    return 0;
}

/* Lock held. One answer line (malloc'd, without its newline) by the
 * deadline. */
static int read_line(long long deadline, long timeout_ms, char **ret_line, char **ret_err)
{
    for (;;) {
        char *nl = cel.len ? memchr(cel.buf, '\n', cel.len) : NULL;
        if (nl) {
            size_t n = (size_t)(nl - cel.buf);
            char *line = malloc(n + 1);
            if (!line)
                abort();
            memcpy(line, cel.buf, n);
            line[n] = '\0';
            memmove(cel.buf, nl + 1, cel.len - n - 1);
            cel.len -= n + 1;
            *ret_line = line;
            return 0;
        }
        if (cel.len >= KS_CEL_MAX_LINE) {
            *ret_err = ks_strdup("CEL helper: its answer is too long");
            return -EIO;
        }
        long long left = deadline - now_ms();
        if (left <= 0) {
            *ret_err = ks_printf("CEL helper: no answer within %ld ms", timeout_ms);
            return -EIO;
        }
        struct pollfd pfd = {.fd = cel.from_fd, .events = POLLIN};
        int pr = poll(&pfd, 1, (int)left);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue;
        if (cel.cap - cel.len < 65536) {
            size_t cap = cel.cap ? cel.cap * 2 : 131072;
            char *nb = realloc(cel.buf, cap);
            if (!nb)
                abort();
            cel.buf = nb;
            cel.cap = cap;
        }
        ssize_t r = read(cel.from_fd, cel.buf + cel.len, cel.cap - cel.len);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r <= 0) {
            *ret_err = ks_strdup("CEL helper: it exited");
            return -EIO;
        }
        cel.len += (size_t)r;
    }
}

/* Lock held. Send req (its id set) and read the answer with that id
 * within timeout_ms. @ref new *ret */
static int exchange(json_t *req, long timeout_ms, json_t **ret, char **ret_err)
{
    json_int_t id = ++cel.next_id;
    json_object_set_new(req, "id", json_integer(id));
    char *text = json_dumps(req, JSON_COMPACT);
    if (!text)
        abort();
    size_t n = strlen(text);
    char *line = ks_printf("%s\n", text);
    free(text);
    long long deadline = now_ms() + timeout_ms;
    int rc = write_all(line, n + 1, deadline, timeout_ms, ret_err);
    free(line);
    if (rc != 0)
        return rc;
    char *ans = NULL;
    if (read_line(deadline, timeout_ms, &ans, ret_err) != 0)
        return -EIO;
    json_t *doc = json_loads(ans, 0, NULL);
    free(ans);
    if (!json_is_object(doc) || json_integer_value(json_object_get(doc, "id")) != id) {
        json_decref(doc);
        *ret_err = ks_strdup("CEL helper: an answer that is not the request's");
        return -EIO;
    }
    const char *err = json_string_value(json_object_get(doc, "error"));
    if (err) {
        *ret_err = ks_printf("CEL helper: %s", err);
        json_decref(doc);
        return -EIO;
    }
    *ret = doc;
    return 0;
}

/* Lock held. Start the helper and greet it. */
static int start_helper(char **ret_err)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1};
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
        *ret_err = ks_strdup("CEL helper: pipe failed");
        if (in[0] >= 0) {
            close(in[0]);
            close(in[1]);
        }
        return -EIO;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    posix_spawnattr_init(&attr);
    /* not kubesim's blocked SIGTERM and ignored SIGPIPE */
    sigset_t none, dfl;
    sigemptyset(&none);
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGPIPE);
    sigaddset(&dfl, SIGTERM);
    sigaddset(&dfl, SIGINT);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &dfl);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    char *argv[] = {cel.node, cel.script, NULL};
    pid_t pid = 0;
    int src = posix_spawn(&pid, cel.node, &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(in[0]);
    close(out[1]);
    if (src != 0) {
        close(in[1]);
        close(out[0]);
        *ret_err = ks_printf("CEL helper: cannot start %s (errno %d)", cel.node, src);
        return -EIO;
    }
    cel.pid = pid;
    cel.to_fd = in[1];
    cel.from_fd = out[0];
    cel.len = 0;
    cel.starts++;
    json_t *hello = json_pack("{s:s}", "op", "hello"), *ans = NULL;
    /* node's start may take longer than one answer on a loaded machine */
    int rc = exchange(hello, cel.timeout_ms > 10000 ? cel.timeout_ms : 10000, &ans, ret_err);
    json_decref(hello);
    json_decref(ans);
    if (rc != 0)
        stop_helper();
    return rc;
}

int ks_cel_call(json_t *req, json_t **ret, char **ret_err)
{
    if (cel.why) {
        *ret_err = ks_printf("CEL: unavailable: %s", cel.why);
        return -ENOTSUP;
    }
    pthread_mutex_lock(&cel.lock);
    cel.requests++;
    int rc = 0;
    if (cel.pid <= 0)
        rc = start_helper(ret_err);
    json_t *ans = NULL;
    if (rc == 0)
        rc = exchange(req, cel.timeout_ms, &ans, ret_err);
    if (rc != 0) {
        cel.failures++;
        stop_helper();
    }
    pthread_mutex_unlock(&cel.lock);
    if (rc != 0)
        return rc;
    json_t *results = json_object_get(ans, "results");
    if (!json_is_array(results)) {
        json_decref(ans);
        *ret_err = ks_strdup("CEL helper: an answer without results");
        return -EIO;
    }
    *ret = json_incref(results);
    json_decref(ans);
    return 0;
}

json_t *ks_cel_stats(void)
{
    pthread_mutex_lock(&cel.lock);
    json_t *out = json_pack("{s:b,s:I,s:I,s:I,s:I}", "available", cel.why == NULL, "pid",
                            (json_int_t)cel.pid, "starts", (json_int_t)cel.starts, "failures",
                            (json_int_t)cel.failures, "requests", (json_int_t)cel.requests);
    if (cel.why)
        json_object_set_new(out, "unavailable", json_string(cel.why));
    pthread_mutex_unlock(&cel.lock);
    return out;
}

void ks_cel_free(void)
{
    pthread_mutex_lock(&cel.lock);
    if (cel.pid > 0) {
        /* the helper ends at the end of its input; killed if it lingers */
        close(cel.to_fd);
        cel.to_fd = -1;
        long long deadline = now_ms() + 1000;
        bool reaped = false;
        while (!reaped && now_ms() < deadline) {
            reaped = waitpid(cel.pid, NULL, WNOHANG) != 0;
            struct timespec ts = {0, 10 * 1000 * 1000};
            if (!reaped)
                nanosleep(&ts, NULL);
        }
        if (reaped)
            cel.pid = 0;
        stop_helper();
    }
    free(cel.buf);
    cel.buf = NULL;
    cel.len = cel.cap = 0;
    pthread_mutex_unlock(&cel.lock);
    free(cel.dir);
    free(cel.node);
    free(cel.script);
    free(cel.why);
    cel.dir = cel.node = cel.script = cel.why = NULL;
}
