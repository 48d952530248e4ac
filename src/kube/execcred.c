/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Exec credential plugins (see kop/execcred.h).
 *
 * DESIGN
 *
 * Threads: a provider is shared by every client built from one kubeconfig
 * and so by every thread that makes requests. p->lock guards the cached
 * credential and the run state; it is never held while the plugin runs
 * (fork/exec, pipes and waiting are blocking I/O). The thread that finds
 * the credential missing, stale or expired and no run in progress sets
 * p->running, runs the plugin unlocked, then publishes the result (the new
 * credential, or the error and its message) under the lock, bumps p->gen
 * and broadcasts. Threads that arrive while a run is in progress wait on
 * p->cond and take that run's outcome, so N threads cause one run, and a
 * failing plugin is not restarted by each of them.
 *
 * Lock order: shared_lock (the process-wide provider list) is never held
 * with a provider's lock.
 *
 * The child: posix_spawn (vfork-like, safe in a threaded process) with
 * stdin on /dev/null, stdout and stderr on pipes, every other descriptor
 * closed, the signal mask cleared (main blocks the stop signals for its
 * sigwait thread, and a child would inherit that) and the dispositions kop
 * changes reset, in its own process group so a timeout kills the plugin
 * and whatever it started.
 */
#include "kop/execcred.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "kop/clock.h"
#include "kop/json.h"
#include "kop/kubeconfig.h"
#include "kop/log.h"
#include "kop/metrics.h"

#define LOGGER "exec-plugin"
#define DEFAULT_TIMEOUT_MS 60000
#define DEFAULT_MAX_OUTPUT ((size_t)1 << 20)
#define MAX_STDERR 8192 /* kept for the log; the rest is read and dropped */
#define EXEC_INFO_ENV "KUBERNETES_EXEC_INFO"

extern char **environ;

struct kop_execcred {
    /* configuration, read-only after creation */
    char *key;      /* canonical JSON of the configuration: the shared-cache key */
    char **argv;    /* command, args..., NULL */
    char **env_add; /* "NAME=VALUE" of the configured env, n_env entries */
    size_t n_env;
    char *exec_info; /* KUBERNETES_EXEC_INFO=... */
    char *api_version;
    char *install_hint;
    enum kop_exec_interactive interactive_mode;
    int64_t timeout_ms;
    size_t max_output;
    struct kop_metrics *metrics;
    struct kop_metric_family *calls; /* rest_client_exec_plugin_call_total */

    int refs; /* under shared_lock */
    struct kop_execcred *next;

    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct kop_execcred_cred *cred; /* cached, or NULL */
    bool stale;                     /* the server rejected cred */
    bool running;                   /* a plugin run is in progress */
    uint64_t gen;                   /* completed runs */
    int last_err;                   /* of the last run, 0 on success */
    char last_msg[512];
    unsigned long runs;
};

static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kop_execcred *shared_list;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void wipe_free(char *s, size_t n)
{
    if (!s)
        return;
    explicit_bzero(s, n);
    free(s);
}

/* ---- credentials ----------------------------------------------------------- */

void kop_execcred_cred_unref(struct kop_execcred_cred *cred)
{
    if (!cred || __atomic_sub_fetch(&cred->_refs, 1, __ATOMIC_ACQ_REL) > 0)
        return;
    wipe_free(cred->token, cred->token ? strlen(cred->token) : 0);
    free(cred->cert_data);
    wipe_free(cred->key_data, cred->key_data_len);
    free(cred);
}

static struct kop_execcred_cred *cred_ref(struct kop_execcred_cred *cred)
{
    __atomic_add_fetch(&cred->_refs, 1, __ATOMIC_RELAXED);
    return cred;
}

static int days_from_civil(int y, int m, int d, int64_t *ret)
{
    /* Howard Hinnant's days_from_civil: no timegm (not in C11) and no TZ. */
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    *ret = era * 146097 + doe - 719468;
    return 0;
}

static bool digits(const char *s, int n, int *ret)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *ret = v;
    return true;
}

