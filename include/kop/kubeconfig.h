/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where the API server is and how to authenticate: in-cluster service
 * account files, or a kubeconfig file (YAML or JSON, parsed with libyaml).
 *
 * Lookup order of kop_kubeconfig_load_default() (controller-runtime's):
 *   1. the explicit path (--kubeconfig), when given;
 *   2. $KUBECONFIG: only the FIRST file of a ':'-separated list is read
 *      (kubectl merges them; kop does not);
 *   3. in-cluster: $KUBERNETES_SERVICE_HOST and $KUBERNETES_SERVICE_PORT
 *      plus <root>/var/run/secrets/kubernetes.io/serviceaccount/{token,
 *      ca.crt,namespace};
 *   4. $HOME/.kube/config.
 *
 * Supported kubeconfig fields: current-context; contexts[].context.{cluster,
 * user,namespace}; clusters[].cluster.{server, certificate-authority,
 * certificate-authority-data, insecure-skip-tls-verify, tls-server-name};
 * users[].user.{token, tokenFile, client-certificate, client-key,
 * client-certificate-data, client-key-data}. Relative file paths are
 * resolved against the kubeconfig's directory, as kubectl does. A user with
 * only exec or auth-provider credentials is rejected (-ENOTSUP).
 *
 * Thread-safety: the functions are reentrant; a filled struct is read-only
 * afterwards and may be shared.
 */
#ifndef KOP_KUBECONFIG_H
#define KOP_KUBECONFIG_H

#include <stdbool.h>
#include <stddef.h>

struct kop_kubeconfig {
    char *server;  /* "https://host:port" (no trailing '/') */
    char *ca_file; /* PEM bundle path, or NULL */
    char *ca_data; /* PEM bytes (decoded -data field), or NULL */
    size_t ca_data_len;
    char *cert_file; /* client certificate path, or NULL */
    char *cert_data; /* client certificate PEM, or NULL */
    size_t cert_data_len;
    char *key_file; /* client key path, or NULL */
    char *key_data; /* client key PEM, or NULL */
    size_t key_data_len;
    char *token;           /* bearer token, or NULL (never log it) */
    char *token_file;      /* re-read periodically by the client, or NULL */
    char *tls_server_name; /* SNI / verification name override, or NULL */
    char *namespace;       /* context or service-account namespace, or NULL */
    bool insecure_skip_tls_verify;
    bool in_cluster;
};

/*
 * Read a kubeconfig file. context: the context to use (NULL: the file's
 * current-context). Returns 0, -ENOENT (file, context, cluster or user
 * missing), -EINVAL (not a valid kubeconfig: bad YAML, missing server,
 * bad base64), -ENOTSUP (only exec/auth-provider credentials), -ENOMEM.
 * *ret filled on success (release with kop_kubeconfig_cleanup).
 */
int kop_kubeconfig_load_file(const char *path, const char *context, struct kop_kubeconfig *ret);

/* Same from a buffer; dir: the directory relative paths are resolved
 * against (NULL: the current directory). */
int kop_kubeconfig_load_buffer(const char *data, size_t len, const char *dir, const char *context,
                               struct kop_kubeconfig *ret);

/*
 * In-cluster configuration. root: prefix of the service-account directory
 * (NULL or "" for "/"; tests pass a temporary directory). Reads the
 * environment for KUBERNETES_SERVICE_HOST/PORT. The token is not read here:
 * ret->token_file names it and the client reads (and re-reads) it.
 * Returns 0, -ENOENT (not in a cluster: variables or token file missing),
 * -ENOMEM.
 */
int kop_kubeconfig_in_cluster(const char *root, struct kop_kubeconfig *ret);

/* The lookup order above. explicit_path may be NULL; in_cluster_root as
 * for kop_kubeconfig_in_cluster. Returns 0 or the error of the source that
 * was chosen (-ENOENT when none exists). */
int kop_kubeconfig_load_default(const char *explicit_path, const char *in_cluster_root,
                                struct kop_kubeconfig *ret);

/* Free every field (wiping token and key bytes) and zero the struct.
 * NULL-safe. */
void kop_kubeconfig_cleanup(struct kop_kubeconfig *kc);

/*
 * Standard base64 (with or without padding, whitespace ignored). *ret_buf
 * is malloc'd and NUL-terminated. Returns 0, -EINVAL or -ENOMEM.
 */
int kop_base64_decode(const char *in, size_t len, char **ret_buf, size_t *ret_len);

#endif /* KOP_KUBECONFIG_H */
