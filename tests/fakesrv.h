/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A tiny HTTP/1.1 server for the client and informer tests: plain sockets
 * and one thread per connection, so a test controls every byte (canned
 * Status bodies, Retry-After, chunked watch streams, garbage lines and
 * dropped connections). Loopback, kernel-chosen port.
 *
 * Thread-safety: start/stop from the test's thread; the handler runs on a
 * connection thread, one per connection.
 */
#ifndef KOP_FAKESRV_H
#define KOP_FAKESRV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

struct fsrv_req {
    char method[16];
    char path[4096];
    char user_agent[256];
    char auth[1024];
    size_t auth_len; /* of the whole Authorization value (auth holds its start) */
    char content_type[128];
    char traceparent[128];
    char *body;
    size_t body_len;
};

struct fsrv;
/* Write the whole response on fd; return false to close the connection. */
typedef bool (*fsrv_handler_fn)(struct fsrv *s, const struct fsrv_req *req, int fd);

#define FSRV_MAX_CONN 64

struct fsrv {
    int lfd;
    int port;
    pthread_t thread;
    atomic_bool stop;
    fsrv_handler_fn handler;
    void *ud;
    pthread_mutex_t lock;
    int conn_fd[FSRV_MAX_CONN];
    pthread_t conn_thread[FSRV_MAX_CONN];
    int n_conn;
    atomic_int accepted;
};

/* Send all of data; false when the peer is gone. */
bool fsrv_write(int fd, const char *data, size_t len);
/* A whole response with Content-Length; extra_headers are "Name: value\r\n" lines or NULL. */
bool fsrv_reply(int fd, int code, const char *extra_headers, const char *ctype, const char *body);
/* One chunk of a chunked body (len 0 ends it). */
bool fsrv_chunk(int fd, const char *data, size_t len);
/* Listen on 127.0.0.1:0 and serve with h (aborts the test on failure). */
void fsrv_start(struct fsrv *s, fsrv_handler_fn h, void *ud);
void fsrv_stop(struct fsrv *s);
/* "http://127.0.0.1:PORT" (malloc'd). */
char *fsrv_url(const struct fsrv *s);

#endif /* KOP_FAKESRV_H */