int kop_execcred_parse_time(const char *s, int64_t *ret_ms)
{
    int y, mo, d, h, mi, sec;
    assert(ret_ms);
    if (!s || strlen(s) < 20)
        return -EINVAL;
    if (!digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) || s[7] != '-' ||
        !digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't') || !digits(s + 11, 2, &h) ||
        s[13] != ':' || !digits(s + 14, 2, &mi) || s[16] != ':' || !digits(s + 17, 2, &sec))
        return -EINVAL;
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h > 23 || mi > 59 || sec > 60)
        return -EINVAL;
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (mo == 2 && d == 29 && !leap)
        return -EINVAL;
    const char *p = s + 19;
    int64_t ms = 0;
    if (*p == '.') {
        p++;
        int n = 0;
        int64_t scale = 100;
        while (*p >= '0' && *p <= '9') {
            ms += (*p - '0') * scale;
            scale /= 10;
            p++;
            n++;
        }
        if (n == 0)
            return -EINVAL;
    }
    int64_t off_s = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om;
        if (!digits(p + 1, 2, &oh) || p[3] != ':' || !digits(p + 4, 2, &om) || oh > 23 || om > 59)
            return -EINVAL;
        off_s = (int64_t)(oh * 3600 + om * 60) * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return -EINVAL;
    }
    if (*p)
        return -EINVAL;
    int64_t days;
    days_from_civil(y, mo, d, &days);
    int64_t t = days * 86400 + h * 3600 + mi * 60 + sec - off_s;
    *ret_ms = t * 1000 + ms;
    return 0;
}

/* The ExecCredential around the status: a JSON object of the kind and
 * apiVersion asked for, with a status object. j may be NULL (jerr says
 * why). */
static int check_envelope(const struct kop_execcred *p, const json_t *j, const json_error_t *jerr,
                          char *msg, size_t msg_len)
{
    if (!json_is_object(j)) {
        /* Position only: jansson's text quotes the input, which may be a
         * token cut short. */
        if (j)
            kop_msgf(msg, msg_len, "decoding stdout: not a JSON object");
        else
            kop_msgf(msg, msg_len, "decoding stdout: invalid JSON at line %d, column %d",
                     jerr->line, jerr->column);
        return -EBADMSG;
    }
    const char *av = json_string_value(json_object_get(j, "apiVersion"));
    const char *kind = json_string_value(json_object_get(j, "kind"));
    if (!av || !kind || strcmp(kind, "ExecCredential") != 0) {
        kop_msgf(msg, msg_len, "decoding stdout: not an ExecCredential (apiVersion %s, kind %s)",
                 av ? av : "<none>", kind ? kind : "<none>");
        return -EBADMSG;
    }
    if (strcmp(av, p->api_version) != 0) {
        kop_msgf(msg, msg_len,
                 "exec plugin is configured to use API version %s, plugin returned version %s",
                 p->api_version, av);
        return -EPROTO;
    }
    if (!json_is_object(json_object_get(j, "status"))) {
        kop_msgf(msg, msg_len, "exec plugin didn't return a status field");
        return -EBADMSG;
    }
    return 0;
}

/* Decode the plugin's stdout into a credential. */
static int parse_output(const struct kop_execcred *p, const char *out, size_t len,
                        struct kop_execcred_cred **ret, char *msg, size_t msg_len)
{
    json_error_t jerr;
    json_t *j = json_loadb(out, len, 0, &jerr);
    struct kop_execcred_cred *c = NULL;
    int r = check_envelope(p, j, &jerr, msg, msg_len);
    if (r < 0)
        goto out;
    json_t *st = json_object_get(j, "status");
    const char *tok = json_string_value(json_object_get(st, "token"));
    const char *cert = json_string_value(json_object_get(st, "clientCertificateData"));
    const char *key = json_string_value(json_object_get(st, "clientKeyData"));
    const char *exp = json_string_value(json_object_get(st, "expirationTimestamp"));
    tok = tok && *tok ? tok : NULL;
    cert = cert && *cert ? cert : NULL;
    key = key && *key ? key : NULL;
    if (!tok && !cert && !key) {
        kop_msgf(msg, msg_len, "exec plugin didn't return a token or cert/key pair");
        r = -EBADMSG;
        goto out;
    }
    if (!cert != !key) {
        kop_msgf(msg, msg_len, "exec plugin returned only certificate or key, not both");
        r = -EBADMSG;
        goto out;
    }
    if (cert && (!strstr(cert, "-----BEGIN ") || !strstr(key, "-----BEGIN "))) {
        kop_msgf(msg, msg_len, "exec plugin returned a client certificate or key that is not PEM");
        r = -EBADMSG;
        goto out;
    }
    if (tok && !kop_text_printable(tok)) {
        kop_msgf(msg, msg_len, "exec plugin returned a token with control characters");
        r = -EBADMSG;
        goto out;
    }
    c = calloc(1, sizeof(*c));
    if (!c) {
        r = -ENOMEM;
        goto out;
    }
    c->_refs = 1;
    json_t *expv = json_object_get(st, "expirationTimestamp");
    if (exp && *exp) {
        if (kop_execcred_parse_time(exp, &c->expiry_ms) < 0) {
            kop_msgf(msg, msg_len, "exec plugin returned a bad expirationTimestamp %.64s", exp);
            r = -EBADMSG;
            goto out;
        }
    } else if (expv && !json_is_null(expv) && !exp) {
        kop_msgf(msg, msg_len, "exec plugin returned an expirationTimestamp that is not a string");
        r = -EBADMSG;
        goto out;
    }
    if (tok && !(c->token = strdup(tok)))
        r = -ENOMEM;
    if (r == 0 && cert) {
        c->cert_data = strdup(cert);
        c->key_data = strdup(key);
        c->cert_data_len = strlen(cert);
        c->key_data_len = strlen(key);
        if (!c->cert_data || !c->key_data)
            r = -ENOMEM;
    }
out:
    if (r == 0)
        *ret = c;
    else
        kop_execcred_cred_unref(c);
    /* The tree holds the token and the key. */
    if (j) {
        json_t *st2 = json_object_get(j, "status");
        const char *fields[] = {"token", "clientKeyData"};
        for (size_t i = 0; i < 2; i++) {
            const char *v = json_string_value(json_object_get(st2, fields[i]));
            if (v)
                explicit_bzero((char *)v, strlen(v));
        }
    }
    json_decref(j);
    return r;
}

