/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tests' tiny HTTP/1.1 server (see fakesrv.h).
 */
#include "fakesrv.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

struct fsrv_conn {
    struct fsrv *s;
    int fd;
};

bool fsrv_write(int fd, const char *data, size_t len)
{
    while (len) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n <= 0)
            return false;
        data += n;
        len -= (size_t)n;
    }
    return true;
}

bool fsrv_reply(int fd, int code, const char *extra_headers, const char *ctype, const char *body)
{
    char head[1024];
    size_t blen = body ? strlen(body) : 0;
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s\r\n", code,
                     ctype ? ctype : "application/json", blen, extra_headers ? extra_headers : "");
    return fsrv_write(fd, head, (size_t)n) && fsrv_write(fd, body ? body : "", blen);
}

bool fsrv_chunk(int fd, const char *data, size_t len)
{
    char head[32];
    int n = snprintf(head, sizeof(head), "%zx\r\n", len);
    return fsrv_write(fd, head, (size_t)n) && fsrv_write(fd, data, len) &&
           fsrv_write(fd, "\r\n", 2);
}

static void hdr_copy(const char *line, const char *name, char *out, size_t len)
{
    size_t nl = strlen(name);
    if (strncasecmp(line, name, nl) != 0 || line[nl] != ':')
        return;
    const char *v = line + nl + 1;
    while (*v == ' ')
        v++;
    snprintf(out, len, "%.*s", (int)strcspn(v, "\r\n"), v);
}

/* Read one request; false on EOF/error. */
static bool fsrv_read_req(int fd, char *buf, size_t cap, size_t *have, struct fsrv_req *req)
{
    memset(req, 0, sizeof(*req));
    char *end = NULL;
    for (;;) {
        buf[*have] = '\0';
        end = strstr(buf, "\r\n\r\n");
        if (end)
            break;
        if (*have + 1 >= cap)
            return false;
        ssize_t n = recv(fd, buf + *have, cap - *have - 1, 0);
        if (n <= 0)
            return false;
        *have += (size_t)n;
    }
    size_t hlen = (size_t)(end - buf) + 4;
    sscanf(buf, "%15s %4095s", req->method, req->path);
    size_t clen = 0;
    for (char *l = strstr(buf, "\r\n"); l && l < end; l = strstr(l + 2, "\r\n")) {
        char *line = l + 2;
        char cl[32] = "";
        hdr_copy(line, "User-Agent", req->user_agent, sizeof(req->user_agent));
        hdr_copy(line, "Authorization", req->auth, sizeof(req->auth));
        if (strncasecmp(line, "Authorization:", 14) == 0) {
            const char *v = line + 14 + strspn(line + 14, " ");
            req->auth_len = strcspn(v, "\r\n");
        }
        hdr_copy(line, "Content-Type", req->content_type, sizeof(req->content_type));
        hdr_copy(line, "traceparent", req->traceparent, sizeof(req->traceparent));
        hdr_copy(line, "Content-Length", cl, sizeof(cl));
        if (cl[0])
            clen = (size_t)strtoul(cl, NULL, 10);
    }
    req->body = calloc(1, clen + 1);
    size_t got = *have - hlen < clen ? *have - hlen : clen;
    memcpy(req->body, buf + hlen, got);
    while (got < clen) {
        ssize_t n = recv(fd, req->body + got, clen - got, 0);
        if (n <= 0) {
            free(req->body);
            req->body = NULL;
            return false;
        }
        got += (size_t)n;
    }
    req->body_len = clen;
    size_t used = hlen + (*have - hlen < clen ? *have - hlen : clen);
    memmove(buf, buf + used, *have - used);
    *have -= used;
    return true;
}

static void *fsrv_conn_main(void *arg)
{
    struct fsrv_conn *c = arg;
    size_t cap = 1 << 16, have = 0;
    char *buf = malloc(cap);
    struct fsrv_req req;
    while (!atomic_load(&c->s->stop) && fsrv_read_req(c->fd, buf, cap, &have, &req)) {
        bool keep = c->s->handler(c->s, &req, c->fd);
        free(req.body);
        if (!keep)
            break;
    }
    shutdown(c->fd, SHUT_RDWR);
    free(buf);
    free(c);
    return NULL;
}

static void *fsrv_main(void *arg)
{
    struct fsrv *s = arg;
    while (!atomic_load(&s->stop)) {
        struct pollfd p = {.fd = s->lfd, .events = POLLIN};
        if (poll(&p, 1, 20) <= 0)
            continue;
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        pthread_mutex_lock(&s->lock);
        if (s->n_conn >= FSRV_MAX_CONN) {
            pthread_mutex_unlock(&s->lock);
            close(fd);
            continue;
        }
        struct fsrv_conn *c = malloc(sizeof(*c));
        c->s = s;
        c->fd = fd;
        s->conn_fd[s->n_conn] = fd;
        pthread_create(&s->conn_thread[s->n_conn], NULL, fsrv_conn_main, c);
        s->n_conn++;
        atomic_fetch_add(&s->accepted, 1);
        pthread_mutex_unlock(&s->lock);
    }
    return NULL;
}

void fsrv_start(struct fsrv *s, fsrv_handler_fn h, void *ud)
{
    memset(s, 0, sizeof(*s));
    s->handler = h;
    s->ud = ud;
    pthread_mutex_init(&s->lock, NULL);
    s->lfd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(s->lfd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(s->lfd, 64), 0);
    socklen_t al = sizeof(a);
    getsockname(s->lfd, (struct sockaddr *)&a, &al);
    s->port = ntohs(a.sin_port);
    ck_assert_int_eq(pthread_create(&s->thread, NULL, fsrv_main, s), 0);
}

void fsrv_stop(struct fsrv *s)
{
    atomic_store(&s->stop, true);
    pthread_join(s->thread, NULL);
    pthread_mutex_lock(&s->lock);
    int n = s->n_conn;
    pthread_mutex_unlock(&s->lock);
    for (int i = 0; i < n; i++)
        shutdown(s->conn_fd[i], SHUT_RDWR);
    for (int i = 0; i < n; i++) {
        pthread_join(s->conn_thread[i], NULL);
        close(s->conn_fd[i]);
    }
    close(s->lfd);
    pthread_mutex_destroy(&s->lock);
}

char *fsrv_url(const struct fsrv *s)
{
    char *u = malloc(64);
    snprintf(u, 64, "http://127.0.0.1:%d", s->port);
    return u;
}
