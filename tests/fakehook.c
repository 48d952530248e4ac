// SPDX-License-Identifier: Apache-2.0
#include "fakehook.h"

#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct body {
    char *p;
    size_t len;
};

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    struct fhook *h = cls;
    struct body *b = *con_cls;
    (void)version;
    if (!b) {
        b = calloc(1, sizeof(*b));
        *con_cls = b;
        return b ? MHD_YES : MHD_NO;
    }
    if (*upload_size) {
        char *nb = realloc(b->p, b->len + *upload_size + 1);
        if (!nb)
            return MHD_NO;
        memcpy(nb + b->len, upload, *upload_size);
        b->len += *upload_size;
        nb[b->len] = '\0';
        b->p = nb;
        *upload_size = 0;
        return MHD_YES;
    }
    const struct fhook_request rq = {
        .method = method, .url = url, .body = b->p ? b->p : "", .len = b->len, .conn = conn};
    struct fhook_answer ans = {.code = 200};
    h->fn(h->ud, &rq, &ans);
    if (ans.code == 0) {
        free(ans.body);
        return MHD_NO; /* no answer: MHD closes the connection */
    }
    char *txt = ans.body ? ans.body : strdup("");
    if (!txt)
        return MHD_NO;
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(txt), txt, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(txt);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type",
                            ans.content_type ? ans.content_type : "application/json");
    if (ans.retry_after)
        MHD_add_response_header(resp, "Retry-After", ans.retry_after);
    if (ans.close)
        MHD_add_response_header(resp, "Connection", "close");
    enum MHD_Result ret = MHD_queue_response(conn, ans.code, resp);
    MHD_destroy_response(resp);
    return ret;
}

static void on_done(void *cls, struct MHD_Connection *conn, void **con_cls,
                    enum MHD_RequestTerminationCode toe)
{
    struct body *b = *con_cls;
    (void)cls;
    (void)conn;
    (void)toe;
    if (b) {
        free(b->p);
        free(b);
    }
    *con_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct fhook *h = cls;
    (void)socket_ctx;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED && h->linger0) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        if (ci)
            setsockopt(ci->connect_fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    pthread_mutex_lock(&h->lock);
    if (toe == MHD_CONNECTION_NOTIFY_STARTED)
        h->opened++;
    else
        h->closed++;
    pthread_mutex_unlock(&h->lock);
}

void fhook_start(struct fhook *h, const char *crt_pem, const char *key_pem, unsigned idle_s,
                 fhook_fn fn, void *ud)
{
    if (!fn)
        ck_abort_msg("fhook_start: no answer function");
    pthread_mutex_init(&h->lock, NULL);
    h->fn = fn;
    h->ud = ud;
    h->d = MHD_start_daemon(
        MHD_USE_TLS | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0, NULL,
        NULL, on_request, h, MHD_OPTION_HTTPS_MEM_KEY, key_pem, MHD_OPTION_HTTPS_MEM_CERT, crt_pem,
        MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL, MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
        MHD_OPTION_CONNECTION_TIMEOUT, idle_s, MHD_OPTION_END);
    ck_assert_ptr_nonnull(h->d);
    h->port = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT)->port;
    snprintf(h->addr, sizeof(h->addr), "127.0.0.1:%u", h->port);
}

void fhook_stop(struct fhook *h)
{
    if (h->d)
        MHD_stop_daemon(h->d);
    h->d = NULL;
}

void fhook_free(struct fhook *h)
{
    fhook_stop(h);
    pthread_mutex_destroy(&h->lock);
}

const char *fhook_header(const struct fhook_request *rq, const char *name)
{
    return MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, name);
}

int fhook_count(struct fhook *h, const int *field)
{
    pthread_mutex_lock(&h->lock);
    int n = *field;
    pthread_mutex_unlock(&h->lock);
    return n;
}

void fhook_lock(struct fhook *h)
{
    pthread_mutex_lock(&h->lock);
}

void fhook_unlock(struct fhook *h)
{
    pthread_mutex_unlock(&h->lock);
}

char *fhook_admit(const char *body, bool allowed)
{
    json_t *req = body && *body ? json_loads(body, 0, NULL) : NULL;
    const char *uid = json_string_value(json_object_get(json_object_get(req, "request"), "uid"));
    json_t *out =
        json_pack("{s:s,s:s,s:{s:s,s:b}}", "apiVersion", "admission.k8s.io/v1", "kind",
                  "AdmissionReview", "response", "uid", uid ? uid : "", "allowed", allowed);
    char *txt = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    json_decref(req);
    return txt;
}