/* ---- running the plugin ---------------------------------------------------- */

/* kop's environment minus the names the configuration sets, then the
 * configured env, then KUBERNETES_EXEC_INFO: one entry per name, the
 * configured value winning (Go's os/exec keeps the last of duplicates). */
static char **build_env(const struct kop_execcred *p)
{
    size_t n = 0;
    for (char **e = environ; e && *e; e++)
        n++;
    char **env = calloc(n + p->n_env + 2, sizeof(*env));
    if (!env)
        return NULL;
    size_t k = 0;
    for (char **e = environ; e && *e; e++) {
        size_t nl = strcspn(*e, "=");
        bool shadowed = nl == strlen(EXEC_INFO_ENV) && !strncmp(*e, EXEC_INFO_ENV, nl);
        for (size_t i = 0; i < p->n_env && !shadowed; i++)
            shadowed = !strncmp(p->env_add[i], *e, nl) && p->env_add[i][nl] == '=';
        if (!shadowed)
            env[k++] = *e;
    }
    for (size_t i = 0; i < p->n_env; i++) {
        size_t nl = strcspn(p->env_add[i], "=");
        bool later = nl == strlen(EXEC_INFO_ENV) && !strncmp(p->env_add[i], EXEC_INFO_ENV, nl);
        for (size_t j = i + 1; j < p->n_env && !later; j++)
            later = !strncmp(p->env_add[j], p->env_add[i], nl + 1);
        if (!later)
            env[k++] = p->env_add[i];
    }
    env[k++] = p->exec_info;
    env[k] = NULL;
    return env;
}

static void log_stderr(const struct kop_execcred *p, const char *buf, size_t len)
{
    size_t i = 0;
    while (i < len) {
        size_t e = i;
        while (e < len && buf[e] != '\n')
            e++;
        if (e > i)
            kop_logf(KOP_LOG_INFO, LOGGER, "%s: %.*s", p->argv[0], (int)(e - i), buf + i);
        i = e + 1;
    }
}

/* The last non-empty line of the plugin's stderr, for error messages. */
static void last_line(const char *buf, size_t len, char *out, size_t out_len)
{
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
        len--;
    size_t s = len;
    while (s > 0 && buf[s - 1] != '\n')
        s--;
    snprintf(out, out_len, "%.*s", (int)(len - s), buf + s);
}

