/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the integration tests that talk to kubesim and kop over
 * HTTP: starting kubesim as a child process and reading back its URL,
 * kubeconfig, CA and token; one libcurl request with an optional bearer
 * token and CA, retried on 5xx/429 when asked; a curl write callback that
 * collects a body into a growing buffer; reading samples from Prometheus
 * /metrics text; polling a condition until it holds; and a kop under test:
 * its common command line and the ports it logs.
 *
 * Failures to start a process abort the running test (ck_assert), like the
 * rest of testutil.
 *
 * Thread-safety: kop_test_http with a NULL handle, kop_test_buf_write and the
 * metric readers may be called from any thread; a kop_test_kubesim and a
 * reused CURL handle belong to one thread.
 */
#ifndef KOP_KUBETEST_H
#define KOP_KUBETEST_H

#include <curl/curl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "testutil.h"

/* ---- time ------------------------------------------------------------------------------ */

/* CLOCK_MONOTONIC in milliseconds. */
long kop_test_now_ms(void);

/* Sleep ms milliseconds. */
void kop_test_sleep_ms(long ms);

/* A condition for kop_test_eventually. */
typedef bool (*kop_test_cond_fn)(const void *arg);

/*
 * Poll cond(arg) every 50 ms until it returns true or timeout_ms has passed;
 * the condition is checked once more at the deadline. Returns its last
 * result.
 */
bool kop_test_eventually(kop_test_cond_fn cond, const void *arg, long timeout_ms);
/* The same, polling every every_ms: for a condition that costs the server
 * real work (listing a thousand objects), so that the test's own polling
 * does not take the cores the operator and kubesim need to converge. */
bool kop_test_eventually_every(kop_test_cond_fn cond, const void *arg, long timeout_ms,
                               long every_ms);

/* ---- a suite's scratch state ------------------------------------------------------------- */

/* What a kubesim-based fixture starts with. */
struct kop_test_scratch {
    char *dir;            /* a fresh temporary directory */
    char ca[512];         /* dir/ca.pem, for kubesim's --ca-out */
    char kubeconfig[512]; /* dir/kubeconfig, for kubesim's --kubeconfig-out */
    CURL *curl;           /* a handle for kop_test_http_options.handle */
};

/* curl_global_init, then a fresh s (aborts the test when the directory
 * cannot be made). */
void kop_test_scratch_init(struct kop_test_scratch *s);

/* Clean up the handle, remove and free the directory, zero s, then
 * curl_global_cleanup. */
void kop_test_scratch_free(struct kop_test_scratch *s);

/* ---- kubesim ----------------------------------------------------------------------------- */

struct kop_test_kubesim_options {
    const char *listen;     /* --listen value, NULL: option not passed */
    const char *kubeconfig; /* --kubeconfig-out path, NULL: not passed */
    const char *ca;         /* --ca-out path, NULL: not passed */
    const char *token;      /* --token value, NULL: not passed */
    char *const *args;      /* further arguments, NULL-terminated, or NULL */
    int timeout_ms;         /* wait for the URL line; 0: 10000 */
    bool lenient_fields;    /* false: --strict-fields, so that every object and
                             * patch kop writes passes the apiserver's strict
                             * decoding (unknown fields are a 400) */
};

struct kop_test_kubesim {
    struct kop_test_proc proc;
    char url[128];         /* "https://127.0.0.1:PORT", the line kubesim prints */
    char kubeconfig[1024]; /* the options' paths and token, "" when not given */
    char ca[1024];
    char token[256];
};

/*
 * Start kubesim (kop_test_bin("kubesim")) with the options' arguments, in
 * the order --listen, --kubeconfig-out, --ca-out, --token, then args, and
 * wait for the line holding its "https://" URL, which is stored in ks->url
 * without the line end. Aborts the test when kubesim cannot be started or
 * prints no URL in time.
 */
void kop_test_kubesim_start(struct kop_test_kubesim *ks, const struct kop_test_kubesim_options *o);

/* kop_test_kubesim_start listening on 127.0.0.1:0 (strict fields), writing
 * its CA and kubeconfig to s's paths, with token and args (may be NULL). */
void kop_test_scratch_kubesim(const struct kop_test_scratch *s, struct kop_test_kubesim *ks,
                              const char *token, char *const *args);

/* Send sig and wait up to timeout_ms (kop_test_stop); returns the wait status. */
int kop_test_kubesim_stop(struct kop_test_kubesim *ks, int sig, int timeout_ms);

/* ---- HTTP -------------------------------------------------------------------------------- */

/* A body collected by kop_test_buf_write: NUL-terminated, malloc'd, or NULL. */
struct kop_test_buf {
    char *p;
    size_t len;
};

