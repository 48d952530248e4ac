/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where the API server is and how to authenticate: in-cluster service
 * account files, or a kubeconfig file (YAML or JSON, parsed with libyaml).
 *
 * Lookup order of kop_kubeconfig_load_default() (controller-runtime's):
 *   1. the explicit path (--kubeconfig), when given;
 *   2. $KUBECONFIG: the files of the ':'-separated list, merged as
 *      client-go's ClientConfigLoadingRules.Load (clientcmd/loader.go)
 *      merges them: in list order, empty entries and missing files
 *      skipped, the first file to name a cluster, user or context wins
 *      (the entry is taken whole), current-context from the first file
 *      that sets one; relative paths resolve against the directory of the
 *      file that holds them. A file that exists but cannot be read or is
 *      not a valid kubeconfig is an error. When the list gives nothing
 *      (every file missing or empty), in-cluster is used if possible and
 *      $HOME/.kube/config is NOT read (client-go's
 *      DeferredLoadingClientConfig); else -ENOENT, logged as "invalid
 *      configuration: no configuration has been provided";
 *   3. in-cluster: $KUBERNETES_SERVICE_HOST and $KUBERNETES_SERVICE_PORT
 *      plus <root>/var/run/secrets/kubernetes.io/serviceaccount/{token,
 *      ca.crt,namespace};
 *   4. $HOME/.kube/config.
 *
 * Supported kubeconfig fields: current-context; contexts[].context.{cluster,
 * user,namespace}; clusters[].cluster.{server, certificate-authority,
 * certificate-authority-data, insecure-skip-tls-verify, tls-server-name};
 * users[].user.{token, tokenFile, client-certificate, client-key,
 * client-certificate-data, client-key-data, exec}. Relative file paths are
 * resolved against the kubeconfig's directory, as kubectl does. An empty
 * file is an empty kubeconfig (client-go's Load). A user with
 * only auth-provider credentials is rejected (-ENOTSUP). The server must be
 * an http:// or https:// URL with a host (a bare "host:port" is refused,
 * not guessed). A CA (certificate-authority or -data) together with
 * insecure-skip-tls-verify is refused for an https server (-EINVAL), as
 * client-go's transport.TLSConfigFor refuses it ("specifying a root
 * certificates file with the insecure flag is not allowed").
 * Only regular files are read (a FIFO would block start-up). The files
 * named by certificate-authority, client-certificate and client-key must
 * be readable at load, and tokenFile too when no token is given and the
 * server is https, as client-go reads them when it loads a configuration
 * (clientcmd/validation.go validateClusterInfo and validateAuthInfo;
 * clientcmd/client_config.go for the tokenFile): -ENOENT or -EACCES,
 * logged in client-go's words ("unable to read certificate-authority
 * <path> for <cluster> due to ..."). A tokenFile that is not read may
 * appear later; the client reads it when it needs it.
 * YAML nested deeper than 64 levels or with more than 4096 anchors is
 * refused before libyaml's loader runs (its work on them is quadratic).
 *
 * Errors: load_file and load_default log one line (logger "kubeconfig")
 * naming the source, the path and what is wrong (missing context, cluster
 * or user, bad base64 field, YAML error with its line, ...), never a
 * credential; the caller gets the negative errno.
 *
 * exec (credential plugins, client.authentication.k8s.io/v1 and v1beta1):
 * command, args, env, apiVersion, installHint, interactiveMode and
 * provideClusterInfo are kept in struct kop_exec_config; kop/execcred.h
 * runs the plugin. Validation follows client-go
 * (staging/src/k8s.io/client-go/tools/clientcmd/validation.go): command and
 * apiVersion required, every env entry named, interactiveMode one of Never,
 * IfAvailable, Always and required for v1 (v1beta1 defaults to IfAvailable,
 * clientcmd/api/v1/defaults.go). A command that contains a '/' and is not
 * absolute is resolved against the kubeconfig's directory; a bare name is
 * looked up in $PATH when the plugin runs (clientcmd/loader.go
 * GetAuthInfoFileReferences). With provideClusterInfo the cluster's server,
 * tls-server-name, insecure-skip-tls-verify, certificate-authority(-data)
 * (the file's bytes when a file is named), proxy-url, disable-compression
 * and the extension named "client.authentication.k8s.io/exec" (as "config")
 * are prepared as the ExecCredential's spec.cluster.
 *
 * Thread-safety: the functions are reentrant; a filled struct is read-only
 * afterwards and may be shared.
 */
#ifndef KOP_KUBECONFIG_H
#define KOP_KUBECONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* users[].user.exec.interactiveMode */
enum kop_exec_interactive {
    KOP_EXEC_INTERACTIVE_NEVER = 0,
    KOP_EXEC_INTERACTIVE_IF_AVAILABLE,
    KOP_EXEC_INTERACTIVE_ALWAYS,
};

struct kop_exec_env {
    char *name;
    char *value;
};

/* An exec credential plugin as the kubeconfig names it. */
struct kop_exec_config {
    char *command; /* a path (resolved) or a name looked up in $PATH */
    char **args;   /* n_args strings */
    size_t n_args;
    struct kop_exec_env *env; /* n_env entries, added to kop's environment */
    size_t n_env;
    char *api_version;  /* "client.authentication.k8s.io/v1" or ".../v1beta1" */
    char *install_hint; /* shown when the command is missing, or NULL */
    enum kop_exec_interactive interactive_mode;
    bool provide_cluster_info;
    json_t *cluster; /* spec.cluster when provide_cluster_info, else NULL (owned) */
};

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
    struct kop_exec_config *exec; /* exec credential plugin, or NULL */
};

/*
 * Read a kubeconfig file. context: the context to use (NULL: the file's
 * current-context). Returns 0, -ENOENT (file, context, cluster or user
 * missing, or a file it names), -EACCES (a file it names is not readable),
 * -EINVAL (not a valid kubeconfig: bad YAML, missing or malformed server,
 * bad base64, an invalid exec stanza, a CA with insecure-skip-tls-verify,
 * not a regular file), -EISDIR (a directory), -EFBIG (over 16 MiB),
 * -ENOTSUP (only auth-provider credentials, or an exec apiVersion other
 * than v1/v1beta1), -ENOMEM.
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
 * -EINVAL (KUBERNETES_SERVICE_HOST not a host name or address, or
 * KUBERNETES_SERVICE_PORT not a port 1-65535), -ENOMEM.
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

/* Free an exec configuration and its fields. NULL-safe. */
void kop_exec_config_free(struct kop_exec_config *ec);

/*
 * Standard base64 (with or without padding, whitespace ignored). *ret_buf
 * is malloc'd and NUL-terminated; ret_len may be NULL. Returns 0, -EINVAL
 * (not base64) or -ENOMEM.
 */
int kop_base64_decode(const char *in, size_t len, char **ret_buf, size_t *ret_len);

/* Standard base64 with padding; *ret is malloc'd and NUL-terminated.
 * Returns 0, -EINVAL (len too large to encode) or -ENOMEM. */
int kop_base64_encode(const void *in, size_t len, char **ret);

#endif /* KOP_KUBECONFIG_H */