static void kill_wait(pid_t pid)
{
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

/* 0: path names an executable file (Go's findExecutable: a directory is
 * not one, though access(2) says it may be searched); -EACCES: it exists
 * but cannot be run; -ENOENT: anything else. */
static int executable(const char *path)
{
    struct stat st;
    if (access(path, X_OK) == 0)
        return stat(path, &st) == 0 && !S_ISDIR(st.st_mode) ? 0 : -EACCES;
    return errno == EACCES && access(path, F_OK) == 0 ? -EACCES : -ENOENT;
}

/*
 * The program to start, as Go's exec.LookPath (Go >= 1.19) finds it for
 * client-go's exec.Command: a command with a '/' as it is (a relative one,
 * "./plugin", against the working directory, as the configuration asks),
 * a bare name looked up in kop's $PATH. An empty $PATH element means "."
 * and, like any relative element ("bin"), would run a program found
 * through the working directory, which whoever controls that directory
 * chooses: the first element that has the program decides, and when it is
 * relative the answer is -EPERM (Go's exec.ErrDot), not a run of what it
 * found and not a look further on. Done here rather than by posix_spawnp
 * so that a missing or non-executable command is reported as such
 * whatever the spawn implementation (one that cannot report exec failures
 * would show an exit status 127 instead).
 * Returns 0, -ENOENT, -EACCES, -EPERM or -ENOMEM.
 */
static int look_path(const char *cmd, char **ret)
{
    if (strchr(cmd, '/')) {
        int r = executable(cmd);
        if (r < 0)
            return r;
        *ret = strdup(cmd);
        return *ret ? 0 : -ENOMEM;
    }
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    int r = -ENOENT;
    for (;;) {
        size_t n = strcspn(path, ":");
        /* An empty element is the current directory. */
        size_t len = (n ? n : 1) + strlen(cmd) + 2;
        char *full = malloc(len);
        if (!full)
            return -ENOMEM;
        snprintf(full, len, "%.*s/%s", (int)(n ? n : 1), n ? path : ".", cmd);
        int e = executable(full);
        if (e == 0 && full[0] != '/') {
            free(full);
            return -EPERM;
        }
        if (e == 0) {
            *ret = full;
            return 0;
        }
        if (e == -EACCES)
            r = -EACCES;
        free(full);
        if (path[n] == '\0')
            break;
        path += n + 1;
    }
    return r;
}

/* Start prog (look_path's answer) with the plugin's argv and env. */
static int spawn(const char *prog, const struct kop_execcred *p, char **env, int out_fd[2],
                 int err_fd[2], pid_t *ret_pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    int r = posix_spawn_file_actions_init(&fa);
    if (r)
        return -r;
    r = posix_spawnattr_init(&at);
    if (r) {
        posix_spawn_file_actions_destroy(&fa);
        return -r;
    }
    sigset_t none, dfl;
    sigemptyset(&none);
    sigemptyset(&dfl);
    static const int reset[] = {SIGPIPE, SIGINT,  SIGTERM, SIGHUP, SIGQUIT,
                                SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM};
    for (size_t i = 0; i < sizeof(reset) / sizeof(reset[0]); i++)
        sigaddset(&dfl, reset[i]);
    r = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (!r)
        r = posix_spawn_file_actions_adddup2(&fa, out_fd[1], 1);
    if (!r)
        r = posix_spawn_file_actions_adddup2(&fa, err_fd[1], 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    if (!r)
        r = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
#endif
    if (!r)
        r = posix_spawnattr_setsigmask(&at, &none);
    if (!r)
        r = posix_spawnattr_setsigdefault(&at, &dfl);
    if (!r)
        r = posix_spawnattr_setpgroup(&at, 0);
    if (!r)
        r = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                              POSIX_SPAWN_SETPGROUP);
    if (!r)
        r = posix_spawn(ret_pid, prog, &fa, &at, p->argv, env);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    return -r;
}

/* How a run ended, for rest_client_exec_plugin_call_total (client-go's
 * exec/metrics.go incrementCallsMetric: exit code and call_status; a
 * killed plugin has exit code -1, as Go's ExitCode() reports). */
struct outcome {
    int code;
    const char *status; /* NULL: the plugin was not started (not counted) */
};

/* One run of the plugin: its pipes, what it wrote, its process. */
struct run {
    int out_fd[2], err_fd[2];
    char *out; /* stdout, up to max_output bytes */
    size_t out_len;
    char err_buf[MAX_STDERR]; /* the start of stderr */
    size_t err_len;
    pid_t pid; /* -1: none to kill and reap */
    int status;
};

static bool is_cancelled(kop_execcred_cancel_fn cancelled, void *ud)
{
    return cancelled && cancelled(ud);
}

/* Find the program, make the pipes and start it, with Go's messages for
 * what went wrong. */
static int start_plugin(const struct kop_execcred *p, char **env, struct run *rn, char *msg,
                        size_t msg_len, struct outcome *oc)
{
    char *prog = NULL;
    int r = look_path(p->argv[0], &prog);
    if (r == -EPERM) {
        /* Go's exec.Error with exec.ErrDot, in its words; client-go counts
         * every exec.Error as plugin_not_found_error. */
        kop_msgf(msg, msg_len,
                 "exec: \"%s\": cannot run executable found relative to current directory "
                 "(an empty or relative $PATH element; name the plugin by an absolute path)",
                 p->argv[0]);
        oc->status = "plugin_not_found_error";
        goto out;
    }
    if (r == 0 && (pipe2(rn->out_fd, O_CLOEXEC) < 0 || pipe2(rn->err_fd, O_CLOEXEC) < 0)) {
        r = -errno;
        kop_msgf(msg, msg_len, "exec plugin %s: cannot create pipes", p->argv[0]);
        goto out;
    }
    if (r == 0) {
        r = spawn(prog, p, env, rn->out_fd, rn->err_fd, &rn->pid);
        close(rn->out_fd[1]);
        close(rn->err_fd[1]);
        rn->out_fd[1] = rn->err_fd[1] = -1;
    }
    if (r < 0) {
        rn->pid = -1;
        if (r == -ENOENT)
            kop_msgf(msg, msg_len,
                     "exec: executable %s not found; it looks like you are trying to use a "
                     "client-go credential plugin that is not installed%s%s",
                     p->argv[0], p->install_hint ? ": " : "",
                     p->install_hint ? p->install_hint : "");
        else if (r == -EACCES)
            kop_msgf(msg, msg_len, "exec: %s is not executable", p->argv[0]);
        else
            kop_msgf(msg, msg_len, "exec: cannot start %s (errno %d)", p->argv[0], -r);
        if (r == -ENOENT || r == -EACCES)
            oc->status = "plugin_not_found_error";
        if (r != -ENOENT && r != -EACCES && r != -ENOMEM)
            r = -EAGAIN;
    }
out:
    free(prog);
    return r;
}

/* Read stdout and stderr until both close, the deadline passes, the run
 * is cancelled or stdout passes max_output. */
static int read_output(const struct kop_execcred *p, struct run *rn, int64_t deadline,
                       kop_execcred_cancel_fn cancelled, void *cancel_ud)
{
    struct pollfd pf[2] = {{.fd = rn->out_fd[0], .events = POLLIN},
                           {.fd = rn->err_fd[0], .events = POLLIN}};
    int open_fds = 2, r = 0;
    while (open_fds > 0 && r == 0) {
        int64_t left = deadline - mono_ms();
        if (left <= 0) {
            r = -ETIMEDOUT;
            break;
        }
        if (is_cancelled(cancelled, cancel_ud)) {
            r = -ECANCELED;
            break;
        }
        int slice = cancelled ? 100 : 1000;
        int n = poll(pf, 2, left > slice ? slice : (int)left);
        if (n < 0 && errno != EINTR) {
            r = -errno;
            break;
        }
        for (int i = 0; n > 0 && i < 2; i++) {
            if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char tmp[4096];
            ssize_t k = read(pf[i].fd, tmp, sizeof(tmp));
            if (k < 0 && (errno == EINTR || errno == EAGAIN))
                continue;
            if (k <= 0) {
                close(pf[i].fd);
                pf[i].fd = -1;
                open_fds--;
                continue;
            }
            if (i == 0) {
                if ((size_t)k > p->max_output - rn->out_len) {
                    r = -EMSGSIZE;
                    break;
                }
                memcpy(rn->out + rn->out_len, tmp, (size_t)k);
                rn->out_len += (size_t)k;
            } else {
                size_t room = sizeof(rn->err_buf) - rn->err_len;
                size_t keep = (size_t)k < room ? (size_t)k : room;
                memcpy(rn->err_buf + rn->err_len, tmp, keep);
                rn->err_len += keep;
            }
        }
    }
    rn->out_fd[0] = pf[0].fd;
    rn->err_fd[0] = pf[1].fd;
    return r;
}

/* Both pipes closed: the plugin is exiting; wait for it within the
 * deadline (a plugin could close them and linger). */
static int reap(struct run *rn, int64_t deadline, kop_execcred_cancel_fn cancelled, void *cancel_ud)
{
    for (;;) {
        pid_t w = waitpid(rn->pid, &rn->status, WNOHANG);
        if (w == rn->pid) {
            rn->pid = -1;
            return 0;
        }
        if (w < 0 && errno != EINTR)
            return -errno;
        if (mono_ms() >= deadline)
            return -ETIMEDOUT;
        if (is_cancelled(cancelled, cancel_ud))
            return -ECANCELED;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 5000000};
        nanosleep(&ts, NULL);
    }
}

