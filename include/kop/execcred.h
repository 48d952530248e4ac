/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Exec credential plugins (client.authentication.k8s.io/v1 and v1beta1):
 * the kubeconfig's users[].user.exec, as EKS (aws eks get-token), GKE
 * (gke-gcloud-auth-plugin) and AKS (kubelogin) write it. The semantics are
 * client-go's (staging/src/k8s.io/client-go/plugin/pkg/client/auth/exec/
 * exec.go):
 *
 *  - the command runs with its args, no shell; a bare name is looked up in
 *    $PATH as Go >= 1.19 does (exec.ErrDot): when the first element that
 *    has it is empty or relative (".", "bin"), so that the program found
 *    depends on the working directory, it is refused, not run; a command
 *    with a '/' is used as it is. Its environment is kop's, then the configured env (same name:
 *    the configured value wins), then KUBERNETES_EXEC_INFO, an
 *    ExecCredential of the configured apiVersion whose spec.interactive is
 *    false and whose spec.cluster is set with provideClusterInfo;
 *  - stdin is /dev/null (kop is never interactive: interactiveMode Never
 *    and IfAvailable run the plugin non-interactively, Always fails with
 *    -ENOTSUP); each stderr line is logged (logger "exec-plugin");
 *  - stdout must be an ExecCredential of the configured apiVersion with
 *    status.token, or status.clientCertificateData and clientKeyData (both),
 *    and optionally status.expirationTimestamp (RFC 3339);
 *  - the credential is cached until expirationTimestamp (none: until the
 *    server rejects it); a 401 answered to a request made with the current
 *    credential marks it stale and the next kop_execcred_get() runs the
 *    plugin again (kop_client then retries the request once; client-go
 *    returns that 401 to its caller).
 *
 * kop adds: a timeout (the process group is killed), a bound on stdout, one
 * plugin run at a time per configuration (other threads wait for its result
 * instead of starting their own), and one shared provider per configuration
 * in the process, so the clients built from one kubeconfig share one cache
 * (client-go keeps a global cache keyed by the config too).
 *
 * Metrics: rest_client_exec_plugin_call_total{code,call_status} as
 * client-go counts them (exec/metrics.go): 0/no_error when the plugin
 * exited 0 (whatever it printed), its exit code (-1: killed, also on
 * timeout or too much output)/plugin_execution_error,
 * 1/plugin_not_found_error, 1/client_internal_error.
 *
 * Errors of kop_execcred_get(): -ENOENT (command not found), -EACCES (not
 * executable), -EPERM (found only through an empty or relative $PATH
 * element), -ETIMEDOUT, -EMSGSIZE (stdout over the bound), -EIO
 * (non-zero exit or killed by a signal), -EBADMSG (not an ExecCredential,
 * no or half a credential, bad timestamp, a token with control characters),
 * -EPROTO (another apiVersion than configured), -ENOTSUP (interactiveMode
 * Always), -ENOMEM, -EAGAIN (no process could be started). A message for
 * logs is written to msg.
 *
 * Thread-safety: every function may be called from any thread; a provider
 * is freed when its last reference goes (kop_execcred_unref), a credential
 * likewise (kop_execcred_cred_unref).
 */
#ifndef KOP_EXECCRED_H
#define KOP_EXECCRED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kop_exec_config;
struct kop_execcred;
struct kop_metrics;

struct kop_execcred_options {
    int64_t timeout_ms;          /* one plugin run; 0: 60 s */
    size_t max_output;           /* bytes of stdout; 0: 1 MiB */
    struct kop_metrics *metrics; /* NULL: kop_metrics_global() */
};

/* One credential: immutable once returned; hold it with a reference. */
struct kop_execcred_cred {
    char *token;     /* bearer token, or NULL (never log it) */
    char *cert_data; /* client certificate PEM, or NULL */
    size_t cert_data_len;
    char *key_data; /* client key PEM, or NULL */
    size_t key_data_len;
    int64_t expiry_ms; /* wall clock (Unix ms) it expires at; 0: no expiry */
    int _refs;
};

/*
 * The process-wide provider for this configuration (and options): a new
 * one, or another reference to the one already in use. *cfg is copied.
 * Returns 0, -EINVAL (no command or apiVersion), -ENOMEM.
 */
int kop_execcred_get_shared(const struct kop_exec_config *cfg,
                            const struct kop_execcred_options *opt, struct kop_execcred **ret);

/* Drop a reference; the last one frees the provider. NULL-safe. */
void kop_execcred_unref(struct kop_execcred *p);

/*
 * A valid credential: the cached one unless it is stale or expired at
 * now_ms (wall clock, Unix ms), else the plugin's new one (one run at a
 * time: a thread that finds a run in progress waits for it and gets its
 * result). *ret_cred gets a reference (kop_execcred_cred_unref). On error
 * msg (may be NULL) says why. Blocks up to the timeout (per run).
 */
int kop_execcred_get(struct kop_execcred *p, int64_t now_ms, struct kop_execcred_cred **ret_cred,
                     char *msg, size_t msg_len);

/* True when the caller gave up (its request was cancelled). Any thread. */
typedef bool (*kop_execcred_cancel_fn)(void *ud);

/*
 * kop_execcred_get() that gives up when cancelled(ud) turns true (polled
 * every 100 ms): a waiting thread stops waiting, a thread running the
 * plugin kills it; both return -ECANCELED. Threads that waited for a
 * cancelled run start their own. cancelled may be NULL.
 */
int kop_execcred_get_cancellable(struct kop_execcred *p, int64_t now_ms,
                                 kop_execcred_cancel_fn cancelled, void *cancel_ud,
                                 struct kop_execcred_cred **ret_cred, char *msg, size_t msg_len);

/*
 * The server answered 401 to a request made with used: when used is still
 * the cached credential, it is marked stale so the next get runs the plugin
 * (a credential that was already replaced is left alone: one refresh per
 * rejected credential, however many requests saw the 401).
 */
void kop_execcred_invalidate(struct kop_execcred *p, const struct kop_execcred_cred *used);

/* NULL-safe. Wipes the token and key when the last reference goes. */
void kop_execcred_cred_unref(struct kop_execcred_cred *cred);

/* How many times the plugin was started (tests, logs). */
unsigned long kop_execcred_runs(struct kop_execcred *p);

/*
 * Parse an RFC 3339 timestamp ("2026-01-02T15:04:05Z", fractional
 * seconds and a numeric offset allowed) into Unix ms. Returns 0 or -EINVAL.
 */
int kop_execcred_parse_time(const char *s, int64_t *ret_ms);

#endif /* KOP_EXECCRED_H */