/* CURLOPT_WRITEFUNCTION appending to the struct kop_test_buf in userdata. */
size_t kop_test_buf_write(char *data, size_t size, size_t nmemb, void *userdata);

struct kop_test_http_options {
    CURL *handle;      /* reused after curl_easy_reset; NULL: a fresh handle */
    const char *ca;    /* CURLOPT_CAINFO, NULL: curl's default */
    const char *token; /* "Authorization: Bearer <token>", NULL: none */
    const char *ctype; /* "Content-Type: <ctype>", NULL: none */
    long timeout_s;    /* CURLOPT_TIMEOUT, 0: none */
    /*
     * 0: one attempt, its answer returned as it is. N > 0: up to N attempts,
     * 50 ms apart, while the answer is no answer (0), 429 or 5xx; when all of
     * them fail that way the last code is returned with an empty body.
     */
    int attempts;
    const char *header; /* more request header lines ("Accept: ...", several separated by
                         * "\n"), NULL: none */
    size_t body_len;    /* bytes of a binary body (it may hold NULs); 0: strlen(body) */
};

/* An answer collected by kop_test_request. */
struct kop_test_resp {
    long code;     /* HTTP code, 0 when there was no answer */
    CURLcode rc;   /* what curl_easy_perform returned (of the last attempt) */
    char *body;    /* NUL-terminated, malloc'd, "" when there was none */
    size_t len;    /* bytes of body */
    char *headers; /* the response's header lines as received ("Name: v\r\n"...), malloc'd */
};

/* Free r's buffers and zero it. */
void kop_test_resp_free(struct kop_test_resp *r);

/*
 * One request: method (NULL: curl's default, GET or POST with a body) on
 * url, body as the request body when not NULL. CURLOPT_NOSIGNAL is set.
 * Returns the HTTP code, 0 on a transport error. *ret_body (when ret_body is
 * not NULL) gets the response body, malloc'd, "" when there was none.
 */
long kop_test_http(const struct kop_test_http_options *o, const char *method, const char *url,
                   const char *body, char **ret_body);

/*
 * kop_test_http keeping the whole answer: *r gets the code, curl's result,
 * the body and the response header lines (of the last attempt; when every
 * attempt was retried away, body and headers are ""). Free with
 * kop_test_resp_free. Returns r->code.
 */
long kop_test_request(const struct kop_test_http_options *o, const char *method, const char *url,
                      const char *body, struct kop_test_resp *r);

/*
 * A JSON request to base+path with o's settings (PATCH bodies are sent as
 * merge patches): the test fails unless the answer is "want". Returns the
 * parsed body (@ref new, NULL when it is not JSON).
 */
json_t *kop_test_api(const struct kop_test_http_options *o, const char *base, const char *method,
                     const char *path, const char *body, long want);

/*
 * kop_test_request to base+path with o's settings (ctype NULL:
 * application/json, as kop_test_api): the whole answer, whatever its code;
 * the test fails when none came (curl's result is not CURLE_OK). Free with
 * kop_test_resp_free.
 */
struct kop_test_resp kop_test_api_resp(const struct kop_test_http_options *o, const char *base,
                                       const char *method, const char *path, const char *body);

/* GET base+path: the parsed object (@ref new), NULL on 404; any other
 * answer fails the test. */
json_t *kop_test_api_get(const struct kop_test_http_options *o, const char *base, const char *path);

/* ---- Prometheus text ------------------------------------------------------------------------ */

/*
 * The value of the sample line "name_with_labels value" in Prometheus text
 * format (name_with_labels is matched exactly, e.g. `kop_up{a="b"}`; the last
 * such line wins). -1 when there is none.
 */
double kop_test_metric_value(const char *text, const char *name_with_labels);

/*
 * Sum of the samples of the metric family name (lines "name{...} v" and
 * "name v") whose line contains label (NULL: every sample). -1 when there is
 * no such sample.
 */
double kop_test_metric_sum(const char *text, const char *name, const char *label);

/*
 * GET http://127.0.0.1:port/metrics with o's settings (ca, token and ctype
 * are not used): the test fails unless the answer is 200. Returns the text
 * (malloc'd).
 */
char *kop_test_scrape(const struct kop_test_http_options *o, long port);

/*
 * GET http://127.0.0.1:port/metrics with o's settings (ca, token and ctype
 * are not used): the test fails unless the answer is 200. Returns
 * kop_test_metric_sum of the text.
 */
double kop_test_scrape_sum(const struct kop_test_http_options *o, long port, const char *name,
                           const char *label);

/* ---- files, certificates, base64 ------------------------------------------------------------ */

/* "dir/name" (malloc'd). */
char *kop_test_path(const char *dir, const char *name);