/* What the run's end r means: the outcome for the metric, the message,
 * and on success the credential parsed from stdout. */
static int judge(const struct kop_execcred *p, const struct run *rn, int r,
                 struct kop_execcred_cred **ret, char *msg, size_t msg_len, struct outcome *oc)
{
    int status = rn->status;
    log_stderr(p, rn->err_buf, rn->err_len);
    char last[256];
    last_line(rn->err_buf, rn->err_len, last, sizeof(last));
    if (r == -ECANCELED)
        oc->status = NULL; /* kop gave up on it: not the plugin's outcome */
    else if (r == -ETIMEDOUT || r == -EMSGSIZE || (r == 0 && !WIFEXITED(status)))
        *oc = (struct outcome){.code = -1, .status = "plugin_execution_error"}; /* killed */
    else if (r == 0 && WEXITSTATUS(status) != 0)
        *oc = (struct outcome){.code = WEXITSTATUS(status), .status = "plugin_execution_error"};
    else if (r == 0)
        *oc = (struct outcome){.code = 0, .status = "no_error"};
    if (r == -ETIMEDOUT) {
        kop_msgf(msg, msg_len, "exec plugin %s did not finish within %lld ms", p->argv[0],
                 (long long)p->timeout_ms);
    } else if (r == -EMSGSIZE) {
        kop_msgf(msg, msg_len, "exec plugin %s wrote more than %zu bytes", p->argv[0],
                 p->max_output);
    } else if (r == -ECANCELED) {
        kop_msgf(msg, msg_len, "exec plugin %s: cancelled", p->argv[0]);
    } else if (r < 0) {
        kop_msgf(msg, msg_len, "exec plugin %s: waiting failed (errno %d)", p->argv[0], -r);
    } else if (WIFSIGNALED(status)) {
        kop_msgf(msg, msg_len, "exec plugin %s was killed by signal %d%s%s", p->argv[0],
                 WTERMSIG(status), last[0] ? ": " : "", last);
        r = -EIO;
    } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        kop_msgf(msg, msg_len, "exec plugin %s exited with status %d%s%s", p->argv[0],
                 WEXITSTATUS(status), last[0] ? ": " : "", last);
        r = -EIO;
    } else {
        r = parse_output(p, rn->out, rn->out_len, ret, msg, msg_len);
    }
    return r;
}

