/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fake webhook endpoint for kubesim's webhook tests: libmicrohttpd over
 * TLS (its own GnuTLS, so nothing of kop's TLS front is involved), one
 * thread per connection, the request body collected whole, then the
 * test's function decides the answer. It counts connections opened and
 * closed, can close them with a reset (SO_LINGER 0) and can drop a request
 * without an answer.
 *
 * Thread-safety: start/stop/free from the test's thread. The answer
 * function runs on a connection thread (one per connection, several at
 * once): it guards its own state, fhook_lock()/fhook_unlock() may serve.
 */
#ifndef KOP_FAKEHOOK_H
#define KOP_FAKEHOOK_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <microhttpd.h>

struct fhook_request {
    const char *method;
    const char *url;  /* path, without the query */
    const char *body; /* NUL-terminated; "" without a body */
    size_t len;
    struct MHD_Connection *conn; /* for fhook_header() */
};

struct fhook_answer {
    unsigned code;            /* 0: close the connection without an answer */
    char *body;               /* malloc'd, freed by fhook; NULL: empty */
    const char *content_type; /* NULL: application/json */
    const char *retry_after;  /* a Retry-After value, NULL: none */
    bool close;               /* Connection: close */
};

typedef void (*fhook_fn)(void *ud, const struct fhook_request *rq, struct fhook_answer *ans);

struct fhook {
    struct MHD_Daemon *d;
    unsigned port;
    char addr[32]; /* "127.0.0.1:PORT" */
    bool linger0;  /* set before start: connections end with a reset */
    pthread_mutex_t lock;
    int opened, closed; /* connections, under lock */
    fhook_fn fn;
    void *ud;
};

/* Serve on 127.0.0.1, a kernel-chosen port, with the PEM pair; idle_s > 0:
 * connections idle that long are closed. Aborts the test on failure. */
void fhook_start(struct fhook *h, const char *crt_pem, const char *key_pem, unsigned idle_s,
                 fhook_fn fn, void *ud);
/* Stop serving (idempotent); fhook_free also releases the lock. */
void fhook_stop(struct fhook *h);
void fhook_free(struct fhook *h);

/* A request header, NULL when absent. */
const char *fhook_header(const struct fhook_request *rq, const char *name);
/* *field read under the fake's lock (opened, closed, or the test's own
 * counters it keeps under fhook_lock). */
int fhook_count(struct fhook *h, const int *field);
void fhook_lock(struct fhook *h);
void fhook_unlock(struct fhook *h);

/* An admission.k8s.io/v1 AdmissionReview answering the review in body
 * (its uid) with allowed; malloc'd JSON. */
char *fhook_admit(const char *body, bool allowed);

#endif