/* Standard base64 (with '=' padding) of len bytes of in (malloc'd). */
char *kop_test_base64(const void *in, size_t len);

/* Base64 of a whole file, e.g. a CA as a caBundle (malloc'd). Aborts the
 * test when the file cannot be read. */
char *kop_test_file_base64(const char *path);

/*
 * $KOP_SOURCE_ROOT/manifests/base/NAME with "caBundle: <ca_b64>" inserted
 * before every "service:" line right under "clientConfig:", as cainjector
 * fills the caBundles (a schema property named "service" stays as it is).
 * malloc'd; aborts the test when the file cannot be read.
 */
char *kop_test_manifest_with_ca(const char *name, const char *ca_b64);

/*
 * Development certificates in dir by $KOP_SOURCE_ROOT/scripts/gen-certs.sh
 * (ca.crt, tls.crt, tls.key for the kop-webhook-service names and
 * 127.0.0.1), its output discarded. Aborts the test when it fails.
 */
void kop_test_gen_certs(const char *dir);

/* Development certificates made by kop_test_certs_make. */
struct kop_test_certs {
    char *crt_pem; /* tls.crt */
    char *key_pem; /* tls.key */
    char *ca_b64;  /* ca.crt in base64, as a webhook's caBundle */
};

/* kop_test_gen_certs(dir), then read its files into *c (malloc'd). Aborts
 * the test when one cannot be read. */
void kop_test_certs_make(struct kop_test_certs *c, const char *dir);

/* Free c's buffers and zero it. */
void kop_test_certs_free(struct kop_test_certs *c);

/* ---- kop processes ----------------------------------------------------------------------------
 */

/* The MyResource CRD, v1 only, as JSON: the schema of manifests/base with
 * spec defaults, a status subresource and short name "myr". */
extern const char kop_test_myresource_crd[];

/* The same without the short name. */
extern const char kop_test_myresource_crd_no_short[];

/*
 * Start `kop --webhook-only --cert-dir cert_dir --webhook-port 0` with
 * metrics and health probes off, and wait up to timeout_ms for its "serving
 * webhook" line. *ret_started (when not NULL) is set to true as soon as the
 * process runs, so that a teardown stops it when the wait fails. Returns
 * the kernel-chosen webhook port; aborts the test when kop cannot be
 * started, logs no such line in time or no port.
 */
long kop_test_start_webhook_kop(struct kop_test_proc *p, bool *ret_started, const char *cert_dir,
                                int timeout_ms);

/* The most arguments a struct kop_test_argv holds, its NULL included. */
#define KOP_TEST_ARGV_MAX 48

/* A command line built up by kop_test_kop_argv (or from a zeroed struct,
 * an empty one) and kop_test_argv_add: v[0..n-1] and a NULL at v[n], ready
 * for kop_test_spawn. */
struct kop_test_argv {
    char *v[KOP_TEST_ARGV_MAX];
    size_t n;
};

/*
 * The flags every kop under test starts with: kop_test_bin("kop"),
 * --kubeconfig kubeconfig, --metrics-bind-address 127.0.0.1:0 (a
 * kernel-chosen port, read back with kop_test_logged_port) and
 * --health-probe-bind-address 0 (probes off). Whatever a held is dropped.
 */
void kop_test_kop_argv(struct kop_test_argv *a, const char *kubeconfig);

/* Append the arguments up to a NULL one (the strings are borrowed, not
 * copied). Aborts the test when a would overflow. */
void kop_test_argv_add(struct kop_test_argv *a, ...);

/*
 * Wait up to timeout_ms for p's JSON log line with "msg":"msg" (e.g.
 * "serving metrics") and return its "port". Aborts the test when no such
 * line comes in time or its port is not positive.
 */
long kop_test_logged_port(struct kop_test_proc *p, const char *msg, int timeout_ms);

/* Bytes of p's output so far (to wait for a line logged after now). */
size_t kop_test_output_len(struct kop_test_proc *p);

/* Whether p's output so far contains needle. */
bool kop_test_logged(struct kop_test_proc *p, const char *needle);

/* The string value of "key":"..." in a JSON log line into buf (len bytes,
 * no unescaping). Aborts the test when key is missing or too long. */
void kop_test_log_str(const char *line, const char *key, char *buf, size_t len);

/* A 422 Status (code and body of a reply) whose details.causes are
 * exactly want ("field: message", NULL-terminated), in order, each with
 * the reason its message's start names (FieldValueInvalid for "Invalid
 * value", ...). Aborts the test otherwise. */
void kop_test_assert_causes(long code, const char *body, const char *const *want);

#endif /* KOP_KUBETEST_H */