/* Run the plugin once; on success *ret is the new credential. */
static int run_plugin(const struct kop_execcred *p, kop_execcred_cancel_fn cancelled,
                      void *cancel_ud, struct kop_execcred_cred **ret, char *msg, size_t msg_len,
                      struct outcome *oc)
{
    *oc = (struct outcome){.code = 1, .status = NULL};
    if (p->interactive_mode == KOP_EXEC_INTERACTIVE_ALWAYS) {
        kop_msgf(msg, msg_len,
                 "exec plugin cannot support interactive mode: standard input is not a terminal "
                 "(interactiveMode is Always; plugins run non-interactively here, use Never or "
                 "IfAvailable)");
        return -ENOTSUP;
    }
    struct run rn = {.out_fd = {-1, -1}, .err_fd = {-1, -1}, .pid = -1};
    int r = 0;
    oc->status = "client_internal_error";
    char **env = build_env(p);
    if (!env)
        return -ENOMEM;
    rn.out = malloc(p->max_output + 1);
    if (!rn.out) {
        r = -ENOMEM;
        goto out;
    }
    r = start_plugin(p, env, &rn, msg, msg_len, oc);
    if (r < 0)
        goto out;
    int64_t deadline = mono_ms() + p->timeout_ms;
    r = read_output(p, &rn, deadline, cancelled, cancel_ud);
    if (r == 0)
        r = reap(&rn, deadline, cancelled, cancel_ud);
    r = judge(p, &rn, r, ret, msg, msg_len, oc);
out:
    if (rn.pid > 0)
        kill_wait(rn.pid);
    for (int i = 0; i < 2; i++) {
        if (rn.out_fd[i] >= 0)
            close(rn.out_fd[i]);
        if (rn.err_fd[i] >= 0)
            close(rn.err_fd[i]);
    }
    if (rn.out) {
        explicit_bzero(rn.out, rn.out_len);
        free(rn.out);
    }
    free(env);
    return r;
}

/* ---- providers ------------------------------------------------------------- */

static void provider_free(struct kop_execcred *p)
{
    if (!p)
        return;
    free(p->key);
    for (char **a = p->argv; a && *a; a++)
        free(*a);
    free(p->argv);
    for (size_t i = 0; i < p->n_env; i++)
        wipe_free(p->env_add[i], strlen(p->env_add[i]));
    free(p->env_add);
    free(p->exec_info);
    free(p->api_version);
    free(p->install_hint);
    kop_execcred_cred_unref(p->cred);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    free(p);
}

/* KUBERNETES_EXEC_INFO: the ExecCredential the plugin receives. */
static char *exec_info(const struct kop_exec_config *cfg)
{
    json_t *spec = json_pack("{s:b}", "interactive", 0);
    if (spec && cfg->provide_cluster_info && cfg->cluster &&
        json_object_set(spec, "cluster", cfg->cluster) < 0) {
        json_decref(spec);
        spec = NULL;
    }
    json_t *j = spec ? json_pack("{s:s, s:s, s:o}", "kind", "ExecCredential", "apiVersion",
                                 cfg->api_version, "spec", spec)
                     : NULL;
    char *s = NULL;
    if (j && kop_json_dump(j, JSON_COMPACT, &s, NULL) < 0)
        s = NULL;
    json_decref(j);
    if (!s)
        return NULL;
    size_t n = strlen(EXEC_INFO_ENV) + strlen(s) + 2;
    char *e = malloc(n);
    if (e)
        snprintf(e, n, "%s=%s", EXEC_INFO_ENV, s);
    free(s);
    return e;
}

/* The cache key: everything that makes two plugins differ. */
static char *config_key(const struct kop_exec_config *cfg, const struct kop_execcred *p)
{
    json_t *args = json_array(), *env = json_array();
    for (size_t i = 0; args && i < cfg->n_args; i++)
        json_array_append_new(args, json_string(cfg->args[i]));
    for (size_t i = 0; env && i < cfg->n_env; i++)
        json_array_append_new(env, json_pack("[s,s]", cfg->env[i].name, cfg->env[i].value));
    json_t *j = json_pack("{s:s, s:o, s:o, s:s, s:i, s:s, s:I, s:I, s:I}", "command", cfg->command,
                          "args", args, "env", env, "apiVersion", cfg->api_version, "mode",
                          (int)cfg->interactive_mode, "info", p->exec_info, "timeout",
                          (json_int_t)p->timeout_ms, "max", (json_int_t)p->max_output, "metrics",
                          (json_int_t)(uintptr_t)p->metrics);
    char *s = NULL;
    if (j && kop_json_dump(j, JSON_COMPACT | JSON_SORT_KEYS, &s, NULL) < 0)
        s = NULL;
    json_decref(j);
    return s;
}

static int provider_new(const struct kop_exec_config *cfg, const struct kop_execcred_options *o,
                        struct kop_execcred **ret)
{
    struct kop_execcred *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    if (kop_clock_cond_init(&p->cond) != 0) {
        free(p);
        return -ENOMEM;
    }
    pthread_mutex_init(&p->lock, NULL);
    p->refs = 1;
    p->interactive_mode = cfg->interactive_mode;
    p->timeout_ms = o && o->timeout_ms > 0 ? o->timeout_ms : DEFAULT_TIMEOUT_MS;
    p->max_output = o && o->max_output > 0 ? o->max_output : DEFAULT_MAX_OUTPUT;
    p->metrics = o && o->metrics ? o->metrics : kop_metrics_global();
    static const char *const labels[] = {"code", "call_status", NULL};
    if (p->metrics)
        p->calls = kop_metrics_register(
            p->metrics, KOP_METRIC_COUNTER, "rest_client_exec_plugin_call_total",
            "Number of calls to an exec plugin, partitioned by the type "
            "of event encountered (no_error, plugin_execution_error, "
            "plugin_not_found_error, client_internal_error) and an "
            "optional exit code. The exit code will be set to 0 if and "
            "only if the plugin call was successful.",
            labels, NULL, 0);
    bool oom = false;
    p->argv = calloc(cfg->n_args + 2, sizeof(*p->argv));
    p->env_add = cfg->n_env ? calloc(cfg->n_env, sizeof(*p->env_add)) : NULL;
    if (!p->argv || (cfg->n_env && !p->env_add)) {
        provider_free(p);
        return -ENOMEM;
    }
    p->argv[0] = strdup(cfg->command);
    oom |= !p->argv[0];
    for (size_t i = 0; i < cfg->n_args && !oom; i++) {
        p->argv[i + 1] = strdup(cfg->args[i]);
        oom |= !p->argv[i + 1];
    }
    for (size_t i = 0; i < cfg->n_env && !oom; i++) {
        size_t n = strlen(cfg->env[i].name) + strlen(cfg->env[i].value) + 2;
        p->env_add[i] = malloc(n);
        if (p->env_add[i]) {
            snprintf(p->env_add[i], n, "%s=%s", cfg->env[i].name, cfg->env[i].value);
            p->n_env = i + 1;
        }
        oom |= !p->env_add[i];
    }
    p->api_version = strdup(cfg->api_version);
    p->install_hint = cfg->install_hint ? strdup(cfg->install_hint) : NULL;
    p->exec_info = exec_info(cfg);
    oom |= !p->api_version || (cfg->install_hint && !p->install_hint) || !p->exec_info;
    if (!oom) {
        p->key = config_key(cfg, p);
        oom = !p->key;
    }
    if (oom) {
        provider_free(p);
        return -ENOMEM;
    }
    *ret = p;
    return 0;
}

int kop_execcred_get_shared(const struct kop_exec_config *cfg,
                            const struct kop_execcred_options *opt, struct kop_execcred **ret)
{
    assert(cfg);
    assert(ret);
    if (!cfg->command || !*cfg->command || !cfg->api_version)
        return -EINVAL;
    struct kop_execcred *p = NULL;
    int r = provider_new(cfg, opt, &p);
    if (r < 0)
        return r;
    pthread_mutex_lock(&shared_lock);
    struct kop_execcred *q = shared_list;
    while (q && strcmp(q->key, p->key) != 0)
        q = q->next;
    if (q) {
        q->refs++;
    } else {
        p->next = shared_list;
        shared_list = p;
    }
    pthread_mutex_unlock(&shared_lock);
    if (q) {
        provider_free(p);
        p = q;
    }
    *ret = p;
    return 0;
}

void kop_execcred_unref(struct kop_execcred *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&shared_lock);
    bool last = --p->refs == 0;
    if (last) {
        struct kop_execcred **pp = &shared_list;
        while (*pp && *pp != p)
            pp = &(*pp)->next;
        if (*pp)
            *pp = p->next;
    }
    pthread_mutex_unlock(&shared_lock);
    if (last)
        provider_free(p);
}

static bool usable(const struct kop_execcred *p, int64_t now_ms)
{
    return p->cred && !p->stale && (p->cred->expiry_ms == 0 || now_ms < p->cred->expiry_ms);
}

int kop_execcred_get(struct kop_execcred *p, int64_t now_ms, struct kop_execcred_cred **ret_cred,
                     char *msg, size_t msg_len)
{
    return kop_execcred_get_cancellable(p, now_ms, NULL, NULL, ret_cred, msg, msg_len);
}

int kop_execcred_get_cancellable(struct kop_execcred *p, int64_t now_ms,
                                 kop_execcred_cancel_fn cancelled, void *cancel_ud,
                                 struct kop_execcred_cred **ret_cred, char *msg, size_t msg_len)
{
    assert(p);
    assert(ret_cred);
    pthread_mutex_lock(&p->lock);
    while (!usable(p, now_ms) && p->running) {
        uint64_t gen = p->gen;
        while (p->running && p->gen == gen) {
            if (!cancelled) {
                pthread_cond_wait(&p->cond, &p->lock);
                continue;
            }
            if (cancelled(cancel_ud)) {
                pthread_mutex_unlock(&p->lock);
                kop_msgf(msg, msg_len, "cancelled while waiting for the exec plugin");
                return -ECANCELED;
            }
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += 100000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&p->cond, &p->lock, &ts);
        }
        if (p->gen != gen && p->last_err) {
            /* The run this thread waited for failed: its error, no new run. */
            int r = p->last_err;
            kop_msgf(msg, msg_len, "%s", p->last_msg);
            pthread_mutex_unlock(&p->lock);
            return r;
        }
    }
    if (usable(p, now_ms)) {
        *ret_cred = cred_ref(p->cred);
        pthread_mutex_unlock(&p->lock);
        return 0;
    }
    p->running = true;
    p->runs++;
    pthread_mutex_unlock(&p->lock);

    char m[512] = "";
    struct kop_execcred_cred *nc = NULL;
    struct outcome oc;
    int r = run_plugin(p, cancelled, cancel_ud, &nc, m, sizeof(m), &oc);
    if (oc.status) {
        char code[16];
        snprintf(code, sizeof(code), "%d", oc.code);
        kop_counter_inc(kop_metric_child(p->calls, code, oc.status));
    }
    if (r < 0 && r != -ECANCELED)
        kop_logf(KOP_LOG_ERROR, LOGGER, "getting credentials: %s", m);
    else if (r == 0)
        kop_logf(KOP_LOG_DEBUG, LOGGER, "%s returned a %s", p->argv[0],
                 nc->token ? "token" : "client certificate");

    struct kop_execcred_cred *old = NULL;
    pthread_mutex_lock(&p->lock);
    p->running = false;
    p->gen++;
    /* A cancelled run is nobody else's failure: the threads that waited
     * for it start a run of their own. */
    p->last_err = r == -ECANCELED ? 0 : r;
    snprintf(p->last_msg, sizeof(p->last_msg), "%s", r < 0 ? m : "");
    if (r == 0) {
        old = p->cred;
        p->cred = nc;
        p->stale = false;
        *ret_cred = cred_ref(nc);
    }
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    kop_execcred_cred_unref(old);
    if (r < 0)
        kop_msgf(msg, msg_len, "%s", m);
    return r;
}

void kop_execcred_invalidate(struct kop_execcred *p, const struct kop_execcred_cred *used)
{
    assert(p);
    assert(used);
    pthread_mutex_lock(&p->lock);
    if (p->cred == used)
        p->stale = true;
    pthread_mutex_unlock(&p->lock);
}

unsigned long kop_execcred_runs(struct kop_execcred *p)
{
    assert(p);
    pthread_mutex_lock(&p->lock);
    unsigned long n = p->runs;
    pthread_mutex_unlock(&p->lock);
    return n;
}
